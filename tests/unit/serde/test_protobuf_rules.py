"""Data-contract rules on Protobuf messages: field tags from ``(confluent.field_meta)`` and
from schema metadata, ``CEL_FIELD`` conditions and transforms, ``ENCRYPT`` on string, bytes,
repeated, map and nested fields, and JSONata migrations, in the Protobuf serdes.

The registry is kontrakt's in-memory mock client; confluent-kafka's Protobuf serdes and
encryption executor are the oracle in tests/interop/test_encrypt_confluent.py.
"""

from __future__ import annotations

import base64
import functools
from typing import Any

import pytest

from kontrakt.errors import ValueDeserializationError, ValueSerializationError
from kontrakt.registry import MockSchemaRegistryClient, Schema
from kontrakt.registry._models import Metadata, RuleSet
from kontrakt.serde import MessageField, SerializationContext
from kontrakt.serde.rules import RuleRegistry

pytest.importorskip("google.protobuf")
pytest.importorskip("grpc_tools")
from kontrakt.serde.protobuf import ProtobufDeserializer, ProtobufSerializer

CTX = SerializationContext("people", MessageField.VALUE)
SUBJECT = "people-value"
LATEST = {"use.latest.version": True, "auto.register.schemas": False}
SECRET = {"secret": "unit-secret"}

TAGGED = """syntax = "proto3";
package kontrakt.pii;

import "confluent/meta.proto";

message Person {
  message Card {
    string number = 1 [(confluent.field_meta).tags = "PII"];
    int32 cvv = 2;
  }
  int32 id = 1;
  string ssn = 2 [(confluent.field_meta) = {tags: ["PII"], doc: "social security"}];
  optional string email = 3 [(confluent.field_meta).tags = "PII"];
  bytes photo = 4 [(confluent.field_meta).tags = "PII"];
  string city = 5;
  repeated string aliases = 6 [(confluent.field_meta).tags = "PII"];
  Card card = 7;
  map<string, string> notes = 8;
  repeated Card old_cards = 9;
}
"""
# The same message without any tag, as a class generated from an older .proto would be.
UNTAGGED = "\n".join(line.split(" [(confluent")[0] + (";" if "[(confluent" in line else "")
                     for line in TAGGED.splitlines())


@functools.cache
def person_class(text: str) -> Any:
    from google.protobuf.message_factory import GetMessageClass

    from kontrakt.serde._proto_schema import new_pool, proto_text_to_files

    pool = new_pool()
    for fdp in proto_text_to_files("kontrakt_pii/person.proto",
                                   {"kontrakt_pii/person.proto": text}):
        pool.Add(fdp)
    return GetMessageClass(pool.FindMessageTypeByName("kontrakt.pii.Person"))


def person(cls: Any) -> Any:
    msg = cls(id=7, ssn="123-45-6789", email="a@example.com", photo=b"\x89PNG", city="Lyon",
              aliases=["al", "\u2603"])
    msg.card.number = "4111"
    msg.card.cvv = 123
    msg.notes["k"] = "secret note"
    old = msg.old_cards.add()
    old.number = "5500"
    return msg


def encrypt_rule() -> dict[str, Any]:
    return {"name": "pii", "kind": "TRANSFORM", "mode": "WRITEREAD", "type": "ENCRYPT",
            "tags": ["PII"], "params": {"encrypt.kek.name": "kek-pb",
                                        "encrypt.kms.type": "local-kms",
                                        "encrypt.kms.key.id": "key1"}}


def register(registry: Any, *rules: dict[str, Any], text: str = TAGGED,
             metadata: Metadata | None = None) -> None:
    registry.register_schema(SUBJECT, Schema(text, "PROTOBUF", metadata=metadata,
                                              rule_set=RuleSet(domain_rules=rules)))


def encryption() -> RuleRegistry:
    pytest.importorskip("cryptography")
    from kontrakt.serde.rules.encryption import FieldEncryptionExecutor

    out = RuleRegistry()
    out.register_executor(FieldEncryptionExecutor())
    return out


@pytest.fixture()
def registry() -> MockSchemaRegistryClient:
    return MockSchemaRegistryClient({"url": "mock://protobuf-rules"})


