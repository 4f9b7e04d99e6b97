"""The client core's connections: one per broker, opened on demand with reconnect backoff,
routing to the least loaded broker, and sending a message over them (the lowest layer of
:class:`~kontrakt.clients.client.AsyncKafkaClient`).

:class:`ClientConnections` holds the settings, the metadata cache the routing reads, the
connection pool (a :class:`_NodeState` per broker id; negative ids are the bootstrap
servers) and whether the client is closed or its background work failed. :class:`Backoff`
is the exponential backoff with jitter that every retry loop of the clients uses.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from typing import Any

from kontrakt.clients._client_metrics import ClientMetrics
from kontrakt.clients._net.connection import BrokerConnection
from kontrakt.clients._settings import ClientSettings
from kontrakt.clients.cluster import BrokerInfo, ClusterMetadata
from kontrakt.errors import IllegalStateError, KafkaConnectionError
from kontrakt.protocol.spec import Request

__all__ = ["Backoff", "ClientConnections"]

log = logging.getLogger("kontrakt.client")


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
    __slots__ = ("backoff", "conn", "connecting", "failure", "next_attempt")

    def __init__(self, backoff: Backoff) -> None:
        self.conn: BrokerConnection | None = None
        self.connecting: asyncio.Task[BrokerConnection] | None = None
        self.backoff = backoff
        self.next_attempt = 0.0
        #: why the last attempt to connect failed, until one succeeds
        self.failure: Exception | None = None


class ClientConnections:
    """Connections, routing and sending; the base of the client core's layers."""

    def __init__(self, settings: ClientSettings) -> None:
        #: the connection, bootstrap and security settings, parsed once
        self.settings = settings
        #: the validated configuration (every option of the client that owns this core)
        self.config = settings.config
        self._bootstrap = settings.bootstrap
        self._settings = settings.connection
        self.cluster = ClusterMetadata()
        self._nodes: dict[int, _NodeState] = {}
        #: connection attempts _drop_node dropped while they were opening (close ends
        #: those still running)
        self._dropped_attempts: set[asyncio.Task[BrokerConnection]] = set()
        #: rebootstrapping (KIP-899): requests any broker can answer go to the bootstrap
        #: servers until metadata is loaded from them
        self._rebootstrapping = False
        self._bg_error: BaseException | None = None
        self._started = False
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._metrics = ClientMetrics()

    def _check(self) -> None:
        if self._closed:
            raise IllegalStateError("client is closed")
        if self._bg_error is not None:
            err, self._bg_error = self._bg_error, None
            raise err

    # --- connections ------------------------------------------------------------------

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

    def connect_failure(self, node_id: int) -> Exception | None:
        """Why the last attempt to connect to broker ``node_id`` failed, while no attempt
        has succeeded since (None otherwise): what a caller that gave up waiting out the
        reconnect backoff met, in effect."""
        state = self._nodes.get(node_id)
        return None if state is None else state.failure

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
                if pool.get(node_id) is not state:
                    # _drop_node (the broker moved, or a rebootstrap) or close() forgot
                    # the node meanwhile: a connection made for this state would be in no
                    # pool, so close() would never close it.
                    return await self._pooled(pool, node_id, label)
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
        except BaseException as exc:
            state.next_attempt = time.monotonic() + state.backoff.next()
            if isinstance(exc, Exception):
                state.failure = exc
            raise
        if state.connecting is not asyncio.current_task():
            # _drop_node dropped this attempt while it was opening: the address may be an
            # old one, and a newer attempt may own the slot already.
            conn.abort()
            raise KafkaConnectionError(f"connection to {host}:{port} dropped: the node's "
                                       "address changed while it was opening")
        state.backoff.reset()
        state.failure = None
        state.conn = conn
        conn.on_close(lambda c: self._forget(state, c))
        log.debug("connected to node %s at %s:%s", label, host, port)
        return conn

    def _has_open_connection(self) -> bool:
        """A connection to some broker (or bootstrap server) is open now."""
        return any(state.conn is not None and state.conn.connected
                   for state in self._nodes.values())

    @staticmethod
    def _forget(state: _NodeState, conn: BrokerConnection) -> None:
        if state.conn is conn:
            state.conn = None

    def _drop_node(self, node_id: int) -> None:
        """Forget node ``node_id``'s connection and reconnect backoff: the next connection
        to it goes to the address it has then (a bootstrap server's name resolved anew).

        A connection still being opened is dropped once it opens (:meth:`_connect` sees it
        was superseded), since its address may be the old one. Its task is not cancelled:
        callers wait on it (shielded) and would take the cancellation for their own.
        """
        state = self._nodes.pop(node_id, None)
        if state is None:
            return
        if state.conn is not None:
            state.conn.abort()
        if state.connecting is not None and not state.connecting.done():
            self._dropped_attempts.add(state.connecting)
            state.connecting.add_done_callback(self._dropped_attempts.discard)
        state.connecting = None

    def _drop_moved_brokers(self, before: dict[int, BrokerInfo]) -> None:
        """After a metadata update: drop the connections of brokers whose id now has another
        address (a broker replaced under the same id), so that none is used for the new
        one."""
        brokers = self.cluster.brokers
        for node_id, old in before.items():
            new = brokers.get(node_id)
            if new is not None and (new.host, new.port) != (old.host, old.port):
                self._drop_node(node_id)

    def _all_known_brokers_unavailable(self) -> bool:
        """No known broker is connected, being connected to, or past its reconnect backoff
        (KIP-899's condition to rebootstrap); False while no broker is known."""
        if not self.cluster.brokers:
            return False
        now = time.monotonic()
        for node_id in self.cluster.brokers:
            state = self._nodes.get(node_id)
            if state is None or state.next_attempt <= now \
                    or (state.conn is not None and state.conn.connected) \
                    or (state.connecting is not None and not state.connecting.done()):
                return False
        return True

    def least_loaded_node(self) -> int:
        """A node to send a request that any broker can answer: a connected broker with the
        fewest requests in flight, else a known broker, else a bootstrap server (only a
        bootstrap server while the client rebootstraps)."""
        if self._rebootstrapping:
            return self._bootstrap_node()
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
        return self._bootstrap_node()

    def _bootstrap_node(self) -> int:
        """A bootstrap server to send to: a connected one, else one to connect to."""
        ids = [-1 - i for i in range(len(self._bootstrap))]
        for node_id in ids:
            state = self._nodes.get(node_id)
            if state is not None and state.conn is not None and state.conn.connected:
                return node_id
        # A bootstrap server not tried yet, else the one whose reconnect backoff ends
        # first: a dead one is not retried while another has not been tried at all.
        random.shuffle(ids)
        return min(ids, key=lambda n: self._nodes[n].next_attempt if n in self._nodes else 0)

    # --- sending ----------------------------------------------------------------------

    async def _send(self, message: Request, *, node: int | None = None,
                    version: int | None = None, timeout: float | None = None) -> Any:
        target = self.least_loaded_node() if node is None else node
        conn = await self.connection(target)
        expect = not (message.API_KEY == 0 and getattr(message, "acks", 1) == 0)
        return await self._metrics.timed(message.API_NAME, conn.send(
            message, version=version, timeout=timeout, expect_response=expect))
