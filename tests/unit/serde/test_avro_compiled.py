"""The compiled Avro writer and reader against fastavro, the oracle.

Every case writes a value with the compiled writer and with ``fastavro.schemaless_writer``
and compares the bytes (or, where fastavro refuses the value, the refusal), then reads the
bytes with the compiled reader and ``fastavro.schemaless_reader`` and compares the values
and their types. ``fast`` cases must also be encoded without falling back to fastavro, so
that the table keeps testing the compiled code and not only the fall-back.
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import math
import random
import struct
import uuid
from typing import Any

import fastavro
import pytest

from kontrakt.errors import ValueDeserializationError, ValueSerializationError
from kontrakt.registry import MockSchemaRegistryClient
from kontrakt.serde import (
    AvroDeserializer,
    AvroSerializer,
    MessageField,
    SerializationContext,
    _avro_codegen,
)
from kontrakt.serde._avro_codegen import NotCompiled
from kontrakt.serde._avro_read import Corrupt, compile_reader
from kontrakt.serde._avro_write import SlowPath, compile_writer
from kontrakt.serde.avro import _avro_encoder

UTC = dt.timezone.utc
I32, I64 = 2**31, 2**63
POINT = {"type": "record", "name": "Point", "namespace": "geo",
         "fields": [{"name": "x", "type": "double"}, {"name": "y", "type": "double"}]}
SIDE = {"type": "enum", "name": "Side", "symbols": ["BID", "ASK"]}
MD5 = {"type": "fixed", "name": "MD5", "size": 4}


def rec(*fields: tuple[str, Any], **extra: Any) -> dict[str, Any]:
    out: list[dict[str, Any]] = []
    for f in fields:
        entry = {"name": f[0], "type": f[1]}
        if len(f) > 2:
            entry["default"] = f[2]
        out.append(entry)
    return {"type": "record", "name": "R", "fields": out, **extra}


def logical(base: Any, name: str, **more: Any) -> dict[str, Any]:
    return {"type": base, "logicalType": name, **more}


# (schema, values written by the compiled code, values that may take fastavro's path)
CASES: list[tuple[Any, list[Any], list[Any]]] = [
    ("null", [None], [0, "x"]),
    ("boolean", [True, False], [1, 0, "x", None, 2.5]),
    ("int", [0, 1, -1, 63, -64, 64, -65, 8191, -8192, 8192, I32 - 1, -I32, 2**40],
     [True, 3.0, "1", None, I64, -I64 - 1]),
    ("long", [0, -1, 1, I64 - 1, -I64, 1234567890123, -1234567890123, 2**62, -(2**62) - 1],
     [I64, -I64 - 1, False, 1.0, None]),
    ("float", [0.0, -0.0, 1.5, 3, -7, math.inf, -math.inf, math.nan, 1e-40, 3.4e38],
     [1e300, True, "1.5", None, 10**400]),
    ("double", [0.0, -0.0, 1e-300, 5e-324, math.pi, math.inf, math.nan, -math.nan, 2**70],
     [True, "NaN", None, 10**400, decimal.Decimal("1.5")]),
    ("string", ["", "a", "x" * 63, "x" * 64, "x" * 10000, "é漢字🙂", "\x00"],
     [b"x", None, 1, "\ud800"]),
    ("bytes", [b"", b"\x00\xff", b"x" * 64, bytes(range(256)) * 40],
     [bytearray(b"ab"), memoryview(b"ab"), "ab", None]),
    (MD5, [b"abcd", b"\x00\x00\x00\x00"], [b"abc", b"abcde", bytearray(b"abcd"), "abcd"]),
    (SIDE, ["BID", "ASK"], ["bid", "X", 0, None]),
    ({"type": "array", "items": "long"}, [[], [1], list(range(-100, 100)), [I64 - 1] * 3],
     [(1, 2), [1, "x"], None, "ab", {1, 2}]),
    ({"type": "array", "items": {"type": "array", "items": "string"}},
     [[], [[]], [["a", ""], ["b"]]], [[("a",)]]),
    ({"type": "map", "values": "string"}, [{}, {"": ""}, {"k": "v", "é": "漢"},
                                           {str(i): "v" for i in range(100)}],
     [{1: "x"}, {"k": 1}, [("k", "v")], None]),
    ({"type": "map", "values": {"type": "map", "values": "double"}}, [{"a": {"b": 1.5}}], []),
    (rec(("a", "long"), ("b", "string")), [{"a": 1, "b": "x"}, {"a": 1, "b": "x", "z": 9}],
     [{"a": 1}, {"b": "x"}, {"a": "1", "b": "x"}, None, [1, "x"]]),
    # Defaults and missing fields, as fastavro's write_record treats them.
    (rec(("a", "long", 5), ("b", ["null", "string"]), ("c", "string", "dflt")),
     [{}, {"a": 1}, {"b": "x", "c": "y"}, {"a": 2, "b": None}], [{"c": None}]),
    (rec(("p", "double"), ("q", "float")), [{"p": 1, "q": 2}], [{"p": "NaN", "q": "1.5"},
                                                                {"p": True, "q": 1}]),
    (rec(("where", POINT), ("path", {"type": "array", "items": "geo.Point"}),
         ("side", SIDE), ("other", "Side"), ("h", MD5), ("h2", "MD5")),
     [{"where": {"x": 1.0, "y": -2.0}, "path": [{"x": 0.0, "y": 0.0}], "side": "ASK",
       "other": "BID", "h": b"abcd", "h2": b"wxyz"}], []),
    # Unions: fastavro's branch choice.
    (["null", "string"], [None, "", "x"], [b"x", 1, ("string", "x")]),
    (["string", "null"], [None, "x"], []),
    (["int", "long"], [0, I32 - 1, I32, -I32 - 1, I64 - 1], [I64, True, 1.5]),
    (["long", "int"], [0, I32], []),
    (["float", "double"], [1.5, 3, math.nan], [True]),
    (["double", "float"], [1.5, 3], []),
    (["float", "long"], [1.5, 3], []),
    (["long", "float"], [3, 3.5], []),
    (["float", "long", "double"], [3, 2.5], []),
    (["null", "boolean", "long"], [None, True, False, 7], [1.5]),
    (["long", "boolean"], [True, 3], []),
    (["null", "double"], [None, 0, 1.5], [True, "1.5"]),
    (["bytes", "string"], [b"x", "x"], [bytearray(b"x")]),
    (["string", "bytes"], [b"x", "x"], []),
    (["null", MD5, "bytes"], [b"abcd", b"abc", None], []),
    (["null", SIDE, "string"], ["ASK", "other", None], []),
    (["string", SIDE], ["ASK", "x"], []),
    (["null", POINT], [None, {"x": 1.0, "y": 2.0}, {"x": 1, "y": 2, "z": 0}],
     [{"x": 1.0}, {"x": "a", "y": 2.0}, {"x": 1.0, "y": 2.0, "-type": "geo.Point"},
      ("geo.Point", {"x": 1.0, "y": 2.0}), ("nope", {"x": 1.0, "y": 2.0})]),
    (["null", rec(("n", "int"))], [{"n": 1}], [{"n": I32}, {"n": True}]),
    (["null", {"type": "map", "values": "long"}], [{}, {"a": 1}], [{"a": "x"}, {1: 1}]),
    (["null", {"type": "array", "items": "long"}], [[], [1, 2]], [(1, 2), b"ab", [1, "x"]]),
    (["null", POINT, {"type": "map", "values": "double"}], [None],
     [{"x": 1.0, "y": 2.0}, {"a": 1.0}]),
    (["null", rec(("n", "int")), {"type": "record", "name": "S", "fields": [
        {"name": "n", "type": "int"}, {"name": "m", "type": "int"}]}], [None],
     [{"n": 1}, {"n": 1, "m": 2}, ("S", {"n": 1, "m": 2})]),
    (rec(("u", ["null", "long", "string", POINT])),
     [{"u": None}, {"u": 1}, {"u": "s"}, {"u": {"x": 1.0, "y": 1.0}}], [{"u": 1.5}]),
    # Logical types, through fastavro's own converters.
    (logical("long", "timestamp-millis"),
     [dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC), 0, 1700000000000,
      dt.datetime(1960, 1, 1, tzinfo=UTC)], ["x"]),
    (logical("long", "timestamp-micros"),
     [dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC), dt.datetime(1, 1, 1, tzinfo=UTC),
      dt.datetime(2024, 5, 6, tzinfo=dt.timezone(dt.timedelta(hours=5)))], []),
    (logical("long", "local-timestamp-millis"), [dt.datetime(2024, 5, 6, 7, 8, 9, 123000)], []),
    (logical("long", "local-timestamp-micros"), [dt.datetime(2024, 5, 6, 7, 8, 9, 1)], []),
    (logical("int", "date"), [dt.date(2024, 2, 29), dt.date(1, 1, 1), 19000], []),
    (logical("int", "time-millis"), [dt.time(23, 59, 59, 999000), dt.time(0)], []),
    (logical("long", "time-micros"), [dt.time(23, 59, 59, 999999), 5], []),
    (logical("string", "uuid"), [uuid.UUID(int=7), "8a4f3c1e-0b0e-4a9f-9a59-7f1f4c1c2d3e"], []),
    (logical("bytes", "decimal", precision=38, scale=9),
     [decimal.Decimal("0"), decimal.Decimal("-1.5"), decimal.Decimal("123456789012345678.9"),
      decimal.Decimal("-99999999999999999999999999999.999999999"), b"\x01"],
     [decimal.Decimal("1.0000000001")]),
    ({"type": "fixed", "name": "Dec", "size": 8, "logicalType": "decimal", "precision": 18,
      "scale": 2}, [decimal.Decimal("12.34"), decimal.Decimal("-0.01")], []),
    (logical("long", "unknown-kind"), [5], []),
    (["null", logical("long", "timestamp-micros")],
     [None, dt.datetime(2024, 1, 1, tzinfo=UTC), 17], ["x"]),
    (["null", logical("string", "uuid")], [None, uuid.UUID(int=1)], [b"x", "not-a-uuid"]),
    (["null", logical("int", "date")], [None, dt.date(2000, 1, 1)], []),
]

#: what the compiled reader raises on a payload it does not decode
READ_FAILURES = (Corrupt, IndexError, struct.error, UnicodeDecodeError, ValueError)
IDS = [f"{i}-{json.dumps(c[0])[:40]}" for i, c in enumerate(CASES)]


def fastavro_bytes(parsed: Any, value: Any) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, parsed, value)
    return out.getvalue()


def same(a: Any, b: Any) -> bool:
    """Equal values of the same types all the way down (NaN equal to NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dt.datetime):
        return a == b and a.tzinfo == b.tzinfo
    return bool(a == b)


