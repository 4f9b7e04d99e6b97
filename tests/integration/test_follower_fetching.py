"""Follower fetching (KIP-392) against librdkafka's mock cluster: a consumer that sends
``client.rack`` with Fetch v11+ is told by the leader which replica to read from, and the
leader answers it no records meanwhile; the consumer must follow, and must go back to the
leader when that replica fails it, as the Java client does.

The mock names the replica ``set_partition_follower`` set, whatever rack the consumer sends
(Kafka names one only when the consumer's rack matches a replica's, with
``replica.selector.class=RackAwareReplicaSelector``). Tansu names none. Unlike Kafka, the
mock's leader also names a replica that is down or lags behind the fetch offset (Kafka
names only live replicas that hold the offset), so these tests unname it where Kafka's
leader would stop naming it.

A follower's partition errors are injected per partition
(``push_partition_request_errors``: the partition's next Fetch, at the follower, answers
it), or are the mock's own: ``NOT_LEADER_OR_FOLLOWER`` from a replica that is no longer
the named one, ``OFFSET_OUT_OF_RANGE`` from a follower that lags
(``set_partition_follower_wmarks``). Errors pushed per broker
(``broker_push_request_error_rtts``) land in the response's top-level error code too
(Fetch v7+, measured), which is a fetch-session error, not a partition's (the Java client
ignores the partitions of such a response); only their ``DISCONNECT`` is used here, for a
follower's connection failing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from kontrakt._types import TopicPartition
from kontrakt.clients import AsyncKafkaClient
from kontrakt.clients.consumer import AsyncConsumer, Consumer
from kontrakt.protocol.records import RecordBatchBuilder
from kontrakt.testing import MockCluster, MockRequest
from tests.integration.raw_ops import produce

pytestmark = [pytest.mark.integration]

_FETCH = 1
_OFFSET_OUT_OF_RANGE = 1
_NOT_LEADER_OR_FOLLOWER = 6
#: every wait for records is bounded by this (seconds); the failovers take well under 1 s
_WAIT = 10.0
#: the tests that are not about expiry keep the named replica for longer than they run,
#: so only the failover under test can take the consumer back to the leader
_LONG_AGE_MS = 600_000


async def _produce(bootstrap: str, topic: str, count: int, start: int = 0) -> None:
    async with AsyncKafkaClient(bootstrap_servers=bootstrap) as client:
        b = RecordBatchBuilder()
        for i in range(start, start + count):
            b.append(1_700_000_000_000 + i, None, f"v{i}".encode())
        part = await produce(client, topic, 0, b.build())
        assert part.error_code == 0, part


async def _replicas(bootstrap: str, topic: str) -> tuple[int, int, int]:
    """(leader, follower, other) of partition 0 of a topic on 3 brokers."""
    async with AsyncKafkaClient(bootstrap_servers=bootstrap) as client:
        meta = await client.refresh_metadata([topic])
        leader = meta.topics[topic].partitions[0].leader
    follower, other = sorted({1, 2, 3} - {leader})
    return leader, follower, other


def _values(start: int, stop: int) -> list[bytes]:
    return [f"v{i}".encode() for i in range(start, stop)]


class _Reader:
    """A sync or async consumer read the same way from the test's event loop (the sync
    one's blocking calls run on a worker thread)."""

    def __init__(self, consumer: Any, blocking: bool) -> None:
        self.consumer = consumer
        self.blocking = blocking
        self.got: list[bytes] = []

    async def _call(self, name: str, *args: Any) -> Any:
        fn = getattr(self.consumer, name)
        if self.blocking:
            return await asyncio.to_thread(fn, *args)
        return await fn(*args)

    async def read_until(self, count: int, timeout: float = _WAIT) -> float:
        """Read until ``count`` records in all; return how long it took."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        while len(self.got) < count and loop.time() - start < timeout:
            for recs in (await self._call("getmany", 0.1)).values():
                self.got.extend(r.value for r in recs)
        return loop.time() - start

    async def position(self, tp: TopicPartition) -> int:
        return int(await self._call("position", tp))


@contextlib.asynccontextmanager
async def _reader(form: str, bootstrap: str, tp: TopicPartition, **options: Any
                  ) -> AsyncIterator[_Reader]:
    options = {"bootstrap_servers": bootstrap, "client_rack": "rack-a",
               "auto_offset_reset": "earliest", "metadata_max_age_ms": _LONG_AGE_MS,
               "fetch_max_wait_ms": 100,
               **options}
    if form == "async":
        async with AsyncConsumer(**options) as c:
            c.assign([tp])
            c.seek(tp, 0)
            yield _Reader(c, blocking=False)
        return
    sync = await asyncio.to_thread(Consumer, **options)
    try:
        await asyncio.to_thread(sync.assign, [tp])
        await asyncio.to_thread(sync.seek, tp, 0)
        yield _Reader(sync, blocking=True)
    finally:
        await asyncio.to_thread(sync.close)


def _fetches(requests: list[MockRequest]) -> list[int]:
    """The brokers that received the Fetch requests, in order."""
    return [r.broker_id for r in requests if r.api_key == _FETCH]


def _topic(mock_cluster: MockCluster, topic: str) -> tuple[str, TopicPartition]:
    """A topic of one partition on three replicas: (bootstrap servers, its partition)."""
    mock_cluster.create_topic(topic, 1, 3)
    return mock_cluster.bootstrap_servers, TopicPartition(topic, 0)


async def _follow(mock_cluster: MockCluster, topic: str) -> tuple[int, int, int]:
    """Ten records in the partition, and its leader naming the follower to read from:
    (leader, follower, other replica)."""
    bs = mock_cluster.bootstrap_servers
    await _produce(bs, topic, 10)
    leader, follower, other = await _replicas(bs, topic)
    mock_cluster.set_partition_follower(topic, 0, follower)
    return leader, follower, other


@contextlib.contextmanager
def _tracking(mock_cluster: MockCluster) -> Iterator[Callable[[], list[int]]]:
    """Track the cluster's requests for the block; yields a function that gives the
    brokers that received Fetch requests so far, in order."""
    mock_cluster.start_request_tracking()
    try:
        yield lambda: _fetches(mock_cluster.get_requests())
    finally:
        mock_cluster.stop_request_tracking()


def test_consumer_fetches_from_the_replica_the_leader_names(mock_cluster: MockCluster,
                                                             topic_name: str) -> None:
    bs, tp = _topic(mock_cluster, topic_name)

    async def main() -> None:
        _leader, follower, _other = await _follow(mock_cluster, topic_name)
        with _tracking(mock_cluster) as fetched:
            async with _reader("async", bs, tp) as r:
                await r.read_until(10)
            fetched_from = set(fetched())
        assert r.got == _values(0, 10)
        assert follower in fetched_from

    asyncio.run(main())


@pytest.mark.parametrize("form", ["async", "sync"])
def test_follower_going_down_sends_the_consumer_back_to_the_leader(
        mock_cluster: MockCluster, topic_name: str, form: str) -> None:
    """The named follower goes down: its partitions are fetched from the leader again,
    every record once, in order, within a bounded time (not after the replica's
    ``metadata.max.age.ms`` lease)."""
    bs, tp = _topic(mock_cluster, topic_name)

    async def main() -> None:
        leader, follower, _other = await _follow(mock_cluster, topic_name)
        async with _reader(form, bs, tp) as r:
            await r.read_until(10)
            assert r.got == _values(0, 10)
            with _tracking(mock_cluster) as fetched:
                # Kafka's leader stops naming a replica that left the cluster.
                mock_cluster.broker_down(follower)
                mock_cluster.set_partition_follower(topic_name, 0, -1)
                await _produce(bs, topic_name, 10, start=10)
                took = await r.read_until(20)
                fetched_from = fetched()
            assert r.got == _values(0, 20), (took, fetched_from)
            assert took < 5, took
            assert leader in fetched_from
            assert await r.position(tp) == 20

    asyncio.run(main())


def test_follower_connection_failure_goes_back_to_the_leader_first(
        mock_cluster: MockCluster, topic_name: str) -> None:
    """A dropped connection to the follower clears the named replica (as the Java client's
    failed fetch does): the partition's next fetch goes to the leader, which names the
    follower again; nothing is lost or read twice."""
    bs, tp = _topic(mock_cluster, topic_name)

    async def main() -> None:
        leader, follower, _other = await _follow(mock_cluster, topic_name)
        async with _reader("async", bs, tp) as r:
            await r.read_until(10)
            with _tracking(mock_cluster) as fetched:
                mock_cluster.broker_push_request_error_rtts(
                    follower, _FETCH, [(MockCluster.DISCONNECT, 0)])
                await _produce(bs, topic_name, 10, start=10)
                took = await r.read_until(20)
                fetched_from = fetched()
        assert r.got == _values(0, 20), (took, fetched_from)
        # The follower stays in the metadata (it is up), so only the dropped connection
        # can have sent the partition to the leader; which names the follower again.
        assert fetched_from.count(leader) == 1, fetched_from
        assert fetched_from.index(leader) > 0 and fetched_from[-1] == follower, fetched_from

    asyncio.run(main())


@pytest.mark.parametrize("form", ["async", "sync"])
def test_offset_out_of_range_at_a_lagging_follower_refetches_from_the_leader(
        mock_cluster: MockCluster, topic_name: str, form: str) -> None:
    """OFFSET_OUT_OF_RANGE from the named follower (it lags the leader) sends the fetch
    back to the leader at the same offset; it does not apply ``auto.offset.reset`` (here
    ``latest``, which would skip the records the follower has not got yet)."""
    bs, tp = _topic(mock_cluster, topic_name)

    async def main() -> None:
        leader, follower, _other = await _follow(mock_cluster, topic_name)
        async with _reader(form, bs, tp, auto_offset_reset="latest") as r:
            await r.read_until(10)
            assert r.got == _values(0, 10)
            with _tracking(mock_cluster) as fetched:
                # The follower holds offsets up to 5 only; the consumer fetches 10.
                mock_cluster.set_partition_follower_wmarks(topic_name, 0, -1, 5)
                await _produce(bs, topic_name, 10, start=10)
                # The mock's leader keeps naming the lagging follower (Kafka's would not),
                # so the consumer goes back and forth until it catches up.
                await r.read_until(11, timeout=0.5)
                fetched_from = fetched()
                assert r.got == _values(0, 10)
                assert await r.position(tp) == 10
                mock_cluster.set_partition_follower_wmarks(topic_name, 0, -1, -1)
                took = await r.read_until(20)
            assert r.got == _values(0, 20), took
            assert await r.position(tp) == 20
        assert fetched_from[0] == follower and leader in fetched_from, fetched_from[:10]

    asyncio.run(main())


@pytest.mark.parametrize("form", ["async", "sync"])
def test_consumer_follows_the_replica_the_leader_names_next(
        mock_cluster: MockCluster, topic_name: str, form: str) -> None:
    """The leader names another replica: the old one answers NOT_LEADER_OR_FOLLOWER, the
    consumer goes back to the leader, which names the new one, and reads on from it."""
    bs, tp = _topic(mock_cluster, topic_name)

    async def main() -> None:
        leader, _follower, other = await _follow(mock_cluster, topic_name)
        async with _reader(form, bs, tp) as r:
            await r.read_until(10)
            with _tracking(mock_cluster) as fetched:
                mock_cluster.set_partition_follower(topic_name, 0, other)
                await _produce(bs, topic_name, 10, start=10)
                took = await r.read_until(20)
                fetched_from = fetched()
            assert r.got == _values(0, 20), (took, fetched_from)
            assert took < 5, took
            assert await r.position(tp) == 20
        assert other in fetched_from and leader in fetched_from, fetched_from
        # Once at the new replica, the consumer stays there.
        assert fetched_from[-1] == other, fetched_from

    asyncio.run(main())


def test_named_replica_expires_after_metadata_max_age(mock_cluster: MockCluster,
                                                      topic_name: str) -> None:
    """As the Java client, the replica a leader named is used for ``metadata.max.age.ms``;
    then the partition's next fetch goes to the leader, which names one again."""
    bs, tp = _topic(mock_cluster, topic_name)

    async def main() -> None:
        leader, follower, _other = await _follow(mock_cluster, topic_name)
        async with _reader("async", bs, tp, metadata_max_age_ms=400) as r:
            await r.read_until(10)
            with _tracking(mock_cluster) as fetched:
                loop = asyncio.get_running_loop()
                end = loop.time() + 1.5
                n = 10
                while loop.time() < end:
                    await _produce(bs, topic_name, 5, start=n)
                    n += 5
                    await r.read_until(n)
                    await asyncio.sleep(0.1)
                fetched_from = fetched()
        assert r.got == _values(0, n)
        # Back to the leader about every 0.4 s, and straight on to the follower.
        assert fetched_from.count(leader) >= 2, fetched_from
        assert fetched_from.count(follower) > fetched_from.count(leader), fetched_from

    asyncio.run(main())


