"""The network core every client is built on, and its blocking form.

:class:`AsyncKafkaClient` is the public face: configuration, closing, the public
``request()`` escape hatch that sends any protocol message (and ``request_with_retries``
for the clients built on it), and its request metrics. It is built in layers, each in a
room of its own and calling only the ones below it:

- :mod:`._client_coordinators`: FindCoordinator lookups and dedicated coordinator
  connections (:class:`~._client_coordinators.ClientCoordinators`), over
- :mod:`._client_metadata`: starting, the metadata refresh loop and the topics it tracks
  (:class:`~._client_metadata.ClientMetadataRefresh`), over
- :mod:`._client_connections`: connections per broker with reconnect backoff, routing,
  sending (:class:`~._client_connections.ClientConnections`, and :class:`Backoff`).

:class:`KafkaClient` runs an :class:`AsyncKafkaClient` on a private event-loop thread.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

from kontrakt._config import COMMON_OPTIONS, SECURITY_OPTIONS, ClientConfig, Option
from kontrakt.clients._client_connections import Backoff
from kontrakt.clients._client_coordinators import COORDINATOR_ID_BASE, ClientCoordinators
from kontrakt.clients._net.connection import BrokerConnection
from kontrakt.clients._settings import ClientSettings
from kontrakt.clients._sync import LoopThread, close_sync, ensure_started
from kontrakt.clients._wait import cancel_and_wait
from kontrakt.clients.cluster import ClusterMetadata
from kontrakt.errors import (
    AuthenticationError,
    ConfigError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
)
from kontrakt.protocol.spec import Request, Response

__all__ = ["CLIENT_OPTIONS", "COORDINATOR_ID_BASE", "AsyncKafkaClient", "Backoff", "KafkaClient"]

log = logging.getLogger("kontrakt.client")

CLIENT_OPTIONS: dict[str, Option] = {**COMMON_OPTIONS, **SECURITY_OPTIONS}


class AsyncKafkaClient(ClientCoordinators):
    """Asyncio Kafka client core: connections, metadata and raw requests.

    Args:
        config: Kafka property names to values (``{"bootstrap.servers": "host:9092"}``).
        **kwargs: the same options with snake_case names (``bootstrap_servers=``).
        _settings: for Kontrakt's own clients: instead of ``config``, the settings the
            client already parsed from its validated configuration
            (:meth:`ClientSettings.of`), so that nothing is validated twice.

    Options: ``bootstrap.servers`` (required), ``client.id``, ``request.timeout.ms``,
    ``socket.connection.setup.timeout.ms``, ``metadata.max.age.ms``, ``retry.backoff.ms``,
    ``retry.backoff.max.ms``, ``reconnect.backoff.ms``, ``reconnect.backoff.max.ms``,
    ``max.in.flight.requests.per.connection``, ``receive.message.max.bytes``,
    ``connections.max.idle.ms``, ``metadata.recovery.strategy`` (``rebootstrap``, Kafka
    4.x's default, or ``none``), ``metadata.recovery.rebootstrap.trigger.ms``,
    ``security.protocol``, ``ssl.*``, ``sasl.*``.

    Metadata recovery (KIP-899, KIP-1102): with ``metadata.recovery.strategy=rebootstrap``,
    when every known broker is in its reconnect backoff, when none has given metadata for
    ``metadata.recovery.rebootstrap.trigger.ms`` (default 5 minutes) while metadata was
    wanted, or when a broker answers Metadata with REBOOTSTRAP_REQUIRED, the client loads
    metadata from ``bootstrap.servers`` again, over new connections (resolving the names
    anew), and takes the brokers it names from then on: a cluster whose brokers were all
    replaced behind the same bootstrap address is found again. With ``none`` it keeps
    retrying the brokers it knows.

    Raises:
        ConfigError: unknown option or bad value; both ``_settings`` and a config.

    Example::

        async with AsyncKafkaClient(bootstrap_servers="127.0.0.1:9092") as client:
            resp = await client.request(MetadataRequest(topics=None))
    """

    def __init__(self, config: Mapping[str, Any] | None = None, *,
                 _settings: ClientSettings | None = None,
                 _options: Mapping[str, Option] | None = None, **kwargs: Any) -> None:
        settings = _settings
        if settings is None:
            settings = ClientSettings.of(ClientConfig(_options or CLIENT_OPTIONS, config,
                                                      **kwargs))
        elif config or kwargs:
            raise ConfigError("give AsyncKafkaClient either settings or a config, not both")
        super().__init__(settings)
        #: the public client this one serves, for the unclosed-client warning
        self.owner = "AsyncKafkaClient"

    # --- lifecycle --------------------------------------------------------------------

    async def close(self, timeout: float | None = None) -> None:
        """Close every connection and stop background work. Idempotent.

        Args:
            timeout: seconds to wait for connections to close cleanly (None: up to a
                second); connections still closing then are aborted.
        """
        if self._closed:
            return
        self._closed = True
        if self._metadata_task is not None:
            await cancel_and_wait([self._metadata_task])
        for fut in self._refresh_waiters:
            if not fut.done():
                fut.set_exception(IllegalStateError("client closed"))
                fut.exception()
        conns: list[BrokerConnection] = []
        for state in [*self._nodes.values(), *self._coordinator_nodes.values()]:
            if state.connecting is not None and not state.connecting.done():
                await cancel_and_wait([state.connecting])
            if state.conn is not None:
                conns.append(state.conn)
        if self._dropped_attempts:
            await cancel_and_wait(list(self._dropped_attempts))
        self._nodes.clear()
        self._coordinator_nodes.clear()
        self._dedicated.clear()
        closing = [asyncio.ensure_future(c.close()) for c in conns]
        closing.extend(self._closing_conns)
        if closing:
            # All at once: one after another, each could wait its second for a broker
            # that is gone.
            _, late = await asyncio.wait(closing, timeout=timeout)
            if late:
                for c in conns:
                    c.abort()
                await asyncio.wait(late, timeout=0.1)

    def __del__(self, _warn: Any = warnings.warn) -> None:
        # As asyncio's transports do: a client dropped unclosed is a leak the application
        # should hear of (its close cannot run here: it is a coroutine).
        if getattr(self, "_started", False) and not self._closed:
            _warn(f"unclosed {self.owner} {self!r}: call close() (or use 'async with')",
                  ResourceWarning, source=self)

    async def __aenter__(self) -> AsyncKafkaClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- requests ---------------------------------------------------------------------

    async def request(self, message: Request, *, node: int | None = None,
                      version: int | None = None, timeout: float | None = None) -> Any:
        """Send any protocol request and return its decoded response.

        Args:
            message: a request built from :mod:`kontrakt.protocol.messages`.
            node: the broker id to send to; None picks the least loaded broker.
            version: the API version; None negotiates the highest both sides support.
            timeout: seconds to wait for the response (default ``request.timeout.ms``).

        Returns:
            The response message, or None for a Produce request with ``acks=0``.
            Error codes inside the response are returned, not raised.

        Raises:
            KafkaConnectionError: the broker cannot be reached or the connection broke.
            KafkaTimeoutError: no response within the timeout.
            UnsupportedVersionError: no common version.
        """
        self._check()
        if not self._started:
            await self.start()
        return await self._send(message, node=node, version=version, timeout=timeout)

    async def request_with_retries(self, message: Request, *, node: int | None = None,
                                   timeout: float | None = None,
                                   deadline: float | None = None) -> Any:
        """Like :meth:`request`, but retries connection failures and timeouts on another
        (or the same) broker with backoff until ``deadline`` (monotonic seconds; default:
        now + ``request.timeout.ms``). Error codes in responses are still returned."""
        st = self.settings
        deadline = deadline or time.monotonic() + st.request_timeout
        backoff = Backoff(st.retry_backoff, st.retry_backoff_max)
        while True:
            remaining = deadline - time.monotonic()
            try:
                return await self.request(message, node=node, timeout=min(
                    timeout or remaining, remaining) if remaining > 0 else 0.001)
            except AuthenticationError:
                raise
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                delay = backoff.next()
                if time.monotonic() + delay >= deadline:
                    raise
                log.debug("retrying %s after %s", message.API_NAME, exc)
                if node is None or node >= 0:
                    # The broker may be gone for good: fresh metadata (or, when none of the
                    # known brokers answers, a rebootstrap) finds where to go next.
                    self.request_metadata_refresh()
                await asyncio.sleep(delay)

    def metrics(self) -> dict[str, Any]:
        """The requests this client sent through its request path (:meth:`request`,
        metadata refreshes, coordinator lookups), in the Java client's network metric
        names; call on the client's event loop. Totals count since the client was created,
        ``*-rate`` values are per second over the last minute, latencies in milliseconds.

        Returns:
            ``request-total`` / ``-rate``, ``response-total``, ``request-latency-avg`` /
            ``-max``, ``request-error-total`` (no response: connection lost, timed out),
            ``error-total`` / ``-rate`` (error codes in responses), ``errors-by-name``
            (Kafka's error name -> count), and under ``apis`` (API name, ``Metadata`` ->
            values) each API's ``request-total``, ``response-total``,
            ``request-error-total``, ``error-total``, ``request-latency-avg`` / ``-max``.
        """
        return self._metrics.snapshot()


class KafkaClient:
    """Blocking form of :class:`AsyncKafkaClient`, run on a private event-loop thread.

    Same options and methods; every method blocks until done. Must not be called from
    inside one of its own callbacks (raises :class:`IllegalStateError`).

    The constructor returns at once; the first call connects (waiting up to
    ``request.timeout.ms``, then raising NoBrokersAvailableError naming each broker tried
    and why). A client dropped without :meth:`close` is closed when garbage-collected.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self._thread = LoopThread("kontrakt-client")
        try:
            self._async: AsyncKafkaClient = self._thread.run(_build(config, kwargs))
        except BaseException:
            self._thread.stop()
            raise
        self._async.owner = "KafkaClient"
        self._thread.attach(self, self._async.close)

    @property
    def cluster(self) -> ClusterMetadata:
        """The metadata cache (empty until the first call has connected)."""
        return self._async.cluster

    def request(self, message: Request, *, node: int | None = None,
                version: int | None = None, timeout: float | None = None) -> Any:
        """Send any protocol request and return its decoded response; see
        :meth:`AsyncKafkaClient.request`."""
        return self._thread.run(self._async.request(message, node=node, version=version,
                                                    timeout=timeout))

    def refresh_metadata(self, topics: Iterable[str] | None = None) -> ClusterMetadata:
        """Refresh metadata now; see :meth:`AsyncKafkaClient.refresh_metadata`."""
        return self._thread.run(self._async.refresh_metadata(topics))

    def coordinator(self, key: str, key_type: str = "group", *, refresh: bool = False) -> int:
        """Find the coordinator node for a group or transactional id (cached; ``refresh``
        looks it up again); see :meth:`AsyncKafkaClient.coordinator`."""
        return self._thread.run(ensure_started(
            self._async, self._async.coordinator(key, key_type, refresh=refresh)))

    def metrics(self) -> dict[str, Any]:
        """See :meth:`AsyncKafkaClient.metrics`."""
        if not self._thread.running:
            return self._async.metrics()  # closed: nothing updates them any more

        async def on_loop() -> dict[str, Any]:
            return self._async.metrics()
        return self._thread.run(on_loop())

    def close(self, timeout: float | None = None) -> None:
        """Close connections and stop the loop thread. Idempotent.

        Args:
            timeout: seconds the close may take (None: about a second per broker at most,
                all brokers at once); bounded even with every broker gone.
        """
        close_sync(self._thread, self._async.close, timeout)

    def __enter__(self) -> KafkaClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


async def _build(config: Mapping[str, Any] | None, kwargs: dict[str, Any]) -> AsyncKafkaClient:
    return AsyncKafkaClient(config, **kwargs)


_ = (Response, ssl)
