"""The per-record fast path of the fetch buffer (``FetchBuffer.drain_one``, what a
record-by-record ``poll()`` takes) hands out exactly what ``drain(1)`` does, record by
record, and leaves the same positions (sans-I/O)."""

from __future__ import annotations

from typing import Any

from kontrakt import ConsumerRecord, TimestampType, TopicPartition
from kontrakt.clients.consumer._buffer import CompletedFetch, FetchBuffer
from kontrakt.clients.consumer._subscription import SubscriptionState

A, B = TopicPartition("t", 0), TopicPartition("t", 1)


def _records(tp: TopicPartition, first: int, count: int) -> list[Any]:
    return [ConsumerRecord(tp.topic, tp.partition, o, 0, TimestampType.CREATE_TIME, None,
                           b"v", [], 3) for o in range(first, first + count)]


def _filled() -> tuple[SubscriptionState, FetchBuffer]:
    """A: fetches of 3, 1 and 0 records (the last ends past a control batch); B: 2."""
    subs, buf = SubscriptionState(), FetchBuffer(1 << 20)
    subs.assign([A, B])
    for tp in (A, B):
        subs.state(tp).seek(0, 3)
    sa, sb = subs.state(A), subs.state(B)
    buf.add(CompletedFetch(A, sa, sa.gen, _records(A, 0, 3), 3, 3, 10))
    buf.add(CompletedFetch(B, sb, sb.gen, _records(B, 0, 2), 2, 3, 10))
    buf.add(CompletedFetch(A, sa, sa.gen, _records(A, 3, 1), 4, 3, 10))
    buf.add(CompletedFetch(A, sa, sa.gen, [], 6, 4, 10))
    return subs, buf


def _trace(take: Any) -> list[tuple[Any, Any, Any]]:
    subs, buf = _filled()
    out = []
    for _ in range(8):
        rec = take(buf)
        out.append((None if rec is None else (rec.partition, rec.offset),
                    subs.state(A).position, subs.state(B).position))
    return out


def _one(buf: FetchBuffer) -> Any:
    got = buf.drain(1)
    return next((recs[0] for recs in got.values()), None)


def test_drain_one_matches_drain_of_one_record_by_record() -> None:
    trace = _trace(FetchBuffer.drain_one)
    assert trace == _trace(_one)
    assert [r for r, _, _ in trace] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (0, 3),
                                        None, None]
    # The control batch after offset 3 moves A's position to the fetch's end.
    assert trace[-1][1].offset == 6 and trace[-1][2].offset == 2


def test_drain_one_skips_paused_and_sought_partitions() -> None:
    subs, buf = _filled()
    assert buf.drain_one().offset == 0  # type: ignore[union-attr]
    subs.state(A).paused = True
    assert [buf.drain_one().partition for _ in range(2)] == [1, 1]  # type: ignore[union-attr]
    assert buf.drain_one() is None
    subs.state(A).paused = False
    subs.state(A).seek(1, 3)  # a seek drops what was buffered for A
    assert buf.drain_one() is None
    assert subs.state(A).position.offset == 1  # type: ignore[union-attr]
