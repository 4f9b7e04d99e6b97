"""Byte identity with confluent-kafka-python's serializers (the test-only oracle).

For each format, 1,000 varied records are serialized by kontrakt and by confluent-kafka
against the same registry; the bytes must be equal, and each side must decode the other's.
Avro and JSON Schema use the embedded registry server (Confluent's own registry client talks to
it over HTTP); Protobuf uses a shared in-process registry, see ``test_protobuf_on_server``.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import random
import string
import uuid
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from kontrakt.registry import SchemaRegistryClient
from kontrakt.registry.server import RegistryServer
from kontrakt.serde import (
    AvroDeserializer,
    AvroSerializer,
    JSONDeserializer,
    JSONSerializer,
    MessageField,
    ProtobufDeserializer,
    ProtobufSerializer,
    SerializationContext,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
)
from tests.unit.serde._support import FakeRegistry, proto_modules

with warnings.catch_warnings():
    # authlib (imported by confluent's registry client) warns about its httpx integration.
    warnings.simplefilter("ignore")
    from confluent_kafka import schema_registry as csr
    from confluent_kafka.schema_registry import avro as cavro
    from confluent_kafka.schema_registry import json_schema as cjson
    from confluent_kafka.schema_registry import protobuf as cproto
    from confluent_kafka.serialization import MessageField as CField
    from confluent_kafka.serialization import SerializationContext as CContext

pytestmark = [
    pytest.mark.interop,
    # authlib, loaded lazily by confluent's registry client, warns about its httpx integration
    pytest.mark.filterwarnings("ignore:The httpx module is deprecated"),
]
N = 1000

AVRO_SCHEMA = json.dumps({
    "type": "record", "name": "Event", "namespace": "com.example.interop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "small", "type": "int"},
        {"name": "ratio", "type": "double"},
        {"name": "ratio32", "type": "float"},
        {"name": "ok", "type": "boolean"},
        {"name": "name", "type": "string"},
        {"name": "blob", "type": "bytes"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "kind", "type": {"type": "enum", "name": "Kind",
                                  "symbols": ["A", "B", "C"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "where", "type": {"type": "record", "name": "Point", "fields": [
            {"name": "x", "type": "double"}, {"name": "y", "type": "double"}]}},
        {"name": "path", "type": {"type": "array", "items": "Point"}},
        {"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 4}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal",
                                    "precision": 10, "scale": 2}},
        {"name": "choice", "type": ["null", "long", "string", "Point"]},
    ],
})
JSON_SCHEMA = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "JEvent", "type": "object",
    "properties": {
        "id": {"type": "integer"}, "ratio": {"type": "number"}, "ok": {"type": "boolean"},
        "name": {"type": "string"}, "note": {"type": ["string", "null"]},
        "kind": {"enum": ["A", "B", "C"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "attrs": {"type": "object", "additionalProperties": {"type": "integer"}},
        "where": {"type": "object", "properties": {"x": {"type": "number"},
                                                   "y": {"type": "number"}},
                  "required": ["x", "y"]},
    },
    "required": ["id", "name", "kind"],
})


def _text(rnd: random.Random) -> str:
    alphabet = string.ascii_letters + string.digits + " éø漢字🙂\"\\\n\t"
    return "".join(rnd.choice(alphabet) for _ in range(rnd.randrange(0, 20)))


def _point(rnd: random.Random) -> dict[str, float]:
    return {"x": rnd.uniform(-1e6, 1e6), "y": rnd.choice([0.0, -0.0, 1e-300, rnd.random()])}


def avro_records(seed: int) -> Iterator[dict[str, Any]]:
    rnd = random.Random(seed)
    for i in range(N):
        yield {
            "id": rnd.choice([0, -1, 2**63 - 1, -(2**63), rnd.randrange(-(2**40), 2**40)]),
            "small": rnd.randrange(-(2**31), 2**31),
            "ratio": rnd.choice([rnd.uniform(-1e9, 1e9), float("inf"), 0.1, -2.5e-300]),
            "ratio32": rnd.uniform(-1e6, 1e6),
            "ok": rnd.random() < 0.5,
            "name": _text(rnd),
            "blob": rnd.randbytes(rnd.randrange(0, 16)),
            "note": rnd.choice([None, _text(rnd)]),
            "kind": rnd.choice("ABC"),
            "tags": [_text(rnd) for _ in range(rnd.randrange(0, 4))],
            "attrs": {_text(rnd): rnd.randrange(-1000, 1000) for _ in range(rnd.randrange(0, 3))},
            "where": _point(rnd),
            "path": [_point(rnd) for _ in range(rnd.randrange(0, 3))],
            "digest": rnd.randbytes(4),
            "at": dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc)
            + dt.timedelta(milliseconds=rnd.randrange(0, 10**11)),
            "day": dt.date(1970, 1, 1) + dt.timedelta(days=rnd.randrange(0, 40000)),
            "uid": uuid.UUID(int=rnd.getrandbits(128)),
            "amount": decimal.Decimal(rnd.randrange(-10**8, 10**8)).scaleb(-2),
            "choice": rnd.choice([None, rnd.randrange(-99, 99), _text(rnd), _point(rnd)]),
            "_i": i,
        }


def json_records(seed: int) -> Iterator[dict[str, Any]]:
    rnd = random.Random(seed)
    for _ in range(N):
        rec: dict[str, Any] = {"id": rnd.randrange(-(2**53), 2**53), "name": _text(rnd),
                               "kind": rnd.choice("ABC")}
        if rnd.random() < 0.7:
            rec["ratio"] = rnd.choice([rnd.uniform(-1e9, 1e9), 1e16, 1.5, -0.0, 3])
        if rnd.random() < 0.7:
            rec["ok"] = rnd.random() < 0.5
        if rnd.random() < 0.5:
            rec["note"] = rnd.choice([None, _text(rnd)])
        if rnd.random() < 0.5:
            rec["tags"] = [_text(rnd) for _ in range(rnd.randrange(0, 4))]
        if rnd.random() < 0.5:
            rec["attrs"] = {_text(rnd): rnd.randrange(-9, 9) for _ in range(rnd.randrange(3))}
        if rnd.random() < 0.5:
            rec["where"] = _point(rnd)
        yield rec


@pytest.fixture(scope="module")
def server() -> Iterator[RegistryServer]:
    with RegistryServer() as srv:
        yield srv


@pytest.fixture()
def clients(server: RegistryServer) -> Iterator[tuple[Any, SchemaRegistryClient]]:
    theirs = csr.SchemaRegistryClient({"url": server.url})
    ours = SchemaRegistryClient({"url": server.url})
    yield theirs, ours
    ours.close()
    theirs.__exit__(None, None, None)


def _contexts(topic: str) -> tuple[SerializationContext, Any]:
    return SerializationContext(topic, MessageField.VALUE), CContext(topic, CField.VALUE)


def _strip(rec: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in rec.items() if k != "_i"}


@pytest.mark.parametrize("strategy,cstrategy", [
    (None, None),
    (record_subject_name_strategy, csr.record_subject_name_strategy),
    (topic_record_subject_name_strategy, csr.topic_record_subject_name_strategy),
])
def test_avro_byte_identity(clients: tuple[Any, SchemaRegistryClient], strategy: Any,
                            cstrategy: Any) -> None:
    confluent_client, client = clients
    conf = {} if strategy is None else {"subject.name.strategy": strategy}
    cconf = {} if cstrategy is None else {"subject.name.strategy": cstrategy}
    ours = AvroSerializer(client, AVRO_SCHEMA, conf=conf)
    theirs = cavro.AvroSerializer(confluent_client, AVRO_SCHEMA, conf=cconf)
    our_de = AvroDeserializer(client)
    their_de = cavro.AvroDeserializer(confluent_client)
    ctx, cctx = _contexts("avro-interop")
    for rec in avro_records(1):
        value = _strip(rec)
        mine, yours = ours(value, ctx), theirs(value, cctx)
        assert mine == yours, rec["_i"]
        assert our_de(yours, ctx) == their_de(mine, cctx)


def test_avro_compiled_codec_matches_confluents_bytes(
        clients: tuple[Any, SchemaRegistryClient]) -> None:
    """The compiled writer alone (no fall-back to fastavro: every field of these records is
    of the exact type it encodes) writes Confluent's payload, and the compiled reader reads
    it as Confluent's deserializer does."""
    import fastavro

    from kontrakt.serde._avro_read import compile_reader
    from kontrakt.serde._avro_write import compile_writer

    confluent_client, _ = clients
    theirs = cavro.AvroSerializer(confluent_client, AVRO_SCHEMA)
    their_de = cavro.AvroDeserializer(confluent_client)
    parsed = fastavro.parse_schema(json.loads(AVRO_SCHEMA))
    write, read = compile_writer(parsed), compile_reader(parsed)
    _, cctx = _contexts("avro-compiled")
    for rec in list(avro_records(7))[:200]:
        value = _strip(rec)
        yours = theirs(value, cctx)
        out = bytearray(yours[:5])
        write(out, value)
        assert bytes(out) == yours, rec["_i"]
        assert read(yours, 5) == (their_de(yours, cctx), len(yours))


