"""Admin operations on consumer groups' committed offsets — a base class of
:class:`~kontrakt.clients.admin.AsyncAdminClient`: list (OffsetFetch), alter (OffsetCommit
outside any generation) and delete (OffsetDelete) them, at each group's coordinator.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kontrakt._types import OffsetAndMetadata, TopicPartition
from kontrakt.clients.admin import _validate as v
from kontrakt.clients.admin._routing import Router, error_for, finish
from kontrakt.clients.client import AsyncKafkaClient
from kontrakt.clients.group._protocol import group_by_topic
from kontrakt.errors import InvalidArgumentError
from kontrakt.protocol.messages import (
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
)
from kontrakt.protocol.spec import Request

__all__ = ["OffsetOperations"]

TP = TopicPartition


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