def check_read(parsed: Any, data: bytes, return_record_name: bool = False) -> None:
    try:
        expected = fastavro.schemaless_reader(io.BytesIO(data), parsed, None,
                                              return_record_name)
    except Exception:
        # fastavro writes some values it cannot read back (bytes as a uuid string)
        with pytest.raises(READ_FAILURES):
            compile_reader(parsed, return_record_name)(data, 0)
        return
    value, end = compile_reader(parsed, return_record_name)(data, 0)
    assert end == len(data)
    assert same(value, expected), (value, expected)


@pytest.mark.parametrize(("schema", "fast", "other"), CASES, ids=IDS)
def test_bytes_and_values_are_fastavros(schema: Any, fast: list[Any], other: list[Any]) -> None:
    parsed = fastavro.parse_schema(schema)
    write = compile_writer(parsed)
    encode = _avro_encoder(parsed, "T")
    for value in fast:
        expected = fastavro_bytes(parsed, value)
        out = bytearray(b"P")
        write(out, value)  # no fall-back: the compiled code wrote it
        assert bytes(out) == b"P" + expected, value
        assert encode(b"P", value) == b"P" + expected
        check_read(parsed, expected)
        check_read(parsed, expected, return_record_name=True)
    for value in other:
        try:
            expected = fastavro_bytes(parsed, value)
        except Exception as e:
            with pytest.raises(Exception) as info:
                encode(b"", value)
            # fastavro's error, or one wrapping it that names the field
            assert info.value is not None
            assert type(info.value) is type(e) or info.value.__cause__ is not None
            continue
        assert encode(b"", value) == expected, value
        check_read(parsed, expected)


