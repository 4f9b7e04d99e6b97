"""Committed offsets of groups: OffsetCommit, OffsetFetch, OffsetDelete, and the offsets a
transaction commits (TxnOffsetCommit), held back until its commit marker."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kontrakt.protocol import errors as E
from kontrakt.protocol.messages import (
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
)
from kontrakt.protocol.spec import Response
from kontrakt.testing._cluster._state import ClusterState, RequestContext

if TYPE_CHECKING:
    from kontrakt.testing._cluster._groups import Group

__all__ = ["Committed", "OffsetStore"]

_GROUP_KEY = 0


@dataclass(frozen=True, slots=True)
class Committed:
    """A committed offset with its leader epoch and metadata (kept verbatim)."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_time_ms: int


class OffsetStore:
    """Offsets of every group; the base of the group coordinator."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.groups: dict[str, Group] = {}
        # (producer id, group id) -> offsets a transaction has not committed yet
        self.pending: dict[tuple[int, str], dict[tuple[str, int], Committed]] = {}
        self.kip848: Any = None  # the ConsumerGroupCoordinator, set by the server

    # Provided by the group coordinator.
    def _coordinator_error(self, ctx: RequestContext, group_id: str) -> int:
        raise NotImplementedError

    def _member_error(self, group: Group | None, member_id: str, instance_id: str | None,
                      generation: int | None) -> int:
        raise NotImplementedError

    def _new_group(self, group_id: str) -> Group:
        from kontrakt.testing._cluster._groups import Group

        group = self.groups[group_id] = Group(group_id)
        return group

    def _commit_error(self, ctx: RequestContext, req: Any, version: int) -> int:
        error = self._coordinator_error(ctx, req.group_id)
        if error:
            return error
        group = self.groups.get(req.group_id)
        generation = req.generation_id_or_member_epoch
        iid = req.group_instance_id if version >= 7 else None
        if group is None:
            if generation >= 0:
                return E.IllegalGenerationError.code
            self._new_group(req.group_id)
            return 0
        if generation < 0 and not req.member_id and not group.members and not (
                group.kip848 is not None and group.kip848.members):
            return 0  # a commit outside group management (assign()) to an empty group
        if group.kip848 is not None:
            return int(self.kip848.member_epoch_error(group, req.member_id, generation))
        if group.state == "CompletingRebalance":
            return E.RebalanceInProgressError.code
        error = self._member_error(group, req.member_id, iid, generation)
        if not error:
            group.members[req.member_id].last_seen = time.monotonic()
        return error

    def offset_commit(self, ctx: RequestContext, version: int, req: Any) -> Response:
        st = self.state
        cr = OffsetCommitResponse
        pcls = cr.OffsetCommitResponseTopic.OffsetCommitResponsePartition
        error = self._commit_error(ctx, req, version)
        now = st.now_ms()
        group = self.groups.get(req.group_id)
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                code = error
                if not code and st.partition(t.name, p.partition_index) is None:
                    code = E.UnknownTopicOrPartitionError.code
                meta = p.committed_metadata or ""
                if not code and len(meta.encode()) > st.settings.offset_metadata_max_bytes:
                    code = E.OffsetMetadataTooLargeError.code
                if not code and group is not None:
                    self._set(req.group_id, (t.name, p.partition_index), Committed(
                        p.committed_offset, p.committed_leader_epoch, meta, now))
                parts.append(pcls(partition_index=p.partition_index, error_code=code))
            topics.append(cr.OffsetCommitResponseTopic(name=t.name, partitions=parts))
        return cr(topics=topics)

    def _fetch_group(self, ctx: RequestContext, group_id: str,
                     topics: list[tuple[str, list[int]]] | None, require_stable: bool
                     ) -> tuple[int, list[tuple[str, list[tuple[int, Committed | None, int]]]]]:
        error = self._coordinator_error(ctx, group_id)
        if error:
            return error, []
        group = self.groups.get(group_id)
        offsets = group.offsets if group is not None else {}
        if topics is None:
            by_topic: dict[str, list[int]] = {}
            for (name, index) in sorted(offsets):
                by_topic.setdefault(name, []).append(index)
            topics = list(by_topic.items())
        unstable = {tp for (_pid, gid), staged in self.pending.items() if gid == group_id
                    for tp in staged} if require_stable else set()
        out = []
        for name, indexes in topics:
            out.append((name, [(i, offsets.get((name, i)),
                                E.UnstableOffsetCommitError.code if (name, i) in unstable
                                else 0) for i in indexes]))
        return 0, out

    def offset_fetch(self, ctx: RequestContext, version: int, req: Any) -> Response:
        fr = OffsetFetchResponse
        stable = version >= 7 and req.require_stable
        if version >= 8:
            groups = []
            gcls = fr.OffsetFetchResponseGroup
            for g in req.groups:
                wanted = None if g.topics is None else [(t.name, list(t.partition_indexes))
                                                        for t in g.topics]
                error, found = self._fetch_group(ctx, g.group_id, wanted, stable)
                group = self.groups.get(g.group_id)
                if not error and version >= 9 and g.member_id and group is not None \
                        and group.kip848 is not None:
                    error = int(self.kip848.member_epoch_error(group, g.member_id,
                                                               g.member_epoch))
                    if error:
                        found = []
                groups.append(gcls(group_id=g.group_id, error_code=error, topics=[
                    gcls.OffsetFetchResponseTopics(name=name, partitions=[
                        gcls.OffsetFetchResponseTopics.OffsetFetchResponsePartitions(
                            partition_index=i, committed_offset=c.offset if c else -1,
                            committed_leader_epoch=c.leader_epoch if c else -1,
                            metadata=c.metadata if c else "", error_code=code)
                        for i, c, code in parts]) for name, parts in found]))
            return fr(groups=groups)
        wanted = None if req.topics is None else [(t.name, list(t.partition_indexes))
                                                  for t in req.topics]
        error, found = self._fetch_group(ctx, req.group_id, wanted, stable)
        tcls = fr.OffsetFetchResponseTopic
        if error and version < 2:
            found = [(name, [(i, None, error) for i in idx]) for name, idx in wanted or []]
        return fr(error_code=error if version >= 2 else 0, topics=[
            tcls(name=name, partitions=[tcls.OffsetFetchResponsePartition(
                partition_index=i, committed_offset=c.offset if c else -1,
                committed_leader_epoch=c.leader_epoch if c and version >= 5 else -1,
                metadata=c.metadata if c else "", error_code=code)
                for i, c, code in parts]) for name, parts in found])

    def offset_delete(self, ctx: RequestContext, version: int, req: Any) -> Response:
        dr = OffsetDeleteResponse
        tcls = dr.OffsetDeleteResponseTopic
        error = self._coordinator_error(ctx, req.group_id)
        group = self.groups.get(req.group_id)
        if not error and group is None:
            error = E.GroupIdNotFoundError.code
        subscribed: set[str] = set()
        if not error and group is not None and group.members:
            if group.protocol_type != "consumer":
                error = E.NonEmptyGroupError.code
            else:
                subscribed = _subscribed_topics(group)
        if error or group is None:
            return dr(error_code=error)
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                code = E.GroupSubscribedToTopicError.code if t.name in subscribed else 0
                if not code:
                    self._set(req.group_id, (t.name, p.partition_index), None)
                parts.append(tcls.OffsetDeleteResponsePartition(
                    partition_index=p.partition_index, error_code=code))
            topics.append(tcls(name=t.name, partitions=parts))
        return dr(error_code=0, topics=topics)

    # --- transactions -----------------------------------------------------------------------
    def check_txn_member(self, req: Any, version: int) -> int:
        """TxnOffsetCommit's group checks (v3+ carries the member and generation)."""
        group = self.groups.get(req.group_id)
        if version < 3 or (req.generation_id < 0 and not req.member_id):
            return 0
        if group is None:
            return E.IllegalGenerationError.code
        return self._member_error(group, req.member_id, req.group_instance_id,
                                  req.generation_id)

    def stage_txn_offsets(self, producer_id: int, group_id: str, topics: Any) -> None:
        """Hold a transaction's offsets until its marker."""
        now = self.state.now_ms()
        staged = self.pending.setdefault((producer_id, group_id), {})
        for t in topics:
            for p in t.partitions:
                staged[(t.name, p.partition_index)] = Committed(
                    p.committed_offset, p.committed_leader_epoch, p.committed_metadata or "",
                    now)

    def end_txn_offsets(self, producer_id: int, group_id: str, commit: bool) -> None:
        """Publish (commit) or drop (abort) a transaction's offsets."""
        staged = self.pending.pop((producer_id, group_id), {})
        if commit and staged:
            if group_id not in self.groups:
                self._new_group(group_id)
            for tp, committed in staged.items():
                self._set(group_id, tp, committed)

    def topic_deleted(self, topic: str) -> None:
        """Forget the offsets of a deleted topic, as Kafka does."""
        for gid, group in self.groups.items():
            for tp in [tp for tp in group.offsets if tp[0] == topic]:
                self._set(gid, tp, None)

    def _set(self, group_id: str, tp: tuple[str, int], committed: Committed | None) -> None:
        """Commit (or, with None, delete) one offset of an existing group, and record it."""
        offsets = self.groups[group_id].offsets
        if committed is None:
            if offsets.pop(tp, None) is None:
                return
        else:
            offsets[tp] = committed
        if self.state.persist is not None:
            self.state.persist.offset(group_id, tp, committed)


def _subscribed_topics(group: Group) -> set[str]:
    """Topics the members of a consumer group subscribe to (from their join metadata)."""
    from kontrakt.clients.group._protocol import decode_subscription

    out: set[str] = set()
    for m in group.members.values():
        try:
            out.update(decode_subscription(m.metadata(group.protocol)).topics)
        except Exception:  # a member with unreadable metadata subscribes to nothing we know
            continue
    return out