def test_named_replica_missing_from_metadata_is_looked_up(mock_cluster: MockCluster,
                                                          topic_name: str) -> None:
    """A follower that was down (and so left the consumer's metadata) comes back and is
    named again: the consumer refreshes its metadata to find it, as the Java client does
    (rather than fetching from the leader, which only names it again, until the next
    periodic refresh)."""
    bs, tp = _topic(mock_cluster, topic_name)

    async def main() -> None:
        leader, follower, _other = await _follow(mock_cluster, topic_name)
        async with _reader("async", bs, tp) as r:
            await r.read_until(10)
            mock_cluster.broker_down(follower)
            mock_cluster.set_partition_follower(topic_name, 0, -1)
            await _produce(bs, topic_name, 10, start=10)
            await r.read_until(20)
            assert r.got == _values(0, 20)
            with _tracking(mock_cluster) as fetched:
                mock_cluster.broker_up(follower)
                mock_cluster.set_partition_follower(topic_name, 0, follower)
                await _produce(bs, topic_name, 10, start=20)
                took = await r.read_until(30)
                fetched_from = fetched()
        assert r.got == _values(0, 30), (took, len(fetched_from))
        assert took < 5, took
        assert follower in fetched_from
        # Not a fetch loop with the leader (which answers at once while it names a
        # replica) until the metadata shows the replica.
        assert fetched_from.count(leader) < 100, fetched_from.count(leader)

    asyncio.run(main())