def _random_value(schema: Any, named: dict[str, Any], rnd: random.Random, depth: int) -> Any:
    if isinstance(schema, str) and schema in named:
        schema = named[schema]
    if isinstance(schema, list):
        branch = rnd.choice(schema)
        return _random_value(branch, named, rnd, depth + 1)
    kind = schema if isinstance(schema, str) else schema["type"]
    if kind == "null":
        return None
    if kind == "boolean":
        return rnd.random() < 0.5
    if kind in ("int", "long"):
        bits = 31 if kind == "int" else 63
        return rnd.choice([0, -1, 2**bits - 1, -(2**bits), rnd.randrange(-(2**bits), 2**bits),
                           rnd.randrange(-200, 200)])
    if kind in ("float", "double"):
        return rnd.choice([0.0, -0.0, math.inf, rnd.uniform(-1e6, 1e6), float(rnd.randrange(9))])
    if kind == "string":
        return "".join(rnd.choice("ab é漢🙂") for _ in range(rnd.randrange(0, 70)))
    if kind == "bytes":
        return rnd.randbytes(rnd.randrange(0, 70))
    if kind == "fixed":
        return rnd.randbytes(schema["size"])
    if kind == "enum":
        return rnd.choice(schema["symbols"])
    if kind == "array":
        n = 0 if depth > 3 else rnd.randrange(0, 5)
        return [_random_value(schema["items"], named, rnd, depth + 1) for _ in range(n)]
    if kind == "map":
        n = 0 if depth > 3 else rnd.randrange(0, 5)
        return {str(rnd.random()): _random_value(schema["values"], named, rnd, depth + 1)
                for _ in range(n)}
    return {f["name"]: _random_value(f["type"], named, rnd, depth + 1) for f in schema["fields"]}


