"""Decoding a partition's fetched record set into ``ConsumerRecord`` lists, a bounded chunk at a
time (used by the fetcher, :mod:`._fetcher`).

Memory: records are counted by what they cost decoded (:data:`RECORD_COST`,
:data:`HEADER_COST`), so that the fetcher can hold them against its cap; a batch whose
records would cost more than a chunk (millions of tiny records, many headers, a legacy
wrapper of many messages) is decoded in pieces, never whole.
"""

from __future__ import annotations

import gc
from collections.abc import Generator, Iterator
from typing import Any

from kontrakt._types import ConsumerRecord, TimestampType
from kontrakt.errors import CorruptRecordError
from kontrakt.protocol.records import (
    ControlRecordType,
    LegacyBatch,
    RecordBatch,
    decode_records_piece_as,
    iter_batches,
)

__all__ = ["HEADER_COST", "RAW_BATCH_COST", "RECORD_COST", "RawBatch", "iter_partition_batches",
           "iter_partition_chunks", "parse_partition"]

_TS_TYPES = {-1: TimestampType.NO_TIMESTAMP, 0: TimestampType.CREATE_TIME,
             1: TimestampType.LOG_APPEND_TIME}
_TIMESTAMP_TYPE_MASK = 0x08  # batch attributes bit 3: log append time
#: What a decoded record costs in memory besides its key and value bytes (the
#: ``ConsumerRecord`` tuple, its offset and timestamp ints, the key and value ``bytes``
#: objects, its headers list, a slot in a list), and what each header adds (its tuple, name
#: ``str`` and value ``bytes`` objects, a slot in the list). Measured with tracemalloc on
#: CPython 3.11 over records decoded from a batch: 243 bytes for a record with no key, value
#: or headers, 274 with a 100-byte value, 307 with a key too; 67-150 bytes per header. A
#: record is counted as its encoded bytes plus these, which errs on the large side for tiny
#: records: the ones a hostile batch would be made of (7 bytes each encoded, ~250 decoded).
RECORD_COST = 288
HEADER_COST = 128


class _Transactions:
    """What ``read_committed`` hides of a partition's record set: the batches of the aborted
    transactions a fetch response lists (producer id, first offset), up to their abort
    marker, and every control batch.

    Args:
        aborted: the response's aborted transactions (None: none).
        max_batch_bytes: the most a control batch may decompress to.
    """

    __slots__ = ("_active", "_at", "_max_batch_bytes", "_pending")

    def __init__(self, aborted: list[Any] | None, max_batch_bytes: int | None) -> None:
        self._pending = sorted(aborted or (), key=lambda a: a.first_offset)
        self._active: set[int] = set()
        self._at = 0
        self._max_batch_bytes = max_batch_bytes

    def wanted(self, batch: RecordBatch | LegacyBatch) -> bool:
        """Whether ``batch`` (the next batch, in offset order) is handed out.

        Raises:
            CorruptRecordError: a control batch whose marker cannot be read.
        """
        pending = self._pending
        active = self._active
        last = batch.last_offset
        while self._at < len(pending) and pending[self._at].first_offset <= last:
            active.add(pending[self._at].producer_id)
            self._at += 1
        if batch.is_control:
            if batch.producer_id in active and isinstance(batch, RecordBatch):
                # Only the first record (the marker) is read: a control batch of millions
                # of records costs no more than one.
                buf, pos, end = batch.record_data(self._max_batch_bytes)
                try:
                    ctrl = decode_records_piece_as(
                        buf, pos, end, min(1, batch.records_count), 0, 0, 0, 0,
                        ConsumerRecord, "", 0, TimestampType.CREATE_TIME, -1, 1 << 62)[0]
                except CorruptRecordError as exc:
                    raise batch.corrupt(str(exc)) from None
                key = ctrl[0].key if ctrl else None
                if key is not None and len(key) >= 4 and int.from_bytes(
                        key[2:4], "big") == ControlRecordType.ABORT:
                    active.discard(batch.producer_id)
            return False
        return not (batch.is_transactional and batch.producer_id in active)


