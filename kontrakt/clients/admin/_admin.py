"""AsyncAdminClient: topics, partitions and the cluster description.

Configs, groups, committed offsets, records at partition leaders and transactions live in
:mod:`._configs`, :mod:`._groups`, :mod:`._offsets`, :mod:`._records` and
:mod:`._transactions`; ACLs and log dirs, SCRAM credentials, delegation tokens, client
quotas, partition leadership and features, and the KRaft quorum in their own modules too:
each a base class of :class:`AsyncAdminClient`, to keep each file about one thing.

Results: a call about several entities (topics, resources, partitions, groups) returns a
``dict`` entity -> result. If any entity failed it raises
:class:`~kontrakt.errors.PartialFailureError`, whose ``.results`` holds every entity's
outcome (its result value, or the exception it failed with) and ``.errors`` only the failures;
pass ``return_exceptions=True`` to get that dict back instead (like ``asyncio.gather``).
When the call was about a single entity, that entity's own error is raised instead (so that
``except TopicAlreadyExistsError`` works). Retriable errors are retried with backoff
(``retry.backoff.ms`` .. ``retry.backoff.max.ms``) until the call's ``timeout`` (seconds;
default ``default.api.timeout.ms``); after that the last retriable error is the entity's
outcome.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from typing import Any

from kontrakt._config import Option, options
from kontrakt.clients._peer_calls import cluster_id, set_sasl_credentials
from kontrakt.clients.admin import _validate as v
from kontrakt.clients.admin._acls import AUTH_OPS_UNKNOWN, AclOperations, authorized_operations
from kontrakt.clients.admin._configs import ConfigOperations, config_source
from kontrakt.clients.admin._groups import GroupOperations
from kontrakt.clients.admin._offsets import OffsetOperations
from kontrakt.clients.admin._partition_admin import PartitionAdminOperations
from kontrakt.clients.admin._quorum import QuorumOperations
from kontrakt.clients.admin._quotas import ClientQuotaOperations
from kontrakt.clients.admin._records import RecordOperations
from kontrakt.clients.admin._routing import Fatal, Router, error_for, finish
from kontrakt.clients.admin._scram import ScramOperations
from kontrakt.clients.admin._tokens import DelegationTokenOperations
from kontrakt.clients.admin._transactions import TransactionOperations
from kontrakt.clients.admin._types import (
    ClusterDescription,
    ConfigEntry,
    ConfigSource,
    CreatedTopic,
    NewPartitions,
    NewTopic,
    Node,
    PartitionDescription,
    TopicDescription,
)
from kontrakt.clients.client import CLIENT_OPTIONS, AsyncKafkaClient
from kontrakt.errors import (
    InvalidArgumentError,
    KafkaError,
    KafkaTimeoutError,
    PartialFailureError,
)
from kontrakt.protocol.errors import LeaderNotAvailableError, UnknownTopicOrPartitionError
from kontrakt.protocol.messages import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    DescribeTopicPartitionsRequest,
    MetadataRequest,
)
from kontrakt.protocol.spec import Request

__all__ = ["ADMIN_OPTIONS", "AsyncAdminClient"]

ADMIN_OPTIONS: dict[str, Option] = {**CLIENT_OPTIONS, **options(
    Option("default.api.timeout.ms", "int", 60000, minimum=1,
           doc="how long an admin call may take in total, retries included, when the "
               "call's timeout argument is not given"),
)}

class AsyncAdminClient(ConfigOperations, GroupOperations, OffsetOperations,
                       RecordOperations, TransactionOperations, AclOperations, ScramOperations,
                       DelegationTokenOperations, ClientQuotaOperations,
                       PartitionAdminOperations, QuorumOperations):
    """Asyncio Kafka admin client built on :class:`AsyncKafkaClient`.

    Args:
        config: Kafka property names to values (``{"bootstrap.servers": "host:9092"}``).
        **kwargs: the same options with snake_case names.

    Options: those of :class:`AsyncKafkaClient` plus ``default.api.timeout.ms`` (60000): the
    total time of a call, retries included, when its ``timeout`` argument is not given.

    Raises:
        ConfigError: unknown option or bad value.

    Example::

        async with AsyncAdminClient(bootstrap_servers="127.0.0.1:9092") as admin:
            await admin.create_topics([NewTopic("orders", 3)])
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        client = AsyncKafkaClient(config, _options=ADMIN_OPTIONS, **kwargs)
        self._client = client
        self._router = Router(client, client.config["default.api.timeout.ms"] / 1000)
        client.owner = "AsyncAdminClient"

    @property
    def client(self) -> AsyncKafkaClient:
        """The underlying client (for raw :meth:`AsyncKafkaClient.request` calls)."""
        return self._client

    async def start(self) -> None:
        """Connect and load cluster metadata (done by the first call otherwise).

        Raises:
            NoBrokersAvailableError: no bootstrap server answered.
        """
        await self._client.start()

    async def cluster_id(self, timeout: float | None = None) -> str | None:
        """The cluster's id from metadata (confluent-kafka's), starting the client first
        when it has no metadata yet. :meth:`describe_cluster` asks a broker afresh.

        Args:
            timeout: seconds to wait for the start (None or negative, confluent-kafka's
                -1: ``request.timeout.ms`` bounds it); the start goes on after a timeout.

        Returns:
            The id; None when the brokers report none (Metadata before v2, KIP-78).

        Raises:
            KafkaTimeoutError: no metadata within ``timeout``.
            NoBrokersAvailableError: the start found no broker.
            IllegalStateError: the client is closed.
        """
        return await cluster_id(self._client, timeout)

    def set_sasl_credentials(self, username: str, password: str) -> None:
        """Log in with this user and password from now on (confluent-kafka's): new
        connections and re-authentications (KIP-368) of open ones use them; open
        connections stay (a broker refuses a re-authentication as another user, ending
        that connection). Safe from any thread.

        Raises:
            TypeError: not two ``str``.
            ConfigError: the client does not use SASL PLAIN or SCRAM.
            IllegalStateError: closed.
        """
        set_sasl_credentials(self._client, username, password)

    async def close(self, timeout: float | None = None) -> None:
        """Close every connection. Idempotent.

        Args:
            timeout: seconds to wait for connections to close cleanly (None: up to a
                second); bounded even with every broker gone.
        """
        await self._client.close(timeout)

    def metrics(self) -> dict[str, Any]:
        """Counts of the requests this client sent and the errors brokers answered with.
        Totals count since the client was created; ``*-rate`` values are per second over
        the last minute; latencies are in milliseconds.

        Returns:
            ``request-total`` / ``-rate``, ``response-total``, ``request-latency-avg`` /
            ``-max`` (request to response), ``request-error-total`` (requests that got no
            response: connection lost, timed out), ``error-total`` / ``-rate`` (non-zero
            error codes in responses, one per topic, partition, group... that failed, retried
            ones included), ``requests-by-api`` (API name -> requests) and
            ``errors-by-name`` (Kafka's error name, e.g. ``TOPIC_ALREADY_EXISTS`` -> count).
        """
        return self._router.metrics.snapshot()

    async def __aenter__(self) -> AsyncAdminClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- topics -----------------------------------------------------------------------

    async def create_topics(self, new_topics: Iterable[NewTopic], *, validate_only: bool = False,
                            operation_timeout: float | None = None,
                            timeout: float | None = None,
                            return_exceptions: bool = False) -> dict[str, CreatedTopic]:
        """Create topics (sent to the controller).

        Args:
            new_topics: what to create.
            validate_only: only check that the topics could be created.
            operation_timeout: seconds the controller may wait for the creation to
                propagate (default: what is left of ``timeout``).
            timeout: seconds for the whole call, retries included.
            return_exceptions: return failures in the dict instead of raising.

        Returns:
            topic name -> :class:`CreatedTopic`.

        Raises:
            InvalidArgumentError: a bad name, count, assignment or unknown config key
                (nothing is sent).
            PartialFailureError: some topics failed (e.g. ``TopicAlreadyExistsError``).
        """
        topics = list(new_topics)
        for t in topics:
            _check_new_topic(t)
        v.unique((t.topic for t in topics), "topic")
        by_name = {t.topic: t for t in topics}
        deadline = self._router.deadline(timeout)
        await self._client.start()

        def build(names: list[str], version: int) -> Request:
            return CreateTopicsRequest(
                topics=[_creatable(by_name[n]) for n in names],
                timeout_ms=_ms(operation_timeout, self._router.remaining(deadline)),
                validate_only=validate_only)

        async def round_(names: list[str]) -> dict[str, Any]:
            resp = await self._router.to_controller(
                CreateTopicsRequest, lambda ver: build(names, ver), deadline)
            out: dict[str, Any] = {}
            for r in resp.topics:
                if r.error_code:
                    out[r.name] = error_for(r.error_code, r.error_message, f"topic {r.name!r}")
                    self._router.controller_moved(out[r.name])
                    continue
                configs = {c.name: ConfigEntry(
                    c.name, c.value, config_source(c.config_source), c.read_only,
                    c.config_source == ConfigSource.DEFAULT_CONFIG, c.is_sensitive)
                    for c in (r.configs or [])}
                out[r.name] = CreatedTopic(r.name, r.topic_id, r.num_partitions,
                                           r.replication_factor, configs)
            return out

        results = await self._router.per_entity(list(by_name), round_, deadline)
        return finish(results, "create_topics", return_exceptions)

    async def delete_topics(self, topics: Iterable[str], *,
                            operation_timeout: float | None = None,
                            timeout: float | None = None,
                            return_exceptions: bool = False) -> dict[str, None]:
        """Delete topics by name (sent to the controller).

        Returns:
            topic name -> None.

        Raises:
            InvalidArgumentError: a bad name (nothing is sent).
            PartialFailureError: some topics failed (e.g. ``UnknownTopicOrPartitionError``,
                which is final here, not retried).
        """
        names = v.unique((v.check_topic_name(t) for t in topics), "topic")
        deadline = self._router.deadline(timeout)
        await self._client.start()

        def build(batch: list[str], version: int) -> Request:
            tmo = _ms(operation_timeout, self._router.remaining(deadline))
            if version >= 6:
                return DeleteTopicsRequest(timeout_ms=tmo, topics=[
                    DeleteTopicsRequest.DeleteTopicState(name=n) for n in batch])
            return DeleteTopicsRequest(timeout_ms=tmo, topic_names=batch)

        async def round_(batch: list[str]) -> dict[str, Any]:
            resp = await self._router.to_controller(
                DeleteTopicsRequest, lambda ver: build(batch, ver), deadline)
            out: dict[str, Any] = {}
            for r in resp.responses:
                if not r.error_code:
                    out[r.name] = None
                    continue
                err = error_for(r.error_code, r.error_message, f"topic {r.name!r}")
                self._router.controller_moved(err)
                # The controller is authoritative: an unknown topic will not appear.
                out[r.name] = Fatal(err) if isinstance(err, UnknownTopicOrPartitionError) else err
            return out

        results = await self._router.per_entity(names, round_, deadline)
        return finish(results, "delete_topics", return_exceptions)

    async def create_partitions(self, new_partitions: Iterable[NewPartitions], *,
                                validate_only: bool = False,
                                operation_timeout: float | None = None,
                                timeout: float | None = None,
                                return_exceptions: bool = False) -> dict[str, None]:
        """Grow topics to a new total partition count (sent to the controller).

        Returns:
            topic name -> None.

        Raises:
            InvalidArgumentError: a bad name, a count < 1 or a bad assignment.
            PartialFailureError: some topics failed (e.g. ``InvalidPartitionsError`` when
                the count does not grow).
            UnsupportedVersionError: inside the results when the broker lacks the API.
        """
        items = list(new_partitions)
        for p in items:
            v.check_topic_name(p.topic)
            if isinstance(p.new_total_count, bool) or not isinstance(p.new_total_count, int) \
                    or p.new_total_count < 1:
                raise InvalidArgumentError(
                    f"new_total_count of {p.topic!r} must be >= 1, got {p.new_total_count!r}")
            if p.replica_assignment is not None:
                v.check_assignment(p.topic, p.replica_assignment)
        by_name = {p.topic: p for p in items}
        v.unique((p.topic for p in items), "topic")
        deadline = self._router.deadline(timeout)
        await self._client.start()
        req_type = CreatePartitionsRequest

        def build(batch: list[str]) -> Request:
            return req_type(
                timeout_ms=_ms(operation_timeout, self._router.remaining(deadline)),
                validate_only=validate_only,
                topics=[req_type.CreatePartitionsTopic(
                    name=n, count=by_name[n].new_total_count,
                    assignments=None if by_name[n].replica_assignment is None else [
                        req_type.CreatePartitionsTopic.CreatePartitionsAssignment(
                            broker_ids=list(a)) for a in by_name[n].replica_assignment or ()])
                    for n in batch])

        async def round_(batch: list[str]) -> dict[str, Any]:
            resp = await self._router.to_controller(req_type, lambda ver: build(batch),
                                                    deadline)
            out: dict[str, Any] = {}
            for r in resp.results:
                out[r.name] = (error_for(r.error_code, r.error_message, f"topic {r.name!r}")
                               if r.error_code else None)
                self._router.controller_moved(out[r.name])
            return out

        results = await self._router.per_entity(list(by_name), round_, deadline)
        return finish(results, "create_partitions", return_exceptions)

    async def list_topics(self, *, include_internal: bool = False,
                          timeout: float | None = None) -> list[str]:
        """Names of every topic in the cluster, sorted.

        Args:
            include_internal: also list internal topics (``__consumer_offsets``, ...).
        """
        resp = await self._metadata(None, timeout)
        return sorted(t.name for t in resp.topics
                      if t.name is not None and (include_internal or not t.is_internal))

    async def describe_topics(self, topics: Iterable[str], *, timeout: float | None = None,
                              return_exceptions: bool = False) -> dict[str, TopicDescription]:
        """Describe topics: id, partitions with leader, replicas and in-sync replicas.

        Uses DescribeTopicPartitions (KIP-966, paginated: no answer grows with the partition
        count, and partitions carry their eligible leader replicas) on brokers offering it,
        Metadata on the others.

        Returns:
            topic name -> :class:`TopicDescription`.

        Raises:
            InvalidArgumentError: a bad name.
            PartialFailureError: some topics failed (``UnknownTopicOrPartitionError`` for a
                topic that does not exist; a topic still being created is retried).
        """
        names = v.unique((v.check_topic_name(t) for t in topics), "topic")
        deadline = self._router.deadline(timeout)

        async def round_(batch: list[str]) -> dict[str, Any]:
            await self._client.start()
            node = self._client.least_loaded_node()
            conn = await self._client.connection(node)
            if DescribeTopicPartitionsRequest.API_KEY in conn.api_versions:
                return await self._describe_topic_partitions(node, batch, deadline)
            resp = await self._metadata(batch, None, deadline=deadline)
            out: dict[str, Any] = {}
            for t in resp.topics:
                if t.error_code:
                    err = error_for(t.error_code, None, f"topic {t.name!r}")
                    out[t.name] = Fatal(err) if isinstance(err, UnknownTopicOrPartitionError) \
                        else err
                    continue
                parts = tuple(sorted((PartitionDescription(
                    p.partition_index, p.leader_id, p.leader_epoch, tuple(p.replica_nodes),
                    tuple(p.isr_nodes), tuple(p.offline_replicas)) for p in t.partitions),
                    key=lambda p: p.partition))
                if not parts:
                    out[t.name] = LeaderNotAvailableError(f"topic {t.name!r} has no partitions yet")
                    continue
                out[t.name] = TopicDescription(t.name, t.topic_id, t.is_internal, parts)
            return out

        results = await self._router.per_entity(names, round_, deadline)
        return finish(results, "describe_topics", return_exceptions)

    async def wait_for_topics(self, topics: Iterable[str], *,
                              timeout: float | None = None) -> None:
        """Wait until every topic is usable: Metadata from the least loaded broker names
        it without error and every partition has a leader. CreateTopics answers once the
        controller accepted a topic; brokers learn of it, and leaders are elected, a little
        later (kafka-python's ``wait_for_topics``).

        Metadata is asked again, with the client's retry backoff, for the topics not yet
        usable.

        Args:
            topics: topic names.
            timeout: seconds to wait in all (default: the client's
                ``default.api.timeout.ms``).

        Raises:
            InvalidArgumentError: a bad topic name (nothing is sent).
            KafkaTimeoutError: a topic is still not usable at the timeout; the message
                names each one and why (unknown, no partitions, partitions without a
                leader).
            BrokerResponseError: a topic's final error (e.g.
                ``TopicAuthorizationFailedError``), raised at once; with several such
                topics, PartialFailureError.
        """
        names = v.unique((v.check_topic_name(t) for t in topics), "topic")
        deadline = self._router.deadline(timeout)
        await self._client.start()
        backoff = self._router.backoff()
        pending = {n: "not asked yet" for n in names}
        while pending:
            try:
                resp = await self._metadata(sorted(pending), None, deadline=deadline)
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                raise _not_ready(pending) from exc
            final: dict[str, Any] = {}
            for t in resp.topics:
                if t.name not in pending:
                    continue
                if t.error_code:
                    err = error_for(t.error_code, None, f"topic {t.name!r}")
                    if isinstance(err, KafkaError) and err.retriable:
                        pending[t.name] = getattr(err, "error_name", str(err))
                    else:
                        final[t.name] = err
                    continue
                leaderless = sorted(p.partition_index for p in t.partitions
                                    if p.error_code or p.leader_id < 0)
                if not t.partitions:
                    pending[t.name] = "no partitions yet"
                elif leaderless:
                    pending[t.name] = f"partitions {leaderless} have no leader"
                else:
                    del pending[t.name]
            if final:
                finish({**dict.fromkeys(pending), **final}, "wait_for_topics", False)
            if not pending:
                return
            delay = backoff.next()
            if time.monotonic() + delay >= deadline:
                raise _not_ready(pending)
            await asyncio.sleep(delay)

    async def _metadata(self, topics: list[str] | None, timeout: float | None, *,
                        deadline: float | None = None) -> Any:
        deadline = deadline if deadline is not None else self._router.deadline(timeout)
        await self._client.start()

        def build(version: int) -> Request:
            return MetadataRequest(
                allow_auto_topic_creation=False,
                topics=None if topics is None else [
                    MetadataRequest.MetadataRequestTopic(name=t) for t in topics])

        return await self._router.call(lambda: self._router.exchange(
            self._client.least_loaded_node(), MetadataRequest, build, deadline), deadline)

    async def describe_cluster(self, *, include_authorized_operations: bool = False,
                               timeout: float | None = None) -> ClusterDescription:
        """The cluster id, controller and brokers (DescribeCluster, or Metadata on brokers
        without it).

        Raises:
            BrokerResponseError: the broker's error (e.g. CLUSTER_AUTHORIZATION_FAILED).
            KafkaTimeoutError / KafkaConnectionError: no broker answered before the timeout.
        """
        deadline = self._router.deadline(timeout)
        await self._client.start()

        async def attempt() -> ClusterDescription:
            node = self._client.least_loaded_node()
            conn = await self._client.connection(node)
            if DescribeClusterRequest.API_KEY in conn.api_versions:
                resp = await self._router.exchange(node, DescribeClusterRequest, lambda ver: (
                    DescribeClusterRequest(
                        include_cluster_authorized_operations=include_authorized_operations)),
                    deadline)
                if resp.error_code:
                    raise error_for(resp.error_code, resp.error_message, "describe_cluster")
                nodes = tuple(Node(b.broker_id, b.host, b.port, b.rack) for b in resp.brokers)
                auth = resp.cluster_authorized_operations
            else:
                resp = await self._router.exchange(node, MetadataRequest, lambda ver: (
                    MetadataRequest(topics=[], allow_auto_topic_creation=False)), deadline)
                nodes = tuple(Node(b.node_id, b.host, b.port, b.rack) for b in resp.brokers)
                auth = AUTH_OPS_UNKNOWN
            nodes = tuple(sorted(nodes, key=lambda n: n.id))
            controller = next((n for n in nodes if n.id == resp.controller_id), None)
            return ClusterDescription(resp.cluster_id, controller, nodes,
                                      authorized_operations(auth) if include_authorized_operations
                                      else None)

        return await self._router.call(attempt, deadline)


