"""Data-contract rules in the registry-bound serdes: fail closed, modes, actions, parameters,
CEL conditions and transforms, and the sync and async shells giving the same results.

The registry is kontrakt's in-memory mock client, which keeps a schema's ``ruleSet`` as the
server does; the embedded server and confluent-kafka's serdes are the peers in
tests/interop/test_rules_confluent.py.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from kontrakt.errors import (
    ConfigError,
    RuleConditionError,
    RuleError,
    ValueDeserializationError,
    ValueSerializationError,
)
from kontrakt.registry import AsyncMockSchemaRegistryClient, MockSchemaRegistryClient, Schema
from kontrakt.registry._models import Metadata, RuleSet
from kontrakt.serde import MessageField, SerializationContext
from kontrakt.serde.avro import (
    AsyncAvroDeserializer,
    AsyncAvroSerializer,
    AvroDeserializer,
    AvroSerializer,
)
from kontrakt.serde.json_schema import JSONDeserializer, JSONSerializer
from kontrakt.serde.rules import RuleAction, RuleContext, RuleExecutor, RuleRegistry

pytest.importorskip("celpy")
from kontrakt.serde.rules.cel import CelExecutor

CTX = SerializationContext("orders", MessageField.VALUE)
AVRO = json.dumps({"type": "record", "name": "Order", "fields": [
    {"name": "a", "type": "int"}, {"name": "note", "type": "string", "default": ""}]})
JSON_SCHEMA = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}},
                          "required": ["a"]})
LATEST = {"use.latest.version": True, "auto.register.schemas": False}


def rule(name: str = "positive", *, kind: str = "CONDITION", mode: str = "WRITE",
         type: str = "CEL", expr: str = "message.a > 0", **extra: Any) -> dict[str, Any]:
    return {"name": name, "kind": kind, "mode": mode, "type": type, "expr": expr, **extra}


def with_rules(*rules: dict[str, Any], schema: str = AVRO, kind: str = "AVRO",
               **rule_set: Any) -> Schema:
    return Schema(schema, kind, rule_set=RuleSet(domain_rules=rules, **rule_set))


@pytest.fixture()
def registry() -> MockSchemaRegistryClient:
    return MockSchemaRegistryClient({"url": "mock://rules"})


@pytest.fixture()
def cel() -> RuleRegistry:
    rules = RuleRegistry()
    rules.register_executor(CelExecutor())
    return rules


def test_no_executor_fails_closed_naming_the_rule(registry: MockSchemaRegistryClient) -> None:
    registry.register_schema("orders-value", with_rules(rule()))
    ser = AvroSerializer(registry, conf=LATEST, rule_registry=RuleRegistry())
    with pytest.raises(ValueSerializationError) as info:
        ser({"a": 5}, CTX)  # even a value the rule would accept: the rule cannot run
    err = info.value
    assert (err.rule.name, err.rule.kind, err.rule.type, err.rule.mode) == (
        "positive", "CONDITION", "CEL", "WRITE")
    assert "rule 'positive' (kind CONDITION, type CEL, mode WRITE)" in str(err)
    assert "no rule executor" in str(err) and isinstance(err.__cause__, RuleError)


def test_latest_with_metadata_and_key_serdes_fail_closed(
        registry: MockSchemaRegistryClient) -> None:
    from kontrakt.errors import KeyDeserializationError, KeySerializationError

    registry.register_schema("orders-value", Schema(
        AVRO, "AVRO", metadata=Metadata(properties={"app": "billing"}),
        rule_set=RuleSet(domain_rules=(rule(),))))
    ser = AvroSerializer(registry, conf={"auto.register.schemas": False,
                                         "use.latest.with.metadata": {"app": "billing"}},
                         rule_registry=RuleRegistry())
    with pytest.raises(ValueSerializationError, match="'positive'"):
        ser({"a": 1, "note": ""}, CTX)
    key_ctx = SerializationContext("orders", MessageField.KEY)
    registry.register_schema("orders-key", with_rules(rule("key-rule", mode="WRITEREAD")))
    key_ser = AvroSerializer(registry, conf=LATEST, rule_registry=RuleRegistry())
    with pytest.raises(KeySerializationError, match="'key-rule'"):
        key_ser({"a": 1, "note": ""}, key_ctx)
    looked_up = AvroSerializer(registry, with_rules(rule("key-rule", mode="WRITEREAD")),
                               conf={"auto.register.schemas": False},
                               rule_registry=RuleRegistry())
    with pytest.raises(KeySerializationError, match="'key-rule'"):
        looked_up({"a": 1, "note": ""}, key_ctx)
    sid = registry.get_latest_version("orders-key").schema_id
    raw = b"\x00" + sid.to_bytes(4, "big") + b"\x02\x00"
    with pytest.raises(KeyDeserializationError, match="'key-rule'"):
        AvroDeserializer(registry, rule_registry=RuleRegistry())(raw, key_ctx)


def test_auto_registered_schema_with_rules_fails_closed(
        registry: MockSchemaRegistryClient) -> None:
    ser = AvroSerializer(registry, with_rules(rule()), rule_registry=RuleRegistry())
    with pytest.raises(ValueSerializationError, match="no rule executor"):
        ser({"a": 5}, CTX)


def test_deserializer_fails_closed_on_writer_rules(registry: MockSchemaRegistryClient,
                                                   cel: RuleRegistry) -> None:
    registry.register_schema("orders-value", with_rules(rule(mode="WRITEREAD")))
    data = AvroSerializer(registry, conf=LATEST, rule_registry=cel)({"a": 3}, CTX)
    with pytest.raises(ValueDeserializationError) as info:
        AvroDeserializer(registry, rule_registry=RuleRegistry())(data, CTX)
    assert info.value.rule.name == "positive" and info.value.record == data
    assert AvroDeserializer(registry, rule_registry=cel)(data, CTX) == {"a": 3, "note": ""}


def test_disabled_and_other_modes_and_enable_at_are_skipped(
        registry: MockSchemaRegistryClient) -> None:
    registry.register_schema("orders-value", with_rules(
        rule("off", disabled=True), rule("reading", mode="READ"),
        rule("migrating", mode="UPGRADE")))
    registry.register_schema("other-value", with_rules(rule(), enable_at="SERVER"))
    ser = AvroSerializer(registry, conf=LATEST, rule_registry=RuleRegistry())
    assert ser({"a": -5}, CTX) is not None
    assert ser({"a": -5}, SerializationContext("other")) is not None
    # a schema without applicable rules keeps the plain warm path
    assert "orders" in ser._core.value_writes


def test_cel_condition_refuses_negative_and_writes_positive(
        registry: MockSchemaRegistryClient, cel: RuleRegistry) -> None:
    registry.register_schema("orders-value", with_rules(rule()))
    ser = AvroSerializer(registry, conf=LATEST, rule_registry=cel)
    with pytest.raises(ValueSerializationError, match=r"message.a > 0 is false") as info:
        ser({"a": -5}, CTX)
    assert isinstance(info.value.__cause__, RuleConditionError)
    data = ser({"a": 5}, CTX)
    assert AvroDeserializer(registry)(data, CTX) == {"a": 5, "note": ""}
    assert "orders" not in ser._core.value_writes  # the ruled path, not the plain writer


def test_cel_transform_on_write_and_read(registry: MockSchemaRegistryClient,
                                         cel: RuleRegistry) -> None:
    registry.register_schema("orders-value", with_rules(
        rule("double", kind="TRANSFORM", expr='{"a": message.a * 2, "note": message.note}'),
        rule("tag", kind="TRANSFORM", mode="READ",
             expr='{"a": message.a, "note": message.note + "!"}'),
        rule("guarded", expr="message.a > 100; message.a < 1000")))
    ser = AvroSerializer(registry, conf=LATEST, rule_registry=cel)
    data = ser({"a": 21, "note": "x"}, CTX)
    with pytest.raises(ValueDeserializationError, match="'tag'"):
        AvroDeserializer(registry, rule_registry=RuleRegistry())(data, CTX)
    de = AvroDeserializer(registry, rule_registry=cel, from_dict=lambda d, c: (d["a"], d["note"]))
    assert de(data, CTX) == (42, "x!")  # READ rules run before from_dict
    with pytest.raises(ValueSerializationError, match="guarded"):
        ser({"a": 600, "note": ""}, CTX)  # 1200 passes the guard, fails the condition
    assert ser({"a": 40, "note": ""}, CTX)  # 80 is under the guard: the condition is skipped
    with pytest.raises(ValueSerializationError, match=r"'double'.*evaluation failed"):
        ser({"a": 40}, CTX)  # the transform reads a field the value lacks


def test_on_failure_none_and_split_actions(registry: MockSchemaRegistryClient,
                                           cel: RuleRegistry) -> None:
    registry.register_schema("orders-value", with_rules(
        rule("lenient", onFailure="NONE"),
        rule("write-only", mode="WRITEREAD", expr="message.a < 10", onFailure="NONE,ERROR")))
    ser = AvroSerializer(registry, conf=LATEST, rule_registry=cel)
    data = ser({"a": -5}, CTX)  # both rules fail; both say NONE on write
    assert ser({"a": 50}, CTX)
    de = AvroDeserializer(registry, rule_registry=cel)
    assert de(data, CTX)["a"] == -5  # on read, only "write-only" runs (READ half) and passes
    with pytest.raises(ValueDeserializationError, match="write-only"):
        de(ser({"a": 50}, CTX), CTX)
    # an onFailure action nobody registered refuses (fail closed)
    registry.register_schema("dlq-value", with_rules(rule(onFailure="DLQ")))
    with pytest.raises(ValueSerializationError, match="no rule action is registered for 'DLQ'"):
        ser({"a": -1}, SerializationContext("dlq"))


class Recording(RuleExecutor, RuleAction):
    """An executor and an action at once, recording what it was given."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []
        self.conf: Any = None

    def type(self) -> str:
        return "RECORD"

    def configure(self, client_conf: Any, rule_conf: Any) -> None:
        self.conf = rule_conf

    def transform(self, ctx: RuleContext, message: Any) -> Any:
        self.seen.append(("limit", ctx.get_parameter("limit")))
        self.seen.append(("owner", ctx.get_parameter("owner")))
        return message["a"] < int(ctx.get_parameter("limit") or 0)

    def run(self, ctx: RuleContext, message: Any, ex: BaseException | None) -> None:
        self.seen.append(("action", (ctx.rule.name, ctx.rule_mode, type(ex).__name__)))


