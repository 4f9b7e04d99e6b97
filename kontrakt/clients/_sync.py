"""The loop-thread bridge used by every sync class.

A :class:`LoopThread` owns a private asyncio event loop running in a daemon thread. Sync
classes submit coroutines to it and block on the result. Calling back into a sync object
from that loop thread (for example from inside a delivery callback) would deadlock, so it
raises :class:`~kontrakt.errors.IllegalStateError` instead.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from kontrakt.errors import IllegalStateError, KafkaTimeoutError

__all__ = ["LoopThread"]

T = TypeVar("T")


class LoopThread:
    """A daemon thread running an event loop.

    Args:
        name: the thread's name (shows in debuggers and logs).
    """

    def __init__(self, name: str = "kontrakt-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._ready.wait()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        try:
            self.loop.run_forever()
        finally:
            try:
                pending = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
                for t in pending:
                    t.cancel()
                if pending:
                    self.loop.run_until_complete(
                        asyncio.gather(*pending, return_exceptions=True))
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            finally:
                self.loop.close()

    @property
    def running(self) -> bool:
        return self._thread.is_alive() and not self.loop.is_closed()

    def in_loop_thread(self) -> bool:
        """True when called from the loop's own thread."""
        return threading.current_thread() is self._thread

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and block until it finishes.

        Args:
            timeout: seconds to wait; on expiry the coroutine is cancelled.

        Raises:
            IllegalStateError: called from the loop thread, or the loop has stopped.
            KafkaTimeoutError: ``timeout`` expired.
        """
        if self.in_loop_thread():
            coro.close()
            raise IllegalStateError(
                "a blocking Kontrakt call was made from the client's own event-loop thread "
                "(e.g. inside a callback); use the Async client there instead"
            )
        if not self.running:
            coro.close()
            raise IllegalStateError("client is closed")
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise KafkaTimeoutError(f"operation did not finish within {timeout}s") from None

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the loop and join the thread. Idempotent."""
        if self.in_loop_thread():
            raise IllegalStateError("cannot stop the loop thread from itself")
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
