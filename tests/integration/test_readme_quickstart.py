"""The README's quickstart runs exactly as written: its shell commands start the development
broker and registry on the ports it names, then its Python block runs unchanged in a fresh
interpreter (no topic created for it, no setting injected)."""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
EXPECTED = "UserSignedUp(user_id='u-1', email='ada@example.com', referrer=None)"


def _quickstart_blocks() -> tuple[list[str], str]:
    text = README.read_text()
    section = text[text.index("## Quickstart"):]
    section = section[:section.index("\n## ", 1)]
    shell = re.search(r"```shell\n(.*?)```", section, re.S)
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert shell is not None and code is not None, "the quickstart has a shell and a Python block"
    commands = [line for line in shell.group(1).splitlines() if line.strip()]
    return commands, code.group(1)


def _port_taken(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # This checkout's kontrakt, whatever is installed.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def _wait_for_line(proc: subprocess.Popen[str], needle: str, timeout: float) -> str:
    """Read ``proc``'s stdout until a line holds ``needle``; fail after ``timeout`` s."""
    assert proc.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while (remaining := deadline - time.monotonic()) > 0:
            if not sel.select(remaining):
                break
            line = proc.stdout.readline()
            if not line:
                break  # exited
            seen.append(line)
            if needle in line:
                return line
    raise AssertionError(f"{proc.args} did not say {needle!r} within {timeout}s; "
                         f"output: {''.join(seen)!r}, status {proc.poll()}")


@contextlib.contextmanager
def _running(command: str) -> Iterator[subprocess.Popen[str]]:
    # The README says "python": the interpreter running these tests.
    argv = command.split()
    assert argv[0] == "python", command
    proc = subprocess.Popen([sys.executable, *argv[1:]], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                            env=_env(), cwd=ROOT)
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)  # both servers stop cleanly on SIGTERM
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        if proc.stdout is not None:
            proc.stdout.close()


def test_quickstart_runs_as_written(tmp_path: Path) -> None:
    commands, code = _quickstart_blocks()
    assert [c.split()[:3] for c in commands] == [
        ["python", "-m", "kontrakt.testing"], ["python", "-m", "kontrakt.registry.server"]]
    ports = [int(p) for c in commands for p in re.findall(r"--port (\d+)", c)]
    assert len(ports) == 2, commands
    busy = [p for p in ports if _port_taken(p)]
    if busy:
        pytest.skip(f"the quickstart's ports {busy} are in use on this machine")

    with _running(commands[0]) as broker, _running(commands[1]) as registry:
        _wait_for_line(broker, "listening on 127.0.0.1:", 60)
        _wait_for_line(registry, "listening on http://127.0.0.1:", 60)
        started = time.monotonic()
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=_env(), cwd=tmp_path, timeout=90)
        took = time.monotonic() - started
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip() == EXPECTED
        # Run again, as a user would: the topic exists by now and the group's offset is
        # committed; the second run reads the second record.
        again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               env=_env(), cwd=tmp_path, timeout=90)
        assert again.returncode == 0, again.stderr
        assert again.stdout.strip() == EXPECTED
    assert broker.returncode == 0, "the broker command stops cleanly on SIGTERM"
    # Its port is free again: the broker went with the command.
    assert not _port_taken(ports[0])
    assert took < 30, f"the quickstart took {took:.1f}s"


@pytest.mark.parametrize("broker", ["cluster", "tansu"])
def test_dev_broker_command_says_when_its_port_is_taken(broker: str) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        run = subprocess.run([sys.executable, "-m", "kontrakt.testing", "--port", str(port),
                              "--broker", broker],
                             capture_output=True, text=True, env=_env(), timeout=60)
    assert run.returncode == 1
    assert run.stderr.strip() == (f"kontrakt test broker: 127.0.0.1:{port} is already in use "
                                  "(a broker running there already?); choose another with "
                                  "--port")


def _spark_block() -> str:
    text = README.read_text()
    section = text[text.index("## Spark\n"):]
    section = section[:section.index("\n## ", 1)]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None, "the Spark section has a Python block"
    return code.group(1)


def _show_rows(out: str, header: str) -> list[list[str]]:
    """The rows of the ``DataFrame.show()`` table whose header line is ``header``."""
    lines = out.splitlines()
    start = lines.index(header) + 2  # header, then the +---+ rule
    rows = []
    for line in lines[start:]:
        if line.startswith("+"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


@pytest.mark.timeout(900)  # one JVM; slow on a busy 2-core machine
def test_spark_section_runs_as_written(tmp_path: Path) -> None:
    """The Spark section's block runs unchanged, once (a JVM costs seconds), against the
    quickstart's broker and registry: it writes 100 orders, reads them back (a grouped sum
    and a filtered read, with filter pushdown on) and copies them."""
    pytest.importorskip("pyspark", reason="needs the spark extra")
    java_home = os.environ.get("JAVA_HOME")
    if shutil.which("java") is None and not (
            java_home and os.path.exists(os.path.join(java_home, "bin", "java"))):
        pytest.skip("the Spark section needs a Java 17+ runtime (java on PATH or JAVA_HOME)")
    from kontrakt import TopicPartition
    from kontrakt.clients.consumer import Consumer

    commands, _ = _quickstart_blocks()
    ports = [int(p) for c in commands for p in re.findall(r"--port (\d+)", c)]
    busy = [p for p in ports if _port_taken(p)]
    if busy:
        pytest.skip(f"the quickstart's ports {busy} are in use on this machine")
    code = _spark_block()
    with _running(commands[0]) as broker, _running(commands[1]) as registry:
        _wait_for_line(broker, "listening on 127.0.0.1:", 60)
        _wait_for_line(registry, "listening on http://127.0.0.1:", 60)
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=_env(), cwd=tmp_path, timeout=600)
        assert run.returncode == 0, run.stderr[-5000:]
        counts = _show_rows(run.stdout, "|partition|count(1)|sum(value.qty)|")
        assert [r[0] for r in counts] == ["0", "1"]
        assert sum(int(r[1]) for r in counts) == 100
        assert sum(int(r[2]) for r in counts) == sum(i % 7 for i in range(100))
        first = _show_rows(run.stdout, "|offset|key|qty|")
        assert [int(r[0]) for r in first] == [0, 1, 2, 3, 4]
        assert all(int(qty) == int(key) % 7 for _, key, qty in first)
        copied = 0
        with Consumer(bootstrap_servers=f"127.0.0.1:{ports[0]}") as consumer:
            consumer.assign([TopicPartition("orders-copy", p) for p in (0, 1)])
            consumer.seek_to_beginning()
            for _ in range(100):
                copied += len(consumer.consume(100, 0.2))
                if copied >= 100:
                    break
        assert copied == 100
