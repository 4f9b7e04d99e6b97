"""Mistakes a user's type checker must catch: test_typing.py runs ``mypy --strict`` on this
file and expects exactly the errors named by the ``# E: <code>`` comments (never run).

Each line was accepted before the public path was typed (lazy exports were Any, the
deserializing consumer forwarded unknown names, serdes and protocol fields were Any), except
where a comment says otherwise.
"""

from __future__ import annotations

import dataclasses

from kontrakt import (
    AdminClient,
    AsyncConsumer,
    AsyncProducer,
    Consumer,
    DeserializingConsumer,
    Producer,
    SerializingProducer,
    TopicPartition,
)
from kontrakt.protocol.messages import MetadataRequest, ProduceRequest
from kontrakt.registry import SchemaRegistryClient
from kontrakt.serde import AvroDeserializer, AvroSerializer, StringDeserializer, StringSerializer


@dataclasses.dataclass
class Order:
    id: str
    amount: int


def lazy_exports() -> None:
    from kontrakt import Producr  # E: attr-defined
    from kontrakt.serde import AvroSerializr  # E: attr-defined

    print(AvroSerializr, Producr)


def clients(bs: str) -> None:
    c = Consumer(bootstrap_servers=bs)
    c.subscrbe(["orders"])  # E: attr-defined
    c.last_stable_offset("orders")  # E: arg-type
    p = Producer(bootstrap_servers=bs)
    p.send_and_wait("orders", 12345)  # E: arg-type
    admin = AdminClient(bootstrap_servers=bs)
    admin.create_topic("orders")  # E: attr-defined
    admin.delete_topics([TopicPartition("orders", 0)])  # E: list-item


def plain_records(bs: str) -> None:
    """confluent-kafka's habits on a plain consumer's records (bytes | None key and value):
    ``msg.value()`` fails at run time with "'bytes' object is not callable", and a null
    value (a tombstone) has no ``decode``. Accepted while the records were typed Any."""
    c = Consumer(bootstrap_servers=bs)
    msg = c.poll(1.0)
    if msg is not None:
        print(msg.value())  # E: operator, misc
        print(msg.key())  # E: operator, misc
        print(msg.value.decode())  # E: union-attr
    for r in c:
        print(r.value.decode())  # E: union-attr
    for records in c.getmany(1.0).values():
        print(records[0].value())  # E: operator, misc


async def async_clients(bs: str) -> None:
    p = AsyncProducer(bootstrap_servers=bs)
    await p.send_and_wait("orders", 12345)  # E: arg-type
    c = AsyncConsumer(bootstrap_servers=bs)
    msg = await c.poll(1.0)
    if msg is not None:
        print(msg.value())  # E: operator, misc
    print((await c.getone()).value.decode())  # E: union-attr
    async for r in c:
        print(r.value())  # E: operator, misc


def serdes(url: str) -> None:
    registry = SchemaRegistryClient({"url": url})
    registry.get_latest_versoin("orders-value")  # E: attr-defined
    order: Order | None = AvroDeserializer(registry, Order)(b"", None)
    text: str | None = AvroDeserializer(registry, Order)(b"", None)  # E: assignment
    AvroSerializer(registry, Order)({"id": "a", "amount": 1}, None)  # E: arg-type
    producer = SerializingProducer({"bootstrap.servers": "127.0.0.1:9092"},
                                   key_serializer=StringSerializer(),
                                   value_serializer=AvroSerializer(registry, Order))
    producer.produce("orders", key="a", value="not an order")  # E: arg-type
    producer.send("orders", Order("a", 1), key=7)  # E: arg-type
    consumer = DeserializingConsumer({"bootstrap.servers": "127.0.0.1:9092"},
                                     key_deserializer=StringDeserializer(),
                                     value_deserializer=AvroDeserializer(registry, Order))
    consumer.subscrbe(["orders"])  # E: attr-defined
    record = consumer.poll(1.0)
    if record is not None and record.value is not None and order is not None:
        print(record.value.amonut)  # E: attr-defined
        print(record.key + 1)  # E: operator
    print(text)


def protocol() -> None:
    req = MetadataRequest(topics=None)
    print(req.allow_auto_topic_creatoin)  # E: attr-defined
    ProduceRequest(acks="all")  # E: arg-type
    ProduceRequest(ack=1)  # E: call-arg
    req.topics = [MetadataRequest.MetadataRequestTopc(name="t")]  # E: attr-defined
