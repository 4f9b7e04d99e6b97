"""One asyncio connection to one broker: framing, correlation ids, pipelining, timeouts.

A :class:`BrokerConnection` writes size-prefixed request frames and matches response frames
to requests by correlation id. Up to ``max_in_flight`` requests may be outstanding; further
callers wait for a slot. The transport reads into the connection's buffer; responses are cut
into frames and decoded in its ``buffer_updated`` callback, which completes the caller's
future directly: no reader task, so no extra event-loop turn per response. Any framing
violation (oversized frame, unknown correlation id, truncated bytes) fails every outstanding
request with a typed error and closes the connection, so nothing hangs on a confused peer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from kontrakt.clients._net.framing import KafkaProtocol
from kontrakt.clients._net.plaintext_probe import open_tls
from kontrakt.clients._net.security import tls_error, tls_handshake_failed
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
#: SaslHandshake and SaslAuthenticate: the only requests written while re-authenticating
_SASL_API_KEYS = frozenset({17, 36})
#: re-authenticate at this fraction of the session lifetime the broker set (librdkafka's)
_REAUTH_AT = 0.9
_REAUTH_MARGIN = 1.0

_T = TypeVar("_T")


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
    __slots__ = ("callback", "decode", "future", "response_type", "version")

    def __init__(self, future: asyncio.Future[Response], response_type: type[Response] | None,
                 version: int, callback: Callable[[asyncio.Future[Any]], None] | None,
                 decode: Callable[[bytes], Any] | None = None) -> None:
        self.future = future
        self.response_type = response_type
        self.version = version
        self.callback = callback
        #: the caller's own decoder of the response frame (send_encoded_nowait)
        self.decode = decode

    def resolved(self) -> None:
        # Run right where the future is resolved rather than from the future's own
        # callbacks, which cost a turn of the event loop: the producer's response path.
        callback = self.callback
        if callback is not None:
            self.callback = None
            try:
                callback(self.future)
            except Exception:  # the caller's bug must not break the connection
                log.exception("a response callback raised")


def _decode(pending: _Pending, frame: bytes) -> Any:
    if pending.decode is not None:
        return pending.decode(frame)
    assert pending.response_type is not None
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
        self._proto: KafkaProtocol | None = None
        self._transport: asyncio.Transport | None = None
        #: the loop the connection was opened on: asyncio.get_running_loop() costs a getpid()
        #: system call each time, which request writes would pay once per request
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: dict[int, _Pending] = {}
        self._slots = asyncio.Semaphore(settings.max_in_flight)
        self._next_corr = 0
        self._closed_error: BaseException | None = None
        self._on_close: list[Callable[[BrokerConnection], None]] = []
        #: while re-authenticating (KIP-368): frames of other requests, written after it
        self._held: list[bytes] | None = None
        self._reauth_timer: asyncio.TimerHandle | None = None
        self._reauth_task: asyncio.Task[None] | None = None
        #: in-band re-authentications completed on this connection
        self.reauthentications = 0

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def __repr__(self) -> str:
        return f"<BrokerConnection node={self.node_id} {self.address}>"

    @property
    def connected(self) -> bool:
        return self._transport is not None and self._closed_error is None

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
        loop = asyncio.get_running_loop()
        proto = KafkaProtocol(self, loop)
        opening = loop.create_connection(lambda: proto, self.host, self.port, ssl=s.ssl_context,
                                         server_hostname=self.host if s.ssl_context else None)
        try:
            if s.ssl_context is None:
                transport, _ = await asyncio.wait_for(opening, s.connect_timeout)
            else:
                # Fails at once when the port turns out to be a plaintext Kafka listener.
                transport, _ = await open_tls(opening, self.host, self.port, s.connect_timeout)
        # Timeouts first: since Python 3.11 asyncio's TimeoutError is the builtin one, an
        # OSError with an empty message.
        except (asyncio.TimeoutError, TimeoutError):
            if s.ssl_context is not None:
                raise tls_error(self.address, None, s.connect_timeout) from None
            raise KafkaTimeoutError(
                f"connecting to {self.address} took longer than {s.connect_timeout}s"
            ) from None
        except (OSError, ssl.SSLError) as exc:
            if s.ssl_context is not None and tls_handshake_failed(exc):
                raise tls_error(self.address, exc) from exc
            raise KafkaConnectionError(f"cannot connect: {exc or type(exc).__name__}",
                                       broker=self.address) from exc
        assert isinstance(transport, asyncio.Transport)
        self._loop = loop
        self._proto = proto
        self._transport = transport
        try:
            await asyncio.wait_for(self._negotiate_versions(), s.connect_timeout)
            if s.sasl is not None:
                lifetime = await asyncio.wait_for(s.sasl.authenticate(self), s.connect_timeout)
                self._schedule_reauth(lifetime)
        except BaseException as exc:
            await self.close(exc if isinstance(exc, Exception) else None)
            if isinstance(exc, (asyncio.TimeoutError, TimeoutError)) and not isinstance(
                exc, KafkaTimeoutError
            ):
                raise KafkaTimeoutError(
                    f"handshake with {self.address} took longer than {s.connect_timeout}s"
                ) from None
            raise

    def _schedule_reauth(self, lifetime_ms: int | None) -> None:
        """Re-authenticate before the session lifetime the broker set ends (KIP-368): a
        broker with connections.max.reauth.ms closes a connection whose session lapsed.

        At 90% of it (librdkafka's choice), but at least a second before it ends, for the
        requests written before the re-authentication to be answered first (a broker reads
        the next request of a connection only after answering the one before); never
        before half of it.
        """
        if not lifetime_ms or lifetime_ms <= 0 or self._closed_error is not None:
            return
        lifetime = lifetime_ms / 1000
        delay = max(lifetime / 2, min(lifetime * _REAUTH_AT, lifetime - _REAUTH_MARGIN))
        self._reauth_timer = asyncio.get_running_loop().call_later(delay, self._begin_reauth)

    def _begin_reauth(self) -> None:
        self._reauth_timer = None
        if self._closed_error is not None:
            return
        # From here, other requests' frames wait in _held: a broker reads every frame after
        # SaslHandshake as part of the exchange until it ends. Requests already written are
        # answered first (a broker handles a connection's requests in order).
        self._held = []
        self._reauth_task = asyncio.get_running_loop().create_task(
            self._reauthenticate(), name=f"kontrakt-reauth-{self.address}")

    async def _reauthenticate(self) -> None:
        s = self.settings
        try:
            lifetime = await asyncio.wait_for(s.sasl.authenticate(self), s.request_timeout)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            log.warning("re-authentication with %s failed: %s", self.address, exc)
            self._shutdown(exc if isinstance(exc, KafkaConnectionError) else
                           KafkaConnectionError(f"re-authentication failed: {exc!r}",
                                                broker=self.address))
            return
        finally:
            self._reauth_task = None
        held, self._held = self._held, None
        if held and self._transport is not None and self._closed_error is None:
            self._transport.write(b"".join(held))
        self.reauthentications += 1
        log.debug("re-authenticated with %s; next session lasts %s ms", self.address, lifetime)
        self._schedule_reauth(lifetime)

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

    def _closed(self) -> KafkaConnectionError:
        return KafkaConnectionError(f"connection is closed: {self._closed_error}",
                                    broker=self.address)

    def _write(self, request: Request, version: int, expect_response: bool,
               callback: Callable[[asyncio.Future[Any]], None] | None = None,
               ) -> asyncio.Future[Any] | None:
        corr = self._correlation_id()
        frame = encode_request(request, version, corr, self.settings.client_id)
        fut: asyncio.Future[Any] | None = None
        pending = None
        if expect_response:
            fut = (self._loop or asyncio.get_running_loop()).create_future()
            pending = _Pending(fut, type(request).RESPONSE_TYPE, version, callback)
        self._put(corr, frame, type(request).API_KEY, pending)
        return fut

    def _correlation_id(self) -> int:
        """The next request's correlation id.

        Raises:
            KafkaConnectionError: the connection is closed.
        """
        if self._closed_error is not None or self._transport is None:
            raise self._closed()
        self._next_corr = corr = (self._next_corr + 1) & 0x7FFFFFFF
        return corr

    def _put(self, corr: int, frame: bytes, api_key: int, pending: _Pending | None) -> None:
        """Write a request's ``frame`` (held while re-authenticating) and await its answer
        by ``pending``, if one comes."""
        if pending is not None:
            self._pending[corr] = pending
        if self._held is not None and api_key not in _SASL_API_KEYS:
            self._held.append(frame)
        else:
            self._transport.write(frame)  # type: ignore[union-attr]  # checked by the caller

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
        if self._closed_error is not None or self._transport is None:
            raise self._closed()
        if version is None:
            version = self.negotiate(type(request))
        timeout = self.settings.request_timeout if timeout is None else timeout
        # A re-authentication's requests take no in-flight slot: held requests may hold
        # them all until it ends.
        slot: contextlib.AbstractAsyncContextManager[Any] = (
            contextlib.nullcontext() if type(request).API_KEY in _SASL_API_KEYS else self._slots)
        async with slot:
            fut = self._write(request, version, expect_response)
            proto = self._proto
            if proto is not None:
                await proto.drain()
            if fut is None:
                return None
            # A timer instead of wait_for: no task per request.
            timer = asyncio.get_running_loop().call_later(
                timeout, self._expire, fut, type(request).API_NAME, version, timeout)
            try:
                return await fut
            finally:
                timer.cancel()

    def _expire(self, fut: asyncio.Future[Any], api: str, version: int,
                timeout: float) -> None:
        if fut.done():
            return
        fut.set_exception(KafkaTimeoutError(
            f"{api} v{version} to {self.address} got no response within {timeout}s"))
        # A late answer would be matched to nothing: drop the connection.
        self._shutdown(KafkaConnectionError(
            f"connection closed after a {api} request timed out", broker=self.address))

    def send_nowait(self, request: Request, *, version: int, expect_response: bool = True,
                    callback: Callable[[asyncio.Future[Any]], None] | None = None,
                    ) -> asyncio.Future[Any] | None:
        """Write ``request`` now and return the future of its response, without waiting.

        For callers that pipeline requests and bound their own in-flight count (the
        producer's sender, which handles responses in a done-callback instead of a task per
        request). No in-flight slot is taken and no timeout applies: a caller that gives up
        on a late response must :meth:`close` the connection, as :meth:`send` does.

        Args:
            version: the API version (see :meth:`negotiate`).
            expect_response: False for Produce with acks=0; returns None.
            callback: ``callback(future)`` runs once the future is resolved (with the
                response, or failed), called directly by the connection in the same loop
                turn instead of as a done-callback one turn later. It must not raise
                (what it raises is logged) and must not block.

        Returns:
            The response future (failed with KafkaConnectionError if the connection breaks).

        Raises:
            KafkaConnectionError: the connection is closed.
        """
        return self._write(request, version, expect_response, callback)

    def send_encoded_nowait(self, api_key: int, encode: Callable[[int, _T], bytes], data: _T,
                            decode: Callable[[bytes], Any] | None,
                            callback: Callable[[asyncio.Future[Any]], None] | None = None,
                            ) -> asyncio.Future[Any] | None:
        """:meth:`send_nowait` for a request the caller encodes itself (the producer's
        Produce requests, see ``kontrakt.protocol.produce``): the same contract, without a
        request object or a codec lookup.

        Args:
            api_key: the request's API key.
            encode: ``encode(correlation_id, data)`` returns the whole request frame, size
                prefix and header included (the header with this connection's client id).
            decode: ``decode(frame)`` returns the response from its frame (without size
                prefix, starting at the correlation id), or raises CorruptMessageError;
                None when no response comes (Produce with acks=0): returns None.
            callback: as for :meth:`send_nowait`.

        Returns:
            The response future (its result what ``decode`` returned), or None.

        Raises:
            KafkaConnectionError: the connection is closed.
        """
        # (_correlation_id and _put, inline: once per Produce request)
        if self._closed_error is not None or self._transport is None:
            raise self._closed()
        self._next_corr = corr = (self._next_corr + 1) & 0x7FFFFFFF
        frame = encode(corr, data)
        fut: asyncio.Future[Any] | None = None
        if decode is not None:
            fut = (self._loop or asyncio.get_running_loop()).create_future()
            self._pending[corr] = _Pending(fut, None, -1, callback, decode)
        if self._held is not None and api_key not in _SASL_API_KEYS:
            self._held.append(frame)
        else:
            self._transport.write(frame)
        return fut

    def _dispatch(self, frame: bytes) -> None:
        """Complete the request ``frame`` answers (called from ``buffer_updated``)."""
        (corr,) = _SIZE.unpack_from(frame, 0)
        pending = self._pending.pop(corr, None)
        if pending is None:
            raise ProtocolError(f"broker {self.address} answered unknown correlation id {corr}")
        fut = pending.future
        if fut.done():  # cancelled, or failed by a timeout
            pending.resolved()
            return
        decode = pending.decode
        try:
            resp = decode(frame) if decode is not None else _decode(pending, frame)
        except CorruptMessageError as exc:
            fut.set_exception(CorruptMessageError(f"{exc} (from broker {self.address})"))
            pending.resolved()
            raise
        fut.set_result(resp)
        pending.resolved()

    def _shutdown(self, error: BaseException) -> None:
        """Fail every outstanding request with ``error`` and close the transport; runs
        synchronously so that protocol callbacks can call it. Idempotent."""
        if self._closed_error is not None:
            return
        self._closed_error = error
        self._held = None
        if self._reauth_timer is not None:
            self._reauth_timer.cancel()
            self._reauth_timer = None
        task = self._reauth_task
        if task is not None and not task.done() and task is not asyncio.current_task():
            task.cancel()
        pending, self._pending = self._pending, {}
        for p in pending.values():
            if not p.future.done():
                if isinstance(error, (KafkaConnectionError, KafkaTimeoutError)):
                    p.future.set_exception(error)
                else:
                    p.future.set_exception(
                        KafkaConnectionError(f"connection failed: {error}", broker=self.address)
                    )
                # Retrieve to avoid "exception never retrieved" for abandoned futures.
                p.future.exception()
            p.resolved()
        if self._transport is not None:
            self._transport.close()
        callbacks, self._on_close = self._on_close, []
        for cb in callbacks:
            try:
                cb(self)
            except Exception:  # pragma: no cover - callbacks are internal
                log.exception("close callback failed")
        log.debug("closed %r: %s", self, error)

    def abort(self) -> None:
        """Drop the connection at once, discarding unsent bytes (a close that waits on a
        broker that is gone). Outstanding requests fail with KafkaConnectionError."""
        self._shutdown(KafkaConnectionError("connection aborted", broker=self.address))
        if self._transport is not None:
            self._transport.abort()

    async def close(self, error: BaseException | None = None) -> None:
        """Close the connection; outstanding requests fail with ``error`` (or a
        KafkaConnectionError). Waits up to a second for the transport to finish closing."""
        err: BaseException = error if isinstance(error, Exception) else KafkaConnectionError(
            "connection closed", broker=self.address)
        self._shutdown(err)
        proto = self._proto
        if proto is not None and not proto.lost.done():
            try:
                await asyncio.wait_for(asyncio.shield(proto.lost), 1.0)
            except (asyncio.TimeoutError, TimeoutError):
                if self._transport is not None:
                    self._transport.abort()
