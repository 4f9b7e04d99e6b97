"""The client core's coordinators: FindCoordinator lookups (cached) for group and
transaction coordinators, and a dedicated connection to each coordinator broker (a layer of
:class:`~kontrakt.clients.client.AsyncKafkaClient`).

A broker answers one connection's requests in order, so a commit or heartbeat sent on the
connection that carries a long-poll Fetch would wait out ``fetch.max.wait.ms`` behind it:
group and transaction code talks to its coordinator over a connection of its own.
"""

from __future__ import annotations

import asyncio
import time

from kontrakt.clients._client_connections import Backoff, _NodeState
from kontrakt.clients._client_metadata import ClientMetadataRefresh
from kontrakt.clients._net.connection import BrokerConnection
from kontrakt.clients._settings import ClientSettings
from kontrakt.clients.cluster import BrokerInfo
from kontrakt.errors import AuthenticationError, KafkaConnectionError, KafkaTimeoutError
from kontrakt.protocol.errors import for_code
from kontrakt.protocol.messages import FindCoordinatorRequest

__all__ = ["COORDINATOR_ID_BASE", "ClientCoordinators"]

_COORDINATOR_TYPES = {"group": 0, "transaction": 1}

#: A dedicated coordinator connection is labelled ``COORDINATOR_ID_BASE - broker id`` (the
#: Java client's ``Integer.MAX_VALUE - id``), so that logs tell it from the ordinary one.
COORDINATOR_ID_BASE = 2**31 - 1


class ClientCoordinators(ClientMetadataRefresh):
    """Coordinator lookups and their dedicated connections."""

    def __init__(self, settings: ClientSettings) -> None:
        super().__init__(settings)
        self._coordinators: dict[tuple[int, str], int] = {}
        # Dedicated coordinator connections, by broker id: a broker answers one connection's
        # requests in order, so a commit or heartbeat sent on the connection that carries a
        # long-poll Fetch would wait out fetch.max.wait.ms behind it.
        self._coordinator_nodes: dict[int, _NodeState] = {}
        #: coordinator keys served over a dedicated connection -> their broker id
        self._dedicated: dict[tuple[int, str], int] = {}
        self._closing_conns: set[asyncio.Task[None]] = set()

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
