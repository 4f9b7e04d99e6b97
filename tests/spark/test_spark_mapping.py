"""The pure parts of the Spark data source, without a JVM: the Avro -> Spark type mapping,
the value converters, and option parsing with its typed errors."""

from __future__ import annotations

import datetime
import decimal
import io
import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="needs the spark extra")

from fastavro import parse_schema, schemaless_reader, schemaless_writer

from kontrakt.errors import ConfigError
from kontrakt.spark import UnsupportedSchemaError, avro_to_spark_type
from kontrakt.spark._options import parse_options
from kontrakt.spark._types import avro_mapping


def _spark(schema: Any) -> str:
    return avro_to_spark_type(json.dumps(schema)).simpleString()


@pytest.mark.parametrize(("schema", "spark"), [
    ("string", "string"),
    ({"type": "int"}, "int"),
    ("long", "bigint"), ("float", "float"), ("double", "double"), ("boolean", "boolean"),
    ("bytes", "binary"), ("null", "void"),
    ({"type": "fixed", "name": "F", "size": 4}, "binary"),
    ({"type": "enum", "name": "E", "symbols": ["A"]}, "string"),
    ({"type": "array", "items": ["null", "long"]}, "array<bigint>"),
    ({"type": "map", "values": {"type": "array", "items": "int"}}, "map<string,array<int>>"),
    (["null", "string"], "string"),
    (["int", "long"], "bigint"), (["null", "float", "double"], "double"),
    (["string", "int", {"type": "record", "name": "R", "fields": []}],
     "struct<member0:string,member1:int,member2:struct<>>"),
    ({"type": "int", "logicalType": "date"}, "date"),
    ({"type": "long", "logicalType": "timestamp-micros"}, "timestamp"),
    ({"type": "long", "logicalType": "local-timestamp-millis"}, "timestamp_ntz"),
    ({"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 10},
     "decimal(38,10)"),
    ({"type": "fixed", "name": "D", "size": 8, "logicalType": "decimal", "precision": 10,
      "scale": 2}, "decimal(10,2)"),
    ({"type": "string", "logicalType": "uuid"}, "string"),
    ({"type": "int", "logicalType": "time-millis"}, "int"),
    ({"type": "string", "logicalType": "no-such-logical-type"}, "string"),
])
def test_avro_types_map_like_spark_from_avro(schema: Any, spark: str) -> None:
    assert _spark(schema) == spark


def test_record_nullability_and_named_type_reuse() -> None:
    schema = {"type": "record", "name": "A", "namespace": "n", "fields": [
        {"name": "b", "type": {"type": "record", "name": "B", "fields": [
            {"name": "x", "type": "int"}]}},
        {"name": "again", "type": ["null", "n.B"]},
        {"name": "same_ns", "type": "B"},
    ]}
    t = avro_to_spark_type(schema)
    assert t.simpleString() == ("struct<b:struct<x:int>,again:struct<x:int>,"
                                "same_ns:struct<x:int>>")
    assert [f.nullable for f in t.fields] == [False, True, False]


@pytest.mark.parametrize(("schema", "match"), [
    ({"type": "record", "name": "L", "fields": [{"name": "next", "type": ["null", "L"]}]},
     r"refers to itself.*at value\.next"),
    ({"type": "bytes", "logicalType": "decimal", "precision": 39, "scale": 0},
     r"decimal\(39, 0\) has no Spark type"),
    ({"type": "record", "name": "R", "fields": [{"name": "x", "type": "Nope"}]},
     "not a valid Avro schema"),
])
def test_unsupported_schemas_raise_typed_errors(schema: Any, match: str) -> None:
    with pytest.raises(UnsupportedSchemaError, match=match) as info:
        avro_to_spark_type(schema)
    assert isinstance(info.value, ConfigError)


def _round_trip(schema: Any, value: Any) -> Any:
    parsed = parse_schema(schema)
    buf = io.BytesIO()
    schemaless_writer(buf, parsed, value)
    buf.seek(0)
    decoded = schemaless_reader(buf, parsed, None, True)
    convert = avro_mapping(schema).convert
    return decoded if convert is None else convert(decoded)


def test_converters_turn_decoded_values_into_spark_values() -> None:
    rec = {"type": "record", "name": "R", "fields": [{"name": "x", "type": "int"}]}
    schema = {"type": "record", "name": "Top", "fields": [
        {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "t", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "opt", "type": ["null", rec]},
        {"name": "multi", "type": ["null", "string", "R", "boolean", "long"]},
        {"name": "arr", "type": {"type": "array", "items": ["null", "R"]}},
        {"name": "m", "type": {"type": "map", "values": ["float", "double"]}},
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 5,
                               "scale": 2}},
    ]}
    ref = uuid.UUID(int=7)
    base = {"u": str(ref), "t": datetime.time(1, 2, 3, 4000), "opt": {"x": 1},
            "arr": [None, {"x": 2}], "m": {"a": 1.5}, "d": decimal.Decimal("1.25")}
    out = [_round_trip(schema, {**base, "multi": m})
           for m in (None, "s", {"x": 3}, True, 9)]
    assert out[0] == (str(ref), 3_723_004, (1,), None, [None, (2,)], {"a": 1.5},
                      decimal.Decimal("1.25"))
    assert [o[3] for o in out] == [None, ("s", None, None, None),
                                   (None, (3,), None, None), (None, None, True, None),
                                   (None, None, None, 9)]


