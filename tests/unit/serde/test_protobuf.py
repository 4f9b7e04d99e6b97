from __future__ import annotations

import asyncio
import base64
from typing import Any

import pytest
from google.protobuf import descriptor_pb2

from kontrakt.errors import ConfigError, ValueDeserializationError, ValueSerializationError
from kontrakt.registry import MockSchemaRegistryClient, Schema, SchemaReference
from kontrakt.serde import (
    AsyncProtobufDeserializer,
    AsyncProtobufSerializer,
    MessageField,
    ProtobufDeserializer,
    ProtobufSerializer,
    SerializationContext,
    record_subject_name_strategy,
)
from tests.unit.serde._support import FakeRegistry, proto_modules, proto_source

CTX = SerializationContext("orders", MessageField.VALUE)


@pytest.fixture(scope="module")
def pb() -> dict[str, Any]:
    return proto_modules()


def _order(pb: dict[str, Any]) -> Any:
    order_pb2, common_pb2 = pb["order"], pb["common"]
    o = order_pb2.Order(id="o-1", status=common_pb2.PAID, gift=True, delta=-5, blob=b"\x00\xff")
    line = o.lines.add(sku="sku-1", qty=3)
    line.price.units = 10
    line.notes.add(text="fragile")
    o.total.currency = "EUR"
    o.created.seconds = 1_700_000_000
    o.tags["k"] = "v"
    o.discount = 0.25
    o.header.source = "test"
    return o


def test_indexes_and_round_trip(pb: dict[str, Any]) -> None:
    Order = pb["order"].Order
    reg = FakeRegistry()
    cases = [(pb["order"].Header(source="s"), b"\x00"),
             (_order(pb), b"\x02\x02"),
             (Order.Line(sku="x"), b"\x04\x02\x00"),
             (Order.Line.Note(text="n"), b"\x06\x02\x00\x00")]
    for msg, indexes in cases:
        ser = ProtobufSerializer(type(msg), reg)
        data = ser(msg, CTX)
        assert data is not None and data[0] == 0
        assert data[5:5 + len(indexes)] == indexes
        assert data[5 + len(indexes):] == msg.SerializeToString()
        assert ProtobufDeserializer(type(msg))(data, CTX) == msg


def test_imports_registered_as_references(pb: dict[str, Any]) -> None:
    reg = FakeRegistry()
    ProtobufSerializer(pb["order"].Order, reg)(_order(pb), CTX)
    # the import of common.proto is registered under its file name; timestamp is skipped
    assert set(reg.subjects) == {"kontrakt_test/common.proto", "orders-value"}
    root = reg.get_latest_version("orders-value").schema
    assert [(r.name, r.subject, r.version) for r in root.references] == [
        ("kontrakt_test/common.proto", "kontrakt_test/common.proto", 1)]
    fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(root.schema_str))
    assert fdp.name == "kontrakt_test/order.proto"
    reg2 = FakeRegistry()
    ProtobufSerializer(pb["order"].Order, reg2, conf={"skip.known.types": False})(
        _order(pb), CTX)
    assert "google/protobuf/timestamp.proto" in reg2.subjects


def test_generic_decoding_without_generated_class(pb: dict[str, Any]) -> None:
    reg = FakeRegistry()
    msg = _order(pb)
    data = ProtobufSerializer(pb["order"].Order, reg)(msg, CTX)
    got = ProtobufDeserializer(None, schema_registry_client=reg)(data, CTX)
    assert type(got) is not type(msg)  # a dynamic class built from the registry's schema
    assert got.DESCRIPTOR.full_name == "kontrakt.test.Order"
    assert got.SerializeToString() == msg.SerializeToString()
    assert got.lines[0].notes[0].text == "fragile" and got.created.seconds == 1_700_000_000
    note = pb["order"].Order.Line.Note(text="deep")
    data = ProtobufSerializer(type(note), reg)(note, SerializationContext("notes"))
    got = ProtobufDeserializer(None, schema_registry_client=reg)(data, SerializationContext("n"))
    assert got.DESCRIPTOR.full_name == "kontrakt.test.Order.Line.Note" and got.text == "deep"


def test_generic_decoding_from_proto_text(pb: dict[str, Any]) -> None:
    # Schemas registered as .proto text (e.g. by other tools) are compiled at run time.
    reg = MockSchemaRegistryClient({"url": "mock://proto-text"})
    reg.register_schema("kontrakt_test/common.proto",
                        Schema(proto_source("kontrakt_test/common.proto"), "PROTOBUF"))
    sid = reg.register_schema("orders-value", Schema(
        proto_source("kontrakt_test/order.proto"), "PROTOBUF",
        [SchemaReference("kontrakt_test/common.proto", "kontrakt_test/common.proto", 1)]))
    msg = _order(pb)
    data = b"\x00" + sid.to_bytes(4, "big") + b"\x02\x02" + msg.SerializeToString()
    got = ProtobufDeserializer(None, schema_registry_client=reg)(data, CTX)
    assert got.DESCRIPTOR.full_name == "kontrakt.test.Order"
    assert got.SerializeToString() == msg.SerializeToString()


