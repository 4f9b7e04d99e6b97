"""The README's quickstart runs exactly as written: its shell commands start the development
broker and registry on the ports it names, then its Python block runs unchanged in a fresh
interpreter (no topic created for it, no setting injected)."""

from __future__ import annotations

import contextlib
import os
import re
import selectors
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
    # Its Tansu child went with it.
    assert not _port_taken(ports[0])
    assert took < 30, f"the quickstart took {took:.1f}s"


def test_dev_broker_command_says_when_its_port_is_taken() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        run = subprocess.run([sys.executable, "-m", "kontrakt.testing", "--port", str(port)],
                             capture_output=True, text=True, env=_env(), timeout=60)
    assert run.returncode == 1
    assert run.stderr.strip() == (f"kontrakt test broker: 127.0.0.1:{port} is already in use "
                                  "(a broker running there already?); choose another with "
                                  "--port")
