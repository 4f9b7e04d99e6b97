"""Admin operations on ACLs and log directories — a base class of
:class:`~kontrakt.clients.admin.AsyncAdminClient`.

ACL requests go to any broker (the least loaded, as the Java admin client does);
DescribeLogDirs goes to each broker asked about (for ``describe_replica_log_dirs``, each
replica's broker), AlterReplicaLogDirs to each replica's broker.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kontrakt._types import TopicPartition
from kontrakt.clients.admin import _validate as v
from kontrakt.clients.admin._routing import Fatal, Router, error_for, finish
from kontrakt.clients.admin._types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    LogDirDescription,
    ReplicaInfo,
    ResourcePatternType,
    ResourceType,
)
from kontrakt.clients.client import AsyncKafkaClient
from kontrakt.errors import InvalidArgumentError, ProtocolError
from kontrakt.protocol.errors import BrokerNotAvailableError, KafkaStorageError
from kontrakt.protocol.messages import (
    AlterReplicaLogDirsRequest,
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
    DescribeLogDirsRequest,
)

__all__ = ["AUTH_OPS_UNKNOWN", "AclOperations", "ReplicaLogDirInfo", "TopicPartitionReplica",
           "authorized_operations"]

#: What a broker puts in an authorized-operations field it was not asked for, or cannot fill
#: (Kafka's INT32_MIN sentinel).
AUTH_OPS_UNKNOWN = -(2**31)


@dataclass(frozen=True, slots=True)
class TopicPartitionReplica:
    """The replica of a partition on one broker (Java's ``TopicPartitionReplica``)."""

    topic: str
    partition: int
    broker_id: int


@dataclass(frozen=True, slots=True)
class ReplicaLogDirInfo:
    """Where a replica lives on its broker (Java's ``ReplicaLogDirInfo``): its current log
    directory and, while :meth:`~AclOperations.alter_replica_log_dirs` moves it, the future
    one it is being copied to, each with how far it lags the partition's log end.

    Attributes:
        current_replica_log_dir: None when the broker holds no such replica (or only on an
            offline directory).
        current_replica_offset_lag: -1 when unknown or with no current replica.
        future_replica_log_dir: None when the replica is not being moved.
        future_replica_offset_lag: -1 when there is no future replica.
    """

    current_replica_log_dir: str | None = None
    current_replica_offset_lag: int = -1
    future_replica_log_dir: str | None = None
    future_replica_offset_lag: int = -1


def authorized_operations(bits: int) -> frozenset[AclOperation] | None:
    """The operations set in an authorized-operations bit field (bit ``n`` is
    ``AclOperation(n)``), as DescribeCluster and DescribeGroups return them; None for
    :data:`AUTH_OPS_UNKNOWN`."""
    if bits == AUTH_OPS_UNKNOWN:
        return None
    return frozenset(op for op in AclOperation if bits & (1 << op.value))


class AclOperations:
    """ACL and log-dir operations (see the module doc)."""

    _client: AsyncKafkaClient
    _router: Router

    # --- ACLs -------------------------------------------------------------------------

    async def describe_acls(self, acl_filter: AclBindingFilter | None = None, *,
                            timeout: float | None = None) -> list[AclBinding]:
        """ACLs matching ``acl_filter`` (default: every ACL).

        Raises:
            BrokerResponseError: e.g. SECURITY_DISABLED when the broker has no authorizer.
        """
        f = acl_filter or AclBindingFilter()
        deadline = self._router.deadline(timeout)
        await self._client.start()
        req = DescribeAclsRequest

        async def attempt() -> list[AclBinding]:
            resp = await self._router.exchange(
                self._client.least_loaded_node(), req, lambda ver: req(
                    resource_type_filter=int(f.restype), resource_name_filter=f.name,
                    pattern_type_filter=int(f.resource_pattern_type),
                    principal_filter=f.principal, host_filter=f.host,
                    operation=int(f.operation), permission_type=int(f.permission_type)),
                deadline)
            if resp.error_code:
                raise error_for(resp.error_code, resp.error_message, "describe_acls")
            return [AclBinding(ResourceType(r.resource_type), r.resource_name,
                               ResourcePatternType(r.pattern_type), a.principal, a.host,
                               AclOperation(a.operation), AclPermissionType(a.permission_type))
                    for r in resp.resources for a in r.acls]

        return await self._router.call(attempt, deadline)

    async def create_acls(self, acls: Iterable[AclBinding], *, timeout: float | None = None,
                          return_exceptions: bool = False) -> dict[AclBinding, None]:
        """Create ACLs.

        Raises:
            InvalidArgumentError: an ANY/UNKNOWN/MATCH field or an empty principal or host.
            PartialFailureError: some ACLs failed.
        """
        items = v.unique(acls, "ACL")
        for a in items:
            _check_binding(a)
        deadline = self._router.deadline(timeout)
        await self._client.start()
        req = CreateAclsRequest

        async def round_(batch: list[AclBinding]) -> dict[AclBinding, Any]:
            resp = await self._router.exchange(
                self._client.least_loaded_node(), req, lambda ver: req(creations=[
                    req.AclCreation(resource_type=int(a.restype), resource_name=a.name,
                                    resource_pattern_type=int(a.resource_pattern_type),
                                    principal=a.principal, host=a.host,
                                    operation=int(a.operation),
                                    permission_type=int(a.permission_type))
                    for a in batch]), deadline)
            # Results come back in request order (the protocol has no key to match on).
            return {a: error_for(r.error_code, r.error_message, repr(a)) if r.error_code
                    else None for a, r in zip(batch, resp.results, strict=False)}

        results = await self._router.per_entity(items, round_, deadline)
        return finish(results, "create_acls", return_exceptions)

    async def delete_acls(self, filters: Iterable[AclBindingFilter], *,
                          timeout: float | None = None, return_exceptions: bool = False
                          ) -> dict[AclBindingFilter, list[AclBinding]]:
        """Delete the ACLs matching each filter.

        Returns:
            filter -> the ACLs it deleted.

        Raises:
            PartialFailureError: some filters failed.
        """
        items = v.unique(filters, "ACL filter")
        deadline = self._router.deadline(timeout)
        await self._client.start()
        req = DeleteAclsRequest

        async def round_(batch: list[AclBindingFilter]) -> dict[AclBindingFilter, Any]:
            resp = await self._router.exchange(
                self._client.least_loaded_node(), req, lambda ver: req(filters=[
                    req.DeleteAclsFilter(
                        resource_type_filter=int(f.restype), resource_name_filter=f.name,
                        pattern_type_filter=int(f.resource_pattern_type),
                        principal_filter=f.principal, host_filter=f.host,
                        operation=int(f.operation), permission_type=int(f.permission_type))
                    for f in batch]), deadline)
            out: dict[AclBindingFilter, Any] = {}
            for f, r in zip(batch, resp.filter_results, strict=False):
                if r.error_code:
                    out[f] = error_for(r.error_code, r.error_message, repr(f))
                    continue
                out[f] = [AclBinding(ResourceType(m.resource_type), m.resource_name,
                                     ResourcePatternType(m.pattern_type), m.principal, m.host,
                                     AclOperation(m.operation),
                                     AclPermissionType(m.permission_type))
                          for m in r.matching_acls if not m.error_code]
            return out

        results = await self._router.per_entity(items, round_, deadline)
        return finish(results, "delete_acls", return_exceptions)

    # --- log dirs ---------------------------------------------------------------------

    async def describe_log_dirs(self, brokers: Iterable[int] | None = None, *,
                                timeout: float | None = None, return_exceptions: bool = False
                                ) -> dict[int, dict[str, LogDirDescription]]:
        """Each broker's log directories and the replicas in them (asked of each broker).

        Args:
            brokers: broker ids (default: every broker).

        Returns:
            broker id -> log dir path -> :class:`LogDirDescription`.

        Raises:
            PartialFailureError: some brokers failed (e.g. ``UnsupportedVersionError``).
        """
        await self._client.start()
        ids = v.unique(brokers if brokers is not None else self._router.brokers(), "broker")
        deadline = self._router.deadline(timeout)

        async def send(node: int, _batch: list[int]) -> dict[int, Any]:
            resp = await self._router.exchange(
                node, DescribeLogDirsRequest, lambda ver: DescribeLogDirsRequest(topics=None),
                deadline)
            if resp.error_code:
                return {node: error_for(resp.error_code, None, f"broker {node}")}
            dirs = {}
            for d in resp.results:
                replicas = {TopicPartition(t.name, p.partition_index): ReplicaInfo(
                    p.partition_size, p.offset_lag, p.is_future_key)
                    for t in d.topics for p in t.partitions}
                dirs[d.log_dir] = LogDirDescription(
                    d.log_dir, error_for(d.error_code, None, d.log_dir) if d.error_code
                    else None, replicas, d.total_bytes, d.usable_bytes)
            return {node: dirs}

        results = await self._router.per_entity(
            ids, lambda batch: self._router.fan_out({b: [b] for b in batch}, send), deadline)
        return finish(results, "describe_log_dirs", return_exceptions)

    async def _per_replica_broker(
            self, batch: list[TopicPartitionReplica],
            send: Callable[[int, list[TopicPartitionReplica]],
                           Awaitable[Mapping[TopicPartitionReplica, Any]]]
    ) -> dict[TopicPartitionReplica, Any]:
        """Send each broker its replicas at once; a broker missing from the metadata fails
        its replicas without a request."""
        known = set(self._router.brokers())
        out: dict[TopicPartitionReplica, Any] = {r: Fatal(BrokerNotAvailableError(
            f"broker {r.broker_id} is not in the cluster metadata"))
            for r in batch if r.broker_id not in known}
        groups: dict[int, list[TopicPartitionReplica]] = {}
        for r in batch:
            if r.broker_id in known:
                groups.setdefault(r.broker_id, []).append(r)
        out.update(await self._router.fan_out(groups, send))
        return out

    async def alter_replica_log_dirs(self, replica_assignments: Mapping[
                                         TopicPartitionReplica, str], *,
                                     timeout: float | None = None,
                                     return_exceptions: bool = False
                                     ) -> dict[TopicPartitionReplica, None]:
        """Move replicas to other log directories of their brokers (Java's
        ``Admin.alterReplicaLogDirs``, KIP-113): each broker copies the replica into the
        new directory in the background and switches over once it has caught up. For a
        replica the broker does not host yet, the directory is where it will be created.

        Sent as AlterReplicaLogDirs to each replica's broker, all brokers at once. Needs
        ALTER on the cluster.

        Args:
            replica_assignments: replica -> absolute path of a log directory of its broker.
            timeout: seconds for the whole call, retries included (default
                ``default.api.timeout.ms``).
            return_exceptions: return failures in the dict instead of raising.

        Returns:
            replica -> None for each replica the broker accepted.

        Raises:
            InvalidArgumentError: a bad replica or an empty path (nothing is sent).
            LogDirNotFoundError / KafkaStorageError / ReplicaNotAvailableError /
                ClusterAuthorizationFailedError: what a broker answered for a replica (raised
                as is for a single replica). As in Java, these answers are final, not
                retried; only a broker that cannot be reached is asked again until
                ``timeout``.
            BrokerNotAvailableError: the replica's broker is not in the cluster metadata.
            PartialFailureError: some replicas failed.
        """
        items = dict(replica_assignments)
        for r, path in items.items():
            _check_replica(r)
            _check_log_dir(r, path)
        await self._client.start()
        deadline = self._router.deadline(timeout)
        req = AlterReplicaLogDirsRequest

        def build(batch: list[TopicPartitionReplica]) -> Any:
            by_dir: dict[str, dict[str, list[int]]] = {}
            for r in batch:
                by_dir.setdefault(items[r], {}).setdefault(r.topic, []).append(r.partition)
            return req(dirs=[req.AlterReplicaLogDir(path=path, topics=[
                req.AlterReplicaLogDir.AlterReplicaLogDirTopic(name=t, partitions=ps)
                for t, ps in topics.items()]) for path, topics in by_dir.items()])

        async def send(node: int, batch: list[TopicPartitionReplica]
                       ) -> dict[TopicPartitionReplica, Any]:
            resp = await self._router.exchange(node, req, lambda ver: build(batch), deadline)
            return {TopicPartitionReplica(t.topic_name, p.partition_index, node): Fatal(
                error_for(p.error_code, None, f"replica of {t.topic_name}-"
                                              f"{p.partition_index} on broker {node}"))
                    if p.error_code else None
                    for t in resp.results for p in t.partitions}

        results = await self._router.per_entity(
            list(items), lambda batch: self._per_replica_broker(batch, send), deadline)
        return finish(results, "alter_replica_log_dirs", return_exceptions)

    async def describe_replica_log_dirs(self, replicas: Iterable[TopicPartitionReplica], *,
                                        timeout: float | None = None,
                                        return_exceptions: bool = False
                                        ) -> dict[TopicPartitionReplica, ReplicaLogDirInfo]:
        """The log directory of each replica, and the one it is moving to (Java's
        ``Admin.describeReplicaLogDirs``): follow an :meth:`alter_replica_log_dirs`.

        Sent as DescribeLogDirs, naming the replicas' partitions, to each replica's broker,
        all brokers at once. Directories the broker reports offline
        (KAFKA_STORAGE_ERROR) are skipped, as Java does.

        Args:
            replicas: the replicas to describe.
            timeout: seconds for the whole call, retries included (default
                ``default.api.timeout.ms``).
            return_exceptions: return failures in the dict instead of raising.

        Returns:
            replica -> :class:`ReplicaLogDirInfo` (with no directories for a replica its
            broker does not hold).

        Raises:
            InvalidArgumentError: a bad replica (nothing is sent).
            BrokerNotAvailableError: the replica's broker is not in the cluster metadata.
            ClusterAuthorizationFailedError / ...: the broker's top-level error (v3+) for
                each of its replicas.
            ProtocolError: the broker reported another error for one of its directories.
            PartialFailureError: some replicas failed.
        """
        wanted = list(replicas)
        for r in wanted:
            _check_replica(r)
        wanted = v.unique(wanted, "replica")
        await self._client.start()
        deadline = self._router.deadline(timeout)
        req = DescribeLogDirsRequest

        async def send(node: int, batch: list[TopicPartitionReplica]
                       ) -> dict[TopicPartitionReplica, Any]:
            by_topic: dict[str, list[int]] = {}
            for r in batch:
                by_topic.setdefault(r.topic, []).append(r.partition)
            resp = await self._router.exchange(node, req, lambda ver: req(topics=[
                req.DescribableLogDirTopic(topic=t, partitions=ps)
                for t, ps in by_topic.items()]), deadline)
            if resp.error_code:
                err = error_for(resp.error_code, None, f"broker {node}")
                return dict.fromkeys(batch, err)
            found: dict[tuple[str, int], dict[str, Any]] = {}
            for d in resp.results:
                if d.error_code == KafkaStorageError.code:
                    continue  # an offline directory: nothing to report from it
                if d.error_code:
                    bad = ProtocolError(f"broker {node} reported error {d.error_code} for "
                                        f"log directory {d.log_dir!r}")
                    return dict.fromkeys(batch, bad)
                for t in d.topics:
                    for p in t.partitions:
                        where = "future" if p.is_future_key else "current"
                        found.setdefault((t.name, p.partition_index), {}).update({
                            f"{where}_replica_log_dir": d.log_dir,
                            f"{where}_replica_offset_lag": p.offset_lag})
            return {r: ReplicaLogDirInfo(**found.get((r.topic, r.partition), {}))
                    for r in batch}

        results = await self._router.per_entity(
            wanted, lambda batch: self._per_replica_broker(batch, send), deadline)
        return finish(results, "describe_replica_log_dirs", return_exceptions)


def _check_replica(r: object) -> None:
    if not isinstance(r, TopicPartitionReplica):
        raise InvalidArgumentError(f"expected TopicPartitionReplica, got {r!r}")
    v.check_topic_name(r.topic)
    v.check_partition(r.topic, r.partition)
    if isinstance(r.broker_id, bool) or not isinstance(r.broker_id, int) or r.broker_id < 0:
        raise InvalidArgumentError(f"broker_id of {r!r} must be an int >= 0")


def _check_log_dir(r: object, path: object) -> None:
    if not isinstance(path, str) or not path:
        raise InvalidArgumentError(f"log dir of {r!r} must be a non-empty str, got {path!r}")


def _check_binding(a: AclBinding) -> None:
    if not isinstance(a, AclBinding):
        raise InvalidArgumentError(f"expected AclBinding, got {a!r}")
    bad = [name for name, value, allowed in (
        ("restype", a.restype, set(ResourceType) - {ResourceType.ANY, ResourceType.UNKNOWN}),
        ("resource_pattern_type", a.resource_pattern_type,
         {ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED}),
        ("operation", a.operation, set(AclOperation) - {AclOperation.ANY, AclOperation.UNKNOWN}),
        ("permission_type", a.permission_type,
         {AclPermissionType.ALLOW, AclPermissionType.DENY}),
    ) if value not in allowed]
    if bad or not a.name or not a.principal or not a.host:
        raise InvalidArgumentError(
            f"{a!r} cannot be created: {', '.join(bad) or 'empty name, principal or host'}")