def test_custom_executor_action_params_and_rule_conf(
        registry: MockSchemaRegistryClient) -> None:
    recording = Recording()
    rules = RuleRegistry()
    rules.register_executor(recording)
    rules.register_action(recording)
    schema = Schema(AVRO, "AVRO", metadata=Metadata(properties={"owner": "team-a"}),
                    rule_set=RuleSet(domain_rules=(
                        rule("capped", type="RECORD", params={"limit": "10"},
                             onSuccess="RECORD", onFailure="RECORD"),)))
    registry.register_schema("orders-value", schema)
    ser = AvroSerializer(registry, conf=LATEST, rule_registry=rules, rule_conf={"k": "v"})
    assert recording.conf == {"k": "v"}
    ser({"a": 1}, CTX)
    ser({"a": 11}, CTX)  # fails, but its onFailure action does not refuse: written
    assert recording.seen == [
        ("limit", "10"), ("owner", "team-a"), ("action", ("capped", "WRITE", "NoneType")),
        ("limit", "10"), ("owner", "team-a"),
        ("action", ("capped", "WRITE", "RuleConditionError"))]
    with pytest.raises(ConfigError):
        AvroSerializer(registry, conf=LATEST, rule_registry=object())  # type: ignore[arg-type]


def test_json_schema_rules(registry: MockSchemaRegistryClient, cel: RuleRegistry) -> None:
    registry.register_schema("orders-value", with_rules(rule(), schema=JSON_SCHEMA,
                                                        kind="JSON"))
    ser = JSONSerializer(None, registry, conf=LATEST, rule_registry=cel)
    with pytest.raises(ValueSerializationError, match="positive"):
        ser({"a": -5}, CTX)
    assert JSONDeserializer(None, schema_registry_client=registry, rule_registry=cel)(
        ser({"a": 5}, CTX), CTX) == {"a": 5}
    with pytest.raises(ValueSerializationError, match="no rule executor"):
        JSONSerializer(None, registry, conf=LATEST, rule_registry=RuleRegistry())({"a": 5}, CTX)


