"""One partition's log: stored v2 batches, offsets, idempotent producer state, transactions.

Batches are kept as the bytes the producer sent, with the base offset (and the partition
leader epoch) rewritten in place: neither is covered by the batch CRC, so the stored batch is
exactly what a Kafka broker would serve. Everything here is plain synchronous code run on the
cluster's event loop thread; nothing in it blocks.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Protocol

import crc32c

from kontrakt.protocol import errors as E
from kontrakt.protocol.records import RecordBatch, TimestampType, build_control_batch
from kontrakt.protocol.records._control import ControlRecordType, parse_control_record

__all__ = ["AbortedTxn", "AppendResult", "LogSink", "PartitionLog", "StoredBatch"]

_OFFSET_EPOCH: Final = struct.Struct(">qii")  # base offset, batch length, leader epoch
_LOG_APPEND: Final = struct.Struct(">h")
_MAX_TS: Final = struct.Struct(">q")
_CRC: Final = struct.Struct(">I")
#: How many recent batches per producer Kafka remembers to recognise a retried batch.
_DEDUP_WINDOW: Final = 5
_INT32_MAX: Final = 2**31 - 1


class LogSink(Protocol):
    """Where a persistent cluster writes a partition's changes (see ``_persist``)."""

    def append(self, data: bytes) -> None:
        """A batch was stored (its final bytes)."""

    def log_start(self, offset: int) -> None:
        """The log start offset moved to ``offset`` (DeleteRecords)."""


@dataclass(slots=True)
class StoredBatch:
    """A batch in the log with the header fields the broker consults."""

    data: bytes
    base_offset: int
    last_offset: int
    max_timestamp: int
    producer_id: int
    is_transactional: bool
    is_control: bool


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """An aborted transaction's range in this partition (the Fetch aborted-transaction index)."""

    producer_id: int
    first_offset: int
    last_offset: int  # the offset of the abort marker