def iter_partition_chunks(topic: str, partition: int, data: bytes | None, fetch_offset: int,
                          *, read_committed: bool, aborted: list[Any] | None, check_crcs: bool,
                          chunk_bytes: int = 0, max_batch_bytes: int | None = None,
                          chunk_cost: int | None = None
                          ) -> Generator[tuple[list[ConsumerRecord[Any, Any]], int, int, int, int],
                                         None, None]:
    """Decode one partition's record set in chunks of whole batches.

    Batches ending before ``fetch_offset`` and records before it are skipped. With
    ``read_committed``, batches of transactions listed in ``aborted`` (producer id, first
    offset) are dropped up to their abort marker; control batches are never returned.

    A chunk is yielded once it spans at least ``chunk_bytes`` bytes of batches (0: every
    batch), and a last one for the rest, so a caller can hand records out (and let the
    event loop read the socket) while later batches wait. Chunks cover consecutive batches,
    so each chunk's next offset is where the following chunk starts.

    Memory: a chunk's records cost at most about ``chunk_cost`` bytes (None: no bound;
    counted as their encoded bytes plus :data:`RECORD_COST` each and :data:`HEADER_COST`
    per header). A chunk is cut before a batch that would take it past that,
    and a batch whose records alone would cost more is decoded a piece at a time, each
    piece a chunk of its own ending at its last record (so the records of one batch are
    never all materialized at once, however small they are). A compressed batch may
    decompress to at most ``max_batch_bytes`` (None: no limit); decompression stops there.

    CPython's cyclic garbage collector is paused while a chunk is decoded, never across a
    yield (so an async application never runs with it paused; a sync application's thread
    may, as it always could while the loop thread decodes).
    Decoding builds thousands of container objects (records and their header lists) that
    all survive, so young-generation passes every few hundred allocations would scan them
    again and again (measured: about 40% of the decoding time); paused, each chunk costs
    one pass. Records hold no reference cycles, so nothing waits for the collector. It is
    left alone when the application has disabled it.

    Yields:
        (records, next fetch offset after the chunk, leader epoch of the chunk's last batch
        (-1 if none was read), bytes of the batches the chunk completes, memory cost of its
        records). The last chunk may have no records when the tail was control or aborted
        batches; nothing is yielded when no batch reaches past ``fetch_offset``.

    Raises:
        DecompressionLimitError: a batch decompresses to more than ``max_batch_bytes``.
        CorruptRecordError: a CRC mismatch (with ``check_crcs``) or malformed batch. Either
            is raised after a chunk of every batch before the bad one has been yielded, so
            the chunk's next offset is the bad batch's (or, in a batch decoded in pieces,
            the first record not yet yielded).
    """
    if not data:
        return
    txns = _Transactions(aborted, max_batch_bytes) if read_committed else None
    CR = ConsumerRecord
    TS = _TS_TYPES
    CREATE = TimestampType.CREATE_TIME
    LOG_APPEND = TimestampType.LOG_APPEND_TIME
    REC = RECORD_COST
    HDR = HEADER_COST
    budget = chunk_cost if chunk_cost is not None else 1 << 62
    max_headers = budget // HEADER_COST
    decode = decode_records_piece_as
    gc_on = gc.isenabled()
    out: list[ConsumerRecord[Any, Any]] = []
    next_offset = fetch_offset
    epoch = -1
    size = 0
    cost = 0
    paused = False
    try:
        for batch in iter_batches(data, check_crcs=check_crcs, topic=topic, partition=partition):
            nxt = batch.next_offset
            if nxt <= fetch_offset:
                continue
            wanted = not batch.is_control if txns is None else txns.wanted(batch)
            if wanted:
                if gc_on and not paused:
                    gc.disable()
                    paused = True
                v2 = batch if isinstance(batch, RecordBatch) else None
                legacy: Iterator[list[Any]] = iter(())
                if v2 is not None:
                    buf, pos, end = v2.record_data(max_batch_bytes)
                    left = v2.records_count
                    ts_type = 1 if v2.attributes & _TIMESTAMP_TYPE_MASK else 0
                    ts_value = LOG_APPEND if ts_type else CREATE
                    est = end - pos + left * REC
                    if out and cost + est > budget:
                        # Cut before this batch: the chunk would cost too much with it.
                        if paused:
                            gc.enable()
                            paused = False
                        yield out, next_offset, epoch, size, cost
                        out = []
                        size = cost = 0
                        if gc_on:
                            gc.disable()
                            paused = True
                    # All of the batch at once unless its records would cost more than a
                    # chunk; then pieces of about a chunk's cost (by its average record, then
                    # by what the last piece cost). A piece also stops at a chunk's cost of
                    # headers, which the bytes do not show.
                    step = left if est <= budget else max(1, budget * left // est)
                else:
                    # A legacy wrapper's size is known only once inflated: pieces of a
                    # chunk's cost of minimal messages (26+ bytes each).
                    assert isinstance(batch, LegacyBatch)
                    legacy = batch.iter_records(check_crcs=check_crcs,
                                                max_size=max_batch_bytes,
                                                piece=max(1, budget // (REC + 26)))
                    part = next(legacy, None)
                while True:
                    if v2 is not None:
                        try:
                            recs, after, headers = decode(
                                buf, pos, end, min(step, left), v2.base_offset,
                                v2.base_timestamp, ts_type, v2.max_timestamp, CR, topic,
                                partition, ts_value, v2.partition_leader_epoch, max_headers)
                        except CorruptRecordError as exc:
                            raise v2.corrupt(str(exc)) from None
                        n = len(recs)
                        piece_cost = after - pos + n * REC + headers * HDR
                        pos = after
                        left -= n
                        if left and piece_cost > budget:
                            step = max(1, budget * n // piece_cost)
                        more = left > 0
                    else:
                        rs = part or []
                        recs = [CR(topic, partition, r[0], r[1], TS[r[2]], r[3], r[4], r[5], -1)
                                for r in rs]
                        piece_cost = sum(len(r[3] or b"") + len(r[4] or b"") for r in rs
                                         ) + len(rs) * REC
                        part = next(legacy, None)
                        more = part is not None
                    if recs and recs[0].offset < fetch_offset:
                        # Only the first batch of a fetch can start before the fetch
                        # offset.
                        skip = 1
                        while skip < len(recs) and recs[skip].offset < fetch_offset:
                            skip += 1
                        recs = recs[skip:]
                    if not more:
                        break
                    if out:
                        # Records of earlier batches go first (the batch looked small
                        # enough to join them, but its headers stopped the piece).
                        out.extend(recs)
                        recs, out = out, []
                        piece_cost += cost
                        cost = 0
                    if recs:
                        if paused:
                            gc.enable()
                            paused = False
                        yield recs, recs[-1].offset + 1, batch.leader_epoch, size, piece_cost
                        size = 0
                        if gc_on:
                            gc.disable()
                            paused = True
                if v2 is not None and pos != end:
                    raise v2.corrupt(
                        f"batch holds {end - pos} bytes after its {v2.records_count} "
                        "records" if pos < end
                        else f"records of the batch run {pos - end} bytes past its end")
                cost += piece_cost
                if out:
                    out.extend(recs)
                else:
                    out = recs
            # Accounted only now: a batch that fails is not part of any chunk.
            next_offset = nxt
            epoch = batch.leader_epoch
            size += batch.size_in_bytes
            if wanted and (size >= chunk_bytes or cost >= budget):
                if paused:
                    gc.enable()
                    paused = False
                yield out, next_offset, epoch, size, cost
                out = []
                size = cost = 0
    except CorruptRecordError:
        if size:
            # Hand out the batches before the bad one first: nothing accepted is lost.
            if paused:
                gc.enable()
                paused = False
            yield out, next_offset, epoch, size, cost
        raise
    finally:
        if paused:
            gc.enable()
    if size:
        yield out, next_offset, epoch, size, cost


def parse_partition(topic: str, partition: int, data: bytes | None, fetch_offset: int, *,
                    read_committed: bool, aborted: list[Any] | None, check_crcs: bool,
                    max_batch_bytes: int | None = None
                    ) -> tuple[list[ConsumerRecord[Any, Any]], int, int]:
    """Decode one partition's record set at once; see :func:`iter_partition_chunks`.

    Returns:
        (records, next fetch offset, leader epoch of the last batch read).

    Raises:
        DecompressionLimitError: a batch decompresses to more than ``max_batch_bytes``.
        CorruptRecordError: a CRC mismatch (with ``check_crcs``) or malformed batch.
    """
    chunks = iter_partition_chunks(
        topic, partition, data, fetch_offset, read_committed=read_committed,
        aborted=aborted, check_crcs=check_crcs, chunk_bytes=1 << 62,
        max_batch_bytes=max_batch_bytes)
    for recs, next_offset, epoch, _, _ in chunks:
        # One chunk (the size bound is never reached), unless a bad batch follows it:
        # running on raises that batch's error.
        for _ in chunks:
            pass
        return recs, next_offset, epoch
    return [], fetch_offset, -1


class RawBatch:
    """One fetched batch's records, not decoded: what a consumer made with
    ``_raw_batches=True`` hands out in place of records (:func:`iter_partition_batches`).

    Batches are checked as the record path checks them (CRC with ``check.crcs``, the
    decompression bound, ``read_committed``'s aborted and control batches left out), so a
    caller that decodes ``data[pos:end]`` (e.g. with
    :func:`~kontrakt.protocol.records.decode_records`) sees exactly the records a normal
    consumer would, less those before ``min_offset``.

    Attributes:
        topic, partition: where the batch was fetched from.
        data, pos, end: the v2 records' bytes (the response's buffer, or the decompressed
            payload); for a legacy (magic 0/1) batch ``data`` is its records, decoded
            (:class:`~kontrakt.protocol.records.Record` tuples) and ``pos``/``end`` are 0.
        count: the records the batch header declares (legacy: ``len(data)``).
        base_offset, base_timestamp, max_timestamp: from the batch header.
        timestamp_type: 0 create time, 1 log append time.
        min_offset: records before this offset are not the caller's (the fetch offset).
        offset: the batch's last offset (a consumer's position moves past it).
        leader_epoch: the batch's partition leader epoch.
    """

    __slots__ = ("base_offset", "base_timestamp", "count", "data", "end", "leader_epoch",
                 "max_timestamp", "min_offset", "offset", "partition", "pos",
                 "timestamp_type", "topic")

    def __init__(self, topic: str, partition: int, data: Any, pos: int, end: int, count: int,
                 base_offset: int, base_timestamp: int, timestamp_type: int,
                 max_timestamp: int, min_offset: int, offset: int, leader_epoch: int) -> None:
        self.topic = topic
        self.partition = partition
        self.data = data
        self.pos = pos
        self.end = end
        self.count = count
        self.base_offset = base_offset
        self.base_timestamp = base_timestamp
        self.timestamp_type = timestamp_type
        self.max_timestamp = max_timestamp
        self.min_offset = min_offset
        self.offset = offset
        self.leader_epoch = leader_epoch

    @property
    def is_legacy(self) -> bool:
        """True when ``data`` holds a legacy batch's decoded records."""
        return isinstance(self.data, list)

    def corrupt(self, message: str) -> CorruptRecordError:
        """A :class:`CorruptRecordError` naming this batch (topic, partition, base offset)."""
        return CorruptRecordError(message, topic=self.topic, partition=self.partition,
                                  offset=self.base_offset)

    def __repr__(self) -> str:
        return (f"RawBatch({self.topic}/{self.partition}, offsets {self.base_offset}.."
                f"{self.offset}, {self.count} records)")


#: What a raw batch costs in memory besides its records' bytes (the object, its slot in a
#: list; a decompressed payload's ``bytes`` header).
RAW_BATCH_COST = 256


def iter_partition_batches(topic: str, partition: int, data: bytes | None, fetch_offset: int,
                           *, read_committed: bool, aborted: list[Any] | None,
                           check_crcs: bool, chunk_bytes: int = 0,
                           max_batch_bytes: int | None = None, chunk_cost: int | None = None
                           ) -> Generator[tuple[list[RawBatch], int, int, int, int], None, None]:
    """:func:`iter_partition_chunks` for a consumer that hands out :class:`RawBatch`es: the
    same batches are selected, checked and decompressed, and the same tuples yielded, but
    with the batches' bytes in place of decoded records (the caller decodes them, e.g. into
    columns). A chunk is cut before a batch that would take its bytes past ``chunk_cost``
    (None: no bound); a batch is never split (it holds at most ``max_batch_bytes``).

    Raises:
        DecompressionLimitError, CorruptRecordError: as :func:`iter_partition_chunks`, after
            a chunk of the batches before the bad one.
    """
    if not data:
        return
    txns = _Transactions(aborted, max_batch_bytes) if read_committed else None
    budget = chunk_cost if chunk_cost is not None else 1 << 62
    out: list[RawBatch] = []
    next_offset = fetch_offset
    epoch = -1
    size = cost = 0
    try:
        for batch in iter_batches(data, check_crcs=check_crcs, topic=topic, partition=partition):
            nxt = batch.next_offset
            if nxt <= fetch_offset:
                continue
            wanted = not batch.is_control if txns is None else txns.wanted(batch)
            if wanted:
                if isinstance(batch, RecordBatch):
                    buf, pos, end = batch.record_data(max_batch_bytes)
                    raw = RawBatch(
                        topic, partition, buf, pos, end, batch.records_count,
                        batch.base_offset, batch.base_timestamp,
                        1 if batch.attributes & _TIMESTAMP_TYPE_MASK else 0,
                        batch.max_timestamp, fetch_offset, nxt - 1, batch.leader_epoch)
                else:
                    recs = [r for part in batch.iter_records(check_crcs=check_crcs,
                                                             max_size=max_batch_bytes)
                            for r in part]
                    raw = RawBatch(topic, partition, recs, 0, 0, len(recs), batch.base_offset,
                                   -1, int(batch.timestamp_type), -1, fetch_offset, nxt - 1,
                                   -1)
                    end, pos = sum(len(r[3] or b"") + len(r[4] or b"") for r in recs), 0
                    end += len(recs) * RECORD_COST
                batch_cost = end - pos + RAW_BATCH_COST
                if out and cost + batch_cost > budget:
                    yield out, next_offset, epoch, size, cost
                    out = []
                    size = cost = 0
                out.append(raw)
                cost += batch_cost
            # Accounted only now: a batch that fails is not part of any chunk.
            next_offset = nxt
            epoch = batch.leader_epoch
            size += batch.size_in_bytes
            if wanted and (size >= chunk_bytes or cost >= budget):
                yield out, next_offset, epoch, size, cost
                out = []
                size = cost = 0
    except CorruptRecordError:
        if size:
            yield out, next_offset, epoch, size, cost
        raise
    if size:
        yield out, next_offset, epoch, size, cost
