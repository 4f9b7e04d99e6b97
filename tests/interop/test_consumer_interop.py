"""The consumer against peers as oracles, on Tansu: batches written by confluent-kafka,
kafka-python and aiokafka producers; a mixed kontrakt + confluent-kafka group; read_committed
hiding a confluent-kafka transaction until it commits."""

from __future__ import annotations

import asyncio
import time
import uuid
import warnings
from typing import Any

import pytest

from kontrakt._types import TopicPartition
from kontrakt.clients.consumer import AsyncConsumer, Consumer
from kontrakt.testing import TansuBroker

pytestmark = [pytest.mark.integration, pytest.mark.interop]

N = 60


def _expected(tag: str) -> list[tuple[bytes, bytes, list[tuple[str, bytes]]]]:
    return [(f"k{i}".encode(), f"{tag}-{i}".encode() * 3, [("i", str(i).encode())])
            for i in range(N)]


def _produce_confluent(bs: str, topic: str, codec: str) -> None:
    import confluent_kafka

    p = confluent_kafka.Producer({"bootstrap.servers": bs, "compression.type": codec,
                                  "linger.ms": 50})
    for k, v, h in _expected(f"confluent-{codec}"):
        p.produce(topic, v, k, partition=0, headers=h)
    assert p.flush(30) == 0


def _produce_kafka_python(bs: str, topic: str, codec: str) -> None:
    with warnings.catch_warnings():
        # kafka-python's package import loads JSON schemas with a deprecated importlib API.
        warnings.simplefilter("ignore", DeprecationWarning)
        import kafka

    p = kafka.KafkaProducer(bootstrap_servers=bs, linger_ms=50,
                            compression_type=None if codec == "none" else codec)
    for k, v, h in _expected(f"kafka-python-{codec}"):
        p.send(topic, v, k, partition=0, headers=h)
    p.flush(30)
    p.close()


def _produce_aiokafka(bs: str, topic: str, codec: str) -> None:
    import aiokafka

    async def main() -> None:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=bs, linger_ms=50,
                                      compression_type=None if codec == "none" else codec)
        await p.start()
        try:
            futs = [await p.send(topic, v, k, partition=0, headers=h)
                    for k, v, h in _expected(f"aiokafka-{codec}")]
            await asyncio.gather(*futs)
        finally:
            await p.stop()
    asyncio.run(main())


PRODUCERS = {"confluent": _produce_confluent, "kafka-python": _produce_kafka_python,
             "aiokafka": _produce_aiokafka}


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("peer", sorted(PRODUCERS))
def test_consume_peer_batches(tansu_broker: TansuBroker, topic_name: str, peer: str,
                              codec: str) -> None:
    if peer == "kafka-python" and codec == "snappy":
        pytest.skip("kafka-python has no snappy library in this environment")
    tansu_broker.create_topic(topic_name, 1)
    PRODUCERS[peer](tansu_broker.bootstrap_servers, topic_name, codec)
    tp = TopicPartition(topic_name, 0)
    with Consumer(bootstrap_servers=tansu_broker.bootstrap_servers,
                  auto_offset_reset="earliest") as c:
        c.assign([tp])
        got: list[Any] = []
        deadline = time.monotonic() + 15
        while len(got) < N and time.monotonic() < deadline:
            got.extend(c.consume(100, timeout=0.5))
    tag = f"{peer}-{codec}"
    assert [(r.key, r.value, r.headers) for r in got] == _expected(tag)
    assert [r.offset for r in got] == list(range(N))


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_mixed_group_with_confluent_members(tansu_broker: TansuBroker, topic_name: str,
                                            strategy: str) -> None:
    import confluent_kafka

    parts, per = 4, 50
    bs = tansu_broker.bootstrap_servers
    tansu_broker.create_topic(topic_name, parts)
    p = confluent_kafka.Producer({"bootstrap.servers": bs})
    for i in range(parts * per):
        p.produce(topic_name, str(i).encode(), partition=i % parts)
    assert p.flush(30) == 0
    group = f"g-{uuid.uuid4().hex}"
    seen: list[tuple[int, int]] = []

    def run_confluent(stop: float) -> set[int]:
        c = confluent_kafka.Consumer({
            "bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
            "session.timeout.ms": 2000, "heartbeat.interval.ms": 200,
            "partition.assignment.strategy": strategy})
        c.subscribe([topic_name])
        owned: set[int] = set()
        while time.monotonic() < stop:
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                seen.append((m.partition(), m.offset()))
            owned = {tp.partition for tp in c.assignment()}
            if len(seen) >= parts * per and owned:
                break
        c.close()
        return owned

    async def main() -> None:
        stop = time.monotonic() + 40
        fut = asyncio.get_running_loop().run_in_executor(None, run_confluent, stop)
        async with AsyncConsumer(bootstrap_servers=bs, group_id=group,
                                 auto_offset_reset="earliest", session_timeout_ms=2000,
                                 heartbeat_interval_ms=200,
                                 partition_assignment_strategy=strategy) as k:
            k.subscribe([topic_name])
            mine: set[TopicPartition] = set()
            while time.monotonic() < stop and len(set(seen)) < parts * per:
                for recs in (await k.getmany(timeout=0.1)).values():
                    seen.extend((r.partition, r.offset) for r in recs)
                if k.assignment():
                    mine = k.assignment()
            theirs = await fut
        assert sorted(set(seen)) == sorted((i % parts, i // parts) for i in range(parts * per))
        # Both kinds of member took part in the same group at some point.
        assert mine and theirs, (mine, theirs)

    asyncio.run(main())


def test_read_committed_hides_open_confluent_transaction(tansu_broker: TansuBroker,
                                                         topic_name: str) -> None:
    import confluent_kafka

    bs = tansu_broker.bootstrap_servers
    tansu_broker.create_topic(topic_name, 1)
    tp = TopicPartition(topic_name, 0)
    p = confluent_kafka.Producer({"bootstrap.servers": bs,
                                  "transactional.id": f"tx-{uuid.uuid4().hex}"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic_name, f"tx-{i}".encode(), partition=0)
    p.flush(30)
    with Consumer(bootstrap_servers=bs, auto_offset_reset="earliest",
                  isolation_level="read_committed", fetch_max_wait_ms=100) as committed, \
            Consumer(bootstrap_servers=bs, auto_offset_reset="earliest",
                     fetch_max_wait_ms=100) as uncommitted:
        committed.assign([tp])
        uncommitted.assign([tp])
        raw: list[Any] = []
        deadline = time.monotonic() + 15
        while len(raw) < 5 and time.monotonic() < deadline:
            raw.extend(uncommitted.consume(10, timeout=0.5))
        assert [r.value for r in raw] == [f"tx-{i}".encode() for i in range(5)]
        assert committed.consume(10, timeout=1.0) == []  # still open: hidden
        p.commit_transaction(30)
        got: list[Any] = []
        while len(got) < 5 and time.monotonic() < deadline:
            got.extend(committed.consume(10, timeout=0.5))
        assert [r.value for r in got] == [f"tx-{i}".encode() for i in range(5)]
