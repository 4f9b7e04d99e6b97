"""One asyncio connection to one broker: framing, correlation ids, pipelining, timeouts.

A :class:`BrokerConnection` writes size-prefixed request frames and matches response frames
to requests by correlation id. Up to ``max_in_flight`` requests may be outstanding; further
callers wait for a slot. A single reader task decodes every response on the event loop and
completes the caller's future. Any framing violation (oversized frame, unknown correlation
id, truncated bytes) fails every outstanding request with a typed error and closes the
connection, so nothing hangs on a confused peer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kontrakt.errors import (
    CorruptMessageError,
    KafkaConnectionError,
    KafkaTimeoutError,
    ProtocolError,
    UnsupportedVersionError,
)
from kontrakt.protocol.codec import decode_struct
from kontrakt.protocol.headers import decode_response, encode_request
from kontrakt.protocol.messages import ApiVersionsRequest, ApiVersionsResponse
from kontrakt.protocol.spec import Request, Response

__all__ = ["BrokerConnection", "ConnectionSettings"]

log = logging.getLogger("kontrakt.connection")

_SIZE = struct.Struct(">i")
_ERR = struct.Struct(">h")
_UNSUPPORTED_VERSION = 35
_CLIENT_SOFTWARE_NAME = "kontrakt"
_API_VERSIONS_FIRST_TRY = 3


@dataclass(frozen=True, slots=True)
class ConnectionSettings:
    """How connections are made; shared by every connection of a client."""

    client_id: str = "kontrakt"
    request_timeout: float = 30.0
    connect_timeout: float = 10.0
    max_in_flight: int = 5
    max_frame_bytes: int = 100_000_000
    ssl_context: ssl.SSLContext | None = None
    sasl: Any = None  # a SASL authenticator; see kontrakt.clients._net.sasl
    client_software_version: str = "0.1.0"


class _Pending:
    __slots__ = ("future", "response_type", "sent_at", "version")

    def __init__(self, future: asyncio.Future[Response], response_type: type[Response],
                 version: int) -> None:
        self.future = future
        self.response_type = response_type
        self.version = version
        self.sent_at = time.monotonic()


def _decode(pending: _Pending, frame: bytes) -> Response:
    if (pending.response_type is ApiVersionsResponse and pending.version > 0
            and len(frame) >= 6 and _ERR.unpack_from(frame, 4)[0] == _UNSUPPORTED_VERSION):
        # A broker that does not know the ApiVersions version we sent answers in the v0
        # layout, listing the versions it does know; some add bytes after it.
        try:
            resp: Response = decode_struct(ApiVersionsResponse, 0, frame, 4, exact=False)
        except CorruptMessageError:
            # Some (librdkafka's mock cluster) write that list unreadably: the caller then
            # steps down one version at a time.
            resp = ApiVersionsResponse(error_code=_UNSUPPORTED_VERSION)
        return resp
    return decode_response(pending.response_type, pending.version, frame)[1]


class BrokerConnection:
    """A connection to one broker.

    Args:
        host, port: where the broker listens.
        node_id: the broker's id (negative for bootstrap connections).
        settings: timeouts, in-flight limit, TLS and SASL.

    Use :meth:`connect` once, then :meth:`send` concurrently from any task on the same loop.
    """

    def __init__(self, host: str, port: int, node_id: int, settings: ConnectionSettings) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        self.settings = settings
        self.api_versions: dict[int, tuple[int, int]] = {}
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._read_task: asyncio.Task[None] | None = None
        self._pending: dict[int, _Pending] = {}
        self._slots = asyncio.Semaphore(settings.max_in_flight)
        self._next_corr = 0
        self._closed_error: BaseException | None = None
        self._on_close: list[Callable[[BrokerConnection], None]] = []
        self.last_used = time.monotonic()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def __repr__(self) -> str:
        return f"<BrokerConnection node={self.node_id} {self.address}>"

    @property
    def connected(self) -> bool:
        return self._writer is not None and self._closed_error is None

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def on_close(self, callback: Callable[[BrokerConnection], None]) -> None:
        """Call ``callback(conn)`` once when the connection closes."""
        self._on_close.append(callback)

    async def connect(self) -> None:
        """Open the TCP (and TLS) connection, negotiate API versions and authenticate.

        Raises:
            KafkaConnectionError: the broker cannot be reached or the handshake failed.
            KafkaTimeoutError: it took longer than ``socket.connection.setup.timeout.ms``.
        """
        s = self.settings
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port, ssl=s.ssl_context,
                                        limit=1 << 20),
                s.connect_timeout,
            )
        except (OSError, ssl.SSLError) as exc:
            raise KafkaConnectionError(f"cannot connect: {exc}", broker=self.address) from exc
        except (asyncio.TimeoutError, TimeoutError):
            raise KafkaTimeoutError(
                f"connecting to {self.address} took longer than {s.connect_timeout}s"
            ) from None
        self._read_task = asyncio.get_running_loop().create_task(
            self._read_loop(), name=f"kontrakt-read-{self.address}"
        )
        try:
            await asyncio.wait_for(self._negotiate_versions(), s.connect_timeout)
            if s.sasl is not None:
                await asyncio.wait_for(s.sasl.authenticate(self), s.connect_timeout)
        except BaseException as exc:
            await self.close(exc if isinstance(exc, Exception) else None)
            if isinstance(exc, (asyncio.TimeoutError, TimeoutError)) and not isinstance(
                exc, KafkaTimeoutError
            ):
                raise KafkaTimeoutError(
                    f"handshake with {self.address} took longer than {s.connect_timeout}s"
                ) from None
            raise

    async def _negotiate_versions(self) -> None:
        # v3 is what every broker since Kafka 2.4 answers, and what librdkafka sends; v4 only
        # changes how brokers report unknown versions, and some brokers (librdkafka's mock
        # cluster) answer v4 with a malformed error reply.
        version = _API_VERSIONS_FIRST_TRY
        for _ in range(_API_VERSIONS_FIRST_TRY + 1):
            req = ApiVersionsRequest(
                client_software_name=_CLIENT_SOFTWARE_NAME,
                client_software_version=self.settings.client_software_version,
            )
            resp = await self.send(req, version=version)
            if resp.error_code == _UNSUPPORTED_VERSION and version > 0:
                # Retry with the highest ApiVersions version the broker listed, or one
                # lower when it listed nothing readable.
                theirs = {k.api_key: k for k in resp.api_keys}.get(ApiVersionsRequest.API_KEY)
                version = min(version - 1, theirs.max_version) if theirs else version - 1
                continue
            if resp.error_code != 0:
                raise KafkaConnectionError(
                    f"ApiVersions failed with error code {resp.error_code}", broker=self.address
                )
            self.api_versions = {
                k.api_key: (k.min_version, k.max_version) for k in resp.api_keys
            }
            return
        raise KafkaConnectionError("broker rejected every ApiVersions version",
                                   broker=self.address)

    def negotiate(self, request_type: type[Request], version: int | None = None) -> int:
        """The version to use for ``request_type``: the highest both sides support.

        Args:
            version: a version the caller insists on; checked, not changed.

        Raises:
            UnsupportedVersionError: the broker does not offer the API, or no common version.
        """
        ours = request_type.VALID_VERSIONS
        theirs = self.api_versions.get(request_type.API_KEY)
        if theirs is None:
            if request_type is ApiVersionsRequest:
                theirs = (0, ours.hi or ours.lo)
            else:
                raise UnsupportedVersionError(
                    f"broker {self.address} does not support {request_type.API_NAME}"
                )
        lo = max(ours.lo, theirs[0])
        hi = min(ours.hi if ours.hi is not None else theirs[1], theirs[1])
        if version is not None:
            if not lo <= version <= hi:
                raise UnsupportedVersionError(
                    f"{request_type.API_NAME} v{version} is not supported by both sides "
                    f"(client {ours}, broker {theirs[0]}-{theirs[1]})"
                )
            return version
        if lo > hi:
            raise UnsupportedVersionError(
                f"no common {request_type.API_NAME} version: client {ours}, "
                f"broker {theirs[0]}-{theirs[1]}"
            )
        return hi

    async def send(self, request: Request, *, version: int | None = None,
                   timeout: float | None = None, expect_response: bool = True) -> Any:
        """Send ``request`` and wait for its response.

        Args:
            version: the API version (default: negotiated).
            timeout: seconds to wait for the response (default: ``request.timeout.ms``).
            expect_response: False for requests the broker does not answer (Produce with
                acks=0); returns None once the frame is written.

        Raises:
            KafkaConnectionError: the connection is closed or breaks.
            KafkaTimeoutError: no response within ``timeout``; the connection is closed,
                because a late response would otherwise be matched to nothing.
            UnsupportedVersionError: no common version, or a field the version cannot carry.
        """
        if self._closed_error is not None or self._writer is None:
            raise KafkaConnectionError(
                f"connection is closed: {self._closed_error}", broker=self.address
            )
        if version is None:
            version = self.negotiate(type(request))
        timeout = self.settings.request_timeout if timeout is None else timeout
        self._next_corr = corr = (self._next_corr + 1) & 0x7FFFFFFF
        frame = encode_request(request, version, corr, self.settings.client_id)
        async with self._slots:
            writer = self._writer
            if self._closed_error is not None or writer is None:
                raise KafkaConnectionError(
                    f"connection is closed: {self._closed_error}", broker=self.address
                )
            fut: asyncio.Future[Response] | None = None
            if expect_response:
                fut = asyncio.get_running_loop().create_future()
                self._pending[corr] = _Pending(fut, type(request).RESPONSE_TYPE, version)
            self.last_used = time.monotonic()
            writer.write(frame)
            try:
                if writer.transport.get_write_buffer_size() > 1 << 20:
                    await writer.drain()
            except (OSError, ConnectionError) as exc:
                await self.close(exc)
                raise KafkaConnectionError(f"write failed: {exc}",
                                           broker=self.address) from exc
            if fut is None:
                return None
            try:
                return await asyncio.wait_for(asyncio.shield(fut), timeout)
            except (asyncio.TimeoutError, TimeoutError):
                err = KafkaTimeoutError(
                    f"{type(request).API_NAME} v{version} to {self.address} got no response "
                    f"within {timeout}s"
                )
                await self.close(err)
                raise err from None

    def send_nowait(self, request: Request, *, version: int,
                    expect_response: bool = True) -> asyncio.Future[Any] | None:
        """Write ``request`` now and return the future of its response, without waiting.

        For callers that pipeline requests and bound their own in-flight count (the
        producer's sender, which handles responses in a done-callback instead of a task per
        request). No in-flight slot is taken and no timeout applies: a caller that gives up
        on a late response must :meth:`close` the connection, as :meth:`send` does.

        Args:
            version: the API version (see :meth:`negotiate`).
            expect_response: False for Produce with acks=0; returns None.

        Returns:
            The response future (failed with KafkaConnectionError if the connection breaks).

        Raises:
            KafkaConnectionError: the connection is closed.
        """
        writer = self._writer
        if self._closed_error is not None or writer is None:
            raise KafkaConnectionError(
                f"connection is closed: {self._closed_error}", broker=self.address
            )
        self._next_corr = corr = (self._next_corr + 1) & 0x7FFFFFFF
        frame = encode_request(request, version, corr, self.settings.client_id)
        fut: asyncio.Future[Any] | None = None
        if expect_response:
            fut = asyncio.get_running_loop().create_future()
            self._pending[corr] = _Pending(fut, type(request).RESPONSE_TYPE, version)
        self.last_used = time.monotonic()
        writer.write(frame)
        return fut

    async def _read_loop(self) -> None:
        reader = self._reader
        assert reader is not None
        error: BaseException | None = None
        try:
            while True:
                head = await reader.readexactly(4)
                (size,) = _SIZE.unpack(head)
                if size < 4 or size > self.settings.max_frame_bytes:
                    raise ProtocolError(
                        f"broker {self.address} sent a frame of {size} bytes "
                        f"(limit {self.settings.max_frame_bytes}, receive.message.max.bytes)"
                    )
                frame = await reader.readexactly(size)
                (corr,) = _SIZE.unpack_from(frame, 0)
                pending = self._pending.pop(corr, None)
                if pending is None:
                    raise ProtocolError(
                        f"broker {self.address} answered unknown correlation id {corr}"
                    )
                if pending.future.done():
                    continue
                try:
                    resp = _decode(pending, frame)
                except CorruptMessageError as exc:
                    pending.future.set_exception(CorruptMessageError(
                        f"{exc} (from broker {self.address})"))
                    raise
                pending.future.set_result(resp)
        except asyncio.IncompleteReadError:
            error = KafkaConnectionError("connection closed by broker", broker=self.address)
        except (OSError, ConnectionError) as exc:
            error = KafkaConnectionError(f"connection lost: {exc}", broker=self.address)
        except (ProtocolError, CorruptMessageError) as exc:
            error = exc
        except asyncio.CancelledError:
            error = KafkaConnectionError("connection closed", broker=self.address)
        if self._closed_error is None:
            await self.close(error)

    async def close(self, error: BaseException | None = None) -> None:
        """Close the connection; outstanding requests fail with ``error`` (or a
        KafkaConnectionError)."""
        if self._closed_error is not None:
            return
        err = error if error is not None else KafkaConnectionError(
            "connection closed", broker=self.address)
        if not isinstance(err, Exception):
            err = KafkaConnectionError("connection closed", broker=self.address)
        self._closed_error = err
        pending, self._pending = self._pending, {}
        for p in pending.values():
            if not p.future.done():
                if isinstance(err, (KafkaConnectionError, KafkaTimeoutError)):
                    p.future.set_exception(err)
                else:
                    p.future.set_exception(
                        KafkaConnectionError(f"connection failed: {err}", broker=self.address)
                    )
                # Retrieve to avoid "exception never retrieved" for abandoned futures.
                p.future.exception()
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._writer.wait_closed(), 1.0)
        task = self._read_task
        if task is not None and task is not asyncio.current_task() and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        for cb in self._on_close:
            try:
                cb(self)
            except Exception:  # pragma: no cover - callbacks are internal
                log.exception("close callback failed")
        self._on_close.clear()
        log.debug("closed %r: %s", self, err)


_ = ApiVersionsResponse
