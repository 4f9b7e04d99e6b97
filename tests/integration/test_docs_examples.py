"""The documentation's Python examples run as written against a Tansu broker and the
embedded registry (the quickstart's addresses replaced by theirs; the getting-started
page's first block is the README's quickstart, run by test_readme_quickstart.py), and
``examples/demo.py`` runs unchanged with its own broker and registry."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kontrakt.registry import SchemaRegistryClient
from kontrakt.registry.server import RegistryServer
from kontrakt.testing import TansuBroker

pytestmark = pytest.mark.integration

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _blocks(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(encoding="utf-8"), re.S)


@pytest.fixture
def registry() -> Iterator[RegistryServer]:
    server = RegistryServer(port=0).start()
    try:
        yield server
    finally:
        server.stop()


def _run(code: str, broker: TansuBroker, registry: RegistryServer, name: str) -> None:
    code = (code.replace("127.0.0.1:9092", broker.bootstrap_servers)
            .replace("http://127.0.0.1:8081", registry.url))
    # A module of its own, as when the example is a script: dataclasses look it up.
    module = types.ModuleType("__docs_example__")
    sys.modules[module.__name__] = module
    try:
        exec(compile(code, name, "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
        # a script's registry client is closed at exit; here, at the end of the example
        for value in module.__dict__.values():
            if isinstance(value, SchemaRegistryClient):
                value.close()


def test_getting_started_without_a_schema(tansu_broker_factory: Callable[..., TansuBroker],
                                          registry: RegistryServer,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    broker = tansu_broker_factory()
    broker.create_topic("logs", 1)
    _run(_blocks("getting-started.md")[1], broker, registry, "getting-started.md")
    assert capsys.readouterr().out.strip() == "0 0 b'hello'"


def test_getting_started_starts_with_the_readme_quickstart() -> None:
    readme = (DOCS.parent / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Quickstart"):]
    quickstart = re.search(r"```python\n(.*?)```", section, re.S)
    assert quickstart is not None
    assert _blocks("getting-started.md")[0] == quickstart.group(1)


def test_typed_events_example(tansu_broker_factory: Callable[..., TansuBroker],
                              registry: RegistryServer) -> None:
    broker = tansu_broker_factory()
    broker.create_topic("orders", 1)
    _run(_blocks("typed-events.md")[0], broker, registry, "typed-events.md")
    # the value's schema, generated from the dataclass, is under the topic's subject
    with SchemaRegistryClient({"url": registry.url}) as client:
        assert client.get_subjects() == ["orders-value"]


def test_the_demo_runs_as_written() -> None:
    """``examples/demo.py`` as ``scripts/demo.sh`` runs it: its own broker and registry,
    in a fresh interpreter; every step prints what it did, and it stops what it started."""
    root = DOCS.parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(root), os.environ.get("PYTHONPATH")) if p))
    # A session of its own: on a timeout the demo's broker goes with it (killed by group).
    proc = subprocess.Popen([sys.executable, str(root / "examples" / "demo.py")], cwd=root,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"the demo did not finish within 90 s: {out}") from None
    assert proc.returncode == 0, out
    lines = out.splitlines()
    for user in ("u-1", "u-2", "u-3"):
        assert any(line.startswith(f"received key={user!r} value=UserSignedUp(user_id="
                                   f"{user!r}") for line in lines), out
    assert "registry refused an incompatible change: HTTP 409, error code 40901" in out
    assert "local engine agrees: compatible=False" in out
    assert re.search(r"negotiated with 127\.0\.0\.1:\d+: Produce v\d+, Fetch v\d+", out), out
    assert lines[-1] == "broker and registry stopped; done", out
