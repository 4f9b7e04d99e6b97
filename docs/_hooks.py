"""MkDocs hooks: the pages made from the code at build time, so that they cannot drift.

- ``reference/configuration.md``: every option table (see ``_gen_config.py``).
- ``cli.md``: the ``--help`` of every ``kontrakt`` command, taken from the click tree.
- ``reference/errors.md``: the error tree of ``kontrakt.errors`` (API from docstrings) and a
  table of every broker error code.
- In ``operations.md``, the ``<!-- loggers -->`` marker becomes the list of ``kontrakt.*``
  logger names found in the source.
- A ``<!-- README: Title -->`` marker becomes the body of the README's ``## Title`` section
  (``spark.md`` is the README's Spark section, whose example a test runs as written).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

_HERE = Path(__file__).resolve().parent
_ROOT = _HERE.parent
_README_MARKER = re.compile(r"<!-- README: (.+?) -->")
_LOGGER = re.compile(r"""getLogger\(\s*["'](kontrakt(?:\.[\w.]+)?)["']\s*\)""")


def _gen_config() -> Any:
    spec = importlib.util.spec_from_file_location("_kontrakt_docs_gen_config",
                                                  _HERE / "_gen_config.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being made
    spec.loader.exec_module(module)
    return module


def cli_page() -> str:
    """Markdown with the help text of every command and subcommand."""
    import click

    from kontrakt.cli import cli

    out = ["# Command line", "",
           "`kontrakt` comes with the package (`pip install 'kontrakt[cli]'` adds the live",
           "progress display). This page is generated from the commands themselves: each",
           "section is that command's `--help`.", ""]

    def walk(cmd: click.Command, path: list[str], parent: click.Context | None) -> None:
        # As click makes it when the command runs: the group's context_settings (``-h``
        # for help) reach every subcommand through the parent context; 80 columns, as the
        # help reads when piped (the build's own terminal must not change the page).
        settings = {"terminal_width": 80, **cmd.context_settings}
        ctx = click.Context(cmd, info_name=path[-1], parent=parent, **settings)
        name = " ".join(path)
        out.extend([f"{'#' * min(len(path) + 1, 4)} `{name}`", "", "```text",
                    cmd.get_help(ctx), "```", ""])
        if isinstance(cmd, click.Group):
            for sub in sorted(cmd.list_commands(ctx)):
                child = cmd.get_command(ctx, sub)
                if child is not None and not child.hidden:
                    walk(child, [*path, sub], ctx)

    walk(cli, ["kontrakt"], None)
    return "\n".join(out)


def errors_page() -> str:
    """The error reference: Kontrakt's own error classes rendered by mkdocstrings (the
    generated broker classes, re-exported by ``kontrakt.errors`` too, are the table)."""
    import kontrakt.errors as errors
    from kontrakt.protocol.errors import ERRORS_BY_CODE

    own = sorted(name for name in errors.__all__
                 if getattr(getattr(errors, name), "__module__", "") == "kontrakt.errors")
    out = ["# Errors", "",
           "Every exception Kontrakt raises derives from `KontraktError`. `ConfigError` is also",
           "a `ValueError`, and `KafkaTimeoutError` a `TimeoutError`. Each broker error code has",
           "a class of its own (a `BrokerResponseError`), importable from `kontrakt.errors`:",
           "`except TopicAlreadyExistsError` works as it reads.", "",
           "## Broker error codes", "",
           "| Code | Name | Class | Retriable | Meaning |", "| --- | --- | --- | --- | --- |"]
    for code in sorted(ERRORS_BY_CODE):
        cls = ERRORS_BY_CODE[code]
        meaning = (cls.description or "").replace("|", "\\|")
        out.append(f"| {code} | `{cls.error_name}` | `{cls.__name__}` | "
                   f"{'yes' if cls.retriable else 'no'} | {meaning} |")
    out += ["", "## Kontrakt's error classes", "", "::: kontrakt.errors", "    options:",
            "      show_root_heading: false", "      heading_level: 3",
            "      members_order: alphabetical", "      members:"]
    out += [f"        - {name}" for name in own]
    return "\n".join(out) + "\n"


def logger_names() -> list[str]:
    """Every ``kontrakt.*`` logger name the library's source asks for."""
    found: set[str] = set()
    for path in (_ROOT / "kontrakt").rglob("*.py"):
        found.update(_LOGGER.findall(path.read_text(encoding="utf-8")))
    return sorted(found)


def readme_section(title: str) -> str:
    """The body of the README's ``## title`` section, up to the next ``## `` heading.

    Raises:
        ValueError: the README has no such section.
    """
    text = (_ROOT / "README.md").read_text(encoding="utf-8")
    heading = f"\n## {title}\n"
    start = text.find(heading)
    if start < 0:
        raise ValueError(f"README.md has no '## {title}' section")
    body = text[start + len(heading):]
    end = body.find("\n## ")
    return (body if end < 0 else body[:end]).strip("\n")


def with_readme_sections(markdown: str) -> str:
    """``markdown`` with each ``<!-- README: Title -->`` marker replaced by that section."""
    return _README_MARKER.sub(lambda m: readme_section(m.group(1)), markdown)


def on_files(files: Files, config: Any) -> Files:
    gen = _gen_config()
    files.append(File.generated(config, "reference/configuration.md",
                                content=gen.render_reference(gen.option_tables())))
    files.append(File.generated(config, "cli.md", content=cli_page()))
    files.append(File.generated(config, "reference/errors.md", content=errors_page()))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    markdown = with_readme_sections(markdown)
    if "<!-- loggers -->" in markdown:
        rows = ["| Logger | What logs there |", "| --- | --- |"]
        rows += [f"| `{name}` | {_LOGGER_ROLES.get(name, '')} |" for name in logger_names()]
        markdown = markdown.replace("<!-- loggers -->", "\n".join(rows))
    return markdown


# What each logger covers (a name found in the source but missing here still gets its row).
_LOGGER_ROLES = {
    "kontrakt": "the root: set its level to tune or silence every other one",
    "kontrakt.admin": "the admin client (retries, routing to controllers and coordinators)",
    "kontrakt.client": "the network core: metadata, connections, retries",
    "kontrakt.connection": "one broker connection: connects, SASL, failures",
    "kontrakt.consumer.fetcher": "fetching: failed fetches, session resets, offset resets",
    "kontrakt.consumer.group": "group membership: joins, assignments, rebalances, commits",
    "kontrakt.producer": "the producer: batches, retries, idempotence, transactions",
    "kontrakt.registry.server": "the embedded Schema Registry server",
    "kontrakt.spark": "the Spark data source (driver and executors)",
}
