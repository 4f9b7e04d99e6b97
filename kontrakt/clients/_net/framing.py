"""The byte stream of one broker connection, cut into response frames.

:class:`KafkaProtocol` is the transport's protocol of a
:class:`~kontrakt.clients._net.connection.BrokerConnection`: it reads into a buffer of its
own, cuts the stream into size-prefixed frames and hands each to the connection, and tells
the connection when the transport is lost.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import TYPE_CHECKING

from kontrakt.errors import CorruptMessageError, KafkaConnectionError, ProtocolError

if TYPE_CHECKING:
    from kontrakt.clients._net.connection import BrokerConnection

__all__ = ["KafkaProtocol"]

log = logging.getLogger("kontrakt.connection")

_SIZE = struct.Struct(">i")
#: a connection's read buffer; larger frames get one of their own size
_READ_BUFFER = 65536
#: a buffer grown for a large frame is dropped once empty if larger than this
_KEPT_BUFFER = 1 << 20


class KafkaProtocol(asyncio.BufferedProtocol):
    """Cuts the byte stream into response frames and hands each to its connection.

    A buffered protocol: the transport reads straight into this protocol's buffer. With a
    plain Protocol, asyncio allocates 256 KiB for every read and hands over a bytes copy;
    on a thread other than the main one (every sync client's I/O thread) glibc gives that
    memory back and takes it again on each read, ~17 us a response on this project's test
    machines (a sync send_and_wait's round trip: ~20-40 us).
    """

    __slots__ = ("_buf", "_can_write", "_used", "conn", "lost", "transport")

    def __init__(self, conn: BrokerConnection, loop: asyncio.AbstractEventLoop) -> None:
        self.conn = conn
        self.transport: asyncio.Transport | None = None
        self._buf = bytearray(_READ_BUFFER)
        #: bytes at the start of ``_buf`` read but not yet cut into frames
        self._used = 0
        self._can_write: asyncio.Event | None = None
        self.lost: asyncio.Future[None] = loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        # Never empty: buffer_updated grows the buffer for a frame that does not fit.
        return memoryview(self._buf)[self._used:]

    def buffer_updated(self, nbytes: int) -> None:
        buf = self._buf
        end = self._used + nbytes
        pos = 0
        limit = self.conn.settings.max_frame_bytes
        # Frames are copied out through a view: slicing the bytearray itself would copy each
        # frame twice (a bytearray slice, then bytes), which shows for multi-MB fetches.
        view = memoryview(buf)
        try:
            while end - pos >= 4:
                (size,) = _SIZE.unpack_from(buf, pos)
                if size < 4 or size > limit:
                    raise ProtocolError(
                        f"broker {self.conn.address} sent a frame of {size} bytes "
                        f"(limit {limit}, receive.message.max.bytes)")
                if end - pos - 4 < size:
                    break
                frame = view[pos + 4:pos + 4 + size].tobytes()
                pos += 4 + size
                self.conn._dispatch(frame)
        except (ProtocolError, CorruptMessageError) as exc:
            self.conn._shutdown(exc)
            return
        except Exception as exc:  # a bug must not leave requests waiting forever
            log.exception("failed to handle a response from %s", self.conn.address)
            self.conn._shutdown(ProtocolError(f"failed to handle a response: {exc!r}"))
            return
        finally:
            view.release()
        rest = end - pos
        if rest == 0:
            if len(buf) > _KEPT_BUFFER:
                self._buf = bytearray(_READ_BUFFER)  # a large frame's buffer is not kept
            self._used = 0
            return
        # The transport may still hold a view of ``buf`` (so it cannot be resized): a frame
        # larger than the buffer gets a new one; otherwise the partial frame moves to the
        # front (an assignment of the same length, which resizes nothing).
        if rest >= 4 and (need := _SIZE.unpack_from(buf, pos)[0] + 4) > len(buf):
            grown = bytearray(need)
            grown[:rest] = buf[pos:end]
            self._buf = grown
        elif pos:
            buf[:rest] = buf[pos:end]
        self._used = rest

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is None:
            err = KafkaConnectionError("connection closed by broker", broker=self.conn.address)
        else:
            err = KafkaConnectionError(f"connection lost: {exc}", broker=self.conn.address)
        self.conn._shutdown(err)
        if self._can_write is not None:
            self._can_write.set()
        if not self.lost.done():
            self.lost.set_result(None)

    def pause_writing(self) -> None:
        if self._can_write is None:
            self._can_write = asyncio.Event()
        self._can_write.clear()

    def resume_writing(self) -> None:
        if self._can_write is not None:
            self._can_write.set()

    async def drain(self) -> None:
        """Wait while the transport's write buffer is over its high-water mark."""
        ev = self._can_write
        if ev is not None and not ev.is_set():
            await ev.wait()
