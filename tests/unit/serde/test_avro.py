from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from kontrakt.errors import (
    ConfigError,
    KeySerializationError,
    SchemaRegistryError,
    ValueDeserializationError,
    ValueSerializationError,
)
from kontrakt.registry import AsyncMockSchemaRegistryClient, MockSchemaRegistryClient, Schema
from kontrakt.serde import (
    AsyncAvroDeserializer,
    AsyncAvroSerializer,
    AvroDeserializer,
    AvroSerializer,
    MessageField,
    SerializationContext,
    header_schema_id_serializer,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
)

USER_V1 = json.dumps({
    "type": "record", "name": "User", "namespace": "com.example",
    "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"},
               {"name": "email", "type": ["null", "string"], "default": None}],
})
USER_V2 = json.dumps({
    "type": "record", "name": "User", "namespace": "com.example",
    "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"},
               {"name": "email", "type": ["null", "string"], "default": None},
               {"name": "tier", "type": "string", "default": "basic"}],
})
CTX = SerializationContext("users", MessageField.VALUE)


@pytest.fixture()
def registry() -> MockSchemaRegistryClient:
    return MockSchemaRegistryClient({"url": "mock://serde"})


def test_round_trip_and_framing(registry: MockSchemaRegistryClient) -> None:
    ser = AvroSerializer(registry, USER_V1)
    data = ser({"id": 7, "name": "ann", "email": None}, CTX)
    assert data is not None and data[0] == 0
    sid = int.from_bytes(data[1:5], "big")
    assert registry.get_latest_version("users-value").schema_id == sid
    assert data[5:] == b"\x0e\x06ann\x00"  # zig-zag 7, "ann", union branch 0
    assert AvroDeserializer(registry)(data, CTX) == {"id": 7, "name": "ann", "email": None}
    assert ser(None, CTX) is None


def test_registry_called_once_per_subject(registry: MockSchemaRegistryClient) -> None:
    ser = AvroSerializer(registry, USER_V1)
    de = AvroDeserializer(registry)
    before = registry.requests_sent
    for i in range(50):
        de(ser({"id": i, "name": "x"}, CTX), CTX)
    assert registry.requests_sent - before <= 2


def test_reader_schema_evolution(registry: MockSchemaRegistryClient) -> None:
    data = AvroSerializer(registry, USER_V1)({"id": 1, "name": "a"}, CTX)
    got = AvroDeserializer(registry, USER_V2)(data, CTX)
    assert got == {"id": 1, "name": "a", "email": None, "tier": "basic"}
    # use.latest.version: the subject's newest schema is the reader
    registry.register_schema("users-value", Schema(USER_V2, "AVRO"))
    got = AvroDeserializer(registry, conf={"use.latest.version": True})(data, CTX)
    assert got["tier"] == "basic"


def test_use_latest_version_serializer(registry: MockSchemaRegistryClient) -> None:
    sid = registry.register_schema("users-value", Schema(USER_V2, "AVRO"))
    ser = AvroSerializer(registry, None, conf={"auto.register.schemas": False,
                                               "use.latest.version": True})
    data = ser({"id": 1, "name": "a", "tier": "gold"}, CTX)
    assert data is not None and int.from_bytes(data[1:5], "big") == sid
    with pytest.raises(ConfigError):
        AvroSerializer(registry, USER_V1, conf={"use.latest.version": True})


def test_strategies_and_lookup_only(registry: MockSchemaRegistryClient) -> None:
    AvroSerializer(registry, USER_V1, conf={
        "subject.name.strategy": record_subject_name_strategy})({"id": 1, "name": "a"}, CTX)
    AvroSerializer(registry, USER_V1, conf={
        "subject.name.strategy": topic_record_subject_name_strategy})({"id": 1, "name": "a"}, CTX)
    AvroSerializer(registry, USER_V1, conf={
        "subject.name.strategy": lambda ctx, name: f"custom-{name}"})({"id": 1, "name": "a"}, CTX)
    assert set(registry.get_subjects()) >= {
        "com.example.User", "users-com.example.User", "custom-com.example.User"}
    lookup_only = AvroSerializer(registry, USER_V1, conf={"auto.register.schemas": False})
    with pytest.raises(SchemaRegistryError):
        lookup_only({"id": 1, "name": "a"}, SerializationContext("other", MessageField.VALUE))


