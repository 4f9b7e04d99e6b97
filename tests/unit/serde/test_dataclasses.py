from __future__ import annotations

import datetime as dt
import decimal
import enum
import json
import uuid
from dataclasses import dataclass, field
from typing import Optional

import fastavro
import jsonschema
import pytest

from kontrakt.registry import MockSchemaRegistryClient
from kontrakt.serde import (
    AvroDeserializer,
    AvroSerializer,
    JSONDeserializer,
    JSONSerializer,
    MessageField,
    SerializationContext,
    avro_schema_of,
    json_schema_of,
)


class Tier(enum.Enum):
    BASIC = "basic"
    GOLD = "gold"


@dataclass(frozen=True)
class Address:
    city: str
    zip: Optional[str] = None  # noqa: UP045 - exercising typing.Optional on purpose


@dataclass(frozen=True)
class Customer:
    __avro_namespace__ = "com.example"
    id: uuid.UUID
    name: str
    tier: Tier
    joined: dt.datetime
    birthday: dt.date
    balance: decimal.Decimal = field(metadata={"precision": 12, "scale": 2})
    score: float = 0.0
    active: bool = True
    tags: list[str] = field(default_factory=list)
    attrs: dict[str, int] = field(default_factory=dict)
    home: Address | None = None
    avatar: bytes = b""
    previous: list[Address] = field(default_factory=list)


@dataclass(frozen=True)
class CustomerV1:
    __avro_namespace__ = "com.example"
    __avro_name__ = "Customer"
    id: uuid.UUID
    name: str


@dataclass(frozen=True)
class CustomerV2:
    __avro_namespace__ = "com.example"
    __avro_name__ = "Customer"
    id: uuid.UUID
    name: str
    tier: Tier = Tier.BASIC
    nickname: str | None = None


def _customer() -> Customer:
    return Customer(
        id=uuid.UUID("6a2f41a3-c54c-fce8-32d2-0324e1c32e22"), name="Åsa", tier=Tier.GOLD,
        joined=dt.datetime(2024, 5, 1, 12, 30, 15, 123456, tzinfo=dt.timezone.utc),
        birthday=dt.date(1990, 2, 3), balance=decimal.Decimal("1234.50"), score=0.5,
        tags=["a", "b"], attrs={"x": 1}, home=Address("Oslo", "0150"), avatar=b"\x00\x01",
        previous=[Address("Bergen")])


def test_avro_schema_generation() -> None:
    schema = avro_schema_of(Customer)
    assert schema["name"] == "Customer" and schema["namespace"] == "com.example"
    fields = {f["name"]: f for f in schema["fields"]}
    assert fields["id"]["type"] == {"type": "string", "logicalType": "uuid"}
    assert fields["tier"]["type"]["symbols"] == ["BASIC", "GOLD"]
    assert fields["joined"]["type"]["logicalType"] == "timestamp-micros"
    assert fields["balance"]["type"] == {"type": "bytes", "logicalType": "decimal",
                                         "precision": 12, "scale": 2}
    assert fields["home"]["type"][0] == "null" and fields["home"]["default"] is None
    assert fields["previous"]["type"]["items"] == "Address"  # named once, then referenced
    assert fields["tags"]["default"] == []
    fastavro.parse_schema(schema)  # valid Avro


def test_json_schema_generation() -> None:
    schema = json_schema_of(Customer)
    jsonschema.Draft7Validator.check_schema(schema)
    assert schema["title"] == "Customer"
    assert schema["required"] == ["id", "name", "tier", "joined", "birthday", "balance"]
    assert schema["properties"]["tier"] == {"enum": ["basic", "gold"]}
    assert "Address" in schema["definitions"]


@pytest.fixture()
def registry() -> MockSchemaRegistryClient:
    return MockSchemaRegistryClient({"url": "mock://dc"})


def test_avro_values_come_back_as_dataclass(registry: MockSchemaRegistryClient) -> None:
    ctx = SerializationContext("customers", MessageField.VALUE)
    value = _customer()
    data = AvroSerializer(registry, Customer)(value, ctx)
    got = AvroDeserializer(registry, Customer)(data, ctx)
    assert got == value
    stored = json.loads(registry.get_latest_version("customers-value").schema.schema_str)
    assert stored["name"] == "Customer"


def test_json_values_come_back_as_dataclass(registry: MockSchemaRegistryClient) -> None:
    ctx = SerializationContext("customers-json", MessageField.VALUE)
    value = _customer()
    data = JSONSerializer(Customer, registry)(value, ctx)
    assert data is not None and b'"tier":"gold"' in data
    got = JSONDeserializer(Customer, schema_registry_client=registry)(data, ctx)
    assert got == value


def test_evolution_v1_to_v2(registry: MockSchemaRegistryClient) -> None:
    ctx = SerializationContext("evolve", MessageField.VALUE)
    v1 = CustomerV1(uuid.uuid4(), "bo")
    data = AvroSerializer(registry, CustomerV1)(v1, ctx)
    got = AvroDeserializer(registry, CustomerV2)(data, ctx)
    assert got == CustomerV2(v1.id, "bo", Tier.BASIC, None)
    jctx = SerializationContext("evolve-json", MessageField.VALUE)
    data = JSONSerializer(CustomerV1, registry)(v1, jctx)
    assert JSONDeserializer(CustomerV2, schema_registry_client=registry)(data, jctx) == got


def test_unsupported_types() -> None:
    @dataclass
    class Bad:
        x: int | str

    with pytest.raises(TypeError):
        avro_schema_of(Bad)
    with pytest.raises(TypeError):
        json_schema_of(int)
