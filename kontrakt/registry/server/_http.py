"""The registry's HTTP/1.1 front: asyncio for sockets, a bounded thread pool for requests.

A thread per connection (the standard library's ``ThreadingHTTPServer``) let 300 half-sent
requests hold 300 threads forever and reset connections beyond a listen backlog of 5. Here
the event loop holds every connection (an idle or slow one costs a file descriptor, not a
thread), reads each request head and body under a byte cap and a deadline, and only hands
complete requests to ``workers`` threads, which run :meth:`RegistryApp.handle` (it may block
on protoc). Everything malformed is answered with a status and the registry's error shape.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ipaddress
import json
import logging
import re
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

__all__ = ["CONTENT_TYPE", "HttpLimits", "HttpServer", "is_loopback"]

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
#: Media types Confluent's server consumes (``Versions`` in its REST layer):
#: application/octet-stream is its "generic request" type; no Content-Type counts as it.
ACCEPTED_CONTENT_TYPES = frozenset({
    CONTENT_TYPE, "application/vnd.schemaregistry+json", "application/json",
    "application/octet-stream",
})
_LOG = logging.getLogger("kontrakt.registry.server")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_DIGITS = re.compile(r"[0-9]{1,19}")
_HEX = re.compile(r"[0-9A-Fa-f]{1,15}")


@dataclass(frozen=True)
class HttpLimits:
    """Bounds on what one client can make the server hold.

    Attributes:
        max_body: largest request body in bytes (chunked bodies included); more is 413.
        max_head: largest request line plus headers in bytes; more is 431.
        max_headers: most header lines in one request; more is 431.
        head_timeout: seconds to receive a whole request head once its first byte came;
            then 408 and the connection is closed.
        body_timeout: seconds to receive a whole body; then 408 and close.
        idle_timeout: seconds a keep-alive connection may wait for its next request.
        max_connections: open connections at once; more are answered 503 and closed.
        workers: threads running requests (the registry logic) at once.
        backlog: listen backlog (the kernel caps it at ``net.core.somaxconn``).
    """

    max_body: int = 16 * 1024 * 1024
    max_head: int = 64 * 1024
    max_headers: int = 100
    head_timeout: float = 10.0
    body_timeout: float = 30.0
    idle_timeout: float = 60.0
    max_connections: int = 1024
    workers: int = 16
    backlog: int = 1024


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` exposes the server to this machine only."""
    if host in ("localhost", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve to anything


class _Reject(Exception):
    """Answer ``status`` and close the connection (the stream is no longer in sync)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


#: ``handler(method, target_path, query, headers, body) -> (status, json_value)``.
Handler = Callable[[str, str, str, dict[str, str], bytes | None], "tuple[int, Any]"]
#: ``authorize(method, path, headers)``: None to go on, else ``(status, json_value)``.
Authorize = Callable[[str, str, dict[str, str]], "tuple[int, Any] | None"]


@dataclass
class _Request:
    method: str
    target: str
    version: str
    headers: dict[str, str]


class HttpServer:
    """Serve ``handler`` over HTTP/1.1 on ``host``:``port``.

    Args:
        handler: called on a worker thread for each complete request.
        host: interface to bind.
        port: TCP port (0: any free one).
        limits: byte, time and concurrency bounds.
        verbose: log one line per request (logger ``kontrakt.registry.server``).
        authorize: checks each request's head before its body is read (so an
            unauthenticated client cannot make the server read a body).
        ssl_context: serve HTTPS with this server-side context (the TLS handshake is
            bounded by ``limits.head_timeout``).

    Raises:
        OSError: the port cannot be bound (at construction).
    """

    def __init__(self, handler: Handler, host: str, port: int, limits: HttpLimits,
                 verbose: bool = False, authorize: Authorize | None = None,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self._handler = handler
        self.ssl_context = ssl_context
        self._authorize = authorize
        self.limits = limits
        self._verbose = verbose
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.socket = socket.create_server((host, port), family=family,
                                           backlog=limits.backlog)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._closed = False
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def address(self) -> tuple[str, int]:
        """``(host, port)`` actually bound."""
        host, port = self.socket.getsockname()[:2]
        return str(host), int(port)

    def serve_forever(self) -> None:
        """Serve on the calling thread until :meth:`stop` (or KeyboardInterrupt)."""
        try:
            asyncio.run(self._main())
        finally:
            self._ready.set()
            self.socket.close()

    def wait_ready(self, timeout: float) -> None:
        """Block until :meth:`serve_forever` accepts connections (or has ended)."""
        self._ready.wait(timeout)

    def stop(self) -> None:
        """Ask :meth:`serve_forever` to close every connection and return (thread-safe)."""
        self._closed = True
        loop, event = self._loop, self._stopping
        if loop is not None and event is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(event.set)
        else:
            self.socket.close()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        pool = concurrent.futures.ThreadPoolExecutor(
            self.limits.workers, thread_name_prefix="kontrakt-registry")
        server = await asyncio.start_server(
            lambda r, w: self._connection(r, w, pool), sock=self.socket,
            limit=self.limits.max_head, backlog=self.limits.backlog, ssl=self.ssl_context,
            ssl_handshake_timeout=self.limits.head_timeout if self.ssl_context else None)
        self._ready.set()
        try:
            if not self._closed:
                await self._stopping.wait()
        finally:
            server.close()
            for writer in list(self._writers):
                writer.close()
            await server.wait_closed()
            pool.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ one connection
    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                          pool: concurrent.futures.Executor) -> None:
        if len(self._writers) >= self.limits.max_connections:
            with contextlib.suppress(ConnectionError):
                await self._send(writer, 503, _error(503, "Too many connections"), close=True)
            writer.close()
            return
        self._writers.add(writer)
        try:
            while await self._one_request(reader, writer, pool):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the peer went away; nothing to answer
        except asyncio.CancelledError:
            # The server is stopping. Ending quietly, not cancelled: Python 3.11's stream
            # server asks a finished connection task for task.exception(), which raises
            # (and is logged as an error) when the task was cancelled. Nothing awaits this
            # task, and it returns at once.
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _one_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                           pool: concurrent.futures.Executor) -> bool:
        """Serve one request; False when the connection must close."""
        limits = self.limits
        try:
            first = await asyncio.wait_for(reader.read(1), limits.idle_timeout)
        except asyncio.TimeoutError:
            return False
        if not first:
            return False
        try:
            request = await _deadline(self._read_head(first, reader), limits.head_timeout,
                                      "Request head not received in time")
            if self._authorize is not None:
                refused = self._authorize(request.method, urlsplit(request.target).path,
                                          request.headers)
                if refused is not None:
                    # The body (if any) is left unread: the connection cannot be reused.
                    await self._send(writer, refused[0], refused[1], close=True)
                    return False
            body = await _deadline(self._read_body(request, reader, writer),
                                   limits.body_timeout, "Request body not received in time")
        except _Reject as exc:
            await self._send(writer, exc.status, _error(exc.status, exc.message), close=True)
            return False
        keep = _keep_alive(request)
        url = urlsplit(request.target)
        # HEAD is GET without the body: answering it with one would desynchronize a
        # keep-alive client, which reads no body after a HEAD.
        head_only = request.method == "HEAD"
        status, payload = await asyncio.get_running_loop().run_in_executor(
            pool, self._handler, "GET" if head_only else request.method, url.path, url.query,
            request.headers, body)
        if self._verbose:
            _LOG.info("%s %s -> %d", request.method, request.target, status)
        await self._send(writer, status, payload, close=not keep, head_only=head_only)
        return keep

    async def _read_head(self, first: bytes, reader: asyncio.StreamReader) -> _Request:
        try:
            raw = first + await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            raise _Reject(431, "Request header fields too large") from None
        except asyncio.IncompleteReadError:
            raise ConnectionResetError from None
        if len(raw) > self.limits.max_head:
            raise _Reject(431, "Request header fields too large")
        lines = raw[:-4].decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not _TOKEN.fullmatch(parts[0]) or not parts[1]:
            raise _Reject(400, "Malformed request line")
        method, target, version = parts
        if version not in ("HTTP/1.1", "HTTP/1.0"):
            raise _Reject(505 if version.startswith("HTTP/") else 400,
                          f"Unsupported HTTP version {version[:20]!r}")
        if not target.startswith("/") and not target.startswith(("http://", "https://")):
            raise _Reject(400, "Malformed request target")
        if len(lines) - 1 > self.limits.max_headers:
            raise _Reject(431, "Too many request headers")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep or not _TOKEN.fullmatch(name):
                # Includes obsolete line folding and "Name : value": both are smuggling aids.
                raise _Reject(400, "Malformed header line")
            key = name.lower()
            value = value.strip(" \t")
            if key in headers:
                if key in ("content-length", "host", "authorization", "content-type"):
                    if headers[key] != value or key != "content-length":
                        raise _Reject(400, f"Repeated header {name}")
                    continue
                value = f"{headers[key]}, {value}"
            headers[key] = value
        return _Request(method, target, version, headers)

    async def _read_body(self, request: _Request, reader: asyncio.StreamReader,
                         writer: asyncio.StreamWriter) -> bytes | None:
        headers = request.headers
        te = headers.get("transfer-encoding")
        cl = headers.get("content-length")
        if te is not None and cl is not None:
            raise _Reject(400, "Both Transfer-Encoding and Content-Length given")
        if te is not None and te.strip().lower() != "chunked":
            raise _Reject(501, f"Transfer-Encoding {te[:40]!r} is not supported")
        length = 0
        if cl is not None:
            if not _DIGITS.fullmatch(cl):
                raise _Reject(400, f"Invalid Content-Length {cl[:40]!r}")
            length = int(cl)
        if length > self.limits.max_body:
            raise _Reject(413, f"Request body larger than {self.limits.max_body} bytes")
        if te is None and length == 0:
            return None
        self._check_content_type(headers)
        if headers.get("expect", "").lower() == "100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        if te is None:
            return await reader.readexactly(length)
        return await self._read_chunked(reader)

    def _check_content_type(self, headers: dict[str, str]) -> None:
        raw = headers.get("content-type")
        if raw is None:
            return
        media = raw.split(";", 1)[0].strip().lower()
        if media not in ACCEPTED_CONTENT_TYPES:
            raise _Reject(415, f"HTTP 415 Unsupported Media Type {media[:80]!r}; send "
                          f"{CONTENT_TYPE} or application/json")

    async def _read_chunked(self, reader: asyncio.StreamReader) -> bytes:
        cap = self.limits.max_body
        body = bytearray()
        while True:
            line = await self._line(reader)
            size_text = line.split(";", 1)[0].strip()
            if not _HEX.fullmatch(size_text):
                raise _Reject(400, "Malformed chunk size")
            size = int(size_text, 16)
            if size == 0:
                break
            if len(body) + size > cap:
                raise _Reject(413, f"Request body larger than {cap} bytes")
            body += await reader.readexactly(size)
            if await reader.readexactly(2) != b"\r\n":
                raise _Reject(400, "Malformed chunk")
        for _ in range(self.limits.max_headers + 1):  # trailer fields, ignored
            if not await self._line(reader):
                return bytes(body)
        raise _Reject(431, "Too many trailer fields")

    @staticmethod
    async def _line(reader: asyncio.StreamReader) -> str:
        try:
            return (await reader.readuntil(b"\r\n"))[:-2].decode("latin-1")
        except asyncio.LimitOverrunError:
            raise _Reject(400, "Chunk line too long") from None

    async def _send(self, writer: asyncio.StreamWriter, status: int, payload: Any,
                    close: bool, head_only: bool = False) -> None:
        try:
            reason = HTTPStatus(status).phrase
        except ValueError:
            reason = "Error"
        if status == 204:  # no body, and so no length or type either
            data = b""
            head = f"HTTP/1.1 {status} {reason}\r\n"
        else:
            data = json.dumps(payload).encode()
            head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: {CONTENT_TYPE}\r\n"
                    f"Content-Length: {len(data)}\r\n")
        if close:
            head += "Connection: close\r\n"
        if status == 401:
            head += 'WWW-Authenticate: Basic realm="kontrakt-registry", Bearer\r\n'
        writer.write(head.encode("latin-1") + b"\r\n" + (b"" if head_only else data))
        try:
            await asyncio.wait_for(writer.drain(), self.limits.body_timeout)
        except (asyncio.TimeoutError, ConnectionError):
            writer.close()


def _error(status: int, message: str) -> dict[str, Any]:
    return {"error_code": status, "message": message}


def _keep_alive(request: _Request) -> bool:
    tokens = {t.strip().lower() for t in request.headers.get("connection", "").split(",")}
    if request.version == "HTTP/1.0":
        return "keep-alive" in tokens
    return "close" not in tokens


async def _deadline(coro: Any, seconds: float, message: str) -> Any:
    try:
        return await asyncio.wait_for(coro, seconds)
    except asyncio.TimeoutError:
        raise _Reject(408, message) from None