def test_references(registry: MockSchemaRegistryClient) -> None:
    money = json.dumps({"type": "record", "name": "Money", "namespace": "com.example",
                        "fields": [{"name": "units", "type": "long"},
                                   {"name": "currency", "type": "string"}]})
    registry.register_schema("money", Schema(money, "AVRO"))
    order = json.dumps({"type": "record", "name": "Order", "namespace": "com.example",
                        "fields": [{"name": "total", "type": "com.example.Money"},
                                   {"name": "tax", "type": "Money"}]})
    from kontrakt.registry import SchemaReference
    schema = Schema(order, "AVRO", [SchemaReference("com.example.Money", "money", 1)])
    value = {"total": {"units": 5, "currency": "EUR"}, "tax": {"units": 1, "currency": "EUR"}}
    data = AvroSerializer(registry, schema)(value, CTX)
    assert AvroDeserializer(registry)(data, CTX) == value


def test_return_record_name_and_dicts(registry: MockSchemaRegistryClient) -> None:
    schema = json.dumps({"type": "record", "name": "Env", "fields": [{"name": "body", "type": [
        {"type": "record", "name": "A", "fields": [{"name": "x", "type": "int"}]},
        {"type": "record", "name": "B", "fields": [{"name": "x", "type": "int"}]}]}]})

    class Env:
        def __init__(self, body: object) -> None:
            self.body = body

    ser = AvroSerializer(registry, schema, to_dict=lambda o, ctx: {"body": o.body})
    data = ser(Env(("B", {"x": 1})), CTX)
    got = AvroDeserializer(registry, return_record_name=True,
                           from_dict=lambda d, ctx: Env(d["body"]))(data, CTX)
    assert isinstance(got, Env) and got.body == ("B", {"x": 1})


def test_primitive_and_bytes_schemas(registry: MockSchemaRegistryClient) -> None:
    key = SerializationContext("k", MessageField.KEY)
    data = AvroSerializer(registry, "string")("héllo", key)
    assert registry.get_latest_version("k-key").schema.schema_str == '{"type":"string"}'
    assert AvroDeserializer(registry)(data, key) == "héllo"
    raw = AvroSerializer(registry, '"bytes"')(b"\x00\x01", SerializationContext("b"))
    assert raw is not None and raw[5:] == b"\x00\x01"  # bytes are written as they are
    assert AvroDeserializer(registry)(raw, SerializationContext("b")) == b"\x00\x01"


def test_header_schema_id(registry: MockSchemaRegistryClient) -> None:
    headers: list[tuple[str, bytes | None]] = []
    ctx = SerializationContext("users", MessageField.VALUE, headers)
    ser = AvroSerializer(registry, USER_V1,
                         conf={"schema.id.serializer": header_schema_id_serializer})
    data = ser({"id": 3, "name": "h"}, ctx)
    assert data == b"\x06\x02h\x00" and headers[0][0] == "__value_schema_id"
    assert AvroDeserializer(registry)(data, ctx) == {"id": 3, "name": "h", "email": None}


def test_bad_input(registry: MockSchemaRegistryClient) -> None:
    ser = AvroSerializer(registry, USER_V1)
    de = AvroDeserializer(registry)
    good = ser({"id": 1, "name": "abc"}, CTX)
    assert good is not None
    where = SerializationContext("users", MessageField.VALUE, partition=2, offset=99)
    with pytest.raises(ValueDeserializationError, match=r"magic byte 7.*partition 2, offset 99"):
        de(b"\x07" + good[1:], where)
    with pytest.raises(ValueDeserializationError, match="unknown schema id 9999") as info:
        de(b"\x00\x00\x00\x27\x0f" + good[5:], where)
    assert info.value.record is not None
    with pytest.raises(ValueDeserializationError, match="offset 99"):
        de(good[:-2], where)  # truncated
    with pytest.raises(ValueDeserializationError, match="too short"):
        de(good[:3], where)
    with pytest.raises(ValueDeserializationError, match="left over"):
        de(good + b"\x00", where)
    with pytest.raises(ValueSerializationError, match="users"):
        ser({"id": "x", "name": "a"}, CTX)
    with pytest.raises(KeySerializationError):
        ser({"name": "a"}, SerializationContext("users", MessageField.KEY))