def test_avro_reader_schema_both_ways(clients: tuple[Any, SchemaRegistryClient]) -> None:
    confluent_client, client = clients
    v2 = json.loads(AVRO_SCHEMA)
    v2["fields"].append({"name": "added", "type": "string", "default": "dflt"})
    ctx, cctx = _contexts("avro-evolve")
    ours = AvroSerializer(client, AVRO_SCHEMA)
    theirs = cavro.AvroSerializer(confluent_client, AVRO_SCHEMA)
    our_de = AvroDeserializer(client, json.dumps(v2))
    their_de = cavro.AvroDeserializer(confluent_client, json.dumps(v2))
    for rec in list(avro_records(2))[:100]:
        value = _strip(rec)
        got = our_de(theirs(value, cctx), ctx)
        assert got["added"] == "dflt" and got == their_de(ours(value, ctx), cctx)


def test_json_byte_identity(clients: tuple[Any, SchemaRegistryClient]) -> None:
    confluent_client, client = clients
    ours = JSONSerializer(JSON_SCHEMA, client)
    theirs = cjson.JSONSerializer(JSON_SCHEMA, confluent_client)
    our_de = JSONDeserializer(None, schema_registry_client=client)
    their_de = cjson.JSONDeserializer(None, schema_registry_client=confluent_client)
    ctx, cctx = _contexts("json-interop")
    for i, rec in enumerate(json_records(3)):
        mine, yours = ours(rec, ctx), theirs(rec, cctx)
        assert mine == yours, i
        assert our_de(yours, ctx) == their_de(mine, cctx) == rec


