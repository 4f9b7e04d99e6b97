"""reset_group_offsets against a crafted leader and coordinator.

Tansu checks earliest, latest, absolute and shifted targets and the refusal while a member
is in the group (tests/integration/test_admin_reset_offsets.py), but answers 0 for every
timestamp lookup and librdkafka's mock cluster -1; so the timestamp targets, a lookup's
per-partition error kept to its partition, retries, the request fields and KIP-848's
member error are checked against a crafted peer (``tests/_crafted_broker.py``) holding
partitions whose records are offsets 10..19.
"""

from __future__ import annotations

from typing import Any

import pytest

from kontrakt._types import TopicPartition as TP
from kontrakt.clients.admin import OffsetShift, OffsetSpec
from kontrakt.errors import IllegalStateError, InvalidArgumentError, PartialFailureError
from kontrakt.protocol.errors import (
    GroupAuthorizationFailedError,
    StaleMemberEpochError,
    TopicAuthorizationFailedError,
)
from kontrakt.protocol.messages import (
    ListOffsetsResponse,
    OffsetCommitResponse,
    OffsetFetchResponse,
)
from tests._crafted_broker import CraftedBroker
from tests.unit.admin.test_admin_crafted import run

LIST_OFFSETS, OFFSET_FETCH, OFFSET_COMMIT = 2, 9, 8
EARLIEST, LATEST = 10, 20
T = "t"


class Peer:
    """Leader of T's partitions (records 10..19; timestamp ``ts`` is at offset ``ts``
    when 10 <= ts < 20, later ones match nothing) and the group's coordinator. ``lookup``
    / ``commit`` map a partition to error codes answered in turn before success."""

    def __init__(self, committed: dict[int, int] | None = None,
                 lookup: dict[int, list[int]] | None = None,
                 commit: dict[int, list[int]] | None = None, group_error: int = 0) -> None:
        self.committed = dict(committed or {})
        self.group_error = group_error
        self.lookup = lookup or {}
        self.commit_errors = commit or {}
        self.lookups: list[tuple[int, int]] = []
        self.commits: list[Any] = []

    def list_offsets(self, _v: int, req: Any) -> Any:
        R = ListOffsetsResponse.ListOffsetsTopicResponse
        parts = []
        for t in req.topics:
            for p in t.partitions:
                self.lookups.append((p.partition_index, p.timestamp))
                errors = self.lookup.get(p.partition_index, [])
                code = errors.pop(0) if errors else 0
                ts = p.timestamp
                offset = (EARLIEST if ts == -2 else LATEST if ts == -1
                          else ts if EARLIEST <= ts < LATEST else -1)
                parts.append(R.ListOffsetsPartitionResponse(
                    partition_index=p.partition_index, error_code=code,
                    offset=-1 if code else offset, timestamp=-1))
        return ListOffsetsResponse(topics=[R(name=T, partitions=parts)])

    def offset_fetch(self, _v: int, req: Any) -> Any:
        if self.group_error:
            return OffsetFetchResponse(groups=[OffsetFetchResponse.OffsetFetchResponseGroup(
                group_id=req.groups[0].group_id, error_code=self.group_error)])
        R = OffsetFetchResponse.OffsetFetchResponseGroup.OffsetFetchResponseTopics
        g = req.groups[0]
        return OffsetFetchResponse(groups=[OffsetFetchResponse.OffsetFetchResponseGroup(
            group_id=g.group_id, topics=[R(name=t.name, partitions=[
                R.OffsetFetchResponsePartitions(
                    partition_index=i, metadata="", committed_offset=self.committed.get(i, -1))
                for i in t.partition_indexes]) for t in g.topics])])

    def offset_commit(self, _v: int, req: Any) -> Any:
        self.commits.append(req)
        R = OffsetCommitResponse.OffsetCommitResponseTopic
        parts = []
        for t in req.topics:
            for p in t.partitions:
                errors = self.commit_errors.get(p.partition_index, [])
                code = errors.pop(0) if errors else 0
                if not code:
                    self.committed[p.partition_index] = p.committed_offset
                parts.append(R.OffsetCommitResponsePartition(
                    partition_index=p.partition_index, error_code=code))
        return OffsetCommitResponse(topics=[R(name=T, partitions=parts)])

    def broker(self) -> CraftedBroker:
        return CraftedBroker({LIST_OFFSETS: self.list_offsets, OFFSET_FETCH: self.offset_fetch,
                              OFFSET_COMMIT: self.offset_commit}, topics={T: 4})