NESTED = {
    "type": "record", "name": "Order", "namespace": "shop", "fields": [
        {"name": "id", "type": "long"}, {"name": "n", "type": "int"},
        {"name": "lines", "type": {"type": "array", "items": {
            "type": "record", "name": "Line", "fields": [
                {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"},
                {"name": "price", "type": ["null", "double", "string"]},
                {"name": "tags", "type": {"type": "map", "values": ["null", "long"]}}]}}},
        {"name": "first", "type": ["null", "Line"]},
        {"name": "hash", "type": {"type": "fixed", "name": "H", "size": 3}},
        {"name": "state", "type": {"type": "enum", "name": "State",
                                   "symbols": ["NEW", "PAID", "SHIPPED"]}},
        {"name": "blob", "type": ["bytes", "null", "boolean", "float"]},
    ]}


@pytest.mark.parametrize("seed", range(3))
def test_random_nested_records_match_fastavro(seed: int) -> None:
    rnd = random.Random(seed)
    parsed = fastavro.parse_schema(NESTED)
    write, read = compile_writer(parsed), compile_reader(parsed)
    named = dict(parsed["__named_schemas"])
    for _ in range(300):
        value = _random_value(parsed, named, rnd, 0)
        expected = fastavro_bytes(parsed, value)
        out = bytearray()
        try:
            write(out, value)
        except SlowPath:
            # a float32 branch given a double fastavro refuses to round: checked below
            out = bytearray(_avro_encoder(parsed, "T")(b"", value))
        assert bytes(out) == expected
        got, end = read(expected, 0)
        assert end == len(expected)
        assert same(got, fastavro.schemaless_reader(io.BytesIO(expected), parsed, None))


LIST = {"type": "record", "name": "Node", "fields": [
    {"name": "value", "type": "long"},
    {"name": "next", "type": ["null", "Node"], "default": None},
    {"name": "kids", "type": {"type": "array", "items": "Node"}, "default": []}]}


def test_recursive_schema_compiles_to_functions_that_call_each_other() -> None:
    parsed = fastavro.parse_schema(LIST)
    value: dict[str, Any] = {"value": 0, "next": None, "kids": []}
    for i in range(1, 50):
        value = {"value": i, "next": value, "kids": [{"value": -i, "next": None, "kids": []}]}
    expected = fastavro_bytes(parsed, value)
    out = bytearray()
    compile_writer(parsed)(out, value)
    assert bytes(out) == expected
    check_read(parsed, expected)
    check_read(parsed, expected, return_record_name=True)


def test_shapes_it_does_not_compile_fall_back_to_fastavro() -> None:
    odd = fastavro.parse_schema(["null", "string"])
    with pytest.raises(NotCompiled):
        compile_writer(fastavro.parse_schema(
            {"type": "record", "name": "X", "logicalType": "custom",
             "fields": [{"name": "a", "type": "int"}]}))
    # Still fastavro's bytes through the serializer's encoder.
    assert _avro_encoder(odd, "T")(b"", "x") == fastavro_bytes(odd, "x")


TRADE = {"type": "record", "name": "Trade", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"}, {"name": "price", "type": "double"},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "tags", "type": {"type": "array", "items": "string"}}]}
CTX = SerializationContext("trades", MessageField.VALUE)


def test_a_bad_value_is_the_serializers_typed_error_naming_the_field() -> None:
    ser = AvroSerializer(MockSchemaRegistryClient({"url": "mock://c"}), json.dumps(TRADE))
    with pytest.raises(ValueSerializationError, match=r"bench\.Trade\.price") as info:
        ser({"id": 1, "price": "cheap", "note": None, "tags": []}, CTX)
    assert "AvroSerializer" in str(info.value)
    with pytest.raises(ValueSerializationError, match=r"bench\.Trade\.tags\[\]"):
        ser({"id": 1, "price": 1.0, "note": None, "tags": ["a", 2]}, CTX)
    with pytest.raises(ValueSerializationError, match="no value and no default for id"):
        ser({"price": 1.0, "tags": []}, CTX)
    with pytest.raises(ValueSerializationError, match=r"Trade\.note"):
        ser({"id": 1, "price": 1.0, "note": 5, "tags": []}, CTX)
    # A value fastavro takes though the compiled code does not: fastavro's bytes.
    good = ser({"id": 1, "price": 1.0, "note": None, "tags": ("a",)}, CTX)
    assert good is not None
    assert good[5:] == fastavro_bytes(fastavro.parse_schema(TRADE),
                                      {"id": 1, "price": 1.0, "note": None, "tags": ["a"]})


def test_truncated_and_garbage_payloads_are_the_deserializers_typed_error() -> None:
    registry = MockSchemaRegistryClient({"url": "mock://c"})
    data = AvroSerializer(registry, json.dumps(TRADE))(
        {"id": 123456789, "price": 1.5, "note": "n", "tags": ["x", "yy"]}, CTX)
    assert data is not None
    de = AvroDeserializer(registry)
    assert de(data, CTX) == {"id": 123456789, "price": 1.5, "note": "n", "tags": ["x", "yy"]}
    for cut in range(5, len(data)):
        with pytest.raises(ValueDeserializationError) as info:
            de(data[:cut], CTX)
        # fastavro's own error as the cause, as before the compiled reader
        assert not isinstance(info.value.__cause__, (SlowPath, Corrupt))
    garbage = [data[:5] + b"\xff" * 12, data[:5] + b"\x02" + b"\x00" * 8 + b"\x06",
               data[:5] + b"\x02" + b"\x00" * 8 + b"\x02\x04\xff\xfe" + b"\x00"]
    for payload in garbage:
        with pytest.raises(ValueDeserializationError):
            de(payload, CTX)


def test_reader_anomalies_are_left_to_fastavro() -> None:
    """Payloads the compiled reader refuses though fastavro reads them (a 10-byte varint with
    bits past 64, a negative enum index) give fastavro's value through the deserializer."""
    registry = MockSchemaRegistryClient({"url": "mock://c"})
    schema = {"type": "record", "name": "W", "fields": [{"name": "n", "type": "long"}]}
    AvroSerializer(registry, json.dumps(schema))({"n": 1}, CTX)
    de = AvroDeserializer(registry)
    sid = registry.get_latest_version("trades-value").schema_id
    head = b"\x00" + sid.to_bytes(4, "big")
    overlong = b"\xff" * 9 + b"\x7f"
    with pytest.raises(Corrupt):
        compile_reader(fastavro.parse_schema(schema))(overlong, 0)
    expected = fastavro.schemaless_reader(io.BytesIO(overlong), fastavro.parse_schema(schema))
    assert de(head + overlong, CTX) == expected


EVOLVE = [
    ({"type": "record", "name": "E", "fields": [
        {"name": "a", "type": "int"}, {"name": "gone", "type": "string"},
        {"name": "s", "type": "string"}, {"name": "k", "type": {
            "type": "enum", "name": "K", "symbols": ["A", "B", "C"]}}]},
     {"type": "record", "name": "E", "fields": [
         {"name": "a", "type": "double"}, {"name": "s", "type": "bytes"},
         {"name": "k", "type": {"type": "enum", "name": "K", "symbols": ["A", "B", "Z"],
                                "default": "Z"}},
         {"name": "added", "type": ["null", "long"], "default": None}]},
     {"a": 7, "gone": "x", "s": "text", "k": "C"}),
    (["null", "int"], ["null", "long", "double"], 5),
]


@pytest.mark.parametrize(("writer", "reader", "value"), EVOLVE)
def test_schema_evolution_reads_as_fastavro(writer: Any, reader: Any, value: Any) -> None:
    registry = MockSchemaRegistryClient({"url": "mock://c"})
    data = AvroSerializer(registry, json.dumps(writer))(value, CTX)
    assert data is not None
    got = AvroDeserializer(registry, json.dumps(reader))(data, CTX)
    expected = fastavro.schemaless_reader(io.BytesIO(data[5:]), fastavro.parse_schema(writer),
                                          fastavro.parse_schema(reader))
    assert same(got, expected)


def test_the_serializer_and_deserializer_use_the_compiled_code() -> None:
    registry = MockSchemaRegistryClient({"url": "mock://c"})
    ser, de = AvroSerializer(registry, json.dumps(TRADE)), AvroDeserializer(registry)
    value = {"id": -5, "price": 2.5, "note": None, "tags": ["é"]}
    data = ser(value, CTX)
    assert data is not None
    assert de(data, CTX) == value
    write = ser._core.value_writes["trades"]
    assert write(value, CTX) == data
    read = next(iter(de._core.readers.values()))
    assert read(data, 5, CTX) == value


V1 = {"type": "record", "name": "Acct", "namespace": "bank", "fields": [
    {"name": "id", "type": "long"}, {"name": "old_name", "type": "string"},
    {"name": "gone", "type": {"type": "array", "items": POINT}},
    {"name": "gone_too", "type": ["null", {"type": "map", "values": "double"}]},
    {"name": "ratio", "type": "double"}, {"name": "flag", "type": "boolean"},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "home", "type": "geo.Point"}]}
V2 = {"type": "record", "name": "Acct", "namespace": "bank", "fields": [
    {"name": "id", "type": "long"},
    {"name": "added", "type": ["null", "string"], "default": None},
    {"name": "name", "type": "string", "aliases": ["old_name"]},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "home", "type": POINT},
    {"name": "flag", "type": "boolean"},
    {"name": "list", "type": {"type": "array", "items": "long"}, "default": [1, 2]},
    {"name": "where", "type": "geo.Point", "default": {"x": 0.0, "y": 1.0}}]}