@dataclass(slots=True)
class _ProducerEntry:
    epoch: int
    last_timestamp: int = -1
    # (first sequence, last sequence, base offset, append time) of the last batches
    recent: list[tuple[int, int, int, int]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class AppendResult:
    """The outcome of appending one produce request's records to a partition."""

    error: int
    base_offset: int = -1
    log_append_time: int = -1


class PartitionLog:
    """The log of one partition of one topic (a single replica: the high watermark is the
    log end offset)."""

    def __init__(self) -> None:
        self.batches: list[StoredBatch] = []
        self._bases: list[int] = []  # base offsets of ``batches``, for bisection
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.leader_epoch = 0
        # (leader epoch, its first offset), oldest first, for OffsetForLeaderEpoch
        self.epochs: list[tuple[int, int]] = [(0, 0)]
        self._producers: dict[int, _ProducerEntry] = {}
        # producer id -> first offset of its open transaction in this partition
        self.open_txns: dict[int, int] = {}
        self.aborted: list[AbortedTxn] = []
        self.sink: LogSink | None = None  # set when the cluster persists its logs

    # --- reading ----------------------------------------------------------------------------
    @property
    def high_watermark(self) -> int:
        """The end of the committed log (one replica, so every appended record is committed)."""
        return self.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the earliest open transaction, else the high watermark."""
        if self.open_txns:
            return min(self.open_txns.values())
        return self.log_end_offset

    def index_of(self, offset: int) -> int:
        """Index of the batch holding ``offset`` (or the first batch after it)."""
        i = bisect.bisect_right(self._bases, offset) - 1
        if i < 0:
            return 0
        if self.batches[i].last_offset < offset:
            return i + 1
        return i

    def read(self, offset: int, limit: int, max_bytes: int, *,
             at_least_one: bool) -> tuple[bytes, int]:
        """Batches from the one holding ``offset`` up to (not including) ``limit``, as
        Kafka's log slice: at most ``max_bytes``, so after whole batches the last one may be
        cut short (clients drop such a tail and fetch it again from its start).

        Args:
            offset: the fetch offset.
            limit: the high watermark or the last stable offset.
            max_bytes: stop before exceeding this many bytes ...
            at_least_one: ... unless no batch was taken yet (KIP-74: a batch larger than
                the limit is still returned so that the consumer can progress). Without it,
                nothing is returned when the first batch does not fit (Kafka answers an
                empty record set rather than a first batch cut short).

        Returns:
            (record set bytes, the offset after the last whole batch returned).
        """
        out: list[bytes] = []
        size = 0
        next_offset = offset
        for i in range(self.index_of(offset), len(self.batches)):
            b = self.batches[i]
            if b.base_offset >= limit:
                break
            n = len(b.data)
            if size + n > max_bytes and (out or not at_least_one):
                if out and max_bytes > size:
                    out.append(bytes(b.data[:max_bytes - size]))
                break
            out.append(b.data)
            size += n
            next_offset = b.last_offset + 1
        return b"".join(out), next_offset

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions that may hold records in ``[start, end)``."""
        return [a for a in self.aborted if a.last_offset >= start and a.first_offset < end]

    def offset_for_timestamp(self, timestamp: int, limit: int) -> tuple[int, int]:
        """The first offset whose record timestamp is >= ``timestamp``, below ``limit``.

        Returns:
            (offset, timestamp of that record), or (-1, -1) when no record qualifies.
        """
        for i in range(self.index_of(self.log_start_offset), len(self.batches)):
            b = self.batches[i]
            if b.base_offset >= limit:
                break
            if b.is_control or b.max_timestamp < timestamp:
                continue
            for rec in RecordBatch(b.data).records():
                if rec.offset >= self.log_start_offset and rec.timestamp >= timestamp:
                    return rec.offset, rec.timestamp
        return -1, -1

    def max_timestamp_offset(self, limit: int) -> tuple[int, int]:
        """The first offset holding the largest record timestamp below ``limit`` (KIP-734).

        Returns:
            (offset, timestamp), or (-1, -1) for an empty log.
        """
        best: StoredBatch | None = None
        for i in range(self.index_of(self.log_start_offset), len(self.batches)):
            b = self.batches[i]
            if b.base_offset >= limit:
                break
            if not b.is_control and (best is None or b.max_timestamp > best.max_timestamp):
                best = b
        if best is None:
            return -1, -1
        for rec in RecordBatch(best.data).records():
            if rec.timestamp == best.max_timestamp and rec.offset >= self.log_start_offset:
                return rec.offset, rec.timestamp
        return best.last_offset, best.max_timestamp

    def new_leader_epoch(self) -> int:
        """Start the next leader epoch at the log end (a leader moved)."""
        self.leader_epoch += 1
        self.epochs.append((self.leader_epoch, self.log_end_offset))
        return self.leader_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= ``epoch``, its end offset), as OffsetForLeaderEpoch answers;
        (-1, -1) when ``epoch`` is older than every epoch known."""
        found = -1
        for i, (e, _start) in enumerate(self.epochs):
            if e > epoch:
                return (found, self.epochs[i][1]) if found >= 0 else (-1, -1)
            found = e
        return found, self.log_end_offset

    def size_in_bytes(self) -> int:
        """Bytes of the batches held."""
        return sum(len(b.data) for b in self.batches)

    # --- writing ----------------------------------------------------------------------------
    def _store(self, data: bytearray, batch: RecordBatch, is_txn: bool,
               is_control: bool) -> StoredBatch:
        base = self.log_end_offset
        _OFFSET_EPOCH.pack_into(data, 0, base, batch.batch_length, self.leader_epoch)
        stored = StoredBatch(bytes(data), base, base + batch.last_offset_delta,
                             batch.max_timestamp, batch.producer_id, is_txn, is_control)
        self.batches.append(stored)
        self._bases.append(base)
        self.log_end_offset = stored.last_offset + 1
        if self.sink is not None:
            self.sink.append(stored.data)
        return stored

    def append(self, records: bytes, *, now_ms: int, log_append_time: bool,
               max_message_bytes: int,
               verify_txn: Callable[[int, int], int] | None = None) -> AppendResult:
        """Validate and append the batches of one partition's produce data.

        Idempotence follows Kafka's ProducerStateManager: a batch whose sequence range matches
        one of the producer's last five batches is a retry and answered with that batch's
        offset (no error, nothing appended); an older epoch is INVALID_PRODUCER_EPOCH; a gap
        in the sequence is OUT_OF_ORDER_SEQUENCE_NUMBER.

        Args:
            records: the produce request's record set for this partition.
            now_ms: the broker's clock, for log-append-time topics.
            log_append_time: the topic's ``message.timestamp.type`` is LogAppendTime.
            max_message_bytes: the topic's ``max.message.bytes``.
            verify_txn: ``verify_txn(producer_id, epoch)`` is the error for a transactional
                batch (0 when the producer's ongoing transaction holds this partition), as
                Kafka's transaction verification (KIP-890); None: no check.

        Returns:
            The error code and the base offset of the first batch appended.
        """
        try:
            batches = list(_parse(records))
        except ValueError:
            return AppendResult(E.CorruptMessageError.code)
        if not batches:
            return AppendResult(E.CorruptMessageError.code)
        for b in batches:
            if b.size_in_bytes > max_message_bytes:
                return AppendResult(E.MessageTooLargeError.code)
            if b.records_count != b.last_offset_delta + 1 or b.is_control:
                return AppendResult(E.InvalidRecordError.code)
        first_offset = -1
        append_time = now_ms if log_append_time else -1
        for b in batches:
            pid = b.producer_id
            if b.is_transactional:
                if pid < 0:
                    return AppendResult(E.InvalidTxnStateError.code)
                entry = self._producers.get(pid)
                if entry is not None and b.producer_epoch < entry.epoch:
                    return AppendResult(E.InvalidProducerEpochError.code)
                err = verify_txn(pid, b.producer_epoch) if verify_txn is not None else 0
                if err:
                    return AppendResult(err)
            if pid >= 0 and b.base_sequence >= 0:
                err, dup_offset = self._check_sequence(b)
                if err:
                    return AppendResult(err)
                if dup_offset >= 0:
                    if first_offset < 0:
                        first_offset = dup_offset
                    continue
            data = bytearray(b.raw())
            if log_append_time:
                _rewrite_append_time(data, now_ms)
                b = RecordBatch(bytes(data))
            stored = self._store(data, b, b.is_transactional, False)
            if first_offset < 0:
                first_offset = stored.base_offset
            self._track(b, stored.base_offset, append_time)
        return AppendResult(0, first_offset, append_time)

    def _track(self, b: RecordBatch, base_offset: int, append_time: int) -> None:
        """Producer state and open transactions after a data batch was stored."""
        pid = b.producer_id
        if pid >= 0 and b.base_sequence >= 0:
            entry = self._producers.setdefault(pid, _ProducerEntry(b.producer_epoch))
            if entry.epoch != b.producer_epoch:
                entry.epoch, entry.recent = b.producer_epoch, []
            entry.recent.append((b.base_sequence, b.last_sequence, base_offset, append_time))
            del entry.recent[:-_DEDUP_WINDOW]
            entry.last_timestamp = b.max_timestamp
        elif pid >= 0:
            entry = self._producers.setdefault(pid, _ProducerEntry(b.producer_epoch))
            entry.last_timestamp = b.max_timestamp
        if b.is_transactional:
            self.open_txns.setdefault(pid, base_offset)

    def _check_sequence(self, b: RecordBatch) -> tuple[int, int]:
        """(error code, offset of the duplicate batch or -1)."""
        entry = self._producers.get(b.producer_id)
        if entry is None:
            # No state (new producer, or its records were deleted): any sequence is accepted.
            return 0, -1
        if b.producer_epoch < entry.epoch:
            return E.InvalidProducerEpochError.code, -1
        if b.producer_epoch > entry.epoch:
            if b.base_sequence != 0:
                return E.OutOfOrderSequenceNumberError.code, -1
            return 0, -1
        for first, last, offset, _t in entry.recent:
            if first == b.base_sequence and last == b.last_sequence:
                return 0, offset
        if not entry.recent:
            return 0, -1
        last_seq = entry.recent[-1][1]
        expected = 0 if last_seq == _INT32_MAX else last_seq + 1
        if b.base_sequence != expected:
            return E.OutOfOrderSequenceNumberError.code, -1
        return 0, -1

    def producer_epoch(self, producer_id: int) -> int:
        """The epoch last seen from ``producer_id`` here, or -1."""
        entry = self._producers.get(producer_id)
        return -1 if entry is None else entry.epoch

    def active_producers(self) -> list[tuple[int, int, int, int, int]]:
        """(producer id, epoch, last sequence, last timestamp, open transaction's first
        offset or -1) of every producer with state here, for DescribeProducers."""
        return [(pid, e.epoch, e.recent[-1][1] if e.recent else -1, e.last_timestamp,
                 self.open_txns.get(pid, -1)) for pid, e in sorted(self._producers.items())]

    def fence(self, producer_id: int, epoch: int) -> None:
        """Raise the producer's epoch (markers and epoch bumps fence older writers)."""
        entry = self._producers.setdefault(producer_id, _ProducerEntry(epoch))
        if epoch > entry.epoch:
            entry.epoch, entry.recent = epoch, []

    def write_marker(self, producer_id: int, producer_epoch: int, *, commit: bool,
                     now_ms: int, coordinator_epoch: int = 0) -> None:
        """End ``producer_id``'s transaction here with a commit or abort control batch."""
        first = self.open_txns.pop(producer_id, None)
        data = build_control_batch(
            ControlRecordType.COMMIT if commit else ControlRecordType.ABORT,
            producer_id=producer_id, producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch, timestamp=now_ms)
        batch = RecordBatch(data)
        stored = self._store(bytearray(data), batch, True, True)
        self._end_txn(producer_id, producer_epoch, first, commit, stored.base_offset)

    def _end_txn(self, producer_id: int, producer_epoch: int, first: int | None, commit: bool,
                 marker_offset: int) -> None:
        if not commit and first is not None:
            self.aborted.append(AbortedTxn(producer_id, first, marker_offset))
        self.fence(producer_id, producer_epoch)

    def restore(self, data: bytes) -> None:
        """Re-append a batch read back from storage, rebuilding the producer state, open
        transactions and aborted-transaction index from it as Kafka's log recovery does.

        Raises:
            ValueError: ``data`` is not one whole v2 batch with a valid CRC, or its base
                offset is below the log end.
        """
        b = _parse(data)[0] if data else None
        if b is None or b.size_in_bytes != len(data):
            raise ValueError("not one whole batch")
        if b.base_offset < self.log_end_offset:
            raise ValueError(f"batch at {b.base_offset} below the log end {self.log_end_offset}")
        if b.leader_epoch > self.leader_epoch:
            self.leader_epoch = b.leader_epoch
            self.epochs.append((b.leader_epoch, b.base_offset))
        stored = StoredBatch(data, b.base_offset, b.last_offset, b.max_timestamp,
                             b.producer_id, b.is_transactional, b.is_control)
        self.batches.append(stored)
        self._bases.append(stored.base_offset)
        self.log_end_offset = stored.last_offset + 1
        if b.is_control:
            records = b.records()
            marker = parse_control_record(records[0]) if records else None
            if marker is not None and (marker.is_commit or marker.is_abort):
                first = self.open_txns.pop(b.producer_id, None)
                self._end_txn(b.producer_id, b.producer_epoch, first, marker.is_commit,
                              stored.base_offset)
            return
        log_append = b.timestamp_type == TimestampType.LOG_APPEND_TIME
        self._track(b, stored.base_offset, b.max_timestamp if log_append else -1)

    def delete_records(self, offset: int) -> int:
        """Advance the log start offset to ``offset`` (-1: the high watermark).

        Returns:
            The error code (OFFSET_OUT_OF_RANGE past the high watermark).
        """
        if offset == -1:
            offset = self.high_watermark
        if offset < 0 or offset > self.high_watermark:
            return E.OffsetOutOfRangeError.code
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            keep = self.index_of(offset)
            del self.batches[:keep]
            del self._bases[:keep]
            self.aborted = [a for a in self.aborted if a.last_offset >= offset]
            if self.sink is not None:
                self.sink.log_start(offset)
        return 0


def _parse(records: bytes) -> list[RecordBatch]:
    """The v2 batches of a produce record set, CRCs checked.

    Raises:
        ValueError: anything malformed (legacy magic, truncation, bad CRC).
    """
    out: list[RecordBatch] = []
    pos = 0
    try:
        while pos < len(records):
            b = RecordBatch(records, pos)
            b.validate_crc()
            out.append(b)
            pos += b.size_in_bytes
    except Exception as exc:  # CorruptRecordError and struct errors alike
        raise ValueError(str(exc)) from None
    return out


def _rewrite_append_time(data: bytearray, now_ms: int) -> None:
    """Mark a batch log-append-time with ``now_ms`` as max timestamp, and re-sign it."""
    attributes = _LOG_APPEND.unpack_from(data, 21)[0] | 0x08
    _LOG_APPEND.pack_into(data, 21, attributes)
    # maxTimestamp sits after attributes(2), lastOffsetDelta(4), baseTimestamp(8)
    _MAX_TS.pack_into(data, 21 + 2 + 4 + 8, now_ms)
    _CRC.pack_into(data, 17, crc32c.crc32c(bytes(data[21:])))

