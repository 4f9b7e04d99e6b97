"""The public face: :class:`Cluster`, run on an event loop in a daemon thread."""

from __future__ import annotations

import asyncio
import os
import ssl
import threading
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import ClassVar, TypeVar

from kontrakt.errors import IllegalStateError, InvalidArgumentError
from kontrakt.protocol import messages as _messages  # noqa: F401  (fills the API registry)
from kontrakt.testing._cluster._persist import Storage
from kontrakt.testing._cluster._sasl import MECHANISMS
from kontrakt.testing._cluster._server import DROP_CONNECTION, ClusterServer
from kontrakt.testing._cluster._state import ClusterSettings, ClusterState, validate_topic_config
from kontrakt.testing._util import BrokerStartError

__all__ = ["Cluster"]

_T = TypeVar("_T")
_CALL_TIMEOUT = 10.0


class Cluster:
    """A Kafka cluster of ``num_brokers`` brokers in this process, on 127.0.0.1.

    Pure Python, built on :mod:`kontrakt.protocol`; it runs on its own event loop in a daemon
    thread, so synchronous tests, asyncio tests and any Kafka client in the process
    (Kontrakt, confluent-kafka, kafka-python, aiokafka) can use it. It starts in a few
    milliseconds and keeps everything in memory, unless ``storage`` names a folder: then
    topics, records, committed offsets, producer and transaction state outlive a
    :meth:`close` and a new ``Cluster`` on the same folder carries on from them.

    APIs served, with Kafka's semantics (versions: every version Kontrakt declares):
    ApiVersions, Metadata (leaders spread over the brokers; topics are auto-created only with
    ``auto_create_topics=True``), DescribeCluster, CreateTopics, DeleteTopics,
    CreatePartitions, DescribeConfigs (topics with sources, brokers read-only), AlterConfigs,
    IncrementalAlterConfigs, Produce (acks 0/1/all, v2 batches stored as sent with
    broker-assigned offsets, idempotent sequence checks, LogAppendTime topics), Fetch (high
    watermark, log start offset, max bytes, long polling woken by produce, read_committed
    through the last stable offset and the aborted-transaction index, incremental fetch
    sessions), ListOffsets (earliest, latest, by timestamp, max timestamp), DeleteRecords,
    OffsetForLeaderEpoch, FindCoordinator, classic groups
    (JoinGroup, SyncGroup, Heartbeat, LeaveGroup: any protocol type, several members of any
    client, static membership, rebalance and session timeouts), the KIP-848 consumer
    protocol (ConsumerGroupHeartbeat with the server-side "uniform" and "range" assignors and
    Kafka's revoke-before-reassign reconciliation, ConsumerGroupDescribe, member epochs
    checked on commits), OffsetCommit / OffsetFetch (metadata kept), ListGroups,
    DescribeGroups, DeleteGroups, OffsetDelete, InitProducerId,
    AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn (commit/abort markers,
    fencing by epoch, transaction timeouts; from v5 the epoch bump of transaction version 2),
    DescribeProducers, DescribeTransactions,
    ListTransactions, DescribeLogDirs (one directory per broker), Describe- and
    AlterUserScramCredentials (the credentials SCRAM authentication checks), ElectLeaders,
    Alter- and ListPartitionReassignments, DescribeTopicPartitions (paginated) and
    UpdateFeatures with the features ApiVersions reports (rules: ``_admin_apis``),
    GetTelemetrySubscriptions and PushTelemetry (KIP-714, answered as a broker with no metrics
    subscription: no metrics requested, pushes checked and dropped).

    TLS listeners: pass ``ssl_context``; SASL PLAIN and SCRAM: pass ``sasl_users``; ACLs
    (enforced, with Create-, Describe- and DeleteAcls): pass ``authorizer=True``. Client
    quotas (Describe- and AlterClientQuotas) are stored and described, not applied.
    Delegation tokens (and SCRAM logins with them): pass ``delegation_token_secret_key``.
    State kept in a folder: pass ``storage``. Not served (yet): OAUTHBEARER, static
    membership in KIP-848 groups (instance ids are kept, not enforced); a client asking for
    those APIs sees them missing from ApiVersions. Topic configs are stored and described
    but retention, compaction and broker-side recompression (``compression.type``) are not
    applied: logs keep every batch as sent until DeleteRecords or DeleteTopics.

    Every partition has one replica that matters: the high watermark is the log end. Faults
    are set with the method names of librdkafka's mock cluster (:meth:`broker_down`,
    :meth:`set_partition_leader`, :meth:`push_request_errors`, :meth:`set_rtt`, ...).

    Example (pytest)::

        import pytest
        from kontrakt import Consumer, Producer
        from kontrakt.testing import Cluster

        @pytest.fixture
        def cluster():
            with Cluster(num_brokers=3) as c:
                c.create_topic("orders", partitions=3)
                yield c

        def test_round_trip(cluster):
            with Producer(bootstrap_servers=cluster.bootstrap_servers) as p:
                p.send_and_wait("orders", b"v", key=b"k")
            with Consumer(bootstrap_servers=cluster.bootstrap_servers,
                          group_id="g", auto_offset_reset="earliest") as c:
                c.subscribe(["orders"])
                assert c.poll(10.0).value == b"v"

    Args:
        num_brokers: how many brokers (node ids 1..num_brokers).
        auto_create_topics: ``auto.create.topics.enable``: Metadata creates unknown topics.
        num_partitions: ``num.partitions`` for auto-created topics and CreateTopics with -1.
        default_replication_factor: ``default.replication.factor`` (capped at num_brokers).
        group_initial_rebalance_delay_ms: ``group.initial.rebalance.delay.ms`` (Kafka: 3000;
            0 here so tests do not wait).
        group_min_session_timeout_ms: ``group.min.session.timeout.ms`` (Kafka: 6000; 1000
            here so tests can use short sessions).
        group_max_session_timeout_ms: ``group.max.session.timeout.ms``.
        transaction_max_timeout_ms: ``transaction.max.timeout.ms``.
        group_consumer_heartbeat_interval_ms: ``group.consumer.heartbeat.interval.ms`` for
            KIP-848 members (Kafka: 5000; 1000 here so tests reconcile quickly).
        group_consumer_session_timeout_ms: ``group.consumer.session.timeout.ms``.
        ports: node id -> port to listen on; other brokers take free ports.
        cluster_id: the id Metadata reports (random by default).
        ssl_context: a server-side context (certificate loaded) to make every listener TLS;
            clients then use ``security.protocol=SSL``. Client certificates are checked
            when the context asks for them (``verify_mode``).
        sasl_users: user name -> password (may be empty: users can then be added with
            AlterUserScramCredentials): every connection must then authenticate with
            SaslHandshake v1 + SaslAuthenticate (``security.protocol`` SASL_PLAINTEXT, or
            SASL_SSL with ``ssl_context``) before any request but ApiVersions.
        sasl_mechanisms: the mechanisms offered, among PLAIN, SCRAM-SHA-256, SCRAM-SHA-512.
        storage: a folder (created when missing) to keep the cluster's state in: topics and
            configs, partition logs (append-only segment files), committed offsets with
            metadata, idempotent producer state (rebuilt from the logs, so a producer's
            retry after a restart is deduplicated), transactional ids and producer ids, and
            the cluster id (a stored id wins over a random one). Transactions left open by
            the previous run are aborted on start with a bumped epoch, as Kafka does when
            one times out. A torn tail (a crash mid-write) is dropped on start. Group
            memberships, fetch sessions, SCRAM credentials and faults are not kept. Layout
            and costs: ``kontrakt/testing/_cluster/_persist.py``.
        storage_fsync: fsync every write to ``storage`` (survives power loss, costs a disk
            flush per produced batch); by default writes reach the OS only (they survive
            the process being killed), as Kafka leaves flushing to the OS by default.
        authorizer: check ACLs as Kafka's ``StandardAuthorizer`` and serve CreateAcls,
            DescribeAcls and DeleteAcls; the principal is ``User:<SASL user>``, or
            ``User:ANONYMOUS`` without SASL. Denied requests get Kafka's
            TOPIC/GROUP/TRANSACTIONAL_ID/CLUSTER_AUTHORIZATION_FAILED errors.
        super_users: ``super.users``: principals (``User:name``) allowed everything.
        allow_everyone_if_no_acl_found: ``allow.everyone.if.no.acl.found``: a resource that
            no ACL names is open to all (Kafka's default with an authorizer: False).
        delegation_token_secret_key: ``delegation.token.secret.key``: enables delegation
            tokens (Create-, Renew-, Expire- and DescribeDelegationToken over SASL or TLS
            connections, and SCRAM logins with ``sasl.scram.tokenauth``).
        delegation_token_max_lifetime_ms: ``delegation.token.max.lifetime.ms``.
        delegation_token_expiry_time_ms: ``delegation.token.expiry.time.ms``.

    Raises:
        InvalidArgumentError: an argument is out of range (a ValueError), or a super user
            is not a ``Type:name`` principal.
        StorageLockedError: (from :meth:`start`) another running cluster uses ``storage``.
    """

    #: Push this "error" to drop the connection instead of answering (as the mock cluster's
    #: ``DISCONNECT``).
    DISCONNECT: ClassVar[int] = DROP_CONNECTION

    def __init__(self, num_brokers: int = 1, *, auto_create_topics: bool = False,
                 num_partitions: int = 1, default_replication_factor: int = 1,
                 group_initial_rebalance_delay_ms: int = 0,
                 group_min_session_timeout_ms: int = 1000,
                 group_max_session_timeout_ms: int = 1_800_000,
                 transaction_max_timeout_ms: int = 900_000,
                 group_consumer_heartbeat_interval_ms: int = 1000,
                 group_consumer_session_timeout_ms: int = 45_000,
                 ports: Mapping[int, int] | None = None,
                 cluster_id: str | None = None,
                 ssl_context: ssl.SSLContext | None = None,
                 sasl_users: Mapping[str, str] | None = None,
                 sasl_mechanisms: Sequence[str] = MECHANISMS,
                 storage: str | os.PathLike[str] | None = None,
                 storage_fsync: bool = False,
                 authorizer: bool = False, super_users: Sequence[str] = (),
                 allow_everyone_if_no_acl_found: bool = False,
                 delegation_token_secret_key: str | None = None,
                 delegation_token_max_lifetime_ms: int = 604_800_000,
                 delegation_token_expiry_time_ms: int = 86_400_000) -> None:
        if not 1 <= num_brokers <= 100:
            raise InvalidArgumentError(f"num_brokers must be 1..100, got {num_brokers}")
        unknown = [m for m in sasl_mechanisms if m not in MECHANISMS]
        if unknown:
            raise InvalidArgumentError(f"unknown SASL mechanism(s) {unknown}; "
                                       f"known: {list(MECHANISMS)}")
        if num_partitions < 1 or default_replication_factor < 1:
            raise InvalidArgumentError("num_partitions and default_replication_factor must "
                                       "be at least 1")
        if isinstance(super_users, str) or not all(
                isinstance(p, str) and all(p.partition(":")) for p in super_users):
            raise InvalidArgumentError(f"super_users are principals such as 'User:alice', "
                                       f"got {super_users!r}")
        if delegation_token_max_lifetime_ms < 1 or delegation_token_expiry_time_ms < 1:
            raise InvalidArgumentError("delegation token lifetimes must be at least 1 ms")
        settings = ClusterSettings(
            auto_create_topics_enable=auto_create_topics, num_partitions=num_partitions,
            default_replication_factor=default_replication_factor,
            group_initial_rebalance_delay_ms=group_initial_rebalance_delay_ms,
            group_min_session_timeout_ms=group_min_session_timeout_ms,
            group_max_session_timeout_ms=group_max_session_timeout_ms,
            transaction_max_timeout_ms=transaction_max_timeout_ms,
            group_consumer_heartbeat_interval_ms=group_consumer_heartbeat_interval_ms,
            group_consumer_session_timeout_ms=group_consumer_session_timeout_ms,
            sasl_users=dict(sasl_users) if sasl_users is not None else None,
            sasl_mechanisms=tuple(sasl_mechanisms), authorizer=authorizer,
            super_users=tuple(super_users),
            allow_everyone_if_no_acl_found=allow_everyone_if_no_acl_found,
            delegation_token_secret_key=delegation_token_secret_key,
            delegation_token_max_lifetime_ms=delegation_token_max_lifetime_ms,
            delegation_token_expiry_time_ms=delegation_token_expiry_time_ms)
        self._num_brokers = num_brokers
        self._settings = settings
        self._ports = dict(ports or {})
        self._cluster_id = cluster_id or uuid.uuid4().hex[:22]
        self._explicit_id = cluster_id is not None
        self._storage_path = storage
        self._storage_fsync = storage_fsync
        self._storage: Storage | None = None
        self._ssl_context = ssl_context
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._state: ClusterState | None = None
        self._server: ClusterServer | None = None
        self._closed = False
        self._lock = threading.Lock()

    # --- lifecycle --------------------------------------------------------------------------
    def start(self) -> Cluster:
        """Open the brokers' listeners; returns self. A second call does nothing.

        Raises:
            BrokerStartError: a listener could not be opened (e.g. a port in ``ports`` is
                taken), within 10 s.
            IllegalStateError: the cluster was closed.
        """
        with self._lock:
            if self._closed:
                raise IllegalStateError("the cluster is closed")
            if self._loop is not None:
                return self
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            thread = threading.Thread(target=run, name="kontrakt-cluster", daemon=True)
            thread.start()
            ready.wait(_CALL_TIMEOUT)
            self._loop, self._thread = loop, thread

            async def boot() -> tuple[ClusterState, ClusterServer]:
                state = ClusterState(self._num_brokers, self._settings, self._cluster_id)
                server = ClusterServer(state, self._ssl_context)
                if self._storage_path is not None:
                    self._storage = Storage(self._storage_path, fsync=self._storage_fsync)
                    self._storage.recover(state, self._cluster_id,
                                          explicit_id=self._explicit_id)
                await server.start(self._ports)
                return state, server

            try:
                self._state, self._server = asyncio.run_coroutine_threadsafe(
                    boot(), loop).result(_CALL_TIMEOUT)
            except Exception as exc:
                self._stop_loop()
                self._close_storage()
                self._closed = True
                if isinstance(exc, (BrokerStartError, InvalidArgumentError)):
                    raise
                raise BrokerStartError(f"the cluster could not start: {exc}") from exc
        return self

    def close(self) -> None:
        """Close every connection and listener and stop the loop thread (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._loop is None:
                return
            if self._server is not None:
                try:
                    asyncio.run_coroutine_threadsafe(self._server.stop(), self._loop).result(
                        _CALL_TIMEOUT)
                finally:
                    self._stop_loop()
                    self._close_storage()
            else:
                self._stop_loop()
                self._close_storage()

    def _close_storage(self) -> None:
        if self._storage is not None:
            self._storage.close()
            self._storage = None

    def _stop_loop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(_CALL_TIMEOUT)
        if not thread.is_alive():
            loop.close()

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("running" if self._loop else "new")
        return f"Cluster(num_brokers={self._num_brokers}, {state})"

    # --- plumbing ---------------------------------------------------------------------------
    def _run(self, fn: Callable[[ClusterState, ClusterServer], _T]) -> _T:
        """Run ``fn`` on the loop thread and return its result."""
        with self._lock:
            if self._closed or self._loop is None or self._state is None \
                    or self._server is None:
                raise IllegalStateError("the cluster is not running (call start())")
            loop, state, server = self._loop, self._state, self._server
        if threading.current_thread() is self._thread:
            return fn(state, server)

        async def call() -> _T:
            return fn(state, server)

        return asyncio.run_coroutine_threadsafe(call(), loop).result(_CALL_TIMEOUT)

    def _broker(self, broker_id: int) -> list[int]:
        if broker_id == -1:
            return list(range(1, self._num_brokers + 1))
        if not 1 <= broker_id <= self._num_brokers:
            raise InvalidArgumentError(f"no broker {broker_id} (1..{self._num_brokers})")
        return [broker_id]

    # --- information ------------------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` of every broker, comma-separated.

        Raises:
            IllegalStateError: the cluster is not running.
        """
        return self._run(lambda st, _s: ",".join(
            f"127.0.0.1:{b.port}" for _, b in sorted(st.brokers.items())))

    @property
    def num_brokers(self) -> int:
        """How many brokers the cluster has."""
        return self._num_brokers

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._closed

    def broker_address(self, broker_id: int) -> tuple[str, int]:
        """(host, port) of one broker."""
        self._broker(broker_id)
        return self._run(lambda st, _s: ("127.0.0.1", st.brokers[broker_id].port))

    def internal_errors(self) -> list[tuple[int, int, BaseException]]:
        """(api key, version, exception) of each request the cluster itself failed on (its
        own bugs; the connection was closed). Tests may assert this stays empty."""
        return self._run(lambda _st, s: list(s.internal_errors))

    def request_counts(self) -> dict[int, int]:
        """How many requests of each API key the brokers have received."""
        return self._run(lambda _st, s: dict(s.request_counts))

    def request_versions(self) -> dict[tuple[int, int], int]:
        """How many requests of each (API key, version) the brokers have received."""
        return self._run(lambda _st, s: dict(s.request_versions))

    # --- topics -----------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     config: Mapping[str, str] | None = None) -> None:
        """Create a topic directly (no admin client needed).

        Raises:
            InvalidArgumentError: a bad name, count, replication factor or config, or the
                topic exists.
        """
        def create(st: ClusterState, _s: ClusterServer) -> None:
            why = st.check_topic_name(name)
            if why:
                raise InvalidArgumentError(why)
            if name in st.topics:
                raise InvalidArgumentError(f"topic {name!r} already exists")
            if partitions < 1 or not 1 <= replication_factor <= len(st.brokers):
                raise InvalidArgumentError(
                    f"partitions must be >= 1 and replication_factor 1..{len(st.brokers)}")
            for key, value in (config or {}).items():
                bad = validate_topic_config(key, value)
                if bad:
                    raise InvalidArgumentError(bad)
            st.create_topic(name, partitions, replication_factor, dict(config or {}))
        self._run(create)

    def end_offsets(self, topic: str) -> list[int]:
        """The high watermark of each partition of ``topic``.

        Raises:
            InvalidArgumentError: unknown topic.
        """
        def get(st: ClusterState, _s: ClusterServer) -> list[int]:
            t = st.topics.get(topic)
            if t is None:
                raise InvalidArgumentError(f"unknown topic {topic!r}")
            return [log.high_watermark for log in t.partitions]
        return self._run(get)

    # --- faults (librdkafka mock cluster names) -----------------------------------------------
    def set_partition_leader(self, topic: str, partition: int, broker_id: int) -> None:
        """Move a partition's leadership to ``broker_id`` (its leader epoch goes up)."""
        self._broker(broker_id)

        def move(st: ClusterState, _s: ClusterServer) -> None:
            found = st.partition(topic, partition)
            if found is None:
                raise InvalidArgumentError(f"unknown partition {topic}[{partition}]")
            t, log = found
            t.leaders[partition] = broker_id
            if broker_id not in t.replicas[partition]:
                t.replicas[partition] = [broker_id, *t.replicas[partition][1:]]
            log.new_leader_epoch()
            st.topic_changed(t)
            st.notify()
        self._run(move)

    def broker_down(self, broker_id: int) -> None:
        """Close the broker's connections and drop every new one at once (-1: every broker).

        Unlike the mock cluster, which closes its listener (ECONNREFUSED), the port keeps
        accepting and closes each connection immediately (see ``ClusterServer.broker_down``
        for why); clients see a failed connection in both cases. Leadership does not move
        (as in the mock cluster): Metadata reports LEADER_NOT_AVAILABLE for the partitions
        it leads until :meth:`broker_up` or :meth:`set_partition_leader`.
        """
        ids = self._broker(broker_id)

        def down(_st: ClusterState, s: ClusterServer) -> None:
            for i in ids:
                s.broker_down(i)
        self._run(down)

    def broker_up(self, broker_id: int) -> None:
        """Let the broker serve again (-1: every broker)."""
        ids = self._broker(broker_id)

        def up(_st: ClusterState, s: ClusterServer) -> None:
            for i in ids:
                s.broker_up(i)
        self._run(up)

    def set_rtt(self, broker_id: int, rtt_ms: int) -> None:
        """Delay every response of the broker by ``rtt_ms`` ms (-1: every broker)."""
        ids = self._broker(broker_id)
        if rtt_ms < 0:
            raise InvalidArgumentError(f"rtt_ms must be >= 0, got {rtt_ms}")

        def rtt(st: ClusterState, _s: ClusterServer) -> None:
            for i in ids:
                st.brokers[i].rtt_ms = rtt_ms
        self._run(rtt)

    def set_rack(self, broker_id: int, rack: str | None) -> None:
        """Set the rack the broker reports in Metadata (-1: every broker)."""
        ids = self._broker(broker_id)

        def set_(st: ClusterState, _s: ClusterServer) -> None:
            for i in ids:
                st.brokers[i].rack = rack
        self._run(set_)

    def coordinator_set(self, key_type: str, key: str, broker_id: int) -> None:
        """Make ``broker_id`` the coordinator of a ``"group"`` or ``"transaction"`` key."""
        if key_type not in ("group", "transaction"):
            raise InvalidArgumentError(
                f"key_type must be 'group' or 'transaction', got {key_type!r}")
        self._broker(broker_id)
        kt = 0 if key_type == "group" else 1
        self._run(lambda st, _s: st.coordinators.__setitem__((kt, key), broker_id))

    def push_request_errors(self, api_key: int, errors: Sequence[int]) -> None:
        """Make the next ``len(errors)`` requests with ``api_key`` (to any broker) fail.

        The n-th such request is answered with ``errors[n]`` in every error field its
        response has for the request's entries (nothing is processed); 0 lets it through;
        :attr:`DISCONNECT` closes the connection instead. Errors pushed to one broker with
        :meth:`broker_push_request_error_rtts` are used first.
        """
        self._push(None, api_key, [(e, 0) for e in errors])

    def broker_push_request_error_rtts(self, broker_id: int, api_key: int,
                                       errors: Sequence[tuple[int, int]]) -> None:
        """Queue ``(error, rtt_ms)`` answers for the next ``api_key`` requests to one broker."""
        self._broker(broker_id)
        self._push(broker_id, api_key, list(errors))

    def _push(self, broker_id: int | None, api_key: int, items: list[tuple[int, int]]) -> None:
        def push(st: ClusterState, s: ClusterServer) -> None:
            if api_key not in s.handlers:
                raise InvalidArgumentError(f"API key {api_key} is not served")
            queues = st.errors if broker_id is None else st.brokers[broker_id].errors
            queues.setdefault(api_key, deque()).extend(items)
        self._run(push)

    def clear_request_errors(self, api_key: int) -> None:
        """Drop the errors still queued for ``api_key`` (cluster-wide and per broker)."""
        def clear(st: ClusterState, _s: ClusterServer) -> None:
            st.errors.pop(api_key, None)
            for b in st.brokers.values():
                b.errors.pop(api_key, None)
        self._run(clear)
