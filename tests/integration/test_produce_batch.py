"""produce_batch() against real brokers, with confluent-kafka as the oracle.

confluent-kafka's own ``produce_batch`` with its murmur2 partitioner (the Java client's)
writes the same keyed messages to a twin topic: each partition must hold the same records in
the same order. confluent-kafka's consumer reads both topics back.
"""

from __future__ import annotations

import asyncio
import time
import warnings
from typing import Any

import pytest

from kontrakt.clients.producer import AsyncProducer, Producer
from kontrakt.errors import IllegalStateError
from kontrakt.testing import TansuBroker

ck = pytest.importorskip("confluent_kafka")
with warnings.catch_warnings():
    # kafka-python's package import loads its JSON schemas with a deprecated importlib API.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.partitioner.default import murmur2 as kafka_murmur2

pytestmark = [pytest.mark.integration, pytest.mark.also_on_cluster]

PARTITIONS = 4


def _messages(n: int) -> list[dict[str, Any]]:
    """Keyed messages of a few sizes, with a tombstone now and then."""
    out: list[dict[str, Any]] = []
    for i in range(n):
        key = b"user-%d" % (i * 7919 % 613)
        out.append({"key": key, "value": None if i % 211 == 5 else b"event-%06d" % i})
    return out


def _read(bs: str, topic: str, count: int, committed: bool = False
          ) -> dict[int, list[tuple[bytes | None, bytes | None]]]:
    """Every partition's (key, value) records from the start, read by confluent-kafka."""
    c = ck.Consumer({"bootstrap.servers": bs, "group.id": f"oracle-{topic}",
                     "enable.auto.commit": False, "enable.partition.eof": False,
                     "isolation.level": "read_committed" if committed else
                     "read_uncommitted"})
    got: dict[int, list[tuple[bytes | None, bytes | None]]] = {
        p: [] for p in range(PARTITIONS)}
    try:
        c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 30
        seen = 0
        while seen < count and time.monotonic() < deadline:
            for msg in c.consume(1000, 0.2):
                assert msg.error() is None, msg.error()
                got[msg.partition()].append((msg.key(), msg.value()))
                seen += 1
        assert seen == count
    finally:
        c.close()
    return got


def _confluent_twin(bs: str, topic: str, messages: list[dict[str, Any]]
                    ) -> dict[int, list[tuple[bytes | None, bytes | None]]]:
    """What confluent-kafka's produce_batch, partitioning as the Java client does, makes
    of the same messages."""
    p = ck.Producer({"bootstrap.servers": bs, "partitioner": "murmur2_random",
                     "linger.ms": 5})
    assert p.produce_batch(topic, [dict(m) for m in messages]) == len(messages)
    assert p.flush(30) == 0
    return _read(bs, topic, len(messages))


def test_sync_batch_records_land_as_confluents_with_one_callback_each(
        tansu_broker: TansuBroker, topic_name: str) -> None:
    bs = tansu_broker.bootstrap_servers
    tansu_broker.create_topic(topic_name, PARTITIONS)
    tansu_broker.create_topic(f"{topic_name}-twin", PARTITIONS)
    messages = _messages(5000)
    reports: list[tuple[Any, Any]] = []
    with Producer(bootstrap_servers=bs, linger_ms=5) as p:
        # In calls of 1000, as a pipeline hands them over; idempotence is on by default,
        # so every chunk's batches carry their sequence numbers.
        for start in range(0, len(messages), 1000):
            chunk = messages[start:start + 1000]
            assert p.produce_batch(topic_name, chunk,
                                   on_delivery=lambda e, md: reports.append((e, md))) == 1000
            assert not any("_error" in m for m in chunk)
        p.flush(30)
    got = _read(bs, topic_name, len(messages))
    assert got == _confluent_twin(bs, f"{topic_name}-twin", messages)
    assert len(reports) == len(messages)
    assert all(err is None for err, _ in reports)
    # Each callback names its own record: one per (partition, offset), and its value's size.
    places = {(md.partition, md.offset): md for _, md in reports}
    assert len(places) == len(messages)
    for part, records in got.items():
        for offset, (_, value) in enumerate(records):
            md = places[(part, offset)]
            assert md.serialized_value_size == (-1 if value is None else len(value))


def test_async_batch_with_the_unusual_messages_keeps_each_partitions_order(
        tansu_broker: TansuBroker, topic_name: str) -> None:
    """Headers, explicit partitions and timestamps, tombstones and per-message callbacks go
    the per-record way between bulk runs; each partition's records are in list order."""
    bs = tansu_broker.bootstrap_servers
    tansu_broker.create_topic(topic_name, PARTITIONS)
    messages = _messages(2000)
    own: list[Any] = []
    for i in range(0, 2000, 150):
        messages[i] = {"value": b"special-%d" % i, "partition": i % PARTITIONS,
                       "timestamp": 1_700_000_000_000 + i, "headers": [("n", b"%d" % i)],
                       "callback": lambda e, md: own.append((e, md))}
    reports: list[Any] = []

    async def main() -> None:
        async with AsyncProducer(bootstrap_servers=bs, linger_ms=5) as p:
            n = await p.produce_batch(topic_name, messages,
                                      on_delivery=lambda e, md: reports.append((e, md)))
            assert n == len(messages)
            await p.flush(30)

    asyncio.run(main())
    specials = [m for m in messages if "callback" in m]
    assert len(own) == len(specials) and len(reports) == len(messages) - len(specials)
    assert all(err is None for err, _ in own + reports)
    assert sorted(md.timestamp for _, md in own) == [m["timestamp"] for m in specials]
    got = _read(bs, topic_name, len(messages))
    for part, records in got.items():
        expected = [(m.get("key"), m["value"]) for m in messages
                    if ("partition" in m and m["partition"] == part) or
                    ("partition" not in m and _partition_of(m["key"]) == part)]
        assert records == expected


def _partition_of(key: bytes) -> int:
    """The Java client's partition of ``key`` (kafka-python's murmur2, an independent
    implementation)."""
    return int((kafka_murmur2(key) & 0x7FFFFFFF) % PARTITIONS)


def test_a_batch_in_a_transaction_is_committed_with_it(tansu_broker: TansuBroker,
                                                       topic_name: str) -> None:
    bs = tansu_broker.bootstrap_servers
    tansu_broker.create_topic(topic_name, PARTITIONS)
    messages = _messages(3000)
    with Producer(bootstrap_servers=bs, transactional_id=f"{topic_name}-tx",
                  linger_ms=5) as p:
        p.init_transactions()
        outside = [{"key": b"k", "value": b"outside"}]
        with pytest.raises(IllegalStateError, match="begin_transaction"):
            p.produce_batch(topic_name, outside)
        assert "_error" not in outside[0]
        with p.transaction():
            assert p.produce_batch(topic_name, messages) == len(messages)
    got = _read(bs, topic_name, len(messages), committed=True)
    for part, records in got.items():
        assert records == [(m["key"], m["value"]) for m in messages
                           if _partition_of(m["key"]) == part]
