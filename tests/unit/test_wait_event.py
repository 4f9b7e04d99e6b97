"""wait_event and wait_within: timed waits on an asyncio.Event or a coroutine that never
swallow a cancellation; cancel_and_wait: a close's bounded wait for tasks it cancels."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable

import pytest

from kontrakt.clients._wait import cancel_and_wait, wait_event, wait_within

Waiter = Callable[[asyncio.Event, float], Awaitable[object]]


async def _wait_for(event: asyncio.Event, timeout: float) -> object:
    with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
        await asyncio.wait_for(event.wait(), timeout)
    return None


async def _loop_until_cancelled(wait: Waiter, event: asyncio.Event, turns: list[int]) -> None:
    # The shape of every background loop in the clients: wait for a wake-up, do a turn.
    for _ in range(50):
        await wait(event, 10.0)
        event.clear()
        turns.append(1)


async def _cancel_as_event_is_set(wait: Waiter) -> bool:
    """True when the loop task ends cancelled after a cancel() sent in the loop turn in
    which its event is set (what the producer's close() does to its sender)."""
    event = asyncio.Event()
    turns: list[int] = []
    task = asyncio.get_running_loop().create_task(_loop_until_cancelled(wait, event, turns))
    for _ in range(3):
        await asyncio.sleep(0)
    event.set()
    task.cancel()
    done, _ = await asyncio.wait((task,), timeout=1.0)
    if not done:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return False
    return task.cancelled()


def test_cancel_in_the_turn_the_event_is_set_is_not_lost() -> None:
    assert asyncio.run(_cancel_as_event_is_set(wait_event))


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="wait_for was fixed in 3.12")
def test_the_wait_for_bug_it_replaces_is_real_here() -> None:
    # If this starts passing on 3.10/3.11, the stdlib changed and wait_event is just a
    # cheaper spelling; until then it shows the test above can fail.
    assert not asyncio.run(_cancel_as_event_is_set(_wait_for))


def test_results() -> None:
    async def main() -> None:
        ev = asyncio.Event()
        assert await wait_event(ev, 0) is False
        assert await wait_event(ev, 0.01) is False
        loop = asyncio.get_running_loop()
        loop.call_later(0.01, ev.set)
        assert await wait_event(ev, 5.0) is True
        assert await wait_event(ev, 0) is True  # already set
        ev.clear()
        loop.call_later(0.01, ev.set)
        assert await wait_event(ev, None) is True
        # No task is left behind after a timeout.
        ev.clear()
        before = len(asyncio.all_tasks())
        await wait_event(ev, 0.01)
        await asyncio.sleep(0)
        assert len(asyncio.all_tasks()) == before

    asyncio.run(main())


def test_plain_cancel_while_waiting() -> None:
    async def main() -> None:
        ev = asyncio.Event()
        task = asyncio.get_running_loop().create_task(wait_event(ev, 10.0))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0)
        assert asyncio.all_tasks() == {asyncio.current_task()}

    asyncio.run(main())


async def _within(event: asyncio.Event, timeout: float) -> object:
    return await wait_within(event.wait(), timeout)


def test_wait_within_never_loses_a_cancel_sent_as_its_coroutine_finishes() -> None:
    # The producer's sender waits so for a producer id and for connections: a cancel from
    # close() must stop it (asyncio.wait_for lost it, and close() hung; see above).
    assert asyncio.run(_cancel_as_event_is_set(_within))


def test_wait_within_results() -> None:
    async def main() -> None:
        async def answer(delay: float) -> int:
            await asyncio.sleep(delay)
            return 42

        async def fail() -> None:
            raise KeyError("x")

        assert await wait_within(answer(0), 5.0) == 42
        with pytest.raises(KeyError):
            await wait_within(fail(), 5.0)
        before = len(asyncio.all_tasks())
        with pytest.raises(asyncio.TimeoutError):
            await wait_within(answer(10), 0.01)
        with pytest.raises(asyncio.TimeoutError):
            await wait_within(answer(10), -1)  # a deadline already past
        await asyncio.sleep(0)
        assert len(asyncio.all_tasks()) == before  # the timed-out ones were cancelled

    asyncio.run(main())


def test_cancel_and_wait_is_bounded_by_a_task_that_swallows_its_cancellation(
        caplog: pytest.LogCaptureFixture) -> None:
    """A background task that goes on after its cancellation (as one awaiting
    asyncio.wait_for could, before Python 3.12) used to keep the consumer's and the client's
    close() waiting forever (seen once in CI: a Spark planner's consumer close hung past the
    test timeout); now the close goes on after the bound, and says which task was left."""
    async def stubborn(stop: asyncio.Event) -> None:
        while not stop.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(10)

    async def ordinary() -> None:
        await asyncio.sleep(10)

    async def failed() -> None:
        raise KeyError("x")

    async def main() -> float:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        tasks = [loop.create_task(stubborn(stop)), loop.create_task(ordinary()),
                 loop.create_task(failed())]
        await asyncio.sleep(0)
        start = loop.time()
        await cancel_and_wait(tasks, timeout=0.2)
        took = loop.time() - start
        assert not tasks[0].done() and tasks[1].cancelled() and tasks[2].done()
        stop.set()
        tasks[0].cancel()
        await asyncio.wait([tasks[0]], timeout=5)
        return took

    with caplog.at_level("WARNING", logger="kontrakt.client"):
        took = asyncio.run(main())
    assert 0.2 <= took < 2.0
    assert "did not end within 0.2s of its cancellation" in caplog.text


def test_wait_within_retrieves_a_failure_that_ends_with_its_cancel() -> None:
    """The task fails in the very turn its waiter is cancelled (a closing client's request
    failing with "client is closed"): its exception is retrieved, not reported as lost."""
    reported: list[dict[str, object]] = []

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, ctx: reported.append(ctx))
        go = asyncio.Event()

        async def fail_on_go() -> None:
            await go.wait()
            raise RuntimeError("client is closed")

        waiter = asyncio.create_task(wait_within(fail_on_go(), 5.0))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        go.set()  # the inner task fails on the next turn ...
        waiter.cancel()  # ... the turn in which its waiter sees the cancel
        with pytest.raises(asyncio.CancelledError):
            await waiter
        for _ in range(3):
            await asyncio.sleep(0)

    asyncio.run(main())
    import gc

    gc.collect()
    assert not [r for r in reported if "never retrieved" in str(r.get("message"))], reported
