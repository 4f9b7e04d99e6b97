"""Admin operations on consumer groups, committed offsets, records, producers and
transactions — a base class of :class:`~kontrakt.clients.admin.AsyncAdminClient`.

Routing: group operations go to each group's coordinator (FindCoordinator, cached; retried
after NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS);
ListOffsets, DeleteRecords and DescribeProducers are split per partition leader;
DescribeTransactions goes to each transactional id's coordinator; ListGroups and
ListTransactions go to every broker and are merged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kontrakt._types import OffsetAndMetadata, TopicPartition
from kontrakt.clients.admin import _validate as v
from kontrakt.clients.admin._routing import Router, error_for, finish
from kontrakt.clients.admin._types import (
    AclOperation,
    ConsumerGroupDescription,
    ConsumerGroupListing,
    ConsumerGroupState,
    ConsumerGroupType,
    DeletedRecords,
    IsolationLevel,
    ListOffsetsResultInfo,
    MemberAssignment,
    MemberDescription,
    Node,
    OffsetSpec,
    ProducerState,
    TransactionDescription,
    TransactionListing,
)
from kontrakt.clients.client import AsyncKafkaClient
from kontrakt.clients.group._protocol import decode_assignment, decode_subscription
from kontrakt.errors import (
    CorruptMessageError,
    InvalidArgumentError,
    PartialFailureError,
    UnsupportedVersionError,
)
from kontrakt.protocol.messages import (
    DeleteGroupsRequest,
    DeleteRecordsRequest,
    DescribeGroupsRequest,
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    ListOffsetsRequest,
    ListTransactionsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
)
from kontrakt.protocol.spec import Request

__all__ = ["GroupOperations"]

_AUTH_OPS_UNKNOWN = -(2**31)
TP = TopicPartition


def _by_topic(tps: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in tps:
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


def _check_tps(tps: Iterable[object], what: str) -> list[TopicPartition]:
    out = []
    for tp in tps:
        if not isinstance(tp, TopicPartition):
            raise InvalidArgumentError(f"{what}: expected TopicPartition, got {tp!r}")
        v.check_topic_name(tp.topic)
        v.check_partition(tp.topic, tp.partition)
        out.append(tp)
    return v.unique(out, "partition")


class GroupOperations:
    """Group, offset, record, producer and transaction operations (see the module doc)."""

    def __init__(self, client: AsyncKafkaClient, router: Router) -> None:
        self._client = client
        self._router = router

    # --- groups -----------------------------------------------------------------------

    async def list_consumer_groups(self, *, states: Iterable[ConsumerGroupState] | None = None,
                                   types: Iterable[ConsumerGroupType] | None = None,
                                   timeout: float | None = None) -> list[ConsumerGroupListing]:
        """Every group of every broker, sorted by id.

        Args:
            states: only groups in these states (brokers with ListGroups v4+).
            types: only groups of these types (brokers with ListGroups v5+).

        Raises:
            PartialFailureError: a broker failed; ``.results`` maps broker id to its list
                or its error.
            UnsupportedVersionError: (in the results) a filter the broker cannot apply.
        """
        await self._client.start()
        state_names = [ConsumerGroupState(s).value for s in states or ()]
        type_names = [ConsumerGroupType(t).value.lower() for t in types or ()]
        deadline = self._router.deadline(timeout)

        def build(version: int) -> Request:
            if (state_names and version < 4) or (type_names and version < 5):
                raise UnsupportedVersionError(
                    f"ListGroups v{version} cannot filter by state/type")
            return ListGroupsRequest(states_filter=state_names if version >= 4 else [],
                                     types_filter=type_names if version >= 5 else [])

        async def send(node: int, _b: list[int]) -> dict[int, Any]:
            resp = await self._router.exchange(node, ListGroupsRequest, build, deadline)
            if resp.error_code:
                return {node: error_for(resp.error_code, None, f"broker {node}")}
            return {node: [ConsumerGroupListing(
                g.group_id, not g.protocol_type, ConsumerGroupState.parse(g.group_state),
                ConsumerGroupType.parse(g.group_type), g.protocol_type) for g in resp.groups]}

        results = await self._router.per_entity(
            self._router.brokers(),
            lambda batch: self._router.fan_out({b: [b] for b in batch}, send), deadline)
        finish(results, "list_consumer_groups", False)
        merged = {g.group_id: g for listing in results.values() for g in listing}
        return [merged[k] for k in sorted(merged)]

    async def _per_group(self, group_ids: list[str], key_type: str, deadline: float,
                         send: Any) -> dict[str, Any]:
        async def round_(batch: list[str]) -> dict[str, Any]:
            groups, errors = await self._router.coordinators(batch, key_type)
            out = dict(errors)
            out.update(await self._router.fan_out(groups, send))
            for key, outcome in out.items():
                if isinstance(outcome, BaseException):
                    self._router.coordinator_error(key, key_type, outcome)
            return out

        return await self._router.per_entity(group_ids, round_, deadline)

    async def describe_consumer_groups(self, group_ids: Iterable[str], *,
                                       include_authorized_operations: bool = False,
                                       timeout: float | None = None,
                                       return_exceptions: bool = False
                                       ) -> dict[str, ConsumerGroupDescription]:
        """Describe groups, decoding members' subscriptions and assignments (consumer
        protocol versions 0-3, with :mod:`kontrakt.clients.group`'s codec; other protocols
        keep the raw bytes only).

        Returns:
            group id -> :class:`ConsumerGroupDescription` (a group that does not exist is
            described as DEAD with no members, as brokers report it).

        Raises:
            InvalidArgumentError: an empty group id.
            PartialFailureError: some groups failed.
        """
        ids = v.unique((v.check_group_id(g) for g in group_ids), "group")
        deadline = self._router.deadline(timeout)
        await self._client.start()

        async def send(node: int, batch: list[str]) -> dict[str, Any]:
            resp = await self._router.exchange(node, DescribeGroupsRequest, lambda ver: (
                DescribeGroupsRequest(groups=batch, include_authorized_operations=(
                    include_authorized_operations and ver >= 3))), deadline)
            broker = self._client.broker(node)
            coordinator = None if broker is None else Node(node, broker.host, broker.port,
                                                           broker.rack)
            out: dict[str, Any] = {}
            for g in resp.groups:
                if g.error_code:
                    out[g.group_id] = error_for(g.error_code, g.error_message,
                                                f"group {g.group_id!r}")
                    continue
                out[g.group_id] = _describe_group(g, coordinator, include_authorized_operations)
            return out

        results = await self._per_group(ids, "group", deadline, send)
        return finish(results, "describe_consumer_groups", return_exceptions)

    async def delete_consumer_groups(self, group_ids: Iterable[str], *,
                                     timeout: float | None = None,
                                     return_exceptions: bool = False) -> dict[str, None]:
        """Delete groups (they must be empty).

        Raises:
            InvalidArgumentError: an empty group id.
            PartialFailureError: some groups failed (``NonEmptyGroupError``,
                ``GroupIdNotFoundError``).
        """
        ids = v.unique((v.check_group_id(g) for g in group_ids), "group")
        deadline = self._router.deadline(timeout)
        await self._client.start()

        async def send(node: int, batch: list[str]) -> dict[str, Any]:
            resp = await self._router.exchange(node, DeleteGroupsRequest, lambda ver: (
                DeleteGroupsRequest(groups_names=batch)), deadline)
            return {r.group_id: error_for(r.error_code, None, f"group {r.group_id!r}")
                    if r.error_code else None for r in resp.results}

        results = await self._per_group(ids, "group", deadline, send)
        return finish(results, "delete_consumer_groups", return_exceptions)

    async def remove_members_from_consumer_group(
            self, group_id: str, members: Iterable[str] | None = None, *,
            reason: str | None = None, timeout: float | None = None,
            return_exceptions: bool = False) -> dict[str, None]:
        """Remove members from a group (LeaveGroup v3+ on their behalf, KIP-345), as the Java
        admin's ``removeMembersFromConsumerGroup``: the group rebalances without them.

        Args:
            group_id: the group.
            members: the ``group.instance.id`` of each static member to remove; None removes
                every member the group has now (static and dynamic, found with
                DescribeGroups), as Java's ``removeAll``.
            reason: sent to brokers with LeaveGroup v5+ (KIP-800), shown in their logs.

        Returns:
            member -> None for each removed member, keyed by its instance id (or, for a
            dynamic member removed with ``members=None``, its member id).

        Raises:
            InvalidArgumentError: an empty group id or instance id, or ``members`` empty.
            UnsupportedVersionError: the coordinator predates LeaveGroup v3 (Kafka 2.4).
            BrokerResponseError: a group-level error (e.g. ``GroupIdNotFoundError``).
            PartialFailureError: some members failed (``UnknownMemberIdError``, or
                ``FencedInstanceIdError``).
        """
        gid = v.check_group_id(group_id)
        wanted: list[tuple[str, str | None]] | None = None
        if members is not None:
            ids = v.unique(members, "group.instance.id")
            bad = [m for m in ids if not isinstance(m, str) or not m]
            if bad:
                raise InvalidArgumentError(f"members: a group.instance.id must be a non-empty "
                                           f"str, got {bad[0]!r}")
            if not ids:
                raise InvalidArgumentError("members: name at least one group.instance.id, "
                                           "or pass None to remove every member")
            wanted = [("", iid) for iid in ids]
        deadline = self._router.deadline(timeout)
        await self._client.start()
        lg = LeaveGroupRequest

        async def send(node: int, _b: list[str]) -> dict[str, Any]:
            leaving = wanted
            if leaving is None:
                described = await self._router.exchange(
                    node, DescribeGroupsRequest, lambda ver: DescribeGroupsRequest(
                        groups=[gid]), deadline)
                group = described.groups[0]
                if group.error_code:
                    return {gid: error_for(group.error_code, None, f"group {gid!r}")}
                leaving = [(m.member_id, m.group_instance_id) for m in group.members]
                if not leaving:
                    return {gid: {}}

            def build(version: int) -> Any:
                if version < 3:
                    raise UnsupportedVersionError(
                        "remove_members_from_consumer_group needs LeaveGroup v3 (Kafka 2.4, "
                        f"KIP-345); the broker offers v{version}")
                return lg(group_id=gid, members=[
                    lg.MemberIdentity(member_id=mid, group_instance_id=iid, reason=reason)
                    for mid, iid in leaving])

            resp = await self._router.exchange(node, lg, build, deadline)
            if resp.error_code:
                return {gid: error_for(resp.error_code, None, f"group {gid!r}")}
            return {gid: {(m.group_instance_id or m.member_id): error_for(
                m.error_code, None, f"member {m.group_instance_id or m.member_id!r} of group "
                f"{gid!r}") if m.error_code else None for m in resp.members}}

        outcome = (await self._per_group([gid], "group", deadline, send))[gid]
        if isinstance(outcome, BaseException):
            raise outcome
        return finish(outcome, f"remove_members_from_consumer_group({gid!r})",
                      return_exceptions)

    # --- committed offsets --------------------------------------------------------------

    async def list_consumer_group_offsets(
            self, group_id: str, partitions: Iterable[TopicPartition] | None = None, *,
            require_stable: bool = False, timeout: float | None = None,
            return_exceptions: bool = False) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """A group's committed offsets (OffsetFetch to its coordinator).

        Args:
            partitions: which partitions (default: every partition the group committed).
            require_stable: fail partitions with a pending transactional commit
                (UNSTABLE_OFFSET_COMMIT, retried) instead of returning the older offset.

        Returns:
            partition -> :class:`OffsetAndMetadata`, or None for a requested partition
            without a committed offset.

        Raises:
            InvalidArgumentError: an empty group id or bad partition.
            BrokerResponseError: a group-level error (e.g. ``GroupAuthorizationFailedError``)
                after retries.
            PartialFailureError: some partitions failed.
        """
        gid = v.check_group_id(group_id)
        wanted = None if partitions is None else _check_tps(partitions, "partitions")
        deadline = self._router.deadline(timeout)
        await self._client.start()

        def build(version: int) -> Request:
            req = OffsetFetchRequest
            topics = None if wanted is None else _by_topic(wanted)
            if version >= 8:
                return req(require_stable=require_stable, groups=[req.OffsetFetchRequestGroup(
                    group_id=gid, topics=None if topics is None else [
                        req.OffsetFetchRequestGroup.OffsetFetchRequestTopics(
                            name=t, partition_indexes=ps) for t, ps in topics.items()])])
            return req(group_id=gid, require_stable=require_stable and version >= 7,
                       topics=None if topics is None else [req.OffsetFetchRequestTopic(
                           name=t, partition_indexes=ps) for t, ps in topics.items()])

        async def send(node: int, _batch: list[str]) -> dict[str, Any]:
            resp = await self._router.exchange(node, OffsetFetchRequest, build, deadline)
            if resp.groups:
                group = resp.groups[0]
                code, topics = group.error_code, group.topics
            else:
                code, topics = resp.error_code, resp.topics
            if code:
                return {gid: error_for(code, None, f"group {gid!r}")}
            out: dict[TopicPartition, Any] = {}
            for t in topics:
                for p in t.partitions:
                    tp = TP(t.name, p.partition_index)
                    if p.error_code:
                        out[tp] = error_for(p.error_code, None, f"{tp} of group {gid!r}")
                    elif p.committed_offset < 0:
                        out[tp] = None
                    else:
                        out[tp] = OffsetAndMetadata(p.committed_offset, p.metadata or "",
                                                    p.committed_leader_epoch)
            return {gid: out}

        outcome = (await self._per_group([gid], "group", deadline, send))[gid]
        if isinstance(outcome, BaseException):
            raise outcome
        if wanted is not None:
            outcome = {tp: outcome.get(tp) for tp in wanted}
        return finish(outcome, f"list_consumer_group_offsets({gid!r})", return_exceptions)

    async def alter_consumer_group_offsets(
            self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata | int], *,
            timeout: float | None = None, return_exceptions: bool = False
            ) -> dict[TopicPartition, None]:
        """Set a group's committed offsets (an OffsetCommit outside any generation, so the
        group must have no active members).

        Raises:
            InvalidArgumentError: bad partition or negative offset.
            PartialFailureError: some partitions failed (e.g. ``UnknownMemberIdError`` while
                the group is active).
        """
        gid = v.check_group_id(group_id)
        tps = _check_tps(offsets, "offsets")
        values: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp in tps:
            given = offsets[tp]
            values[tp] = given if isinstance(given, OffsetAndMetadata) else OffsetAndMetadata(given)
        for tp, om in values.items():
            if isinstance(om.offset, bool) or not isinstance(om.offset, int) or om.offset < 0:
                raise InvalidArgumentError(f"offset for {tp} must be an int >= 0, got {om!r}")
        deadline = self._router.deadline(timeout)
        await self._client.start()
        req = OffsetCommitRequest
        rt = req.OffsetCommitRequestTopic

        async def round_(batch: list[TopicPartition]) -> dict[TopicPartition, Any]:
            groups, errors = await self._router.coordinators([gid], "group")
            if errors:
                return {tp: errors[gid] for tp in batch}
            (node,) = groups
            resp = await self._router.exchange(node, req, lambda ver: req(
                group_id=gid, generation_id_or_member_epoch=-1, member_id="",
                topics=[rt(name=t, partitions=[rt.OffsetCommitRequestPartition(
                    partition_index=p, committed_offset=values[TP(t, p)].offset,
                    committed_leader_epoch=values[TP(t, p)].leader_epoch,
                    committed_metadata=values[TP(t, p)].metadata) for p in ps])
                    for t, ps in _by_topic(batch).items()]), deadline)
            out: dict[TopicPartition, Any] = {}
            for t in resp.topics:
                for p in t.partitions:
                    tp = TP(t.name, p.partition_index)
                    out[tp] = None if not p.error_code else self._router.coordinator_error(
                        gid, "group", error_for(p.error_code, None, f"{tp} of group {gid!r}"))
            return out

        results = await self._router.per_entity(tps, round_, deadline)
        return finish(results, f"alter_consumer_group_offsets({gid!r})", return_exceptions)

    async def delete_consumer_group_offsets(
            self, group_id: str, partitions: Iterable[TopicPartition], *,
            timeout: float | None = None, return_exceptions: bool = False
            ) -> dict[TopicPartition, None]:
        """Delete a group's committed offsets for partitions it no longer consumes
        (OffsetDelete).

        Raises:
            InvalidArgumentError: bad group id or partition.
            BrokerResponseError: a group-level error (e.g. ``GroupIdNotFoundError``).
            PartialFailureError: some partitions failed (e.g.
                ``GroupSubscribedToTopicError``).
        """
        gid = v.check_group_id(group_id)
        tps = _check_tps(partitions, "partitions")
        deadline = self._router.deadline(timeout)
        await self._client.start()
        req = OffsetDeleteRequest
        rt = req.OffsetDeleteRequestTopic

        async def send(node: int, _b: list[str]) -> dict[str, Any]:
            resp = await self._router.exchange(node, req, lambda ver: req(
                group_id=gid, topics=[rt(name=t, partitions=[
                    rt.OffsetDeleteRequestPartition(partition_index=p) for p in ps])
                    for t, ps in _by_topic(tps).items()]), deadline)
            if resp.error_code:
                return {gid: error_for(resp.error_code, None, f"group {gid!r}")}
            return {gid: {TP(t.name, p.partition_index): error_for(
                p.error_code, None, f"{t.name}-{p.partition_index} of group {gid!r}")
                if p.error_code else None for t in resp.topics for p in t.partitions}}

        outcome = (await self._per_group([gid], "group", deadline, send))[gid]
        if isinstance(outcome, BaseException):
            raise outcome
        return finish(outcome, f"delete_consumer_group_offsets({gid!r})", return_exceptions)

    # --- partitions at their leaders ---------------------------------------------------

    async def _per_leader(self, tps: list[TopicPartition], deadline: float,
                          send: Any) -> dict[TopicPartition, Any]:
        first = [True]

        async def round_(batch: list[TopicPartition]) -> dict[TopicPartition, Any]:
            groups, errors = await self._router.leaders(
                [(tp.topic, tp.partition) for tp in batch], refresh=not first[0])
            first[0] = False
            out: dict[TopicPartition, Any] = {TP(*k): e for k, e in errors.items()}
            out.update(await self._router.fan_out(
                {n: [TP(*k) for k in ks] for n, ks in groups.items()}, send))
            return out

        return await self._router.per_entity(tps, round_, deadline)

    async def list_offsets(self, specs: Mapping[TopicPartition, OffsetSpec], *,
                           isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
                           timeout: float | None = None, return_exceptions: bool = False
                           ) -> dict[TopicPartition, ListOffsetsResultInfo]:
        """Look up offsets (earliest, latest, max timestamp, or by timestamp), asking each
        partition's leader.

        Returns:
            partition -> :class:`ListOffsetsResultInfo` (offset -1 when no record matches
            a timestamp).

        Raises:
            InvalidArgumentError: bad partition or spec.
            PartialFailureError: some partitions failed (``UnknownTopicOrPartitionError``
                for partitions that do not exist).
        """
        tps = _check_tps(specs, "specs")
        for tp in tps:
            if not isinstance(specs[tp], OffsetSpec):
                raise InvalidArgumentError(f"spec for {tp} must be an OffsetSpec")
        deadline = self._router.deadline(timeout)
        await self._client.start()
        req = ListOffsetsRequest
        rt = req.ListOffsetsTopic

        async def send(node: int, batch: list[TopicPartition]) -> dict[TopicPartition, Any]:
            resp = await self._router.exchange(node, req, lambda ver: req(
                replica_id=-1, isolation_level=int(isolation_level),
                timeout_ms=int(self._router.remaining(deadline) * 1000),
                topics=[rt(name=t, partitions=[rt.ListOffsetsPartition(
                    partition_index=p, timestamp=specs[TP(t, p)].timestamp) for p in ps])
                    for t, ps in _by_topic(batch).items()]), deadline)
            return {TP(t.name, p.partition_index): error_for(
                p.error_code, None, f"{t.name}-{p.partition_index}") if p.error_code
                else ListOffsetsResultInfo(p.offset, p.timestamp, p.leader_epoch)
                for t in resp.topics for p in t.partitions}

        results = await self._per_leader(tps, deadline, send)
        return finish(results, "list_offsets", return_exceptions)

    async def delete_records(self, before_offsets: Mapping[TopicPartition, int], *,
                             operation_timeout: float | None = None,
                             timeout: float | None = None, return_exceptions: bool = False
                             ) -> dict[TopicPartition, DeletedRecords]:
        """Delete records before the given offsets (-1: up to the high watermark), asking
        each partition's leader.

        Returns:
            partition -> :class:`DeletedRecords` (the new low watermark).

        Raises:
            InvalidArgumentError: bad partition, or an offset < -1.
            PartialFailureError: some partitions failed (e.g. ``OffsetOutOfRangeError``).
        """
        tps = _check_tps(before_offsets, "before_offsets")
        for tp in tps:
            off = before_offsets[tp]
            if isinstance(off, bool) or not isinstance(off, int) or off < -1:
                raise InvalidArgumentError(f"offset for {tp} must be >= -1, got {off!r}")
        deadline = self._router.deadline(timeout)
        await self._client.start()
        req = DeleteRecordsRequest
        rt = req.DeleteRecordsTopic

        async def send(node: int, batch: list[TopicPartition]) -> dict[TopicPartition, Any]:
            resp = await self._router.exchange(node, req, lambda ver: req(
                timeout_ms=int((operation_timeout or self._router.remaining(deadline)) * 1000),
                topics=[rt(name=t, partitions=[rt.DeleteRecordsPartition(
                    partition_index=p, offset=before_offsets[TP(t, p)]) for p in ps])
                    for t, ps in _by_topic(batch).items()]), deadline)
            return {TP(t.name, p.partition_index): error_for(
                p.error_code, None, f"{t.name}-{p.partition_index}") if p.error_code
                else DeletedRecords(p.low_watermark)
                for t in resp.topics for p in t.partitions}

        results = await self._per_leader(tps, deadline, send)
        return finish(results, "delete_records", return_exceptions)

    async def describe_producers(self, partitions: Iterable[TopicPartition], *,
                                 timeout: float | None = None, return_exceptions: bool = False
                                 ) -> dict[TopicPartition, list[ProducerState]]:
        """The active (idempotent or transactional) producers of partitions, asking each
        partition's leader.

        Raises:
            InvalidArgumentError: a bad partition.
            PartialFailureError: some partitions failed.
        """
        tps = _check_tps(partitions, "partitions")
        deadline = self._router.deadline(timeout)
        await self._client.start()
        req = DescribeProducersRequest

        async def send(node: int, batch: list[TopicPartition]) -> dict[TopicPartition, Any]:
            resp = await self._router.exchange(node, req, lambda ver: req(topics=[
                req.TopicRequest(name=t, partition_indexes=ps)
                for t, ps in _by_topic(batch).items()]), deadline)
            return {TP(t.name, p.partition_index): error_for(
                p.error_code, p.error_message, f"{t.name}-{p.partition_index}")
                if p.error_code else [ProducerState(
                    s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp,
                    s.coordinator_epoch, s.current_txn_start_offset)
                    for s in p.active_producers]
                for t in resp.topics for p in t.partitions}

        results = await self._per_leader(tps, deadline, send)
        return finish(results, "describe_producers", return_exceptions)

    # --- transactions -----------------------------------------------------------------

    async def describe_transactions(self, transactional_ids: Iterable[str], *,
                                    timeout: float | None = None,
                                    return_exceptions: bool = False
                                    ) -> dict[str, TransactionDescription]:
        """Describe transactions, asking each transactional id's coordinator.

        Raises:
            InvalidArgumentError: an empty transactional id.
            PartialFailureError: some ids failed (e.g. ``TransactionalIdNotFoundError``).
        """
        ids = v.unique((_check_txn_id(t) for t in transactional_ids), "transactional id")
        deadline = self._router.deadline(timeout)
        await self._client.start()
        req = DescribeTransactionsRequest

        async def send(node: int, batch: list[str]) -> dict[str, Any]:
            resp = await self._router.exchange(node, req, lambda ver: req(
                transactional_ids=batch), deadline)
            return {s.transactional_id: error_for(
                s.error_code, None, f"transactional id {s.transactional_id!r}")
                if s.error_code else TransactionDescription(
                    s.transactional_id, node, s.transaction_state, s.producer_id,
                    s.producer_epoch, s.transaction_timeout_ms, s.transaction_start_time_ms,
                    tuple(TP(t.topic, p) for t in s.topics for p in t.partitions))
                for s in resp.transaction_states}

        results = await self._per_group(ids, "transaction", deadline, send)
        return finish(results, "describe_transactions", return_exceptions)

    async def list_transactions(self, *, states: Iterable[str] | None = None,
                                producer_ids: Iterable[int] | None = None,
                                duration_filter_ms: int | None = None,
                                timeout: float | None = None) -> list[TransactionListing]:
        """Transactions known to every broker's transaction coordinator, merged.

        Args:
            states: only these states (e.g. ``Ongoing``).
            producer_ids: only these producers.
            duration_filter_ms: only transactions open longer than this (ListTransactions
                v1+).

        Raises:
            PartialFailureError: a broker failed; ``.results`` maps broker id to its list
                or its error.
        """
        await self._client.start()
        deadline = self._router.deadline(timeout)
        req = ListTransactionsRequest

        def build(version: int) -> Request:
            if duration_filter_ms is not None and version < 1:
                raise UnsupportedVersionError("ListTransactions v0 cannot filter by duration")
            return req(state_filters=list(states or ()), producer_id_filters=list(
                producer_ids or ()), duration_filter=(
                -1 if duration_filter_ms is None else duration_filter_ms))

        async def send(node: int, _b: list[int]) -> dict[int, Any]:
            resp = await self._router.exchange(node, req, build, deadline)
            if resp.error_code:
                return {node: error_for(resp.error_code, None, f"broker {node}")}
            return {node: [TransactionListing(s.transactional_id, s.producer_id,
                                              s.transaction_state)
                           for s in resp.transaction_states]}

        results = await self._router.per_entity(
            self._router.brokers(),
            lambda batch: self._router.fan_out({b: [b] for b in batch}, send), deadline)
        finish(results, "list_transactions", False)
        merged = {t.transactional_id: t for listing in results.values() for t in listing}
        return [merged[k] for k in sorted(merged)]


def _check_txn_id(tid: object) -> str:
    if not isinstance(tid, str) or not tid:
        raise InvalidArgumentError(f"transactional id must be a non-empty str, got {tid!r}")
    return tid


def _describe_group(g: Any, coordinator: Node | None,
                    with_ops: bool) -> ConsumerGroupDescription:
    consumer = g.protocol_type in ("consumer", "")
    members = []
    for m in g.members:
        topics: tuple[str, ...] = ()
        owned: tuple[TopicPartition, ...] = ()
        rack = None
        assignment = MemberAssignment()
        if consumer:
            # A malformed blob must not hide the rest of the description.
            try:
                if m.member_metadata:
                    sub = decode_subscription(m.member_metadata)
                    topics, owned = tuple(sub.topics), tuple(sub.owned_partitions)
                    rack = sub.rack_id
                if m.member_assignment:
                    a = decode_assignment(m.member_assignment)
                    assignment = MemberAssignment(tuple(a.partitions), a.user_data)
            except CorruptMessageError:
                pass
        members.append(MemberDescription(
            m.member_id, m.client_id, m.client_host, assignment, m.group_instance_id,
            topics, owned, rack, bytes(m.member_metadata or b""),
            bytes(m.member_assignment or b"")))
    ops = None
    if with_ops and g.authorized_operations != _AUTH_OPS_UNKNOWN:
        ops = frozenset(op for op in AclOperation if g.authorized_operations & (1 << op.value))
    return ConsumerGroupDescription(
        g.group_id, not g.protocol_type, tuple(members), g.protocol_data,
        ConsumerGroupState.parse(g.group_state), coordinator, g.protocol_type, ops)


_ = PartialFailureError