def _options(**extra: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "a, b", **extra}


def test_options_parse_into_typed_values() -> None:
    opts = parse_options({**_options(), "startingOffsets": '{"a": {"0": 5, "1": -2}}',
                          "kafka.client.id": "me", "value.format": "AVRO",
                          "schema.registry.url": "http://127.0.0.1:1",
                          "schema.registry.basic.auth.user.info": "u:p",
                          "maxOffsetsPerTrigger": "10"})
    assert opts.topics == ("a", "b")
    assert opts.starting == {"a": {0: 5, 1: -2}} and opts.ending == "latest"
    assert opts.kafka == {"bootstrap.servers": "127.0.0.1:9092", "client.id": "me"}
    assert opts.registry == {"url": "http://127.0.0.1:1", "basic.auth.user.info": "u:p"}
    assert (opts.key_format, opts.value_format) == ("binary", "avro")
    assert opts.max_offsets_per_trigger == 10
    assert opts.subject(False, "a") == "a-value" and opts.subject(True, "b") == "b-key"
    assert opts.consumer_config()["enable.auto.commit"] is False


@pytest.mark.parametrize(("options", "match"), [
    ({"kafka.bootstrap.servers": " "}, "'kafka.bootstrap.servers' is required"),
    ({"subscribe": ""}, "'subscribe' is required"),
    ({"key.format": "xml"}, "'key.format' must be one of avro, json, protobuf"),
    ({"value.format": "avro"}, "'schema.registry.url' is required"),
    ({"startingOffsets": "first"}, "startingOffsets must be earliest, latest or JSON"),
    ({"startingOffsets": '{"c": {"0": 1}}'}, "names topic 'c', which is not subscribed"),
    ({"startingOffsets": '{"a": {"x": 1}}'}, "partition 'x' of 'a' is not a number"),
    ({"startingOffsets": '{"a": {"0": -3}}'}, "must be an integer >= 0"),
    ({"endingOffsets": "earliest"}, "endingOffsets cannot be earliest"),
    ({"endingOffsets": '{"a": {"0": -2}}'}, "endingOffsets cannot be earliest"),
    ({"maxOffsetsPerTrigger": "0"}, "must be a positive integer"),
    ({"kafka.enable.auto.commit": "true"}, "manages enable.auto.commit itself"),
    ({"subscrib": "x"}, "unknown option 'subscrib'.*did you mean subscribe"),
    ({"includeHeaders": "no"}, "'includeheaders' must be true or false"),
])
def test_bad_options_raise_config_error(options: dict[str, str], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_options(_options(**options))


def test_streaming_and_write_specific_options() -> None:
    with pytest.raises(ConfigError, match="endingOffsets' is for batch"):
        parse_options(_options(endingOffsets="latest"), streaming=True)
    from pyspark.sql.types import StringType, StructField, StructType

    from kontrakt.spark._writer import plan_write

    no_topic = parse_options(_options(), write=True)
    assert no_topic.topics == ()  # each row's topic column names its topic
    with pytest.raises(ConfigError, match="'topic' or a 'topic' column is required"):
        plan_write(no_topic, StructType([StructField("value", StringType())]))
    with pytest.raises(ConfigError, match="one topic"):
        parse_options(_options(topic="x,y"), write=True)
    assert parse_options(_options(topic="x"), write=True).topics == ("x",)


def test_cap_offsets_shares_the_budget_by_backlog() -> None:
    from kontrakt import TopicPartition as TP
    from kontrakt.spark._stream import cap_offsets

    a, b, c = TP("t", 0), TP("t", 1), TP("t", 2)
    start = {a: 0, b: 10, c: 5}
    end = {a: 6, b: 13, c: 5}
    assert cap_offsets(start, end, 100) == end
    assert cap_offsets(start, end, 3) == {a: 2, b: 11, c: 5}
    assert cap_offsets(start, end, 1) == {a: 1, b: 10, c: 5}  # progress even when 1 < share


PERSON = {
    "type": "object", "title": "Person",
    "definitions": {"Addr": {"type": "object", "properties": {
        "city": {"type": "string"}, "zip": {"type": ["null", "string"]}}}},
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "score": {"type": "number"},
        "ok": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "extra": {"type": "object", "additionalProperties": {"type": "number"}},
        "home": {"$ref": "#/definitions/Addr"},
        "work": {"oneOf": [{"type": "null"}, {"$ref": "#/definitions/Addr"}]},
        "plan": {"enum": ["FREE", "PRO"]},
    },
}


