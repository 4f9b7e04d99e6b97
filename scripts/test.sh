#!/usr/bin/env bash
# Set up a virtualenv from scratch and run every check: ruff, mypy --strict, the whole test suite.
# Works on a fresh machine with only python3 and the package registries.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[dev]'
# GSSAPI tests need a real KDC (Debian's krb5-kdc) and the gssapi binding, which compiles
# against libkrb5-dev. Both are best effort: without them those tests skip, saying why.
if ! command -v krb5-config >/dev/null || [ ! -x /usr/sbin/krb5kdc ] \
        || [ ! -x /usr/sbin/kadmin.local ]; then
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            krb5-kdc krb5-admin-server krb5-user libkrb5-dev) >/dev/null 2>&1 \
            || echo "warning: could not install krb5-kdc/libkrb5-dev: GSSAPI tests will skip"
    else
        echo "warning: no apt-get as root: GSSAPI tests skip unless a KDC and gssapi are installed"
    fi
fi
if command -v krb5-config >/dev/null; then
    .venv/bin/python -m pip install --quiet -e '.[gssapi]' \
        || echo "warning: the gssapi package did not build: GSSAPI tests will skip"
fi
# The other supported Pythons' venvs (tests/integration/test_other_pythons.py) are built while
# ruff, mypy and the first tests run: a cold build takes minutes of mostly pip; the test waits
# for this build (a file lock) or reuses a venv it made earlier.
.venv/bin/python tests/integration/_other_pythons.py >.venv-other-pythons.log 2>&1 &
echo "== ruff"
.venv/bin/ruff check kontrakt tests benchmarks examples
echo "== mypy --strict"
.venv/bin/mypy
echo "== pytest"
exec .venv/bin/python -m pytest -q -n 2 --dist loadfile "$@"
