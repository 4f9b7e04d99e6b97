"""The column-wise Protobuf encoder (``ProtoColumnEncoder``) writes, byte for byte, what the
sink's row path (``proto_writer`` then ``ProtobufSerializer``, itself checked against
confluent-kafka in tests/interop) writes for the same rows: random data of a proto3 message
with every scalar type, implicit and explicit presence, a oneof, nested and repeated
messages, packed and unpacked repeated numbers, enums and the well-known Timestamp and
Duration, against the embedded registry. No broker, no JVM."""

from __future__ import annotations

import datetime as dt
import decimal
import random
import string
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="needs the spark extra")

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DayTimeIntervalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    StructType,
    TimestampType,
)

from kontrakt.errors import SerializationError
from kontrakt.registry import Schema, SchemaRegistryClient
from kontrakt.serde import MessageField, SerializationContext
from kontrakt.spark._arrow import arrow_type
from kontrakt.spark._encoders import python_values as _python_values
from kontrakt.spark._encoders import row_encoder as _encoder
from kontrakt.spark._fieldplan import FieldPlan
from kontrakt.spark._proto_encode import NoColumnarPlan, ProtoColumnEncoder, proto_column_encoder

EVERYTHING = """
syntax = "proto3";
package t;
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
message Everything {
  enum Colour { RED = 0; GREEN = 1; BLUE = 2; }
  sint64 s64 = 6;
  int32 i32 = 1;
  int64 i64 = 2;
  uint32 u32 = 3;
  uint64 u64 = 4;
  sint32 s32 = 5;
  fixed32 f32 = 7;
  fixed64 f64 = 8;
  sfixed32 sf32 = 9;
  sfixed64 sf64 = 10;
  float fl = 11;
  double db = 12;
  bool flag = 13;
  string text = 14;
  bytes blob = 15;
  Colour colour = 16;
  optional int32 maybe = 17;
  optional string maybe_text = 18;
  Inner inner = 19;
  repeated int64 nums = 20;
  repeated string names = 21;
  repeated Inner inners = 22;
  repeated sint32 unpacked = 23 [packed = false];
  repeated double reals = 24;
  google.protobuf.Timestamp at = 25;
  google.protobuf.Duration took = 26;
  oneof choice { string word = 27; int64 count = 28; Inner nested = 29; }
  repeated Colour colours = 30;
  repeated google.protobuf.Timestamp marks = 31;
  optional double maybe_db = 32;
}
message Inner {
  string a = 2;
  int32 b = 1;
  repeated bool bits = 3;
}
"""
_I32 = [0, 1, -1, 127, 128, 2**31 - 1, -(2**31)]
_I64 = [0, 1, -1, 300, 2**63 - 1, -(2**63), 2**40]


def _scalar(rnd: random.Random, name: str, data_type: DataType) -> Any:
    if name in ("colour", "colours"):
        return rnd.choice(["RED", "GREEN", "BLUE", "7"])  # "7": a number a read got
    if name in ("u32", "f32"):
        return rnd.choice([0, 1, 2**32 - 1, 300])
    if name in ("u64", "f64"):
        return decimal.Decimal(rnd.choice([0, 1, 2**64 - 1, 2**63, 300]))
    if isinstance(data_type, IntegerType):
        return rnd.choice(_I32)
    if isinstance(data_type, LongType):
        return rnd.choice(_I64)
    if isinstance(data_type, BooleanType):
        return rnd.random() < 0.5
    if isinstance(data_type, (FloatType, DoubleType)):
        return rnd.choice([0.0, -0.0, 1.5, float("inf"), -2.25])
    if isinstance(data_type, StringType):
        return "".join(rnd.choice(string.ascii_letters + "é😀") for _ in range(rnd.randrange(9)))
    if isinstance(data_type, BinaryType):
        return rnd.randbytes(rnd.randrange(6))
    if isinstance(data_type, TimestampType):
        return dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(
            microseconds=rnd.choice([0, -1, 1, 999_999, -(10**15), 10**16]))
    if isinstance(data_type, DayTimeIntervalType):
        return dt.timedelta(microseconds=rnd.choice([0, -1, 1, -1_500_000, 10**12]))
    raise AssertionError(data_type)


def _value(rnd: random.Random, data_type: DataType, name: str = "") -> Any:
    if isinstance(data_type, StructType):
        out = {}
        for f in data_type.fields:
            out[f.name] = None if rnd.random() < 0.25 else _value(rnd, f.dataType, f.name)
        chosen = [m for m in ("word", "count", "nested") if out.get(m) is not None]
        for extra in chosen[1:]:  # a oneof: at most one member set
            out[extra] = None
        return out
    if isinstance(data_type, ArrayType):
        return [_value(rnd, data_type.elementType, name)
                for _ in range(rnd.choice([0, 1, 3]))]
    return _scalar(rnd, name, data_type)