def test_offset_out_of_range_at_the_leader_too_resets_the_position(
        mock_cluster: MockCluster, topic_name: str) -> None:
    """An offset out of range at the follower and then at the leader too (here: a seek
    past the end) is reset by ``auto.offset.reset``: the leader's answer is the one that
    counts, as in the Java client, even when (as the mock's) it names a replica as well."""
    bs, tp = _topic(mock_cluster, topic_name)

    async def main() -> None:
        leader, _follower, _other = await _follow(mock_cluster, topic_name)
        async with _reader("async", bs, tp) as r:
            await r.read_until(10)
            with _tracking(mock_cluster) as fetched:
                r.consumer.seek(tp, 1000)
                took = await r.read_until(20)
                fetched_from = fetched()
        # Reset to the earliest offset: the ten records again.
        assert r.got == _values(0, 10) * 2, (took, len(fetched_from))
        assert leader in fetched_from

    asyncio.run(main())


def test_a_named_replica_missing_from_metadata_does_not_spin_the_fetcher(
        mock_cluster: MockCluster, topic_name: str) -> None:
    """The leader names a replica that has left the consumer's metadata (Kafka's leader
    does so until the replica drops out of its ISR, ``replica.lag.time.max.ms``; the mock's
    for good). The leader answers such fetches at once and with no records, so going
    straight back to it would be a busy loop: the consumer gives a metadata lookup
    ``retry.backoff.ms`` first (librdkafka backs off too). Once the leader stops naming the
    replica, it reads on from the leader."""
    bs, tp = _topic(mock_cluster, topic_name)

    async def main() -> None:
        leader, follower, _other = await _follow(mock_cluster, topic_name)
        async with _reader("async", bs, tp, retry_backoff_ms=100) as r:
            await r.read_until(10)
            with _tracking(mock_cluster) as fetched:
                mock_cluster.broker_down(follower)
                await _produce(bs, topic_name, 10, start=10)
                await r.read_until(20, timeout=1.0)
                named = fetched().count(leader)
                mock_cluster.set_partition_follower(topic_name, 0, -1)
                took = await r.read_until(20)
        # About one leader fetch per retry.backoff.ms (and per reconnect backoff before
        # the metadata lost the replica); not thousands.
        assert named <= 30, named
        assert r.got == _values(0, 20), took

    asyncio.run(main())


