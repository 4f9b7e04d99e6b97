"""An embedded, Confluent-compatible Schema Registry server.

Start it in-process::

    with RegistryServer() as srv:
        client = SchemaRegistryClient({"url": srv.url})

or from the command line: ``python -m kontrakt.registry.server --port 8081 --storage reg.json``.
It serves the same REST paths, JSON shapes, error codes and content type
(``application/vnd.schemaregistry.v1+json``) as Confluent Schema Registry, on the standard
library's :class:`http.server.ThreadingHTTPServer` (no extra dependency).
"""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from kontrakt.errors import IllegalStateError
from kontrakt.registry.server._app import RegistryApp
from kontrakt.registry.server._state import (
    CompatibilityChecker,
    ReferenceResolver,
    RegistryState,
    VersionedSchema,
    default_compatibility_checker,
)

__all__ = [
    "CONTENT_TYPE",
    "CompatibilityChecker",
    "ReferenceResolver",
    "RegistryApp",
    "RegistryServer",
    "RegistryState",
    "VersionedSchema",
    "default_compatibility_checker",
]

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_MAX_BODY = 16 * 1024 * 1024


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; without TCP_NODELAY, Nagle plus delayed ACKs
    # add ~40 ms to every keep-alive response.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        # Quiet by default: test output and CLI logs should not carry every request.
        if self.server.verbose:
            super().log_message(format, *args)

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > _MAX_BODY:
            self._reply(413, {"error_code": 413, "message": "Request body too large"})
            return
        body = self.rfile.read(length) if length else None
        url = urlsplit(self.path)
        status, payload = self.server.app.handle(self.command, url.path, url.query, body)
        self._reply(status, payload)

    def _reply(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = _serve


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], app: RegistryApp, verbose: bool) -> None:
        self.app = app
        self.verbose = verbose
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        super().__init__(addr, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Cut keep-alive connections too, so a stopped server really stops answering."""
        with self._open_lock:
            conns = list(self._open)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class RegistryServer:
    """A registry server running on a background thread.

    Args:
        host: interface to bind; defaults to loopback only.
        port: TCP port; 0 picks a free one (see :attr:`url`).
        storage: path of a JSON file holding the state (loaded at start, rewritten after
            every write, so it survives restarts); ``None`` keeps state in memory.
        compatibility_checker: overrides the compatibility engine (mostly for tests).
        verbose: log each request to stderr.

    Attributes:
        app: the request handler (``app.request_count`` counts requests served).
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, storage: str | None = None,
                 compatibility_checker: CompatibilityChecker | None = None,
                 verbose: bool = False) -> None:
        self.app = RegistryApp(RegistryState(storage, compatibility_checker))
        self._host = host
        self._port = port
        self._verbose = verbose
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:40123``.

        Raises:
            IllegalStateError: the server is not running.
        """
        if self._httpd is None:
            raise IllegalStateError("RegistryServer is not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> RegistryServer:
        """Bind and serve on a daemon thread; returns self.

        Raises:
            IllegalStateError: already started.
            OSError: the port cannot be bound.
        """
        if self._httpd is not None:
            raise IllegalStateError("RegistryServer already started")
        self._httpd = _HTTPServer((self._host, self._port), self.app, self._verbose)
        # A short poll interval makes stop() quick (shutdown waits for the next poll).
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,),
                                        name="kontrakt-registry", daemon=True)
        self._thread.start()
        return self

    def bind(self) -> None:
        """Bind the port without serving yet (so :attr:`url` is known, e.g. for port 0).

        Raises:
            IllegalStateError: already bound.
            OSError: the port cannot be bound.
        """
        if self._httpd is not None:
            raise IllegalStateError("RegistryServer already bound")
        self._httpd = _HTTPServer((self._host, self._port), self.app, self._verbose)

    def serve_forever(self) -> None:
        """Serve on the calling thread until interrupted (binds first if needed; the CLI)."""
        if self._httpd is None:
            self.bind()
        assert self._httpd is not None
        try:
            self._httpd.serve_forever()
        finally:
            self._httpd.server_close()
            self._httpd = None

    def stop(self) -> None:
        """Stop serving and release the port (idempotent)."""
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
            httpd.close_connections()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> RegistryServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