V1_VALUES = [
    {"id": 1, "old_name": "a", "gone": [], "gone_too": None, "ratio": 0.5, "flag": True,
     "at": dt.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=UTC), "home": {"x": 1.0, "y": 2.0}},
    {"id": -(2**40), "old_name": "é" * 70, "gone": [{"x": 1.0, "y": 2.0}] * 3,
     "gone_too": {"k": 1.5}, "ratio": math.nan, "flag": False, "at": 0,
     "home": {"x": -1.0, "y": 2.0}},
]


def test_record_evolution_is_compiled_and_reads_as_fastavro() -> None:
    writer, reader = fastavro.parse_schema(V1), fastavro.parse_schema(V2)
    read = compile_reader(writer, reader=reader)
    for value in V1_VALUES:
        data = fastavro_bytes(writer, value)
        got, end = read(data, 0)
        assert end == len(data)
        expected = fastavro.schemaless_reader(io.BytesIO(data), writer, reader)
        assert same(got, expected), (got, expected)
    # And through the deserializer given the reader schema.
    registry = MockSchemaRegistryClient({"url": "mock://c"})
    data = AvroSerializer(registry, json.dumps(V1))(V1_VALUES[0], CTX)
    assert data is not None
    de = AvroDeserializer(registry, json.dumps(V2))
    assert same(de(data, CTX), fastavro.schemaless_reader(io.BytesIO(data[5:]), writer, reader))


@pytest.mark.parametrize("change", [
    {"name": "ratio", "type": "float"},  # double read as float: not a legal promotion
    {"name": "id", "type": "string"},  # not a promotion: fastavro refuses it
    {"name": "home", "type": ["null", "geo.Point"]},  # a record made optional
    {"name": "gone", "type": {"type": "array", "items": {  # geo.Point loses a field
        "type": "record", "name": "Point", "namespace": "geo",
        "fields": [{"name": "x", "type": "double"}]}}},
    {"name": "missing", "type": "long"},  # no default
])
def test_other_evolutions_are_left_to_fastavro(change: dict[str, Any]) -> None:
    fields = [change if f["name"] == change["name"] else f for f in V1["fields"]]
    if change["name"] not in [f["name"] for f in fields]:
        fields.append(change)
    reader = fastavro.parse_schema({**V1, "fields": fields})
    with pytest.raises(NotCompiled):
        compile_reader(fastavro.parse_schema(V1), reader=reader)