@pytest.mark.parametrize(("error", "form"), [
    pytest.param(_NOT_LEADER_OR_FOLLOWER, "async", id="not-leader-async"),
    pytest.param(_OFFSET_OUT_OF_RANGE, "async", id="out-of-range-async"),
    pytest.param(_OFFSET_OUT_OF_RANGE, "sync", id="out-of-range-sync")])
def test_partition_error_at_the_follower_refetches_from_the_leader(
        mock_cluster: MockCluster, topic_name: str, error: int, form: str) -> None:
    """The follower answers the partition with an error: the partition's next fetch goes
    to the leader at the same offset (which names the follower again), and an offset out
    of range there does not reset the position (``earliest`` here: a reset would read the
    records again)."""
    bs, tp = _topic(mock_cluster, topic_name)

    async def main() -> None:
        leader, follower, _other = await _follow(mock_cluster, topic_name)
        async with _reader(form, bs, tp) as r:
            await r.read_until(10)
            with _tracking(mock_cluster) as fetched:
                # The consumer fetches from the follower: that is where the error lands.
                mock_cluster.push_partition_request_errors(topic_name, 0, _FETCH, [error])
                await _produce(bs, topic_name, 10, start=10)
                took = await r.read_until(21, timeout=2.0)
                fetched_from = fetched()
            assert r.got == _values(0, 20), (took, fetched_from)
            assert await r.position(tp) == 20
        assert fetched_from[0] == follower, fetched_from
        assert fetched_from.count(leader) == 1 and fetched_from[-1] == follower, fetched_from

    asyncio.run(main())


