"""Which schema decodes a column: a subject per topic from an explicit map
(``value.subjects``), a reader schema pinned by version (``value.schema.version``) or by id
(``value.schema.id``), JSON Schemas with registry references, and what ``value.json.validate``
adds. First the options without a JVM, then through Spark against Tansu and the embedded
registry (records framed by hand with the registered ids, one record per batch: see the
Tansu note in test_spark.py)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="needs the spark extra")

from fastavro import parse_schema, schemaless_writer

from kontrakt.clients.producer import Producer
from kontrakt.errors import ConfigError
from kontrakt.registry import Schema, SchemaReference, SchemaRegistryClient
from kontrakt.spark._json_types import json_mapping
from kontrakt.spark._options import parse_options
from kontrakt.testing import TansuBroker

pytestmark = [pytest.mark.timeout(120)]

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "schema.registry.url": "http://r",
        "subscribe": "a,b", "value.format": "json"}


def test_schema_options_are_parsed_per_column() -> None:
    opts = parse_options({**BASE, "value.subjects": '{"a": "orders-a"}',
                          "value.schema.version": "3", "value.json.validate": "true"})
    assert opts.subject(False, "a") == "orders-a"
    assert opts.subject(False, "b") == "b-value"  # not in the map: the topic's own subject
    assert opts.subject(True, "a") == "a-key"
    choice = opts.schema_choice(False)
    assert (choice.version, choice.schema_id, choice.json_validate) == (3, None, True)
    assert opts.schema_choice(True).version is None
    latest = parse_options({**BASE, "value.schema.version": "latest"})
    assert latest.schema_choice(False).version is None
    assert parse_options({**BASE, "value.schema.id": "9"}).schema_choice(False).schema_id == 9


@pytest.mark.parametrize(("extra", "match"), [
    ({"value.subjects": '["a"]'}, "value.subjects' must be JSON such as"),
    ({"value.subjects": '{"a": ""}'}, "value.subjects' must be JSON such as"),
    ({"value.subjects": '{"c": "x"}'}, "names topic 'c', which is not subscribed"),
    ({"value.schema.version": "0"}, "value.schema.version' must be a positive integer"),
    ({"value.schema.id": "x"}, "value.schema.id' must be a positive integer"),
    ({"value.schema.id": "1", "value.schema.version": "2"}, "give one"),
    ({"key.schema.id": "1"}, "needs key.format avro, json or protobuf"),
    ({"value.format": "avro", "value.json.validate": "true"}, "for value.format=json"),
    ({"value.json.validate": "yes"}, "must be true or false"),
    ({"value.jsonvalidate": "true"}, "did you mean value.json.validate"),
])
def test_bad_schema_options_are_refused(extra: dict[str, str], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_options({**BASE, **extra})


def test_a_write_refuses_the_read_schema_options() -> None:
    with pytest.raises(ConfigError, match="is for reads"):
        parse_options({"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "t",
                       "schema.registry.url": "http://r", "value.format": "avro",
                       "value.schema.version": "1"}, write=True)


LINE = {"type": "object", "properties": {"sku": {"type": "string"},
                                         "qty": {"type": "integer", "minimum": 0}}}


def test_json_references_to_other_documents_map_like_internal_ones() -> None:
    order = {"type": "object", "properties": {
        "id": {"type": "integer"},
        "line": {"$ref": "line.json"},
        "other": {"$ref": "common.json#/$defs/Money"}}}
    common = {"$defs": {"Money": {"$ref": "#/$defs/Units"},
                        "Units": {"type": "object",
                                  "properties": {"units": {"type": "integer"}}}}}
    mapping = json_mapping(order, "value", {"line.json": LINE, "common.json": json.dumps(common)})
    assert mapping.data_type.simpleString() == (
        "struct<id:bigint,line:struct<sku:string,qty:bigint>,other:struct<units:bigint>>")
    assert mapping.convert is not None
    assert mapping.convert({"id": 1, "line": {"sku": "a"}, "other": {"units": 5}}) == (
        1, ("a", None), (5,))
    from kontrakt.spark import UnsupportedSchemaError

    with pytest.raises(UnsupportedSchemaError, match="names no schema reference"):
        json_mapping(order, "value", {"line.json": LINE})


# -- through Spark ------------------------------------------------------------------------
def _send(broker: TansuBroker, topic: str, payloads: list[bytes]) -> None:
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as producer:
        for payload in payloads:
            producer.send(topic, payload)
            producer.flush(10)  # one record per batch: see the Tansu note in test_spark.py


def _framed(schema_id: int, body: bytes) -> bytes:
    return b"\0" + schema_id.to_bytes(4, "big") + body


def _avro(schema: Any, value: Any) -> bytes:
    out = io.BytesIO()
    schemaless_writer(out, parse_schema(schema), value)
    return out.getvalue()


def _read(spark: Any, broker: TansuBroker, registry_url: str, topics: str,
          **options: str) -> Any:
    r = (spark.read.format("kontrakt")
         .option("kafka.bootstrap.servers", broker.bootstrap_servers)
         .option("subscribe", topics)
         .option("schema.registry.url", registry_url)
         .option("kafkaConsumer.pollTimeoutMs", "20000"))
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


@pytest.mark.integration
def test_each_topic_is_decoded_with_the_subject_the_map_names(
        spark: Any, tansu_broker: TansuBroker, registry_url: str,
        client: SchemaRegistryClient, topic_name: str) -> None:
    a, b = f"{topic_name}-a", f"{topic_name}-b"
    doc = {"type": "object", "properties": {"id": {"type": "integer"},
                                            "note": {"type": "string"}}}
    a_id = client.register_schema(f"orders-of-{a}", Schema(json.dumps(doc), "JSON"))
    b_id = client.register_schema(f"{b}-value", Schema(json.dumps(doc), "JSON"))
    for topic, sid, n in ((a, a_id, 2), (b, b_id, 1)):
        tansu_broker.create_topic(topic, 1)
        _send(tansu_broker, topic, [_framed(sid, json.dumps({"id": i, "note": topic}).encode())
                                    for i in range(n)])
    with pytest.raises(Exception, match=f"subject '{a}-value'"):
        _read(spark, tansu_broker, registry_url, f"{a},{b}", **{"value.format": "json"})
    df = _read(spark, tansu_broker, registry_url, f"{a},{b}", **{
        "value.format": "json", "value.subjects": json.dumps({a: f"orders-of-{a}"})})
    assert sorted((r.topic, r.value.id, r.value.note) for r in df.collect()) == [
        (a, 0, a), (a, 1, a), (b, 0, b)]


V1 = {"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"}]}
V2 = {"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"},
    {"name": "qty", "type": "int", "default": 7}]}


@pytest.mark.integration
def test_a_pinned_reader_schema_resolves_every_writer_version(
        spark: Any, tansu_broker: TansuBroker, registry_url: str,
        client: SchemaRegistryClient, topic_name: str) -> None:
    subject = f"{topic_name}-value"
    v1 = client.register_schema(subject, Schema(json.dumps(V1)))
    v2 = client.register_schema(subject, Schema(json.dumps(V2)))
    tansu_broker.create_topic(topic_name, 1)
    _send(tansu_broker, topic_name, [
        _framed(v1, _avro(V1, {"id": 1, "name": "old"})),
        _framed(v2, _avro(V2, {"id": 2, "name": "new", "qty": 3}))])

    pinned = _read(spark, tansu_broker, registry_url, topic_name,
                   **{"value.format": "avro", "value.schema.version": "1"})
    assert pinned.schema["value"].dataType.simpleString() == "struct<id:bigint,name:string>"
    assert [tuple(r.value) for r in pinned.orderBy("offset").collect()] == [
        (1, "old"), (2, "new")]
    by_id = _read(spark, tansu_broker, registry_url, topic_name,
                  **{"value.format": "avro", "value.schema.id": str(v2)})
    assert [tuple(r.value) for r in by_id.orderBy("offset").collect()] == [
        (1, "old", 7), (2, "new", 3)]
    with pytest.raises(Exception, match="version 5 of subject"):
        _read(spark, tansu_broker, registry_url, topic_name,
              **{"value.format": "avro", "value.schema.version": "5"})


@pytest.mark.integration
def test_json_schema_with_registry_references_and_validation(
        spark: Any, tansu_broker: TansuBroker, registry_url: str,
        client: SchemaRegistryClient, topic_name: str) -> None:
    line_subject = f"line-{topic_name}"
    client.register_schema(line_subject, Schema(json.dumps(LINE), "JSON"))
    version = client.get_latest_version(line_subject).version
    order = {"type": "object", "properties": {"id": {"type": "integer"},
                                              "line": {"$ref": "line.json"}}}
    sid = client.register_schema(f"{topic_name}-value", Schema(
        json.dumps(order), "JSON", [SchemaReference("line.json", line_subject, version)]))
    tansu_broker.create_topic(topic_name, 1)
    docs = [{"id": 1, "line": {"sku": "a", "qty": 2}}, {"id": 2, "line": {"qty": -1}}]
    _send(tansu_broker, topic_name, [_framed(sid, json.dumps(d).encode()) for d in docs])

    df = _read(spark, tansu_broker, registry_url, topic_name, **{"value.format": "json"})
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,line:struct<sku:string,qty:bigint>>")
    # Checked against the column's type only: qty -1 breaks no type.
    assert [tuple(r.value) for r in df.orderBy("offset").collect()] == [
        (1, ("a", 2)), (2, (None, -1))]
    strict = _read(spark, tansu_broker, registry_url, topic_name, **{
        "value.format": "json", "value.json.validate": "true", "mode": "PERMISSIVE"})
    rows = strict.orderBy("offset").collect()
    assert tuple(rows[0].value) == (1, ("a", 2)) and rows[0]._corrupt_record is None
    # The referenced schema's minimum, checked by the validating deserializer.
    assert rows[1].value is None
    assert "does not match the JSON schema" in rows[1]._corrupt_record.error
