"""A serde whose extra is not installed says which extra to install.

Each case runs in a fresh interpreter in which the extra's package cannot be imported
(``sys.modules[name] = None`` makes Python's import fail as if it were not installed).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(("blocked", "statement", "message"), [
    ("fastavro", "from kontrakt.serde import AvroSerializer",
     "kontrakt.errors.MissingExtraError: the Avro serde (kontrakt.serde.avro) needs the "
     "'fastavro' module, which is not installed: pip install 'kontrakt[avro]'"),
    ("fastavro", "import kontrakt.serde.avro",
     "kontrakt.errors.MissingExtraError: the Avro serde (kontrakt.serde.avro) needs the "
     "'fastavro' module, which is not installed: pip install 'kontrakt[avro]'"),
    ("google.protobuf", "from kontrakt.serde import ProtobufDeserializer",
     "pip install 'kontrakt[protobuf]'"),
    ("celpy", "from kontrakt.serde.rules.cel import CelExecutor",
     "the CEL rule executor (kontrakt.serde.rules.cel) needs the 'celpy' module, which is "
     "not installed: pip install 'kontrakt[rules]'"),
    ("jsonata", "from kontrakt.serde.rules.jsonata import JsonataExecutor",
     "pip install 'kontrakt[rules]'"),
    # the rules engine itself needs no extra: a serde without executors still fails closed
    ("celpy", "import kontrakt.serde.rules, kontrakt.serde.avro; raise RuntimeError('ok')",
     "RuntimeError: ok"),
])
def test_missing_extra_names_the_extra(blocked: str, statement: str, message: str) -> None:
    code = f"import sys\nsys.modules[{blocked!r}] = None\n{statement}\n"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    assert message in last, run.stderr


def test_missing_extra_error_is_an_import_error_and_a_kontrakt_error() -> None:
    from kontrakt.errors import KontraktError, MissingExtraError

    err = MissingExtraError("m", name="fastavro", extra="avro")
    assert isinstance(err, ModuleNotFoundError) and isinstance(err, KontraktError)
    assert (err.name, err.extra, str(err)) == ("fastavro", "avro", "m")
