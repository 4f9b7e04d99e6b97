"""Batches: one partition's records from their first append until they are answered.

A :class:`ProducerBatch` holds its records' bytes while it is open (written by
``_records.py``), then its delivery state: base offset, error, and the callbacks, delivery
reports and blocked threads to resolve once it completes. A :class:`StagedChunk` is where
the futures of staged keyed records (see ``_stage.py``) point until their stage settles and
places them into batches. Record futures themselves live in ``_future.py``.
"""

from __future__ import annotations

import asyncio
import logging
from _thread import LockType, allocate_lock
from collections.abc import Callable, Iterator, Sequence
from contextvars import Context
from itertools import repeat
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from kontrakt._types import RecordMetadata
from kontrakt.errors import DeliveryTimeoutError, IllegalStateError, KafkaTimeoutError
from kontrakt.protocol.records import BATCH_HEADER_SIZE, RecordBatchBuilder
from kontrakt.protocol.records._batch import TRANSACTIONAL_MASK
from kontrakt.protocol.records._builder import frame_batch

if TYPE_CHECKING:
    from kontrakt.clients.producer._accumulator import RecordAccumulator
    from kontrakt.clients.producer._future import RecordFuture
    from kontrakt.clients.producer._stage import KeyedStage

__all__ = ["UNLISTED", "Callback", "Delivery", "DeliveryCallback", "ProducerBatch", "StagedChunk",
           "StagedRun", "expired_error", "keep_delivery", "run_callbacks"]

log = logging.getLogger("kontrakt.producer")

_new_tuple = tuple.__new__

DeliveryCallback = Callable[[BaseException | None, RecordMetadata], None]
#: an ``add_done_callback`` callback kept until its record resolves: (fn, the record's future,
#: the context to run it in, or None to call it as it is; see run_callbacks)
Callback = tuple[Callable[["RecordFuture"], Any], "RecordFuture", "Context | None"]
#: what a batch keeps of its records' confluent-style delivery callbacks, in record order:
#: (fn, the record's future) for a record appended alone, a StagedRun for staged ones
Delivery: TypeAlias = "tuple[DeliveryCallback, RecordFuture] | StagedRun"

#: the longest the I/O thread waits for a helper to compress a batch before doing it itself
#: (see _handover.py)
_HELP_WAIT = 1.0


