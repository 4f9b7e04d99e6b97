"""Waiting with a timeout, cancellable at every moment: on an :class:`asyncio.Event`, or on a
coroutine."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Iterable
from typing import Any, TypeVar

log = logging.getLogger("kontrakt.client")

__all__ = ["CANCEL_WAIT", "cancel_and_wait", "wait_event", "wait_within"]

_T = TypeVar("_T")

#: Seconds a close waits for background tasks it cancelled to end.
CANCEL_WAIT = 2.0


async def wait_event(event: asyncio.Event, timeout: float | None) -> bool:
    """Wait until ``event`` is set or ``timeout`` seconds pass (None: no limit).

    Returns:
        True when the event is set, False on timeout.

    Raises:
        asyncio.CancelledError: the waiting task was cancelled, always; this is why it exists.
            ``asyncio.wait_for(event.wait(), timeout)`` on Python < 3.12 returns normally when
            the cancellation arrives in the loop turn in which the event is set, so a
            background loop stopped with ``cancel()`` went on running and the ``close()``
            awaiting it never returned.
    """
    if event.is_set():
        return True
    if timeout is None:
        await event.wait()
        return True
    if timeout <= 0:
        return False
    waiter = asyncio.get_running_loop().create_task(event.wait())
    try:
        done, _ = await asyncio.wait((waiter,), timeout=timeout)
    finally:
        if not waiter.done():
            waiter.cancel()
    return bool(done)


async def wait_within(coro: Coroutine[Any, Any, _T], timeout: float) -> _T:
    """Run ``coro`` as a task and wait at most ``timeout`` seconds for its result; on
    timeout, or when the waiting task is cancelled, cancel it (without waiting for it).

    Raises:
        asyncio.TimeoutError: not done within ``timeout`` (it is then cancelled).
        asyncio.CancelledError: the waiting task was cancelled, always (where
            ``asyncio.wait_for`` on Python < 3.12 returns ``coro``'s result when the
            cancellation comes in the loop turn in which ``coro`` finishes; see wait_event).
        Whatever ``coro`` raises.
    """
    task = asyncio.get_running_loop().create_task(coro)
    try:
        done, _ = await asyncio.wait((task,), timeout=max(timeout, 0.0))
    except BaseException:
        # Cancelled while waiting: the outcome is nobody's now, even when the task ended in
        # this very turn (a closing client's request failing with "client is closed").
        _abandon(task)
        raise
    if not done:
        _abandon(task)
        raise asyncio.TimeoutError
    return task.result()


def _abandon(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` if it still runs, and retrieve its outcome either way, so that it is
    not reported as lost ("Task exception was never retrieved")."""
    if task.done():
        _retrieve(task)
    else:
        task.cancel()
        task.add_done_callback(_retrieve)


def _retrieve(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()


async def cancel_and_wait(tasks: Iterable[asyncio.Future[Any]],
                          timeout: float = CANCEL_WAIT) -> None:
    """Cancel ``tasks`` and wait at most ``timeout`` seconds for them to end (their
    outcomes, errors included, are nobody's), so that a close stays bounded.

    A task whose cancellation was swallowed (``asyncio.wait_for`` on Python < 3.12 can
    return normally when the cancellation comes in the turn its awaitable finishes) would
    otherwise keep a close waiting forever: it is left running and logged instead.
    """
    tasks = list(tasks)
    pending = [t for t in tasks if not t.done()]
    for t in pending:
        t.cancel()
    if pending:
        _, late = await asyncio.wait(pending, timeout=timeout)
        for t in late:
            log.warning("background task %r did not end within %.1fs of its cancellation",
                        t, timeout)
            t.add_done_callback(_retrieve)
    for t in tasks:
        if t.done() and not t.cancelled():
            t.exception()  # retrieved: not reported as never retrieved
