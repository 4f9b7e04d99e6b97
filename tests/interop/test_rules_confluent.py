"""Data-contract rules with confluent-kafka's serdes and CEL executor as the oracle, against
kontrakt's embedded registry server; and the fail-closed producer check on Tansu.

Both sides get their own rule registries (never the process-wide ones), each holding its own
CEL executor: kontrakt's ``kontrakt.serde.rules.cel.CelExecutor`` and confluent-kafka's
``confluent_kafka.schema_registry.rules.cel.cel_executor.CelExecutor``.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from kontrakt import TopicPartition
from kontrakt.clients.consumer import Consumer
from kontrakt.clients.serializing import SerializingProducer
from kontrakt.errors import ValueSerializationError
from kontrakt.registry import Schema, SchemaRegistryClient
from kontrakt.registry._models import RuleSet
from kontrakt.registry.server import RegistryServer
from kontrakt.serde import MessageField, SerializationContext
from kontrakt.serde.avro import AvroDeserializer, AvroSerializer
from kontrakt.serde.json_schema import JSONDeserializer, JSONSerializer
from kontrakt.serde.rules import RuleRegistry
from kontrakt.testing import TansuBroker

pytest.importorskip("celpy")
from kontrakt.serde.rules.cel import CelExecutor

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # authlib's httpx deprecation, on confluent's import
    from confluent_kafka import schema_registry as csr
    from confluent_kafka.schema_registry import avro as cavro
    from confluent_kafka.schema_registry import json_schema as cjson
    from confluent_kafka.schema_registry.rule_registry import RuleRegistry as CRuleRegistry
    from confluent_kafka.schema_registry.rules.cel.cel_executor import (
        CelExecutor as CCelExecutor,
    )
    from confluent_kafka.serialization import MessageField as CField
    from confluent_kafka.serialization import SerializationContext as CContext
    from confluent_kafka.serialization import SerializationError as CSerializationError

pytestmark = [
    pytest.mark.interop,
    pytest.mark.filterwarnings("ignore:The httpx module is deprecated"),
]

AVRO = json.dumps({"type": "record", "name": "Order", "fields": [
    {"name": "a", "type": "int"}, {"name": "note", "type": "string"}]})
JSON_SCHEMA = json.dumps({"type": "object", "properties": {
    "a": {"type": "integer"}, "note": {"type": "string"}}, "required": ["a", "note"]})
RULES = (
    {"name": "positive", "kind": "CONDITION", "mode": "WRITE", "type": "CEL",
     "expr": "message.a > 0"},
    {"name": "cap", "kind": "TRANSFORM", "mode": "WRITE", "type": "CEL",
     "expr": '{"a": message.a > 50 ? 50 : message.a, "note": message.note + "+w"}'},
    {"name": "mark", "kind": "TRANSFORM", "mode": "READ", "type": "CEL",
     "expr": '{"a": message.a, "note": message.note + "+r"}'},
    {"name": "small", "kind": "CONDITION", "mode": "WRITEREAD", "type": "CEL",
     "expr": "message.a < 1000", "onFailure": "ERROR,NONE"},
    {"name": "off", "kind": "CONDITION", "mode": "WRITE", "type": "CEL", "expr": "false",
     "disabled": True},
)
LATEST = {"use.latest.version": True, "auto.register.schemas": False}
VALUES = [{"a": a, "note": f"n{a}"} for a in (-5, 0, 1, 5, 50, 51, 999, 1000, 5000)]


@pytest.fixture(scope="module")
def server() -> Iterator[RegistryServer]:
    with RegistryServer() as srv:
        yield srv


@pytest.fixture()
def clients(server: RegistryServer) -> Iterator[tuple[Any, SchemaRegistryClient]]:
    theirs = csr.SchemaRegistryClient({"url": server.url})
    ours = SchemaRegistryClient({"url": server.url})
    yield theirs, ours
    ours.close()
    theirs.__exit__(None, None, None)


def _ours() -> RuleRegistry:
    registry = RuleRegistry()
    registry.register_executor(CelExecutor())
    return registry


def _theirs() -> Any:
    registry = CRuleRegistry()
    registry.register_executor(CCelExecutor())
    return registry


def _outcome(fn: Any, errors: tuple[type[BaseException], ...]) -> Any:
    try:
        return fn()
    except errors:
        return "refused"


@pytest.mark.parametrize("fmt", ["avro", "json"])
def test_rules_give_the_same_result_both_ways(clients: tuple[Any, SchemaRegistryClient],
                                              fmt: str) -> None:
    confluent_client, client = clients
    topic = f"rules-{fmt}"
    schema_type, text = ("AVRO", AVRO) if fmt == "avro" else ("JSON", JSON_SCHEMA)
    client.register_schema(f"{topic}-value",
                           Schema(text, schema_type, rule_set=RuleSet(domain_rules=RULES)))
    ctx, cctx = SerializationContext(topic, MessageField.VALUE), CContext(topic, CField.VALUE)
    if fmt == "avro":
        ours = AvroSerializer(client, conf=LATEST, rule_registry=_ours())
        theirs = cavro.AvroSerializer(confluent_client, conf=LATEST, rule_registry=_theirs())
        our_de = AvroDeserializer(client, rule_registry=_ours())
        their_de = cavro.AvroDeserializer(confluent_client, rule_registry=_theirs())
    else:
        ours = JSONSerializer(None, client, conf=LATEST, rule_registry=_ours())
        theirs = cjson.JSONSerializer(None, confluent_client, conf=LATEST,
                                      rule_registry=_theirs())
        our_de = JSONDeserializer(None, schema_registry_client=client, rule_registry=_ours())
        their_de = cjson.JSONDeserializer(None, schema_registry_client=confluent_client,
                                          rule_registry=_theirs())
    read_back = []
    for value in VALUES:
        mine = _outcome(lambda v=value: ours(dict(v), ctx), (ValueSerializationError,))
        yours = _outcome(lambda v=value: theirs(dict(v), cctx), (CSerializationError,))
        assert mine == yours, value  # the same refusals, the same bytes
        if mine != "refused":
            assert our_de(yours, ctx) == their_de(mine, cctx)
            read_back.append(our_de(yours, ctx))
    # -5 and 0 fail "positive", 5000 is capped to 50 and so passes "small" on write.
    assert [r["a"] for r in read_back] == [1, 5, 50, 50, 50, 50, 50]
    assert all(r["note"].endswith("+w+r") for r in read_back)


def test_no_executor_refuses_on_both_sides(clients: tuple[Any, SchemaRegistryClient]) -> None:
    confluent_client, client = clients
    topic = "rules-closed"
    client.register_schema(f"{topic}-value", Schema(AVRO, "AVRO", rule_set=RuleSet(
        domain_rules=RULES[:1])))
    ours = AvroSerializer(client, conf=LATEST, rule_registry=RuleRegistry())
    theirs = cavro.AvroSerializer(confluent_client, conf=LATEST, rule_registry=CRuleRegistry())
    value = {"a": 5, "note": "x"}
    with pytest.raises(CSerializationError):
        theirs(value, CContext(topic, CField.VALUE))
    with pytest.raises(ValueSerializationError, match="'positive'") as info:
        ours(value, SerializationContext(topic, MessageField.VALUE))
    assert info.value.rule.name == "positive"


@pytest.mark.integration
def test_serializing_producer_with_an_unrunnable_rule_produces_nothing(
        tansu_broker: TansuBroker, server: RegistryServer, topic_name: str) -> None:
    """The issue's case: a CEL WRITE rule ``message.a > 0``; without an executor nothing
    reaches the topic, with one a = -5 is refused and a = 5 is written."""
    tansu_broker.create_topic(topic_name, 1)
    with SchemaRegistryClient({"url": server.url}) as client:
        client.register_schema(f"{topic_name}-value", Schema(AVRO, "AVRO", rule_set=RuleSet(
            domain_rules=RULES[:1])))
        bootstrap = {"bootstrap.servers": tansu_broker.bootstrap_servers}

        def produce(rules: RuleRegistry, value: dict[str, Any]) -> None:
            ser = AvroSerializer(client, conf=LATEST, rule_registry=rules)
            with SerializingProducer({**bootstrap, "value.serializer": ser}) as producer:
                try:
                    producer.produce(topic_name, value=value)
                finally:
                    producer.flush(10)

        for value in ({"a": 5, "note": "x"}, {"a": -5, "note": "x"}):
            with pytest.raises(ValueSerializationError, match="no rule executor"):
                produce(RuleRegistry(), value)
        with pytest.raises(ValueSerializationError, match="'positive'"):
            produce(_ours(), {"a": -5, "note": "x"})
        tp = TopicPartition(topic_name, 0)
        with Consumer({**bootstrap}) as consumer:
            assert consumer.end_offsets([tp], timeout=10) == {tp: 0}
        produce(_ours(), {"a": 5, "note": "x"})
        with Consumer({**bootstrap}) as consumer:
            assert consumer.end_offsets([tp], timeout=10) == {tp: 1}


FIELD_AVRO = json.dumps({"type": "record", "name": "Person", "namespace": "com.example",
                         "fields": [
    {"name": "a", "type": "int"},
    {"name": "ssn", "type": "string", "confluent:tags": ["PII"]},
    {"name": "email", "type": ["null", "string"], "default": None},
    {"name": "home", "type": {"type": "record", "name": "Address", "fields": [
        {"name": "street", "type": "string"}, {"name": "zip", "type": "string"}]}},
    {"name": "aliases", "type": {"type": "array", "items": "string"}}]})
FIELD_RULES = (
    {"name": "mask", "kind": "TRANSFORM", "mode": "WRITE", "type": "CEL_FIELD",
     "tags": ["PII"], "expr": "typeName == 'STRING' ; 'XXX-' + value"},
    {"name": "positive-ints", "kind": "CONDITION", "mode": "WRITE", "type": "CEL_FIELD",
     "expr": "typeName == 'INT' ; value > 0"},
    {"name": "upper-on-read", "kind": "TRANSFORM", "mode": "READ", "type": "CEL_FIELD",
     "expr": "name == 'street' ; value + '!'"},
)


FIELD_JSON = json.dumps({"type": "object", "properties": {
    "a": {"type": "integer"},
    "ssn": {"type": "string", "confluent:tags": ["PII"]},
    "email": {"type": "string"},
    "home": {"$ref": "#/definitions/Address"},
    "aliases": {"type": "array", "items": {"type": "string"}}},
    "required": ["a", "ssn", "home", "aliases"],
    "definitions": {"Address": {"type": "object", "properties": {
        "street": {"type": "string"}, "zip": {"type": "string"}}}}})
FIELD_JSON_RULES = (
    {**FIELD_RULES[0]},
    {**FIELD_RULES[1]},
    {"name": "upper-on-read", "kind": "TRANSFORM", "mode": "READ", "type": "CEL_FIELD",
     "expr": "name == 'street' ; value + '!'"},
)


@pytest.mark.parametrize("fmt", ["avro", "json"])
def test_field_rules_with_tags_agree(clients: tuple[Any, SchemaRegistryClient],
                                     fmt: str) -> None:
    """CEL_FIELD: inline confluent:tags and metadata tags by path choose the fields."""
    from confluent_kafka.schema_registry.rules.cel.cel_field_executor import (
        CelFieldExecutor as CCelFieldExecutor,
    )

    from kontrakt.registry._models import Metadata
    from kontrakt.serde.rules.cel import CelFieldExecutor

    confluent_client, client = clients
    topic = f"rules-fields-{fmt}"
    if fmt == "avro":
        schema = Schema(FIELD_AVRO, "AVRO", metadata=Metadata(tags={
            "com.example.Address.zip": ["PII"], "**.email": ["PII"]}),
            rule_set=RuleSet(domain_rules=FIELD_RULES))
    else:
        schema = Schema(FIELD_JSON, "JSON", metadata=Metadata(tags={
            "$.home.zip": ["PII"], "**.email": ["PII"]}),
            rule_set=RuleSet(domain_rules=FIELD_JSON_RULES))
    client.register_schema(f"{topic}-value", schema)
    ours_reg, theirs_reg = RuleRegistry(), CRuleRegistry()
    ours_reg.register_executor(CelFieldExecutor())
    theirs_reg.register_executor(CCelFieldExecutor())
    ctx, cctx = SerializationContext(topic, MessageField.VALUE), CContext(topic, CField.VALUE)
    if fmt == "avro":
        ours = AvroSerializer(client, conf=LATEST, rule_registry=ours_reg)
        theirs = cavro.AvroSerializer(confluent_client, conf=LATEST, rule_registry=theirs_reg)
        our_de = AvroDeserializer(client, rule_registry=ours_reg)
        their_de = cavro.AvroDeserializer(confluent_client, rule_registry=theirs_reg)
    else:
        ours = JSONSerializer(None, client, conf=LATEST, rule_registry=ours_reg)
        theirs = cjson.JSONSerializer(None, confluent_client, conf=LATEST,
                                      rule_registry=theirs_reg)
        our_de = JSONDeserializer(None, schema_registry_client=client, rule_registry=ours_reg)
        their_de = cjson.JSONDeserializer(None, schema_registry_client=confluent_client,
                                          rule_registry=theirs_reg)
    values = [
        {"a": 1, "ssn": "123", "email": "e@x", "home": {"street": "s", "zip": "z"},
         "aliases": ["p"]},
        {"a": 7, "ssn": "", "email": None, "home": {"street": "", "zip": "9"}, "aliases": []},
        {"a": -1, "ssn": "1", "email": None, "home": {"street": "s", "zip": "z"},
         "aliases": []},
    ]
    if fmt == "json":  # an absent email, not null, in the JSON documents
        values = [{k: v for k, v in value.items() if v is not None} for value in values]
    results = []
    for value in values:
        mine = _outcome(lambda v=value: ours(json.loads(json.dumps(v)), ctx),
                        (ValueSerializationError,))
        yours = _outcome(lambda v=value: theirs(json.loads(json.dumps(v)), cctx),
                         (CSerializationError,))
        assert mine == yours, value
        if mine != "refused":
            assert our_de(yours, ctx) == their_de(mine, cctx)
            results.append(our_de(yours, ctx))
    assert results[0] == {"a": 1, "ssn": "XXX-123", "email": "XXX-e@x",
                          "home": {"street": "s!", "zip": "XXX-z"}, "aliases": ["p"]}
    assert len(results) == 2  # a = -1 refused by "positive-ints"


def test_jsonata_migrations_agree_both_ways(clients: tuple[Any, SchemaRegistryClient]) -> None:
    """A field renamed between two versions, with UPGRADE and DOWNGRADE JSONata rules on the
    newer one: reading with the latest version, each side reads the other's old and new
    records to the same values; reading with the old version (DOWNGRADE), kontrakt reads both
    sides' new records back into the old shape.

    confluent-kafka's deserializer looks each writer's schema up under the subject, with the
    metadata and ruleSet as its client renders them (an empty ``sensitive`` list, empty
    ``domainRules`` and ``encodingRules`` lists): the server identifies those with the stored
    schemas, as Confluent's does.
    """
    from confluent_kafka.schema_registry.rules.jsonata.jsonata_executor import (
        JsonataExecutor as CJsonataExecutor,
    )

    from kontrakt.registry._models import Metadata
    from kontrakt.serde.rules.jsonata import JsonataExecutor

    confluent_client, client = clients
    topic = "rules-migrate"
    subject = f"{topic}-value"
    v1 = json.dumps({"type": "record", "name": "Widget", "fields": [
        {"name": "name", "type": "string"}, {"name": "size", "type": "int"}]})
    v2 = json.dumps({"type": "record", "name": "Widget", "fields": [
        {"name": "name", "type": "string"}, {"name": "height", "type": "int"}]})
    up = {"name": "up", "kind": "TRANSFORM", "mode": "UPGRADE", "type": "JSONATA",
          "expr": "$merge([$sift($, function($v, $k) {$k != 'size'}), {'height': $.size}])"}
    down = {"name": "down", "kind": "TRANSFORM", "mode": "DOWNGRADE", "type": "JSONATA",
            "expr": "$merge([$sift($, function($v, $k) {$k != 'height'}), {'size': $.height}])"}
    client.set_compatibility(subject, "NONE")  # a rename is a breaking change
    client.register_schema(subject, Schema(v1, "AVRO", metadata=Metadata(
        properties={"major": "1"})))
    # v2 names its own major version: without it, it would carry v1's metadata forward
    # (as Confluent's server does) and be found by "major": "1" too.
    client.register_schema(subject, Schema(v2, "AVRO", metadata=Metadata(
        properties={"major": "2"}), rule_set=RuleSet(migration_rules=(up, down))))
    ours_reg, theirs_reg = RuleRegistry(), CRuleRegistry()
    ours_reg.register_executor(JsonataExecutor())
    theirs_reg.register_executor(CJsonataExecutor())
    ctx, cctx = SerializationContext(topic, MessageField.VALUE), CContext(topic, CField.VALUE)
    old = {"use.latest.with.metadata": {"major": "1"}, "auto.register.schemas": False}
    written = {
        "ours v1": AvroSerializer(client, conf=old)({"name": "a", "size": 3}, ctx),
        "theirs v1": cavro.AvroSerializer(confluent_client, conf=old)(
            {"name": "b", "size": 5}, cctx),
        "ours v2": AvroSerializer(client, conf=LATEST)({"name": "c", "height": 7}, ctx),
        "theirs v2": cavro.AvroSerializer(confluent_client, conf=LATEST)(
            {"name": "d", "height": 9}, cctx),
    }
    latest = {"use.latest.version": True}
    our_de = AvroDeserializer(client, conf=latest, rule_registry=ours_reg)
    their_de = cavro.AvroDeserializer(confluent_client, conf=latest, rule_registry=theirs_reg)
    got = {label: our_de(data, ctx) for label, data in written.items()}
    assert got == {label: their_de(data, cctx) for label, data in written.items()}
    assert got == {"ours v1": {"name": "a", "height": 3}, "theirs v1": {"name": "b", "height": 5},
                   "ours v2": {"name": "c", "height": 7}, "theirs v2": {"name": "d", "height": 9}}
    our_old = AvroDeserializer(client, conf={"use.latest.with.metadata": {"major": "1"}},
                               rule_registry=ours_reg)
    assert our_old(written["theirs v2"], ctx) == {"name": "d", "size": 9}
    assert our_old(written["ours v2"], ctx) == {"name": "c", "size": 7}
    assert our_old(written["theirs v1"], ctx) == {"name": "b", "size": 5}


def _read_all(bootstrap: dict[str, Any], topic: str, n: int) -> list[Any]:
    """The first ``n`` records of partition 0 of ``topic`` (bounded: 20 s)."""
    import time

    tp = TopicPartition(topic, 0)
    out: list[Any] = []
    with Consumer({**bootstrap, "enable.auto.commit": False}) as consumer:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        deadline = time.monotonic() + 20
        while len(out) < n and time.monotonic() < deadline:
            out.extend(consumer.consume(n - len(out), timeout=1))
    return out


@pytest.mark.integration
def test_dlq_action_diverts_refused_records_and_replays_skip_the_rule(
        tansu_broker: TansuBroker, server: RegistryServer, topic_name: str) -> None:
    """onFailure DLQ on Tansu: a refused write reaches the DLQ topic as JSON, a refused read
    as its original bytes, both with the __rule.* headers; the data topic gets nothing on
    write. Read back with the DLQ record's headers, kontrakt's deserializer and
    confluent-kafka's (the oracle for the header's meaning) skip the rule named there."""
    from kontrakt.clients.producer import Producer
    from kontrakt.errors import ValueDeserializationError
    from kontrakt.serde.rules.dlq import DlqAction

    dlq_topic = f"{topic_name}-dlq"
    for topic in (topic_name, dlq_topic):
        tansu_broker.create_topic(topic, 1)
    bootstrap = {"bootstrap.servers": tansu_broker.bootstrap_servers}
    rules = (
        {"name": "positive", "kind": "CONDITION", "mode": "WRITE", "type": "CEL",
         "expr": "message.a > 0", "onFailure": "DLQ"},
        {"name": "small", "kind": "CONDITION", "mode": "READ", "type": "CEL",
         "expr": "message.a < 10", "onFailure": "DLQ", "params": {"dlq.topic": dlq_topic}},
    )
    with SchemaRegistryClient({"url": server.url}) as client, Producer(bootstrap) as dlq_out:
        client.register_schema(f"{topic_name}-value", Schema(AVRO, "AVRO", rule_set=RuleSet(
            domain_rules=rules)))
        registry = _ours()
        registry.register_action(DlqAction())
        rule_conf = {"producer": dlq_out, "dlq.topic": dlq_topic, "dlq.auto.flush": "true"}
        ser = AvroSerializer(client, conf=LATEST, rule_registry=registry, rule_conf=rule_conf)
        with SerializingProducer({**bootstrap, "value.serializer": ser}) as producer:
            with pytest.raises(ValueSerializationError, match="sent to DLQ topic") as info:
                producer.produce(topic_name, value={"a": -5, "note": "neg"})
            assert info.value.rule.name == "positive"
            producer.produce(topic_name, value={"a": 50, "note": "big"})
            producer.flush(10)
        [written] = _read_all(bootstrap, topic_name, 1)
        ctx = SerializationContext(topic_name, MessageField.VALUE)
        de = AvroDeserializer(client, rule_registry=registry)
        with pytest.raises(ValueDeserializationError, match="'small'"):
            de(written.value, ctx)
        dead = _read_all(bootstrap, dlq_topic, 2)
        assert json.loads(dead[0].value) == {"a": -5, "note": "neg"}
        assert dead[1].value == written.value  # the bytes as they were read
        headers = [dict(d.headers) for d in dead]
        assert [h["__rule.name"] for h in headers] == [b"positive", b"small"]
        assert [h["__rule.mode"] for h in headers] == [b"WRITE", b"READ"]
        assert headers[1]["__rule.topic"] == topic_name.encode()
        assert headers[1]["__rule.subject"] == f"{topic_name}-value".encode()
        replay = SerializationContext(topic_name, MessageField.VALUE, list(dead[1].headers))
        assert de(dead[1].value, replay) == {"a": 50, "note": "big"}
        with csr.SchemaRegistryClient({"url": server.url}) as confluent_client:
            their_de = cavro.AvroDeserializer(confluent_client, rule_registry=_theirs())
            creplay = CContext(topic_name, CField.VALUE, list(dead[1].headers))
            assert their_de(dead[1].value, creplay) == {"a": 50, "note": "big"}
            from confluent_kafka.schema_registry.serde import RuleError as CRuleError

            with pytest.raises(CRuleError, match="DLQ"):  # it refuses: no DLQ action there
                their_de(dead[1].value, CContext(topic_name, CField.VALUE))


def test_protobuf_conditions_agree(clients: tuple[Any, SchemaRegistryClient]) -> None:
    """CEL conditions over Protobuf messages (strings, enums as ints, sint64, repeated
    messages, maps, unset message fields as null): both sides refuse the same messages and
    write the same bytes, and each reads the other's."""
    import random

    from kontrakt.serde.protobuf import ProtobufDeserializer, ProtobufSerializer
    from tests.unit.serde._support import proto_modules

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from confluent_kafka.schema_registry import protobuf as cproto

    confluent_client, client = clients
    pb = proto_modules()
    order = pb["order"].Order
    topic = "rules-proto"
    ctx, cctx = SerializationContext(topic, MessageField.VALUE), CContext(topic, CField.VALUE)
    ProtobufSerializer(order, client)(order(id="seed"), ctx)  # registers v1 and its import
    v1 = client.get_latest_version(f"{topic}-value").schema
    expr = ("message.id != '' && message.status != 3 && message.delta > -1000 && "
            "size(message.lines) < 3 && (message.total == null || message.total.units < 500) "
            "&& !('bad' in message.tags)")
    client.register_schema(f"{topic}-value", Schema(v1.schema_str, "PROTOBUF", v1.references,
                                                    rule_set=RuleSet(domain_rules=(
        {"name": "valid", "kind": "CONDITION", "mode": "WRITEREAD", "type": "CEL",
         "expr": expr},))))
    ours = ProtobufSerializer(order, client, conf=LATEST, rule_registry=_ours())
    theirs = cproto.ProtobufSerializer(order, confluent_client, {
        **LATEST, "use.deprecated.format": False}, rule_registry=_theirs())
    our_de = ProtobufDeserializer(order, schema_registry_client=client, rule_registry=_ours())
    their_de = cproto.ProtobufDeserializer(order, {"use.deprecated.format": False},
                                           confluent_client, rule_registry=_theirs())
    rnd = random.Random(7)
    outcomes = []
    for i in range(150):
        msg = order(id=rnd.choice(["", "o", "p"]), status=rnd.randrange(4),
                    delta=rnd.randrange(-2000, 2000))
        for _ in range(rnd.randrange(4)):
            msg.lines.add(sku="s", qty=rnd.randrange(9))
        if rnd.random() < 0.5:
            msg.total.units = rnd.randrange(1000)
        if rnd.random() < 0.2:
            msg.tags["bad"] = "x"
        mine = _outcome(lambda m=msg: ours(m, ctx), (ValueSerializationError,))
        yours = _outcome(lambda m=msg: theirs(m, cctx), (CSerializationError,))
        assert mine == yours, (i, msg)
        outcomes.append(mine == "refused")
        if mine != "refused":
            assert our_de(yours, ctx) == their_de(mine, cctx) == msg
    assert 10 < sum(outcomes) < 140  # both outcomes are well represented


