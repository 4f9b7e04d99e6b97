"""Deserializers in schema contexts: ids are numbered per context, so a record written under a
subject of a context (``:.ctx:topic-value``) carries an id that, in the default context, names
another schema. The deserializer must look the id up with the subject, as Confluent's do.

Runs against the embedded registry server (which numbers ids per context, as Confluent's).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from kontrakt.registry import Schema, SchemaRegistryClient
from kontrakt.registry.server import RegistryServer
from kontrakt.serde import (
    AvroDeserializer,
    AvroSerializer,
    JSONDeserializer,
    JSONSerializer,
    MessageField,
    SerializationContext,
)

TOPIC = "orders"
CTX_SUBJECT = f":.team:{TOPIC}-value"


def in_context(ctx: Any, record_name: Any) -> str:
    return CTX_SUBJECT


@pytest.fixture
def client() -> Iterator[SchemaRegistryClient]:
    with RegistryServer() as srv, SchemaRegistryClient({"url": srv.url}) as c:
        yield c


def _avro(name: str, field: str, kind: str) -> str:
    return json.dumps({"type": "record", "name": name,
                       "fields": [{"name": field, "type": kind}]})


def test_avro_reads_the_contexts_schema_not_the_default_contexts(
        client: SchemaRegistryClient) -> None:
    default_id = client.register_schema(f"{TOPIC}-value",
                                        Schema(_avro("Other", "n", "long"), "AVRO"))
    ctx_id = client.register_schema(CTX_SUBJECT, Schema(_avro("Order", "sku", "string"), "AVRO"))
    assert default_id == ctx_id  # the same number names two schemas

    ser = AvroSerializer(client, _avro("Order", "sku", "string"),
                         conf={"auto.register.schemas": False,
                               "subject.name.strategy": in_context})
    sctx = SerializationContext(TOPIC, MessageField.VALUE)
    data = ser({"sku": "A-1"}, sctx)
    de = AvroDeserializer(client, conf={"subject.name.strategy": in_context})
    for _ in range(3):  # cold, then the cached reader
        assert de(data, sctx) == {"sku": "A-1"}
    # the default-context deserializer still reads default-context records, by id alone
    other = AvroSerializer(client, _avro("Other", "n", "long"),
                           conf={"auto.register.schemas": False})
    assert AvroDeserializer(client)(other({"n": 7}, sctx), sctx) == {"n": 7}


def test_json_reads_the_contexts_schema(client: SchemaRegistryClient) -> None:
    plain = json.dumps({"type": "object", "properties": {"n": {"type": "integer"}},
                        "required": ["n"]})
    scoped = json.dumps({"type": "object", "properties": {"sku": {"type": "string"}},
                         "required": ["sku"], "additionalProperties": False})
    assert client.register_schema(f"{TOPIC}-value", Schema(plain, "JSON")) == \
        client.register_schema(CTX_SUBJECT, Schema(scoped, "JSON"))
    sctx = SerializationContext(TOPIC, MessageField.VALUE)
    data = JSONSerializer(scoped, client, conf={"auto.register.schemas": False,
                                                "subject.name.strategy": in_context})(
        {"sku": "B"}, sctx)
    de = JSONDeserializer(None, schema_registry_client=client,
                          conf={"subject.name.strategy": in_context})
    # with the default context's schema the record would fail validation ("n" required)
    assert de(data, sctx) == {"sku": "B"}
    assert de(data, sctx) == {"sku": "B"}
