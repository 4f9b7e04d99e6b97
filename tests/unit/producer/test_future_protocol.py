"""Record futures keep asyncio's future protocol where it is subtle: contexts, errors, order.

Offline producers (``offline.py``): batches are completed by the test, on the loop as the
sender completes them, or from another thread as a sync producer's I/O thread does.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from typing import Any

import pytest

from kontrakt.clients.producer import RecordFuture
from kontrakt.clients.producer._batch import ProducerBatch
from kontrakt.errors import ProduceError
from tests.unit.producer.offline import offline_producer

var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")


def _complete_as_the_sender(batches: list[ProducerBatch], error: BaseException | None = None,
                            log_append_time: int = -1) -> None:
    """Complete ``batches`` the way the sender does: in a context of its own (a Task's)."""

    def run() -> None:
        var.set("sender")
        for b in batches:
            b.complete(-1 if error else 10 * b.partition, log_append_time, error)

    contextvars.copy_context().run(run)


def _batches_of(futs: list[RecordFuture]) -> list[ProducerBatch]:
    return list({id(f._batch): f._batch for f in futs}.values())


def test_each_callback_runs_in_the_context_it_was_added_in() -> None:
    """Staged, placed and already resolved records alike; a callback's own changes stay in
    its context (not seen by the next callback of the same batch); an explicit context is
    the one used. Before, callbacks ran in the completing sender's context."""
    p = offline_producer(1)
    seen: list[tuple[int, str]] = []

    def cb(i: int) -> Any:
        def run(fut: RecordFuture) -> None:
            seen.append((i, var.get()))
            var.set("leaked")
        return run

    async def main() -> None:
        futs = [await p.send("t", b"v", b"k%d" % i) for i in range(6)]
        explicit = contextvars.copy_context()
        explicit.run(var.set, "explicit")
        for i, f in enumerate(futs):
            if i == 3:
                p._acc.settle(p._topics["t"].stage)  # the rest are placed, not staged
            var.set(f"ctx{i}")
            f.add_done_callback(cb(i))
        futs[5].add_done_callback(cb(6), context=explicit)
        var.set("main")
        _complete_as_the_sender(_batches_of(futs))
        var.set("ctx7")
        futs[0].add_done_callback(cb(7))  # resolved: run on the loop's next turn
        var.set("main")
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert var.get() == "main"

    asyncio.run(main())
    assert sorted(seen) == [(0, "ctx0"), (1, "ctx1"), (2, "ctx2"), (3, "ctx3"), (4, "ctx4"),
                            (5, "ctx5"), (6, "explicit"), (7, "ctx7")]


def test_a_sync_producers_callback_added_on_a_loop_runs_there_in_its_context() -> None:
    """The I/O thread resolves the record; the callback hops to the loop it was added on, in
    the context it was added in (before: the I/O thread's, copied when it scheduled it)."""
    p = offline_producer(1, _threaded=True)
    seen: list[tuple[str, bool]] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        fut = p._append("t", b"v", b"k", 0, None, None, None)
        ran = asyncio.Event()

        def cb(f: RecordFuture) -> None:
            seen.append((var.get(), asyncio.get_running_loop() is loop))
            ran.set()

        var.set("caller")
        fut.add_done_callback(cb)
        io = threading.Thread(target=_complete_as_the_sender, args=(_batches_of([fut]),))
        io.start()
        await asyncio.wait_for(ran.wait(), 10)
        io.join(10)
        assert fut.result().offset == 0

    asyncio.run(main())
    assert seen == [("caller", True)]


def test_a_raising_callback_goes_to_the_loops_exception_handler_and_the_rest_run() -> None:
    """As asyncio reports its futures' callbacks, for a pending record's callbacks and for
    those added once resolved (before: logged, the loop's handler never told)."""
    p = offline_producer(1)
    order: list[str] = []
    reported: list[dict[str, Any]] = []

    def boom(fut: RecordFuture) -> None:
        order.append("boom")
        raise ValueError("callback bug")

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda loop, c: reported.append(c))
        futs = [await p.send("t", b"v", b"k%d" % i) for i in range(3)]
        futs[0].add_done_callback(lambda f: order.append("a"))
        futs[1].add_done_callback(boom)
        futs[1].add_done_callback(lambda f: order.append("b"))
        futs[2].add_done_callback(lambda f: order.append("c"))
        _complete_as_the_sender(_batches_of(futs))
        assert order == ["a", "boom", "b", "c"]
        futs[0].add_done_callback(boom)
        futs[0].add_done_callback(lambda f: order.append("d"))
        await asyncio.sleep(0)
        assert order == ["a", "boom", "b", "c", "boom", "d"]

    asyncio.run(main())
    assert [type(c["exception"]) for c in reported] == [ValueError, ValueError]
    assert all("boom" in c["message"] for c in reported)


