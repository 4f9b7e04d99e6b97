"""The ``kontrakt`` command.

Subcommands are grouped (``kontrakt schemas check``). A group registers itself with a function
``register(subparsers)`` that adds its parser and sets ``handler`` (``args -> exit code``) on
the parsed namespace; add new groups to ``_GROUPS``.

Exit codes: 0 success, 1 the check failed (e.g. an incompatible schema), 2 usage or input
errors (bad arguments, unreadable schemas, unreachable registry).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kontrakt.errors import KontraktError

__all__ = ["build_parser", "main"]

Handler = Callable[[argparse.Namespace], int]


def _schemas_check(args: argparse.Namespace) -> int:
    from kontrakt.cli._schemas import (
        check_against_git,
        check_against_registry,
        format_report,
        reports_json,
    )

    folder = Path(args.folder)
    headers = {}
    for header in args.header or []:
        name, sep, value = header.partition(":")
        if not sep:
            raise KontraktError(f"--header needs 'Name: value', got {header!r}")
        headers[name.strip()] = value.strip()
    if args.registry:
        reports = check_against_registry(folder, args.registry, args.level, args.policy,
                                         headers=headers)
    else:
        reports = check_against_git(folder, args.git, args.level or "BACKWARD", args.policy)
    print(reports_json(reports) if args.json else format_report(reports))
    if any(r.error for r in reports):
        return 2
    return 0 if all(r.ok for r in reports) else 1


def _register_schemas(subparsers: Any) -> None:
    group = subparsers.add_parser("schemas", help="schema contract checks")
    commands = group.add_subparsers(dest="schemas_command", metavar="COMMAND")
    commands.required = True
    check = commands.add_parser(
        "check",
        help="check the schemas in a folder against git history or a Schema Registry",
        description="Compare each schema file (<subject>.avsc, .json, .proto) with the "
                    "previous versions of its subject and fail if a change is incompatible.",
    )
    check.add_argument("folder", nargs="?", default="schemas",
                       help="folder holding one schema file per subject (default: schemas)")
    source = check.add_mutually_exclusive_group()
    source.add_argument("--git", metavar="REV", default="HEAD",
                        help="compare with the files as committed at REV (default: HEAD)")
    source.add_argument("--registry", metavar="URL",
                        help="compare with the subjects' versions in this Schema Registry")
    check.add_argument("--level", type=str.upper, default=None,
                       choices=["NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD",
                                "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE"],
                       help="compatibility level (default: BACKWARD for git, the subject's "
                            "configured level for a registry)")
    check.add_argument("--policy", type=str.lower, default="strict",
                       choices=["strict", "lenient"], help="JSON Schema policy")
    check.add_argument("--header", action="append", metavar="'NAME: VALUE'",
                       help="extra HTTP header for the registry (repeatable)")
    check.add_argument("--json", action="store_true", help="print a JSON report")
    check.set_defaults(handler=_schemas_check)


_GROUPS: list[Callable[[Any], None]] = [_register_schemas]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every registered subcommand group."""
    parser = argparse.ArgumentParser(prog="kontrakt", description="Kontrakt command line")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for register in _GROUPS:
        register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``kontrakt`` command.

    Args:
        argv: arguments without the program name (default: ``sys.argv[1:]``).

    Returns:
        The exit code (also what the console script exits with).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args)
    except KontraktError as exc:
        print(f"kontrakt: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