def test_json_schema_maps_to_spark_struct_and_converts_documents() -> None:
    from kontrakt.spark._json_types import json_mapping

    m = json_mapping(json.dumps(PERSON))
    assert m.data_type.simpleString() == (
        "struct<name:string,age:bigint,score:double,ok:boolean,tags:array<string>,"
        "extra:map<string,double>,home:struct<city:string,zip:string>,"
        "work:struct<city:string,zip:string>,plan:string>")
    assert m.convert is not None
    doc = {"name": "a", "age": 3, "score": 2, "tags": ["x"], "extra": {"k": 1},
           "home": {"city": "c"}, "plan": "PRO"}
    assert m.convert(doc) == ("a", 3, 2.0, None, ["x"], {"k": 1.0}, ("c", None), None, "PRO")


def test_json_writer_inverts_the_json_mapping() -> None:
    from pyspark.sql import Row

    from kontrakt.spark._json_types import json_mapping, json_writer

    row = Row(name="a", age=3, score=2.0, ok=None, tags=["x", None],
              extra={"k": 1.0, "gone": None}, home=Row(city="c", zip=None), work=None,
              plan="PRO")
    doc = json_writer(json.dumps(PERSON))(row)
    # null properties are left out, null map values and array elements stay
    assert doc == {"name": "a", "age": 3, "score": 2.0, "tags": ["x", None],
                   "extra": {"k": 1.0, "gone": None}, "home": {"city": "c"}, "plan": "PRO"}
    convert = json_mapping(PERSON).convert
    assert convert is not None
    assert convert(doc) == ("a", 3, 2.0, None, ["x", None], {"k": 1.0, "gone": None},
                            ("c", None), None, "PRO")
    assert json_writer({"type": "string"})("s") == "s"
    assert json_writer(PERSON)(None) is None


def test_json_writer_refuses_what_json_mapping_refuses() -> None:
    from kontrakt.spark._json_types import json_writer

    with pytest.raises(UnsupportedSchemaError, match="refers to itself"):
        json_writer({"type": "object", "properties": {"next": {"$ref": "#"}}})


@pytest.mark.parametrize(("schema", "match"), [
    ({"type": ["string", "integer"]}, "several non-null types"),
    ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, "several non-null schemas"),
    ({"type": "object", "properties": {"next": {"$ref": "#"}}}, "refers to itself"),
    ({"$ref": "other.json#/x"}, "names no schema reference"),
    ({"type": "object"}, "needs 'properties' or an 'additionalProperties'"),
    ({}, "type None has no Spark type"),
])
def test_unsupported_json_schemas(schema: Any, match: str) -> None:
    from kontrakt.spark._json_types import json_mapping

    with pytest.raises(UnsupportedSchemaError, match=match):
        json_mapping(schema)


