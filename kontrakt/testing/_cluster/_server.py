"""Listeners, connections and request dispatch, with the injected faults applied.

Each broker is one asyncio server on 127.0.0.1. A connection reads one request at a time and
answers it before reading the next, as a Kafka broker does (it mutes a channel until the
response is sent), so a long-polling Fetch holds back the requests queued behind it on the
same connection exactly as it would against Kafka.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import ssl
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from kontrakt.errors import KontraktError, UnsupportedVersionError
from kontrakt.protocol import errors as E
from kontrakt.protocol.headers import decode_request, encode_response
from kontrakt.protocol.messages import (
    ApiVersionsResponse,
    FindCoordinatorResponse,
    SaslAuthenticateResponse,
    SaslHandshakeResponse,
)
from kontrakt.protocol.spec import Response, Struct, registry
from kontrakt.testing._cluster._acls import ANONYMOUS
from kontrakt.testing._cluster._admin_apis import PartitionAdmin
from kontrakt.testing._cluster._authorize import SecurityApis
from kontrakt.testing._cluster._consumer_groups import ConsumerGroupCoordinator
from kontrakt.testing._cluster._data import DataHandlers
from kontrakt.testing._cluster._faults import error_response
from kontrakt.testing._cluster._fetch import FetchHandler
from kontrakt.testing._cluster._groups import GroupCoordinator
from kontrakt.testing._cluster._sasl import (
    SaslFailure,
    SaslSession,
    ScramAdmin,
    ScramCredential,
)
from kontrakt.testing._cluster._state import ClusterState, RequestContext
from kontrakt.testing._cluster._topics import TopicHandlers
from kontrakt.testing._cluster._txn import TransactionCoordinator

__all__ = ["DROP_CONNECTION", "ClusterServer"]

#: An injected "error" that closes the connection instead of answering (librdkafka's
#: RD_KAFKA_RESP_ERR__TRANSPORT, -195, means the same to its mock cluster).
DROP_CONNECTION: Final = -195
_API_VERSIONS = 18
_SASL_HANDSHAKE, _SASL_AUTHENTICATE = 17, 36
_MAX_FRAME = 100 * 1024 * 1024

Handler = Callable[[RequestContext, int, Any], Any]

_log = logging.getLogger("kontrakt.testing.cluster")


@dataclass(slots=True)
class _Connection:
    """Per-connection state: SASL progress."""

    authenticated: bool
    sasl: SaslSession | None = None
    close_after: bool = False


class _Close(Exception):
    """Close the connection without answering (unknown API or version, injected drop)."""


class ClusterServer:
    """The brokers' listeners and the table of request handlers."""

    def __init__(self, state: ClusterState, ssl_context: ssl.SSLContext | None = None) -> None:
        self.state = state
        self.ssl_context = ssl_context
        data = DataHandlers(state)
        fetch = FetchHandler(state)
        topics = TopicHandlers(state)
        txns = TransactionCoordinator(state)
        groups = GroupCoordinator(state)
        kip848 = ConsumerGroupCoordinator(state, groups)
        groups.kip848 = kip848
        self.kip848 = kip848
        state.txns = txns
        state.groups = groups
        self.partition_admin = partition_admin = PartitionAdmin(state)
        self.handlers: dict[int, Handler] = {
            0: data.produce, 1: fetch.fetch, 2: data.list_offsets, 3: data.metadata,
            8: groups.offset_commit, 9: groups.offset_fetch, 10: self.find_coordinator,
            11: groups.join_group, 12: groups.heartbeat, 13: groups.leave_group,
            14: groups.sync_group, 15: groups.describe_groups, 16: groups.list_groups,
            18: self.api_versions, 19: topics.create_topics, 20: topics.delete_topics,
            21: data.delete_records, 22: txns.init_producer_id, 23: data.offset_for_leader_epoch,
            24: txns.add_partitions, 25: txns.add_offsets, 26: txns.end_txn,
            28: txns.txn_offset_commit, 32: topics.describe_configs, 33: topics.alter_configs,
            37: topics.create_partitions, 42: groups.delete_groups,
            44: topics.incremental_alter_configs, 47: groups.offset_delete,
            17: self._sasl_placeholder, 36: self._sasl_placeholder,
            60: data.describe_cluster, 35: data.describe_log_dirs,
            61: data.describe_producers, 65: txns.describe_transactions,
            66: txns.list_transactions, 68: kip848.heartbeat, 69: kip848.describe,
            43: partition_admin.elect_leaders, 57: partition_admin.update_features,
            45: partition_admin.alter_partition_reassignments,
            46: partition_admin.list_partition_reassignments,
            75: partition_admin.describe_topic_partitions,
        }
        # SCRAM credentials: made for the configured users, then kept by the admin APIs.
        self._credentials: dict[tuple[str, str], ScramCredential] = {
            (mech, user): ScramCredential.make(mech, password)
            for user, password in (state.settings.sasl_users or {}).items()
            for mech in state.settings.sasl_mechanisms if mech.startswith("SCRAM")}
        scram = ScramAdmin(self._credentials)
        self.handlers[50] = scram.describe
        self.handlers[51] = scram.alter
        # ACLs (and their checks around the handlers above), quotas, tokens, telemetry
        self.security = SecurityApis.install(state, self.handlers)
        specs = registry()
        # Versions this server answers: Kontrakt's declarations (every version it can decode).
        self.versions = {k: (specs[k].valid.lo, specs[k].valid.hi or specs[k].valid.lo)
                         for k in self.handlers}
        self.servers: dict[int, asyncio.base_events.Server] = {}
        self.connections: dict[int, set[asyncio.StreamWriter]] = {
            n: set() for n in state.brokers}
        self._tasks: set[asyncio.Task[None]] = set()
        self.request_counts: dict[int, int] = {}
        self.request_versions: dict[tuple[int, int], int] = {}
        #: (api key, version, exception) of every request a handler failed on
        self.internal_errors: list[tuple[int, int, BaseException]] = []

    async def start(self, ports: dict[int, int]) -> None:
        """Open every broker's listener (port 0: any free port)."""
        try:
            for node_id, broker in self.state.brokers.items():
                server = await asyncio.start_server(
                    functools.partial(self._serve, node_id), "127.0.0.1",
                    ports.get(node_id, 0), ssl=self.ssl_context)
                self.servers[node_id] = server
                broker.port = server.sockets[0].getsockname()[1]
        except BaseException:
            for server in self.servers.values():
                server.close()
                await server.wait_closed()
            raise
        self._tasks.add(asyncio.get_running_loop().create_task(self._ticker()))

    async def stop(self) -> None:
        """Close listeners, connections and background tasks."""
        for task in self._tasks:
            task.cancel()
        for server in self.servers.values():
            server.close()
        for node_id in self.connections:
            self.drop_connections(node_id)
        for server in self.servers.values():
            await server.wait_closed()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def broker_down(self, node_id: int) -> None:
        """Close the broker's connections; new ones are closed as soon as they are accepted.

        The listener stays open on purpose: closing an asyncio server while it accepts a
        connection can leave that connection attached to nothing and open forever
        (CPython 3.11's ``Server._attach`` asserts once the server is closed), and a test
        broker must never hang a client. Clients see a connection failure either way.
        """
        self.state.brokers[node_id].up = False
        self.drop_connections(node_id)
        self.state.notify()

    def broker_up(self, node_id: int) -> None:
        """Serve connections to the broker again."""
        self.state.brokers[node_id].up = True

    def drop_connections(self, node_id: int) -> None:
        """Close every client connection to a broker."""
        for writer in list(self.connections[node_id]):
            writer.transport.abort()

    async def _ticker(self) -> None:
        """Session expiry, rebalance timeouts and transaction timeouts."""
        while True:
            await asyncio.sleep(0.02)
            self.state.groups.tick()
            self.kip848.tick()
            self.state.txns.expire()

    # --- one connection ---------------------------------------------------------------------
    async def _serve(self, node_id: int, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        broker = self.state.brokers[node_id]
        conns = self.connections[node_id]
        if not broker.up:
            writer.transport.abort()
            return
        conns.add(writer)
        peer = writer.get_extra_info("peername")
        host = peer[0] if isinstance(peer, tuple) else "127.0.0.1"
        conn = _Connection(authenticated=self.state.settings.sasl_users is None)
        try:
            while broker.up:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                if not 0 < size <= _MAX_FRAME:
                    break
                frame = await reader.readexactly(size)
                if not broker.up:
                    break
                out = await self._handle(node_id, host, frame, conn)
                if out is None:
                    continue
                writer.write(out)
                await writer.drain()
                if conn.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError,
                _Close):
            pass
        finally:
            conns.discard(writer)
            writer.close()
            if task is not None:
                self._tasks.discard(task)

    async def _handle(self, node_id: int, host: str, frame: bytes,
                      conn: _Connection) -> bytes | None:
        """The response frame, or None for no response (acks=0).

        Raises:
            _Close: the connection must be closed without an answer.
        """
        api_key, version, correlation_id = struct.unpack_from(">hhi", frame, 0)
        if api_key == _API_VERSIONS and not self._supported(api_key, version):
            # Kafka answers an unknown ApiVersions version in v0 so the client can downgrade.
            return encode_response(self._versions(E.UnsupportedVersionError.code), 0,
                                   correlation_id)
        if not self._supported(api_key, version):
            raise _Close
        try:
            header, req = decode_request(frame)
        except KontraktError:
            raise _Close from None
        self.request_counts[api_key] = self.request_counts.get(api_key, 0) + 1
        self.request_versions[api_key, version] = \
            self.request_versions.get((api_key, version), 0) + 1
        if api_key in (_SASL_HANDSHAKE, _SASL_AUTHENTICATE):
            return encode_response(self._sasl(api_key, req, conn), version, correlation_id)
        if not conn.authenticated and api_key != _API_VERSIONS:
            raise _Close  # as Kafka: any other request before authentication disconnects
        sasl = conn.sasl if conn.sasl is not None and conn.sasl.done else None
        principal = ANONYMOUS if sasl is None else sasl.token_owner or f"User:{sasl.user}"
        ctx = RequestContext(node_id, header.client_id, host, principal,
                             secure=sasl is not None or self.ssl_context is not None,
                             token_auth=sasl is not None and sasl.token_owner is not None)
        error, delay_ms = self._injected(node_id, api_key)
        delay_ms += self.state.brokers[node_id].rtt_ms
        if error == DROP_CONNECTION:
            raise _Close
        resp: Response | None
        try:
            if error:
                resp = error_response(api_key, version, req, error)
            else:
                result = self.handlers[api_key](ctx, version, req)
                resp = await result if inspect.isawaitable(result) else result
            if delay_ms > 0:
                await asyncio.sleep(delay_ms / 1000)
            if resp is None:
                return None
            try:
                return encode_response(resp, version, correlation_id)
            except UnsupportedVersionError:
                # Handlers fill fields once for every version; like a broker's generated
                # code, leave out what this version cannot carry.
                _fit(resp, version)
                return encode_response(resp, version, correlation_id)
        except Exception as exc:
            # A bug of this broker, not the client's: record it for the test to see, and
            # close the connection as Kafka does when it cannot answer.
            self.internal_errors.append((api_key, version, exc))
            _log.exception("broker %d failed on API %d v%d", node_id, api_key, version)
            raise _Close from exc

    def _sasl(self, api_key: int, req: Any, conn: _Connection) -> Response:
        settings = self.state.settings
        enabled = list(settings.sasl_mechanisms) if settings.sasl_users is not None else []
        if api_key == _SASL_HANDSHAKE:
            if req.mechanism not in enabled or conn.sasl is not None:
                conn.close_after = conn.sasl is not None
                return SaslHandshakeResponse(error_code=E.UnsupportedSaslMechanismError.code
                                             if conn.sasl is None
                                             else E.IllegalSaslStateError.code,
                                             mechanisms=enabled)
            conn.sasl = SaslSession(req.mechanism, settings.sasl_users or {},
                                    self._credentials,
                                    self.security.tokens.scram_credential)
            return SaslHandshakeResponse(error_code=0, mechanisms=enabled)
        if conn.sasl is None or conn.sasl.done:
            conn.close_after = True
            return SaslAuthenticateResponse(error_code=E.IllegalSaslStateError.code,
                                            error_message="Unexpected SaslAuthenticate")
        try:
            answer = conn.sasl.step(bytes(req.auth_bytes))
        except SaslFailure as exc:
            conn.close_after = True
            return SaslAuthenticateResponse(error_code=E.SaslAuthenticationFailedError.code,
                                            error_message=str(exc))
        conn.authenticated = conn.sasl.done
        return SaslAuthenticateResponse(error_code=0, auth_bytes=answer)

    def _supported(self, api_key: int, version: int) -> bool:
        lo_hi = self.versions.get(api_key)
        return lo_hi is not None and lo_hi[0] <= version <= lo_hi[1]

    def _injected(self, node_id: int, api_key: int) -> tuple[int, int]:
        for queues in (self.state.brokers[node_id].errors, self.state.errors):
            queue = queues.get(api_key)
            if queue:
                return queue.popleft()
        return 0, 0

    # --- the two handlers that describe the server itself -------------------------------------
    def _versions(self, error: int = 0) -> Response:
        ar = ApiVersionsResponse
        return ar(error_code=error, api_keys=[
            ar.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(self.versions.items())],
            **(self.partition_admin.api_versions_features() if not error else {}))

    def _sasl_placeholder(self, ctx: RequestContext, version: int, req: Any) -> Response:
        raise AssertionError("SASL requests are answered by _sasl with the connection")

    def api_versions(self, ctx: RequestContext, version: int, req: Any) -> Response:
        return self._versions()

    def find_coordinator(self, ctx: RequestContext, version: int, req: Any) -> Response:
        st = self.state
        fr = FindCoordinatorResponse
        keys = req.coordinator_keys if version >= 4 else [req.key]
        found = []
        for key in keys:
            node = st.coordinator_for(req.key_type, key) if req.key_type in (0, 1) else -1
            if node < 0:
                found.append((key, -1, "", -1, E.InvalidRequestError.code))
            elif not st.brokers[node].up:
                found.append((key, -1, "", -1, E.CoordinatorNotAvailableError.code))
            else:
                found.append((key, node, "127.0.0.1", st.brokers[node].port, 0))
        if version >= 4:
            return fr(coordinators=[fr.Coordinator(key=k, node_id=n, host=h, port=p,
                                                   error_code=e) for k, n, h, p, e in found])
        _k, n, h, p, e = found[0]
        return fr(error_code=e, node_id=n, host=h, port=p)


def _fit(msg: Struct, version: int) -> None:
    """Reset (in place, recursively) the fields ``version`` cannot carry to their defaults."""
    for f in type(msg).FIELDS:
        value = getattr(msg, f.name)
        if version not in f.versions:
            setattr(msg, f.name, f.default_value())
        elif isinstance(value, Struct):
            _fit(value, version)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, Struct):
                    _fit(item, version)
