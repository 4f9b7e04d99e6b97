"""Waiting with a timeout, cancellable at every moment: on an :class:`asyncio.Event`, or on a
coroutine."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["wait_event", "wait_within"]

_T = TypeVar("_T")


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
    finally:
        if not task.done():
            task.cancel()
            # Its outcome is nobody's now: retrieved, so that it is not reported as lost.
            task.add_done_callback(_retrieve)
    if not done:
        raise asyncio.TimeoutError
    return task.result()


def _retrieve(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()
