#!/usr/bin/env bash
# Set up a virtualenv from scratch and run the main demo (examples/demo.py).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[dev]'
exec .venv/bin/python examples/demo.py "$@"