def test_tags_come_from_confluent_field_meta() -> None:
    from kontrakt.serde.rules._proto_fields import inline_tags

    desc = person_class(TAGGED).DESCRIPTOR
    tags = {f.name: inline_tags(f) for f in desc.fields}
    assert tags == {"id": frozenset(), "ssn": {"PII"}, "email": {"PII"}, "photo": {"PII"},
                    "city": frozenset(), "aliases": {"PII"}, "card": frozenset(),
                    "notes": frozenset(), "old_cards": frozenset()}
    assert inline_tags(desc.nested_types_by_name["Card"].fields_by_name["number"]) == {"PII"}


def test_encrypt_tagged_fields_round_trip(registry: MockSchemaRegistryClient) -> None:
    cls = person_class(TAGGED)
    register(registry, encrypt_rule())
    msg = person(cls)
    before = msg.SerializeToString()
    data = ProtobufSerializer(cls, registry, conf=LATEST, rule_registry=encryption(),
                              rule_conf=SECRET)(msg, CTX)
    assert msg.SerializeToString() == before  # the caller's message is left alone
    raw = cls.FromString(data[6:])
    # tagged strings become base64 ciphertext, tagged bytes ciphertext; the rest is kept
    pairs = [(raw.ssn, msg.ssn), (raw.email, msg.email), (raw.card.number, "4111"),
             (raw.old_cards[0].number, "5500"), *zip(raw.aliases, msg.aliases, strict=True)]
    for got, plain in pairs:
        assert got != plain and len(base64.b64decode(got, validate=True)) > 16
    assert raw.photo != msg.photo and len(raw.photo) > len(msg.photo) + 16
    assert (raw.id, raw.city, raw.card.cvv, dict(raw.notes)) == (
        7, "Lyon", 123, {"k": "secret note"})
    typed = ProtobufDeserializer(cls, schema_registry_client=registry,
                                 rule_registry=encryption(), rule_conf=SECRET)
    dynamic = ProtobufDeserializer(None, schema_registry_client=registry,
                                   rule_registry=encryption(), rule_conf=SECRET)
    assert typed(data, CTX) == msg
    assert dynamic(data, CTX).SerializeToString() == before
    # an unset optional field stays unset (nothing to encrypt, nothing written back)
    bare = cls(id=1)
    back = typed(ProtobufSerializer(cls, registry, conf=LATEST, rule_registry=encryption(),
                                    rule_conf=SECRET)(bare, CTX), CTX)
    assert not back.HasField("email") and not back.HasField("card")
    # a reader without the key refuses, naming the rule
    with pytest.raises(ValueDeserializationError, match="'pii'"):
        ProtobufDeserializer(cls, schema_registry_client=registry, rule_registry=encryption(),
                             rule_conf={"secret": "wrong"})(data, CTX)


def test_the_registered_schemas_tags_apply_to_an_untagged_class(
        registry: MockSchemaRegistryClient) -> None:
    """A class generated without the tags still has its fields encrypted by the registered
    schema's tags, on both sides: the walk names and tags fields from the schema."""
    old = person_class(UNTAGGED)
    register(registry, encrypt_rule())
    msg = person(old)
    data = ProtobufSerializer(old, registry, conf=LATEST, rule_registry=encryption(),
                              rule_conf=SECRET)(msg, CTX)
    assert old.FromString(data[6:]).ssn != msg.ssn
    got = ProtobufDeserializer(old, schema_registry_client=registry,
                               rule_registry=encryption(), rule_conf=SECRET)(data, CTX)
    assert got == msg


@pytest.mark.parametrize(("path", "kind"), [("kontrakt.pii.Person.id", "INT"),
                                             ("kontrakt.pii.Person.notes", "MAP")])
def test_encrypting_a_tagged_int_or_map_refuses(registry: MockSchemaRegistryClient, path: str,
                                                kind: str) -> None:
    """Only string and bytes fields encrypt; a map's values are refused as Confluent's
    executor refuses them (its walk reports them as MAP)."""
    cls = person_class(TAGGED)
    register(registry, encrypt_rule(), metadata=Metadata(tags={path: ["PII"]}))
    with pytest.raises(ValueSerializationError, match=f"'pii'.*{path}.*{kind}"):
        ProtobufSerializer(cls, registry, conf=LATEST, rule_registry=encryption(),
                           rule_conf=SECRET)(person(cls), CTX)