class ProducerBatch:
    """One partition's batch: its builder while open, then its delivery state.

    Completion (:meth:`complete`) happens on the event loop, exactly once.
    """

    __slots__ = (
        "_waiters", "acc", "attempts", "base_offset", "base_sequence", "base_timestamp", "blob",
        "blob_key", "builder", "callbacks", "cause", "count", "created", "deadline", "deliveries",
        "done", "error", "helper", "log_append_time", "max_timestamp", "memory", "packed",
        "parent", "partition", "parts", "producer_epoch", "producer_id", "retry_at", "sealed",
        "size", "sleepers", "split", "topic", "urgent",
    )

    def __init__(self, acc: RecordAccumulator, topic: str, partition: int,
                 builder: RecordBatchBuilder | None, now: float) -> None:
        self.acc = acc
        self.topic = topic
        self.partition = partition
        self.builder = builder
        # The records, encoded as they are appended (see RecordAccumulator.append).
        self.parts: list[bytes] = []
        self.size = BATCH_HEADER_SIZE
        self.count = 0
        self.base_timestamp = -1
        self.max_timestamp = -1
        self.created = now
        self.deadline = now + acc.delivery_timeout
        self.memory = 0
        self.attempts = 0
        self.retry_at = 0.0
        #: the last error a send of the batch met (the cause of a delivery timeout)
        self.cause: BaseException | None = None
        #: refused as too large and split (see _split.py): (index of its first record
        #: here, part) in order; the batch resolves once its parts have
        self.split: list[tuple[int, ProducerBatch]] | None = None
        #: the batch this one is a part of
        self.parent: ProducerBatch | None = None
        self.base_sequence = -1
        self.producer_id = -1
        self.producer_epoch = -1
        self.blob: bytes | None = None
        self.blob_key: tuple[int, int, int] | None = None
        # Compressed records from a caller thread that helped (RecordAccumulator.help);
        # ``helper`` is held while it compresses them.
        self.packed: bytes | None = None
        self.helper: LockType | None = None
        # Sealed once the sender takes it (or built whole by the caller): no more appends.
        self.sealed = False
        self.urgent = False
        self.done = False
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None
        self.callbacks: list[Callback] | None = None
        self.deliveries: list[Delivery] | None = None
        # A lock per thread blocked on the batch (see _sleeper), released by complete():
        # most batches are never waited on one by one. A bare lock, not a threading.Event
        # (a Condition and a lock per waiter): a sync send_and_wait's wake-up is ~8 us
        # sooner (a thread ping-pong on this machine: 55 -> 46 us).
        self.sleepers: list[LockType] | None = None
        self._waiters: list[asyncio.Future[None]] | None = None

    @property
    def record_count(self) -> int:
        return self.builder.record_count if self.builder is not None else self.count

    @property
    def size_in_bytes(self) -> int:
        """Uncompressed size of the batch."""
        return self.builder.size_in_bytes if self.builder is not None else self.size

    def encode(self, producer_id: int, producer_epoch: int, transactional: bool) -> bytes:
        """The batch bytes with the given idempotence fields (cached for resends)."""
        key = (producer_id, producer_epoch, self.base_sequence)
        if self.blob is None or self.blob_key != key:
            self.producer_id, self.producer_epoch = producer_id, producer_epoch
            if self.builder is not None:
                self.blob = self.builder.build(
                    producer_id=producer_id, producer_epoch=producer_epoch,
                    base_sequence=self.base_sequence, is_transactional=transactional)
            else:
                helper = self.helper
                if helper is not None:
                    # A caller thread is compressing the records (see claim_closed); past
                    # the wait (it cannot be expected to hang) they are compressed here.
                    helper.acquire(timeout=_HELP_WAIT)
                    self.helper = None
                packed = self.packed
                self.blob = frame_batch(
                    self.joined() if packed is None else packed, self.count,
                    self.base_timestamp, self.max_timestamp,
                    producer_id=producer_id, producer_epoch=producer_epoch,
                    base_sequence=self.base_sequence,
                    attributes=TRANSACTIONAL_MASK if transactional else 0,
                    codec=self.acc.compression, level=self.acc.compression_level,
                    compressed=packed is not None)
            self.blob_key = key
        return self.blob

    def joined(self) -> bytes:
        """The records' bytes, joined once and kept so for resends (appended records'
        parts go at the first join, while it has them in cache: dropped only on completion,
        a 128 KiB batch's parts cost ~60 us of cache misses on the I/O thread)."""
        parts = self.parts
        if len(parts) != 1:
            parts = self.parts = [b"".join(parts)]
        return parts[0]

    def complete(self, base_offset: int, log_append_time: int = -1,
                 error: BaseException | None = None) -> bool:
        """Resolve every record of the batch; False when it was already resolved.

        Runs the records' callbacks (on the calling thread, the event loop) and hands
        confluent-style delivery callbacks to the accumulator's delivery queue.
        """
        acc = self.acc
        with acc.lock:
            if self.done:
                return False
            self.done = True
            self.base_offset = base_offset
            self.log_append_time = log_append_time
            self.error = error
            callbacks, self.callbacks = self.callbacks, None
            acc.incomplete.discard(self)
            # Records appended by the producer are charged by their encoded size; batches
            # from send_batch by their whole size. (A split batch's parts carry its charge.)
            if self.split is None:
                acc.release(self.memory if self.builder is not None
                            else self.size - BATCH_HEADER_SIZE)
        # Records are answered; their bytes are not needed any more.
        if self.builder is not None:
            self.count = self.builder.record_count
            self.builder = None
        self.parts = []
        self.blob = None
        sleepers = self.sleepers
        if sleepers is not None:
            self.sleepers = None
            for sleeper in sleepers:
                sleeper.release()
        waiters = self._waiters
        if waiters is not None:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)
        if self.deliveries is not None:
            acc.deliver(self)
        if callbacks:
            run_callbacks(callbacks)
        if acc.on_complete is not None:
            acc.on_complete(self)
        parent = self.parent
        if parent is not None and parent.split is not None and \
                all(part.done for _, part in parent.split):
            # Its records' futures point at the split batch: resolve it, with the first
            # failure of its parts (each record reads its own part's outcome, see part()).
            parent.complete(-1, -1, next((part.error for _, part in parent.split
                                          if part.error is not None), None))
        return True

    def part(self, index: int) -> tuple[ProducerBatch, int]:
        """The batch holding record ``index`` of this one, and its index there: the batch
        itself, or the part it went to after a split (and a split of that, ...)."""
        b = self
        while b.split is not None:
            split = b.split
            i = len(split) - 1
            while split[i][0] > index:
                i -= 1
            first, b = split[i]
            index -= first
        return b, index

    def wait(self, timeout: float | None, wake: bool = False) -> None:
        """Block the calling thread until the batch completes.

        ``wake``: wake the sender right before blocking, whatever the batch's state (for a
        record appended with ``urgent=WAITER``, see RecordAccumulator.append).

        Raises:
            KafkaTimeoutError: not done within ``timeout`` seconds.
            IllegalStateError: called on the event loop of an async producer.
        """
        if not self.acc.threaded:
            raise IllegalStateError(
                "RecordFuture.result() on an unresolved record of an AsyncProducer would "
                "block its event loop; await the future instead")
        sleeper = self._sleeper()
        if sleeper is None:
            return
        if wake or (not self.sealed and not self.urgent):
            self.urgent = True
            self.acc.wakeup(True)
        if sleeper.acquire(timeout=-1 if timeout is None else max(timeout, 0.0)):
            return
        with self.acc.lock:
            if self.done:  # completed right as the wait ran out
                return
            sleepers = self.sleepers
            assert sleepers is not None  # not done: the sleeper is listed
            sleepers.remove(sleeper)
        raise KafkaTimeoutError(f"record not delivered within {timeout}s")

    def _sleeper(self) -> LockType | None:
        """A held lock that :meth:`complete` releases; None if the batch is complete."""
        sleeper = allocate_lock()
        sleeper.acquire()
        # Under the lock complete() takes to set ``done``: it then sees the sleeper.
        with self.acc.lock:
            if self.done:
                return None
            if self.sleepers is None:
                self.sleepers = [sleeper]
            else:
                self.sleepers.append(sleeper)
        return sleeper

    async def wait_async(self, on_own_loop: bool = False) -> None:
        """Wait on the running loop until the batch completes.

        ``on_own_loop``: the caller runs on the loop that completes the batch (the
        producer's own flush and close), so a loop future serves even for a sync producer's
        batch (no executor thread, which interpreter exit no longer allows)."""
        if self.done:
            return
        if not self.sealed and not self.urgent:
            # Someone waits on this batch: lingering for more records now only adds latency.
            # (An urgent batch already had the sender woken for it.)
            self.urgent = True
            self.acc.wakeup(True)
        if self.acc.threaded and not on_own_loop:
            # A sync producer's batch, awaited from some other loop: wait off-thread.
            sleeper = self._sleeper()
            if sleeper is not None:
                await asyncio.get_running_loop().run_in_executor(None, sleeper.acquire)
            return
        await self.waiter(asyncio.get_running_loop())

    def waiter(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
        """A future of ``loop`` that :meth:`complete` resolves (for a batch not done yet, on
        the loop that completes it)."""
        # One future per waiter (not one shared and shielded): cancelling one waiter leaves
        # the others alone, and resolution reaches each in one loop turn.
        fut = loop.create_future()
        if self._waiters is None:
            self._waiters = [fut]
        else:
            self._waiters.append(fut)
        return fut


class StagedChunk:
    """The records one settling of a :class:`KeyedStage` places: a staged record's future
    is (chunk, index, timestamp) until then, and reads its batch and offset delta here."""

    __slots__ = ("batches", "callbacks", "delivery_at", "every", "fns", "indexes", "millis",
                 "runs", "sizes", "stage")

    def __init__(self, stage: KeyedStage) -> None:
        self.stage = stage
        #: the records' key and value lengths in send order, once settled: the lists the
        #: settling computes anyway, kept for their RecordMetadata (no cost per record)
        self.sizes: tuple[list[int], list[int]] | None = None
        #: each record's batch and index there, in send order; None until the chunk settles
        #: (UNLISTED while only ``runs`` says where its records went)
        self.batches: list[ProducerBatch] | None = None
        self.indexes: list[int] | None = None
        #: a bulk settle's placements: (records in partition order, [(start, end, batch,
        #: index of the first), ...] over that order)
        self.runs: tuple[list[int], list[tuple[int, int, ProducerBatch, int]]] | None = None
        #: add_done_callback's callbacks of records not placed yet
        self.callbacks: list[Callback] | None = None
        #: confluent-style delivery callbacks (a sync produce()) of the chunk's records:
        #: while staged, ``fns[k]`` is record ``delivery_at[k]``'s (no future kept: a
        #: produce() drops it, and a future and a tuple kept a record until its delivery
        #: made the cyclic GC walk them, ~0.5 us a record); once settled, ``fns[i]`` is
        #: record ``i``'s or None (see StagedRun)
        self.delivery_at: list[int] | None = None
        self.fns: list[DeliveryCallback | None] | None = None
        #: the records' timestamps in milliseconds, once settled with delivery callbacks
        self.millis: list[int] | None = None
        #: every record has a delivery callback (set once settled)
        self.every = False

    def keep(self, i: int, fn: DeliveryCallback) -> None:
        """Keep record ``i``'s delivery callback ``fn`` (the caller holds the accumulator's
        lock for a sync producer's stage)."""
        fns = self.fns
        if fns is None:
            self.delivery_at = [i]
            self.fns = [fn]
        else:
            self.delivery_at.append(i)  # type: ignore[union-attr]
            fns.append(fn)

    def keep_many(self, i: int, n: int, fn: DeliveryCallback) -> None:
        """:meth:`keep` for records ``i`` to ``i + n - 1``, all with ``fn``."""
        if self.fns is None:
            self.delivery_at = []
            self.fns = []
        self.delivery_at.extend(range(i, i + n))  # type: ignore[union-attr]
        self.fns.extend(repeat(fn, n))

    def hand_deliveries(self, n: int, millis: list[int]) -> None:
        """Settling placed the chunk's ``n`` records (``millis``: each one's timestamp in
        milliseconds): give each batch holding some with a delivery callback a
        :class:`StagedRun` for them (one per run of the batch's records, not one entry a
        record). The caller holds the accumulator's lock."""
        at, fns = self.delivery_at, self.fns
        assert at is not None and fns is not None
        if len(at) != n:  # some records were sent without a callback
            aligned: list[DeliveryCallback | None] = [None] * n
            for i, fn in zip(at, fns, strict=True):
                aligned[i] = fn
            fns = aligned
        self.fns = fns
        self.delivery_at = None
        self.millis = millis
        every = self.every = len(at) == n
        if self.runs is not None:  # a bulk settle
            order, runs = self.runs
            for start, end, batch, first in runs:
                if every or any(map(fns.__getitem__, order[start:end])):
                    keep_delivery(batch, StagedRun(self, order, start, end, first))
        else:  # placed one by one (see _settle_each)
            batches, indexes = self.batches, self.indexes
            assert batches is not None and indexes is not None
            identity = range(n)
            for i in at:
                keep_delivery(batches[i], StagedRun(self, identity, i, i + 1, indexes[i]))

    def placed(self, i: int) -> tuple[ProducerBatch, int]:
        """Record ``i``'s batch and index there (settling the stage first if need be)."""
        batches = self.batches
        if batches is None:
            self.stage.acc.settle(self.stage)
            batches = self.batches
            assert batches is not None
        if batches is UNLISTED:
            batches = self.list_placements()
        assert self.indexes is not None
        return batches[i], self.indexes[i]

    def list_placements(self) -> list[ProducerBatch]:
        """Turn a bulk settle's ``runs`` into ``batches`` and ``indexes`` (on first need:
        most records' placements are never looked at one by one)."""
        assert self.runs is not None
        order, runs = self.runs
        n = len(order)
        batches: list[Any] = [None] * n
        indexes = [0] * n
        for start, end, batch, first in runs:
            for i in order[start:end]:
                batches[i] = batch
                indexes[i] = first
                first += 1
        # Readers on other threads check ``batches`` first: ``indexes`` must be in place.
        self.indexes = indexes
        self.batches = batches
        return batches


#: StagedChunk.batches of a bulk-settled chunk whose placements are not listed yet
UNLISTED: list[ProducerBatch] = []


class StagedRun:
    """Staged records that settling put next to each other into one batch, for their
    confluent-style delivery callbacks: positions ``start`` to ``end - 1`` of ``order``
    (its chunk's record indexes, in the order they were placed), the first at index
    ``first`` of the batch. Only records with a callback (``chunk.fns``) are reported."""

    __slots__ = ("chunk", "end", "first", "order", "start")

    def __init__(self, chunk: StagedChunk, order: Sequence[int], start: int, end: int,
                 first: int) -> None:
        self.chunk = chunk
        self.order = order
        self.start = start
        self.end = end
        self.first = first

    def deliver(self, err: BaseException | None, topic: str, partition: int, base: int,
                append_time: int) -> int:
        """Call the callbacks of the run's records (``base``: the batch's base offset, -1
        when it failed; ``append_time``: its LogAppendTime or -1). Returns how many ran.

        Raises:
            What a callback raises; the run then starts after that record, for the next
            call.
        """
        chunk = self.chunk
        fns, order, millis, sizes = chunk.fns, self.order, chunk.millis, chunk.sizes
        assert fns is not None and millis is not None and sizes is not None
        ksizes, vsizes = sizes
        start, end = self.start, self.end
        # The record at position j has offset ``offset + j``.
        offset = base + self.first - start
        j = start
        try:
            if base >= 0 and append_time < 0 and chunk.every:
                # The common case in fewer steps (this runs once per produced record).
                every = cast("list[DeliveryCallback]", fns)
                for j in range(start, end):
                    i = order[j]
                    every[i](err, _new_tuple(RecordMetadata, (
                        topic, partition, offset + j, millis[i], ksizes[i], vsizes[i])))
                return end - start
            ran = 0
            for j in range(start, end):
                i = order[j]
                fn = fns[i]
                if fn is not None:
                    ran += 1
                    fn(err, _new_tuple(RecordMetadata, (
                        topic, partition, offset + j if base >= 0 else -1,
                        append_time if append_time >= 0 else millis[i],
                        ksizes[i], vsizes[i])))
            return ran
        except BaseException:
            # A callback raised: the records after it are for the next call.
            self.first += j + 1 - start
            self.start = j + 1
            raise

    def records(self) -> Iterator[tuple[DeliveryCallback, int, int, int, int]]:
        """(callback, index in the batch, timestamp in milliseconds, key size, value size)
        of each of the run's records with a callback."""
        chunk = self.chunk
        fns, millis, sizes = chunk.fns, chunk.millis, chunk.sizes
        assert fns is not None and millis is not None and sizes is not None
        for j in range(self.start, self.end):
            i = self.order[j]
            fn = fns[i]
            if fn is not None:
                yield fn, self.first + j - self.start, millis[i], sizes[0][i], sizes[1][i]


def keep_delivery(batch: ProducerBatch, delivery: Delivery) -> None:
    """Keep a confluent-style delivery callback with ``batch``, in record order: (fn, the
    future) of a record appended alone, or a StagedRun. The caller holds the accumulator's
    lock."""
    if batch.deliveries is None:
        batch.deliveries = [delivery]
    else:
        batch.deliveries.append(delivery)


def run_callbacks(callbacks: list[Callback]) -> None:
    """Run ``add_done_callback`` callbacks in order, each in its own context (asyncio's
    futures run each in the context it was added in). One that raises is reported, as
    asyncio reports a raising callback, and the others still run."""
    for fn, fut, context in callbacks:
        try:
            if context is None:
                fn(fut)
            else:
                context.run(fn, fut)
        except Exception as exc:
            _report(fn, fut, exc)


def _report(fn: Any, fut: RecordFuture, exc: Exception) -> None:
    """Report a callback that raised: to the running loop's exception handler, as asyncio
    reports its futures' callbacks; logged when no loop runs (a concurrent.futures user)."""
    loop = asyncio._get_running_loop()
    if loop is None:
        log.error("a producer callback raised: %r", fn, exc_info=exc)
        return
    loop.call_exception_handler({"message": f"Exception in callback {fn!r}",
                                 "exception": exc, "future": fut})


def expired_error(batch: ProducerBatch, now: float,
                  cause: BaseException | None = None) -> DeliveryTimeoutError:
    """The error of a batch whose delivery.timeout.ms passed: its cause is the last error
    the batch met, else ``cause`` (what held the producer up, if anything)."""
    cause = batch.cause or cause
    return DeliveryTimeoutError(
        f"{batch.record_count} record(s) for {batch.topic}-{batch.partition} not delivered "
        f"within delivery.timeout.ms: {(now - batch.created) * 1000:.0f} ms since the batch "
        f"was created" + (f"; last error: {cause}" if cause is not None else ""), cause)

