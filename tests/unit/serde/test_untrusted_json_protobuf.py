"""JSON Schema and Protobuf payloads from untrusted producers.

Neither format needs the Avro bounds: every JSON value and every Protobuf field costs at least
one byte, so the record size bounds what is built, and both parsers bound nesting themselves
(json's recursion check, upb's depth limit of 100). What these tests hold is that each such
refusal surfaces as a typed deserialization error carrying the record, and that an error
message does not echo megabytes of the payload back into logs.
"""

from __future__ import annotations

import json
import struct

from kontrakt.errors import ValueDeserializationError
from kontrakt.registry import MockSchemaRegistryClient, Schema
from kontrakt.serde import (
    JSONDeserializer,
    MessageField,
    ProtobufDeserializer,
    SerializationContext,
)

CTX = SerializationContext("t", MessageField.VALUE)


def framed(registry: MockSchemaRegistryClient, subject: str, schema: Schema,
           payload: bytes, index: bytes = b"") -> bytes:
    sid = registry.register_schema(subject, schema)
    return b"\x00" + struct.pack(">I", sid) + index + payload


def test_json_nesting_beyond_the_parser_is_a_typed_error() -> None:
    registry = MockSchemaRegistryClient({"url": "mock://json"})
    de = JSONDeserializer(schema_registry_client=registry)
    for schema in ({}, {"type": "array", "items": {"$ref": "#"}}):
        data = framed(registry, f"s{len(schema)}", Schema(json.dumps(schema), "JSON"),
                      b"[" * 100_000 + b"]" * 100_000)
        try:
            de(data, CTX)
        except ValueDeserializationError as e:
            assert e.record == data and "RecursionError" in str(e)
        else:
            raise AssertionError("100,000 nested arrays were accepted")


def test_json_validation_errors_do_not_echo_the_payload() -> None:
    registry = MockSchemaRegistryClient({"url": "mock://json"})
    de = JSONDeserializer(schema_registry_client=registry)
    cases = [({"type": "object"}, json.dumps([1] * 300_000)),
             ({"type": "object", "properties": {"a": {"type": "integer"}}},
              json.dumps({"a": "x" * 1_000_000}))]
    for n, (schema, payload) in enumerate(cases):
        data = framed(registry, f"v{n}", Schema(json.dumps(schema), "JSON"), payload.encode())
        try:
            de(data, CTX)
        except ValueDeserializationError as e:
            assert "does not match the JSON schema" in str(e)
            assert len(str(e)) < 1000 and "more characters" in str(e)
            assert e.record == data
        else:
            raise AssertionError("an invalid value was accepted")


def test_protobuf_nesting_is_refused_by_upb_as_a_typed_error() -> None:
    registry = MockSchemaRegistryClient({"url": "mock://proto"})
    schema = Schema('syntax = "proto3";\nmessage Node { Node next = 1; int32 v = 2; }\n',
                    "PROTOBUF")
    de = ProtobufDeserializer(None, schema_registry_client=registry)

    def nested(depth: int) -> bytes:
        body = b""
        for _ in range(depth):
            size = len(body)
            varint = bytearray()
            while size > 0x7F:
                varint.append((size & 0x7F) | 0x80)
                size >>= 7
            varint.append(size)
            body = b"\x0a" + bytes(varint) + body
        return body
    ok = framed(registry, "node", schema, nested(50), b"\x00")
    assert de(ok, CTX) is not None
    deep = framed(registry, "node", schema, nested(5_000), b"\x00")
    try:
        de(deep, CTX)
    except ValueDeserializationError as e:
        assert e.record == deep
    else:
        raise AssertionError("5,000 nested messages were accepted")