PROTO = """
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Order {
  enum Kind { UNKNOWN = 0; RUSH = 1; }
  message Line { string sku = 1; uint32 qty = 2; }
  int64 id = 1;
  string name = 2;
  Kind kind = 3;
  repeated Line lines = 4;
  map<string, int32> attrs = 5;
  optional double ratio = 6;
  uint64 big = 7;
  bytes blob = 8;
  google.protobuf.Timestamp at = 9;
  oneof pick { string text = 10; sint32 num = 11; }
  repeated string tags = 12;
}
"""


def _proto_descriptor(text: str) -> Any:
    from kontrakt.serde._proto_schema import message_by_indexes
    from kontrakt.serde.protobuf import _ProtobufDeserializerCore

    return message_by_indexes(_ProtobufDeserializerCore.build(text, []), (0,))


def test_protobuf_message_maps_to_spark_struct_and_converts_messages() -> None:
    from google.protobuf.message_factory import GetMessageClass

    from kontrakt.spark._proto_types import proto_mapping

    desc = _proto_descriptor(PROTO)
    m = proto_mapping(desc)
    assert m.data_type.simpleString() == (
        "struct<id:bigint,name:string,kind:string,lines:array<struct<sku:string,qty:bigint>>,"
        "attrs:map<string,int>,ratio:double,big:decimal(20,0),blob:binary,"
        "at:timestamp,text:string,num:int,tags:array<string>>")
    cls = GetMessageClass(desc)
    msg = cls(id=7, name="n", kind=1, attrs={"a": 1}, big=2**64 - 1, blob=b"\x00",
              num=-3, tags=["x"])
    msg.lines.add(sku="s", qty=2)
    assert m.convert is not None
    assert m.convert(cls.FromString(msg.SerializeToString())) == (
        7, "n", "RUSH", [("s", 2)], {"a": 1}, None, decimal.Decimal(2**64 - 1), b"\x00",
        None, None, -3, ["x"])
    empty = m.convert(cls())
    assert empty == (0, "", "UNKNOWN", [], {}, None, decimal.Decimal(0), b"", None, None,
                     None, [])


def test_proto_writer_inverts_the_proto_mapping() -> None:
    from pyspark.sql import Row

    from kontrakt.spark._proto_types import proto_mapping, proto_writer

    desc = _proto_descriptor(PROTO)
    row = Row(id=7, name="n", kind="RUSH", lines=[Row(sku="s", qty=2), Row(sku=None, qty=None)],
              attrs={"a": 1}, ratio=None, big=decimal.Decimal(2**64 - 1),
              blob=bytearray(b"\x00"), at=_utc(1970, 1, 1, 0, 0, 5), text=None, num=-3,
              tags=["x"])
    msg = proto_writer(desc)(row)
    assert not msg.HasField("ratio") and msg.WhichOneof("pick") == "num"
    convert = proto_mapping(desc).convert
    assert convert is not None
    assert convert(type(msg).FromString(msg.SerializeToString())) == (
        7, "n", "RUSH", [("s", 2), ("", 0)], {"a": 1}, None, decimal.Decimal(2**64 - 1),
        b"\x00", _utc(1970, 1, 1, 0, 0, 5), None, -3, ["x"])
    assert proto_writer(desc)(None) is None
    assert convert(proto_writer(desc)(Row(ratio=0.0))).count(None) == 3  # at, text, num


@pytest.mark.parametrize(("fields", "match"), [
    ({"kind": "NOPE"}, r"value\.kind: 'NOPE' is not a value of enum shop\.Order\.Kind"),
    ({"text": "a", "num": 1}, r"value\.num: oneof 'pick' has 'text' set already"),
    ({"tags": ["a", None]}, r"value\.tags: an array element is null"),
    ({"attrs": {"k": None}}, r"value\.attrs: the map value for key 'k' is null"),
    ({"lines": [{"sku": 1}]}, r"value\.lines\[\]\.sku: "),
])
def test_proto_writer_names_the_field_that_does_not_fit(fields: dict[str, Any],
                                                        match: str) -> None:
    from kontrakt.spark._proto_types import proto_writer

    with pytest.raises(ValueError, match=match):
        proto_writer(_proto_descriptor(PROTO))(fields)


