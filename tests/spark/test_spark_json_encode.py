"""The column-wise JSON encoder (``JsonColumnEncoder``) writes, byte for byte, what the sink's
row path (``JSONSerializer`` over ``Row`` values, validating each document) and
confluent-kafka's ``JSONSerializer`` write for the same rows: random data of schemas with
nulls, nested objects, arrays, maps, string enums, ``$ref`` and non-ASCII text, against the
embedded registry. What the column path cannot prove valid (a null in a required property,
a null element the items schema refuses, NaN) it refuses, so that the sink takes the row
path for that batch; schemas with keywords it does not prove keep the row path. No
broker, no JVM."""

from __future__ import annotations

import json
import random
import string
import warnings
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="needs the spark extra")

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DoubleType,
    LongType,
    MapType,
    StringType,
    StructType,
)

from kontrakt.errors import SerializationError
from kontrakt.registry import Schema, SchemaRegistryClient
from kontrakt.serde import MessageField, SerializationContext
from kontrakt.spark._arrow import arrow_type
from kontrakt.spark._encoders import python_values, row_encoder
from kontrakt.spark._fieldplan import FieldPlan
from kontrakt.spark._json_encode import JsonColumnEncoder, NoJsonColumnPlan, json_column_encoder
from kontrakt.spark._json_types import json_mapping, json_writer

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from confluent_kafka import schema_registry as csr
    from confluent_kafka.schema_registry import json_schema as cjson
    from confluent_kafka.serialization import MessageField as CField
    from confluent_kafka.serialization import SerializationContext as CContext

pytestmark = pytest.mark.filterwarnings("ignore:The httpx module is deprecated")

POINT = {"type": "object", "properties": {"x": {"type": "number"},
                                          "y": {"type": ["number", "null"]}},
         "required": ["x"]}
SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "Everything",
    "type": "object", "definitions": {"point": POINT},
    "properties": {
        "id": {"type": "integer", "description": "an id"},
        "name": {"type": "string"},
        "note": {"type": ["string", "null"]},
        "flag": {"type": "boolean"},
        "ratio": {"type": "number"},
        "colour": {"enum": ["RED", "GREEN", "BLUE"]},
        "where": {"$ref": "#/definitions/point"},
        "maybe_where": {"oneOf": [{"type": "null"}, {"$ref": "#/definitions/point"}]},
        "counts": {"type": "array", "items": {"type": ["integer", "null"]}},
        "grid": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
        "attrs": {"type": "object", "additionalProperties": {"$ref": "#/definitions/point"}},
        "tags": {"type": "object", "additionalProperties": {"type": ["string", "null"]}},
        "nothing": {"type": "null"},
        # a first property that rows leave out: the object opens with the next one
        "extra": {"type": "object", "properties": {"a": {"type": ["string", "null"]},
                                                   "b": {"type": "integer"}}},
    },
    "required": ["id", "name"],
    "additionalProperties": False,
}
REQUIRED = {"id", "name", "x"}


def _text(rnd: random.Random) -> str:
    return "".join(rnd.choice(string.ascii_letters + "é€😀\"\\\n\t\x01")
                   for _ in range(rnd.randrange(12)))


def _value(rnd: random.Random, data_type: DataType, nullable: bool, path: str) -> Any:
    """A random Spark value of ``data_type`` the schema accepts (None sometimes where it
    admits one)."""
    if nullable and rnd.random() < 0.2:
        return None
    if path == "colour":
        return rnd.choice(["RED", "GREEN", "BLUE"])
    if isinstance(data_type, StructType):
        return {f.name: _value(rnd, f.dataType, f.name not in REQUIRED, f.name)
                for f in data_type.fields}
    if isinstance(data_type, ArrayType):
        inner = path == "counts"
        return [_value(rnd, data_type.elementType, inner, path + "[]")
                for _ in range(rnd.randrange(4))]
    if isinstance(data_type, MapType):
        inner = path == "tags"
        return {_text(rnd): _value(rnd, data_type.valueType, inner, path + "{}")
                for _ in range(rnd.randrange(3))}
    if isinstance(data_type, StringType):
        return _text(rnd)
    if isinstance(data_type, LongType):
        return rnd.choice([0, -1, 1 << 62, -(1 << 63), rnd.randrange(-10**6, 10**6)])
    if isinstance(data_type, DoubleType):
        return rnd.choice([0.0, -0.0, 1e16, 1.5e-300, 0.1, rnd.uniform(-1e6, 1e6)])
    if isinstance(data_type, BooleanType):
        return rnd.random() < 0.5
    return None  # NullType


