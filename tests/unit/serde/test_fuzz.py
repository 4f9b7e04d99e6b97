"""Arbitrary bytes never escape as anything but a typed deserialization error."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kontrakt.errors import ValueDeserializationError
from kontrakt.registry import MockSchemaRegistryClient
from kontrakt.serde import (
    AvroDeserializer,
    AvroSerializer,
    JSONDeserializer,
    JSONSerializer,
    MessageField,
    ProtobufDeserializer,
    ProtobufSerializer,
    SerializationContext,
)
from tests.unit.serde._support import FakeRegistry, proto_modules

CTX = SerializationContext("fuzz", MessageField.VALUE, partition=0, offset=1)
AVRO = json.dumps({"type": "record", "name": "F", "fields": [
    {"name": "a", "type": "long"}, {"name": "s", "type": "string"},
    {"name": "u", "type": ["null", "double", {"type": "array", "items": "int"}]},
    {"name": "m", "type": {"type": "map", "values": "bytes"}}]})
JSON = json.dumps({"type": "object", "title": "F", "properties": {"a": {"type": "integer"}}})


@pytest.fixture(scope="module")
def decoders() -> dict[str, tuple[Any, bytes]]:
    registry = MockSchemaRegistryClient({"url": "mock://fuzz"})
    avro = AvroSerializer(registry, AVRO)({"a": 1, "s": "x", "u": [1], "m": {"k": b"v"}}, CTX)
    js = JSONSerializer(JSON, registry)({"a": 1}, SerializationContext("fuzz-json"))
    pb = proto_modules()
    fake = FakeRegistry()
    order = pb["order"].Order(id="x")
    proto = ProtobufSerializer(type(order), fake)(order, CTX)
    assert avro is not None and js is not None and proto is not None
    return {
        "avro": (AvroDeserializer(registry), avro[:5]),
        "json": (JSONDeserializer(None, schema_registry_client=registry), js[:5]),
        "proto": (ProtobufDeserializer(None, schema_registry_client=fake), proto[:7]),
    }


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["avro", "json", "proto"]), body=st.binary(max_size=64),
       keep_prefix=st.booleans())
def test_garbage_is_a_typed_error(decoders: dict[str, tuple[Any, bytes]], kind: str,
                                  body: bytes, keep_prefix: bool) -> None:
    decode, prefix = decoders[kind]
    data = prefix + body if keep_prefix else body
    try:
        decode(data, CTX)
    except ValueDeserializationError as e:
        assert "topic 'fuzz'" in str(e) and e.record == data