def test_timestamps_shifts_and_offsets_are_looked_up_clamped_and_committed() -> None:
    # Broken variants tried: a timestamp that matches nothing (-1) kept as -1 (then
    # clamped to the earliest, 10, not 20); no clamping commits 5 for partition 2.
    peer = Peer(committed={3: 12})
    specs: dict[TP, Any] = {TP(T, 0): OffsetSpec.for_timestamp(15),
                            TP(T, 1): OffsetSpec.for_timestamp(99),
                            TP(T, 2): 5, TP(T, 3): OffsetShift(4)}
    out = run(peer.broker(), lambda a: a.reset_group_offsets("g", specs))
    assert out == {TP(T, 0): 15, TP(T, 1): 20, TP(T, 2): 10, TP(T, 3): 16}
    assert sorted(set(peer.lookups)) == sorted(
        {(p, ts) for p in range(4) for ts in (-2, -1)} | {(0, 15), (1, 99)})
    [commit] = peer.commits
    assert (commit.group_id, commit.generation_id_or_member_epoch, commit.member_id) == (
        "g", -1, "")
    assert {p.partition_index: p.committed_offset for t in commit.topics
            for p in t.partitions} == {0: 15, 1: 20, 2: 10, 3: 16}


def test_a_failed_lookup_fails_only_its_partition_and_commits_nothing_for_it() -> None:
    # Broken variant tried: committing the clamped offset of a partition whose lookup
    # failed (treating the error as offset -1) commits partition 1 too.
    peer = Peer(lookup={1: [29] * 3})  # TOPIC_AUTHORIZATION_FAILED: final
    out = run(peer.broker(), lambda a: a.reset_group_offsets(
        "g", {TP(T, 0): OffsetSpec.latest(), TP(T, 1): OffsetSpec.earliest(),
              TP(T, 2): OffsetShift(1)}, return_exceptions=True))
    assert out[TP(T, 0)] == LATEST
    assert isinstance(out[TP(T, 1)], TopicAuthorizationFailedError)
    assert isinstance(out[TP(T, 2)], IllegalStateError)  # nothing committed to shift
    assert peer.committed == {0: LATEST}

    with pytest.raises(PartialFailureError):
        run(Peer(lookup={1: [29] * 3}).broker(), lambda a: a.reset_group_offsets(
            "g", {TP(T, 0): 11, TP(T, 1): 11}))


def test_retriable_errors_are_retried() -> None:
    # Broken variant tried: Router.per_entity without its retry round leaves
    # NOT_LEADER_OR_FOLLOWER (6) as partition 0's outcome.
    peer = Peer(lookup={0: [6]}, commit={0: [14]})  # then COORDINATOR_LOAD_IN_PROGRESS
    out = run(peer.broker(), lambda a: a.reset_group_offsets("g", {TP(T, 0): 12}))
    assert out == {TP(T, 0): 12}
    assert len(peer.commits) == 2
    assert peer.committed == {0: 12}


def test_a_group_error_looking_up_committed_offsets_is_raised_and_nothing_committed() -> None:
    # Broken variant tried: the gathered steps' errors not raised fails with a TypeError
    # (the error taken for the committed offsets).
    peer = Peer(group_error=30)  # GROUP_AUTHORIZATION_FAILED
    with pytest.raises(GroupAuthorizationFailedError):
        run(peer.broker(), lambda a: a.reset_group_offsets(
            "g", {TP(T, 0): OffsetShift(1), TP(T, 1): 3}))
    assert peer.commits == []


def test_an_active_consumer_group_is_named_as_the_cause() -> None:
    # Broken variant tried: _ACTIVE_GROUP without the KIP-848 member errors raises
    # StaleMemberEpochError without "active members".
    peer = Peer(commit={0: [113]})  # STALE_MEMBER_EPOCH: a KIP-848 group with members
    with pytest.raises(StaleMemberEpochError, match="active members"):
        run(peer.broker(), lambda a: a.reset_group_offsets("g", {TP(T, 0): 12}))


@pytest.mark.parametrize("target", [-1, "earliest", True, 1.5, None])
def test_a_bad_target_is_refused_before_sending(target: Any) -> None:
    # Broken variant tried: no check sends -1 (committed as the earliest) and fails on
    # "earliest" inside the call instead.
    peer = Peer()
    broker = peer.broker()
    with pytest.raises(InvalidArgumentError):
        run(broker, lambda a: a.reset_group_offsets("g", {TP(T, 0): target}))
    assert broker.seen == []


def test_a_bad_shift_or_group_is_refused() -> None:
    with pytest.raises(InvalidArgumentError):
        OffsetShift("3")  # type: ignore[arg-type]
    broker = Peer().broker()
    with pytest.raises(InvalidArgumentError):
        run(broker, lambda a: a.reset_group_offsets("", {TP(T, 0): 1}))
    assert broker.seen == []
