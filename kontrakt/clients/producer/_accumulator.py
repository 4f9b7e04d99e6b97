"""The record accumulator: per-partition queues of batches shared by the callers and the I/O
loop.

Like the Java client's RecordAccumulator, this is plain thread-safe code: callers (on any
thread, or on the event loop for the async producer) append records straight into the open
batch of a partition under one lock, and the sender (on the event loop) takes ready batches
out. Nothing crosses threads per record: the sender is woken once per batch at most.

This module keeps the queues, the buffer memory, the sender's drain-side operations (resend,
split, expiry, abort) and the appends' placement; record bytes are written by
``_records.py``, batches and their futures live in ``_batch.py`` and ``_future.py``, keyed
records wait in ``_stage.py``, and a sync producer's threaded hand-over in ``_handover.py``.
"""

from __future__ import annotations

import logging
import threading
import time
from _thread import allocate_lock
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from kontrakt.clients.producer._batch import (
    DeliveryCallback,
    ProducerBatch,
    StagedRun,
    expired_error,
    keep_delivery,
)
from kontrakt.clients.producer._future import new_future
from kontrakt.clients.producer._records import (
    PrefixTables,
    append_record,
    first_record,
    record_fields,
)
from kontrakt.clients.producer._split import split_batch
from kontrakt.clients.producer._stage import KeyedStage
from kontrakt.clients.producer._stage import settle_locked as _settle_locked
from kontrakt.errors import IllegalStateError
from kontrakt.protocol.records import (
    BATCH_HEADER_SIZE,
    CompressionType,
    RecordBatchBuilder,
    compress,
)

__all__ = ["ABORTED", "WAITER", "RecordAccumulator", "expired_error"]

log = logging.getLogger("kontrakt.producer")

Header = tuple[str, bytes | None]

#: codecs whose batches a sync producer's handing-over caller helps compress (see
#: RecordAccumulator.claim_closed): their compressors give the GIL up and cost tens of us
#: or more a batch. Not lz4 (cramjam's frame compressor keeps the GIL, so nothing would run
#: beside it) nor snappy (a few us a block; helping measured no gain).
_HELPED_CODECS = frozenset({CompressionType.GZIP, CompressionType.ZSTD})

#: returned by :meth:`RecordAccumulator.append` when ``abort_on_new_batch`` stops it
ABORTED: Any = object()
#: ``append(urgent=WAITER)``: urgent, and the caller blocks on the record next; it wakes the
#: sender itself right before blocking (``ProducerBatch.wait(timeout, wake=True)``), so that
#: the I/O thread does not wake only to wait for the GIL the caller still holds.
WAITER: Any = object()


def _no_sticky(topic: str, previous: int, count: int) -> int:
    raise AssertionError("records without a key were staged without a sticky partitioner")


