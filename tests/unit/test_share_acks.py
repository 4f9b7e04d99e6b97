"""The share consumer's acknowledgement bookkeeping (sans I/O): acquired ranges, gaps, the
acknowledgement batches sent to the broker, and acknowledgements that cannot be sent."""

from __future__ import annotations

import asyncio
from typing import Any

from kontrakt._types import ConsumerRecord, TimestampType, TopicPartition
from kontrakt.clients.share._acks import (
    GAP,
    AckBatch,
    AcknowledgeType,
    PartitionAcks,
    acknowledgement_batches,
)
from kontrakt.clients.share._metrics import ShareConsumerMetrics
from kontrakt.clients.share._sessions import ShareSessions
from kontrakt.protocol.errors import ShareSessionNotFoundError

ACCEPT, RELEASE, REJECT = (int(t) for t in AcknowledgeType)


def _rec(offset: int) -> ConsumerRecord[bytes | None, bytes | None]:
    return ConsumerRecord("t", 0, offset, 0, TimestampType.CREATE_TIME, None, b"v")


def test_wire_values_are_kip_932s() -> None:
    assert (GAP, ACCEPT, RELEASE, REJECT) == (0, 1, 2, 3)


def test_batches_split_at_holes_and_collapse_uniform_runs() -> None:
    acks = {5: ACCEPT, 6: ACCEPT, 7: ACCEPT, 9: RELEASE, 10: REJECT, 11: GAP}
    assert acknowledgement_batches(acks) == [
        AckBatch(5, 7, (ACCEPT,)),
        AckBatch(9, 11, (RELEASE, REJECT, GAP)),
    ]
    assert acknowledgement_batches({}) == []


def test_only_records_inside_acquired_ranges_are_kept_and_holes_become_gaps() -> None:
    book = PartitionAcks()
    # The broker returns whole batches (offsets 0..9) but acquired only 2..4 and 7..8 for
    # this member; offset 8 holds no record (a control record, say).
    book.acquire([_rec(o) for o in range(10) if o != 8], [(2, 4, 1), (7, 8, 3)])
    assert [(r.offset, n) for r, n in book.buffered] == [(2, 1), (3, 1), (4, 1), (7, 3)]
    assert book.pending == {8: GAP}
    out = book.hand_out(3)
    assert [r.offset for r in out] == [2, 3, 4]
    assert book.delivered == {2: 1, 3: 1, 4: 1}
    assert book.acknowledge(3, RELEASE)
    assert not book.acknowledge(3, ACCEPT)  # settled already
    assert not book.acknowledge(7, ACCEPT)  # not handed out yet
    book.settle_all(ACCEPT)
    assert book.pending == {8: GAP, 3: RELEASE, 2: ACCEPT, 4: ACCEPT}
    book.settle_all(RELEASE, buffered=True)
    assert book.pending[7] == RELEASE and not book.buffered
    assert book.take_pending() == [AckBatch(2, 4, (ACCEPT, RELEASE, ACCEPT)),
                                   AckBatch(7, 8, (RELEASE, GAP))]
    assert book.pending == {}


def test_records_given_back_come_first_again_with_their_delivery_counts() -> None:
    # What a deserializing share consumer does with the records after a bad one: they
    # were handed out but the application never got them. Broken variant tried: appending
    # them behind the buffer (offset 9 would come before 5).
    book = PartitionAcks()
    book.acquire([_rec(o) for o in range(5, 10)], [(5, 7, 2), (8, 9, 1)])
    out = book.hand_out(4)
    book.give_back(out[2:])
    book.give_back([_rec(42)])  # not held: ignored
    assert book.delivered == {5: 2, 6: 2}
    assert [(r.offset, n) for r, n in book.buffered] == [(7, 2), (8, 1), (9, 1)]
    assert [r.offset for r in book.hand_out(10)] == [7, 8, 9]
    assert book.delivered == {5: 2, 6: 2, 7: 2, 8: 1, 9: 1}


def test_acknowledgements_dropped_at_close_are_reported() -> None:
    # Closing with no share session on the leader (it was lost): the acknowledgements
    # cannot be sent; they are reported as ShareSessionNotFoundError to commit_sync's
    # results and the acknowledgement commit callback, not dropped in silence. Broken
    # variant tried: cleared without a report (no callback).
    tp = TopicPartition("t", 0)
    book = {tp: PartitionAcks(pending={4: ACCEPT, 5: RELEASE})}
    metrics = ShareConsumerMetrics()
    none: Any = None
    sessions = ShareSessions(none, none, book, max_records=10, fetch_min_bytes=1,
                             fetch_max_bytes=1, check_crcs=True, request_timeout=1.0,
                             metrics=metrics)
    told: list[tuple[dict[TopicPartition, set[int]], object]] = []
    sessions.on_acknowledged = lambda offsets, error: told.append((offsets, error))
    asyncio.run(sessions._share_acknowledge(1, [tp], closing=True))
    assert book[tp].pending == {}
    assert [o for o, _ in told] == [{tp: {4, 5}}]
    assert isinstance(told[0][1], ShareSessionNotFoundError)
    assert isinstance(sessions.ack_results[tp], ShareSessionNotFoundError)
    assert metrics.ack_errors == 2