WIDGET_V1 = json.dumps({"type": "record", "name": "Widget", "fields": [
    {"name": "name", "type": "string"}, {"name": "size", "type": "int"}]})
WIDGET_V2 = json.dumps({"type": "record", "name": "Widget", "fields": [
    {"name": "name", "type": "string"}, {"name": "height", "type": "int"}]})
UP = {"name": "size-to-height", "kind": "TRANSFORM", "mode": "UPGRADE", "type": "JSONATA",
      "expr": "$merge([$sift($, function($v, $k) {$k != 'size'}), {'height': $.size}])"}
DOWN = {"name": "height-to-size", "kind": "TRANSFORM", "mode": "DOWNGRADE", "type": "JSONATA",
        "expr": "$merge([$sift($, function($v, $k) {$k != 'height'}), {'size': $.height}])"}


def _widgets(registry: MockSchemaRegistryClient) -> None:
    from kontrakt.registry import Metadata

    registry.set_compatibility("widgets-value", "NONE")  # a rename is a breaking change
    registry.register_schema("widgets-value", Schema(
        WIDGET_V1, "AVRO", metadata=Metadata(properties={"major": "1"})))
    registry.register_schema("widgets-value", Schema(
        WIDGET_V2, "AVRO", metadata=Metadata(properties={"major": "2"}),
        rule_set=RuleSet(migration_rules=(UP, DOWN))))


