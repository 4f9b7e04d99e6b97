"""Kontrakt's async clients and static members against the cluster: AsyncProducer and
AsyncConsumer round trips with every codec, timestamp lookups and end offsets after
multi-record batches; a static member that restarts gets its partitions back without a
rebalance of the others."""

from __future__ import annotations

import asyncio
import time

import pytest

from kontrakt import AsyncConsumer, AsyncProducer, Consumer, Producer
from kontrakt._types import TopicPartition as TP
from kontrakt.clients.admin import AdminClient, NewPartitions
from kontrakt.protocol import errors as E
from kontrakt.testing import Cluster


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_async_round_trip_with_codecs(cluster: Cluster, topic: str, codec: str) -> None:
    cluster.create_topic(topic, partitions=2)
    bs = cluster.bootstrap_servers

    async def main() -> None:
        async with AsyncProducer(bootstrap_servers=bs, linger_ms=20,
                                 compression_type=codec) as p:
            futures = [await p.send(topic, None if i == 3 else b"v%d" % i, key=b"k",
                                    partition=i % 2, headers=[("h", b"%d" % i)],
                                    timestamp_ms=50_000 + i)
                       for i in range(40)]
            sent = [await f for f in futures]
        assert [m.offset for m in sent if m.partition == 0] == list(range(20))
        async with AsyncConsumer(bootstrap_servers=bs, group_id="ag",
                                 auto_offset_reset="earliest") as c:
            c.subscribe([topic])
            got = []
            deadline = time.monotonic() + 15
            while len(got) < 40 and time.monotonic() < deadline:
                for recs in (await c.getmany(timeout=0.5)).values():
                    got.extend(recs)
            assert sorted((r.partition, r.offset) for r in got) == sorted(
                (i % 2, i // 2) for i in range(40))
            by_ts = {r.timestamp: r for r in got}
            assert by_ts[50_003].value is None and by_ts[50_004].value == b"v4"
            assert by_ts[50_004].headers == [("h", b"4")]
            tps = [TP(topic, 0), TP(topic, 1)]
            assert await c.end_offsets(tps) == {tps[0]: 20, tps[1]: 20}
            times = await c.offsets_for_times({tps[0]: 50_011, tps[1]: 50_011})
            assert (times[tps[0]].offset, times[tps[1]].offset) == (6, 5)
            await c.commit()
            assert (await c.committed(tps))[tps[1]].offset == 20

    asyncio.run(main())


def test_a_static_member_restarts_without_rebalancing_the_group(cluster: Cluster,
                                                                topic: str) -> None:
    cluster.create_topic(topic, partitions=4)
    bs = cluster.bootstrap_servers
    common = dict(bootstrap_servers=bs, group_id="static", session_timeout_ms=10_000,
                  heartbeat_interval_ms=200, auto_offset_reset="earliest")
    first = Consumer(group_instance_id="s1", **common)
    second = Consumer(group_instance_id="s2", **common)
    try:
        first.subscribe([topic])
        second.subscribe([topic])
        deadline = time.monotonic() + 20

        def settled() -> bool:
            a, b = first.assignment(), second.assignment()
            return len(a) == 2 and len(b) == 2 and not a & b

        while not settled() and time.monotonic() < deadline:
            first.poll(0.05)
            second.poll(0.05)
        assert settled()
        before = first.assignment()
        joins = cluster.request_counts()[11]
        first.close()
        first = Consumer(group_instance_id="s1", **common)
        first.subscribe([topic])
        deadline = time.monotonic() + 20
        while first.assignment() != before and time.monotonic() < deadline:
            first.poll(0.05)
            second.poll(0.05)
        assert first.assignment() == before
        for _ in range(10):
            second.poll(0.05)
        # One JoinGroup: the restarted member's; the other member never rejoined.
        assert cluster.request_counts()[11] - joins == 1
        assert len(second.assignment()) == 2
    finally:
        first.close()
        second.close()


def test_a_returning_static_leader_keeps_its_assignment_and_still_sees_new_partitions(
        cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic, partitions=2)
    bs = cluster.bootstrap_servers
    common = dict(bootstrap_servers=bs, group_id="static-leader", session_timeout_ms=10_000,
                  heartbeat_interval_ms=100, metadata_max_age_ms=300,
                  auto_offset_reset="earliest", group_instance_id="only")

    def wait_for(consumer: Consumer, count: int) -> None:
        deadline = time.monotonic() + 20
        while len(consumer.assignment()) != count and time.monotonic() < deadline:
            consumer.poll(0.05)
        assert len(consumer.assignment()) == count

    consumer = Consumer(**common)
    try:
        consumer.subscribe([topic])
        wait_for(consumer, 2)
        generation = consumer.consumer_group_metadata().generation_id
        consumer.close()
        # The restarted leader gets skip_assignment (KIP-814): same partitions, same
        # generation, and no assignment of its own.
        consumer = Consumer(**common)
        consumer.subscribe([topic])
        wait_for(consumer, 2)
        assert consumer.consumer_group_metadata().generation_id == generation
        # It must still watch the partition counts as a leader does.
        with AdminClient(bootstrap_servers=bs) as admin:
            admin.create_partitions([NewPartitions(topic, 3)])
        wait_for(consumer, 3)
        assert consumer.consumer_group_metadata().generation_id > generation
    finally:
        consumer.close()


def test_a_partitions_first_idempotent_batch_goes_alone_so_none_overtakes_it(
        cluster: Cluster, topic: str) -> None:
    """A partition's first batch under a producer id is refused with UNKNOWN_PRODUCER_ID.
    Kafka accepts any first sequence from a producer id it holds no state of, so a batch
    sent behind the first would be written while the first is retried; the first could then
    only fail (written behind it, it would break send order). So the first goes alone: the
    next batch of its partition waits for its acknowledgement, and both land in send
    order. (Before, the second was written at offset 0 and the first failed.)"""
    cluster.create_topic(topic, partitions=2)
    for part in (0, 1):
        cluster.set_partition_leader(topic, part, 1)
    with Producer(bootstrap_servers=cluster.bootstrap_servers, enable_idempotence=True,
                  max_in_flight_requests_per_connection=5, linger_ms=0,
                  retry_backoff_ms=10) as p:
        p.send_and_wait(topic, b"warm", partition=1)  # a producer id, no state in p0
        cluster.set_rtt(1, 300)  # the second send comes while the first is in flight
        cluster.push_request_errors(0, [E.UnknownProducerIdError.code])
        first = p.send(topic, b"first", partition=0)
        time.sleep(0.1)
        second = p.send(topic, b"second", partition=0)
        time.sleep(0.1)
        cluster.set_rtt(1, 0)
        p.flush(10)
        assert (first.result(0).offset, second.result(0).offset) == (0, 1)
    assert cluster.end_offsets(topic)[0] == 2
