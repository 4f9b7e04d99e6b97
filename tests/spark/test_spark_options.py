"""Spark's Kafka-source options through a real query: subscribePattern, assign,
maxRecordsPerPartition / minPartitions, includeHeaders, the sink's per-row topic column,
and ``mode`` for records that cannot be decoded (Tansu and the embedded registry).

By-timestamp options are tested in test_spark_plan.py against crafted answers: neither
test broker answers timestamp lookups faithfully.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="needs the spark extra")

from kontrakt.clients.producer import Producer
from kontrakt.clients.serializing import SerializingProducer
from kontrakt.registry import SchemaRegistryClient
from kontrakt.serde import AvroSerializer
from kontrakt.testing import TansuBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

POINT = {"type": "record", "name": "Point", "fields": [{"name": "x", "type": "long"}]}


def _load(spark: Any, broker: TansuBroker, **options: str) -> Any:
    r = (spark.read.format("kontrakt")
         .option("kafka.bootstrap.servers", broker.bootstrap_servers)
         .option("kafkaConsumer.pollTimeoutMs", "20000"))
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def _produce(broker: TansuBroker, topic: str, partitions: int, n: int) -> None:
    broker.create_topic(topic, partitions)
    with Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 20}) as p:
        for i in range(n):
            p.send(topic, b"%d" % i, partition=i % partitions, headers=[("i", b"%d" % i)])
        p.flush(10)


def test_pattern_assign_split_and_headers(spark: Any, tansu_broker: TansuBroker,
                                          topic_name: str) -> None:
    eu, us = f"{topic_name}-eu", f"{topic_name}-us"
    _produce(tansu_broker, eu, 2, 40)
    _produce(tansu_broker, us, 1, 10)
    _produce(tansu_broker, f"x{topic_name}-eu", 1, 5)  # matches only as a substring

    df = _load(spark, tansu_broker, subscribePattern=f"{topic_name}-(eu|us)",
               maxRecordsPerPartition="8")
    assert df.rdd.getNumPartitions() == 3 + 3 + 2  # 20, 20 and 10 offsets by 8
    rows = df.select("topic", "partition", "offset").collect()
    assert sorted((r.topic, r.partition, r.offset) for r in rows) == sorted(
        [(eu, p, o) for p in (0, 1) for o in range(20)] + [(us, 0, o) for o in range(10)])

    assigned = _load(spark, tansu_broker, assign=json.dumps({eu: [1]}),  # headers off by default
                     minPartitions="4")
    assert "headers" not in assigned.columns
    assert assigned.rdd.getNumPartitions() == 4
    got = sorted(int(r.value) for r in assigned.select("value").collect())
    assert got == list(range(1, 40, 2))
    with_headers = _load(spark, tansu_broker, assign=json.dumps({us: [0]}), includeHeaders="true")
    assert sorted(bytes(r.headers[0].value) for r in with_headers.collect()) == sorted(
        b"%d" % i for i in range(10))


def test_sink_writes_each_row_to_its_topic_column(spark: Any, tansu_broker: TansuBroker,
                                                  topic_name: str) -> None:
    a, b, other = f"{topic_name}-a", f"{topic_name}-b", f"{topic_name}-o"
    for t in (a, b, other):
        tansu_broker.create_topic(t, 1)
    df = spark.createDataFrame([(a, "1"), (b, "2"), (a, "3")], "topic string, value string")

    def write(frame: Any, **options: str) -> None:
        w = (frame.write.format("kontrakt")
             .option("kafka.bootstrap.servers", tansu_broker.bootstrap_servers)
             .option("value.format", "string").mode("append"))
        for k, v in options.items():
            w = w.option(k, v)
        w.save()

    write(df)
    write(df, topic=other)  # the option wins over the column, as in Spark's Kafka sink
    read = _load(spark, tansu_broker, subscribePattern=f"{topic_name}-[abo]",
                 **{"value.format": "string"})
    assert sorted((r.topic, r.value) for r in read.collect()) == sorted(
        [(a, "1"), (a, "3"), (b, "2")] + [(other, v) for v in "123"])
    with pytest.raises(Exception, match=r"value\.format=avro with each row's topic column"):
        write(df, **{"value.format": "avro", "schema.registry.url": "http://127.0.0.1:1"})


def test_modes_for_records_that_are_not_registry_framed(
        spark: Any, tansu_broker: TansuBroker, client: SchemaRegistryClient,
        registry_url: str, topic_name: str) -> None:
    tansu_broker.create_topic(topic_name, 2)
    with SerializingProducer({"bootstrap.servers": tansu_broker.bootstrap_servers,
                              "value.serializer": AvroSerializer(client, json.dumps(POINT))},
                             ) as producer:
        for i in range(4):
            producer.send(topic_name, {"x": i}, partition=0)
        producer.flush(10)
    with Producer(bootstrap_servers=tansu_broker.bootstrap_servers) as producer:
        producer.send(topic_name, b"not framed", key=b"k", partition=1)
        producer.flush(10)

    def load(**options: str) -> Any:
        return _load(spark, tansu_broker, subscribe=topic_name,
                     **{"schema.registry.url": registry_url, "value.format": "avro"},
                     **options)

    with pytest.raises(Exception, match=rf"ValueDeserializationError: {topic_name}/1 offset 0"
                                        rf": the value could not be decoded \(option mode="
                                        rf"FAILFAST; PERMISSIVE or DROPMALFORMED read on\)"):
        load().collect()
    dropped = load(mode="DROPMALFORMED").select("partition", "value.x").collect()
    assert sorted((r.partition, r.x) for r in dropped) == [(0, i) for i in range(4)]
    permissive = load(mode="permissive", columnNameOfCorruptRecord="bad")
    assert permissive.columns[-1] == "bad"
    assert permissive.schema["bad"].dataType.simpleString() == (
        "struct<key:binary,value:binary,error:string>")
    rows = permissive.orderBy("partition", "offset").collect()
    assert [(r.partition, r.value.x, r.bad) for r in rows[:4]] == [(0, i, None) for i in range(4)]
    bad = rows[4]
    assert (bad.partition, bad.value, bytes(bad.bad.key), bytes(bad.bad.value)) == (
        1, None, b"k", b"not framed")
    assert bad.bad.error.startswith("value: ValueDeserializationError: unknown magic byte")


def test_a_pattern_stream_reads_topics_created_after_it_started(
        spark: Any, tansu_broker: TansuBroker, client: SchemaRegistryClient,
        registry_url: str, topic_name: str, tmp_path: Any) -> None:
    """The second topic's subject is resolved by the task that reads it (the plans made
    when the query was analysed know only the first)."""
    def produce(topic: str, xs: range) -> None:
        tansu_broker.create_topic(topic, 1)
        with SerializingProducer({"bootstrap.servers": tansu_broker.bootstrap_servers,
                                  "value.serializer": AvroSerializer(client,
                                                                     json.dumps(POINT))},
                                 ) as producer:
            for x in xs:
                producer.send(topic, {"x": x})
            producer.flush(10)

    produce(f"{topic_name}-1", range(3))
    stream = (spark.readStream.format("kontrakt")
              .option("kafka.bootstrap.servers", tansu_broker.bootstrap_servers)
              .option("subscribePattern", f"{topic_name}-[0-9]")
              .option("schema.registry.url", registry_url).option("value.format", "avro")
              .load())

    def run() -> list[tuple[str, int]]:
        got: list[tuple[str, int]] = []
        query = (stream.writeStream
                 .foreachBatch(lambda b, _: got.extend(
                     (r.topic, r.x) for r in b.select("topic", "value.x").collect()))
                 .option("checkpointLocation", str(tmp_path / "cp"))
                 .trigger(availableNow=True).start())
        try:
            assert query.awaitTermination(60), "the availableNow query did not finish"
        finally:
            query.stop()
        assert query.exception() is None
        return sorted(got)

    assert run() == [(f"{topic_name}-1", x) for x in range(3)]
    produce(f"{topic_name}-2", range(10, 12))
    assert run() == [(f"{topic_name}-2", 10), (f"{topic_name}-2", 11)]
