from __future__ import annotations

import datetime as dt
import decimal
import enum
import uuid
from dataclasses import dataclass, field

import pytest

from kontrakt.errors import ValueSerializationError
from kontrakt.registry import MockSchemaRegistryClient
from kontrakt.serde import (
    MessageField,
    ProtobufDeserializer,
    ProtobufSerializer,
    SerializationContext,
    record_subject_name_strategy,
)
from kontrakt.serde._dataclass_proto import proto_model
from kontrakt.serde._proto_schema import proto_text_to_files


class Side(enum.Enum):
    BUY = "buy"
    SELL = "sell"


@dataclass(frozen=True)
class Leg:
    venue: str
    qty: int


@dataclass(frozen=True)
class Trade:
    __proto_package__ = "kontrakt.models"
    id: uuid.UUID
    symbol: str
    side: Side
    price: decimal.Decimal
    at: dt.datetime
    day: dt.date
    ratio: float = 0.0
    ok: bool = False
    raw: bytes = b""
    note: str | None = None
    count: int | None = None
    main_leg: Leg | None = None
    legs: list[Leg] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    limits: dict[str, int] = field(default_factory=dict)
    by_venue: dict[str, Leg] = field(default_factory=dict)


def _trade(**changes: object) -> Trade:
    base = dict(id=uuid.UUID(int=7), symbol="KTR", side=Side.SELL,
                price=decimal.Decimal("10.25"),
                at=dt.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=dt.timezone.utc),
                day=dt.date(2024, 1, 2), ratio=0.5, ok=True, raw=b"\x01", note="n", count=0,
                main_leg=Leg("X", 1), legs=[Leg("A", 2), Leg("B", 3)], tags=["t"],
                limits={"a": 1}, by_venue={"v": Leg("V", 9)})
    base.update(changes)
    return Trade(**base)  # type: ignore[arg-type]


def test_generated_proto_compiles_to_the_same_descriptor() -> None:
    model = proto_model(Trade)
    assert model.full_name == "kontrakt.models.Trade"
    assert model.file_name == "kontrakt/models/Trade.proto"
    assert "optional string note = 10;" in model.proto_text
    assert "map<string, Leg> by_venue = 16;" in model.proto_text
    # protoc, given the generated text, builds a wire-identical message
    (compiled,) = proto_text_to_files(model.file_name, {model.file_name: model.proto_text})
    ours = model.message_class.DESCRIPTOR.file
    from google.protobuf import descriptor_pb2
    mine = descriptor_pb2.FileDescriptorProto()
    ours.CopyToProto(mine)
    for a, b in zip(mine.message_type, compiled.message_type, strict=True):
        assert [(f.name, f.number, f.type, f.label) for f in a.field] == [
            (f.name, f.number, f.type, f.label) for f in b.field]


def test_round_trip_through_the_registry() -> None:
    registry = MockSchemaRegistryClient({"url": "mock://dcproto"})
    ctx = SerializationContext("trades", MessageField.VALUE)
    ser = ProtobufSerializer(Trade, registry)
    for value in (_trade(), _trade(note=None, count=None, main_leg=None, legs=[], limits={})):
        data = ser(value, ctx)
        assert data is not None
        assert ProtobufDeserializer(Trade)(data, ctx) == value
        # a consumer without the dataclass decodes it from the registry's .proto text
        generic = ProtobufDeserializer(None, schema_registry_client=registry)(data, ctx)
        assert generic.DESCRIPTOR.full_name == "kontrakt.models.Trade"
        assert generic.symbol == "KTR" and generic.HasField("note") == (value.note is not None)
    stored = registry.get_latest_version("trades-value").schema
    assert stored.schema_type == "PROTOBUF" and "message Trade" in stored.schema_str
    ProtobufSerializer(Trade, registry, conf={
        "subject.name.strategy": record_subject_name_strategy})(_trade(), ctx)
    assert "kontrakt.models.Trade" in registry.get_subjects()


def test_wrong_instance() -> None:
    registry = MockSchemaRegistryClient({"url": "mock://dcproto2"})
    with pytest.raises(ValueSerializationError, match="Trade"):
        ProtobufSerializer(Trade, registry)(Leg("a", 1), SerializationContext("t"))
