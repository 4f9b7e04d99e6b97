"""An embedded, Confluent-compatible Schema Registry server.

Start it in-process::

    with RegistryServer() as srv:
        client = SchemaRegistryClient({"url": srv.url})

or from the command line: ``python -m kontrakt.registry.server --port 8081 --storage reg.json``.
It serves the same REST paths, JSON shapes, error codes and content type
(``application/vnd.schemaregistry.v1+json``) as Confluent Schema Registry, on the standard
library alone: asyncio holds the connections, a bounded thread pool runs the requests
(see :mod:`kontrakt.registry.server._http` for the bounds on what one client can hold).
"""

from __future__ import annotations

import logging
import ssl
import threading
from types import TracebackType
from typing import Any

from kontrakt.errors import IllegalStateError
from kontrakt.registry.server._app import RegistryApp
from kontrakt.registry.server._auth import Authenticator, Role
from kontrakt.registry.server._http import CONTENT_TYPE, HttpLimits, HttpServer, is_loopback
from kontrakt.registry.server._state import (
    CompatibilityChecker,
    ReferenceResolver,
    RegistryState,
    VersionedSchema,
    default_compatibility_checker,
)

__all__ = [
    "CONTENT_TYPE",
    "Authenticator",
    "CompatibilityChecker",
    "HttpLimits",
    "ReferenceResolver",
    "RegistryApp",
    "RegistryServer",
    "RegistryState",
    "Role",
    "VersionedSchema",
    "default_compatibility_checker",
]

_LOG = logging.getLogger("kontrakt.registry.server")


class RegistryServer:
    """A registry server running on a background thread.

    Args:
        host: interface to bind; defaults to loopback only. Binding anything else logs a
            warning (logger ``kontrakt.registry.server``): every client that can reach the
            port can then change every schema.
        port: TCP port; 0 picks a free one (see :attr:`url`).
        storage: path of the file holding the state (an append-only journal, loaded and
            compacted at start, one line appended per write, so it survives restarts);
            ``None`` keeps state in memory.
        fsync: with ``storage``, each write reaches the disk (``os.fsync``) before it is
            answered (the default); False trades that for speed on slow disks, leaving an
            acknowledged write to the operating system's flush (a process crash still
            loses nothing, a power loss may).
        compatibility_checker: overrides the compatibility engine (mostly for tests).
        verbose: log each request (logger ``kontrakt.registry.server``, level INFO).
        limits: bounds on request sizes, read deadlines, connections and worker threads.
        auth: require HTTP basic or bearer credentials, each with a role (read-only or
            read-write); ``None`` (the default) lets anyone who reaches the port do anything.
        ssl_context: serve HTTPS with this server-side context (see
            :meth:`tls_context`); credentials otherwise cross the network in clear text.

    Attributes:
        app: the request handler (``app.request_count`` counts requests served).
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, storage: str | None = None,
                 compatibility_checker: CompatibilityChecker | None = None,
                 verbose: bool = False, limits: HttpLimits | None = None,
                 auth: Authenticator | None = None,
                 ssl_context: ssl.SSLContext | None = None, fsync: bool = True) -> None:
        self.app = RegistryApp(RegistryState(storage, compatibility_checker, fsync))
        self._host = host
        self._port = port
        self._verbose = verbose
        self._limits = limits or HttpLimits()
        self._auth = auth
        self._ssl_context = ssl_context
        self._httpd: HttpServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:40123``.

        Raises:
            IllegalStateError: the server is not running.
        """
        if self._httpd is None:
            raise IllegalStateError("RegistryServer is not started")
        host, port = self._httpd.address
        scheme = "https" if self._ssl_context is not None else "http"
        return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"

    @staticmethod
    def tls_context(certfile: str, keyfile: str | None = None,
                    password: str | None = None) -> ssl.SSLContext:
        """A server-side TLS context (TLS 1.2 or later) for ``ssl_context``.

        Args:
            certfile: PEM certificate chain of the server.
            keyfile: PEM private key (default: inside ``certfile``).
            password: the key's password, if it is encrypted.

        Raises:
            OSError, ssl.SSLError: the files cannot be read or do not match.
        """
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(certfile, keyfile, password)
        return ctx

    def _handle(self, method: str, path: str, query: str, headers: dict[str, str],
                body: bytes | None) -> tuple[int, Any]:
        return self.app.handle(method, path, query, body)

    def start(self) -> RegistryServer:
        """Bind and serve on a daemon thread; returns self.

        Raises:
            IllegalStateError: already started.
            OSError: the port cannot be bound.
        """
        if self._httpd is not None:
            raise IllegalStateError("RegistryServer already started")
        self.bind()
        assert self._httpd is not None
        httpd = self._httpd
        self._thread = threading.Thread(target=httpd.serve_forever, name="kontrakt-registry",
                                        daemon=True)
        self._thread.start()
        httpd.wait_ready(10)
        return self

    def bind(self) -> None:
        """Bind the port without serving yet (so :attr:`url` is known, e.g. for port 0).

        Connections that arrive before serving starts wait in the listen backlog.

        Raises:
            IllegalStateError: already bound.
            OSError: the port cannot be bound.
        """
        if self._httpd is not None:
            raise IllegalStateError("RegistryServer already bound")
        self._httpd = HttpServer(self._handle, self._host, self._port, self._limits,
                                 self._verbose,
                                 self._auth.check if self._auth is not None else None,
                                 self._ssl_context)
        if not is_loopback(self._host) and self._auth is None:
            _LOG.warning(
                "kontrakt registry bound to %s without authentication: anyone who can "
                "reach %s can register and delete schemas", self._host, self.url)

    def serve_forever(self) -> None:
        """Serve on the calling thread until interrupted (binds first if needed; the CLI)."""
        if self._httpd is None:
            self.bind()
        assert self._httpd is not None
        try:
            self._httpd.serve_forever()
        finally:
            self._httpd = None

    def stop(self) -> None:
        """Stop serving, cut open connections and release the port (idempotent)."""
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.stop()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self.app.state.close()

    def __enter__(self) -> RegistryServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