def _utc(*args: int) -> datetime.datetime:
    return datetime.datetime(*args, tzinfo=datetime.timezone.utc)


CLOCK = """
syntax = "proto3";
package clock;
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
message Span {
  message Stamp { int64 seconds = 1; int32 nanos = 2; }
  message Inner { google.protobuf.Timestamp at = 1; google.protobuf.Duration took = 2; }
  google.protobuf.Timestamp start = 1;
  google.protobuf.Duration took = 2;
  repeated google.protobuf.Timestamp marks = 3;
  map<string, google.protobuf.Duration> laps = 4;
  Inner inner = 5;
  repeated Inner inners = 6;
  map<int32, google.protobuf.Timestamp> stamps = 7;
  Stamp own = 8;
}
"""
CLOCK_SPARK = (
    "struct<start:timestamp,took:interval day to second,marks:array<timestamp>,"
    "laps:map<string,interval day to second>,"
    "inner:struct<at:timestamp,took:interval day to second>,"
    "inners:array<struct<at:timestamp,took:interval day to second>>,"
    "stamps:map<int,timestamp>,own:struct<seconds:bigint,nanos:int>>")


def test_timestamp_and_duration_map_to_spark_time_types_by_full_name() -> None:
    from kontrakt.spark._proto_types import proto_mapping

    # Span.Stamp has Timestamp's shape but not its name: it stays a struct.
    assert proto_mapping(_proto_descriptor(CLOCK)).data_type.simpleString() == CLOCK_SPARK


def test_timestamps_and_durations_read_as_datetimes_and_timedeltas() -> None:
    from google.protobuf.message_factory import GetMessageClass

    from kontrakt.spark._proto_types import proto_mapping

    desc = _proto_descriptor(CLOCK)
    cls = GetMessageClass(desc)
    msg = cls()
    msg.start.seconds, msg.start.nanos = 1_700_000_000, 123_456_789  # nanos truncated
    msg.took.seconds, msg.took.nanos = -1, -500_000_999  # towards zero: -1.500000 s
    for seconds, nanos in ((-1, 999_999_999), (-62_135_596_800, 0), (253_402_300_799, 0)):
        mark = msg.marks.add()  # just before 1970, and the first and last second allowed
        mark.seconds, mark.nanos = seconds, nanos
    msg.laps["a"].seconds = 90
    msg.laps["zero"].SetInParent()
    msg.inner.took.nanos = 1_999  # inner.at unset
    msg.inners.add().at.seconds = 86_400
    msg.stamps[3].nanos = 1_000
    msg.own.seconds = 5
    convert = proto_mapping(desc).convert
    assert convert is not None
    assert convert(cls.FromString(msg.SerializeToString())) == (
        _utc(2023, 11, 14, 22, 13, 20, 123_456),
        -datetime.timedelta(seconds=1, microseconds=500_000),
        [_utc(1969, 12, 31, 23, 59, 59, 999_999), _utc(1, 1, 1),
         _utc(9999, 12, 31, 23, 59, 59)],
        {"a": datetime.timedelta(minutes=1, seconds=30), "zero": datetime.timedelta(0)},
        (None, datetime.timedelta(microseconds=1)),
        [(_utc(1970, 1, 2), None)],
        {3: _utc(1970, 1, 1, 0, 0, 0, 1)},
        (5, 0))
    # protobuf's own conversions agree (it truncates towards zero too)
    assert convert(msg)[0] == msg.start.ToDatetime(datetime.timezone.utc)
    assert convert(msg)[1] == msg.took.ToTimedelta()
    assert convert(cls()) == (None, None, [], {}, None, [], {}, None)