def test_jsonata_migrations_upgrade_and_downgrade(registry: MockSchemaRegistryClient) -> None:
    from kontrakt.serde.rules.jsonata import JsonataExecutor

    rules = RuleRegistry()
    rules.register_executor(JsonataExecutor())
    _widgets(registry)
    ctx = SerializationContext("widgets")
    v1 = AvroSerializer(registry, conf={"use.latest.with.metadata": {"major": "1"},
                                        "auto.register.schemas": False})({"name": "w",
                                                                          "size": 3}, ctx)
    v2 = AvroSerializer(registry, conf=LATEST)({"name": "w", "height": 4}, ctx)
    latest = AvroDeserializer(registry, conf={"use.latest.version": True}, rule_registry=rules)
    assert latest(v1, ctx) == {"name": "w", "height": 3}  # upgraded by v2's rule
    assert latest(v2, ctx) == {"name": "w", "height": 4}
    old = AvroDeserializer(registry, conf={"use.latest.with.metadata": {"major": "1"}},
                           rule_registry=rules)
    assert old(v2, ctx) == {"name": "w", "size": 4}  # downgraded by v2's rule
    # without the executor, reading across the versions refuses, naming the rule
    with pytest.raises(ValueDeserializationError, match="'size-to-height'") as info:
        AvroDeserializer(registry, conf={"use.latest.version": True},
                         rule_registry=RuleRegistry())(v1, ctx)
    assert info.value.rule.mode == "UPGRADE"
    # without use.latest.*, nothing migrates: the writer's schema is read as it is
    assert AvroDeserializer(registry, rule_registry=RuleRegistry())(v1, ctx) == {
        "name": "w", "size": 3}


