"""Per-record ``poll()`` against Tansu while the partitions change under it: a seek, pause or
close issued from another thread or on the consumer's loop thread takes effect for every
poll that starts after it returned (no stale record), and the position and commits stay
exactly past the last record poll() returned (the records come off a lease without the
buffer's lock, see ``FetchBuffer.drain_one``)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from kontrakt._types import OffsetAndMetadata, TopicPartition
from kontrakt.clients import AsyncKafkaClient
from kontrakt.clients.consumer import AsyncConsumer, Consumer
from kontrakt.errors import IllegalStateError
from kontrakt.protocol.records import RecordBatchBuilder
from kontrakt.testing import TansuBroker
from tests.integration.raw_ops import produce

pytestmark = [pytest.mark.integration]

N = 3000


async def _produce(bootstrap: str, topic: str, partition: int) -> None:
    async with AsyncKafkaClient(bootstrap_servers=bootstrap) as client:
        for start in range(0, N, 500):
            b = RecordBatchBuilder()
            for j in range(start, start + 500):
                b.append(0, None, b"%d" % j, [])
            part = await produce(client, topic, partition, b.build())
            assert part.error_code == 0, part


def _topic(broker: TansuBroker, name: str) -> tuple[TopicPartition, TopicPartition]:
    broker.create_topic(name, 2)
    for p in (0, 1):
        asyncio.run(_produce(broker.bootstrap_servers, name, p))
    return TopicPartition(name, 0), TopicPartition(name, 1)


def _poll_until(c: Consumer[Any, Any], pred: Callable[[Any], bool], limit: int) -> list[Any]:
    out = []
    deadline = time.monotonic() + 20
    while len(out) < limit and time.monotonic() < deadline:
        r = c.poll(1.0)
        if r is not None:
            out.append(r)
            if pred(r):
                break
    return out


@pytest.mark.parametrize("group", [True, False])
@pytest.mark.parametrize("where", ["thread", "loop"])
def test_seek_and_pause_during_sync_polls(tansu_broker: TansuBroker, topic_name: str,
                                          where: str, group: bool) -> None:
    """Without a group, poll() pops the lease's records itself (``Consumer._recs``)."""
    tp0, _ = _topic(tansu_broker, topic_name)
    grouped: dict[str, Any] = {"group_id": f"g-{topic_name}"} if group else {}
    with Consumer(bootstrap_servers=tansu_broker.bootstrap_servers,
                  enable_auto_commit=False, **grouped) as c:
        c.assign([TopicPartition(topic_name, 0, 0), TopicPartition(topic_name, 1, 0)])

        def issue(call: Callable[[], None]) -> None:
            """Run ``call`` on another thread or on the loop, while this one polls."""
            done = threading.Event()
            if where == "thread":
                t = threading.Thread(target=lambda: (call(), done.set()))
                t.start()
            else:
                c._thread.loop.call_soon_threadsafe(lambda: (call(), done.set()))
            # Poll meanwhile: records taken before the call returned may be anything.
            for _ in range(300):
                if done.is_set():
                    break
                c.poll(0.01)
            assert done.wait(10)
            if where == "thread":
                t.join(10)

        got = _poll_until(c, lambda r: r.partition == 0 and r.offset >= 100, 10_000)
        assert got and got[-1].offset >= 100
        assert (c._recs is None) == group  # the path under test
        issue(lambda: c._async.seek(tp0, 2500) if where == "loop" else c.seek(tp0, 2500))
        after = _poll_until(c, lambda r: r.partition == 0, 10_000)
        assert (after[-1].partition, after[-1].offset) == (0, 2500)
        assert c.position(tp0) == 2501
        if group:
            c.commit()
            assert c.committed([tp0])[tp0] == OffsetAndMetadata(2501)

        issue(lambda: c._async.pause(tp0) if where == "loop" else c.pause(tp0))
        pos = c.position(tp0)
        assert not [r for r in _poll_until(c, lambda r: False, 200) if r.partition == 0]
        assert c.position(tp0) == pos
        c.resume(tp0)
        rest = [r.offset for r in _poll_until(c, lambda r: (r.partition, r.offset) == (0, N - 1),
                                                  6000) if r.partition == 0]
        assert rest == list(range(pos, N))


class _FetcherDied(Exception):
    pass


def test_a_fetcher_that_dies_is_raised_by_the_next_sync_poll(tansu_broker: TansuBroker,
                                                              topic_name: str) -> None:
    """The fetcher dies while poll() pops a lease itself (no group): the next poll raises
    its error, although records are buffered, and the polls after it go on exactly past the
    last record returned."""
    tp0, tp1 = _topic(tansu_broker, topic_name)
    with Consumer(bootstrap_servers=tansu_broker.bootstrap_servers) as c:
        c.assign([TopicPartition(topic_name, 0, 0), TopicPartition(topic_name, 1, 0)])
        got = _poll_until(c, lambda r: r.offset >= 10, 1000)
        assert got and c._recs is not None and len(c._recs) > 10
        fetcher = c._async._fetcher

        def plan() -> None:
            raise _FetcherDied("planning failed")

        async def kill() -> None:
            fetcher._plan = plan  # type: ignore[method-assign]
            fetcher.wake()
            assert fetcher._task is not None
            await asyncio.wait([fetcher._task], timeout=10)

        c._thread.run(kill())
        assert isinstance(fetcher.error, _FetcherDied)
        with pytest.raises(_FetcherDied):
            c.poll(0)
        nxt = c.poll(0)
        assert nxt is not None
        last = {tp0.partition: -1, tp1.partition: -1}
        for r in got:
            last[r.partition] = r.offset
        assert nxt.offset == last[nxt.partition] + 1
        assert c.position(TopicPartition(topic_name, nxt.partition)) == nxt.offset + 1