# --- helpers ---------------------------------------------------------------------------


def _not_ready(pending: Mapping[str, str]) -> KafkaTimeoutError:
    why = "; ".join(f"{n!r}: {r}" for n, r in sorted(pending.items()))
    return KafkaTimeoutError(f"wait_for_topics: not usable at the timeout: {why}")


def _ms(seconds: float | None, fallback: float) -> int:
    return max(0, int((fallback if seconds is None else seconds) * 1000))


def _check_new_topic(t: NewTopic) -> None:
    if not isinstance(t, NewTopic):
        raise InvalidArgumentError(f"expected NewTopic, got {t!r}")
    v.check_topic_name(t.topic)
    for what, value in (("num_partitions", t.num_partitions),
                        ("replication_factor", t.replication_factor)):
        if isinstance(value, bool) or not isinstance(value, int) or (value < 1 and value != -1):
            raise InvalidArgumentError(
                f"{what} of {t.topic!r} must be >= 1 (or -1 for the broker default), "
                f"got {value!r}")
    if t.replica_assignment is not None:
        v.check_assignment(t.topic, t.replica_assignment)
        if t.replication_factor != -1 or t.num_partitions not in (
                -1, len(t.replica_assignment)):
            raise InvalidArgumentError(
                f"topic {t.topic!r}: replica_assignment excludes replication_factor and a "
                "different num_partitions")
    v.check_topic_configs(t.topic, t.config)


def _creatable(t: NewTopic) -> Any:
    ct = CreateTopicsRequest.CreatableTopic
    if t.replica_assignment is not None:
        return ct(name=t.topic, num_partitions=-1, replication_factor=-1,
                  assignments=[ct.CreatableReplicaAssignment(partition_index=i,
                                                             broker_ids=list(ids))
                               for i, ids in enumerate(t.replica_assignment)],
                  configs=[ct.CreatableTopicConfig(name=k, value=val)
                           for k, val in t.config.items()])
    return ct(name=t.topic, num_partitions=t.num_partitions,
              replication_factor=t.replication_factor,
              configs=[ct.CreatableTopicConfig(name=k, value=val) for k, val in t.config.items()])


_ = PartialFailureError
