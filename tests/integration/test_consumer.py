"""The consumer against real brokers: positions, resets, seeks, pause/resume, commits,
codecs and headers.

Tansu is used where faithful (fetch of every codec, commits, earliest reset). Its
ListOffsets LATEST is off for multi-record batches (TEST-BROKERS.md), so everything that
depends on the log end (latest reset, seek_to_end, end_offsets) runs on the librdkafka mock
cluster.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from kontrakt._types import OffsetAndMetadata, TimestampType, TopicPartition
from kontrakt.clients import AsyncKafkaClient
from kontrakt.clients.consumer import AsyncConsumer, Consumer
from kontrakt.errors import IllegalStateError, OffsetOutOfRangeResetError
from kontrakt.protocol.records import RecordBatchBuilder
from kontrakt.testing import MockCluster, TansuBroker
from tests.integration.raw_ops import produce

pytestmark = [pytest.mark.integration, pytest.mark.also_on_cluster]

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


async def _produce(bootstrap: str, topic: str, partition: int, count: int, *,
                   codec: str = "none", start: int = 0, per_batch: int = 50) -> None:
    async with AsyncKafkaClient(bootstrap_servers=bootstrap) as client:
        i = start
        while i < start + count:
            b = RecordBatchBuilder(compression=codec)
            for j in range(i, min(start + count, i + per_batch)):
                b.append(int(time.time() * 1000), f"k{j}".encode(), f"v{j}".encode(),
                         [("n", str(j).encode()), ("codec", codec.encode()), ("none", None)])
            part = await produce(client, topic, partition, b.build())
            assert part.error_code == 0, part
            i = min(start + count, i + per_batch)


async def _collect(c: AsyncConsumer, n: int, timeout: float = 10.0) -> list[object]:
    out: list[object] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        for recs in (await c.getmany(timeout=0.5)).values():
            out.extend(recs)
    return out


def test_every_codec_and_headers_on_tansu(tansu_broker: TansuBroker, topic_name: str) -> None:
    tansu_broker.create_topic(topic_name, 1)

    async def main() -> None:
        for k, codec in enumerate(CODECS):
            await _produce(tansu_broker.bootstrap_servers, topic_name, 0, 40, codec=codec,
                           start=k * 40)
        async with AsyncConsumer(bootstrap_servers=tansu_broker.bootstrap_servers,
                                 auto_offset_reset="earliest") as c:
            tp = TopicPartition(topic_name, 0)
            c.assign([tp])
            recs = await _collect(c, 200)
            assert [r.offset for r in recs] == list(range(200))  # type: ignore[attr-defined]
            for r in recs:
                n = r.offset  # type: ignore[attr-defined]
                assert r.key == f"k{n}".encode()  # type: ignore[attr-defined]
                assert r.value == f"v{n}".encode()  # type: ignore[attr-defined]
                assert r.headers == [  # type: ignore[attr-defined]
                    ("n", str(n).encode()), ("codec", CODECS[n // 40].encode()), ("none", None)]
                assert r.timestamp_type is TimestampType.CREATE_TIME  # type: ignore[attr-defined]
            assert await c.position(tp) == 200
            assert c.highwater(tp) == 200
            assert c.lag(tp) == 0

    asyncio.run(main())


def test_reset_earliest_none_commit_round_trip_on_tansu(tansu_broker: TansuBroker,
                                                         topic_name: str) -> None:
    tansu_broker.create_topic(topic_name, 2)
    bs = tansu_broker.bootstrap_servers
    group = f"g-{topic_name}"

    async def main() -> None:
        await _produce(bs, topic_name, 0, 30)
        await _produce(bs, topic_name, 1, 30)
        tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
        async with AsyncConsumer(bootstrap_servers=bs, group_id=group,
                                 auto_offset_reset="none") as c:
            c.assign([tp0])
            with pytest.raises(OffsetOutOfRangeResetError):
                await c.getmany(timeout=5)
            assert await c.committed([tp0, tp1]) == {tp0: None, tp1: None}
            await c.commit({tp0: 10, tp1: OffsetAndMetadata(20)})
            got = await c.committed([tp0, tp1])
            assert got[tp0] is not None and got[tp0].offset == 10
            assert got[tp1] is not None and got[tp1].offset == 20
        # A new consumer of the group starts from the committed offsets.
        async with AsyncConsumer(bootstrap_servers=bs, group_id=group,
                                 auto_offset_reset="earliest") as c:
            c.assign([tp0, tp1])
            recs = await _collect(c, 30)
            by_tp = {tp: [r.offset for r in recs if r.topic_partition == tp]  # type: ignore
                     for tp in (tp0, tp1)}
            assert by_tp == {tp0: list(range(10, 30)), tp1: list(range(20, 30))}
            done: list[object] = []
            task = c.commit_async(callback=lambda offsets, err: done.append((offsets, err)))
            await task
            assert done and done[0][1] is None  # type: ignore[index]
            assert (await c.committed([tp0]))[tp0].offset == 30  # type: ignore[union-attr]
            # seek / seek_to_beginning / position
            c.seek(tp0, 5)
            assert await c.position(tp0) == 5
            c.seek_to_beginning(tp1)
            assert await c.position(tp1) == 0
            assert await c.beginning_offsets([tp0]) == {tp0: 0}
            recs = await _collect(c, 55)
            assert sorted((r.partition, r.offset) for r in recs) == sorted(  # type: ignore
                [(0, i) for i in range(5, 30)] + [(1, i) for i in range(30)])
        # Without a group, earliest applies.
        async with AsyncConsumer(bootstrap_servers=bs, auto_offset_reset="earliest") as c:
            c.assign([tp1])
            assert await c.position(tp1) == 0
            with pytest.raises(Exception, match=r"group\.id"):
                await c.commit()

    asyncio.run(main())


@pytest.mark.tansu_only(
    "Kafka keeps the committed leader epoch (OffsetCommit v6+, OffsetFetch v5+) and so "
    "does Cluster; Tansu answers -1, which this assertion expects")
def test_pause_resume_and_sync_api_on_tansu(tansu_broker: TansuBroker, topic_name: str) -> None:
    tansu_broker.create_topic(topic_name, 2)
    bs = tansu_broker.bootstrap_servers
    asyncio.run(_produce(bs, topic_name, 0, 20))
    asyncio.run(_produce(bs, topic_name, 1, 20))
    tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
    with Consumer(bootstrap_servers=bs, auto_offset_reset="earliest",
                  group_id=f"g-{topic_name}") as c:
        c.assign([tp0, tp1])
        c.pause(tp1)
        assert c.paused() == {tp1}
        got: list[object] = []
        deadline = time.monotonic() + 10
        while len(got) < 20 and time.monotonic() < deadline:
            got.extend(c.consume(100, timeout=0.5))
        assert {r.partition for r in got} == {0}  # type: ignore[attr-defined]
        assert c.poll(0.3) is None  # tp1 is paused
        c.resume(tp1)
        rest = []
        while len(rest) < 20 and time.monotonic() < deadline:
            r = c.poll(1.0)
            if r is not None:
                rest.append(r)
        assert [r.offset for r in rest] == list(range(20))
        assert {r.partition for r in rest} == {1}
        assert c.position(tp1) == 20
        c.commit()
        assert c.committed([tp0, tp1]) == {tp0: OffsetAndMetadata(20), tp1: OffsetAndMetadata(20)}
        with pytest.raises(IllegalStateError):
            c.seek(TopicPartition(topic_name, 7), 0)
    with pytest.raises(IllegalStateError):
        c.poll(0)


def test_latest_reset_and_seek_to_end_on_mock(mock_cluster: MockCluster, topic_name: str) -> None:
    mock_cluster.create_topic(topic_name, 1, 3)
    bs = mock_cluster.bootstrap_servers

    async def main() -> None:
        await _produce(bs, topic_name, 0, 25)
        tp = TopicPartition(topic_name, 0)
        async with AsyncConsumer(bootstrap_servers=bs, auto_offset_reset="latest",
                                 fetch_max_wait_ms=50) as c:
            c.assign([tp])
            assert await c.position(tp) == 25
            assert await c.end_offsets([tp]) == {tp: 25}
            await _produce(bs, topic_name, 0, 5, start=25)
            recs = await _collect(c, 5)
            assert [r.offset for r in recs] == [25, 26, 27, 28, 29]  # type: ignore
            c.seek(tp, 3)
            first = await c.poll(5)
            assert first is not None and first.offset == 3
            c.seek_to_end(tp)
            assert await c.position(tp) == 30
            assert await c.poll(0.2) is None

    asyncio.run(main())