def _compare(client: SchemaRegistryClient, registry_url: str, subject: str, schema: Any,
             rows: int, seed: int) -> list[bytes | None]:
    """Encode ``rows`` random rows three ways; assert they agree and return the payloads."""
    text = json.dumps(schema)
    schema_id = client.register_schema(subject, Schema(text, "JSON"))
    plan = FieldPlan("json", client.get_latest_version(subject).schema)
    data_type = json_mapping(schema).data_type
    rnd = random.Random(seed)
    values = [_value(rnd, data_type, True, "") for _ in range(rows)]
    column = pa.array(values, arrow_type(data_type))
    encoder = json_column_encoder(plan, client, subject, "value", True)
    assert encoder is not None
    columnar = encoder.encode(column)
    assert columnar[0] is None or columnar[0][:5] == b"\0" + schema_id.to_bytes(4, "big")

    per_row = row_encoder(plan, client, {}, subject)
    to_row = python_values(data_type)
    ctx = SerializationContext("t", MessageField.VALUE, [])
    rows_as_spark = [None if v is None else v if to_row is None else to_row(v)
                     for v in column.to_pylist()]
    rowwise = [None if v is None else per_row(v, ctx) for v in rows_as_spark]

    convert = json_writer(schema)
    theirs_client = csr.SchemaRegistryClient({"url": registry_url})
    try:
        theirs = cjson.JSONSerializer(
            text, theirs_client,
            conf={"auto.register.schemas": False, "use.latest.version": True,
                  "subject.name.strategy": lambda ctx, name: subject})
        cctx = CContext("t", CField.VALUE)
        confluent = [None if v is None else theirs(convert(v), cctx) for v in rows_as_spark]
    finally:
        theirs_client.__exit__(None, None, None)
    for i, (a, b, c) in enumerate(zip(columnar, rowwise, confluent, strict=True)):
        assert a == b == c, (i, values[i])
    return columnar


def test_random_rows_match_the_row_path_and_confluent(
        client: SchemaRegistryClient, registry_url: str) -> None:
    out = _compare(client, registry_url, "json-encode-everything-value", SCHEMA, 400, 7)
    assert out.count(None) > 40  # tombstones kept in place
    assert len({p for p in out if p is not None}) > 300


@pytest.mark.parametrize("schema", [
    {"type": "string"}, {"type": "integer"}, {"type": ["number", "null"]},
    {"type": "array", "items": {"anyOf": [{"type": "null"}, POINT]}},
    {"type": "object", "additionalProperties": {"type": "array",
                                                "items": {"type": "boolean"}}},
], ids=["string", "integer", "null-number", "array", "map"])
def test_top_level_shapes(client: SchemaRegistryClient, registry_url: str, schema: Any) -> None:
    name = json.dumps(schema, sort_keys=True).encode().hex()[:24]
    _compare(client, registry_url, f"json-encode-top-{name}-value", schema, 60, 3)


def _encoder(schema: Any, validate: bool = True) -> tuple[JsonColumnEncoder, pa.DataType]:
    data_type = json_mapping(schema).data_type
    return JsonColumnEncoder(schema, None, b"\0\0\0\0\1", validate), arrow_type(data_type)


def test_sliced_columns_and_chunks() -> None:
    """An Arrow slice (offsets into shared buffers) encodes as the same rows copied."""
    schema = {"type": "object", "properties": {
        "d": {"type": "number"}, "n": {"type": ["string", "null"]},
        "a": {"type": "array", "items": {"type": "integer"}},
        "m": {"type": "object", "additionalProperties": {"type": "integer"}}}}
    encoder, kind = _encoder(schema)
    rnd = random.Random(1)
    values = [None if i % 9 == 4 else
              {"d": rnd.random(), "n": None if i % 3 else _text(rnd),
               "a": [rnd.randrange(100) for _ in range(i % 4)],
               "m": {_text(rnd): i for _ in range(i % 3)}} for i in range(50)]
    column = pa.array(values, kind)
    whole = encoder.encode(column)
    assert encoder.encode(column.slice(13, 20)) == whole[13:33]
    assert encoder.encode(pa.chunked_array([column.slice(0, 7), column.slice(7)])) == whole


