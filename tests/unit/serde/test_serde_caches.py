"""What the registry-bound serdes cache per record path, and when it must not be reused.

With ``use.latest.version`` a serde resolves the subject's latest version once and reuses
it; like confluent-kafka's serdes (which ask their client, whose latest-version cache has
``cache.latest.ttl.sec``) it must see a newer version once the client's TTL has passed, and
keep the one it has when no TTL is set. The warm paths also key their caches by topic and
field, and by (schema id, message indexes) when reading: key and value, and two message
types of one file on one topic, must never share an entry.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kontrakt.errors import (
    KeySerializationError,
    ValueDeserializationError,
    ValueSerializationError,
)
from kontrakt.registry import (
    AsyncMockSchemaRegistryClient,
    MockSchemaRegistryClient,
    Schema,
)
from kontrakt.registry.server._state import RegistryState
from kontrakt.serde import (
    AsyncProtobufSerializer,
    JSONDeserializer,
    JSONSerializer,
    MessageField,
    ProtobufDeserializer,
    ProtobufSerializer,
    SerializationContext,
    record_subject_name_strategy,
)
from tests.unit.serde._support import proto_modules

TTL = 0.05
LATEST = {"use.latest.version": True, "auto.register.schemas": False}
VALUE = SerializationContext("orders", MessageField.VALUE)
KEY = SerializationContext("orders", MessageField.KEY)

_HEADER_V1 = ('syntax = "proto3";\npackage kontrakt.test;\n'
              "message Header { string source = 1; }\n")
_HEADER_V2 = ('syntax = "proto3";\npackage kontrakt.test;\n'
              "message Header { string source = 1; string note = 2; }\n")


@pytest.fixture(scope="module")
def pb() -> dict[str, Any]:
    return proto_modules()


def _id(data: bytes | None) -> int:
    assert data is not None and data[0] == 0
    return int.from_bytes(data[1:5], "big")


def _until(check: Any, seconds: float = 5.0) -> Any:
    """Call ``check`` until it returns something true (bounded), returning that."""
    deadline = time.monotonic() + seconds
    while True:
        got = check()
        if got or time.monotonic() > deadline:
            return got


def test_serializer_sees_a_new_latest_version_after_the_clients_ttl(pb: dict[str, Any]) -> None:
    reg = MockSchemaRegistryClient({"cache.latest.ttl.sec": TTL})
    v1 = reg.register_schema("orders-value", Schema(_HEADER_V1, "PROTOBUF"))
    header = pb["order"].Header(source="a")
    ser = ProtobufSerializer(type(header), reg, conf=LATEST)
    assert _id(ser(header, VALUE)) == v1
    v2 = reg.register_schema("orders-value", Schema(_HEADER_V2, "PROTOBUF"))
    assert v2 != v1
    # The old id until the TTL has passed (the client still answers it), then the new one;
    # the payload is the message's own bytes either way.
    assert _until(lambda: _id(ser(header, VALUE)) == v2)
    data = ser(header, VALUE)
    assert data is not None and data[6:] == header.SerializeToString()


def test_json_serializer_and_async_form_follow_the_ttl_too(pb: dict[str, Any]) -> None:
    state = RegistryState()
    reg = MockSchemaRegistryClient({"cache.latest.ttl.sec": TTL}, state=state)
    v1 = reg.register_schema("orders-value", Schema('{"type": "object"}', "JSON"))
    ser = JSONSerializer('{"type": "object"}', reg, conf=LATEST)
    assert _id(ser({"a": 1}, VALUE)) == v1
    reg.set_compatibility("orders-value", "NONE")
    v2 = reg.register_schema("orders-value", Schema(
        '{"type": "object", "properties": {"a": {"type": "integer"}}}', "JSON"))
    assert _until(lambda: _id(ser({"a": 1}, VALUE)) == v2)

    async def run() -> None:
        areg = AsyncMockSchemaRegistryClient({"cache.latest.ttl.sec": TTL}, state=state)
        aser = AsyncProtobufSerializer(pb["order"].Header, areg, conf=LATEST)
        header = pb["order"].Header(source="a")
        reg.register_schema("orders-key", Schema(_HEADER_V1, "PROTOBUF"))
        first = _id(await aser(header, KEY))
        v3 = reg.register_schema("orders-key", Schema(_HEADER_V2, "PROTOBUF"))
        assert first != v3
        deadline = time.monotonic() + 5
        while _id(await aser(header, KEY)) != v3:
            assert time.monotonic() < deadline, "the async serializer kept the old version"
    asyncio.run(run())


def test_without_a_ttl_the_latest_version_is_kept_as_confluents_is(
        pb: dict[str, Any]) -> None:
    reg = MockSchemaRegistryClient()
    v1 = reg.register_schema("orders-value", Schema(_HEADER_V1, "PROTOBUF"))
    header = pb["order"].Header(source="a")
    ser = ProtobufSerializer(type(header), reg, conf=LATEST)
    assert _id(ser(header, VALUE)) == v1
    reg.register_schema("orders-value", Schema(_HEADER_V2, "PROTOBUF"))
    time.sleep(3 * TTL)  # no condition to await: nothing is to change
    assert _id(ser(header, VALUE)) == v1


def test_deserializer_reads_with_a_new_latest_version_after_the_clients_ttl(
        pb: dict[str, Any]) -> None:
    reg = MockSchemaRegistryClient({"cache.latest.ttl.sec": TTL})
    reg.register_schema("orders-value", Schema(_HEADER_V1, "PROTOBUF"))
    header = pb["order"].Header(source="a")
    data = ProtobufSerializer(type(header), reg, conf=LATEST)(header, VALUE)
    de = ProtobufDeserializer(None, conf={"use.latest.version": True},
                              schema_registry_client=reg)
    first = de(data, VALUE)
    assert first.source == "a" and "note" not in first.DESCRIPTOR.fields_by_name
    reg.register_schema("orders-value", Schema(_HEADER_V2, "PROTOBUF"))
    # The reader schema is the latest version: once the TTL has passed, v2's message type.
    got = _until(lambda: (lambda m: m if "note" in m.DESCRIPTOR.fields_by_name else None)(
        de(data, VALUE)))
    assert got is not None and got.source == "a"


def test_json_deserializer_with_latest_follows_the_ttl() -> None:
    reg = MockSchemaRegistryClient({"cache.latest.ttl.sec": TTL})
    reg.register_schema("orders-value", Schema('{"type": "object"}', "JSON"))
    data = JSONSerializer('{"type": "object"}', reg, conf=LATEST)({"a": "x"}, VALUE)
    de = JSONDeserializer(None, conf={"use.latest.version": True},
                          schema_registry_client=reg)
    assert de(data, VALUE) == {"a": "x"}
    # v2 makes "a" an integer: the latest version becomes the reader, which refuses "x".
    reg.set_compatibility("orders-value", "NONE")
    reg.register_schema("orders-value", Schema(
        '{"type": "object", "properties": {"a": {"type": "integer"}}}', "JSON"))

    def refused() -> bool:
        try:
            de(data, VALUE)
        except Exception:
            return True
        return False
    assert _until(refused)


def test_key_and_value_of_one_topic_keep_their_own_ids(pb: dict[str, Any]) -> None:
    reg = MockSchemaRegistryClient()
    k = reg.register_schema("orders-key", Schema(_HEADER_V1, "PROTOBUF"))
    v = reg.register_schema("orders-value", Schema(_HEADER_V2, "PROTOBUF"))
    assert k != v
    header = pb["order"].Header(source="a")
    ser = ProtobufSerializer(type(header), reg, conf=LATEST)
    for _ in range(3):  # warm: both come from the caches after the first round
        assert _id(ser(header, VALUE)) == v
        assert _id(ser(header, KEY)) == k
    # Both through the shell's warmest path, each with its own writer.
    assert set(ser._core.value_writes) == set(ser._core.key_writes) == {"orders"}


def test_a_warm_serializer_still_refuses_another_message_type(pb: dict[str, Any]) -> None:
    reg = MockSchemaRegistryClient()
    header_ser = ProtobufSerializer(pb["order"].Header, reg)
    header_ser(pb["order"].Header(source="a"), VALUE)
    with pytest.raises(ValueSerializationError, match="Header"):
        header_ser(pb["order"].Order(id="o"), VALUE)
    header_ser(pb["order"].Header(source="a"), KEY)
    with pytest.raises(KeySerializationError, match="Header"):
        header_ser(pb["order"].Order(id="o"), KEY)


def test_two_message_types_on_one_topic_decode_to_their_own_types(
        pb: dict[str, Any]) -> None:
    reg = MockSchemaRegistryClient()
    conf = {"subject.name.strategy": record_subject_name_strategy}
    header = pb["order"].Header(source="h")
    line = pb["order"].Order.Line(sku="s", qty=2)
    h_data = ProtobufSerializer(type(header), reg, conf=conf)(header, VALUE)
    l_data = ProtobufSerializer(type(line), reg, conf=conf)(line, VALUE)
    assert h_data is not None and l_data is not None
    # One file, so one schema id in both; only the message indexes tell them apart.
    assert _id(h_data) == _id(l_data)
    de = ProtobufDeserializer(None, schema_registry_client=reg)
    for _ in range(3):
        got_h, got_l = de(h_data, VALUE), de(l_data, VALUE)
        assert got_h.DESCRIPTOR.full_name == "kontrakt.test.Header"
        assert got_l.DESCRIPTOR.full_name == "kontrakt.test.Order.Line"
        assert (got_h.source, got_l.sku, got_l.qty) == ("h", "s", 2)


def test_a_ttl_shorter_than_a_lookup_still_writes_every_record(pb: dict[str, Any]) -> None:
    # Each record's resolution has expired before it is used: the record that missed is
    # written with the resolution just made, not looked up in the cache again.
    reg = MockSchemaRegistryClient({"cache.latest.ttl.sec": 1e-6})
    v1 = reg.register_schema("orders-value", Schema(_HEADER_V1, "PROTOBUF"))
    header = pb["order"].Header(source="a")
    ser = ProtobufSerializer(type(header), reg, conf=LATEST)
    de = ProtobufDeserializer(None, conf={"use.latest.version": True},
                              schema_registry_client=reg)
    for _ in range(20):
        data = ser(header, VALUE)
        assert isinstance(data, bytes) and _id(data) == v1
        assert de(data, VALUE).source == "a"


def test_a_warm_deserializer_still_types_a_payload_it_cannot_decode(
        pb: dict[str, Any]) -> None:
    header = pb["order"].Header(source="a")
    data = ProtobufSerializer(type(header), MockSchemaRegistryClient())(header, VALUE)
    assert data is not None
    de = ProtobufDeserializer(type(header))
    assert de(data, VALUE) == header  # warm: the framing head now names a reader
    bad = data[:6] + b"\x0a\xff"  # field 1, a length that runs past the end
    where = SerializationContext("orders", MessageField.VALUE, [], 2, 9)
    with pytest.raises(ValueDeserializationError, match="partition 2, offset 9") as info:
        de(bad, where)
    assert info.value.record == bad
