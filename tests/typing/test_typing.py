"""The public path is precisely typed: ``mypy --strict`` accepts typical user code
(user_code.py, with ``assert_type`` on what must be inferred) and reports each mistake in
mistakes.py, where every ``# E: <code>`` comment names an error mypy must give on that line
and no other line may have one.

One mypy run per file, sharing a cache directory under the session's tmp (the first run
analyses kontrakt, ~20 s on a 2-core machine; the second reuses it). mypy runs with the
project's configuration from the repository root, as CI's does.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
ROOT = HERE.parent.parent

pytestmark = pytest.mark.timeout(240)

_EXPECT = re.compile(r"#\s*E:\s*([a-z-]+(?:\s*,\s*[a-z-]+)*)\s*$")
_ERROR = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): error: (?P<msg>.*?)"
                    r"(?:  \[(?P<code>[a-z-]+)\])?$")


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mypy-cache")


def run_mypy(path: Path, cache: Path) -> tuple[int, list[tuple[int, str | None, str]]]:
    """mypy --strict on ``path``: (exit status, [(line, error code, message)])."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(cache),
         "--no-error-summary", "--show-error-codes", "--no-pretty", str(path.relative_to(ROOT))],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=200, check=False)
    errors = []
    for line in proc.stdout.splitlines():
        m = _ERROR.match(line)
        if m:
            errors.append((int(m["line"]), m["code"], m["msg"]))
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr  # 2: mypy itself failed
    return proc.returncode, errors


def expected_errors(path: Path) -> set[tuple[int, str]]:
    out = set()
    for number, text in enumerate(path.read_text().splitlines(), 1):
        m = _EXPECT.search(text)
        if m:
            out.update((number, code.strip()) for code in m[1].split(","))
    return out


def test_typical_user_code_passes_mypy_strict(mypy_cache: Path) -> None:
    status, errors = run_mypy(HERE / "user_code.py", mypy_cache)
    assert errors == [] and status == 0


def test_each_mistake_is_reported(mypy_cache: Path) -> None:
    path = HERE / "mistakes.py"
    expected = expected_errors(path)
    assert len(expected) >= 15  # the file's comments were parsed
    _, errors = run_mypy(path, mypy_cache)
    got = {(line, code or "") for line, code, _ in errors}
    missed = sorted(expected - got)
    unexpected = sorted((line, code, msg) for line, code, msg in errors
                        if (line, code or "") not in expected)
    assert not missed, f"mypy accepted these mistakes (line, code): {missed}"
    assert not unexpected, f"errors no comment expects: {unexpected}"