def _plan(client: SchemaRegistryClient, subject: str, text: str) -> tuple[FieldPlan, int]:
    schema_id = client.register_schema(subject, Schema(text, "PROTOBUF"))
    return FieldPlan("protobuf", client.get_latest_version(subject).schema), schema_id


def test_random_rows_match_the_row_path(client: SchemaRegistryClient) -> None:
    subject = "proto-encode-everything-value"
    plan, schema_id = _plan(client, subject, EVERYTHING)
    data_type = plan.mapping().data_type
    rnd = random.Random(11)
    values = [None if rnd.random() < 0.1 else _value(rnd, data_type) for _ in range(400)]
    column = pa.array(values, arrow_type(data_type))
    encoder = proto_column_encoder(plan, client, subject, "value")
    assert encoder is not None
    columnar = encoder.encode(column)
    per_row = _encoder(plan, client, {}, subject)
    to_row = _python_values(data_type)
    ctx = SerializationContext("t", MessageField.VALUE, [])
    assert to_row is not None
    for i, value in enumerate(column.to_pylist()):
        expected = None if value is None else per_row(to_row(value), ctx)
        assert columnar[i] == expected, (i, values[i])
    assert columnar[0] is not None and columnar[0][:6] == (
        b"\0" + schema_id.to_bytes(4, "big") + b"\0")
    assert columnar.count(None) > 20


def test_bad_values_are_refused() -> None:
    from tests.spark.test_spark_mapping import _proto_descriptor

    desc = _proto_descriptor(EVERYTHING)
    encoder = ProtoColumnEncoder(desc, b"\0\0\0\0\1\0")
    from kontrakt.spark._proto_types import proto_mapping

    kind = arrow_type(proto_mapping(desc).data_type)
    with pytest.raises(SerializationError, match="not a value of enum"):
        encoder.encode(pa.array([{"colour": "PINK"}], kind))
    with pytest.raises(SerializationError, match="oneof 'choice'"):
        encoder.encode(pa.array([{"word": "a", "count": 1}], kind))
    with pytest.raises(SerializationError, match="array element is null"):
        encoder.encode(pa.array([{"nums": [1, None]}], kind))


@pytest.mark.parametrize("text", [
    'syntax = "proto3"; message M { map<string, int32> m = 1; }',
    'syntax = "proto2"; message M { optional int32 a = 1; }',
], ids=["map", "proto2"])
def test_maps_and_proto2_keep_the_row_path(text: str) -> None:
    from tests.spark.test_spark_mapping import _proto_descriptor

    with pytest.raises(NoColumnarPlan):
        ProtoColumnEncoder(_proto_descriptor(text), b"\0\0\0\0\1\0")


def test_the_sink_encodes_protobuf_column_wise_and_names_a_bad_row(
        client: SchemaRegistryClient, registry_url: str) -> None:
    """The sink's value encoder takes the column path; a batch it refuses is encoded again
    row by row, whose error names the row and the topic."""
    from pyspark.sql.types import StructField

    from kontrakt.errors import ValueSerializationError
    from kontrakt.spark._options import parse_options
    from kontrakt.spark._writer import _ProduceTask

    text = 'syntax = "proto3"; message P { enum E { A = 0; B = 1; } E e = 1; int64 n = 2; }'
    plan, schema_id = _plan(client, "proto-encode-sink-value", text)
    data_type = plan.mapping().data_type
    opts = parse_options({"kafka.bootstrap.servers": "127.0.0.1:9", "topic": "proto-encode-sink",
                          "schema.registry.url": registry_url, "value.format": "protobuf"},
                         write=True)
    task = _ProduceTask(opts, FieldPlan("binary"), plan,
                        StructType([StructField("value", data_type)]))
    encode = task._column_encoder("value", plan, client, {}, "proto-encode-sink")
    assert not task._row_path
    prefix = b"\0" + schema_id.to_bytes(4, "big") + b"\0"
    column = pa.array([{"e": "B", "n": 300}, None, {"e": "A", "n": 0}], arrow_type(data_type))
    assert encode(column, None, None, 0) == [prefix + b"\x08\x01\x10\xac\x02", None, prefix]
    bad = pa.array([{"e": "A", "n": 1}] * 2 + [{"e": "Z", "n": 1}], arrow_type(data_type))
    with pytest.raises(ValueSerializationError, match=r"row 7 .*proto-encode-sink"):
        encode(bad, None, None, 5)