def test_config_errors(registry: MockSchemaRegistryClient) -> None:
    with pytest.raises(ConfigError, match=r"auto\.register\.schemas"):
        AvroSerializer(registry, USER_V1, conf={"auto.register.schema": True})
    with pytest.raises(ConfigError):
        AvroSerializer(registry, USER_V1, conf={"normalize.schemas": "yes"})
    with pytest.raises(ConfigError):
        AvroSerializer(registry, None)
    with pytest.raises(ConfigError):
        AvroDeserializer(registry, conf={"validate": True})


def test_async_forms_share_the_core() -> None:
    async def main() -> None:
        registry = AsyncMockSchemaRegistryClient({"url": "mock://async"})
        ser = AsyncAvroSerializer(registry, USER_V1)
        de = AsyncAvroDeserializer(registry, USER_V2)
        data = await ser({"id": 5, "name": "z", "email": "z@x"}, CTX)
        assert await de(data, CTX) == {"id": 5, "name": "z", "email": "z@x", "tier": "basic"}
        assert await ser(None, CTX) is None
        with pytest.raises(ValueDeserializationError, match="unknown schema id"):
            await de(b"\x00\x00\x00\x30\x39\x00", CTX)
    asyncio.run(main())


def test_guid_header_when_registry_gives_guid(registry: MockSchemaRegistryClient) -> None:
    reg = registry.register_schema_full_response("users-value", Schema(USER_V1, "AVRO"))
    if reg.guid is None:
        pytest.skip("the registry does not hand out schema GUIDs")
    headers: list[tuple[str, bytes | None]] = []
    ctx = SerializationContext("users", MessageField.VALUE, headers)
    AvroSerializer(registry, USER_V1, conf={
        "schema.id.serializer": header_schema_id_serializer})({"id": 1, "name": "g"}, ctx)
    assert headers[0][1] == b"\x01" + uuid.UUID(reg.guid).bytes


def test_use_latest_with_metadata(registry: MockSchemaRegistryClient) -> None:
    from kontrakt.registry import Metadata

    v1 = registry.register_schema("users-value", Schema(
        USER_V1, "AVRO", metadata=Metadata(properties={"app": "billing"})))
    registry.register_schema("users-value", Schema(
        USER_V2, "AVRO", metadata=Metadata(properties={"app": "crm"})))
    ser = AvroSerializer(registry, None, conf={"auto.register.schemas": False,
                                               "use.latest.with.metadata": {"app": "billing"}})
    data = ser({"id": 1, "name": "m"}, CTX)
    assert data is not None and int.from_bytes(data[1:5], "big") == v1
    de = AvroDeserializer(registry, conf={"use.latest.with.metadata": {"app": "crm"}})
    assert de(data, CTX)["tier"] == "basic"  # read with the crm (v2) schema


def test_unrelated_headers_do_not_matter(registry: MockSchemaRegistryClient) -> None:
    data = AvroSerializer(registry, USER_V1)({"id": 2, "name": "u"}, CTX)
    de = AvroDeserializer(registry)
    for headers in ([("trace", b"1")], {"trace": b"1"}, [], None):
        ctx = SerializationContext("users", MessageField.VALUE, headers)  # type: ignore[arg-type]
        assert de(data, ctx) == {"id": 2, "name": "u", "email": None}


def test_key_value_and_none_fields_use_their_own_subjects(
        registry: MockSchemaRegistryClient) -> None:
    ser = AvroSerializer(registry, USER_V1)
    key_schema = json.dumps({"type": "record", "name": "K", "fields": [
        {"name": "k", "type": "string"}]})
    kser = AvroSerializer(registry, key_schema)
    for field, s, v in ((MessageField.KEY, kser, {"k": "a"}),
                        (MessageField.VALUE, ser, {"id": 1, "name": "b"}),
                        (MessageField.NONE, ser, {"id": 2, "name": "c"})):
        ctx = SerializationContext("mixed", field)
        for _ in range(2):  # cold, then warm path
            data = s(v, ctx)
            assert AvroDeserializer(registry)(data, ctx)["name" if "name" in v else "k"] == (
                v.get("name") or v["k"])
    assert {"mixed-key", "mixed-value", "mixed-none"} <= set(registry.get_subjects())
    with pytest.raises(ValueSerializationError):
        ser({"k": "a"}, SerializationContext("mixed", MessageField.VALUE))