PROMOTE_W = {"type": "record", "name": "P", "fields": [
    {"name": "i", "type": "int"}, {"name": "j", "type": "int"}, {"name": "k", "type": "long"},
    {"name": "f", "type": "float"}, {"name": "s", "type": "string"},
    {"name": "b", "type": "bytes"}, {"name": "o", "type": "long"},
    {"name": "q", "type": "boolean"}, {"name": "d", "type": "double"}]}
PROMOTE_R = {"type": "record", "name": "P", "fields": [
    {"name": "i", "type": "long"}, {"name": "j", "type": "double"},
    {"name": "k", "type": "float"}, {"name": "f", "type": "double"},
    {"name": "s", "type": "bytes"}, {"name": "b", "type": "string"},
    {"name": "o", "type": ["null", "string", "double", "long"]},
    {"name": "q", "type": ["null", "boolean"]}, {"name": "d", "type": ["double", "null"]}]}


@pytest.mark.parametrize("value", [
    {"i": 1, "j": -(2**31), "k": 2**62 + 1, "f": 1.5, "s": "é", "b": b"x", "o": 7, "q": True,
     "d": math.inf},
    {"i": 0, "j": 0, "k": 0, "f": math.nan, "s": "", "b": b"", "o": -(2**63), "q": False,
     "d": -0.0},
])
def test_primitive_promotions_are_compiled_and_read_as_fastavro(value: dict[str, Any]) -> None:
    writer, reader = fastavro.parse_schema(PROMOTE_W), fastavro.parse_schema(PROMOTE_R)
    data = fastavro_bytes(writer, value)
    got, end = compile_reader(writer, reader=reader)(data, 0)
    assert end == len(data)
    assert same(got, fastavro.schemaless_reader(io.BytesIO(data), writer, reader))


@pytest.mark.parametrize("unroll_up_to", [160, -1])
def test_varints_of_every_length_round_trip_as_fastavro(
        unroll_up_to: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both forms of the inline decoder: unrolled, and the loop used deep in nested code."""
    monkeypatch.setattr(_avro_codegen, "_UNROLL_UP_TO", unroll_up_to)
    values = [0, -1, 1, -(2**63), 2**63 - 1]
    for bits in range(6, 64, 7):  # the edges of each encoded length, 1 to 10 bytes
        values += [2**bits - 1, 2**bits, -(2**bits), -(2**bits) - 1]
    rnd = random.Random(5)
    values += [rnd.randrange(-(2**63), 2**63) for _ in range(2000)]
    write, read = compile_writer("long"), compile_reader("long")
    for v in values:
        expected = fastavro_bytes("long", v)
        out = bytearray()
        write(out, v)
        assert bytes(out) == expected, v
        assert read(expected + b"\x00", 0) == (v, len(expected)), v
    for bad in (b"\xff" * 11, b"\xff" * 9 + b"\x7f", b"\xff\xff"):
        with pytest.raises((Corrupt, IndexError)):
            read(bad, 0)


@pytest.mark.parametrize("depth", [5, 40])
def test_deeply_nested_anonymous_types_compile_or_fall_back(depth: int) -> None:
    """Arrays nested deeper than Python's nested blocks allow are left to fastavro, through
    the serializer and the deserializer alike."""
    schema: Any = "long"
    value: Any = 7
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
        value = [value, value] if depth < 10 else [value]
    record = {"type": "record", "name": "Deep", "fields": [{"name": "a", "type": schema}]}
    parsed = fastavro.parse_schema(record)
    if depth > 20:
        with pytest.raises(NotCompiled):
            compile_writer(parsed)
        with pytest.raises(NotCompiled):
            compile_reader(parsed)
    registry = MockSchemaRegistryClient({"url": "mock://c"})
    data = AvroSerializer(registry, json.dumps(record))({"a": value}, CTX)
    assert data is not None and data[5:] == fastavro_bytes(parsed, {"a": value})
    assert AvroDeserializer(registry)(data, CTX) == {"a": value}


#: each length's edges of a zigzag varint, and of the writer's 14-bit groups (2**13, 2**20,
#: 2**27 and 2**41 are where the zigzag value reaches 2, 3, 4 and 7 bytes)
EDGES = sorted({0, 1, -1, 63, -64, 64, -65, 2**31 - 1, -(2**31), 2**31, -(2**31) - 1,
                2**63 - 1, -(2**63), 1234567890123, -1234567890123,
                *(s * (2**bits) + d for bits in range(6, 63, 7) for s in (1, -1)
                  for d in (-1, 0, 1))})


def test_long_and_int_fields_at_every_varint_edge_are_fastavros() -> None:
    """The writer's inline varint (table of 64 small values, zigzag split at 28 bits, 14-bit
    groups looked up, a call past 42 bits) and the reader's (two one-digit ints joined at
    the end) in every place a long or int is written: a field, a union branch (written
    strict), array items and map values."""
    schema = rec(("l", "long"), ("i", "int"), ("ol", ["null", "long"]), ("oi", ["null", "int"]),
                 ("al", {"type": "array", "items": "long"}),
                 ("ml", {"type": "map", "values": "long"}))
    parsed = fastavro.parse_schema(schema)
    write, read = compile_writer(parsed), compile_reader(parsed)
    for v in EDGES:
        i = v if -I32 <= v < I32 else 7
        value = {"l": v, "i": i, "ol": v, "oi": i, "al": [v, -v if v > -I64 else v, 0],
                 "ml": {"k": v}}
        expected = fastavro_bytes(parsed, value)
        out = bytearray(b"P")
        write(out, value)
        assert bytes(out) == b"P" + expected, v
        assert read(expected, 0) == (value, len(expected)), v
    for bad in (2**63, -(2**63) - 1, 2**64, -(2**70)):
        with pytest.raises(SlowPath):
            write(bytearray(), {**value, "l": bad})
    with pytest.raises(SlowPath):  # an int branch of a union takes int32 only
        write(bytearray(), {**value, "oi": 2**31})


def _padded(v: int, length: int) -> bytes:
    """``v``'s zigzag varint in ``length`` bytes (more than it needs: zero groups with the
    continuation bit, as some writers emit them)."""
    z = (v << 1) ^ (v >> 63)
    out = bytearray()
    for _ in range(length - 1):
        out.append(z & 127 | 128)
        z >>= 7
    assert z < 128
    out.append(z)
    return bytes(out)


def test_varints_of_every_padded_length_read_as_fastavro() -> None:
    """Over-long (padded) varints end in every one of the reader's branches, the tenth byte
    included, and decode to fastavro's value; a tenth byte with bits past 64 is left to
    fastavro."""
    read = compile_reader(fastavro.parse_schema(rec(("l", "long"), ("s", "string"))))
    for v in (0, 1, -1, 63, -64, 2**27, -(2**27) - 1, 2**62, -(2**63), 2**63 - 1):
        z = (v << 1) ^ (v >> 63)
        for length in range(max(1, (z.bit_length() + 6) // 7), 11):
            data = _padded(v, length) + _padded(1, 3) + b"x"
            expected = fastavro.schemaless_reader(io.BytesIO(data), fastavro.parse_schema(
                rec(("l", "long"), ("s", "string"))))
            assert read(data, 0) == (expected, len(data)), (v, length)
    for tenth in (2, 127):
        with pytest.raises(Corrupt):
            read(b"\x80" * 9 + bytes([tenth]) + b"\x02x", 0)


def test_multi_block_arrays_and_maps_read_as_fastavro() -> None:
    """Collections as other writers block them: several blocks, negative counts followed by
    the block's size in bytes, empty collections, padded counts."""
    parsed = fastavro.parse_schema(rec(("a", {"type": "array", "items": "long"}),
                                       ("m", {"type": "map", "values": "string"})))
    read = compile_reader(parsed)
    payloads = [
        b"\x00\x00",  # both empty
        b"\x04\x02\x04\x02\x06\x00" + b"\x02\x02k\x02v\x00",  # [1, 2], [3]; one entry
        b"\x03\x04\x02\xfe\xff\x03\x00" + b"\x03\x08\x02a\x02x\x02b\x00\x00",  # -2 items, size
        b"\x82\x00\x80\x80\x80\x80\x80\x80\x02\x00" + b"\x80\x00",  # padded count; empty
    ]
    for data in payloads:
        expected = fastavro.schemaless_reader(io.BytesIO(data), parsed)
        assert read(data, 0) == (expected, len(data)), data


