"""The documentation site builds in strict mode, and its generated pages follow the code.

The build runs ``mkdocs build --strict`` with the project's ``mkdocs.yml`` (the docs extra,
part of dev, installs MkDocs Material and mkdocstrings): a broken cross-reference, a missing
page or a page left out of the nav fails it.
"""

from __future__ import annotations

import html
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from kontrakt.cli import cli
from kontrakt.clients.admin import ADMIN_OPTIONS
from kontrakt.clients.consumer._config import CONSUMER_OPTIONS
from kontrakt.clients.producer._config import PRODUCER_OPTIONS

ROOT = Path(__file__).resolve().parents[2]
# The build takes ~15 s of CPU; on a loaded 2-core machine its wall time can triple.
BUILD_TIMEOUT = 240


def _mkdocs(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config),
         "-d", str(site)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = _mkdocs(ROOT / "mkdocs.yml", out)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}{done.stderr}"
    return out


def _first_column(page: Path) -> set[str]:
    text = page.read_text(encoding="utf-8")
    return {html.unescape(m) for m in re.findall(r"<tr>\s*<td><code>([^<]+)</code></td>", text)}


@pytest.mark.timeout(BUILD_TIMEOUT + 30)
def test_the_configuration_reference_lists_every_client_option(site: Path) -> None:
    listed = _first_column(site / "reference" / "configuration" / "index.html")
    for table in (PRODUCER_OPTIONS, CONSUMER_OPTIONS, ADMIN_OPTIONS):
        missing = sorted(set(table) - listed)
        assert not missing, f"options missing from the configuration reference: {missing}"
    # the registry client's keys are there too (a table not produced would be missed)
    assert {"url", "basic.auth.user.info", "total.timeout.ms"} <= listed


@pytest.mark.timeout(BUILD_TIMEOUT + 30)
def test_every_page_is_built_with_the_api_reference(site: Path) -> None:
    for page in ("getting-started", "typed-events", "contract-tests", "spark", "testing",
                 "security", "operations", "cli", "migrating-from-confluent-kafka",
                 "migrating-from-aiokafka", "migrating-from-kafka-python"):
        assert (site / page / "index.html").is_file(), page
    api = (site / "reference" / "api" / "clients" / "index.html").read_text(encoding="utf-8")
    assert 'id="kontrakt.clients.Consumer.poll"' in api
    errors = (site / "reference" / "errors" / "index.html").read_text(encoding="utf-8")
    assert 'id="kontrakt.errors.KontraktError"' in errors
    assert "<code>TOPIC_ALREADY_EXISTS</code>" in errors
    # every kontrakt.* logger the source asks for has its row on the operations page
    operations = (site / "operations" / "index.html").read_text(encoding="utf-8")
    for path in (ROOT / "kontrakt").rglob("*.py"):
        for name in re.findall(r"""getLogger\(\s*["'](kontrakt[\w.]*)["']""",
                               path.read_text(encoding="utf-8")):
            assert f"<code>{name}</code>" in operations, name


@pytest.mark.timeout(BUILD_TIMEOUT + 30)
def test_the_api_reference_shows_the_methods_a_client_class_inherits(site: Path) -> None:
    # The clients are built in layers (e.g. AsyncKafkaClient over its connections, metadata
    # and coordinator rooms; AsyncAdminClient over its operation groups): their public
    # methods are documented on the class users call, wherever they are defined.
    api = (site / "reference" / "api" / "clients" / "index.html").read_text(encoding="utf-8")
    for member in ("AsyncKafkaClient.start", "AsyncKafkaClient.refresh_metadata",
                   "AsyncKafkaClient.connection", "AsyncKafkaClient.coordinator_connection",
                   "AsyncKafkaClient.request", "AsyncAdminClient.list_consumer_groups"):
        assert f'id="kontrakt.clients.{member}"' in api, member


def _commands(group: click.Group, path: list[str]) -> list[list[str]]:
    out = [path]
    for name in group.list_commands(click.Context(group)):
        sub = group.get_command(click.Context(group), name)
        if isinstance(sub, click.Group):
            out += _commands(sub, [*path, name])
        elif sub is not None:
            out.append([*path, name])
    return out


@pytest.mark.timeout(BUILD_TIMEOUT + 30)
def test_the_command_line_page_has_each_commands_help(site: Path) -> None:
    """Every command's --help, as the command prints it, option lines included."""
    page = html.unescape((site / "cli" / "index.html").read_text(encoding="utf-8"))
    commands = _commands(cli, [])
    assert len(commands) > 20
    runner = CliRunner()
    for path in commands:
        assert f"<code>{' '.join(['kontrakt', *path])}</code>" in page, path
        done = runner.invoke(cli, [*path, "--help"], prog_name="kontrakt", terminal_width=80)
        assert done.exit_code == 0, (path, done.output)
        for line in done.output.splitlines():
            assert line.rstrip() in page, (path, line)


@pytest.mark.timeout(BUILD_TIMEOUT + 30)
def test_a_broken_reference_fails_the_strict_build(tmp_path: Path) -> None:
    """The project's settings (strict, mkdocstrings, autorefs) on one page whose link
    names an object that does not exist: the build must fail naming it."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text(
        "# Broken\n\nSee [`poll`][kontrakt.clients.Consumer.no_such_method].\n",
        encoding="utf-8")
    config = tmp_path / "mkdocs.yml"
    config.write_text(f"INHERIT: {ROOT / 'mkdocs.yml'}\ndocs_dir: {docs}\nhooks: []\n"
                      "nav:\n  - index.md\n", encoding="utf-8")
    done = _mkdocs(config, tmp_path / "site")
    assert done.returncode != 0
    assert "kontrakt.clients.Consumer.no_such_method" in done.stdout + done.stderr


def _hooks() -> Any:
    spec = importlib.util.spec_from_file_location("_kontrakt_docs_hooks",
                                                  ROOT / "docs" / "_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(BUILD_TIMEOUT + 30)
def test_the_spark_page_is_the_readmes_spark_section(site: Path) -> None:
    """docs/spark.md holds no copy of the README's Spark section (whose example
    test_readme_quickstart.py runs): the build puts the section in, so they cannot drift."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("\n## Spark\n") + len("\n## Spark\n"):]
    section = section[:section.index("\n## ")].strip("\n")
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    source = (ROOT / "docs" / "spark.md").read_text(encoding="utf-8")
    assert code.group(1) not in source, "docs/spark.md copies the README's Spark example"
    assert section in _hooks().with_readme_sections(source)
    page = html.unescape((site / "spark" / "index.html").read_text(encoding="utf-8"))
    assert "README:" not in page
    last_line = section.splitlines()[-1]  # prose, which reaches the page as written
    assert last_line.replace("`", "") in re.sub(r"<[^>]+>", "", page), last_line
