"""Typed events end to end on Tansu: dataclass -> Avro / JSON Schema / Protobuf ->
SerializingProducer -> broker -> DeserializingConsumer -> dataclass, against the embedded
registry, sync and async, every subject strategy, schema evolution, and bad input.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kontrakt import TopicPartition
from kontrakt.clients.producer import Producer
from kontrakt.clients.serializing import (
    AsyncDeserializingConsumer,
    AsyncSerializingProducer,
    DeserializingConsumer,
    SerializingProducer,
)
from kontrakt.errors import KeySerializationError, ProduceError, ValueDeserializationError
from kontrakt.registry import AsyncSchemaRegistryClient, SchemaRegistryClient
from kontrakt.registry.server import RegistryServer
from kontrakt.serde import (
    AsyncAvroDeserializer,
    AsyncAvroSerializer,
    AvroDeserializer,
    AvroSerializer,
    JSONDeserializer,
    JSONSerializer,
    ProtobufDeserializer,
    ProtobufSerializer,
    StringDeserializer,
    StringSerializer,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
    topic_subject_name_strategy,
)
from kontrakt.testing import TansuBroker

pytestmark = [pytest.mark.integration, pytest.mark.also_on_cluster]

N = 20


class Plan(enum.Enum):
    FREE = "FREE"
    PRO = "PRO"


@dataclasses.dataclass
class SignedUp:
    user_id: str
    age: int
    plan: Plan
    tags: list[str]
    referrer: str | None = None


@dataclasses.dataclass
class SignedUpV2:
    """v2 adds a defaulted field: a v2 reader reads v1 data."""

    user_id: str
    age: int
    plan: Plan
    tags: list[str]
    referrer: str | None = None
    country: str = "unknown"


SignedUpV2.__name__ = SignedUpV2.__qualname__ = "SignedUp"


def _events() -> list[SignedUp]:
    return [SignedUp(f"u{i}", 20 + i, Plan.PRO if i % 2 else Plan.FREE, [f"t{i}"] * (i % 3),
                     None if i % 4 else f"r{i}") for i in range(N)]


@pytest.fixture
def registry() -> Iterator[str]:
    # One registry per test: the record strategy's subject ("SignedUp") is shared by every
    # format, and the registry rightly refuses to change a subject's schema type.
    with RegistryServer() as srv:
        yield srv.url


@pytest.fixture
def client(registry: str) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient({"url": registry}) as c:
        yield c


def _consumer_conf(broker: TansuBroker, topic: str) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap_servers, "group.id": f"{topic}-g",
            "auto.offset.reset": "earliest", "enable.auto.commit": False}


def _read_all(consumer: DeserializingConsumer, topic: str, n: int) -> list[Any]:
    consumer.assign([TopicPartition(topic, 0)])
    out: list[Any] = []
    for _ in range(200):
        out.extend(r.value for r in consumer.consume(n - len(out), 0.5))
        if len(out) >= n:
            break
    return out


STRATEGIES: dict[str, Callable[..., Any]] = {
    "topic": topic_subject_name_strategy,
    "record": record_subject_name_strategy,
    "topic_record": topic_record_subject_name_strategy,
}

FORMATS = ["avro", "json", "protobuf"]


def _serdes(fmt: str, client: SchemaRegistryClient, strategy: Callable[..., Any],
            reader: type) -> tuple[Any, Any]:
    conf = {"subject.name.strategy": strategy}
    if fmt == "avro":
        return (AvroSerializer(client, SignedUp, conf=conf),
                AvroDeserializer(client, reader))
    if fmt == "json":
        return (JSONSerializer(SignedUp, client, conf=conf),
                JSONDeserializer(reader, schema_registry_client=client))
    return (ProtobufSerializer(SignedUp, client, conf=conf),
            ProtobufDeserializer(reader, schema_registry_client=client))


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
@pytest.mark.parametrize("fmt", FORMATS)
def test_typed_events_round_trip_sync(tansu_broker: TansuBroker, client: SchemaRegistryClient,
                                      topic_name: str, fmt: str, strategy: str) -> None:
    if fmt == "protobuf" and strategy != "topic":
        pytest.skip("one strategy is enough to show the Protobuf path; the rest is shared")
    tansu_broker.create_topic(topic_name, 1)
    ser, de = _serdes(fmt, client, STRATEGIES[strategy], SignedUp)
    events = _events()
    with SerializingProducer({"bootstrap.servers": tansu_broker.bootstrap_servers,
                              "key.serializer": StringSerializer(),
                              "value.serializer": ser}) as producer:
        for e in events:
            producer.produce(topic_name, key=e.user_id, value=e)
        assert producer.flush(10) == 0
    with DeserializingConsumer({**_consumer_conf(tansu_broker, topic_name),
                                "key.deserializer": StringDeserializer(),
                                "value.deserializer": de}) as consumer:
        got = _read_all(consumer, topic_name, N)
    assert got == events
    subjects = set(client.get_subjects())
    expected = {"topic": f"{topic_name}-value", "record": "SignedUp",
                "topic_record": f"{topic_name}-SignedUp"}[strategy]
    assert any(s == expected or s.endswith(expected) for s in subjects), subjects


def test_schema_evolution_v1_writer_v2_reader(tansu_broker: TansuBroker,
                                              client: SchemaRegistryClient,
                                              topic_name: str) -> None:
    tansu_broker.create_topic(topic_name, 1)
    events = _events()
    with SerializingProducer({"bootstrap.servers": tansu_broker.bootstrap_servers,
                              "value.serializer": AvroSerializer(client, SignedUp)}) as p:
        for e in events:
            p.send(topic_name, e)
        p.flush(10)
    with DeserializingConsumer({**_consumer_conf(tansu_broker, topic_name),
                                "value.deserializer": AvroDeserializer(client,
                                                                       SignedUpV2)}) as c:
        got = _read_all(c, topic_name, N)
    assert got == [SignedUpV2(**dataclasses.asdict(e), country="unknown") for e in events]


def test_async_round_trip(tansu_broker: TansuBroker, registry: str, topic_name: str) -> None:
    tansu_broker.create_topic(topic_name, 1)
    events = _events()

    async def main() -> list[Any]:
        async with AsyncSchemaRegistryClient({"url": registry}) as client:
            return await run(client)

    async def run(client: AsyncSchemaRegistryClient) -> list[Any]:
        async with AsyncSerializingProducer(
                bootstrap_servers=tansu_broker.bootstrap_servers,
                value_serializer=AsyncAvroSerializer(client, SignedUp)) as producer:
            futures = [await producer.send(topic_name, e, key=e.user_id.encode())
                       for e in events]
            await producer.flush(10)
            assert [(await f).offset for f in futures] == list(range(N))
        got: list[Any] = []
        async with AsyncDeserializingConsumer(
                _consumer_conf(tansu_broker, topic_name),
                value_deserializer=AsyncAvroDeserializer(client, SignedUp)) as consumer:
            consumer.assign([TopicPartition(topic_name, 0)])
            for _ in range(200):
                batch = await consumer.getmany(0.5)
                got.extend(r.value for records in batch.values() for r in records)
                if len(got) >= N:
                    break
        return got

    assert asyncio.run(main()) == events


@pytest.mark.parametrize("read", ["consume", "poll"])
def test_bad_records_are_typed_and_nothing_else_is_lost(tansu_broker: TansuBroker,
                                                        client: SchemaRegistryClient,
                                                        topic_name: str, read: str) -> None:
    """A wrong magic byte, an unknown schema id and a truncated payload among good records:
    each bad one raises with its raw record and offset, every good one is read once."""
    tansu_broker.create_topic(topic_name, 1)
    good = _events()[:6]
    ser = AvroSerializer(client, SignedUp)
    from kontrakt.serde import SerializationContext

    framed = [ser(e, SerializationContext(topic_name)) for e in good]
    assert framed[0] is not None
    bad = {1: b"\x07" + framed[0][1:],                        # wrong magic byte
           3: b"\x00\x7f\xff\xff\xf0" + framed[0][5:],        # unknown schema id
           5: framed[0][:7]}                                  # truncated payload
    payloads: list[bytes | None] = []
    for i, f in enumerate(framed):
        payloads.append(f)
        if i in bad:
            payloads.append(bad[i])
    with Producer(bootstrap_servers=tansu_broker.bootstrap_servers) as raw:
        for p in payloads:
            raw.send(topic_name, p)
        raw.flush(10)

    errors: list[ValueDeserializationError] = []
    got: list[Any] = []
    with DeserializingConsumer({**_consumer_conf(tansu_broker, topic_name),
                                "value.deserializer": AvroDeserializer(client, SignedUp)}) as c:
        c.assign([TopicPartition(topic_name, 0)])
        for _ in range(200):
            try:
                if read == "consume":
                    got.extend(r.value for r in c.consume(10, 0.5))
                elif (record := c.poll(0.5)) is not None:
                    got.append(record.value)
            except ValueDeserializationError as exc:
                errors.append(exc)
            if len(got) + len(errors) >= len(payloads):
                break
    assert got == good
    assert [e.record.offset for e in errors] == [2, 5, 8]
    assert all(e.record.topic == topic_name and e.record.partition == 0 for e in errors)
    assert "offset 2" in str(errors[0])


def test_serialization_failure_queues_nothing(tansu_broker: TansuBroker, registry: str,
                                              topic_name: str) -> None:
    tansu_broker.create_topic(topic_name, 1)
    with SerializingProducer({"bootstrap.servers": tansu_broker.bootstrap_servers,
                              "key.serializer": StringSerializer()}) as p:
        with pytest.raises(KeySerializationError, match=topic_name):
            p.produce(topic_name, key=12345, value=b"v")  # type: ignore[arg-type]
        assert len(p) == 0


def test_serializing_producers_offer_the_producers_own_methods(tansu_broker: TansuBroker,
                                                               topic_name: str) -> None:
    # confluent-kafka's SerializingProducer is a Producer: transactions, purge and metadata
    # are there as they are; send_and_wait takes the producer's urgent path.
    tansu_broker.create_topic(topic_name, 2)
    bs = tansu_broker.bootstrap_servers
    delivered: list[Any] = []
    with SerializingProducer({"bootstrap.servers": bs, "linger.ms": 30_000,
                              "transactional.id": f"{topic_name}-tx",
                              "key.serializer": StringSerializer(),
                              "value.serializer": StringSerializer()}) as p:
        p.init_transactions()
        with p.transaction():
            started = time.monotonic()
            md = p.send_and_wait(topic_name, "now", "k", partition=0)
            assert time.monotonic() - started < 5  # not after the 30 s linger
            p.produce(topic_name, key="k", value="later", partition=0,
                      on_delivery=lambda e, m: delivered.append(e))
        assert delivered == [None] and md.offset == 0
        p.begin_transaction()
        p.produce(topic_name, key="k", value="purged", partition=1,
                  on_delivery=lambda e, m: delivered.append(e))
        p.purge()
        p.poll(0)
        assert isinstance(delivered[-1], ProduceError)
        p.abort_transaction()
        assert sorted(p.list_topics(topic_name)[topic_name].partitions) == [0, 1]
        assert p.partitions_for(topic_name) == [0, 1]
        assert p.metrics()["record-send-total"] >= 2

    async def main() -> None:
        async with AsyncSerializingProducer(bootstrap_servers=bs, linger_ms=30_000,
                                            transactional_id=f"{topic_name}-atx",
                                            value_serializer=StringSerializer()) as ap:
            await ap.init_transactions()
            async with ap.transaction():
                started = time.monotonic()
                amd = await ap.send_and_wait(topic_name, "async", partition=1)
                assert time.monotonic() - started < 5
            assert amd.partition == 1
            assert await ap.partitions_for(topic_name) == [0, 1]
            assert topic_name in await ap.list_topics()
            ap.begin_transaction()
            fut = await ap.send(topic_name, "purged", partition=1)
            assert ap.purge() == 1 and fut.exception() is not None
            await ap.abort_transaction()

    asyncio.run(main())


def _numbers_written(broker: TansuBroker, topic: str) -> None:
    """``N`` records ``b"0"``, ``b"1"``, ... to partition 0 of a new one-partition topic."""
    broker.create_topic(topic, 1)
    with Producer(bootstrap_servers=broker.bootstrap_servers) as raw:
        for i in range(N):
            raw.send(topic, b"%d" % i)
        raw.flush(10)


def _calls_into(frames: list[str]) -> Callable[[Any, str, Any], None]:
    """A ``sys.setprofile`` hook appending the name of each Python function called."""
    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            frames.append(frame.f_code.co_name)
    return profile


def _number_and_offset(data: bytes | None, ctx: Any) -> Any:
    return (int(data or b"-1"), ctx.offset)


def test_a_buffered_record_is_decoded_inside_the_consumers_own_poll(
        tansu_broker: TansuBroker, topic_name: str) -> None:
    """``DeserializingConsumer.poll`` is ``Consumer.poll``, which decodes the record it
    takes (issue 23: no frame of the subclass's own a record); what comes out is the
    deserializer's, record by record, in order."""
    import sys

    _numbers_written(tansu_broker, topic_name)
    frames: list[str] = []
    profile = _calls_into(frames)

    def de(data: bytes | None, ctx: Any) -> Any:  # (inline: the frames are asserted)
        return (int(data or b"-1"), ctx.offset)

    got: list[Any] = []
    with DeserializingConsumer({"bootstrap.servers": tansu_broker.bootstrap_servers,
                                "auto.offset.reset": "earliest",
                                "value.deserializer": de}) as c:
        c.assign([TopicPartition(topic_name, 0)])
        first = c.poll(10)
        assert first is not None
        got.append(first.value)
        # The rest of the fetch is buffered now (the first poll took one record of it).
        sys.setprofile(profile)
        try:
            second = c.poll(0)
        finally:
            sys.setprofile(None)
        assert second is not None
        got.append(second.value)
        while len(got) < N and (rec := c.poll(5)) is not None:
            got.append(rec.value)
    assert frames == ["poll", "decode", "de"]
    assert got == [(i, i) for i in range(N)]


@pytest.mark.parametrize("awaits", [False, True], ids=["sync_de", "async_de"])
def test_async_poll_decodes_inside_the_consumers_own_poll(
        tansu_broker: TansuBroker, topic_name: str, awaits: bool) -> None:
    """``AsyncDeserializingConsumer.poll`` is ``AsyncConsumer.poll``, which decodes the
    record it takes (no coroutine of the subclass's own a record; with kontrakt's sync
    deserializers no coroutine at all) and awaits what an async deserializer returns."""
    import sys

    _numbers_written(tansu_broker, topic_name)
    frames: list[str] = []
    profile = _calls_into(frames)

    async def ade(data: bytes | None, ctx: Any) -> Any:
        await asyncio.sleep(0)
        return _number_and_offset(data, ctx)

    async def main() -> list[Any]:
        got: list[Any] = []
        async with AsyncDeserializingConsumer({
                "bootstrap.servers": tansu_broker.bootstrap_servers,
                "auto.offset.reset": "earliest",
                "value.deserializer": ade if awaits else StringDeserializer()}) as c:
            c.assign([TopicPartition(topic_name, 0)])
            first = await c.poll(10)
            assert first is not None
            got.append(first.value)
            poll = c.poll(0)
            sys.setprofile(profile)
            try:
                second = await poll
            finally:
                sys.setprofile(None)
            assert second is not None
            got.append(second.value)
            while len(got) < N and (rec := await c.poll(5)) is not None:
                got.append(rec.value)
        return got

    got = asyncio.run(main())
    if not awaits:
        assert got == [str(i) for i in range(N)]
        assert frames == ["poll", "drain_one", "decode", "__call__"]
    else:
        assert got == [(i, i) for i in range(N)]
        assert frames[:3] == ["poll", "drain_one", "decode_async"] and "ade" in frames
