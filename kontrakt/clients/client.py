"""The network core every client is built on: connections per broker, bootstrap, API version
negotiation, a metadata cache with refresh and backoff, and the public ``request()`` escape
hatch that sends any protocol message.
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
import time
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

from kontrakt._config import COMMON_OPTIONS, SECURITY_OPTIONS, ClientConfig, Option
from kontrakt.clients._client_metrics import ClientMetrics
from kontrakt.clients._net.connection import BrokerConnection
from kontrakt.clients._net.security import TlsHandshakeError
from kontrakt.clients._settings import ClientSettings
from kontrakt.clients._sync import LoopThread, close_sync, ensure_started
from kontrakt.clients._wait import cancel_and_wait, wait_event, wait_within
from kontrakt.clients.cluster import BrokerInfo, ClusterMetadata
from kontrakt.errors import (
    AuthenticationError,
    ConfigError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NoBrokersAvailableError,
)
from kontrakt.protocol.errors import for_code
from kontrakt.protocol.messages import (
    FindCoordinatorRequest,
    MetadataRequest,
)
from kontrakt.protocol.spec import Request, Response

__all__ = ["CLIENT_OPTIONS", "COORDINATOR_ID_BASE", "AsyncKafkaClient", "Backoff", "KafkaClient"]

log = logging.getLogger("kontrakt.client")

CLIENT_OPTIONS: dict[str, Option] = {**COMMON_OPTIONS, **SECURITY_OPTIONS}

_COORDINATOR_TYPES = {"group": 0, "transaction": 1}

#: A dedicated coordinator connection is labelled ``COORDINATOR_ID_BASE - broker id`` (the
#: Java client's ``Integer.MAX_VALUE - id``), so that logs tell it from the ordinary one.
COORDINATOR_ID_BASE = 2**31 - 1


class Backoff:
    """Exponential backoff with jitter: ``initial * 2**n`` capped at ``maximum``, +-20%."""

    __slots__ = ("attempts", "initial", "maximum")

    def __init__(self, initial: float, maximum: float) -> None:
        self.initial = initial
        self.maximum = max(initial, maximum)
        self.attempts = 0

    def next(self) -> float:
        """The next delay in seconds."""
        base = min(self.maximum, self.initial * (2 ** min(self.attempts, 30)))
        self.attempts += 1
        return float(base * random.uniform(0.8, 1.2))

    def reset(self) -> None:
        self.attempts = 0


class _NodeState:
    __slots__ = ("backoff", "conn", "connecting", "next_attempt")

    def __init__(self, backoff: Backoff) -> None:
        self.conn: BrokerConnection | None = None
        self.connecting: asyncio.Task[BrokerConnection] | None = None
        self.backoff = backoff
        self.next_attempt = 0.0


class AsyncKafkaClient:
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
    ``connections.max.idle.ms``, ``security.protocol``, ``ssl.*``, ``sasl.*``.

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
        #: the connection, bootstrap and security settings, parsed once
        self.settings = settings
        #: the validated configuration (every option of the client that owns this core)
        self.config = settings.config
        self._bootstrap = settings.bootstrap
        self._settings = settings.connection
        self.cluster = ClusterMetadata()
        self._nodes: dict[int, _NodeState] = {}
        # Dedicated coordinator connections, by broker id: a broker answers one connection's
        # requests in order, so a commit or heartbeat sent on the connection that carries a
        # long-poll Fetch would wait out fetch.max.wait.ms behind it.
        self._coordinator_nodes: dict[int, _NodeState] = {}
        #: coordinator keys served over a dedicated connection -> their broker id
        self._dedicated: dict[tuple[int, str], int] = {}
        self._closing_conns: set[asyncio.Task[None]] = set()
        self._topics: set[str] = set()
        self._all_topics = False
        #: (all topics?, topic names) of the last successful metadata request
        self._last_asked: tuple[bool, frozenset[str]] = (False, frozenset())
        self._metadata_task: asyncio.Task[None] | None = None
        self._refresh_wanted: asyncio.Event | None = None
        self._refresh_waiters: list[asyncio.Future[None]] = []
        self._bg_error: BaseException | None = None
        self._coordinators: dict[tuple[int, str], int] = {}
        self._started = False
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        #: the public client this one serves, for the unclosed-client warning
        self.owner = "AsyncKafkaClient"
        self._metrics = ClientMetrics()

    # --- lifecycle ------------------------------------------------------------------

    async def start(self, timeout: float | None = None, *,
                    budget_name: str | None = None) -> None:
        """Connect to a bootstrap server and load cluster metadata.

        Args:
            timeout: seconds to keep trying (default ``request.timeout.ms``).
            budget_name: what the error message calls that limit (default
                ``request.timeout.ms=...``), e.g. ``max.block.ms=...`` for a producer.

        Raises:
            NoBrokersAvailableError: no broker answered within the timeout; the message
                names each broker tried and why it failed.
        """
        if self._closed:
            raise IllegalStateError("client is closed")
        if self._started:
            return
        self._loop = asyncio.get_running_loop()
        if self._refresh_wanted is None:
            self._refresh_wanted = asyncio.Event()
        await self._refresh_metadata_now(timeout, budget_name)
        if self._closed:
            raise IllegalStateError("client is closed")
        if self._started:  # another caller's start finished first
            return
        self._started = True
        self._metadata_task = self._loop.create_task(self._metadata_loop(),
                                                     name="kontrakt-metadata")

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

    def _check(self) -> None:
        if self._closed:
            raise IllegalStateError("client is closed")
        if self._bg_error is not None:
            err, self._bg_error = self._bg_error, None
            raise err

    # --- connections ----------------------------------------------------------------

    def _address_of(self, node_id: int) -> tuple[str, int]:
        if node_id < 0:
            return self._bootstrap[(-node_id - 1) % len(self._bootstrap)]
        broker = self.cluster.brokers.get(node_id)
        if broker is None:
            raise KafkaConnectionError(f"unknown broker id {node_id}")
        return broker.host, broker.port

    async def connection(self, node_id: int) -> BrokerConnection:
        """The open connection to ``node_id``, connecting (with reconnect backoff) if needed.

        Negative ids are the bootstrap servers (-1 is the first).

        Raises:
            KafkaConnectionError: the broker is unknown or cannot be reached now.
        """
        return await self._pooled(self._nodes, node_id, node_id)

    async def _pooled(self, pool: dict[int, _NodeState], node_id: int,
                      label: int) -> BrokerConnection:
        """The connection to broker ``node_id`` kept in ``pool`` (connecting if needed);
        ``label`` is the id the connection calls itself by."""
        self._check()
        state = pool.get(node_id)
        if state is None:
            state = _NodeState(Backoff(self.settings.reconnect_backoff,
                                       self.settings.reconnect_backoff_max))
            pool[node_id] = state
        if state.conn is not None and state.conn.connected:
            return state.conn
        if state.connecting is None or state.connecting.done():
            delay = state.next_attempt - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
                # Another caller may have waited out the same backoff and connected, or
                # be connecting: a second attempt's connection would replace the first in
                # the pool, and the first would never be closed.
                if state.conn is not None and state.conn.connected:
                    return state.conn
            if state.connecting is None or state.connecting.done():
                state.connecting = asyncio.get_running_loop().create_task(
                    self._connect(node_id, label, state))
        return await asyncio.shield(state.connecting)

    async def _connect(self, node_id: int, label: int, state: _NodeState) -> BrokerConnection:
        host, port = self._address_of(node_id)
        conn = BrokerConnection(host, port, label, self._settings)
        try:
            await conn.connect()
        except BaseException:
            state.next_attempt = time.monotonic() + state.backoff.next()
            raise
        state.backoff.reset()
        state.conn = conn
        conn.on_close(lambda c: self._forget(state, c))
        log.debug("connected to node %s at %s:%s", label, host, port)
        return conn

    @staticmethod
    def _forget(state: _NodeState, conn: BrokerConnection) -> None:
        if state.conn is conn:
            state.conn = None

    def least_loaded_node(self) -> int:
        """A node to send a request that any broker can answer: a connected broker with the
        fewest requests in flight, else a known broker, else a bootstrap server."""
        best: tuple[int, int] | None = None
        for node_id, state in self._nodes.items():
            if node_id >= 0 and node_id not in self.cluster.brokers:
                continue
            if state.conn is not None and state.conn.connected:
                load = state.conn.in_flight
                if best is None or load < best[1]:
                    best = (node_id, load)
        if best is not None:
            return best[0]
        now = time.monotonic()
        candidates = [n for n in self.cluster.brokers
                      if n not in self._nodes or self._nodes[n].next_attempt <= now]
        if candidates:
            return random.choice(candidates)
        if self.cluster.brokers:
            return min(self.cluster.brokers,
                       key=lambda n: self._nodes[n].next_attempt if n in self._nodes else 0)
        # A bootstrap server not tried yet, else the one whose reconnect backoff ends
        # first: a dead one is not retried while another has not been tried at all.
        ids = [-1 - i for i in range(len(self._bootstrap))]
        random.shuffle(ids)
        return min(ids, key=lambda n: self._nodes[n].next_attempt if n in self._nodes else 0)

    # --- requests -------------------------------------------------------------------

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

    async def _send(self, message: Request, *, node: int | None = None,
                    version: int | None = None, timeout: float | None = None) -> Any:
        target = self.least_loaded_node() if node is None else node
        conn = await self.connection(target)
        expect = not (message.API_KEY == 0 and getattr(message, "acks", 1) == 0)
        return await self._metrics.timed(message.API_NAME, conn.send(
            message, version=version, timeout=timeout, expect_response=expect))

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
                if node is not None and node >= 0:
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

    # --- metadata -------------------------------------------------------------------

    def add_topics(self, topics: Iterable[str]) -> None:
        """Track these topics' metadata from now on (refreshes when new ones appear)."""
        new = set(topics) - self._topics
        if new:
            self._topics |= new
            self.request_metadata_refresh()

    def track_all_topics(self, enabled: bool = True) -> None:
        """Fetch metadata for every topic in the cluster on each refresh."""
        self._all_topics = enabled

    def request_metadata_refresh(self) -> None:
        """Ask the metadata loop to refresh soon (after retry backoff)."""
        if self._refresh_wanted is not None:
            self._refresh_wanted.set()

    async def refresh_metadata(self, topics: Iterable[str] | None = None) -> ClusterMetadata:
        """Refresh metadata now (tracking ``topics`` too) and return the cache.

        Raises:
            NoBrokersAvailableError / KafkaTimeoutError: no broker answered in time.
        """
        self._check()
        if topics is not None:
            self._topics |= set(topics)
        if not self._started:
            await self.start()
            return self.cluster
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self._refresh_waiters.append(fut)
        self.request_metadata_refresh()
        await fut
        return self.cluster

    async def _refresh_metadata_now(self, timeout: float | None = None,
                                    budget_name: str | None = None) -> None:
        st = self.settings
        if timeout is None:
            timeout = st.request_timeout
            budget_name = budget_name or f"request.timeout.ms={self.config['request.timeout.ms']}"
        deadline = time.monotonic() + timeout
        backoff = Backoff(st.retry_backoff, st.retry_backoff_max)
        #: address -> why it failed last, in the order first tried
        tried: dict[str, str] = {}
        while True:
            node = self.least_loaded_node()
            all_topics = self._all_topics
            asked = frozenset(self._topics)
            topics = None if all_topics else [
                MetadataRequest.MetadataRequestTopic(name=t) for t in sorted(asked)]
            req = MetadataRequest(topics=topics, allow_auto_topic_creation=False)
            remaining = max(0.001, deadline - time.monotonic())
            try:
                # Bounded as a whole: connecting has a timeout of its own
                # (socket.connection.setup.timeout.ms) that may be longer.
                resp = await wait_within(
                    self._send(req, node=node, timeout=remaining), remaining)
                if resp.error_code:
                    raise for_code(resp.error_code)("metadata request failed")
                self.cluster.update(resp, all_topics=all_topics)
                self._last_asked = (all_topics, asked)
                return
            except AuthenticationError:
                # Refused credentials or certificate fail the same way on every retry.
                raise
            except (KafkaConnectionError, KafkaTimeoutError, asyncio.TimeoutError,
                    TimeoutError) as exc:
                address = self._describe_node(node)
                # A plain TimeoutError is this loop's own deadline cutting an attempt short:
                # it says less than an earlier failure of the same broker (e.g. a TLS error).
                if address not in tried or isinstance(exc, KafkaError) \
                        or not isinstance(exc, TimeoutError):
                    tried[address] = _reason(exc, remaining)
                delay = backoff.next()
                if time.monotonic() + delay >= deadline:
                    raise NoBrokersAvailableError(
                        f"no broker reachable within {budget_name or f'{timeout}s'}: "
                        + ", ".join(f"{addr} ({why})" for addr, why in tried.items())
                    ) from exc
                await asyncio.sleep(delay)

    def _describe_node(self, node: int) -> str:
        try:
            host, port = self._address_of(node)
        except KafkaConnectionError:
            return f"node {node}"
        return f"{host}:{port}"

    def _asks_new_topics(self) -> bool:
        all_topics, asked = self._last_asked
        if all_topics:
            return False
        return self._all_topics or not self._topics <= asked

    async def _metadata_loop(self) -> None:
        assert self._refresh_wanted is not None
        max_age = self.settings.metadata_max_age
        min_gap = self.settings.retry_backoff
        try:
            while True:
                age = time.monotonic() - self.cluster.updated_at
                await wait_event(self._refresh_wanted, max(0.0, max_age - age))
                # Coalesce bursts of refresh requests (e.g. many partitions losing their
                # leader at once) into one request per retry.backoff.ms. A refresh for topics
                # the last one did not ask about is not a repeat: it goes at once (a consumer
                # subscribing right after start must not wait out the gap to join).
                gap = min_gap - (time.monotonic() - self.cluster.updated_at)
                if gap > 0 and not self._asks_new_topics():
                    await asyncio.sleep(gap)
                self._refresh_wanted.clear()
                waiters, self._refresh_waiters = self._refresh_waiters, []
                try:
                    await self._refresh_metadata_now()
                except KafkaError as exc:
                    log.warning("metadata refresh failed: %s", exc)
                    for w in waiters:
                        if not w.done():
                            w.set_exception(exc)
                    continue
                for w in waiters:
                    if not w.done():
                        w.set_result(None)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # supervised: surfaced at the next call
            log.exception("metadata loop died")
            self._bg_error = exc

    def broker(self, node_id: int) -> BrokerInfo | None:
        """The advertised broker for ``node_id``."""
        return self.cluster.brokers.get(node_id)

    async def coordinator(self, key: str, key_type: str = "group", *,
                          refresh: bool = False) -> int:
        """The node id of the group or transaction coordinator for ``key`` (cached).

        Raises:
            BrokerResponseError: FindCoordinator returned an error (e.g.
                COORDINATOR_NOT_AVAILABLE, retriable).
        """
        ck = (_COORDINATOR_TYPES[key_type], key)
        if not refresh and ck in self._coordinators:
            return self._coordinators[ck]
        st = self.settings
        deadline = time.monotonic() + st.request_timeout
        backoff = Backoff(st.retry_backoff, st.retry_backoff_max)
        while True:
            try:
                conn = await self.connection(self.least_loaded_node())
                version = conn.negotiate(FindCoordinatorRequest)
                # v4 (KIP-699) batches keys; older versions carry a single key.
                req = (FindCoordinatorRequest(key_type=ck[0], coordinator_keys=[key])
                       if version >= 4 else FindCoordinatorRequest(key=key, key_type=ck[0]))
                resp = await self._metrics.timed(req.API_NAME, conn.send(
                    req, version=version, timeout=max(0.001, deadline - time.monotonic())))
                break
            except AuthenticationError:
                raise
            except (KafkaConnectionError, KafkaTimeoutError):
                delay = backoff.next()
                if time.monotonic() + delay >= deadline:
                    raise
                await asyncio.sleep(delay)
        if resp.coordinators:
            c = resp.coordinators[0]
            code, node_id, host, port = c.error_code, c.node_id, c.host, c.port
        else:
            code, node_id, host, port = resp.error_code, resp.node_id, resp.host, resp.port
        if code:
            raise for_code(code)(f"FindCoordinator({key_type} {key!r})")
        if node_id not in self.cluster.brokers:
            self.cluster.brokers[node_id] = BrokerInfo(node_id, host, port)
        self._coordinators[ck] = node_id
        return int(node_id)

    async def coordinator_connection(self, key: str, key_type: str = "group"
                                     ) -> BrokerConnection:
        """A connection to the coordinator of ``key`` of its own, apart from the one that
        carries Fetch and Produce requests to that broker (as the Java client does).

        A broker answers one connection's requests in order, so a heartbeat or commit on
        the shared connection would wait behind a long-poll Fetch for up to
        ``fetch.max.wait.ms``. The coordinator is looked up (and cached) as by
        :meth:`coordinator`; every key whose coordinator is the same broker shares the one
        dedicated connection. :meth:`forget_coordinator` closes it once no key uses it, and
        :meth:`close` closes it.

        Args:
            key: the group id (or transactional id).
            key_type: ``"group"`` or ``"transaction"``.

        Returns:
            The connected :class:`BrokerConnection`.

        Raises:
            BrokerResponseError: FindCoordinator returned an error.
            KafkaConnectionError: the coordinator cannot be reached now.
            KafkaTimeoutError: FindCoordinator was not answered within ``request.timeout.ms``.
        """
        self._check()
        node = await self.coordinator(key, key_type)
        ck = (_COORDINATOR_TYPES[key_type], key)
        previous = self._dedicated.get(ck)
        self._dedicated[ck] = node
        if previous is not None and previous != node:
            self._release_coordinator_connection(previous)
        return await self._pooled(self._coordinator_nodes, node, COORDINATOR_ID_BASE - node)

    def forget_coordinator(self, key: str, key_type: str = "group") -> None:
        """Drop a cached coordinator (after NOT_COORDINATOR or a connection failure), and
        close its dedicated connection (see :meth:`coordinator_connection`) unless another
        key still uses it; requests in flight on it fail with KafkaConnectionError."""
        ck = (_COORDINATOR_TYPES[key_type], key)
        self._coordinators.pop(ck, None)
        node = self._dedicated.pop(ck, None)
        if node is not None:
            self._release_coordinator_connection(node)

    def _release_coordinator_connection(self, node: int) -> None:
        if node in self._dedicated.values():
            return
        state = self._coordinator_nodes.get(node)
        if state is None or state.conn is None:
            return
        conn, state.conn = state.conn, None
        # Closing waits for the transport; nobody waits for that here.
        task = asyncio.get_running_loop().create_task(conn.close())
        self._closing_conns.add(task)
        task.add_done_callback(self._closing_conns.discard)


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


def _reason(exc: BaseException, waited: float) -> str:
    """Why a broker could not be used, in a few words (for NoBrokersAvailableError)."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, TlsHandshakeError):  # its message says what to check
            return str(cause)
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, OSError) and not isinstance(cause, TimeoutError) \
                and cause.strerror:
            return cause.strerror.lower()
        cause = cause.__cause__
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return f"no answer within {waited:.3g}s"
    return str(exc)


async def _build(config: Mapping[str, Any] | None, kwargs: dict[str, Any]) -> AsyncKafkaClient:
    return AsyncKafkaClient(config, **kwargs)


_ = (Response, ssl)
