#!/usr/bin/env bash
# Set up a virtualenv from scratch and run every check: ruff, mypy --strict, the whole test suite.
# Works on a fresh machine with only python3 and the package registries.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[dev]'
echo "== ruff"
.venv/bin/ruff check kontrakt tests benchmarks examples
echo "== mypy --strict"
.venv/bin/mypy
echo "== pytest"
exec .venv/bin/python -m pytest -q -n 2 --dist loadfile "$@"
