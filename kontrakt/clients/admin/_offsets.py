"""Admin operations on consumer groups' committed offsets — a base class of
:class:`~kontrakt.clients.admin.AsyncAdminClient`: list (OffsetFetch), alter (OffsetCommit
outside any generation) and delete (OffsetDelete) them, at each group's coordinator, and
reset them to offsets looked up at the partitions' leaders (``kafka-consumer-groups.sh
--reset-offsets``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from kontrakt._types import OffsetAndMetadata, TopicPartition
from kontrakt.clients.admin import _validate as v
from kontrakt.clients.admin._routing import Router, error_for, finish
from kontrakt.clients.admin._types import OffsetSpec
from kontrakt.clients.client import AsyncKafkaClient
from kontrakt.clients.group._protocol import group_by_topic
from kontrakt.errors import IllegalStateError, InvalidArgumentError
from kontrakt.protocol.errors import (
    FencedMemberEpochError,
    IllegalGenerationError,
    RebalanceInProgressError,
    StaleMemberEpochError,
    UnknownMemberIdError,
)
from kontrakt.protocol.messages import (
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
)
from kontrakt.protocol.spec import Request

if TYPE_CHECKING:
    from kontrakt.clients.admin._admin import AsyncAdminClient

__all__ = ["OffsetOperations", "OffsetShift"]

TP = TopicPartition

# What a commit outside any generation (member "", generation -1) is answered while the
# group has members: classic groups say UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION /
# REBALANCE_IN_PROGRESS, KIP-848 groups STALE_MEMBER_EPOCH / FENCED_MEMBER_EPOCH.
_ACTIVE_GROUP = (UnknownMemberIdError, IllegalGenerationError, RebalanceInProgressError,
                 StaleMemberEpochError, FencedMemberEpochError)


@dataclass(frozen=True, slots=True)
class OffsetShift:
    """A reset target for :meth:`reset_group_offsets`: the group's committed offset
    moved by ``by`` (negative: back), as ``kafka-consumer-groups.sh --shift-by``.

    Attributes:
        by: how many offsets to move.
    """

    by: int

    def __post_init__(self) -> None:
        if isinstance(self.by, bool) or not isinstance(self.by, int):
            raise InvalidArgumentError(f"OffsetShift.by must be an int, got {self.by!r}")


class OffsetOperations:
    """Committed-offset operations (see the module doc)."""

    _client: AsyncKafkaClient
    _router: Router

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
        wanted = None if partitions is None else v.check_partitions(partitions, "partitions")
        deadline = self._router.deadline(timeout)
        await self._client.start()

        def build(version: int) -> Request:
            req = OffsetFetchRequest
            topics = None if wanted is None else group_by_topic(wanted)
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

        outcome = (await self._router.per_coordinator([gid], "group", deadline, send))[gid]
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
        tps = v.check_partitions(offsets, "offsets")
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
                    for t, ps in group_by_topic(batch).items()]), deadline)
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
        tps = v.check_partitions(partitions, "partitions")
        deadline = self._router.deadline(timeout)
        await self._client.start()
        req = OffsetDeleteRequest
        rt = req.OffsetDeleteRequestTopic

        async def send(node: int, _b: list[str]) -> dict[str, Any]:
            resp = await self._router.exchange(node, req, lambda ver: req(
                group_id=gid, topics=[rt(name=t, partitions=[
                    rt.OffsetDeleteRequestPartition(partition_index=p) for p in ps])
                    for t, ps in group_by_topic(tps).items()]), deadline)
            if resp.error_code:
                return {gid: error_for(resp.error_code, None, f"group {gid!r}")}
            return {gid: {TP(t.name, p.partition_index): error_for(
                p.error_code, None, f"{t.name}-{p.partition_index} of group {gid!r}")
                if p.error_code else None for t in resp.topics for p in t.partitions}}

        outcome = (await self._router.per_coordinator([gid], "group", deadline, send))[gid]
        if isinstance(outcome, BaseException):
            raise outcome
        return finish(outcome, f"delete_consumer_group_offsets({gid!r})", return_exceptions)

    async def reset_group_offsets(
            self, group_id: str, specs: Mapping[TopicPartition, OffsetSpec | OffsetShift | int],
            *, dry_run: bool = False, timeout: float | None = None,
            return_exceptions: bool = False) -> dict[TopicPartition, int]:
        """Reset a group's committed offsets, as ``kafka-consumer-groups.sh --reset-offsets
        --execute``: each partition's target is looked up at its leader (ListOffsets),
        kept within the partition's earliest and latest offsets, and committed for the
        group (as :meth:`alter_consumer_group_offsets`, so only while the group has no
        active members).

        Args:
            group_id: the consumer group.
            specs: partition -> target: ``OffsetSpec.earliest()``, ``OffsetSpec.latest()``,
                ``OffsetSpec.max_timestamp()``, ``OffsetSpec.for_timestamp(ms)`` (the first
                offset at or after that time; the latest when no record is that recent),
                an ``int`` offset, or :class:`OffsetShift` (the committed offset moved by
                ``by``; a partition without one fails with ``IllegalStateError``). Offsets
                below the earliest become the earliest, above the latest the latest.
            dry_run: look the offsets up but commit nothing (the tool without
                ``--execute``).
            timeout: seconds for the whole call (default: the client's
                ``default.api.timeout.ms``); lookups and commit are retried until then.

        Returns:
            partition -> the offset committed (or that would be, with ``dry_run``).

        Raises:
            InvalidArgumentError: bad group id, partition or target, before anything is
                sent.
            UnknownMemberIdError (or another member/generation error, e.g.
                ``StaleMemberEpochError`` for a KIP-848 group): the group has active
                members; its message says so. With one partition its own error,
                else in a PartialFailureError.
            BrokerResponseError: a group-level error looking up committed offsets for
                :class:`OffsetShift` targets (e.g. ``GroupAuthorizationFailedError``).
            PartialFailureError: some partitions failed (a lookup, e.g.
                ``UnknownTopicOrPartitionError``, or the commit); nothing is committed for
                a partition whose lookup failed. ``return_exceptions=True`` returns the
                failures instead.
        """
        gid = v.check_group_id(group_id)
        tps = v.check_partitions(specs, "specs")
        for tp in tps:
            target = specs[tp]
            if isinstance(target, (OffsetSpec, OffsetShift)):
                continue
            if isinstance(target, bool) or not isinstance(target, int) or target < 0:
                raise InvalidArgumentError(
                    f"reset target for {tp} must be an OffsetSpec, an OffsetShift or an "
                    f"int offset >= 0, got {target!r}")
        deadline = self._router.deadline(timeout)
        # Its steps are other families' calls on the AsyncAdminClient this is a base of.
        admin = cast("AsyncAdminClient", self)

        def left() -> float:
            return self._router.remaining(deadline)

        lookups = {tp: t for tp in tps if isinstance(t := specs[tp], OffsetSpec)}
        shifted = [tp for tp in tps if isinstance(specs[tp], OffsetShift)]
        # return_exceptions: a call that raises (e.g. a group-level error) must not leave
        # the others running unawaited; the first such error is raised below.
        steps = await asyncio.gather(
            admin.list_offsets(dict.fromkeys(tps, OffsetSpec.earliest()), timeout=left(),
                               return_exceptions=True),
            admin.list_offsets(dict.fromkeys(tps, OffsetSpec.latest()), timeout=left(),
                               return_exceptions=True),
            admin.list_offsets(lookups, timeout=left(), return_exceptions=True)
            if lookups else _nothing(),
            self.list_consumer_group_offsets(gid, shifted, timeout=left(),
                                             return_exceptions=True)
            if shifted else _nothing(), return_exceptions=True)
        for step in steps:
            if isinstance(step, BaseException):
                raise step
        earliest, latest, found, committed = cast("list[dict[TopicPartition, Any]]", steps)

        results: dict[TopicPartition, Any] = {}
        targets: dict[TopicPartition, OffsetAndMetadata | int] = {}
        for tp in tps:
            target = specs[tp]
            low, high = earliest[tp], latest[tp]
            if isinstance(target, OffsetSpec):
                raw = found[tp]
            elif isinstance(target, OffsetShift):
                raw = committed[tp]
                if raw is None:
                    raw = IllegalStateError(
                        f"{tp} of group {gid!r} has no committed offset to shift")
            else:
                raw = target
            failed = next((x for x in (raw, low, high) if isinstance(x, BaseException)), None)
            if failed is not None:
                results[tp] = failed
                continue
            offset = raw.offset if not isinstance(raw, int) else raw
            if isinstance(target, OffsetShift):
                offset += target.by
            if offset < 0 and isinstance(target, OffsetSpec):
                offset = high.offset  # no record at or after the time: the end, as the tool
            targets[tp] = min(max(offset, low.offset), high.offset)

        if not dry_run and targets:
            outcome = await self.alter_consumer_group_offsets(
                gid, targets, timeout=left(), return_exceptions=True)
            for tp, err in outcome.items():
                if isinstance(err, _ACTIVE_GROUP):
                    err = type(err)(
                        f"{tp} of group {gid!r}: the group has active members; offsets can "
                        f"only be reset while it has none ({err})")
                results[tp] = err if isinstance(err, BaseException) else targets[tp]
        else:
            results.update(targets)
        return finish({tp: results[tp] for tp in tps},
                      f"reset_group_offsets({gid!r})", return_exceptions)


async def _nothing() -> dict[TopicPartition, Any]:
    return {}
