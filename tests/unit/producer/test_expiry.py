"""Queued batches expire at their delivery deadline, and the sender's pass looks for them
only once one can have passed (``RecordAccumulator.expire_at``): an awaited single send's
pass walked every queue, under the accumulator's lock, for nothing."""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from kontrakt.clients.producer._accumulator import RecordAccumulator
from kontrakt.clients.producer._batch import ProducerBatch
from kontrakt.protocol.records import CompressionType


def _acc() -> RecordAccumulator:
    return RecordAccumulator(batch_size=16_384, linger=0.005, buffer_memory=1 << 20,
                             compression=CompressionType.NONE, compression_level=None,
                             delivery_timeout=10.0, threaded=False,
                             wakeup=lambda *a, **k: None)


class _CountingLock:
    """The accumulator's lock, counting how often it is taken."""

    def __init__(self, lock: Any) -> None:
        self.lock = lock
        self.taken = 0

    def __enter__(self) -> None:
        self.taken += 1
        self.lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self.lock.release()


def test_a_pass_before_any_deadline_does_not_look_at_the_queues() -> None:
    acc = _acc()
    acc.append("t", 0, 1, b"k", b"v", None, 100)
    acc.append("t", 1, 1, b"k", b"v", None, 100)
    [first] = acc.queues[("t", 0)]
    lock = acc.lock = _CountingLock(acc.lock)  # type: ignore[assignment]
    assert acc.expire(time.monotonic()) == []
    assert lock.taken == 0
    # At its deadline the batch is taken out (sealed: no record joins it any more).
    assert acc.expire(first.deadline) == [first]
    assert first.sealed
    assert lock.taken == 1
    # The look found the other batch's deadline: none before it.
    [second] = acc.queues[("t", 1)]
    assert acc.expire_at == second.deadline
    assert acc.expire(second.deadline - 0.001) == []
    assert lock.taken == 1


def test_a_batch_queued_again_with_an_earlier_deadline_expires_at_it() -> None:
    # A retried batch (made long before the queued ones) goes back to the front of its
    # queue: the pass looks again from its deadline.
    acc = _acc()
    acc.append("t", 0, 1, b"k", b"v", None, 100)
    assert acc.expire(time.monotonic()) == []
    old = ProducerBatch(acc, "t", 1, None, time.monotonic() - 9.5)
    old.sealed = True
    acc.reenqueue(old)
    assert acc.expire_at == old.deadline
    assert acc.expire(old.deadline) == [old]


def test_resends_queued_newest_first_each_expire_at_their_own_deadline() -> None:
    # Without idempotence each resend goes to the front of its queue: when two in-flight
    # batches of a partition fail, the one answered last (maybe the newer) ends up ahead
    # of the older one, and a batch never sent sits behind both.
    acc = _acc()
    start = time.monotonic()
    older = ProducerBatch(acc, "t", 0, None, start - 9.5)
    newer = ProducerBatch(acc, "t", 0, None, start - 5.0)
    for b in (older, newer):
        b.sealed = True
        b.attempts = 1
        b.retry_at = start
        acc.reenqueue(b)
    acc.append("t", 0, 1, b"k", b"v", None, 100)
    queued = list(acc.queues[("t", 0)])
    assert queued[:2] == [newer, older]
    assert acc.expire_at == older.deadline
    assert acc.first_deadline() == older.deadline  # (bounds a new producer id's request)
    assert acc.expire(older.deadline) == [older]
    assert list(acc.queues[("t", 0)]) == [newer, queued[2]]
    assert acc.expire_at == newer.deadline
    assert acc.expire(newer.deadline) == [newer]
    assert acc.expire_at == queued[2].deadline


def test_a_resend_behind_a_split_batchs_parts_expires_at_its_deadline() -> None:
    # A batch refused as too large is split and its parts put at the front, ahead of an
    # older resend queued before.
    acc = _acc()
    start = time.monotonic()
    resend = ProducerBatch(acc, "t", 0, None, start - 9.5)
    resend.sealed, resend.attempts, resend.retry_at = True, 1, start
    acc.reenqueue(resend)
    for _ in range(4):
        acc.append("t", 0, 1, b"k", b"v" * 3_000, None, 100)
    dq = acc.queues[("t", 0)]
    big = dq.pop()  # as a drain takes it
    assert big.count == 4
    big.sealed = True
    parts = acc.split_and_reenqueue(big)
    assert parts is not None and len(parts) > 1
    assert list(acc.queues[("t", 0)]) == [*parts, resend]
    assert acc.expire(resend.deadline) == [resend]
    assert acc.expire_at == parts[0].deadline


def test_a_batch_made_for_records_staged_earlier_expires_at_its_deadline() -> None:
    # A stage's records go into batches made at the stage's start, which may be before
    # the queued batches were made.
    acc = _acc()
    acc.append("t", 0, 1, b"k", b"v", None, 100)
    assert acc.expire(time.monotonic()) == []
    dq = acc.queues.setdefault(("t", 1), deque())
    with acc.lock:
        placed = acc.add_locked("t", 1, dq, 1, b"\x02", b"k", b"\x02", b"v", b"\x00", 5,
                                time.monotonic() - 9.5)
    assert placed is not None
    batch = placed[0]
    assert acc.expire(batch.deadline) == [batch]
