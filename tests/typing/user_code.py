"""Typical application code, checked by ``mypy --strict`` in test_typing.py (never run).

Each ``assert_type`` states what a user's type checker must infer on the public path; the
file must type-check cleanly.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, TypeAlias

from typing_extensions import assert_type

from kontrakt import (
    AdminClient,
    AsyncConsumer,
    AsyncDeserializingConsumer,
    AsyncProducer,
    AsyncSerializingProducer,
    Consumer,
    ConsumerRecord,
    DeserializingConsumer,
    Producer,
    RecordMetadata,
    SerializingProducer,
    TopicPartition,
)
from kontrakt.clients.admin import NewTopic
from kontrakt.clients.producer import RecordFuture
from kontrakt.protocol.messages import MetadataRequest, MetadataResponse, ProduceRequest
from kontrakt.registry import AsyncSchemaRegistryClient, RegisteredSchema, SchemaRegistryClient
from kontrakt.serde import (
    AsyncAvroDeserializer,
    AsyncAvroSerializer,
    AvroDeserializer,
    AvroSerializer,
    IntegerDeserializer,
    JSONDeserializer,
    JSONSerializer,
    ProtobufDeserializer,
    StringDeserializer,
    StringSerializer,
)

#: What a plain Consumer / AsyncConsumer hands out.
RawRecord: TypeAlias = ConsumerRecord[bytes | None, bytes | None]


@dataclasses.dataclass
class Order:
    id: str
    amount: int


def plain_clients(bs: str) -> None:
    with Producer(bootstrap_servers=bs) as p:
        fut = p.send("orders", b"v", key=b"k")
        assert_type(fut, RecordFuture)
        assert_type(fut.cancelled(), bool)
        assert_type(fut.get_loop(), asyncio.AbstractEventLoop)
        md = p.send_and_wait("orders", b"v", timeout=10)
        assert_type(md, RecordMetadata)
        assert_type(md.serialized_value_size, int)
        p.produce("orders", b"v", on_delivery=lambda err, m: None)
        assert_type(p.flush(5), int)
    with Consumer(bootstrap_servers=bs, group_id="g") as c:
        assert_type(c, Consumer[bytes | None, bytes | None])
        c.subscribe(["orders"])
        rec = c.poll(1.0)
        # A plain consumer's records hold the bytes as read (None: a null key or value).
        assert_type(rec, RawRecord | None)
        if rec is not None:
            assert_type(rec.offset, int)
            assert_type(rec.topic, str)
            assert_type(rec.value, bytes | None)
        assert_type(c.getmany(1.0), dict[TopicPartition, list[RawRecord]])
        assert_type(c.consume(10, 1.0), list[RawRecord])
        assert_type(c.getone(), RawRecord)
        for r in c:
            assert_type(r, RawRecord)
            break
        assert_type(c.last_stable_offset(TopicPartition("orders", 0)), int | None)
        assert_type(c.partitions_for_topic("orders"), set[int] | None)
        # The peers' names: confluent-kafka's, kafka-python's, aiokafka's.
        assert_type(c.topics(), set[str])
        assert_type(c.memberid(), str | None)
        assert_type(c.cluster_id(5), str | None)
        assert_type(c.bootstrap_connected(), bool)
        assert_type(c.last_poll_timestamp(TopicPartition("orders", 0)), int | None)
        c.set_sasl_credentials("user", "password")
    with AdminClient(bootstrap_servers=bs) as admin:
        created = admin.create_topics([NewTopic("orders", 3, 1)])
        assert_type(list(created), list[str])
        assert_type(admin.cluster_id(), str | None)


def registry_and_serdes(url: str) -> None:
    registry = SchemaRegistryClient({"url": url})
    latest = registry.get_latest_version("orders-value")
    assert_type(latest, RegisteredSchema)
    assert_type(latest.schema_id, int)

    # Deserializers: dict for a schema-less read, the dataclass for a typed model, what
    # from_dict returns otherwise.
    assert_type(AvroDeserializer(registry)(b"", None), dict[str, Any] | None)
    assert_type(AvroDeserializer(registry, Order)(b"", None), Order | None)
    assert_type(AvroDeserializer(registry, from_dict=lambda d, ctx: len(d))(b"", None),
                int | None)
    assert_type(JSONDeserializer(None, schema_registry_client=registry)(b""),
                dict[str, Any] | None)
    assert_type(ProtobufDeserializer(None, schema_registry_client=registry)(b""), Any | None)
    assert_type(StringDeserializer()(b""), str | None)
    assert_type(IntegerDeserializer()(b""), int | None)

    # Serializers take what their model says.
    AvroSerializer(registry, Order)(Order("a", 1), None)
    JSONSerializer(Order, registry)(Order("a", 1), None)

    # Serializing clients are typed by their serializers.
    producer = SerializingProducer({"bootstrap.servers": "127.0.0.1:9092"},
                                   key_serializer=StringSerializer(),
                                   value_serializer=AvroSerializer(registry, Order))
    assert_type(producer, SerializingProducer[str | None, Order | None])
    producer.produce("orders", key="a", value=Order("a", 1))
    assert_type(producer.send_and_wait("orders", Order("a", 1), key="a"), RecordMetadata)
    untyped = SerializingProducer({"bootstrap.servers": "127.0.0.1:9092"})
    assert_type(untyped, SerializingProducer[Any, Any])

    consumer = DeserializingConsumer({"bootstrap.servers": "127.0.0.1:9092", "group.id": "g"},
                                     key_deserializer=StringDeserializer(),
                                     value_deserializer=AvroDeserializer(registry, Order))
    consumer.subscribe(["orders"])
    record = consumer.poll(1.0)
    assert_type(record, ConsumerRecord[str | None, Order | None] | None)
    if record is not None and record.value is not None:
        assert_type(record.value.amount, int)
    for tp, records in consumer.getmany(1.0).items():
        assert_type(tp, TopicPartition)
        assert_type(records, list[ConsumerRecord[str | None, Order | None]])
    assert_type(consumer.consume(10, 1.0), list[ConsumerRecord[str | None, Order | None]])
    assert_type(consumer.getone(), ConsumerRecord[str | None, Order | None])
    for r in consumer:
        assert_type(r, ConsumerRecord[str | None, Order | None])
        break
    with consumer as same:
        assert_type(same, DeserializingConsumer[str | None, Order | None])
    # Deserializers given in the config: nothing says what they return.
    configured = DeserializingConsumer({"bootstrap.servers": "127.0.0.1:9092",
                                        "value.deserializer": StringDeserializer()})
    assert_type(configured.poll(), ConsumerRecord[Any, Any] | None)
    consumer.commit()
    consumer.close()


async def async_clients(bs: str, url: str) -> None:
    registry = AsyncSchemaRegistryClient({"url": url})
    async with AsyncProducer(bootstrap_servers=bs) as p:
        md = await p.send_and_wait("orders", b"v")
        assert_type(md, RecordMetadata)
        assert_type(await p.cluster_id(), str | None)
        assert_type(p.bootstrap_connected(), bool)
    async with AsyncConsumer(bootstrap_servers=bs) as c:
        assert_type(c, AsyncConsumer[bytes | None, bytes | None])
        c.assign([TopicPartition("orders", 0)])
        assert_type(c.last_stable_offset(TopicPartition("orders", 0)), int | None)
        assert_type(await c.topics(), set[str])
        assert_type(c.last_poll_timestamp(TopicPartition("orders", 0)), int | None)
        assert_type(await c.poll(1.0), RawRecord | None)
        assert_type(await c.getmany(1.0), dict[TopicPartition, list[RawRecord]])
        assert_type(await c.consume(10, 1.0), list[RawRecord])
        assert_type(await c.getone(), RawRecord)
        async for raw in c:
            assert_type(raw, RawRecord)
            break
    async with AsyncSerializingProducer(bootstrap_servers=bs, key_serializer=StringSerializer(),
                                        value_serializer=AsyncAvroSerializer(registry, Order)
                                        ) as sp:
        assert_type(sp, AsyncSerializingProducer[str | None, Order | None])
        await sp.send("orders", Order("b", 2), key="b")
    async with AsyncDeserializingConsumer(
            bootstrap_servers=bs, key_deserializer=StringDeserializer(),
            value_deserializer=AsyncAvroDeserializer(registry, Order)) as dc:
        dc.subscribe(["orders"])
        rec = await dc.poll(1.0)
        assert_type(rec, ConsumerRecord[str | None, Order | None] | None)
        async for r in dc:
            assert_type(r.value, Order | None)
            break
        assert_type(await dc.getone(), ConsumerRecord[str | None, Order | None])
        assert_type(await dc.getmany(1.0),
                    dict[TopicPartition, list[ConsumerRecord[str | None, Order | None]]])
        assert_type(await dc.consume(10, 1.0), list[ConsumerRecord[str | None, Order | None]])
    # A deserializer typed with Any (dict[str, Any]) matches several of the constructor's
    # overloads, and mypy then makes the record types Any: loose, never wrong.
    loose = AsyncDeserializingConsumer(bootstrap_servers=bs,
                                       value_deserializer=AsyncAvroDeserializer(registry))
    assert_type(await loose.poll(), ConsumerRecord[Any, Any] | None)


def protocol_messages() -> None:
    req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="orders")],
                          allow_auto_topic_creation=False)
    assert_type(req.allow_auto_topic_creation, bool)
    resp = MetadataResponse()
    for t in resp.topics:
        assert_type(t.name, str | None)
        for part in t.partitions:
            assert_type(part.leader_id, int)
    produce = ProduceRequest(acks=-1, timeout_ms=1000)
    assert_type(produce.transactional_id, str | None)


asyncio.run(async_clients("127.0.0.1:9092", "http://127.0.0.1:8081"))