def test_a_sync_poll_after_close_raises_with_a_lease_live(tansu_broker: TansuBroker,
                                                          topic_name: str) -> None:
    """close() returns while poll() pops a live lease itself (no group): the next poll
    raises, the lease's records are not handed out."""
    _topic(tansu_broker, topic_name)
    c: Consumer[Any, Any] = Consumer(bootstrap_servers=tansu_broker.bootstrap_servers)
    c.assign([TopicPartition(topic_name, 0, 0), TopicPartition(topic_name, 1, 0)])
    assert _poll_until(c, lambda r: r.offset >= 10, 1000)
    assert c._recs is not None and len(c._recs) > 10
    c.close()
    for _ in range(3):
        with pytest.raises(IllegalStateError):
            c.poll(0)


def test_close_on_another_thread_during_sync_polls(tansu_broker: TansuBroker,
                                                   topic_name: str) -> None:
    _topic(tansu_broker, topic_name)
    c: Consumer[Any, Any] = Consumer(bootstrap_servers=tansu_broker.bootstrap_servers)
    c.assign([TopicPartition(topic_name, 0, 0), TopicPartition(topic_name, 1, 0)])
    assert _poll_until(c, lambda r: r.offset >= 10, 1000)
    closed = threading.Event()
    t = threading.Thread(target=lambda: (c.close(), closed.set()))
    t.start()
    outcome = None
    for _ in range(100_000):
        was_closed = closed.is_set()
        try:
            c.poll(0.01)
        except IllegalStateError:
            outcome = "closed"
            break
        assert not was_closed, "a record after close() returned"
    t.join(10)
    assert outcome == "closed" and closed.is_set()


def test_seek_and_pause_between_async_polls(tansu_broker: TansuBroker,
                                            topic_name: str) -> None:
    tp0, _ = _topic(tansu_broker, topic_name)

    async def main() -> None:
        async with AsyncConsumer(bootstrap_servers=tansu_broker.bootstrap_servers) as c:
            c.assign([TopicPartition(topic_name, 0, 0), TopicPartition(topic_name, 1, 0)])
            loop = asyncio.get_running_loop()

            async def take(pred: Callable[[Any], bool], limit: int) -> list[Any]:
                out = []
                for _ in range(limit):
                    r = await c.poll(3.0)
                    if r is None:
                        break
                    out.append(r)
                    if pred(r):
                        break
                return out

            await take(lambda r: r.partition == 0 and r.offset >= 100, 10_000)
            # A callback of the loop between two polls (as a timer or another task's).
            loop.call_soon(c.seek, tp0, 2500)
            await asyncio.sleep(0)
            got = await take(lambda r: r.partition == 0, 10_000)
            assert got[-1].offset == 2500 and await c.position(tp0) == 2501
            loop.call_soon(c.pause, tp0)
            await asyncio.sleep(0)
            assert not [r for r in await take(lambda r: False, 200) if r.partition == 0]
            assert await c.position(tp0) == 2501

    asyncio.run(main())


@pytest.mark.timeout(90)
def test_getmany_resets_and_assign_between_polls_that_pop_the_lease(
        tansu_broker: TansuBroker, topic_name: str) -> None:
    """Without a group, poll() pops the live lease itself (``Consumer._recs``); what ends
    the lease between two polls -- a getmany() (which gives the lease's records back to
    their fetch), a seek_to_beginning(), an assign() that drops the lease's partition --
    makes the next poll go back to the buffer: every record comes out once and in order,
    and position() stays exactly past the last record returned."""
    tp0, tp1 = _topic(tansu_broker, topic_name)
    with Consumer(bootstrap_servers=tansu_broker.bootstrap_servers,
                  enable_auto_commit=False) as c:
        c.assign([TopicPartition(topic_name, 0, 0), TopicPartition(topic_name, 1, 0)])
        seen: dict[int, list[int]] = {0: [], 1: []}
        popped = 0  # polls made while poll() popped a live lease itself

        def check_positions() -> None:
            for p, offsets in seen.items():
                if offsets:
                    assert c.position(TopicPartition(topic_name, p)) == offsets[-1] + 1

        deadline = time.monotonic() + 60
        while (len(seen[0]) < N or len(seen[1]) < N) and time.monotonic() < deadline:
            for _ in range(7):
                popped += c._recs is not None
                r = c.poll(1.0)
                if r is not None:
                    seen[r.partition].append(r.offset)
            for tp, recs in c.getmany(timeout=1.0, max_records=13).items():
                seen[tp.partition] += [r.offset for r in recs]
            check_positions()
        assert popped > 100
        assert seen == {0: list(range(N)), 1: list(range(N))}

        # Back to the start of partition 0 with a lease of it live.
        c.seek(tp0, 1000)
        first = _poll_until(c, lambda r: r.partition == 0 and r.offset >= 1020, 1000)
        assert c._recs is not None and first[-1].partition == 0
        c.seek_to_beginning(tp0)
        again = [r.offset for r in _poll_until(c, lambda r: r.offset >= 30, 1000)
                 if r.partition == 0]
        assert again == list(range(len(again))) and again[-1] == 30
        assert c.position(tp0) == 31

        # Partition 0 dropped with a lease of it live: none of its records after assign().
        c.seek(tp1, 2000)
        got = _poll_until(c, lambda r: r.partition == 0, 1000)
        assert c._recs is not None and got[-1].partition == 0
        c.assign([tp1])
        rest = _poll_until(c, lambda r: (r.partition, r.offset) == (1, N - 1), 2000)
        assert [r.offset for r in rest if r.partition == 1] == list(range(2000, N))
        assert not [r for r in rest if r.partition == 0]
        assert c.position(tp1) == N
