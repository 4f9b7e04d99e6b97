"""The column-wise Avro encoder (``AvroColumnEncoder``) writes, byte for byte, what the sink's
row path (``AvroSerializer`` over ``Row`` values) and confluent-kafka's ``AvroSerializer``
write for the same rows: random data of a schema with nulls, unions, nested records,
arrays, maps and logical types, against the embedded registry. No broker, no JVM."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import random
import string
import uuid
import warnings
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="needs the spark extra")

import pyarrow as pa
from fastavro import parse_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from kontrakt.errors import SerializationError
from kontrakt.registry import RuleSet, Schema, SchemaRegistryClient
from kontrakt.serde import MessageField, SerializationContext
from kontrakt.spark._arrow import arrow_type
from kontrakt.spark._avro_encode import AvroColumnEncoder, NoColumnarPlan
from kontrakt.spark._encoders import python_values as _python_values
from kontrakt.spark._encoders import row_encoder as _encoder
from kontrakt.spark._fieldplan import FieldPlan
from kontrakt.spark._types import avro_mapping

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from confluent_kafka import schema_registry as csr
    from confluent_kafka.schema_registry import avro as cavro
    from confluent_kafka.serialization import MessageField as CField
    from confluent_kafka.serialization import SerializationContext as CContext

pytestmark = pytest.mark.filterwarnings("ignore:The httpx module is deprecated")

POINT = {"type": "record", "name": "Point", "namespace": "geo", "fields": [
    {"name": "x", "type": "double"}, {"name": "y", "type": ["null", "float"]}]}
SCHEMA = {"type": "record", "name": "Everything", "namespace": "t", "fields": [
    {"name": "id", "type": "long"},
    {"name": "qty", "type": "int"},
    {"name": "name", "type": "string"},
    {"name": "note", "type": ["null", "string"]},
    {"name": "flag", "type": "boolean"},
    {"name": "ratio", "type": "float"},
    {"name": "blob", "type": "bytes"},
    {"name": "maybe_blob", "type": ["bytes", "null"]},
    {"name": "colour", "type": {"type": "enum", "name": "Colour",
                                "symbols": ["RED", "GREEN", "BLUE"]}},
    {"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 4}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12,
                               "scale": 3}},
    {"name": "fprice", "type": ["null", {"type": "fixed", "name": "Money", "size": 9,
                                         "logicalType": "decimal", "precision": 20,
                                         "scale": 2}]},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "at_ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "at_us", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
    {"name": "local_ms", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    {"name": "local_us", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
    {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "tod", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "where", "type": POINT},
    {"name": "maybe_where", "type": ["null", "geo.Point"]},
    {"name": "counts", "type": {"type": "array", "items": ["null", "int"]}},
    {"name": "grid", "type": {"type": "array", "items": {"type": "array", "items": "long"}}},
    {"name": "attrs", "type": {"type": "map", "values": "geo.Point"}},
    {"name": "tags", "type": ["null", {"type": "map", "values": ["null", "string"]}]},
    {"name": "wide", "type": ["int", "long"]},
    {"name": "wide_first", "type": ["null", "long", "int"]},
    {"name": "real", "type": ["null", "float", "double"]},
    {"name": "either", "type": ["null", "string", "long", "geo.Point",
                                {"type": "array", "items": "string"}]},
    {"name": "nothing", "type": "null"},
]}


def _text(rnd: random.Random) -> str:
    return "".join(rnd.choice(string.ascii_letters + "é€😀") for _ in range(rnd.randrange(12)))


def _value(rnd: random.Random, data_type: DataType, nullable: bool, path: str) -> Any:
    """A random Spark value of ``data_type`` (None sometimes, where nullable)."""
    if nullable and rnd.random() < 0.2:
        return None
    if path == "colour":
        return rnd.choice(["RED", "GREEN", "BLUE"])
    if path == "digest":
        return rnd.randbytes(4)
    if path == "ref":
        return str(uuid.UUID(int=rnd.getrandbits(128)))
    if path == "tod":
        return rnd.randrange(86_400_000)
    if isinstance(data_type, StructType):
        if path == "either":  # a union: one member set
            fields = data_type.fields
            chosen = rnd.randrange(len(fields))
            return {f.name: _value(rnd, f.dataType, False, f"{path}.{f.name}")
                    if i == chosen else None for i, f in enumerate(fields)}
        return {f.name: _value(rnd, f.dataType, f.nullable, f.name) for f in data_type.fields}
    if isinstance(data_type, ArrayType):
        return [_value(rnd, data_type.elementType, data_type.containsNull, path + "[]")
                for _ in range(rnd.choice([0, 0, 1, 3, 7]))]
    if isinstance(data_type, MapType):
        return [(_text(rnd) + str(i), _value(rnd, data_type.valueType,
                                             data_type.valueContainsNull, path + "{}"))
                for i in range(rnd.choice([0, 1, 4]))]
    if isinstance(data_type, LongType):
        return rnd.choice([0, -1, 63, -64, 8191, -8192, 2**31, -(2**31) - 1, 2**63 - 1,
                           -(2**63), rnd.getrandbits(40) - 2**39])
    if isinstance(data_type, IntegerType):
        return rnd.choice([0, 1, -1, 2**31 - 1, -(2**31), rnd.getrandbits(20)])
    if isinstance(data_type, BooleanType):
        return rnd.random() < 0.5
    if isinstance(data_type, (FloatType, DoubleType)):
        return rnd.choice([0.0, -0.0, 1.5, float("inf"), rnd.uniform(-1e6, 1e6)])
    if isinstance(data_type, StringType):
        return _text(rnd)
    if isinstance(data_type, BinaryType):
        return rnd.randbytes(rnd.randrange(20))
    if isinstance(data_type, DecimalType):
        digits = rnd.randrange(data_type.precision + 1)
        unscaled = rnd.randrange(-(10**digits) + 1, 10**digits) if digits else 0
        return decimal.Decimal(unscaled).scaleb(-data_type.scale)
    if isinstance(data_type, DateType):
        return dt.date(1970, 1, 1) + dt.timedelta(days=rnd.randrange(-30_000, 30_000))
    if isinstance(data_type, TimestampType):
        return dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(
            microseconds=rnd.randrange(-10**15, 10**16))
    if isinstance(data_type, TimestampNTZType):
        return dt.datetime(1970, 1, 1) + dt.timedelta(
            microseconds=rnd.randrange(-10**15, 10**16))
    return None  # NullType


def _register(client: SchemaRegistryClient, subject: str, schema: Any) -> tuple[FieldPlan, int]:
    text = json.dumps(schema)
    schema_id = client.register_schema(subject, Schema(text, "AVRO"))
    return FieldPlan("avro", client.get_latest_version(subject).schema), schema_id


def _compare(client: SchemaRegistryClient, registry_url: str, subject: str, schema: Any,
             rows: int, seed: int) -> list[bytes | None]:
    """Encode ``rows`` random rows three ways; assert they agree and return the payloads."""
    plan, schema_id = _register(client, subject, schema)
    data_type = avro_mapping(schema).data_type
    rnd = random.Random(seed)
    values = [_value(rnd, data_type, True, "") if isinstance(data_type, StructType)
              else _value(rnd, data_type, True, "value") for _ in range(rows)]
    column = pa.array(values, arrow_type(data_type))
    encoder = AvroColumnEncoder(parse_schema(schema, expand=True), data_type,
                                b"\0" + schema_id.to_bytes(4, "big"))
    columnar = encoder.encode(column)

    per_row = _encoder(plan, client, {}, subject)
    to_row = _python_values(data_type)
    ctx = SerializationContext("t", MessageField.VALUE, [])
    rowwise = [None if v is None else per_row(v if to_row is None else to_row(v), ctx)
               for v in column.to_pylist()]

    from kontrakt.spark._types import avro_writer

    convert = avro_writer(schema)
    theirs_client = csr.SchemaRegistryClient({"url": registry_url})
    try:
        theirs = cavro.AvroSerializer(
            theirs_client, json.dumps(schema),
            conf={"auto.register.schemas": False, "use.latest.version": True,
                  "subject.name.strategy": lambda ctx, name: subject})
        cctx = CContext("t", CField.VALUE)
        confluent = [None if v is None else theirs(convert(v if to_row is None else to_row(v)),
                                                   cctx)
                     for v in column.to_pylist()]
    finally:
        theirs_client.__exit__(None, None, None)
    for i, (a, b, c) in enumerate(zip(columnar, rowwise, confluent, strict=True)):
        assert a == b == c, (i, values[i])
    return columnar


def test_random_rows_match_the_row_path_and_confluent(
        client: SchemaRegistryClient, registry_url: str) -> None:
    out = _compare(client, registry_url, "avro-encode-everything-value", SCHEMA, 400, 7)
    assert out.count(None) > 40  # tombstones kept in place
    assert len({p for p in out if p is not None}) > 300


@pytest.mark.parametrize("schema", [
    "bytes", "string", "long", ["null", "double"],
    {"type": "array", "items": ["null", POINT]},
    {"type": "map", "values": {"type": "array", "items": "boolean"}},
], ids=["bytes", "string", "long", "null-double", "array", "map"])
def test_top_level_shapes(client: SchemaRegistryClient, registry_url: str, schema: Any) -> None:
    name = json.dumps(schema, sort_keys=True).encode().hex()[:24]
    _compare(client, registry_url, f"avro-encode-top-{name}-value", schema, 60, 3)


def test_sliced_columns_and_chunks() -> None:
    """An Arrow slice (offsets into shared buffers) encodes as the same rows copied."""
    schema = {"type": "record", "name": "S", "fields": [
        {"name": "d", "type": "double"}, {"name": "n", "type": ["null", "string"]},
        {"name": "a", "type": {"type": "array", "items": "long"}},
        {"name": "m", "type": {"type": "map", "values": "int"}},
        {"name": "p", "type": {"type": "bytes", "logicalType": "decimal", "precision": 5,
                               "scale": 1}}]}
    data_type = avro_mapping(schema).data_type
    rnd = random.Random(1)
    values = [_value(rnd, data_type, True, "") for _ in range(50)]
    column = pa.array(values, arrow_type(data_type))
    encoder = AvroColumnEncoder(parse_schema(schema, expand=True), data_type, b"\0\0\0\0\1")
    whole = encoder.encode(column)
    assert encoder.encode(column.slice(13, 20)) == whole[13:33]
    assert encoder.encode(pa.chunked_array([column.slice(0, 7), column.slice(7)])) == whole


def test_bad_values_are_refused_with_the_field() -> None:
    schema = {"type": "record", "name": "B", "fields": [
        {"name": "c", "type": {"type": "enum", "name": "C", "symbols": ["A"]}},
        {"name": "n", "type": "long"}]}
    data_type = avro_mapping(schema).data_type
    encoder = AvroColumnEncoder(parse_schema(schema, expand=True), data_type, b"\0\0\0\0\1")
    with pytest.raises(SerializationError, match="not a symbol"):
        encoder.encode(pa.array([{"c": "Z", "n": 1}], arrow_type(data_type)))
    with pytest.raises(SerializationError, match=r"value\.n: a null"):
        encoder.encode(pa.array([{"c": "A", "n": None}], arrow_type(data_type)))


@pytest.mark.parametrize("schema", [
    ["null", "int", "string", "long"],  # a small long would pass fastavro's int test first
    ["string", {"type": "enum", "name": "E", "symbols": ["S"]}],
    {"type": "fixed", "name": "U", "size": 16, "logicalType": "uuid"},
])
def test_ambiguous_shapes_keep_the_row_path(schema: Any) -> None:
    data_type = avro_mapping(schema).data_type
    with pytest.raises(NoColumnarPlan):
        AvroColumnEncoder(parse_schema(schema, expand=True), data_type, b"\0\0\0\0\1")


def test_the_sink_encodes_avro_column_wise_and_names_a_bad_row(
        client: SchemaRegistryClient, registry_url: str) -> None:
    """The sink's value encoder takes the column path; a value the column path refuses is
    encoded again row by row, whose error names the row and the topic."""
    from pyspark.sql.types import StructField

    from kontrakt.errors import ValueSerializationError
    from kontrakt.spark._options import parse_options
    from kontrakt.spark._writer import _ProduceTask

    schema = {"type": "record", "name": "Pick", "fields": [
        {"name": "c", "type": {"type": "enum", "name": "Hue", "symbols": ["A", "B"]}},
        {"name": "n", "type": ["null", "long"]}]}
    plan, schema_id = _register(client, "avro-encode-sink-value", schema)
    data_type = avro_mapping(schema).data_type
    opts = parse_options({"kafka.bootstrap.servers": "127.0.0.1:9", "topic": "avro-encode-sink",
                          "schema.registry.url": registry_url, "value.format": "avro"},
                         write=True)
    task = _ProduceTask(opts, FieldPlan("binary"), plan,
                        StructType([StructField("value", data_type)]))
    encode = task._column_encoder("value", plan, client, {}, "avro-encode-sink")
    assert not task._row_path
    column = pa.array([{"c": "B", "n": 300}, None, {"c": "A", "n": None}],
                      arrow_type(data_type))
    prefix = b"\0" + schema_id.to_bytes(4, "big")
    assert encode(column, None, None, 0) == [prefix + b"\x02\x02\xd8\x04", None,
                                             prefix + b"\x00\x00"]
    bad = pa.array([{"c": "A", "n": 1}] * 3 + [{"c": "Z", "n": 1}], arrow_type(data_type))
    with pytest.raises(ValueSerializationError, match=r"row 13 .*avro-encode-sink"):
        encode(bad, None, None, 10)


def test_a_schema_with_write_rules_keeps_the_row_path(client: SchemaRegistryClient) -> None:
    """Data-contract rules run on each row's value: the column path is not taken."""
    from kontrakt.spark._avro_encode import avro_column_encoder

    text = json.dumps({"type": "record", "name": "R", "fields": [{"name": "s",
                                                                   "type": "string"}]})
    rules = {"domainRules": [{"name": "upper", "kind": "TRANSFORM", "type": "CEL_FIELD",
                              "mode": "WRITE", "expr": "value"}]}
    client.register_schema("avro-encode-rules-value",
                           Schema(text, "AVRO", rule_set=RuleSet.from_dict(rules)))
    plan = FieldPlan("avro", client.get_latest_version("avro-encode-rules-value").schema)
    data_type = avro_mapping(text).data_type
    assert avro_column_encoder(plan, client, "avro-encode-rules-value", data_type,
                               "value") is None
    client.register_schema("avro-encode-plain-value", Schema(text, "AVRO"))
    plain = FieldPlan("avro", client.get_latest_version("avro-encode-plain-value").schema)
    assert avro_column_encoder(plain, client, "avro-encode-plain-value", data_type,
                               "value") is not None