def _orders(pb: dict[str, Any], seed: int) -> Iterator[Any]:
    rnd = random.Random(seed)
    order_pb2, common_pb2 = pb["order"], pb["common"]
    for _ in range(N):
        o = order_pb2.Order(id=_text(rnd), status=rnd.choice([0, 1, 2, 3]),
                            gift=rnd.random() < 0.5, delta=rnd.randrange(-(2**62), 2**62),
                            blob=rnd.randbytes(rnd.randrange(0, 8)))
        for _ in range(rnd.randrange(0, 3)):
            line = o.lines.add(sku=_text(rnd), qty=rnd.randrange(-5, 500))
            line.price.units = rnd.randrange(0, 10**6)
            line.price.currency = rnd.choice(["EUR", "USD", ""])
            for _ in range(rnd.randrange(0, 2)):
                line.notes.add(text=_text(rnd))
        if rnd.random() < 0.5:
            o.total.CopyFrom(common_pb2.Money(currency="NOK", units=rnd.randrange(10**9)))
        if rnd.random() < 0.5:
            o.created.seconds = rnd.randrange(0, 2**33)
        for _ in range(rnd.randrange(0, 3)):
            o.tags[_text(rnd)] = _text(rnd)
        if rnd.random() < 0.5:
            o.discount = rnd.random()
        if rnd.random() < 0.3:
            o.header.source = _text(rnd)
        yield o


