"""unsubscribe() retires a group assignment (sans-I/O): nothing of it is handed out any
more, but its positions stay readable and committable until the group task hands it back,
and the hand-back drops only those states (not a partition assign()ed again at once)."""

from __future__ import annotations

from typing import Any

from kontrakt import ConsumerRecord, OffsetAndMetadata, TimestampType, TopicPartition
from kontrakt.clients.consumer._fetcher import CompletedFetch, FetchBuffer
from kontrakt.clients.consumer._subscription import SubscriptionState

A, B = TopicPartition("t", 0), TopicPartition("t", 1)


def _records(tp: TopicPartition, first: int, count: int) -> list[Any]:
    return [ConsumerRecord(tp.topic, tp.partition, o, 0, TimestampType.CREATE_TIME, None,
                           b"v", [], 5) for o in range(first, first + count)]


def _offsets(got: dict[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, int]:
    return {tp: om.offset for tp, om in got.items()}


def test_retired_partitions_stop_but_stay_committable_until_released() -> None:
    subs, buf = SubscriptionState(), FetchBuffer(1 << 20)
    subs.subscribe(["t"], None)
    subs.set_assignment([A, B])
    for tp in (A, B):
        st = subs.state(tp)
        st.seek(0, 5)
        buf.add(CompletedFetch(tp, st, st.gen, _records(tp, 0, 10), 10, 5, 100))
    buf.poll_seq += 1
    assert [r.offset for r in buf.drain(3)[A]] == [0, 1, 2]
    old_a, old_b = subs.state(A), subs.state(B)

    assert subs.retire() == {A, B}
    subs.unsubscribe()  # (what AsyncConsumer.unsubscribe() does next)
    assert subs.assignment == {}
    buf.poll_seq += 1
    assert buf.drain(100) == {} and buf.drain_one() is None  # nothing more handed out
    # The revoke listener may still read and commit them.
    assert subs.state(A) is old_a and subs.state(B) is old_b
    assert _offsets(subs.consumed_offsets()) == {A: 3, B: 0}

    subs.assign([A])  # at once, before the hand-back: A anew
    new_a = subs.state(A)
    assert new_a is not old_a
    new_a.seek(7)
    # The hand-back's commit covers the old A, not the new one.
    assert _offsets(subs.consumed_offsets()) == {A: 3, B: 0}

    subs.release({A: old_a, B: old_b})
    assert subs.retiring == {}
    assert subs.assignment == {A: new_a}
    assert _offsets(subs.consumed_offsets()) == {A: 7}