def test_deprecated_format(pb: dict[str, Any]) -> None:
    reg = FakeRegistry()
    line = pb["order"].Order.Line(sku="x")
    data = ProtobufSerializer(type(line), reg, conf={"use.deprecated.format": True})(line, CTX)
    assert data is not None and data[5:8] == b"\x02\x01\x00"
    de = ProtobufDeserializer(type(line), conf={"use.deprecated.format": True})
    assert de(data, CTX) == line


def test_strategies_and_use_latest(pb: dict[str, Any]) -> None:
    reg = FakeRegistry()
    header = pb["order"].Header(source="a")
    ProtobufSerializer(type(header), reg, conf={
        "subject.name.strategy": record_subject_name_strategy})(header, CTX)
    assert "kontrakt.test.Header" in reg.subjects
    ser = ProtobufSerializer(type(header), reg, conf={
        "subject.name.strategy": record_subject_name_strategy,
        "auto.register.schemas": False, "use.latest.version": True})
    data = ser(header, CTX)
    assert data is not None and int.from_bytes(data[1:5], "big") == reg.subjects[
        "kontrakt.test.Header"][-1]


def test_bad_input(pb: dict[str, Any]) -> None:
    reg = FakeRegistry()
    Header = pb["order"].Header
    ser = ProtobufSerializer(Header, reg)
    with pytest.raises(ValueSerializationError, match="Header"):
        ser(pb["order"].Order(), CTX)
    data = ser(Header(source="abc"), CTX)
    assert data is not None
    where = SerializationContext("orders", MessageField.VALUE, partition=1, offset=7)
    generic = ProtobufDeserializer(None, schema_registry_client=reg)
    with pytest.raises(ValueDeserializationError, match=r"magic byte 2.*offset 7"):
        generic(b"\x02" + data[1:], where)
    with pytest.raises(ValueDeserializationError, match="unknown schema id"):
        generic(b"\x00\x00\x00\x10\x00" + data[5:], where)
    with pytest.raises(ValueDeserializationError, match="partition 1"):
        generic(data[:-1], where)  # truncated string
    with pytest.raises(ValueDeserializationError, match="do not exist"):
        generic(data[:5] + b"\x02\x0e" + data[6:], where)  # index 7 is not in the file
    with pytest.raises(ConfigError):
        ProtobufSerializer(dict, reg)
    with pytest.raises(ConfigError):
        ProtobufDeserializer(None)


def test_async(pb: dict[str, Any]) -> None:
    class AsyncFake:
        def __init__(self) -> None:
            self.sync = FakeRegistry()

        def __getattr__(self, name: str) -> Any:
            method = getattr(self.sync, name)

            async def call(*args: Any, **kwargs: Any) -> Any:
                return method(*args, **kwargs)
            return call

    async def main() -> None:
        reg = AsyncFake()
        msg = _order(pb)
        data = await AsyncProtobufSerializer(type(msg), reg)(msg, CTX)
        got = await AsyncProtobufDeserializer(None, schema_registry_client=reg)(data, CTX)
        assert got.SerializeToString() == msg.SerializeToString()
    asyncio.run(main())


def test_custom_reference_strategy(pb: dict[str, Any]) -> None:
    reg = FakeRegistry()
    ser = ProtobufSerializer(pb["order"].Order, reg, conf={
        "reference.subject.name.strategy": lambda ctx, dep: f"{ctx.topic}-{dep.name}"})
    ser(_order(pb), CTX)
    assert "orders-kontrakt_test/common.proto" in reg.subjects
    with pytest.raises(ConfigError):
        ProtobufSerializer(pb["order"].Order, reg, conf={"reference.subject.name.strategy": 1})


def test_warm_paths_cache_every_framing(pb: dict[str, Any]) -> None:
    # The warm path keys readers by the framing head; messages with other indexes than [0]
    # must still be decoded from a cached reader, not loaded again per record.
    Order = pb["order"].Order
    reg = FakeRegistry()
    msgs = [_order(pb), Order.Line(sku="x"), pb["order"].Header(source="s")]
    for msg in msgs:
        ser = ProtobufSerializer(type(msg), reg)
        de = ProtobufDeserializer(None, {"use.deprecated.format": False}, reg)
        loads: list[Any] = []
        load = de._core.load

        def counting(*args: Any, _load: Any = load, _loads: list[Any] = loads) -> Any:
            _loads.append(args[0])
            return _load(*args)

        de._core.load = counting  # type: ignore[method-assign]
        data = ser(msg, CTX)
        assert data is not None
        for _ in range(3):
            assert de(data, CTX).SerializeToString() == msg.SerializeToString()
        assert len(loads) == 1, loads
        # A warm serializer still refuses another type with a typed error, and a warm
        # deserializer still reports bytes that do not decode.
        with pytest.raises(ValueSerializationError, match="writes"):
            ser(object(), CTX)
        with pytest.raises(ValueDeserializationError):
            de(data[:-1] + b"\xff\xff", CTX)
