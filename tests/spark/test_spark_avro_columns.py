"""The columnar Avro decoder against fastavro: for random schemas and values, and for writer
schemas evolved from the reader's (fields added, removed, renamed by alias, reordered;
promotions; union and enum changes), the Arrow array it builds equals fastavro's decode
converted by the row path's mapping (``kontrakt.spark._types``) and built by ``pa.array``.
Seeded, so a failure names the case that reproduces it."""

from __future__ import annotations

import copy
import datetime
import decimal
import io
import random
import struct
import uuid
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="needs the spark extra")

import pyarrow as pa
from fastavro import parse_schema, schemaless_reader, schemaless_writer

from kontrakt._types import ConsumerRecord, TimestampType
from kontrakt.errors import SerializationError
from kontrakt.registry import Schema, SchemaRegistryClient
from kontrakt.serde import MessageField
from kontrakt.spark._arrow import Chunk, arrow_type
from kontrakt.spark._avro_columns import AvroColumns, decode_bare
from kontrakt.spark._columns import AvroColumnDecoder, RowDecoder, row_decoder
from kontrakt.spark._fieldplan import FieldPlan
from kontrakt.spark._types import avro_mapping

UTC = datetime.timezone.utc


class _Gen:
    """Random Avro schemas and values for them."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.names = 0

    def name(self, prefix: str) -> str:
        self.names += 1
        return f"{prefix}{self.names}"

    def schema(self, depth: int) -> Any:
        r = self.rng
        leaves: list[Any] = [
            "boolean", "int", "long", "float", "double", "string", "bytes",
            {"type": "int", "logicalType": "date"},
            {"type": "long", "logicalType": "timestamp-millis"},
            {"type": "long", "logicalType": "timestamp-micros"},
            {"type": "long", "logicalType": "local-timestamp-millis"},
            {"type": "int", "logicalType": "time-millis"},
            {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3},
            {"type": "string", "logicalType": "uuid"},
            {"type": "enum", "name": self.name("E"), "symbols": ["A", "B", "C"]},
            {"type": "fixed", "name": self.name("F"), "size": 3},
            {"type": "fixed", "name": self.name("D"), "size": 8, "logicalType": "decimal",
             "precision": 18, "scale": 2},
            ["null", "long"], ["null", "string"], ["int", "long"], ["null", "float", "double"],
        ]
        if depth <= 0 or r.random() < 0.5:
            return copy.deepcopy(r.choice(leaves))
        kind = r.choice(["record", "array", "map", "optional", "union"])
        if kind == "record":
            return self.record(depth - 1)
        if kind == "array":
            return {"type": "array", "items": self.schema(depth - 1)}
        if kind == "map":
            return {"type": "map", "values": self.schema(depth - 1)}
        if kind == "optional":
            return ["null", self.record(depth - 1)]
        return ["null", "string", "long", self.record(depth - 1)]

    def record(self, depth: int) -> dict[str, Any]:
        fields = [{"name": f"f{i}", "type": self.schema(depth)}
                  for i in range(self.rng.randint(1, 5))]
        return {"type": "record", "name": self.name("R"), "fields": fields}

    def value(self, s: Any) -> Any:
        r = self.rng
        if isinstance(s, list):
            return self.value(r.choice(s))
        if isinstance(s, str):
            return {
                "null": lambda: None, "boolean": lambda: r.random() < 0.5,
                "int": lambda: r.randint(-2**31, 2**31 - 1),
                "long": lambda: r.choice([r.randint(-2**63, 2**63 - 1), r.randint(-99, 99)]),
                "float": lambda: r.randint(-4000, 4000) / 8,
                "double": lambda: r.uniform(-1e12, 1e12),
                "string": lambda: "".join(r.choice("aé€😀z ") for _ in range(r.randint(0, 6))),
                # text, so that a string reader can read it (bytes -> string)
                "bytes": lambda: "".join(r.choice("aé€ z") for _ in range(
                    r.randint(0, 6))).encode(),
            }[s]()
        logical = s.get("logicalType")
        kind = s["type"]
        if logical == "date":
            return datetime.date(1970, 1, 1) + datetime.timedelta(days=r.randint(-9999, 99999))
        if logical in ("timestamp-millis", "timestamp-micros"):
            us = r.randint(-2**40, 2**41) * (1000 if logical.endswith("millis") else 1)
            return datetime.datetime(1970, 1, 1, tzinfo=UTC) + datetime.timedelta(
                microseconds=us)
        if logical == "local-timestamp-millis":
            return datetime.datetime(1970, 1, 1) + datetime.timedelta(
                milliseconds=r.randint(0, 2**41))
        if logical == "time-millis":
            return datetime.time(r.randint(0, 23), r.randint(0, 59), r.randint(0, 59),
                                 r.randint(0, 999) * 1000)
        if logical == "decimal":
            digits = int(s["precision"])
            return decimal.Decimal(r.randint(-10**digits + 1, 10**digits - 1)).scaleb(
                -int(s["scale"]))
        if logical == "uuid":
            return str(uuid.UUID(int=r.getrandbits(128)))
        if kind == "enum":
            return r.choice(s["symbols"])
        if kind == "fixed":
            return r.randbytes(int(s["size"]))
        if kind == "array":
            return [self.value(s["items"]) for _ in range(r.randint(0, 3))]
        if kind == "map":
            return {f"k{i}": self.value(s["values"]) for i in range(r.randint(0, 3))}
        if kind == "record":
            return {f["name"]: self.value(f["type"]) for f in s["fields"]}
        return self.value(kind)

    # writer schemas evolved from a reader schema
    def evolve(self, reader: Any) -> Any:
        """A writer schema the reader schema can read (the Avro spec's resolution rules)."""
        r = self.rng
        w = copy.deepcopy(reader)
        if isinstance(w, str):
            # reader type -> writer types it reads
            promoted = {"long": ["int"], "float": ["int", "long"],
                        "double": ["int", "long", "float"], "string": ["bytes"],
                        "bytes": ["string"]}
            return r.choice(promoted[w]) if w in promoted and r.random() < 0.5 else w
        if isinstance(w, list):
            if w == ["null", "long"] and r.random() < 0.5:
                return ["null", "int"]
            if w == ["int", "long"] and r.random() < 0.5:
                return "int"  # a non-union writer read by a union reader
            return w
        if w.get("type") == "enum" and r.random() < 0.5:
            w["symbols"] = [*w["symbols"], "EXTRA"]
            reader["default"] = "A"  # the reader takes unknown symbols as its default
            return w
        if w.get("type") != "record":
            return w
        fields = []
        for rf in reader["fields"]:
            roll = r.random()
            if roll < 0.15:
                rf["default"] = None
                rf["type"] = ["null", rf["type"]] if not isinstance(rf["type"], list) \
                    or "null" not in rf["type"] else rf["type"]
                if isinstance(rf["type"], list) and rf["type"][0] != "null":
                    rf["type"] = ["null", *[t for t in rf["type"] if t != "null"]]
                continue  # the writer lacks the field: the reader's default
            wf = {"name": rf["name"], "type": self.evolve(rf["type"])}
            if roll < 0.25:
                rf["aliases"] = [f"old_{rf['name']}"]
                wf["name"] = f"old_{rf['name']}"
            fields.append(wf)
        for i in range(r.randint(0, 2)):
            fields.insert(r.randint(0, len(fields)),
                          {"name": f"gone{i}", "type": self.schema(2)})
        if r.random() < 0.3:
            r.shuffle(fields)
        w["fields"] = fields
        return w


def _frame(writer: Any, value: Any) -> bytes:
    out = io.BytesIO()
    out.write(b"\0\0\0\0\1")
    schemaless_writer(out, writer, value)
    return out.getvalue()


def _both(writer_json: Any, reader_json: Any, values: list[Any]) -> tuple[Any, Any]:
    """(fastavro + mapping + pa.array, columnar) for the values written with the writer."""
    writer = parse_schema(copy.deepcopy(writer_json), expand=True)
    reader = parse_schema(copy.deepcopy(reader_json), expand=True)
    payloads: list[bytes | None] = [None if v is None else _frame(writer, v) for v in values]
    mapping = avro_mapping(reader_json)
    oracle = []
    for p in payloads:
        if p is None:
            oracle.append(None)
            continue
        decoded = schemaless_reader(io.BytesIO(p[5:]), writer, reader, return_record_name=True)
        oracle.append(decoded if mapping.convert is None else mapping.convert(decoded))
    expected = pa.array(oracle, arrow_type(mapping.data_type))
    got = decode_bare(AvroColumns(reader, mapping.data_type), writer, payloads, 5)
    return expected, got


@pytest.mark.parametrize("seed", range(60))
def test_columnar_decode_equals_fastavro_for_random_schemas(seed: int) -> None:
    gen = _Gen(seed)
    schema = gen.record(3)
    values = [gen.value(schema) for _ in range(25)] + [None]
    expected, got = _both(schema, schema, values)
    assert got.type == expected.type
    assert got.to_pylist() == expected.to_pylist(), f"seed {seed}: {schema}"


@pytest.mark.parametrize("seed", range(60))
def test_columnar_decode_resolves_evolved_writer_schemas_as_fastavro(seed: int) -> None:
    gen = _Gen(1000 + seed)
    reader = gen.record(3)
    writer = gen.evolve(reader)  # also sets the defaults and aliases it relies on
    values = [gen.value(writer) for _ in range(25)] + [None]
    expected, got = _both(writer, reader, values)
    assert got.type == expected.type
    assert got.to_pylist() == expected.to_pylist(), f"seed {seed}: {writer} -> {reader}"


def test_reader_unions_take_the_first_matching_branch_and_defaults_fill_added_fields() -> None:
    reader = {"type": "record", "name": "R", "fields": [
        {"name": "n", "type": ["null", "double", "long"]},
        {"name": "u", "type": ["null", "string", {"type": "record", "name": "P", "fields": [
            {"name": "x", "type": "int"}]}]},
        {"name": "added", "type": {"type": "array", "items": "string"}, "default": ["a", "b"]},
        {"name": "point", "type": "P", "default": {"x": 4}},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X", "Y"]},
         "default": "Y"},
    ]}
    writer = {"type": "record", "name": "R", "fields": [
        {"name": "n", "type": "int"},  # -> double, the first branch that takes an int
        {"name": "u", "type": ["bytes", {"type": "record", "name": "P", "fields": [
            {"name": "x", "type": "int"}, {"name": "y", "type": "string"}]}]},
    ]}
    values = [{"n": 3, "u": b"text"}, {"n": -1, "u": {"x": 1, "y": "dropped"}}]
    expected, got = _both(writer, reader, values)
    assert got.to_pylist() == expected.to_pylist()
    assert got.to_pylist()[0]["n"] == {"member0": 3.0, "member1": None}
    assert got.to_pylist()[1]["u"] == {"member0": None, "member1": {"x": 1}}
    assert got.to_pylist()[0]["added"] == ["a", "b"]
    assert got.to_pylist()[1]["point"] == {"x": 4}