@pytest.mark.parametrize("unroll_up_to", [160, -1])
def test_byte_counts_are_refused_when_negative_or_past_the_end(
        unroll_up_to: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A string's, bytes' or map key's count read in one byte (by table) or several (padded
    too): negative counts and counts past the payload's end are refused by the compiled
    reader (fastavro then answers); counts reaching the end exactly are read."""
    monkeypatch.setattr(_avro_codegen, "_UNROLL_UP_TO", unroll_up_to)
    parsed = fastavro.parse_schema(rec(("s", "string"), ("b", "bytes"),
                                       ("m", {"type": "map", "values": "null"})))
    read = compile_reader(parsed)
    tail = b"\x00\x00"  # b"" and {}
    for count in (0, 1, 3, 63, 64, 200):
        for length in range(max(1, ((2 * count).bit_length() + 6) // 7), 5):
            good = _padded(count, length) + b"x" * count
            for data in (good + tail, b"\x00" + good + b"\x00", b"\x00\x00\x02" + good + b"\x00"):
                expected = fastavro.schemaless_reader(io.BytesIO(data), parsed)
                assert read(data, 0) == (expected, len(data)), (count, length, data)
            short = _padded(count + 1, max(length, ((2 * count + 2).bit_length() + 6) // 7)) \
                + b"x" * count
            for data in (short, b"\x00" + short, b"\x00\x00\x02" + short):
                with pytest.raises(READ_FAILURES):
                    read(data, 0)
    for count in (-1, -2, -64, -65, -(2**40)):
        z = (count << 1) ^ (count >> 63)
        for length in range(max(1, (z.bit_length() + 6) // 7), 11):
            bad = _padded(count, length)  # read as 0 or as 2**62, the rest would decode
            for data in (bad + tail, b"\x00" + bad + b"\x00", b"\x00\x00\x02" + bad + b"\x00"):
                with pytest.raises(READ_FAILURES):
                    read(data, 0)


def test_map_keys_written_again_from_the_writers_cache_are_fastavros() -> None:
    """A map field's writer keeps the encoding of the keys it has seen (up to its bound):
    the second write of a key, a long or non-ASCII key, and keys past the bound are all
    written as fastavro writes them."""
    parsed = fastavro.parse_schema(rec(("m", {"type": "map", "values": "long"}),
                                       ("n", {"type": "map", "values": "string"})))
    write = compile_writer(parsed)
    maps = [{"lot": 7, "seq": 99}, {"seq": -1, "lot": 2**40},
            {"k" * 64: 1, "é漢字🙂": 2, "": 3}, {"k" * 64: 4, "é漢字🙂": 5, "": 6},
            {f"key{i}": i for i in range(1100)}, {f"key{i}": -i for i in range(1100)},
            {"lot": 1, "fresh": 2}]
    for m in maps:
        value = {"m": m, "n": {k: str(v) for k, v in m.items()}}
        out = bytearray()
        write(out, value)
        assert bytes(out) == fastavro_bytes(parsed, value)
    with pytest.raises(UnicodeEncodeError):  # left to fastavro by the serializer
        write(bytearray(), {"m": {"\ud800": 1}, "n": {}})
    value = {"m": {"lot": 1, "\ud800": 1}, "n": {}}
    with pytest.raises(ValueSerializationError):
        AvroSerializer(MockSchemaRegistryClient({"url": "mock://k"}), json.dumps(
            rec(("m", {"type": "map", "values": "long"}),
                ("n", {"type": "map", "values": "string"}))))(value, CTX)


def test_a_payload_cut_short_in_its_last_bytes_is_refused_once_at_the_end() -> None:
    """Slices past the end are not tested one by one: a string, bytes or fixed cut short
    where nothing after it reads a byte (the last field, a null after it, a nested record's
    last field, a top-level string) is refused by the entry function's one test."""
    inner = {"type": "record", "name": "In", "fields": [{"name": "s", "type": "string"}]}
    schemas = [rec(("a", "long"), ("s", "string")), rec(("b", "bytes"), ("n", "null")),
               rec(("f", MD5)), rec(("r", inner), ("n", "null")), "string", "bytes"]
    for schema in schemas:
        parsed = fastavro.parse_schema(schema)
        read = compile_reader(parsed)
        full = fastavro_bytes(parsed, fastavro_value(schema))
        assert read(full, 0)[1] == len(full)
        for cut in range(1, 3):
            with pytest.raises(Corrupt):
                read(full[:-cut], 0)


