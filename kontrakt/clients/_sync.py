"""The loop-thread bridge used by every sync class.

A :class:`LoopThread` owns a private asyncio event loop running in a daemon thread. Sync
classes submit coroutines to it and block on the result. Calling back into a sync object
from that loop thread (for example from inside a delivery callback) would deadlock, so it
raises :class:`~kontrakt.errors.IllegalStateError` instead.

Lifetime. A sync client holds its LoopThread and its async core; nothing the loop runs may
hold the sync client itself (callbacks the core keeps are bound to small helper objects, or
go through :func:`weak_method`), so a client the application drops without ``close()`` is
garbage-collected like any other object. :meth:`LoopThread.attach` ties the thread to that
owner with a :class:`weakref.finalize`: once the owner is collected, its async close runs on
the loop (bounded by :data:`UNCLOSED_CLOSE_TIMEOUT`) and the loop thread ends, which closes
the sockets and stops the I/O. The finalizer does not block the thread that happens to run
the garbage collector (it may be the loop thread itself). At interpreter exit, an ``atexit``
hook closes every client still open the same way and waits for them (all together, at most
:data:`UNCLOSED_CLOSE_TIMEOUT` plus a little): daemon threads are killed at exit, so without
it a producer's buffered records would vanish without a word.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import logging
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol, TypeVar

from kontrakt.errors import IllegalStateError, KafkaTimeoutError

__all__ = ["UNCLOSED_CLOSE_TIMEOUT", "BackgroundStart", "LoopThread", "close_sync",
           "ensure_started", "wait_done", "weak_method"]

log = logging.getLogger("kontrakt.client")

T = TypeVar("T")

#: Seconds the close of a client nobody closed may take (garbage-collected, or still open at
#: interpreter exit): a producer gets this long to deliver what it buffered.
UNCLOSED_CLOSE_TIMEOUT = 5.0
#: Beyond a close's own timeout: what stopping the loop and joining its thread may take.
_STOP_SLACK = 1.0

#: Loop threads with an attached owner (see LoopThread.attach), for the exit hook.
_attached: weakref.WeakSet[LoopThread] = weakref.WeakSet()


class LoopThread:
    """A daemon thread running an event loop.

    Args:
        name: the thread's name (shows in debuggers and logs).
    """

    def __init__(self, name: str = "kontrakt-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._finalizer: weakref.finalize[Any, Any] | None = None
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
        # cancel() fails only when the coroutine finished meanwhile: then its outcome stands.
        if not wait_done(fut, timeout) and fut.cancel():
            raise KafkaTimeoutError(f"operation did not finish within {timeout}s")
        return fut.result()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the loop and join the thread (waiting up to ``timeout`` seconds). Idempotent.
        A client closed this way needs no finalizer any more."""
        if self.in_loop_thread():
            raise IllegalStateError("cannot stop the loop thread from itself")
        if self._finalizer is not None:
            self._finalizer.detach()
        if not self.loop.is_closed():
            try:
                self.loop.call_soon_threadsafe(self.loop.stop)
            except RuntimeError:  # closed meanwhile by the thread itself
                pass
        self._thread.join(timeout)

    # --- lifetime -----------------------------------------------------------------------

    def attach(self, owner: object,
               close: Callable[[float], Coroutine[Any, Any, object]]) -> None:
        """Close and stop this loop thread when ``owner`` is garbage-collected unclosed, or
        is still open at interpreter exit.

        Args:
            owner: the sync client this thread serves. Neither this thread nor ``close``
                may hold a strong reference to it (or it is never collected).
            close: ``close(timeout)`` returns the coroutine that closes the owner's async
                core within ``timeout`` seconds (it runs on the loop, after the owner is
                gone).
        """
        fin = weakref.finalize(owner, self.close_soon, close, UNCLOSED_CLOSE_TIMEOUT)
        # The exit hook below handles exit, and waits for the close: finalize's own exit
        # handling would call close_soon, which does not wait.
        fin.atexit = False
        self._finalizer = fin
        _attached.add(self)
        # Exit hooks run last-registered first: registered again now, after
        # weakref.finalize's own (set up by the first finalize ever made), the close runs
        # while the finalizers of what the client uses (e.g. the producer sender's eventfd,
        # closed by one) have not run yet.
        atexit.unregister(_close_all_at_exit)
        atexit.register(_close_all_at_exit)

    def close_soon(self, close: Callable[[float], Coroutine[Any, Any, object]],
                   timeout: float) -> None:
        """Run ``close(timeout)`` on the loop, then stop the loop; returns at once (safe to
        call from the loop thread or from a finalizer). What ``close`` raises is logged."""
        if not self.running:
            return
        loop = self.loop

        async def shut() -> None:
            try:
                # close is told its timeout; the margin here only guards against a close
                # that overruns it.
                await asyncio.wait_for(close(timeout), timeout + _STOP_SLACK)
            except Exception:
                log.warning("closing an unclosed %s client failed", self._thread.name,
                            exc_info=True)
            finally:
                loop.stop()

        try:
            loop.call_soon_threadsafe(loop.create_task, shut())
        except RuntimeError:  # the loop closed meanwhile
            pass

    def join(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the thread to end; True when it has."""
        self._thread.join(max(timeout, 0.0))
        return not self._thread.is_alive()


def wait_done(fut: concurrent.futures.Future[Any], timeout: float | None) -> bool:
    """Wait up to ``timeout`` seconds (None: no limit) for ``fut``; True once it is done.

    Blocking callers wait with this, then take ``fut.result()``, instead of catching
    ``concurrent.futures.TimeoutError`` around ``fut.result(timeout)``: since Python 3.11
    that name is the builtin ``TimeoutError``, which ``KafkaTimeoutError`` subclasses, so
    such a catch would also swallow the operation's own timeout error and its message.
    """
    done, _ = concurrent.futures.wait((fut,), timeout)
    return bool(done)


def weak_method(method: Callable[..., T],
                dead: Callable[..., T]) -> Callable[..., T]:
    """``method`` (a bound method) without a strong reference to its object: calls go to
    ``dead`` (same arguments) once the object is gone. For callbacks that a sync client
    hands its async core, which the loop thread keeps alive."""
    ref = weakref.WeakMethod(method)

    def call(*args: Any, **kwargs: Any) -> T:
        bound = ref()
        if bound is None:
            return dead(*args, **kwargs)
        return bound(*args, **kwargs)

    return call


class _Startable(Protocol):
    _started: bool

    def start(self) -> Coroutine[Any, Any, None]: ...


async def ensure_started(client: _Startable, aw: Coroutine[Any, Any, T]) -> T:
    """Start ``client`` (an AsyncKafkaClient) if it is not yet, as a sync client's first
    call does, then await ``aw``; ``aw`` is closed unawaited when the start fails."""
    try:
        if not client._started:
            await client.start()
    except BaseException:
        aw.close()
        raise
    return await aw


class _Closable(Protocol):
    _closed: bool

    def start(self) -> Coroutine[Any, Any, None]: ...


class BackgroundStart:
    """A sync client's start (connecting, loading metadata), run on its loop thread in the
    background so that the constructor returns at once: one attempt at a time, and a new one
    when a caller asks after an attempt failed or was cancelled.

    Args:
        thread: the client's loop thread.
        client: its async core (holds no reference to the sync client, see the module doc).
    """

    def __init__(self, thread: LoopThread, client: _Closable) -> None:
        self._thread = thread
        self._client = client
        self._lock = threading.Lock()
        self._future: concurrent.futures.Future[None] | None = None

    def attempt(self) -> concurrent.futures.Future[None]:
        """The start in progress, or a new one when there is none (or the last failed)."""
        with self._lock:
            fut = self._future
            if fut is None or (fut.done() and (fut.cancelled() or fut.exception())):
                self._future = fut = asyncio.run_coroutine_threadsafe(
                    _start_quietly(self._client), self._thread.loop)
            return fut

    @property
    def pending(self) -> bool:
        """An attempt is in progress."""
        fut = self._future
        return fut is not None and not fut.done()

    def cancel(self) -> None:
        """Abandon an unfinished start (on close); no-op when it is done."""
        fut = self._future
        if fut is not None:
            fut.cancel()


async def _start_quietly(client: _Closable) -> None:
    try:
        await client.start()
    except Exception:
        if not client._closed:
            raise
        # Abandoned by close() (the error is only what the closing did to it): whoever
        # waits is told the client is closed, and no error is left unretrieved.


def close_sync(thread: LoopThread, close: Callable[[float | None], Awaitable[object]],
               timeout: float | None) -> None:
    """Close a sync client: run ``close(timeout)`` on its loop thread, then stop the thread,
    within about ``timeout`` seconds in all (None: as long as ``close`` takes). Idempotent."""
    if not thread.running:
        return
    try:
        thread.run(_awaited(close(timeout)), None if timeout is None else timeout + 0.5)
    finally:
        thread.stop(5.0 if timeout is None else 0.5)


async def _awaited(aw: Awaitable[T]) -> T:
    return await aw


def _close_all_at_exit() -> None:
    """Close every client still open at interpreter exit; wait for all of them together at
    most UNCLOSED_CLOSE_TIMEOUT (+ slack)."""
    threads = []
    for thread in list(_attached):
        fin = thread._finalizer
        # Not fin(): weakref.finalize's own exit hook (registered after this one, so run
        # before it) has made every finalizer call a no-op by now.
        info = fin.detach() if fin is not None else None
        if info is not None and thread.running:
            _, func, args, _ = info
            func(*args)
            threads.append(thread)
    deadline = time.monotonic() + UNCLOSED_CLOSE_TIMEOUT + _STOP_SLACK
    for thread in threads:
        if not thread.join(deadline - time.monotonic()):
            log.warning("a Kontrakt client (%s) still open at exit did not finish closing "
                        "within %ss", thread._thread.name, UNCLOSED_CLOSE_TIMEOUT)