def _payload(*parts: bytes) -> bytes:
    return b"".join(parts)


def _zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


@pytest.mark.parametrize(("schema", "payload", "error"), [
    # truncated: a string longer than the payload, a double cut short
    ("string", _zigzag(10) + b"abc", "truncated"),
    ("double", b"\0\0\0", "truncated"),
    # a count of 2**40 longs in a few bytes: refused before any item is read
    ({"type": "array", "items": "long"}, _zigzag(2**40) + b"\2", "beyond the payload"),
    ({"type": "map", "values": "null"}, _zigzag(2**40) + b"\2k", "beyond the payload"),
    # zero-byte items: no byte bounds the count, max.collection.items does
    ({"type": "array", "items": "null"}, _zigzag(10_000_001) + b"\0",
     "max.collection.items"),
    ({"type": "enum", "name": "E", "symbols": ["A"]}, _zigzag(-1), "negative"),
    (["null", "long"], _zigzag(5), "out of range"),
    ("long", b"\xff" * 11, "longer than 10 bytes"),
    ("int", _zigzag(1) + b"extra", "bytes left"),
])
def test_bad_payloads_are_refused_with_a_serialization_error(
        schema: Any, payload: bytes, error: str) -> None:
    parsed = parse_schema(schema, expand=True)
    columns = AvroColumns(parsed, avro_mapping(schema).data_type)
    with pytest.raises(SerializationError, match=error):
        decode_bare(columns, parsed, [payload])


