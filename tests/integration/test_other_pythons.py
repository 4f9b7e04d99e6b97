"""The version-dependent tests, run again under each other supported Python found here.

``test_blocking_timeouts.py`` exists because ``concurrent.futures.TimeoutError`` became the
builtin ``TimeoutError`` in 3.11, and ``tests/unit/test_wait_event.py`` because
``asyncio.wait_for`` changed how it meets a cancellation in 3.12: the interpreter running the
suite covers one version, this covers 3.10, 3.12 and 3.13 where an interpreter is found (on
PATH or under pyenv; a missing one skips, saying so). Each gets a venv made once and reused
while ``pyproject.toml`` is unchanged (``tests/integration/_other_pythons.py``; ``scripts/test.sh``
starts those builds in the background before pytest, and the first test here waits for them).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from tests.integration._other_pythons import VERSIONS, ensure_venv, find_python, run_bounded

pytestmark = pytest.mark.integration

TESTS = ("tests/integration/test_blocking_timeouts.py", "tests/unit/test_wait_event.py")
RUNNING = f"{sys.version_info[0]}.{sys.version_info[1]}"
RUN_TIMEOUT = 300.0  # the two files take ~15 s; the rest is a loaded machine's slack


def _build_and_run(version: str, python: str) -> subprocess.CompletedProcess[str]:
    venv, _ = ensure_venv(version, python)
    # Not this interpreter's paths, nor the xdist worker's identity (the child is no worker).
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "PYTEST_CURRENT_TEST")
           and not k.startswith("PYTEST_XDIST")}
    # The child prints its interpreter's version first, so a wrong venv cannot pass unseen.
    code = ("import sys, pytest; print('python %d.%d' % sys.version_info[:2], flush=True); "
            f"sys.exit(pytest.main(['-q', *{list(TESTS)!r}]))")
    return run_bounded([str(venv), "-c", code], RUN_TIMEOUT, env)


@pytest.fixture(scope="module")
def runs() -> Iterator[dict[str, Future[subprocess.CompletedProcess[str]] | str]]:
    """Per version: the future of its venv build then test run (all started at once: both
    are mostly waiting, on pip or on the tests' broker timeouts), or why it skips."""
    wanted = [v for v in VERSIONS if v != RUNNING]
    found = {v: find_python(v) for v in wanted}
    with ThreadPoolExecutor(max_workers=len(wanted) or 1) as pool:
        futures: dict[str, Future[subprocess.CompletedProcess[str]] | str] = {}
        for version, python in found.items():
            futures[version] = (pool.submit(_build_and_run, version, python) if python else
                                f"no Python {version} here (python{version} on PATH does not "
                                "run, and pyenv has none)")
        yield futures


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("version", VERSIONS)
def test_version_dependent_tests_pass(
        version: str, runs: dict[str, Future[subprocess.CompletedProcess[str]] | str]) -> None:
    if version == RUNNING:
        pytest.skip(f"Python {version} runs the suite itself")
    run = runs[version]
    if isinstance(run, str):
        pytest.skip(run)
    out = run.result()
    report = f"Python {version}:\n{out.stdout[-4000:]}\n{out.stderr[-2000:]}"
    assert out.stdout.startswith(f"python {version}\n"), report
    assert out.returncode == 0, report
    assert " passed" in out.stdout and " failed" not in out.stdout, report