def test_what_the_schema_refuses_is_refused_with_the_field() -> None:
    """Each of these documents is invalid for the schema: the column path refuses the
    batch (the sink then encodes it row by row, whose validation names the row)."""
    schema = {"type": "object", "properties": {
        "id": {"type": "integer"}, "c": {"enum": ["A", "B"]},
        "xs": {"type": "array", "items": {"type": "integer"}},
        "m": {"type": "object", "additionalProperties": {"type": "string"}},
        "r": {"type": "number"}}, "required": ["id"]}
    encoder, kind = _encoder(schema)
    good = {"id": 1, "c": "A", "xs": [1], "m": {"k": "v"}, "r": 1.5}
    assert encoder.encode(pa.array([good], kind)) == [
        b'\0\0\0\0\1{"id":1,"c":"A","xs":[1],"m":{"k":"v"},"r":1.5}']
    for bad, message in [({"id": None}, r"value\.id: null in a required"),
                         ({"c": "Z"}, r"value\.c: a string outside"),
                         ({"xs": [1, None]}, r"value\.xs\[\]: a null"),
                         ({"m": {"k": None}}, r"value\.m\{\}: a null"),
                         ({"r": float("nan")}, r"value\.r: NaN")]:
        with pytest.raises(SerializationError, match=message):
            encoder.encode(pa.array([{**good, **bad}], kind))
    # validate=false: no guarantee asked for, the row path's text without validation
    loose, _ = _encoder(schema, validate=False)
    assert loose.encode(pa.array([{**good, "id": None, "r": float("inf")}], kind)) == [
        b'\0\0\0\0\1{"c":"A","xs":[1],"m":{"k":"v"},"r":Infinity}']


@pytest.mark.parametrize("schema", [
    {"type": "integer", "minimum": 0},
    {"type": "string", "pattern": "^a"},
    {"type": "string", "format": "email"},
    {"type": "array", "items": {"type": "integer"}, "minItems": 1},
    {"type": "object", "properties": {"a": {"type": "string"}}, "minProperties": 1},
    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]},
    {"type": "object", "additionalProperties": {"type": "string"},
     "patternProperties": {"^x": {"type": "integer"}}},
    {"oneOf": [{"type": "null"}, {"type": ["string", "null"]}]},
])
def test_schemas_it_cannot_prove_keep_the_row_path(schema: Any) -> None:
    with pytest.raises(NoJsonColumnPlan):
        _encoder(schema)
    _encoder(schema, validate=False)  # without validation, the text alone matters


def test_the_sink_takes_the_column_path_for_simple_schemas_only(
        client: SchemaRegistryClient) -> None:
    """The sink's encoder of a json column: column-wise for a simple schema, and a batch
    it refuses goes to the row path, whose validation names the row; a schema with a
    keyword it does not prove keeps the row path for every batch."""
    from kontrakt.errors import ValueSerializationError
    from kontrakt.spark._encoders import column_encoder

    simple = {"type": "object", "properties": {"id": {"type": "integer"},
                                               "name": {"type": "string"}},
              "required": ["id"]}
    bounded = {**simple, "properties": {**simple["properties"],
                                        "name": {"type": "string", "maxLength": 3}}}
    data_type = json_mapping(simple).data_type
    kind = arrow_type(data_type)
    for subject, schema, row_path in (("json-encode-sink-simple-value", simple, False),
                                      ("json-encode-sink-bounded-value", bounded, True)):
        schema_id = client.register_schema(subject, Schema(json.dumps(schema), "JSON"))
        plan = FieldPlan("json", client.get_latest_version(subject).schema)
        encode, uses_rows = column_encoder("value", plan, client, {}, subject, "t", data_type)
        assert uses_rows is row_path
        headers: list[Any] = [[], []]
        assert encode(pa.array([{"id": 1, "name": "ab"}, None], kind), None, headers, 0) == [
            b"\0" + schema_id.to_bytes(4, "big") + b'{"id":1,"name":"ab"}', None]
        with pytest.raises(ValueSerializationError, match="row 11 of this task"):
            encode(pa.array([{"id": 1}, {"name": "x"}], kind), None, headers, 10)