def fastavro_value(schema: Any) -> Any:
    values = {"long": 300, "string": "abc", "bytes": b"xyz", "null": None}
    if isinstance(schema, str):
        return values[schema]
    out: dict[str, Any] = {}
    for f in schema["fields"]:
        t = f["type"]
        out[f["name"]] = (b"abcd" if t == MD5 else {"s": "abc"} if isinstance(t, dict)
                          else values[t])
    return out


def test_block_counts_of_zero_byte_items_and_garbage_counts_read_as_fastavro() -> None:
    """Items are counted down from the block's count: null items (more of them than bytes
    left, up to the payload's length) are read as fastavro reads them; a count beyond the
    payload's length is refused (fastavro then answers)."""
    parsed = fastavro.parse_schema(rec(("b", {"type": "array", "items": "long"}),
                                       ("a", {"type": "array", "items": "null"})))
    read = compile_reader(parsed)
    for data in (b"\x04\x02\x04\x00\x0a\x00", b"\x00\x06\x00", b"\x02\x04\x00\x05\x02\x00",
                 b"\x00\x00"):
        expected = fastavro.schemaless_reader(io.BytesIO(data), parsed)
        assert read(data, 0) == (expected, len(data)), data
    for data in (b"\x00\x0a\x00", b"\x0a\x02\x00\x00", b"\x00\xfe\xff\x03\x02\x00"):
        with pytest.raises(READ_FAILURES):
            read(data, 0)


class _Str(str):
    pass


class _Int(int):
    pass


class _Dict(dict):  # type: ignore[type-arg]
    pass


def test_values_of_other_types_in_plain_unions_are_left_to_fastavro() -> None:
    """Unions without logical types test no "surely not" of their scalar branches: a value of
    a type the compiled writer does not know (a subclass, a tuple, a bytearray) still
    passes no branch's exact-type test and goes to fastavro, whose bytes or error it gets."""
    unions = [["null", "string"], ["null", "long", "string"], ["null", "double"],
              ["null", "bytes"], ["string", "null", {"type": "map", "values": "long"}],
              ["null", SIDE, "string"], ["null", POINT]]
    values = [_Str("x"), _Int(3), _Dict(a=1), ("string", "x"), bytearray(b"ab"), {1, 2},
              1.5, "x", None, {"x": 1.0, "y": 2.0}]
    for union in unions:
        parsed = fastavro.parse_schema(rec(("u", union)))
        write, encode = compile_writer(parsed), _avro_encoder(parsed, "T")
        for v in values:
            try:
                expected = fastavro_bytes(parsed, {"u": v})
            except Exception as e:
                with pytest.raises(Exception) as info:
                    encode(b"", {"u": v})
                assert type(info.value) is type(e) or info.value.__cause__ is not None
                continue
            assert encode(b"", {"u": v}) == expected, (union, v)
            if type(v) in (_Str, _Int, _Dict, tuple, bytearray, set):
                with pytest.raises(SlowPath):
                    write(bytearray(), {"u": v})
