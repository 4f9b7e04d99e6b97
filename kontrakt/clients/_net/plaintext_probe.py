"""Telling a plaintext Kafka listener from a TLS one when a TLS handshake goes wrong.

``security.protocol=SSL`` pointed at a plaintext port used to fail only after
``request.timeout.ms``: a plaintext listener either waits for the rest of the huge "request"
the ClientHello's first bytes announce (Tansu does: the handshake gets no answer at all) or
closes the connection (Kafka does), and both look like a broker that may come back, so the
connection was retried. A stalled or broken handshake now triggers one probe: a second,
plaintext connection sends an ApiVersions v0 request. A listener that answers it speaks
plaintext Kafka, which no retry changes, so the handshake fails at once with
:class:`~kontrakt.clients._net.security.TlsPlaintextListenerError`. A TLS listener answers
the probe's bytes with an alert or by closing, and the handshake goes on as before.
"""

from __future__ import annotations

import asyncio
import ssl
import struct
from collections.abc import Awaitable
from typing import TypeVar

from kontrakt.clients._net.security import (
    TlsPlaintextListenerError,
    tls_handshake_failed,
)
from kontrakt.protocol.headers import decode_response, encode_request
from kontrakt.protocol.messages import ApiVersionsRequest, ApiVersionsResponse

__all__ = ["PROBE_AFTER", "open_tls", "speaks_plaintext_kafka"]

T = TypeVar("T")

#: seconds of handshake silence before probing: a TLS handshake takes a few round trips, so
#: a healthy broker is rarely probed, and then harmlessly (it answers the probe with an alert)
PROBE_AFTER = 1.0
#: seconds the probe may take
PROBE_TIMEOUT = 2.0
_PROBE_CORRELATION_ID = 0x6B6F6E74
#: an ApiVersions v0 answer is small; anything claiming more is not one
_MAX_ANSWER = 1 << 20


async def speaks_plaintext_kafka(host: str, port: int, timeout: float = PROBE_TIMEOUT) -> bool:
    """Whether ``host:port`` answers a plaintext ApiVersions v0 request with a well-formed
    ApiVersions response (within ``timeout`` seconds). Never raises."""
    writer: asyncio.StreamWriter | None = None

    async def ask() -> bool:
        nonlocal writer
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(encode_request(ApiVersionsRequest(), 0, _PROBE_CORRELATION_ID,
                                    "kontrakt-tls-probe"))
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        if not 0 < size <= _MAX_ANSWER:
            return False  # e.g. a TLS alert record read as a length
        corr, _ = decode_response(ApiVersionsResponse, 0, await reader.readexactly(size))
        return bool(corr == _PROBE_CORRELATION_ID)

    try:
        return await asyncio.wait_for(ask(), timeout)
    except Exception:  # any failure means "not shown to be plaintext Kafka"
        return False
    finally:
        if writer is not None:
            writer.close()


def _plaintext(address: str) -> TlsPlaintextListenerError:
    return TlsPlaintextListenerError(
        f"TLS handshake with {address} failed: it is a plaintext Kafka listener (it answered "
        "a plaintext ApiVersions request); set security.protocol to PLAINTEXT (or "
        "SASL_PLAINTEXT), or use the broker's TLS port")


async def open_tls(opening: Awaitable[T], host: str, port: int, timeout: float) -> T:
    """Await ``opening`` (a TLS connection to ``host:port``) within ``timeout`` seconds,
    telling a plaintext Kafka listener apart (see the module doc).

    Raises:
        TlsPlaintextListenerError: ``host:port`` is a plaintext Kafka listener; as soon as
            the handshake has been silent for :data:`PROBE_AFTER` seconds, or has been closed
            or answered with non-TLS bytes.
        Whatever ``opening`` raises otherwise, and TimeoutError after ``timeout``.
    """
    address = f"{host}:{port}"
    task = asyncio.ensure_future(asyncio.wait_for(opening, timeout))
    probe: asyncio.Task[bool] | None = None
    try:
        done, _ = await asyncio.wait({task}, timeout=min(PROBE_AFTER, timeout / 2))
        if not done:
            probe = asyncio.ensure_future(speaks_plaintext_kafka(host, port))
            await asyncio.wait({task, probe}, return_when=asyncio.FIRST_COMPLETED)
            if not task.done() and probe.result():
                raise _plaintext(address)
        try:
            return await task
        except (OSError, EOFError) as exc:
            # A timeout was probed above already; a refused certificate is a TLS answer.
            if isinstance(exc, (TimeoutError, ssl.SSLCertVerificationError)) \
                    or not tls_handshake_failed(exc):
                raise
            if await speaks_plaintext_kafka(host, port):
                raise _plaintext(address) from exc
            raise
    finally:
        pending = {t for t in (task, probe) if t is not None and not t.done()}
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.wait(pending)