@pytest.mark.parametrize("form", ["async", "sync"])
def test_a_lagging_follower_the_leader_keeps_naming_is_fetched_with_backoff(
        mock_cluster: MockCluster, topic_name: str, form: str) -> None:
    """A follower stays behind the fetch offset and the leader keeps naming it (as the
    mock's does; Kafka's stops once it sees the replica lag). Each OFFSET_OUT_OF_RANGE at
    the follower holds the partition for a backoff (``retry.backoff.ms``, doubling up to
    ``retry.backoff.max.ms``, as librdkafka backs a partition off after a fetch error)
    before it goes back to the leader: not a leader <-> follower loop with no wait (both
    answer at once, thousands of fetches a second). Once the leader stops naming the
    follower, every record is read from the leader, within a bounded time."""
    bs, tp = _topic(mock_cluster, topic_name)

    async def main() -> None:
        leader, follower, _other = await _follow(mock_cluster, topic_name)
        # The mock's leader holds a fetch it names a replica in for fetch.max.wait.ms
        # (Kafka's answers it at once): kept short, so that a loop with no wait shows.
        async with _reader(form, bs, tp, retry_backoff_ms=100, retry_backoff_max_ms=400,
                           fetch_max_wait_ms=10) as r:
            await r.read_until(10)
            assert r.got == _values(0, 10)
            with _tracking(mock_cluster) as fetched:
                # The follower holds offsets up to 5 only; the consumer fetches 10.
                mock_cluster.set_partition_follower_wmarks(topic_name, 0, -1, 5)
                await _produce(bs, topic_name, 10, start=10)
                await r.read_until(11, timeout=1.5)
                lagging = fetched()
                assert r.got == _values(0, 10)
                mock_cluster.set_partition_follower(topic_name, 0, -1)
                took = await r.read_until(20)
                after = fetched()[len(lagging):]
            assert r.got == _values(0, 20), (took, after)
            assert await r.position(tp) == 20
        # 1.5 s of waits of 0.1, 0.2, 0.4, 0.4, ... s (+-20%): about 5 round trips, each
        # one fetch at the follower and one at the leader. Without the backoff: thousands.
        assert 2 <= lagging.count(follower) <= 12, lagging[:40]
        assert lagging.count(leader) <= 12, lagging[:40]
        # At most one more wait (0.4 s + 20%) before the leader is asked again.
        assert took < 2, took
        assert leader in after, after

    asyncio.run(main())
