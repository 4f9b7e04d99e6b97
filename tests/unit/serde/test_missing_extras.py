"""A feature whose extra is not installed says which extra to install (serdes, rule executors,
the Spark source, OpenTelemetry, Kerberos, the command line).

Each case runs in a fresh interpreter in which the extra's package cannot be imported
(``sys.modules[name] = None`` makes Python's import fail as if it were not installed).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
_JSON_SER = ("from kontrakt.registry import MockSchemaRegistryClient as R\n"
             "from kontrakt.serde import JSONSerializer as J, MessageField as F, "
             "SerializationContext as C\n"
             "ser = lambda schema: J(schema, R())({'a': 1}, C('t', F.VALUE))\nser")
_SPARK_AVRO = ("parse_options({'kafka.bootstrap.servers': '127.0.0.1:1', 'subscribe': 't', "
               "'schema.registry.url': 'http://127.0.0.1:1', 'value.format': 'avro'})")


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
    # JSON Schema: Kontrakt's own validator needs no extra (draft 7); jsonschema is the
    # fallback for what it does not cover (draft 4 here), and only then is it needed
    ("jsonschema", f"{_JSON_SER}('{{\"type\": \"object\"}}')\nraise RuntimeError('ok')",
     "RuntimeError: ok"),
    ("jsonschema", f"{_JSON_SER}('{{\"$schema\": \"http://json-schema.org/draft-04/"
                   "schema#\", \"type\": \"object\"}')",
     "kontrakt.errors.MissingExtraError: validating with this JSON Schema needs the "
     "'jsonschema' module, which is not installed: pip install 'kontrakt[json]'"),
    ("opentelemetry", "import kontrakt.otel",
     "kontrakt.errors.MissingExtraError: kontrakt.otel needs OpenTelemetry: "
     "pip install 'kontrakt[otel]'"),
    # Kerberos is chosen by configuration: a ConfigError when the client is built
    ("gssapi", "from kontrakt import Producer\nProducer(bootstrap_servers='127.0.0.1:1', "
               "security_protocol='SASL_PLAINTEXT', sasl_mechanism='GSSAPI')",
     "kontrakt.errors.ConfigError: sasl.mechanism=GSSAPI needs the gssapi package "
     "(pip install 'kontrakt[gssapi]';"),
    # the rules engine itself needs no extra: a serde without executors still fails closed
    ("celpy", "import kontrakt.serde.rules, kontrakt.serde.avro; raise RuntimeError('ok')",
     "RuntimeError: ok"),
    # private modules that public code (the CLI, the Spark source) imports directly
    ("google.protobuf", "import kontrakt.serde._proto_schema",
     "kontrakt.errors.MissingExtraError: decoding Protobuf schemas "
     "(kontrakt.serde._proto_schema) needs the 'google.protobuf' module, which is not "
     "installed: pip install 'kontrakt[protobuf]'"),
    ("pyarrow", "import kontrakt.spark",
     "kontrakt.errors.MissingExtraError: kontrakt.spark (PySpark 4 and PyArrow) needs the "
     "'pyarrow' module, which is not installed: pip install 'kontrakt[spark]'"),
    # (a None in sys.modules makes the failed name 'pyspark.sql'; uninstalled, 'pyspark')
    ("pyspark", "from kontrakt.spark._options import parse_options",
     "kontrakt.errors.MissingExtraError: kontrakt.spark (PySpark 4 and PyArrow) needs the "
     "'pyspark.sql' module, which is not installed: pip install 'kontrakt[spark]'"),
    # the spark extra brings no codec: a format's package is checked with the options
    ("fastavro", f"from kontrakt.spark._options import parse_options\n{_SPARK_AVRO}",
     "kontrakt.errors.MissingExtraError: the kontrakt Spark source's avro format needs the "
     "'fastavro' module, which is not installed: pip install 'kontrakt[avro]'"),
    # ...and only the formats asked for
    ("google.protobuf",
     f"from kontrakt.spark._options import parse_options\n{_SPARK_AVRO}\n"
     "raise RuntimeError('ok')", "RuntimeError: ok"),
    # the command line's Avro consumer needs no protobuf
    ("google.protobuf",
     "from kontrakt.cli._common import Connection\nfrom kontrakt.cli._io import _decoder\n"
     "_decoder(Connection('127.0.0.1:1', 'http://127.0.0.1:1', {}), 'avro', 'value', [])\n"
     "raise RuntimeError('ok')", "RuntimeError: ok"),
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


def test_the_command_line_names_the_extra_of_a_format(tmp_path: Path) -> None:
    """``kontrakt produce --format protobuf`` without protobuf: exit 2 and the extra to
    install, before any broker or registry is contacted (none listens on port 1)."""
    proto = tmp_path / "o.proto"
    proto.write_text('syntax = "proto3"; message O { string id = 1; }')
    code = ("import sys\nsys.modules['google.protobuf'] = None\n"
            "from kontrakt.cli import main\n"
            f"sys.exit(main(['produce', 't', '-b', '127.0.0.1:1', '-r', 'http://127.0.0.1:1', "
            f"'--format', 'protobuf', '--schema', {str(proto)!r}]))\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=60, input="")
    assert run.returncode == 2, run.stderr
    assert run.stderr.strip().splitlines()[-1] == (
        "kontrakt: error: the Protobuf serde (kontrakt.serde.protobuf) needs the "
        "'google.protobuf.message' "
        "module, which is not installed: pip install 'kontrakt[protobuf]'"), run.stderr