def test_sync_and_async_shells_agree(cel: RuleRegistry) -> None:
    """Parity: the same rule set, records and registries give the same bytes and errors."""
    schema = with_rules(rule(), rule("cap", kind="TRANSFORM",
                                     expr='{"a": message.a > 50 ? 50 : message.a, '
                                          '"note": message.note}'),
                        rule("seen", kind="TRANSFORM", mode="READ",
                             expr='{"a": message.a, "note": "read"}'))
    values = [{"a": a, "note": "n"} for a in (-3, 0, 1, 49, 50, 51, 1000)]

    def outcome(fn: Any) -> Any:
        try:
            return fn()
        except ValueSerializationError as e:
            return ("error", str(e), e.rule.name)

    sync_reg = MockSchemaRegistryClient({"url": "mock://parity-sync"})
    sync_reg.register_schema("orders-value", schema)
    ser = AvroSerializer(sync_reg, conf=LATEST, rule_registry=cel)
    de = AvroDeserializer(sync_reg, rule_registry=cel)
    sync_out = []
    for v in values:
        got = outcome(lambda v=v: ser(v, CTX))
        sync_out.append((got, de(got, CTX) if isinstance(got, bytes) else None))

    async def run_async() -> list[Any]:
        reg = AsyncMockSchemaRegistryClient({"url": "mock://parity-async"})
        await reg.register_schema("orders-value", schema)
        aser = AsyncAvroSerializer(reg, conf=LATEST, rule_registry=cel)
        ade = AsyncAvroDeserializer(reg, rule_registry=cel)
        out = []
        for v in values:
            try:
                got: Any = await aser(v, CTX)
            except ValueSerializationError as e:
                got = ("error", str(e).replace("AsyncAvroSerializer", "AvroSerializer"),
                       e.rule.name)
            out.append((got, await ade(got, CTX) if isinstance(got, bytes) else None))
        return out

    async_out = asyncio.run(run_async())
    assert async_out == sync_out
    assert [o[1]["a"] for o in sync_out if o[1]] == [1, 49, 50, 50, 50]
    assert sum(1 for o in sync_out if o[1] is None) == 2  # -3 and 0 refused


def test_protobuf_rules_run_or_fail_closed_on_both_sides(cel: RuleRegistry) -> None:
    """A Protobuf serde under a rule set runs it or refuses, never skips it: also the typed
    deserializer, which used to decode without looking at the registry."""
    from kontrakt.registry import SchemaReference
    from kontrakt.serde.protobuf import ProtobufDeserializer, ProtobufSerializer
    from tests.unit.serde._support import proto_modules, proto_source

    pb = proto_modules()
    reg = MockSchemaRegistryClient({"url": "mock://proto-rules"})
    reg.register_schema("kontrakt_test/common.proto",
                        Schema(proto_source("kontrakt_test/common.proto"), "PROTOBUF"))
    sid = reg.register_schema("orders-value", Schema(
        proto_source("kontrakt_test/order.proto"), "PROTOBUF",
        [SchemaReference("kontrakt_test/common.proto", "kontrakt_test/common.proto", 1)],
        rule_set=RuleSet(domain_rules=(rule(mode="WRITEREAD", expr="message.id != ''"),))))
    msg = pb["order"].Order(id="o-1")
    with pytest.raises(ValueSerializationError, match="'positive'"):
        ProtobufSerializer(pb["order"].Order, reg, conf=LATEST, rule_registry=RuleRegistry())(
            msg, CTX)
    data = b"\x00" + sid.to_bytes(4, "big") + b"\x02\x02" + msg.SerializeToString()
    typed = ProtobufDeserializer(pb["order"].Order, schema_registry_client=reg,
                                 rule_registry=RuleRegistry())
    with pytest.raises(ValueDeserializationError, match="no rule executor") as info:
        typed(data, CTX)
    assert info.value.rule.mode == "WRITEREAD"
    # conditions run on Protobuf messages, on both sides
    ser = ProtobufSerializer(pb["order"].Order, reg, conf=LATEST, rule_registry=cel)
    assert ser(msg, CTX) == data
    with pytest.raises(ValueSerializationError, match="'positive'"):
        ser(pb["order"].Order(), CTX)
    for de in (ProtobufDeserializer(pb["order"].Order, schema_registry_client=reg,
                                    rule_registry=cel),
               ProtobufDeserializer(None, schema_registry_client=reg, rule_registry=cel)):
        assert de(data, CTX).id == "o-1"
        empty = data[:7]  # the framing of an Order with no fields set: id == ''
        with pytest.raises(ValueDeserializationError, match="'positive'"):
            de(empty, CTX)
    # without a registry the bytes are all there is: the typed reader decodes them
    assert ProtobufDeserializer(pb["order"].Order)(data, CTX) == msg