def test_a_timestamp_outside_its_range_names_its_field_on_read() -> None:
    from google.protobuf.message_factory import GetMessageClass

    from kontrakt.spark._proto_types import proto_mapping

    desc = _proto_descriptor(CLOCK)
    msg = GetMessageClass(desc)()
    msg.inners.add().at.seconds = 253_402_300_800  # year 10000
    convert = proto_mapping(desc).convert
    assert convert is not None
    with pytest.raises(ValueError, match=r"value\.inners\[\]\.at: 253402300800 seconds is "
                                         r"outside the range of a google\.protobuf\.Timestamp"):
        convert(msg)


@pytest.fixture
def local_zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """Sets this process's local time zone (TZ), as a Spark worker's would be."""
    import time

    def use(zone: str) -> None:
        monkeypatch.setenv("TZ", zone)
        time.tzset()
    yield use
    monkeypatch.undo()
    time.tzset()


def test_proto_writer_sets_timestamps_and_durations(
        local_zone: Callable[[str], None]) -> None:
    from google.protobuf.message_factory import GetMessageClass

    from kontrakt.spark._proto_types import proto_mapping, proto_writer

    desc = _proto_descriptor(CLOCK)
    cls = GetMessageClass(desc)
    local_zone("UTC")
    plus_two = datetime.timezone(datetime.timedelta(hours=2))
    value = {
        "start": datetime.datetime(1969, 7, 20, 20, 17, 40, 5),  # naive: the worker's UTC
        "took": datetime.timedelta(days=-2, microseconds=1),  # -1 day 23:59:59.999999
        "marks": [datetime.datetime(2024, 1, 1, 2, tzinfo=plus_two), _utc(1, 1, 1)],
        "laps": {"a": datetime.timedelta(hours=1), "b": datetime.timedelta(0)},
        "inner": {"at": None, "took": datetime.timedelta(microseconds=-7)},
        "inners": [{"at": _utc(2000, 2, 29), "took": None}],
        "stamps": {1: _utc(9999, 12, 31, 23, 59, 59, 999_999)},
        "own": None,
    }
    msg = proto_writer(desc)(value)
    assert (msg.start.seconds, msg.start.nanos) == (-14_182_940, 5_000)
    # a negative Duration has seconds and nanos of the same sign
    assert (msg.took.seconds, msg.took.nanos) == (-172_799, -999_999_000)
    assert [(m.seconds, m.nanos) for m in msg.marks] == [(1_704_067_200, 0),
                                                         (-62_135_596_800, 0)]
    assert (msg.laps["a"].seconds, msg.laps["b"].seconds) == (3600, 0)
    assert not msg.inner.HasField("at") and msg.inner.took.nanos == -7_000
    assert not msg.inners[0].HasField("took") and not msg.HasField("own")
    assert (msg.stamps[1].seconds, msg.stamps[1].nanos) == (253_402_300_799, 999_999_000)
    # protobuf's own conversions read back what was given
    assert msg.start.ToDatetime() == value["start"]
    assert msg.took.ToTimedelta() == value["took"]
    assert msg.marks[0].ToDatetime(plus_two) == value["marks"][0]

    # and so does proto_mapping, after the wire, as aware UTC datetimes
    convert = proto_mapping(desc).convert
    assert convert is not None
    back = convert(cls.FromString(msg.SerializeToString()))
    assert back[0] == value["start"].replace(tzinfo=datetime.timezone.utc)
    assert back[1:7] == (value["took"], value["marks"], value["laps"],
                         (None, value["inner"]["took"]), [(_utc(2000, 2, 29), None)],
                         value["stamps"])
    assert proto_writer(desc)({"start": None, "took": None}) == cls()

    # PySpark hands a TimestampType value over as a naive datetime in the worker's local
    # time zone, whatever spark.sql.session.timeZone says.
    local_zone("IST-05:30")  # POSIX for UTC+05:30, which needs no tz database
    msg = proto_writer(desc)({"start": datetime.datetime(1970, 1, 1, 5, 30)})
    assert (msg.start.seconds, msg.start.nanos) == (0, 0)