def test_protobuf_transforms_agree(clients: tuple[Any, SchemaRegistryClient]) -> None:
    """A CEL TRANSFORM of Protobuf messages rebuilding the message from a map (a string, an
    enum, a repeated message, a nested message; the fields it leaves out are unset): both
    sides write the same bytes and read each other's to the same message."""
    from kontrakt.serde.protobuf import ProtobufDeserializer, ProtobufSerializer
    from tests.unit.serde._support import proto_modules

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from confluent_kafka.schema_registry import protobuf as cproto

    confluent_client, client = clients
    pb = proto_modules()
    order = pb["order"].Order
    topic = "rules-proto-transform"
    ctx, cctx = SerializationContext(topic, MessageField.VALUE), CContext(topic, CField.VALUE)
    ProtobufSerializer(order, client)(order(id="seed"), ctx)
    v1 = client.get_latest_version(f"{topic}-value").schema
    expr = ('{"id": message.id + "-checked", "status": message.status, '
            '"lines": message.lines, "total": message.total, "gift": !message.gift}')
    client.register_schema(f"{topic}-value", Schema(v1.schema_str, "PROTOBUF", v1.references,
                                                    rule_set=RuleSet(domain_rules=(
        {"name": "stamp", "kind": "TRANSFORM", "mode": "WRITE", "type": "CEL",
         "expr": expr},))))
    ours = ProtobufSerializer(order, client, conf=LATEST, rule_registry=_ours())
    theirs = cproto.ProtobufSerializer(order, confluent_client, {
        **LATEST, "use.deprecated.format": False}, rule_registry=_theirs())
    our_de = ProtobufDeserializer(order, schema_registry_client=client, rule_registry=_ours())
    their_de = cproto.ProtobufDeserializer(order, {"use.deprecated.format": False},
                                           confluent_client, rule_registry=_theirs())
    msg = order(id="o", status=2, delta=5, gift=False)
    msg.lines.add(sku="s", qty=3).price.units = 7
    msg.total.units = 9
    mine, yours = ours(msg, ctx), theirs(msg, cctx)
    assert mine == yours
    got = our_de(yours, ctx)
    assert got == their_de(mine, cctx)
    assert (got.id, got.status, got.gift, got.delta) == ("o-checked", 2, True, 0)
    assert got.lines[0].price.units == 7 and got.total.units == 9
