"""Waiting on an :class:`asyncio.Event` with a timeout, cancellable at every moment."""

from __future__ import annotations

import asyncio

__all__ = ["wait_event"]


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