@pytest.mark.parametrize(("fields", "match"), [
    ({"start": "2024-01-01T00:00:00Z"},
     r"value\.start: a google\.protobuf\.Timestamp needs a datetime\.datetime, got str"),
    ({"start": datetime.date(2024, 1, 1)},
     r"value\.start: a google\.protobuf\.Timestamp needs a datetime\.datetime, got date"),
    ({"took": 1.5},
     r"value\.took: a google\.protobuf\.Duration needs a datetime\.timedelta, got float"),
    ({"marks": [_utc(2024, 1, 1), 0]}, r"value\.marks\[\]: a google\.protobuf\.Timestamp "),
    ({"laps": {"a": _utc(2024, 1, 1)}}, r"value\.laps\{\}: a google\.protobuf\.Duration "),
    ({"inners": [{"took": "1s"}]}, r"value\.inners\[\]\.took: a google\.protobuf\.Duration "),
    ({"inner": {"at": {"seconds": 1, "nanos": 0}}},
     r"value\.inner\.at: a google\.protobuf\.Timestamp needs a datetime\.datetime, got dict"),
    ({"took": -datetime.timedelta(days=3_652_501)},
     r"value\.took: -315576086400 seconds is outside the range of a google\.protobuf\.Duration"),
    ({"start": datetime.datetime(1, 1, 1, tzinfo=datetime.timezone(datetime.timedelta(hours=1)))},
     r"value\.start: -62135600400 seconds is outside the range of a "
     r"google\.protobuf\.Timestamp \(-62135596800 to 253402300799\)"),
    ({"marks": [None]}, r"value\.marks: an array element is null"),
])
def test_proto_writer_names_the_time_field_that_does_not_fit(fields: dict[str, Any],
                                                             match: str) -> None:
    from kontrakt.spark._proto_types import proto_writer

    with pytest.raises(ValueError, match=match):
        proto_writer(_proto_descriptor(CLOCK))(fields)


def test_recursive_protobuf_message_is_refused() -> None:
    from kontrakt.spark._proto_types import proto_mapping

    desc = _proto_descriptor('syntax = "proto3"; message Node { Node next = 1; }')
    with pytest.raises(UnsupportedSchemaError, match=r"contains itself.*at value\.next"):
        proto_mapping(desc)


def test_kontrakt_imports_without_pyspark_and_spark_names_the_extra() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "sys.modules['pyspark'] = None  # as if PySpark were not installed\n"
        "import kontrakt, kontrakt.serde, kontrakt.clients\n"
        "try:\n"
        "    import kontrakt.spark\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True)
    assert "pip install 'kontrakt[spark]'" in out.stdout, out.stdout + out.stderr


def test_writer_converter_inverts_the_reader_converter() -> None:
    from pyspark.sql import Row

    from kontrakt.spark._types import avro_writer

    rec = {"type": "record", "name": "R", "fields": [{"name": "x", "type": "int"}]}
    schema = {"type": "record", "name": "Top", "fields": [
        {"name": "multi", "type": ["null", "string", rec]},
        {"name": "opt", "type": ["null", "R"]},
        {"name": "blob", "type": "bytes"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "m", "type": {"type": "map", "values": {"type": "array", "items": "R"}}},
        {"name": "defaulted", "type": "int", "default": 7},
    ]}
    at = datetime.datetime(2024, 5, 6, 7, 8, 9, 123000)  # naive, as PySpark hands it over
    spark_value = Row(multi=Row(member0=None, member1=Row(x=1)), opt=None,
                      blob=bytearray(b"\x01"), at=at, m={"k": [Row(x=2)]})
    parsed = parse_schema(schema)
    buf = io.BytesIO()
    schemaless_writer(buf, parsed, avro_writer(schema)(spark_value))
    buf.seek(0)
    convert = avro_mapping(schema).convert
    assert convert is not None
    back = convert(schemaless_reader(buf, parsed, None, True))
    assert back == ((None, (1,)), None, b"\x01", at.astimezone(datetime.timezone.utc),
                    {"k": [(2,)]}, 7)


def test_isolation_level_is_checked_and_normalised() -> None:
    opts = parse_options({**_options(), "kafka.isolation.level": " Read_Committed"})
    assert opts.consumer_config()["isolation.level"] == "read_committed"
    with pytest.raises(ConfigError, match="read_committed or read_uncommitted; got 'x'"):
        parse_options({**_options(), "kafka.isolation.level": "x"})
