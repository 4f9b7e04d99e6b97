"""Record batches crossing a real broker between Kontrakt and the peers.

confluent-kafka (librdkafka) writes a batch per codec with headers to Tansu; Kontrakt fetches
the raw bytes through ``request()`` and decodes them. Kontrakt writes a batch per codec;
confluent-kafka and kafka-python consume them. The broker stores batches as written, so this
checks the bytes each side produces, not just a local round trip.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from kontrakt.clients import AsyncKafkaClient
from kontrakt.protocol.records import RecordBatchBuilder
from kontrakt.testing import TansuBroker
from tests.integration.raw_ops import fetch, produce

ck = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
N = 10

pytestmark = [pytest.mark.interop, pytest.mark.integration]


def _expected(codec: str) -> list[tuple[bytes, bytes, list[tuple[str, bytes]]]]:
    return [(f"{codec}-k{i}".encode(), f"{codec}-value-{i}".encode() * 4,
             [("codec", codec.encode()), ("i", str(i).encode())]) for i in range(N)]


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_batches_decode_in_kontrakt(tansu_broker: TansuBroker, topic_name: str,
                                              codec: str) -> None:
    tansu_broker.create_topic(topic_name, 1)
    p = ck.Producer({"bootstrap.servers": tansu_broker.bootstrap_servers,
                     "compression.type": codec, "linger.ms": 50, "enable.idempotence": False})
    for key, value, headers in _expected(codec):
        p.produce(topic_name, value=value, key=key, partition=0, headers=headers)
    assert p.flush(10) == 0

    async def read() -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
        async with AsyncKafkaClient(bootstrap_servers=tansu_broker.bootstrap_servers) as c:
            out: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = []
            deadline = time.monotonic() + 10
            while len(out) < N and time.monotonic() < deadline:
                _part, records = await fetch(c, topic_name, 0, len(out))
                out.extend((r.key, r.value, list(r.headers)) for r in records)
            return out

    assert asyncio.run(read()) == _expected(codec)


@pytest.mark.parametrize("codec", CODECS)
def test_kontrakt_batches_consumed_by_peers(tansu_broker: TansuBroker, topic_name: str,
                                            codec: str) -> None:
    tansu_broker.create_topic(topic_name, 1)
    builder = RecordBatchBuilder(compression=codec)
    now = int(time.time() * 1000)
    for key, value, headers in _expected(codec):
        builder.append(now, key, value, headers)

    async def write() -> None:
        async with AsyncKafkaClient(bootstrap_servers=tansu_broker.bootstrap_servers) as c:
            part = await produce(c, topic_name, 0, builder.build())
            assert part.error_code == 0

    asyncio.run(write())

    consumer = ck.Consumer({"bootstrap.servers": tansu_broker.bootstrap_servers,
                            "group.id": f"{topic_name}-ck", "enable.auto.commit": False})
    try:
        consumer.assign([ck.TopicPartition(topic_name, 0, 0)])
        got = []
        deadline = time.monotonic() + 15
        while len(got) < N and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append((msg.key(), msg.value(), list(msg.headers() or [])))
    finally:
        consumer.close()
    assert got == _expected(codec)

    kp = kafka.KafkaConsumer(bootstrap_servers=tansu_broker.bootstrap_servers,
                             enable_auto_commit=False, consumer_timeout_ms=5000)
    try:
        tp = kafka.TopicPartition(topic_name, 0)
        kp.assign([tp])
        kp.seek(tp, 0)
        records = []
        deadline = time.monotonic() + 15
        while len(records) < N and time.monotonic() < deadline:
            for batch in kp.poll(timeout_ms=500).values():
                records.extend(batch)
        assert [(r.key, r.value, [(h[0], h[1]) for h in r.headers]) for r in records] \
            == _expected(codec)
    finally:
        kp.close()
