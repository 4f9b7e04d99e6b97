"""Whole-payload encryption (``ENCRYPT_PAYLOAD`` in a schema's ``encodingRules``): the
encoded payload is encrypted after the format's encoder and decrypted before its decoder,
in the Avro, JSON Schema and Protobuf serdes, sync and async; without the executor or the
key nothing is written or read.

The registry is kontrakt's in-memory mock client; confluent-kafka's ``EncryptionExecutor``
is the oracle in tests/interop/test_encrypt_confluent.py.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from kontrakt.errors import ValueDeserializationError, ValueSerializationError
from kontrakt.registry import AsyncMockSchemaRegistryClient, MockSchemaRegistryClient, Schema
from kontrakt.registry._models import RuleSet
from kontrakt.serde import MessageField, SerializationContext
from kontrakt.serde.avro import (
    AsyncAvroDeserializer,
    AsyncAvroSerializer,
    AvroDeserializer,
    AvroSerializer,
)
from kontrakt.serde.json_schema import JSONDeserializer, JSONSerializer
from kontrakt.serde.rules import RuleRegistry

pytest.importorskip("cryptography")
from kontrakt.serde.rules.encryption import FieldEncryptionExecutor, PayloadEncryptionExecutor

CTX = SerializationContext("people", MessageField.VALUE)
SUBJECT = "people-value"
LATEST = {"use.latest.version": True, "auto.register.schemas": False}
SECRET = {"secret": "unit-secret"}
AVRO = json.dumps({"type": "record", "name": "Person", "fields": [
    {"name": "id", "type": "int"},
    {"name": "ssn", "type": "string", "confluent:tags": ["PII"]},
    {"name": "city", "type": "string"}]})
VALUE = {"id": 7, "ssn": "123-45-6789", "city": "Lyon"}


def payload_rule(**params: str) -> dict[str, Any]:
    return {"name": "whole", "kind": "TRANSFORM", "mode": "WRITEREAD",
            "type": "ENCRYPT_PAYLOAD",
            "params": {"encrypt.kek.name": "kek-payload", "encrypt.kms.type": "local-kms",
                       "encrypt.kms.key.id": "key1", **params}}


def field_rule() -> dict[str, Any]:
    return {"name": "pii", "kind": "TRANSFORM", "mode": "WRITEREAD", "type": "ENCRYPT",
            "tags": ["PII"], "params": payload_rule()["params"]}


def rules(*, fields: bool = False) -> RuleRegistry:
    out = RuleRegistry()
    out.register_executor(PayloadEncryptionExecutor())
    if fields:
        out.register_executor(FieldEncryptionExecutor())
    return out


def register(registry: Any, *encoding: dict[str, Any], domain: tuple[Any, ...] = (),
             schema: str = AVRO, kind: str = "AVRO", subject: str = SUBJECT) -> None:
    registry.register_schema(subject, Schema(schema, kind, rule_set=RuleSet(
        domain_rules=domain, encoding_rules=encoding)))


@pytest.fixture()
def registry() -> MockSchemaRegistryClient:
    return MockSchemaRegistryClient({"url": "mock://encrypt-payload"})


def _avro_payload(data: bytes) -> bytes:
    import io

    import fastavro

    return json.dumps(fastavro.schemaless_reader(
        io.BytesIO(data), fastavro.parse_schema(json.loads(AVRO)), None)).encode()


def test_avro_payload_is_encrypted_and_read_back(registry: MockSchemaRegistryClient) -> None:
    register(registry, payload_rule())
    ser = AvroSerializer(registry, conf=LATEST, rule_registry=rules(), rule_conf=SECRET)
    de = AvroDeserializer(registry, rule_registry=rules(), rule_conf=SECRET)
    data = ser(dict(VALUE), CTX)
    plain = AvroSerializer(registry, conf=LATEST, rule_registry=RuleRegistry())
    # The frame is kept (magic byte, id); the payload is nonce | ciphertext | tag.
    assert data[:5] == b"\x00" + (1).to_bytes(4, "big")
    assert b"Lyon" not in data and len(data) == 5 + 12 + len(b"\x0e\x16123-45-6789\x08Lyon") + 16
    assert de(data, CTX) == VALUE
    assert ser(dict(VALUE), CTX) != data  # a fresh nonce each time
    # without the executor, neither side goes ahead: nothing written, nothing read
    with pytest.raises(ValueSerializationError, match=r"'whole'.*no rule executor"):
        plain(dict(VALUE), CTX)
    with pytest.raises(ValueDeserializationError, match=r"'whole'.*no rule executor"):
        AvroDeserializer(registry, rule_registry=RuleRegistry())(data, CTX)
    with pytest.raises(ValueDeserializationError, match="'whole'"):
        AvroDeserializer(registry, rule_registry=rules(), rule_conf={"secret": "other"})(
            data, CTX)


def test_field_and_payload_encryption_together(registry: MockSchemaRegistryClient) -> None:
    """The domain rules run on the value before the encoder, the encoding rules on its
    bytes after: the ssn is encrypted twice, and both are undone in reverse on reading."""
    register(registry, payload_rule(), domain=(field_rule(),))
    ser = AvroSerializer(registry, conf=LATEST, rule_registry=rules(fields=True),
                         rule_conf=SECRET)
    data = ser(dict(VALUE), CTX)
    only_payload = AvroDeserializer(registry, rule_registry=rules(), rule_conf=SECRET,
                                    conf={})
    with pytest.raises(ValueDeserializationError, match=r"'pii'.*no rule executor"):
        only_payload(data, CTX)
    both = AvroDeserializer(registry, rule_registry=rules(fields=True), rule_conf=SECRET)
    assert both(data, CTX) == VALUE


def test_rotated_dek_version_prefix(registry: MockSchemaRegistryClient) -> None:
    register(registry, payload_rule(**{"encrypt.dek.expiry.days": "1"}))
    data = AvroSerializer(registry, conf=LATEST, rule_registry=rules(), rule_conf=SECRET)(
        dict(VALUE), CTX)
    assert data[5:10] == b"\x00\x00\x00\x00\x01"  # magic 0, DEK version 1
    assert AvroDeserializer(registry, rule_registry=rules(), rule_conf=SECRET)(
        data, CTX) == VALUE


def test_as_a_domain_rule_it_refuses(registry: MockSchemaRegistryClient) -> None:
    register(registry, domain=(payload_rule(),))
    with pytest.raises(ValueSerializationError, match="encodingRules"):
        AvroSerializer(registry, conf=LATEST, rule_registry=rules(), rule_conf=SECRET)(
            dict(VALUE), CTX)


def test_json_schema_and_protobuf_payloads(registry: MockSchemaRegistryClient) -> None:
    schema = json.dumps({"type": "object", "properties": {"id": {"type": "integer"},
                                                          "ssn": {"type": "string"}}})
    register(registry, payload_rule(), schema=schema, kind="JSON")
    data = JSONSerializer(None, registry, conf=LATEST, rule_registry=rules(),
                          rule_conf=SECRET)({"id": 1, "ssn": "x-y"}, CTX)
    assert b"x-y" not in data
    assert JSONDeserializer(None, schema_registry_client=registry, rule_registry=rules(),
                            rule_conf=SECRET)(data, CTX) == {"id": 1, "ssn": "x-y"}
    pytest.importorskip("grpc_tools")
    from kontrakt.serde.protobuf import ProtobufDeserializer, ProtobufSerializer
    from tests.unit.serde.test_protobuf_rules import TAGGED, person, person_class

    cls = person_class(TAGGED)
    ctx = SerializationContext("pb", MessageField.VALUE)
    register(registry, payload_rule(), schema=TAGGED, kind="PROTOBUF", subject="pb-value")
    msg = person(cls)
    data = ProtobufSerializer(cls, registry, conf=LATEST, rule_registry=rules(),
                              rule_conf=SECRET)(msg, ctx)
    assert data[5:6] == b"\x00" and b"Lyon" not in data  # the index byte, then ciphertext
    for de in (ProtobufDeserializer(cls, schema_registry_client=registry,
                                    rule_registry=rules(), rule_conf=SECRET),
               ProtobufDeserializer(None, schema_registry_client=registry,
                                    rule_registry=rules(), rule_conf=SECRET)):
        assert de(data, ctx).SerializeToString() == msg.SerializeToString()
    with pytest.raises(ValueDeserializationError, match=r"'whole'.*no rule executor"):
        ProtobufDeserializer(cls, schema_registry_client=registry,
                             rule_registry=RuleRegistry())(data, ctx)


def test_async_serdes_agree_with_sync(registry: MockSchemaRegistryClient) -> None:
    register(registry, payload_rule(**{"encrypt.dek.algorithm": "AES256_SIV"}))
    sync = AvroSerializer(registry, conf=LATEST, rule_registry=rules(), rule_conf=SECRET)(
        dict(VALUE), CTX)

    async def run() -> tuple[bytes, Any]:
        client = AsyncMockSchemaRegistryClient(state=registry.app.state)
        ser = AsyncAvroSerializer(client, conf=LATEST, rule_registry=rules(),
                                  rule_conf=SECRET)
        de = AsyncAvroDeserializer(client, rule_registry=rules(), rule_conf=SECRET)
        data = await ser(dict(VALUE), CTX)
        return data, await de(sync, CTX)

    data, value = asyncio.run(run())
    assert data == sync  # deterministic AES-SIV with the one DEK
    assert value == VALUE