class RecordAccumulator:
    """Per-partition queues of batches, appended to by callers and drained by the sender.

    Args:
        batch_size: uncompressed bytes per batch.
        buffer_memory: bytes of queued and in-flight records before appends are refused.
        threaded: callers may be on other threads than the loop (sync producer): batches
            then carry locks to block on.
        wakeup: ``wakeup(urgent, filled=False)`` tells the sender there is work;
            ``filled``: the caller's records filled a batch (see Sender.hand_over).
    """

    def __init__(self, *, batch_size: int, linger: float, buffer_memory: int,
                 compression: CompressionType, compression_level: int | None,
                 delivery_timeout: float, threaded: bool,
                 wakeup: Callable[..., None]) -> None:
        self.batch_size = batch_size
        self.linger = linger
        self.buffer_memory = buffer_memory
        self.compression = compression
        self.compression_level = compression_level
        self.delivery_timeout = delivery_timeout
        self.threaded = threaded
        #: caller threads handing over to the sender compress some batches (claim_closed)
        self.helped = threaded and compression in _HELPED_CODECS
        self.wakeup = wakeup
        self.lock = threading.Lock()
        self.memory_freed = threading.Condition(self.lock)
        #: threads waiting on ``memory_freed`` (each notify costs ~40 bytecodes: made only
        #: when someone waits)
        self.memory_waiters = 0
        #: release() calls so far, and their count when an append last found the buffer
        #: full: a caller about to wait for memory freed since then must not (its notify
        #: went to no one; see CallerThreads.wait_memory)
        self.releases = 0
        self.refused_at = 0
        self.used = 0
        self.queues: dict[tuple[str, int], deque[ProducerBatch]] = {}
        #: the queues that may hold batches: every non-empty one is here (a batch is queued
        #: only by add_locked, append_batch and _reenqueue_locked, which list its queue),
        #: so that the sender's drain walks these rather than every partition's; the drain
        #: drops the empty ones (all under the lock)
        self.queued: dict[tuple[str, int], deque[ProducerBatch]] = {}
        #: each topic's staged records (see KeyedStage)
        self.stages: dict[str, KeyedStage] = {}
        self.incomplete: set[ProducerBatch] = set()
        #: record prefixes for bulk settling (see _records.uniform_runs)
        self.prefixes = PrefixTables()
        #: a keyed record is staged only while its key and value together, plus
        #: RECORD_OVERHEAD, are shorter (KeyedStage.offer; the producer sets it, and its
        #: close sets 0 again under the lock: 0 stages nothing)
        self.stage_limit = 0
        self.sender_wake_at = float("inf")
        #: no queued batch's delivery deadline is earlier (the pass looks for expired
        #: batches only from then, see expire): lowered as batches are queued, made
        #: exact again by each look
        self.expire_at = float("inf")
        #: set when an append found its partition's batch full (async senders then yield)
        self.filled = False
        self.flushing = 0
        self.closed = False
        self.on_complete: Callable[[ProducerBatch], None] | None = None
        self.on_memory: Callable[[], None] | None = None
        self.deliver: Callable[[ProducerBatch], None] = lambda b: None
        #: ``sticky(topic, previous, count)``: the partition (below ``count``) for a topic's
        #: records without a key -- the sticky one (previous -1), or a new one after a batch
        #: in ``previous`` would have to open (KIP-480); the producer sets it before
        #: staging keyless records
        self.sticky: Callable[[str, int, int], int] = _no_sticky

    def new_builder(self) -> RecordBatchBuilder:
        """An empty builder with the producer's codec and batch size (``create_batch``)."""
        return RecordBatchBuilder(compression=self.compression,
                                  compression_level=self.compression_level,
                                  max_batch_size=self.batch_size)

    def claim_closed(self) -> list[ProducerBatch]:
        """For a sync producer's caller about to wait for the sender's pass (Sender.hand_over):
        the later half of the batches no more records go to (each behind another in its
        queue) that the sender has not taken, claimed for the caller to compress meanwhile
        (:meth:`help`); empty unless ``helped`` (a sync producer, a codec of
        _HELPED_CODECS).

        The pass compresses the others at the same time and waits for these before framing
        them: the two threads compress in parallel, since these compressors give the GIL up,
        where the caller would otherwise idle through the whole pass's compression.
        """
        if not self.helped:
            return []
        with self.lock:
            closed = [b for dq in self.queues.values() if len(dq) > 1
                      for b in [*dq][:-1]
                      if not b.sealed and b.builder is None and b.packed is None
                      and b.helper is None]
            claimed = closed[len(closed) // 2:]
            for b in claimed:
                b.helper = allocate_lock()
                b.helper.acquire()
        return claimed

    def help(self, batches: list[ProducerBatch]) -> None:
        """Compress the records of ``batches``, claimed by :meth:`claim_closed`, for the
        sender; each is released to it as soon as it is done. A failure is the sender's to
        meet: it then compresses the batch itself, and fails it with the error."""
        codec, level = self.compression, self.compression_level
        for b in batches:
            helper = b.helper
            try:
                packed = compress(codec, b.joined(), level)
                if not b.done:
                    b.packed = packed
            except Exception:  # not the sending caller's error
                log.debug("compressing a batch of %s-%s failed; the sender retries it",
                          b.topic, b.partition, exc_info=True)
            finally:
                if helper is not None:
                    helper.release()

    def queues_for(self, topic: str, count: int) -> list[deque[ProducerBatch]]:
        """The queues of partitions 0..count-1 of ``topic`` (created when missing)."""
        with self.lock:
            return [self.queues.setdefault((topic, p), deque()) for p in range(count)]

    def append(self, topic: str, partition: int, timestamp: int, key: bytes | None,
               value: bytes | None, headers: Sequence[Header] | None, size: int,
               abort_on_new_batch: bool = False,
               delivery: DeliveryCallback | None = None, urgent: bool = False) -> Any:
        """Append one record.

        Args:
            size: the record's estimated size, charged against ``buffer.memory``.
            abort_on_new_batch: return :data:`ABORTED` instead of starting a new batch (the
                sticky partitioner then moves on first, KIP-480).
            delivery: a confluent-style callback kept with the batch.
            urgent: the caller will wait for the record (``send_and_wait``): the batch goes
                out at once, and the sender is woken here rather than by the waiter.

        Returns:
            A :class:`RecordFuture`; None when the buffer is full (nothing appended; wait on
            ``memory_freed`` or the async equivalent, then try again); or :data:`ABORTED`.

        Raises:
            IllegalStateError: the producer is closed.
        """
        kb, key, ksize, vb, value, vsize, hb, rest = record_fields(key, value, headers)
        tp = (topic, partition)
        with self.lock:
            if self.closed:
                raise IllegalStateError("the producer is closed")
            if self.used + size > self.buffer_memory and self.used > 0:
                self.refused_at = self.releases
                return None
            dq = self.queues.get(tp)
            if dq is None:
                dq = self.queues[tp] = deque()
            placed = self.add_locked(topic, partition, dq, timestamp, kb, key, vb, value, hb,
                                     rest, None, not abort_on_new_batch)
            if placed is None:
                return ABORTED
            batch, index = placed
            fut = new_future(batch, index, timestamp, ksize, vsize)
            if delivery is not None:
                keep_delivery(batch, (delivery, fut))
            if index:
                if not urgent or batch.urgent:
                    return fut
                # Someone will wait on it: wake the sender (after the lock).
                batch.urgent = True
                wake = True
                full = False
            else:
                full = len(dq) > 1
                if full:
                    self.filled = True
                if urgent:
                    batch.urgent = True
                wake = urgent or full or batch.created + self.linger < self.sender_wake_at
        # Once per batch at most: a batch filled up, or the sender sleeps past this one's
        # linger deadline; or someone is about to wait on the record.
        if wake and urgent is not WAITER:
            self.wakeup(full or urgent, full)
        return fut

    def add_locked(self, topic: str, partition: int, dq: deque[ProducerBatch],
                   timestamp: int, kb: bytes, key: bytes, vb: bytes, value: bytes,
                   hb: bytes, rest: int, created: float | None,
                   may_open: bool = True) -> tuple[ProducerBatch, int] | None:
        """Encode a record (its parts as _records.record_fields gives them) into ``dq``'s
        open batch, or into a new batch (made at ``created``, default now) if there is none
        or it is full; the caller holds the lock.

        Returns:
            (batch, index in it); None when a new batch was needed and ``may_open`` is
            False.
        """
        if dq:
            batch = dq[-1]
            if not batch.sealed:
                count = batch.count
                added = append_record(batch, timestamp, kb, key, vb, value, hb, rest,
                                      self.batch_size)
                if added:
                    self.used += added
                    return batch, count
        if not may_open:
            return None
        batch = ProducerBatch(self, topic, partition, None,
                              time.monotonic() if created is None else created)
        self.used += first_record(batch, timestamp, kb, key, vb, value, hb, rest)
        if not dq:
            self.queued[(topic, partition)] = dq
        dq.append(batch)
        if batch.deadline < self.expire_at:
            self.expire_at = batch.deadline
        self.incomplete.add(batch)
        return batch, 0

    # --- staged keyed records ------------------------------------------------------------

    def stage_for(self, topic: str, queues: list[deque[ProducerBatch]]) -> KeyedStage:
        """``topic``'s stage, placing records over ``queues`` (partition p's queue at p).

        Records staged while the topic had another partition count are placed first, by
        that count (as if they had gone into their batches when they were sent).
        """
        wake = None
        with self.lock:
            stage = self.stages.get(topic)
            if stage is None:
                stage = self.stages[topic] = KeyedStage(self, topic, queues)
            elif stage.count != len(queues):
                wake = _settle_locked(self, stage)
                stage.queues = queues
        if wake is not None:
            self.wakeup(wake, filled=wake)
        return stage

    def settle(self, stage: KeyedStage) -> None:
        """Place ``stage``'s records into their batches now (takes the lock)."""
        with self.lock:
            wake = _settle_locked(self, stage)
        if wake is not None:
            self.wakeup(wake, filled=wake)

    def close_locked(self) -> None:
        """The producer closes: place every stage's records and stage no more (the caller
        holds the lock; a sync producer's callers may be sending meanwhile)."""
        self.settle_all_locked()
        self.closed = True
        # KeyedStage.offer reads stage_limit under the lock (its only closed check).
        self.stage_limit = 0

    def settle_all_locked(self) -> None:
        """Place every stage's records (the caller holds the lock and wakes the sender)."""
        for stage in self.stages.values():
            if stage.keys:
                _settle_locked(self, stage)

    def settle_locked(self, stage: KeyedStage) -> bool | None:
        """Place ``stage``'s records (see _stage.settle_locked); the caller holds the lock
        and wakes the sender as told by the result."""
        return _settle_locked(self, stage)

    def append_batch(self, topic: str, partition: int, builder: RecordBatchBuilder,
                     size: int) -> ProducerBatch | None:
        """Queue a whole batch the caller built (``create_batch``/``send_batch``).

        Returns:
            The queued batch, or None when the buffer is full.
        """
        with self.lock:
            if self.closed:
                raise IllegalStateError("the producer is closed")
            if self.used + size > self.buffer_memory and self.used > 0:
                return None
            batch = ProducerBatch(self, topic, partition, builder, time.monotonic())
            batch.memory = size
            batch.urgent = True
            # Sealed: the caller built it whole; no record is appended to it here.
            batch.sealed = True
            self.used += size
            dq = self.queues.get((topic, partition))
            if dq is None:
                dq = self.queues[(topic, partition)] = deque()
            if not dq:
                self.queued[(topic, partition)] = dq
            dq.append(batch)
            if batch.deadline < self.expire_at:
                self.expire_at = batch.deadline
            self.incomplete.add(batch)
        self.wakeup(True)
        return batch

    def release(self, size: int) -> None:
        """Give back buffer memory (caller holds ``lock``)."""
        self.used -= size
        self.releases += 1
        if self.memory_waiters:
            self.memory_freed.notify_all()
        if self.on_memory is not None:
            self.on_memory()

    def reenqueue(self, batch: ProducerBatch) -> None:
        """Put a batch that must be resent back at the front of its queue, in sequence
        order behind any other resends (so per-partition order holds)."""
        with self.lock:
            self._reenqueue_locked(batch)

    def _reenqueue_locked(self, batch: ProducerBatch) -> None:
        tp = (batch.topic, batch.partition)
        dq = self.queues.setdefault(tp, deque())
        if not dq:
            self.queued[tp] = dq
        if batch.deadline < self.expire_at:
            self.expire_at = batch.deadline
        if batch.base_sequence < 0:
            dq.appendleft(batch)
            return
        # Resends (sealed, with a sequence) come first, in sequence order.
        i = 0
        for i, other in enumerate(dq):  # noqa: B007 - i is used after the loop
            if other.base_sequence < 0 or other.base_sequence > batch.base_sequence:
                break
        else:
            i = len(dq)
        dq.insert(i, batch)

    def split_and_reenqueue(self, batch: ProducerBatch) -> list[ProducerBatch] | None:
        """Split ``batch`` (refused as too large, see _split.py) and queue its parts in its
        place, at the front of its partition's queue; None when it cannot be split.

        Its record futures stay with it (it resolves once its parts have); confluent-style
        delivery callbacks go to the part holding their record, and are run when it
        completes. Its charge against ``buffer.memory`` passes to the parts.
        """
        parts = split_batch(batch)
        if parts is None:
            return None
        first = parts[0].count
        with self.lock:
            batch.split = [(0, parts[0]), (first, parts[1])]
            self.incomplete.discard(batch)
            self.incomplete.update(parts)
            self.release(batch.size - BATCH_HEADER_SIZE
                         - sum(p.size - BATCH_HEADER_SIZE for p in parts))
            deliveries, batch.deliveries = batch.deliveries, None
            for entry in deliveries or ():
                if type(entry) is StagedRun:
                    for fn, index, stamp, ksize, vsize in entry.records():
                        part, at = batch.part(index)
                        keep_delivery(part, (fn, new_future(part, at, stamp, ksize, vsize)))
                    continue
                fn, fut = entry  # type: ignore[misc]
                head = fut._head
                index = fut._at if type(head) is ProducerBatch else head.placed(fut._at)[1]
                part, at = batch.part(index)
                keep_delivery(part, (fn, new_future(part, at, fut._timestamp, *fut._sizes())))
            # In order: sequence order, or (without sequences) each put at the front.
            for part in parts if batch.base_sequence >= 0 else parts[::-1]:
                self._reenqueue_locked(part)
            batch.parts = []
            batch.blob = batch.packed = None
        return parts

    def expire(self, now: float) -> list[ProducerBatch]:
        """Take out queued batches whose delivery timeout passed (each queue in its order).

        Looks only from :attr:`expire_at` on: the sender's pass calls it per pass, and an
        awaited single send's pass would otherwise walk every queue for nothing."""
        if now < self.expire_at:
            return []
        out = []
        with self.lock:
            first = float("inf")
            for dq in self.queues.values():
                i = 0
                while i < len(dq):
                    b = dq[i]
                    if b.deadline <= now:
                        del dq[i]
                        b.sealed = True
                        out.append(b)
                        continue
                    if b.deadline < first:
                        first = b.deadline
                    if _never_sent(b):
                        break
                    i += 1
            self.expire_at = first
        return out

    def first_deadline(self) -> float:
        """The earliest delivery deadline of a queued batch (inf: none queued)."""
        first = float("inf")
        with self.lock:
            for dq in self.queues.values():
                for b in dq:
                    if b.deadline < first:
                        first = b.deadline
                    if _never_sent(b):
                        break
        return first

    def abort_all(self) -> list[ProducerBatch]:
        """Take out every queued batch, staged records included (closing without
        waiting)."""
        with self.lock:
            self.settle_all_locked()
            out = [b for dq in self.queues.values() for b in dq]
            for dq in self.queues.values():
                dq.clear()
            for b in out:
                b.sealed = True
        return out


def _never_sent(batch: ProducerBatch) -> bool:
    """Whether ``batch`` was never sent: such batches are queued in the order they were
    made, so the first one ends a look for the earliest deadline. Resends and a split
    batch's parts go to the front whatever their age (two answers of one partition may
    come back newest first), so each of those is looked at."""
    return not batch.retry_at and batch.parent is None
