"""A TCP forwarder on 127.0.0.1 standing in for a bootstrap name or load balancer: every
connection made to it is piped to the port it currently points at, which the test changes
(:meth:`Forwarder.point_at`), as DNS or a load balancer would send new connections to new
brokers after a cluster was replaced.

It runs on an event loop of its own in a daemon thread (sync clients block the test's
thread), holds at most ``max_connections`` pipes, and :meth:`Forwarder.close` ends them all
and the thread, bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

__all__ = ["Forwarder"]

_CHUNK = 65536


class Forwarder:
    """Pipes each new connection to ``127.0.0.1:<target>``.

    Args:
        target: the port new connections go to (see :meth:`point_at`).
        max_connections: pipes open at once; a connection past that is closed at once.

    Attributes:
        port: where it listens.
        accepted: connections accepted so far.
    """

    def __init__(self, target: int, *, max_connections: int = 64) -> None:
        self.target = target
        self.max_connections = max_connections
        self.accepted = 0
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        #: every stream writer it opened or accepted and has not seen closed
        self._writers: set[asyncio.StreamWriter] = set()
        self._thread = threading.Thread(target=self._loop.run_forever,
                                        name="test-forwarder", daemon=True)
        self._thread.start()
        self._run(self._start())

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def point_at(self, target: int) -> None:
        """Send connections made from now on to ``target``; open pipes are left alone (the
        old broker's end closes them when it goes)."""
        self.target = target

    def close(self) -> None:
        """Stop listening, end every pipe and the thread (bounded). Idempotent."""
        if self._loop.is_closed():
            return
        with contextlib.suppress(TimeoutError, RuntimeError):
            self._run(self._stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> Forwarder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- on the forwarder's loop ------------------------------------------------------

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=10)

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._pipes):
            task.cancel()
        if self._pipes:
            await asyncio.wait(list(self._pipes), timeout=2)
        # A pipe that outlived its cancellation (Python 3.11's wait_for returns a finished
        # connect's result instead of raising), or whose close is still scheduled: abort
        # its sockets now and let the loop run their close callbacks, so that no transport
        # is left open when the loop stops (a ResourceWarning at a later collection).
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        await asyncio.wait_for(self._server.wait_closed(), 2)

    async def _accept(self, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self._writers.add(writer)
        task = asyncio.current_task()
        if len(self._pipes) >= self.max_connections or task is None:
            writer.close()
            self._writers.discard(writer)
            return
        self._pipes.add(task)
        try:
            try:
                up_reader, up_writer = await asyncio.wait_for(
                    asyncio.open_connection("127.0.0.1", self.target), 5)
            except (OSError, asyncio.TimeoutError):
                return  # nothing listens there: the client sees its connection close
            self._writers.add(up_writer)
            try:
                await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
            finally:
                up_writer.close()
                self._writers.discard(up_writer)
        finally:
            writer.close()
            self._writers.discard(writer)
            self._pipes.discard(task)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until either side ends, then close the writing side (so that the other
    direction's reader ends too)."""
    try:
        while True:
            data = await reader.read(_CHUNK)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()