def test_wildcard_paths_as_confluents_data_contracts() -> None:
    from kontrakt.serde.rules._fields import wildcard_match

    cases = [("eve", "eve*", True), ("alice.bob.eve", "a*.bob.eve", True),
             ("alice.bob.eve", "a*.bob.e*", True), ("alice.bob.eve", "a*", False),
             ("alice.bob.eve", "a**", True), ("alice.bob.eve", "alice.bob*", False),
             ("alice.bob.eve", "alice.bob**", True), ("a.b", "a.?", True),
             ("a.bc", "a.?", False)]
    assert [wildcard_match(t, m) for t, m, _ in cases] == [want for _, _, want in cases]


def test_field_rules_on_avro_and_fail_closed_elsewhere(registry: MockSchemaRegistryClient,
                                                       cel: RuleRegistry) -> None:
    from kontrakt.serde.rules.cel import CelFieldExecutor

    cel.register_executor(CelFieldExecutor())
    schema = json.dumps({"type": "record", "name": "Order", "fields": [
        {"name": "a", "type": "int"},
        {"name": "note", "type": "string", "confluent:tags": ["PII"]}]})
    mask = rule("mask", kind="TRANSFORM", type="CEL_FIELD", tags=["PII"], expr="'***'")
    # the same tagged transform twice runs once on write
    registry.register_schema("orders-value", with_rules(
        mask, {**mask, "name": "mask-again", "expr": "value + '!'"}, schema=schema))
    data = AvroSerializer(registry, conf=LATEST, rule_registry=cel)({"a": 1, "note": "n"}, CTX)
    assert AvroDeserializer(registry)(data, CTX) == {"a": 1, "note": "***"}
    one_of = json.dumps({"type": "object", "properties": {
        "a": {"oneOf": [{"type": "integer"}, {"type": "string"}]}}})
    registry.register_schema("json-value", with_rules(
        rule(type="CEL_FIELD", expr="true"), schema=one_of, kind="JSON"))
    with pytest.raises(ValueSerializationError, match="through oneOf are not supported yet"):
        JSONSerializer(None, registry, conf=LATEST, rule_registry=cel)(
            {"a": 1}, SerializationContext("json"))


def test_dlq_action_without_a_topic_still_refuses(registry: MockSchemaRegistryClient,
                                                  cel: RuleRegistry) -> None:
    from kontrakt.serde.rules.dlq import DlqAction

    cel.register_action(DlqAction())
    registry.register_schema("orders-value", with_rules(rule(onFailure="DLQ")))
    ser = AvroSerializer(registry, conf=LATEST, rule_registry=cel)
    with pytest.raises(ValueSerializationError, match=r"no dlq\.topic"):
        ser({"a": -1, "note": ""}, CTX)
    assert ser({"a": 1, "note": ""}, CTX)  # onSuccess defaults to NONE: the DLQ is not used
