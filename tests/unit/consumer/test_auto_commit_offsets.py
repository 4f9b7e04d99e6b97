"""What auto commit may cover: records handed out by earlier polls, never those of the
latest poll (the application may still be processing them); stored offsets move it ahead,
and with enable.auto.offset.store=false they are all it covers (sans-I/O)."""

from __future__ import annotations

from typing import Any

import pytest

from kontrakt import ConsumerRecord, OffsetAndMetadata, TimestampType, TopicPartition
from kontrakt.clients.consumer._fetcher import CompletedFetch, FetchBuffer
from kontrakt.clients.consumer._offsets import given_offsets, offsets_after
from kontrakt.clients.consumer._subscription import SubscriptionState
from kontrakt.errors import InvalidArgumentError

A, B = TopicPartition("t", 0), TopicPartition("t", 1)


def _records(tp: TopicPartition, first: int, count: int, epoch: int = 5) -> list[Any]:
    return [ConsumerRecord(tp.topic, tp.partition, o, 0, TimestampType.CREATE_TIME, None,
                           b"v", [], epoch) for o in range(first, first + count)]


def _setup() -> tuple[SubscriptionState, FetchBuffer]:
    subs, buf = SubscriptionState(), FetchBuffer(1 << 20)
    subs.assign([A, B])
    for tp, n in ((A, 10), (B, 4)):
        st = subs.state(tp)
        st.seek(0, 5)
        # Offsets 0..n-1, then a control batch: the fetch ends at n + 1.
        buf.add(CompletedFetch(tp, st, st.gen, _records(tp, 0, n), n + 1, 5, 100))
    return subs, buf


def _offsets(got: dict[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, int]:
    return {tp: om.offset for tp, om in got.items()}


def test_auto_commit_covers_only_what_earlier_polls_returned() -> None:
    subs, buf = _setup()
    buf.poll_seq += 1  # poll 1: a batch of A
    assert [r.offset for r in buf.drain(6)[A]] == list(range(6))
    assert _offsets(subs.consumed_offsets(buf.poll_seq)) == {A: 0, B: 0}
    assert _offsets(subs.consumed_offsets()) == {A: 6, B: 0}  # close(): all handed out

    buf.poll_seq += 1  # poll 2, one record at a time: poll 1's batch is done
    rec = buf.drain_one()
    assert rec is not None and rec.offset == 6
    assert _offsets(subs.consumed_offsets(buf.poll_seq)) == {A: 6, B: 0}
    got = subs.consumed_offsets(buf.poll_seq)[A]
    assert got.leader_epoch == 5  # the first unacknowledged record's epoch

    buf.poll_seq += 1  # poll 3 takes the rest of A (past its control batch) and all of B
    rest = buf.drain(100)
    assert [r.offset for r in rest[A]] == [7, 8, 9] and len(rest[B]) == 4
    assert _offsets(subs.consumed_offsets(buf.poll_seq)) == {A: 7, B: 0}

    buf.poll_seq += 1  # poll 4 returns nothing: everything handed out counts as processed
    assert _offsets(subs.consumed_offsets(buf.poll_seq)) == {A: 11, B: 5}


def test_stored_offsets_move_auto_commit_ahead_or_are_all_it_covers() -> None:
    subs, buf = _setup()
    buf.poll_seq += 1
    batch = buf.drain(8)[A]
    assert _offsets(subs.consumed_offsets(buf.poll_seq, stored_only=True)) == {}
    for tp, om in offsets_after(batch[:3]).items():  # the application processed 0, 1, 2
        subs.state(tp).stored = om
    assert subs.state(A).stored == OffsetAndMetadata(3, "", 5)
    assert _offsets(subs.consumed_offsets(buf.poll_seq)) == {A: 3, B: 0}
    assert _offsets(subs.consumed_offsets(buf.poll_seq, stored_only=True)) == {A: 3}
    buf.poll_seq += 1  # the next poll: the whole batch counts, beyond the stored offset
    assert _offsets(subs.consumed_offsets(buf.poll_seq)) == {A: 8, B: 0}
    assert _offsets(subs.consumed_offsets(buf.poll_seq, stored_only=True)) == {A: 3}


def test_offsets_given_by_the_application_are_checked() -> None:
    assert offsets_after(_records(A, 4, 3) + _records(B, 0, 1)) == {
        A: OffsetAndMetadata(7, "", 5), B: OffsetAndMetadata(1, "", 5)}
    assert offsets_after(_records(A, 9, 1)[0]) == {A: OffsetAndMetadata(10, "", 5)}
    assert given_offsets({A: 3, B: OffsetAndMetadata(4, "m")}) == {
        A: OffsetAndMetadata(3), B: OffsetAndMetadata(4, "m")}
    with pytest.raises(InvalidArgumentError):
        given_offsets({A: -1})
    with pytest.raises(TypeError):
        given_offsets({A: "3"})  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        offsets_after([A])  # type: ignore[list-item]