def test_cel_field_rules_with_metadata_tags(registry: MockSchemaRegistryClient) -> None:
    pytest.importorskip("celpy")
    from kontrakt.serde.rules.cel import CelFieldExecutor

    cel = RuleRegistry()
    cel.register_executor(CelFieldExecutor())
    cls = person_class(TAGGED)
    mask = {"name": "mask-city", "kind": "TRANSFORM", "mode": "WRITE", "type": "CEL_FIELD",
            "tags": ["LOCATION"], "expr": "value + '!'"}
    known = {"name": "known-cvv", "kind": "CONDITION", "mode": "WRITE", "type": "CEL_FIELD",
             "tags": ["CHECK"], "expr": "value < 1000"}
    register(registry, mask, known, metadata=Metadata(tags={
        "kontrakt.pii.Person.city": ["LOCATION"], "**.cvv": ["CHECK"]}))
    ser = ProtobufSerializer(cls, registry, conf=LATEST, rule_registry=cel)
    data = ser(person(cls), CTX)
    got = ProtobufDeserializer(cls)(data, CTX)
    assert (got.city, got.ssn, got.card.cvv) == ("Lyon!", "123-45-6789", 123)
    bad = person(cls)
    bad.card.cvv = 4000
    with pytest.raises(ValueSerializationError, match=r"'known-cvv'.*Person\.Card\.cvv"):
        ser(bad, CTX)


V1 = """syntax = "proto3";
package kontrakt.widgets;
message Widget { string name = 1; int32 size = 2; }
"""
V2 = """syntax = "proto3";
package kontrakt.widgets;
message Widget { string name = 1; int32 height = 3; }
"""
UP = {"name": "size-to-height", "kind": "TRANSFORM", "mode": "UPGRADE", "type": "JSONATA",
      "expr": "$merge([$sift($, function($v, $k) {$k != 'size'}), {'height': $.size}])"}
DOWN = {"name": "height-to-size", "kind": "TRANSFORM", "mode": "DOWNGRADE", "type": "JSONATA",
        "expr": "$merge([$sift($, function($v, $k) {$k != 'height'}), {'size': $.height}])"}


@functools.cache
def widget_class(text: str) -> Any:
    from google.protobuf.message_factory import GetMessageClass

    from kontrakt.serde._proto_schema import new_pool, proto_text_to_files

    pool = new_pool()
    for fdp in proto_text_to_files("w.proto", {"w.proto": text}):
        pool.Add(fdp)
    return GetMessageClass(pool.FindMessageTypeByName("kontrakt.widgets.Widget"))


def test_jsonata_migrations_upgrade_and_downgrade(registry: MockSchemaRegistryClient) -> None:
    pytest.importorskip("jsonata")
    from kontrakt.serde.rules.jsonata import JsonataExecutor

    rules = RuleRegistry()
    rules.register_executor(JsonataExecutor())
    registry.set_compatibility("widgets-value", "NONE")
    registry.register_schema("widgets-value", Schema(
        V1, "PROTOBUF", metadata=Metadata(properties={"major": "1"})))
    registry.register_schema("widgets-value", Schema(
        V2, "PROTOBUF", metadata=Metadata(properties={"major": "2"}),
        rule_set=RuleSet(migration_rules=(UP, DOWN))))
    ctx = SerializationContext("widgets", MessageField.VALUE)
    w1, w2 = widget_class(V1), widget_class(V2)
    v1 = ProtobufSerializer(w1, registry, conf={"use.latest.with.metadata": {"major": "1"},
                                                "auto.register.schemas": False})(
        w1(name="w", size=3), ctx)
    v2 = ProtobufSerializer(w2, registry, conf=LATEST)(w2(name="w", height=4), ctx)
    latest = ProtobufDeserializer(w2, conf={"use.latest.version": True},
                                  schema_registry_client=registry, rule_registry=rules)
    assert latest(v1, ctx) == w2(name="w", height=3)  # upgraded by v2's rule
    assert latest(v2, ctx) == w2(name="w", height=4)
    dynamic = ProtobufDeserializer(None, conf={"use.latest.version": True},
                                   schema_registry_client=registry, rule_registry=rules)
    assert dynamic(v1, ctx).height == 3
    old = ProtobufDeserializer(w1, conf={"use.latest.with.metadata": {"major": "1"}},
                               schema_registry_client=registry, rule_registry=rules)
    assert old(v2, ctx) == w1(name="w", size=4)  # downgraded by v2's rule
    with pytest.raises(ValueDeserializationError, match="'size-to-height'") as info:
        ProtobufDeserializer(w2, conf={"use.latest.version": True},
                             schema_registry_client=registry,
                             rule_registry=RuleRegistry())(v1, ctx)
    assert info.value.rule.mode == "UPGRADE"
