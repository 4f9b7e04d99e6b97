"""``kontrakt schemas``: contract checks, and the registry tasks Confluent's Maven plugin runs
(register, download, test-compatibility) plus get, list and diff.

A folder holds one schema file per subject, ``<subject>.avsc`` / ``.json`` / ``.proto``
(see :mod:`kontrakt.cli._schemas`); references between files become registry references.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from kontrakt.cli._common import (
    EXIT_CHECK_FAILED,
    EXIT_INPUT,
    EXTENSIONS,
    CliError,
    Connection,
    connection_options,
    reported,
)

if TYPE_CHECKING:
    from kontrakt.cli._schemas import LocalSchema

__all__ = ["schemas"]

_LEVELS = ["NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
           "FULL_TRANSITIVE"]
# kontrakt.cli._schemas imports the compatibility engine (and the registry client): commands
# import it when they run, so that ``kontrakt --help`` and the Kafka commands start fast.
_EXT_FOR = {kind: ext for ext, kind in EXTENSIONS.items()}


@contextmanager
def _client(conn: Connection, why: str) -> Iterator[Any]:
    from kontrakt.registry import SchemaRegistryClient

    with SchemaRegistryClient({"url": conn.need_registry(why)}) as client:
        yield client


@click.group()
def schemas() -> None:
    """Schema contracts: check, register, download, compare."""


def _exit_for(reports: list[Any]) -> None:
    if any(r.error for r in reports):
        raise SystemExit(EXIT_INPUT)
    if not all(r.ok for r in reports):
        raise SystemExit(EXIT_CHECK_FAILED)


@schemas.command("check")
@click.argument("folder", default="schemas")
@click.option("--git", "rev", default="HEAD", show_default=True, metavar="REV",
              help="Compare with the files as committed at REV.")
@click.option("--registry", "registry", default=None, metavar="URL",
              help="Compare with the subjects' versions in this Schema Registry instead.")
@click.option("--level", type=click.Choice(_LEVELS, case_sensitive=False), default=None,
              help="Compatibility level (default: BACKWARD for git, the subject's level "
              "for a registry).")
@click.option("--policy", type=click.Choice(["strict", "lenient"], case_sensitive=False),
              default="strict", show_default=True, help="JSON Schema policy.")
@click.option("--header", "headers", multiple=True, metavar="'NAME: VALUE'",
              help="Extra HTTP header for the registry, repeatable.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON report.")
@reported
def check(folder: str, rev: str, registry: str | None, level: str | None, policy: str,
          headers: tuple[str, ...], as_json: bool) -> None:
    """Check each schema file in FOLDER against the previous versions of its subject (git
    history or a registry). Exit 1 when a change is incompatible."""
    from kontrakt.cli._schemas import (
        check_against_git,
        check_against_registry,
        format_report,
        reports_json,
    )

    extra = {}
    for header in headers:
        name, sep, value = header.partition(":")
        if not sep:
            raise CliError(f"--header needs 'Name: value', got {header!r}")
        extra[name.strip()] = value.strip()
    level = level.upper() if level else None
    if registry:
        reports = check_against_registry(Path(folder), registry, level, policy.lower(),
                                         headers=extra)
    else:
        reports = check_against_git(Path(folder), rev, level or "BACKWARD", policy.lower())
    click.echo(reports_json(reports) if as_json else format_report(reports))
    _exit_for(reports)


@schemas.command("test-compatibility")
@connection_options
@click.argument("folder", default="schemas")
@click.option("--level", type=click.Choice(_LEVELS, case_sensitive=False), default=None,
              help="Level to apply (default: each subject's configured level).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON report.")
@reported
def test_compatibility(conn: Connection, folder: str, level: str | None,
                       as_json: bool) -> None:
    """Check FOLDER's schemas against the registry's versions of their subjects (what
    Confluent's Maven plugin calls test-compatibility). Exit 1 when one is incompatible."""
    from kontrakt.cli._schemas import check_against_registry, format_report, reports_json

    url = conn.need_registry("test-compatibility")
    reports = check_against_registry(Path(folder), url, level.upper() if level else None,
                                     "strict")
    click.echo(reports_json(reports) if as_json else format_report(reports))
    _exit_for(reports)


def _dependency_order(folder: dict[str, LocalSchema]) -> list[tuple[str, LocalSchema]]:
    """Files with the files they reference first."""
    by_subject = {Path(rel).stem: (rel, s) for rel, s in folder.items()}
    done: set[str] = set()
    order: list[tuple[str, LocalSchema]] = []

    def visit(subject: str, trail: tuple[str, ...]) -> None:
        if subject in done:
            return
        if subject in trail:
            raise CliError(f"schema references loop: {' -> '.join((*trail, subject))}")
        rel, schema = by_subject[subject]
        for ref in schema.references:
            if ref.subject in by_subject:
                visit(ref.subject, (*trail, subject))
        done.add(subject)
        order.append((rel, schema))

    for subject in sorted(by_subject):
        visit(subject, ())
    return order


@schemas.command("register")
@connection_options
@click.argument("folder", default="schemas")
@click.option("--normalize", is_flag=True, help="Ask the registry to normalize each schema.")
@click.option("--dry-run", is_flag=True, help="Show what would be registered.")
@reported
def register(conn: Connection, folder: str, normalize: bool, dry_run: bool) -> None:
    """Register each schema file in FOLDER under its subject (referenced files first)."""
    from kontrakt.cli._schemas import SchemaSourceError, load_folder
    from kontrakt.registry import Schema, SchemaReference

    try:
        files = load_folder(Path(folder))
    except SchemaSourceError as exc:
        raise CliError(str(exc)) from None
    if not files:
        raise CliError(f"no schema files (*.avsc, *.json, *.proto) in {folder!r}")
    versions: dict[str, int] = {}
    with _client(conn, "register") as client:
        for rel, local in _dependency_order(files):
            subject = Path(rel).stem
            refs = [SchemaReference(r.name, r.subject, versions.get(r.subject, -1))
                    for r in local.references]
            if dry_run:
                click.echo(f"{subject}: would register {rel} ({local.schema_type})")
                continue
            got = client.register_schema_full_response(
                subject, Schema(local.schema_str, local.schema_type, refs), normalize)
            version = got.version
            if version is None:
                version = client.lookup_schema(
                    subject, Schema(local.schema_str, local.schema_type, refs)).version
            versions[subject] = version
            click.echo(f"{subject}: id {got.schema_id} version {version}")


@schemas.command("get")
@connection_options
@click.argument("subject")
@click.option("--version", "version", default="latest", show_default=True)
@click.option("--schema-only", is_flag=True, help="Print only the schema text.")
@reported
def get(conn: Connection, subject: str, version: str, schema_only: bool) -> None:
    """Print one version of SUBJECT (id, version, type, references, schema)."""
    with _client(conn, "get") as client:
        got = client.get_latest_version(subject) if version == "latest" else \
            client.get_version(subject, int(version) if version.isdigit() else version)
    if schema_only:
        click.echo(got.schema.schema_str)
        return
    click.echo(json.dumps({
        "subject": got.subject, "version": got.version, "id": got.schema_id,
        "schemaType": got.schema.schema_type,
        "references": [r.to_dict() for r in got.schema.references],
        "schema": got.schema.schema_str}, indent=2))


@schemas.command("list")
@connection_options
@click.option("--prefix", default=None, help="Only subjects starting with this.")
@click.option("--deleted", is_flag=True, help="Include soft-deleted subjects.")
@reported
def list_subjects(conn: Connection, prefix: str | None, deleted: bool) -> None:
    """List the registry's subjects, one per line."""
    with _client(conn, "list") as client:
        for subject in sorted(client.get_subjects(prefix, deleted)):
            click.echo(subject)


def _pretty(schema_type: str, text: str) -> list[str]:
    if schema_type in ("AVRO", "JSON"):
        try:
            return json.dumps(json.loads(text), indent=2, sort_keys=True).splitlines()
        except ValueError:
            pass
    return text.splitlines()


@schemas.command("diff")
@connection_options
@click.argument("subject")
@click.argument("old", default="-2")
@click.argument("new", default="latest")
@click.option("--level", type=click.Choice(_LEVELS, case_sensitive=False), default="BACKWARD",
              show_default=True, help="Level the compatibility verdict applies.")
@reported
def diff(conn: Connection, subject: str, old: str, new: str, level: str) -> None:
    """A unified diff between two versions of SUBJECT (OLD defaults to the one before the
    latest; NEW may be a version, ``latest`` or a schema file), and whether NEW may follow
    OLD at LEVEL. Exit 1 when it may not."""
    from kontrakt.registry.compatibility import check_compatibility

    with _client(conn, "diff") as client:
        versions = client.get_versions(subject)

        def pick(ref: str) -> tuple[str, Any]:
            path = Path(ref)
            if path.suffix.lower() in EXTENSIONS and path.is_file():
                from kontrakt.registry import Schema

                return ref, Schema(path.read_text(encoding="utf-8"),
                                   EXTENSIONS[path.suffix.lower()])
            if ref == "latest":
                number = versions[-1]
            else:
                try:
                    number = int(ref)
                except ValueError:
                    raise CliError(f"{ref!r} is neither a version nor a schema file") from None
                if number < 0:
                    if -number > len(versions):
                        raise CliError(f"subject {subject} has only {len(versions)} "
                                       "version(s)")
                    number = versions[number]
            got = client.get_version(subject, number)
            return f"{subject} v{got.version}", got.schema

        old_name, old_schema = pick(old)
        new_name, new_schema = pick(new)
    lines = difflib.unified_diff(_pretty(old_schema.schema_type, old_schema.schema_str),
                                 _pretty(new_schema.schema_type, new_schema.schema_str),
                                 old_name, new_name, lineterm="")
    for line in lines:
        click.echo(line)
    if new_schema.references or old_schema.references:
        click.echo(f"(references not checked: {level} verdict skipped)")
        return
    result = check_compatibility(new_schema, [old_schema], level=level.upper())
    if result.is_compatible:
        click.echo(f"{new_name} may follow {old_name} at {level.upper()}")
        return
    click.echo(f"{new_name} may NOT follow {old_name} at {level.upper()}:")
    for message in result.messages:
        click.echo(f"  {message}")
    raise SystemExit(EXIT_CHECK_FAILED)


@schemas.command("download")
@connection_options
@click.argument("folder", default="schemas")
@click.option("-s", "--subject", "subjects", multiple=True,
              help="A subject to download, repeatable (default: every subject).")
@click.option("--prefix", default=None, help="Only subjects starting with this.")
@reported
def download(conn: Connection, folder: str, subjects: tuple[str, ...],
             prefix: str | None) -> None:
    """Write the latest version of subjects to FOLDER as <subject>.avsc / .json / .proto."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    with _client(conn, "download") as client:
        chosen = list(subjects) or sorted(client.get_subjects(prefix))
        for subject in chosen:
            got = client.get_latest_version(subject)
            path = out / f"{subject}{_EXT_FOR[got.schema.schema_type]}"
            text = got.schema.schema_str
            if got.schema.schema_type in ("AVRO", "JSON"):
                try:
                    text = json.dumps(json.loads(text), indent=2)
                except ValueError:
                    pass
            path.write_text(text + ("" if text.endswith("\n") else "\n"), encoding="utf-8")
            click.echo(f"{subject}: version {got.version} -> {path}")