def test_remove_done_callback_removes_equal_callbacks() -> None:
    """A bound method is a new object at each lookup; asyncio removes callbacks that are
    equal to the one given (before: only the same object, so none was removed)."""
    p = offline_producer(1)

    class Listener:
        def __init__(self) -> None:
            self.calls: list[RecordFuture] = []

        def on_done(self, fut: RecordFuture) -> None:
            self.calls.append(fut)

    listener = Listener()

    async def main() -> None:
        placed = await p.send("t", b"v", b"k")
        p._acc.settle(p._topics["t"].stage)
        staged = await p.send("t", b"v", b"k")
        for f in (staged, placed):
            f.add_done_callback(listener.on_done)
            f.add_done_callback(listener.on_done)
        assert staged._head.batches is None  # not placed yet
        for f in (staged, placed):
            assert f.remove_done_callback(listener.on_done) == 2
        _complete_as_the_sender(_batches_of([placed, staged]))
        assert listener.calls == []
        await asyncio.sleep(0)
        assert placed.remove_done_callback(listener.on_done) == 0  # resolved: nothing left

    asyncio.run(main())
    assert listener.calls == []


@pytest.mark.parametrize("log_append_time", [-1, 1_700_000_000_123])
def test_gather_wait_and_as_completed_give_each_records_outcome(log_append_time: int) -> None:
    """One partition's batch fails, the others succeed; one future is cancelled."""
    p = offline_producer(3)

    async def main() -> None:
        futs = [await p.send("t", b"v%d" % i, b"key-%d" % i) for i in range(30)]
        gathered = asyncio.gather(*futs, return_exceptions=True)
        waited = asyncio.ensure_future(asyncio.wait(futs))
        one_by_one = asyncio.as_completed(futs)
        batches = _batches_of(futs)
        failed = batches[0]
        err = ProduceError("refused")
        await asyncio.sleep(0)
        assert not any(f.done() for f in futs)
        _complete_as_the_sender([failed], err)
        _complete_as_the_sender(batches[1:], log_append_time=log_append_time)
        results = await gathered
        for f, res in zip(futs, results, strict=True):
            if f._batch is failed:
                assert res is err and f.exception() is err
            else:
                assert res == f.metadata() == f.result() and f.exception() is None
                assert res.offset == 10 * res.partition + f._index
                expected = log_append_time if log_append_time >= 0 else int(
                    f._timestamp * 1000)
                assert res.timestamp == expected
                assert res.serialized_key_size == len(b"key-%d" % futs.index(f))
        done, pending = await waited
        assert done == set(futs) and not pending
        outcomes = []
        for nxt in one_by_one:
            try:
                outcomes.append(await nxt)
            except ProduceError as e:
                outcomes.append(e)
        assert sorted(map(repr, outcomes)) == sorted(map(repr, results))
        with pytest.raises(ProduceError, match="refused"):
            await asyncio.gather(*futs)

    asyncio.run(main())


def test_gather_sees_a_cancelled_record_as_cancelled_and_its_callbacks_run_in_context() -> None:
    """gather(return_exceptions=True) reads a cancelled child's ``_cancel_message`` (before:
    AttributeError in its callback, and the gather never resolved)."""
    p = offline_producer(1)
    seen: list[tuple[bool, str]] = []

    async def main() -> None:
        fut = await p.send("t", b"v", b"k")
        other = await p.send("t", b"v", b"k2")
        var.set("adder")
        fut.add_done_callback(lambda f: seen.append((f.cancelled(), var.get())))
        var.set("main")
        gathered = asyncio.gather(fut, other, return_exceptions=True)
        assert fut.cancel("gave up") and not other.done()
        _complete_as_the_sender(_batches_of([other]))
        cancelled, md = await asyncio.wait_for(gathered, 10)
        assert isinstance(cancelled, asyncio.CancelledError)
        assert cancelled.args == ("gave up",)
        assert md == other.result() and md.offset == 1
        with pytest.raises(asyncio.CancelledError, match="gave up"):
            await asyncio.wait_for(asyncio.gather(fut, other), 10)

    asyncio.run(main())
    assert seen == [(True, "adder")]  # run by cancel(), in the context it was added in
