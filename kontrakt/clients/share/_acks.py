"""Acknowledgement bookkeeping of a share consumer (sans I/O): which records a member holds,
how each was acknowledged, and the acknowledgement batches that tell the broker.

A share group's broker *acquires* records for one member at a time (ShareFetch answers with
ranges of acquired offsets and their delivery counts); the member settles each acquired
offset with one acknowledgement: accept (done), release (deliver again, to anyone) or reject
(never again). Offsets of an acquired range that hold no record for the application (control
records, compacted-away offsets) are settled as *gaps*.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kontrakt._types import ConsumerRecord, TopicPartition

__all__ = ["GAP", "AckBatch", "AcknowledgeType", "PartitionAcks", "acknowledgement_batches"]

#: The acknowledgement of an acquired offset that holds no record (wire value 0).
GAP = 0


class AcknowledgeType(enum.IntEnum):
    """How a share consumer settles a record it was delivered (the wire values of KIP-932).

    Attributes:
        ACCEPT: processed; the record is never delivered again.
        RELEASE: not processed; the record goes back to the group for another delivery
            (its delivery count grows).
        REJECT: unprocessable; the record is never delivered again.
    """

    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


@dataclass(frozen=True, slots=True)
class AckBatch:
    """Consecutive offsets ``first..last`` (inclusive) and their acknowledgement types: one
    type for the whole range, or one per offset."""

    first: int
    last: int
    types: tuple[int, ...]


def acknowledgement_batches(acks: Mapping[int, int]) -> list[AckBatch]:
    """Group ``offset -> type`` into batches of consecutive offsets, each written with one
    type when all its offsets share it (what the broker stores most cheaply) and with one
    type per offset otherwise.

    Args:
        acks: acknowledgement type (0 gap, 1 accept, 2 release, 3 reject) by offset.

    Returns:
        The batches in offset order.
    """
    out: list[AckBatch] = []
    run: list[tuple[int, int]] = []

    def flush() -> None:
        types = [t for _, t in run]
        uniform = all(t == types[0] for t in types)
        out.append(AckBatch(run[0][0], run[-1][0], (types[0],) if uniform else tuple(types)))

    for offset in sorted(acks):
        if run and offset != run[-1][0] + 1:
            flush()
            run = []
        run.append((offset, acks[offset]))
    if run:
        flush()
    return out


@dataclass(slots=True)
class PartitionAcks:
    """One partition's records held by this member and its acknowledgements not yet sent.

    Attributes:
        delivered: offset -> delivery count of records handed to the application and not
            acknowledged yet.
        buffered: records acquired but not handed out yet, in offset order.
        pending: offset -> acknowledgement type, to send with the next request to the
            partition's leader.
    """

    delivered: dict[int, int] = field(default_factory=dict)
    buffered: list[tuple[ConsumerRecord[bytes | None, bytes | None], int]] = field(
        default_factory=list)
    pending: dict[int, int] = field(default_factory=dict)

    def acquire(self, records: Iterable[ConsumerRecord[bytes | None, bytes | None]],
                ranges: Iterable[tuple[int, int, int]]) -> None:
        """Take a ShareFetch answer: keep the records inside the acquired ranges
        ``(first, last, delivery count)``, and settle the offsets of those ranges that hold
        no record as gaps.

        Records outside every range (the rest of a batch the broker returned whole) are
        someone else's and are dropped.
        """
        counts: dict[int, int] = {}
        for first, last, count in ranges:
            for offset in range(first, last + 1):
                counts[offset] = count
        seen: set[int] = set()
        for rec in records:
            delivery = counts.get(rec.offset)
            if delivery is not None and rec.offset not in seen:
                seen.add(rec.offset)
                self.buffered.append((rec, delivery))
        for offset in counts.keys() - seen:
            self.pending[offset] = GAP

    def hand_out(self, limit: int) -> list[ConsumerRecord[bytes | None, bytes | None]]:
        """Up to ``limit`` buffered records, now counted as delivered."""
        taken, self.buffered = self.buffered[:limit], self.buffered[limit:]
        for rec, count in taken:
            self.delivered[rec.offset] = count
        return [rec for rec, _ in taken]

    def give_back(self, records: Iterable[ConsumerRecord[Any, Any]]) -> None:
        """Undo :meth:`hand_out` for ``records`` (handed out, never seen by the
        application): they go back to the front of the buffer, in order, with their
        delivery counts; records not held undecided are ignored."""
        back: list[tuple[ConsumerRecord[bytes | None, bytes | None], int]] = []
        for rec in records:
            count = self.delivered.pop(rec.offset, None)
            if count is not None:
                back.append((rec, count))
        self.buffered[:0] = back

    def acknowledge(self, offset: int, ack_type: int) -> bool:
        """Settle a delivered record; False when ``offset`` is not one held undecided."""
        if self.delivered.pop(offset, None) is None:
            return False
        self.pending[offset] = ack_type
        return True

    def settle_all(self, ack_type: int, *, buffered: bool = False) -> None:
        """Settle every delivered record (and with ``buffered`` every record not handed out
        yet) with ``ack_type``."""
        for offset in self.delivered:
            self.pending[offset] = ack_type
        self.delivered.clear()
        if buffered:
            for rec, _ in self.buffered:
                self.pending[rec.offset] = ack_type
            self.buffered.clear()

    def take_pending(self) -> list[AckBatch]:
        """The pending acknowledgements as batches, now counted as sent."""
        batches = acknowledgement_batches(self.pending)
        self.pending = {}
        return batches


def partitions_with_pending(book: Mapping[TopicPartition, PartitionAcks]
                            ) -> list[TopicPartition]:
    """The partitions of ``book`` with acknowledgements to send."""
    return [tp for tp, acks in book.items() if acks.pending]