@pytest.mark.parametrize("message_path", ["Order", "Order.Line", "Order.Line.Note", "Header"])
def test_protobuf_byte_identity(message_path: str) -> None:
    pb = proto_modules()
    registry = FakeRegistry()
    cls: Any = pb["order"]
    for part in message_path.split("."):
        cls = getattr(cls, part)
    ours = ProtobufSerializer(cls, registry)
    theirs = cproto.ProtobufSerializer(cls, registry, {
        "use.deprecated.format": False,
        # explicit, so confluent does not ask this minimal registry for topic associations
        "subject.name.strategy": csr.topic_subject_name_strategy})
    their_de = cproto.ProtobufDeserializer(cls, {"use.deprecated.format": False})
    our_de = ProtobufDeserializer(cls)
    generic = ProtobufDeserializer(None, schema_registry_client=registry)
    ctx, cctx = _contexts("proto-interop")
    count = N if message_path == "Order" else 100
    for i, order in enumerate(_orders(pb, 4)):
        if i == count:
            break
        if message_path == "Order":
            msg = order
        elif message_path == "Header":
            msg = order.header
        elif order.lines:
            msg = order.lines[0] if message_path == "Order.Line" else cls(text=order.id)
        else:
            msg = cls()
        mine, yours = ours(msg, ctx), theirs(msg, cctx)
        assert mine == yours, i
        assert our_de(yours, ctx) == their_de(mine, cctx) == msg
        # map entries have no fixed order across classes: compare deterministic encodings
        assert (generic(yours, ctx).SerializeToString(deterministic=True)
                == msg.SerializeToString(deterministic=True))
    assert set(registry.subjects) == {"kontrakt_test/common.proto", "proto-interop-value"}


def test_protobuf_on_server(clients: tuple[Any, SchemaRegistryClient]) -> None:
    """Confluent's Protobuf serializer registers serialized descriptors (base64) with the
    embedded server, which keeps them as .proto text; both sides' serializers then agree byte
    for byte, and both deserializers read the schema back with ``format=serialized``."""
    confluent_client, client = clients
    pb = proto_modules()
    ctx, cctx = _contexts("proto-server")
    first = next(_orders(pb, 5))
    cls = type(first)
    theirs = cproto.ProtobufSerializer(cls, confluent_client, {"use.deprecated.format": False})
    ours = ProtobufSerializer(cls, client)
    their_de = cproto.ProtobufDeserializer(cls, {"use.deprecated.format": False},
                                           confluent_client)
    generic = ProtobufDeserializer(None, schema_registry_client=client)
    for i, msg in enumerate(_orders(pb, 5)):
        if i == 200:
            break
        yours = theirs(msg, cctx)
        mine = ours(msg, ctx)
        assert mine == yours, i
        assert their_de(mine, cctx) == msg
        # a class built from the registry's schema is not the generated class: compare bytes
        # (deterministic, since map entries have no fixed order)
        assert (generic(yours, ctx).SerializeToString(deterministic=True)
                == msg.SerializeToString(deterministic=True)), i
    # The registry stored .proto text (Confluent does the same), and the import is a reference.
    latest = confluent_client.get_latest_version("proto-server-value")
    assert latest.schema.schema_str.startswith('syntax = "proto3";')
    assert [r.name for r in latest.schema.references] == ["kontrakt_test/common.proto"]


def test_header_schema_ids_interop(clients: tuple[Any, SchemaRegistryClient]) -> None:
    confluent_client, client = clients
    from confluent_kafka.schema_registry import header_schema_id_serializer as c_header

    rec = _strip(next(avro_records(6)))
    cheaders: list[tuple[str, bytes]] = []
    cctx = CContext("avro-headers", CField.VALUE, cheaders)
    try:
        payload = cavro.AvroSerializer(confluent_client, AVRO_SCHEMA,
                                       conf={"schema.id.serializer": c_header})(rec, cctx)
    except Exception as e:  # no GUID from the registry: confluent cannot write the header
        pytest.skip(f"registry gives no schema GUIDs: {e}")
    ctx = SerializationContext("avro-headers", MessageField.VALUE, list(cheaders))
    assert AvroDeserializer(client)(payload, ctx) == cavro.AvroDeserializer(confluent_client)(
        payload, cctx)
    # and the other way: kontrakt writes the GUID header, confluent reads it
    from kontrakt.serde import header_schema_id_serializer

    headers: list[tuple[str, bytes | None]] = []
    ours = AvroSerializer(client, AVRO_SCHEMA,
                          conf={"schema.id.serializer": header_schema_id_serializer})
    mine = ours(rec, SerializationContext("avro-headers", MessageField.VALUE, headers))
    assert mine == payload and headers == cheaders
    assert cavro.AvroDeserializer(confluent_client)(
        mine, CContext("avro-headers", CField.VALUE, headers)) == AvroDeserializer(client)(
        mine, SerializationContext("avro-headers", MessageField.VALUE, headers))