def _record(value: bytes | None, offset: int) -> ConsumerRecord[Any, Any]:
    return ConsumerRecord("t", 0, offset, 0, TimestampType.CREATE_TIME, None, value)


def test_a_batch_the_columns_cannot_take_is_decoded_record_by_record(
        client: SchemaRegistryClient) -> None:
    """Registry-backed: the batch decoder falls back to the row path for a batch with a
    record that is not registry-framed, or with a payload the bounds scan refuses
    (an array of nulls: zero-byte items, so every payload is scanned as the registry
    deserializer does), and that path gives every record its own value or error."""
    subject = f"cols-{uuid.uuid4().hex[:8]}-value"
    text = ('{"type": "record", "name": "N", "fields": [{"name": "xs", "type": '
            '{"type": "array", "items": "null"}}, {"name": "q", "type": "int"}]}')
    sid = client.register_schema(subject, Schema(text, "AVRO"))
    plan = FieldPlan("avro", client.get_latest_version(subject).schema)
    data_type = plan.spark_type()
    decoder = AvroColumnDecoder(plan, client, data_type, RowDecoder(row_decoder(plan, client),
                                                                    data_type))
    prefix = b"\0" + struct.pack(">I", sid)
    good = [prefix + _zigzag(1) + b"\0" + _zigzag(q) for q in range(3)]

    array, errors = decoder.decode(Chunk([_record(v, i) for i, v in enumerate(good)]),
                                   MessageField.VALUE)
    assert errors == {}
    assert array.to_pylist() == [{"xs": [None], "q": q} for q in range(3)]
    assert decoder.fallbacks == 0  # decoded column-wise
    # the plain bytes -> array function (for an arrow_udf) gives the same, and raises
    assert decoder.decode_payloads([*good, None]).to_pylist() == [*array.to_pylist(), None]
    with pytest.raises(SerializationError, match="not a registry-framed"):
        decoder.decode_payloads([good[0], b"\1not framed"])

    hostile = prefix + _zigzag(20_000_000) + b"\0" + _zigzag(1)  # 20M nulls from 5 bytes
    batch = [good[0], b"not framed", hostile, None, good[2]]
    array, errors = decoder.decode(Chunk([_record(v, i) for i, v in enumerate(batch)]),
                                   MessageField.VALUE)
    assert decoder.fallbacks == 1
    assert sorted(errors) == [1, 2]
    assert "max.collection.items" in str(errors[2])
    assert array.to_pylist() == [{"xs": [None], "q": 0}, None, None, None,
                                 {"xs": [None], "q": 2}]


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_a_task_decodes_two_schema_versions_column_wise(
        tansu_broker: Any, client: SchemaRegistryClient, registry_url: str, topic_name: str,
        caplog: pytest.LogCaptureFixture) -> None:
    """Tansu + the embedded registry, the task run directly: records written with v1 and
    v2 of a subject come out in v2's shape (v1's records with v2's default), through the
    columnar decoder (no batch falls back to the row path)."""
    import json
    import logging

    from kontrakt.clients.serializing import SerializingProducer
    from kontrakt.serde import AvroSerializer
    from kontrakt.spark._fieldplan import resolve_column
    from kontrakt.spark._options import parse_options
    from kontrakt.spark._plan import plan_ranges
    from kontrakt.spark._task import read_range

    v1 = {"type": "record", "name": "Order", "fields": [
        {"name": "id", "type": "int"}, {"name": "name", "type": "string"}]}
    v2 = {"type": "record", "name": "Order", "fields": [
        {"name": "id", "type": "long"}, {"name": "name", "type": "string"},
        {"name": "qty", "type": ["null", "int"], "default": None},
        {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []}]}
    tansu_broker.create_topic(topic_name, 1)
    for schema, rows in ((v1, [{"id": i, "name": f"n{i}"} for i in range(3)]),
                         (v2, [{"id": 2**40 + i, "name": "é", "qty": i, "tags": ["t"]}
                               for i in range(3)])):
        with SerializingProducer({"bootstrap.servers": tansu_broker.bootstrap_servers,
                                  "value.serializer": AvroSerializer(client, json.dumps(schema))}
                                 ) as producer:
            for row in rows:
                producer.send(topic_name, row, partition=0)
            producer.flush(10)

    opts = parse_options({"kafka.bootstrap.servers": tansu_broker.bootstrap_servers,
                          "subscribe": topic_name, "value.format": "avro",
                          "schema.registry.url": registry_url})
    with SchemaRegistryClient({"url": registry_url}) as c:
        key, value = resolve_column(opts, c, True), resolve_column(opts, c, False)
    with caplog.at_level(logging.DEBUG, logger="kontrakt.spark"):
        batches = [b for rng in plan_ranges(opts) for b in read_range(opts, key, value, rng)]
    assert "record by record" not in caplog.text
    assert pa.Table.from_batches(batches).column("value").to_pylist() == [
        *({"id": i, "name": f"n{i}", "qty": None, "tags": []} for i in range(3)),
        *({"id": 2**40 + i, "name": "é", "qty": i, "tags": ["t"]} for i in range(3))]


def test_a_null_in_a_nullable_float_double_union_is_null_on_the_row_path() -> None:
    # Found by the differential test: the row path's converter called float(None).
    convert = avro_mapping(["null", "float", "double"]).convert
    assert convert is not None
    assert convert(None) is None
    assert convert(2) == 2.0
