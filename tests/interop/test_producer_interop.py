"""Records produced by kontrakt read back identically by confluent-kafka and aiokafka (Tansu).

Keys, values (including None and empty), headers (including None values), timestamps and
partitions must come back as sent, for every codec, from both the async and the sync producer.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kontrakt.clients.producer import AsyncProducer, Producer
from kontrakt.testing import TansuBroker

pytestmark = [pytest.mark.integration, pytest.mark.interop]

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
Sent = tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]], int]


def _records(codec: str) -> list[tuple[bytes | None, bytes | None,
                                       list[tuple[str, bytes | None]], int]]:
    base = 1_700_000_000_000
    out: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]] = []
    for i in range(30):
        key = None if i % 5 == 0 else b"key-%d" % i
        value = None if i % 7 == 3 else (b"" if i % 11 == 4 else b"%s-value-%d" % (
            codec.encode(), i) * (1 + i % 4))
        headers: list[tuple[str, bytes | None]] = [] if i % 3 == 0 else [
            ("n", b"%d" % i), ("codec", codec.encode()), ("nothing", None)]
        out.append((key, value, headers, base + i * 10))
    return out


def produce_async(bs: str, topic: str, codec: str) -> list[Sent]:
    async def main() -> list[Sent]:
        async with AsyncProducer(bootstrap_servers=bs, compression_type=codec) as p:
            futs = []
            for key, value, headers, ts in _records(codec):
                futs.append((await p.send(topic, value, key, headers=headers, timestamp_ms=ts),
                             key, value, headers, ts))
            out = []
            for fut, key, value, headers, ts in futs:
                md = await fut
                out.append((md.partition, key, value, headers, ts))
            return out

    return asyncio.run(main())


def produce_sync(bs: str, topic: str, codec: str) -> list[Sent]:
    with Producer(bootstrap_servers=bs, compression_type=codec) as p:
        futs = [(p.send(topic, value, key, headers=headers, timestamp_ms=ts), key, value,
                 headers, ts) for key, value, headers, ts in _records(codec)]
        p.flush(10)
        return [(f.result(5).partition, k, v, h, ts) for f, k, v, h, ts in futs]


def read_confluent(bs: str, topic: str, partitions: int, count: int) -> list[Sent]:
    import confluent_kafka

    c = confluent_kafka.Consumer({"bootstrap.servers": bs, "group.id": "interop-reader",
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        c.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[Sent] = []
        deadline = time.monotonic() + 20
        while len(out) < count and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            row: Any = (msg.partition(), msg.key(), msg.value(), list(msg.headers() or []),
                        msg.timestamp()[1])
            out.append(row)
        return out
    finally:
        c.close()


def read_aiokafka(bs: str, topic: str, partitions: int, count: int) -> list[Sent]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def main() -> list[Sent]:
        c = AIOKafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False,
                             auto_offset_reset="earliest")
        await c.start()
        try:
            c.assign([TopicPartition(topic, p) for p in range(partitions)])
            out: list[Sent] = []
            deadline = time.monotonic() + 20
            while len(out) < count and time.monotonic() < deadline:
                batches = await c.getmany(timeout_ms=500)
                for records in batches.values():
                    out.extend((r.partition, r.key, r.value, list(r.headers), r.timestamp)
                               for r in records)
            return out
        finally:
            await c.stop()

    return asyncio.run(main())


def _by_partition(rows: list[Sent]) -> dict[int, list[Any]]:
    out: dict[int, list[Any]] = {}
    for part, *rest in rows:
        out.setdefault(part, []).append(rest)
    return out


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("produce", [produce_async, produce_sync], ids=["async", "sync"])
def test_peers_read_what_kontrakt_produced(tansu_broker: TansuBroker, topic_name: str,
                                           codec: str, produce: Any) -> None:
    tansu_broker.create_topic(topic_name, 3)
    sent = produce(tansu_broker.bootstrap_servers, topic_name, codec)
    assert len({p for p, *_ in sent}) > 1  # keyed and sticky records spread over partitions
    expected = _by_partition(sent)
    for reader in (read_confluent, read_aiokafka):
        got = reader(tansu_broker.bootstrap_servers, topic_name, 3, len(sent))
        assert _by_partition(got) == expected, reader.__name__
