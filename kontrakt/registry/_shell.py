"""What the sync and async registry clients are built on: the shells that perform the
core's actions with httpx.

:class:`ClientShell` holds what both share (settings, the core and its caches);
:class:`SyncShell` and :class:`AsyncShell` are the two transports, side by side: each sends
the core's :class:`~kontrakt.registry._exchange.HttpRequest` actions, sleeps its
:class:`~kontrakt.registry._exchange.Sleep` ones, coalesces identical reads in flight
(threads wait on an event, tasks on a shared task) and drives an operation's generator to
its result.

The operations themselves (``register_schema``, ...) are mixins by area, a sync one and an
async one each: :mod:`kontrakt.registry._schema_ops`, :mod:`kontrakt.registry._subject_ops`
and :mod:`kontrakt.registry._config_ops`. Each operation is one line that runs the core's
generator (:class:`~kontrakt.registry._core.RegistryCore`) on the shell's transport; the
sync mixin carries the documentation, and :func:`share_docstrings` gives it to the async
coroutines.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import threading
import time
from collections.abc import Mapping
from typing import Any, TypeVar

import httpx

from kontrakt.errors import SchemaRegistryError
from kontrakt.registry._config import parse_config
from kontrakt.registry._core import RegistryCore
from kontrakt.registry._errors import RegistryConnectionError
from kontrakt.registry._exchange import Call, HttpRequest, Op, Sleep, copy_error

__all__ = ["AsyncShell", "ClientShell", "SyncShell", "default_tls_context", "http_timeout",
           "past_deadline", "share_docstrings"]


_DEFAULT_TLS: dict[tuple[str | None, str | None], ssl.SSLContext] = {}
_DEFAULT_TLS_LOCK = threading.Lock()


def default_tls_context() -> ssl.SSLContext:
    """The verifying TLS context of clients without ``ssl.*`` options: httpx's own default
    (certifi's bundle, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``), built once a process.

    httpx builds it anew for every client it is given ``verify=True``, and loading the CA
    bundle costs ~50 ms of CPU (measured in a Spark task, which opens a registry client per
    partition read); a context is safe to share between clients and threads.
    """
    key = (os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
    with _DEFAULT_TLS_LOCK:
        ctx = _DEFAULT_TLS.get(key)
        if ctx is None:
            ctx = _DEFAULT_TLS[key] = httpx.create_ssl_context()
        return ctx


T = TypeVar("T")


def http_timeout(request: HttpRequest) -> Any:
    """The ``timeout=`` for httpx of one attempt (the client's own when the core set none)."""
    if request.timeout is None:
        return httpx.USE_CLIENT_DEFAULT
    return httpx.Timeout(request.timeout, connect=request.connect_timeout)


def past_deadline(request: HttpRequest) -> None:
    """Raise ``httpx.ReadTimeout`` if the attempt's answer is still arriving at its deadline.

    Raises:
        httpx.ReadTimeout: the deadline has passed.
    """
    if request.deadline is not None and time.monotonic() > request.deadline:
        raise httpx.ReadTimeout("the answer was still arriving at total.timeout.ms")


def _stream_args(request: HttpRequest) -> dict[str, Any]:
    """The arguments of ``httpx`` ``stream()`` for one attempt."""
    return {"method": request.method, "url": request.url, "params": request.params,
            "headers": dict(request.headers), "content": request.content,
            "timeout": http_timeout(request)}


def share_docstrings(async_ops: type, sync_ops: type) -> None:
    """Give each public coroutine of ``async_ops`` the docstring of its synchronous twin in
    ``sync_ops``: one text per operation (a test checks that both forms match)."""
    for name, member in vars(async_ops).items():
        if name.startswith("_") or not callable(member) or member.__doc__:
            continue
        member.__doc__ = getattr(sync_ops, name).__doc__


class ClientShell:
    """What the sync and async clients share besides the core: config validation, caches.

    :class:`SyncShell` and :class:`AsyncShell` add the httpx client (built from
    :meth:`_http_options`) and the loop that performs the core's actions.

    Args:
        config: confluent-style properties.
        options: the same as snake_case keywords.

    Raises:
        ConfigError: unknown or invalid property.
    """

    def __init__(self, config: Mapping[str, Any] | None, options: Mapping[str, Any]) -> None:
        self._core = RegistryCore(parse_config(config, options))

    def _http_options(self) -> dict[str, Any]:
        """Keyword arguments for ``httpx.Client`` / ``httpx.AsyncClient``."""
        cfg = self._core.config
        timeout = httpx.Timeout(cfg.timeout or None, connect=cfg.connect_timeout)
        verify = default_tls_context() if cfg.verify is True else cfg.verify
        return {"verify": verify, "proxy": cfg.proxy, "timeout": timeout}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(urls={list(self._core.config.urls)!r})"

    def clear_latest_caches(self) -> None:
        """Forget cached latest versions (plain and with metadata)."""
        self._core.clear_latest_caches()

    def clear_caches(self) -> None:
        """Forget every cached answer, schemas by id included."""
        self._core.clear_caches()

    @property
    def latest_cache_ttl(self) -> float | None:
        """``cache.latest.ttl.sec``: seconds a latest version is reused (None: until
        cleared). Serializers and deserializers with ``use.latest.version`` reuse what
        they resolved from it as long."""
        return self._core.config.cache_latest_ttl_sec

    @property
    def requests_sent(self) -> int:
        """HTTP attempts made so far (retries included); handy to verify caching."""
        return self._core.requests_sent


class _Flight:
    """One in-flight request that identical concurrent callers wait on."""

    __slots__ = ("done", "error", "result")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None


class SyncShell(ClientShell):
    """The sync transport: ``httpx.Client``, ``time.sleep``, and identical reads in flight
    shared between threads (thread-safe). Arguments and errors: see :class:`ClientShell`."""

    def __init__(self, config: Mapping[str, Any] | None, options: Mapping[str, Any]) -> None:
        super().__init__(config, options)
        self._http = httpx.Client(**self._http_options())
        self._flights: dict[Any, _Flight] = {}
        self._flights_lock = threading.Lock()

    def _send_http(self, request: HttpRequest) -> tuple[int, bytes]:
        """Send one request (the mock client overrides this to skip HTTP).

        Raises:
            httpx.TransportError: no answer; ``httpx.ReadTimeout`` also when the body is still
                arriving at the call's deadline (a trickling server cannot stretch a call).
        """
        with self._http.stream(**_stream_args(request)) as response:
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                past_deadline(request)
            return response.status_code, bytes(body)

    def _execute(self, call: Call) -> Any:
        exchange = self._core.exchange(call)
        reply: Any = None
        try:
            while True:
                action = exchange.send(reply)
                if isinstance(action, Sleep):
                    time.sleep(action.seconds)
                    reply = None
                else:
                    try:
                        reply = self._send_http(action)
                    except httpx.TransportError as exc:
                        reply = exc
        except StopIteration as stop:
            return stop.value

    def _perform(self, call: Call) -> Any:
        if call.key is None:
            return self._execute(call)
        # Coalescing: the first caller for a key does the request; identical callers that
        # arrive while it is in flight wait on its Event and share its answer.
        with self._flights_lock:
            flight = self._flights.get(call.key)
            leader = flight is None
            if flight is None:
                flight = self._flights[call.key] = _Flight()
        if not leader:
            # The leader's call ends within total.timeout.ms (plus an OAuth token fetch).
            bound = 2 * self._core.config.total_timeout
            if not flight.done.wait(bound + 5.0):
                raise RegistryConnectionError(-1, -1, "timed out waiting for a shared request")
            if isinstance(flight.error, SchemaRegistryError):
                raise copy_error(flight.error)
            if flight.error is not None:
                raise flight.error
            return flight.result
        try:
            flight.result = self._execute(call)
            return flight.result
        except BaseException as exc:
            flight.error = exc
            raise
        finally:
            with self._flights_lock:
                self._flights.pop(call.key, None)
            flight.done.set()

    def _run(self, op: Op[T]) -> T:
        try:
            call = next(op)
            while True:
                call = op.send(self._perform(call))
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]


class AsyncShell(ClientShell):
    """The async transport: ``httpx.AsyncClient``, ``asyncio.sleep``, and identical reads in
    flight shared between tasks of one event loop. Arguments and errors: see
    :class:`ClientShell`."""

    def __init__(self, config: Mapping[str, Any] | None, options: Mapping[str, Any]) -> None:
        super().__init__(config, options)
        self._http = httpx.AsyncClient(**self._http_options())
        self._flights: dict[Any, asyncio.Task[Any]] = {}

    async def _send_http(self, request: HttpRequest) -> tuple[int, bytes]:
        """Send one request (the mock client overrides this to skip HTTP); see
        :meth:`SyncShell._send_http`."""
        async with self._http.stream(**_stream_args(request)) as response:
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                past_deadline(request)
            return response.status_code, bytes(body)

    async def _execute(self, call: Call) -> Any:
        exchange = self._core.exchange(call)
        reply: Any = None
        try:
            while True:
                action = exchange.send(reply)
                if isinstance(action, Sleep):
                    await asyncio.sleep(action.seconds)
                    reply = None
                else:
                    try:
                        reply = await self._send_http(action)
                    except httpx.TransportError as exc:
                        reply = exc
        except StopIteration as stop:
            return stop.value

    async def _perform(self, call: Call) -> Any:
        if call.key is None:
            return await self._execute(call)
        # Coalescing: one task per key does the request; every identical caller awaits it
        # through shield(), so a cancelled caller does not cancel the others' request.
        task = self._flights.get(call.key)
        if task is None:
            task = asyncio.ensure_future(self._execute(call))
            self._flights[call.key] = task
            key = call.key

            def _done(t: asyncio.Task[Any]) -> None:
                if self._flights.get(key) is t:
                    del self._flights[key]
                if not t.cancelled():
                    t.exception()  # retrieved here so an unawaited failure is not logged

            task.add_done_callback(_done)
        try:
            return await asyncio.shield(task)
        except SchemaRegistryError as exc:
            # Each waiter gets its own exception object (shared ones would pile up tracebacks).
            raise copy_error(exc) from None

    async def _run(self, op: Op[T]) -> T:
        try:
            call = next(op)
            while True:
                call = op.send(await self._perform(call))
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
