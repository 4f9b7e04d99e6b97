"""Record futures speak asyncio's future protocol: every idiom users write works, on Tansu.

``asyncio.gather``, ``wait``, ``as_completed``, ``wait_for`` and ``shield`` take a
:class:`RecordFuture` as it is (no Task per record: gathering 200k futures wrapped each in a
Task and ran ~10x slower than ``flush()``); a timed-out ``wait_for`` stops waiting without
taking the record back; a sync producer's futures can be awaited and gathered from asyncio
code on another loop.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kontrakt.clients.producer import AsyncProducer, Producer, RecordFuture
from kontrakt.testing import TansuBroker

N = 300


def _offsets_are_exact(metas: list[Any]) -> None:
    """Each partition's offsets are 0..n-1 in send order (one warm-up-free topic)."""
    per: dict[int, list[int]] = {}
    for md in metas:
        per.setdefault(md.partition, []).append(md.offset)
    assert sum(len(v) for v in per.values()) == N
    for offsets in per.values():
        assert offsets == list(range(len(offsets)))


@pytest.mark.parametrize("idiom", ["gather", "wait", "as_completed", "await_each", "shield"])
def test_every_asyncio_idiom_resolves_each_record(tansu_broker: TansuBroker, topic_name: str,
                                                  idiom: str) -> None:
    tansu_broker.create_topic(topic_name, 3)

    async def run() -> list[Any]:
        async with AsyncProducer(bootstrap_servers=tansu_broker.bootstrap_servers,
                                 linger_ms=5) as p:
            futs = [await p.send(topic_name, b"v%d" % i, b"k%d" % i) for i in range(N)]
            assert all(asyncio.isfuture(f) and asyncio.ensure_future(f) is f for f in futs)
            if idiom == "gather":
                return list(await asyncio.gather(*futs))
            if idiom == "wait":
                done, pending = await asyncio.wait(futs, timeout=30)
                assert not pending and done == set(futs)
                return [f.result() for f in futs]
            if idiom == "as_completed":
                got = [await f for f in asyncio.as_completed(futs, timeout=30)]
                assert len(got) == N
                return [f.result() for f in futs]
            if idiom == "shield":
                return [await asyncio.shield(f) for f in futs]
            return [await f for f in futs]

    _offsets_are_exact(asyncio.run(run()))


def test_wait_for_times_out_without_taking_the_record_back(tansu_broker: TansuBroker,
                                                           topic_name: str) -> None:
    """A linger far longer than the timeout keeps the record unsent: ``wait_for`` gives up
    at its timeout (on 3.11 it cancels the future itself and waits for that), the future
    reports cancelled, and flush() still delivers the record."""
    tansu_broker.create_topic(topic_name, 1)

    async def run() -> None:
        async with AsyncProducer(bootstrap_servers=tansu_broker.bootstrap_servers,
                                 linger_ms=20_000) as p:
            slow = await p.send(topic_name, b"late", b"k")
            other = await p.send(topic_name, b"later", b"k")
            seen: list[RecordFuture] = []
            other.add_done_callback(seen.append)
            t0 = time.monotonic()
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(slow, 0.3)
            assert time.monotonic() - t0 < 5
            assert slow.cancelled() and slow.done()
            with pytest.raises(asyncio.CancelledError):
                slow.result()
            assert not other.done() and not seen  # cancelling one leaves the others alone
            assert "cancelled" in repr(slow)
            await p.flush(30)
            assert (await other).offset == 1 and seen == [other]
            assert not slow.cancel()  # nothing left to cancel

    asyncio.run(run())


def test_wait_timeout_removes_its_callbacks(tansu_broker: TansuBroker, topic_name: str) -> None:
    tansu_broker.create_topic(topic_name, 1)

    async def run() -> None:
        async with AsyncProducer(bootstrap_servers=tansu_broker.bootstrap_servers,
                                 linger_ms=20_000) as p:
            fut = await p.send(topic_name, b"v")
            calls: list[Any] = []

            def cb(f: Any) -> None:
                calls.append(f)

            fut.add_done_callback(cb)
            fut.add_done_callback(cb)
            assert fut.remove_done_callback(cb) == 2
            done, pending = await asyncio.wait([fut], timeout=0.1)
            assert pending == {fut} and not done
            await p.flush(30)
            await asyncio.sleep(0)
            assert calls == []
            assert fut.result().offset == 0

    asyncio.run(run())


def test_sync_producer_futures_are_gathered_on_another_loop(tansu_broker: TansuBroker,
                                                            topic_name: str) -> None:
    """A sync producer resolves records on its own I/O thread: callbacks asyncio adds from
    the caller's loop hop to that loop thread-safely, and sync futures are never cancelled."""
    tansu_broker.create_topic(topic_name, 3)
    with Producer(bootstrap_servers=tansu_broker.bootstrap_servers, linger_ms=5) as p:
        futs = [p.send(topic_name, b"v%d" % i, b"k%d" % i) for i in range(N)]

        async def run() -> list[Any]:
            return list(await asyncio.wait_for(asyncio.gather(*futs), 30))

        _offsets_are_exact(asyncio.run(run()))
        late = p.send(topic_name, b"x")
        assert not late.cancel()
        late.result(30)


def test_done_callback_added_on_a_loop_to_a_resolved_future_runs_on_the_loop(
        tansu_broker: TansuBroker, topic_name: str) -> None:
    """As asyncio's futures: not inline (asyncio's own functions rely on it)."""
    tansu_broker.create_topic(topic_name, 1)

    async def run() -> None:
        async with AsyncProducer(bootstrap_servers=tansu_broker.bootstrap_servers) as p:
            fut = await p.send(topic_name, b"v")
            await fut
            calls: list[Any] = []
            fut.add_done_callback(calls.append)
            assert calls == []
            await asyncio.sleep(0)
            assert calls == [fut]

    asyncio.run(run())
