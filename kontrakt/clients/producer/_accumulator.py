"""The record accumulator: per-partition batches shared by the callers and the I/O loop.

Like the Java client's RecordAccumulator, this is plain thread-safe code: callers (on any
thread, or on the event loop for the async producer) append records straight into the open
batch of a partition under one lock, and the sender (on the event loop) takes ready batches
out. Nothing crosses threads per record: the sender is woken once per batch at most.

Each batch carries its own completion state. A record's :class:`RecordFuture` is a small
handle (batch, index, timestamp) whose :class:`~kontrakt.RecordMetadata` is computed on
demand, so that sending a record costs no future, lock or event of its own.

Keyed records for the default partitioner first wait in their topic's :class:`KeyedStage`
(key, value and timestamp appended to lists), and are hashed and put into their partitions'
batches together, in send order (:meth:`RecordAccumulator.settle`): murmur2 of hundreds of
keys at once costs a fraction of hashing them one by one in Python, and a chunk whose keys
share a length and whose values share one is encoded a run of records at a time with slice
operations (:meth:`RecordAccumulator._settle_uniform`). A stage settles when it
holds a chunk's worth of records, when the sender finds it older than ``linger.ms``, before
any other record of its topic is appended, and whenever one of its records' futures is
looked at; so ordering, lingering and every future's behaviour stay as if each record had
gone straight into its batch.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from _thread import LockType, allocate_lock
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Generator, Sequence
from itertools import accumulate
from itertools import chain as _chain
from itertools import repeat as _repeat
from operator import add as _add
from operator import itemgetter
from typing import Any

from kontrakt._types import RecordMetadata
from kontrakt.clients.producer._partitioner import murmur2_partitions
from kontrakt.clients.producer._split import split_batch
from kontrakt.errors import DeliveryTimeoutError, IllegalStateError, KafkaTimeoutError
from kontrakt.protocol.records import (
    BATCH_HEADER_SIZE,
    CompressionType,
    RecordBatchBuilder,
    compress,
)
from kontrakt.protocol.records._batch import TRANSACTIONAL_MASK
from kontrakt.protocol.records._builder import encode_headers, frame_batch
from kontrakt.protocol.records._model import SMALL_LIMIT, VARINT_BYTES, encode_varint

__all__ = ["KeyedStage", "ProducerBatch", "RecordAccumulator", "RecordFuture", "StagedChunk",
           "keep_hook"]

log = logging.getLogger("kontrakt.producer")

Header = tuple[str, bytes | None]
DeliveryCallback = Callable[[BaseException | None, RecordMetadata], None]

_SMALL = SMALL_LIMIT
_new_tuple = tuple.__new__
_list_append = list.append
#: t * 1000, for bisecting seconds by milliseconds
_THOUSAND_TIMES: Callable[[float], float] = (1000.0).__mul__
#: runs an iterator to its end, keeping nothing
_exhaust: Callable[[Any], None] = deque(maxlen=0).extend
#: byte length of each small varint (a subscript is cheaper than a len() call)
_VARINT_SIZES = [len(b) for b in VARINT_BYTES]
#: the first offset delta whose varint takes two bytes
_TWO_BYTE_OFFSETS = _VARINT_SIZES.index(2)
#: upper bound of a record's varints, attributes byte and header count: added to its key and
#: value lengths for size checks, and charged to buffer.memory while a record is staged
RECORD_OVERHEAD = 21
#: bytes of records a stage gathers before settling (its chunk)
_STAGE_BYTES = 1 << 17
_STAGE_RECORDS = 2048
#: a settling chunk of at least this many records is encoded in bulk, a run of records at a
#: time (RecordAccumulator._settle_uniform when its keys share a length and its values
#: share one, else _settle_mixed); smaller chunks record by record (_settle_each)
_BULK_MIN = 32
#: record prefixes are kept for offset deltas below this, those whose varint takes at most
#: two bytes (records past it go one by one)
_PREFIX_COUNTS = SMALL_LIMIT
#: (key length, value length) pairs whose prefixes are kept
_PREFIX_SHAPES = 8
#: prefixes kept in all (~70 bytes each); past this the tables start over
_PREFIX_BUDGET = 1 << 16
#: timestamp deltas whose varint is one byte (the prefixes kept are for these)
_DELTAS = 64
#: a record's attributes (none) and timestamp delta, by delta below _DELTAS
_ATTRIBUTES_AND_DELTA = [b"\x00" + VARINT_BYTES[d] for d in range(_DELTAS)]

#: codecs whose batches a sync producer's handing-over caller helps compress (see
#: RecordAccumulator.claim_closed): their compressors give the GIL up and cost tens of us
#: or more a batch. Not lz4 (cramjam's frame compressor keeps the GIL, so nothing would run
#: beside it) nor snappy (a few us a block; helping measured no gain).
_HELPED_CODECS = frozenset({CompressionType.GZIP, CompressionType.ZSTD})
#: the longest the I/O thread waits for a helper to compress a batch before doing it itself
_HELP_WAIT = 1.0

#: returned by :meth:`RecordAccumulator.append` when ``abort_on_new_batch`` stops it
ABORTED: Any = object()
#: ``append(urgent=WAITER)``: urgent, and the caller blocks on the record next; it wakes the
#: sender itself right before blocking (``ProducerBatch.wait(timeout, wake=True)``), so that
#: the I/O thread does not wake only to wait for the GIL the caller still holds.
WAITER: Any = object()


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
        self.callbacks: list[tuple[Callable[[RecordFuture], Any], RecordFuture]] | None = None
        self.deliveries: list[tuple[DeliveryCallback, RecordFuture]] | None = None
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
            for fn, handle in callbacks:
                try:
                    fn(handle)
                except Exception:
                    log.exception("a producer callback raised")
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
        # One future per waiter (not one shared and shielded): cancelling one waiter leaves
        # the others alone, and resolution reaches each in one loop turn.
        fut = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = [fut]
        else:
            self._waiters.append(fut)
        await fut


class StagedChunk:
    """The records one settling of a :class:`KeyedStage` places: a staged record's future
    is (chunk, index, timestamp) until then, and reads its batch and offset delta here."""

    __slots__ = ("batches", "callbacks", "deliveries", "indexes", "runs", "sizes", "stage")

    def __init__(self, stage: KeyedStage) -> None:
        self.stage = stage
        #: the records' key and value lengths in send order, once settled: the lists the
        #: settling computes anyway, kept for their RecordMetadata (no cost per record)
        self.sizes: tuple[list[int], list[int]] | None = None
        #: each record's batch and index there, in send order; None until the chunk settles
        #: (_UNLISTED while only ``runs`` says where its records went)
        self.batches: list[ProducerBatch] | None = None
        self.indexes: list[int] | None = None
        #: a bulk settle's placements: (records in partition order, [(start, end, batch,
        #: index of the first), ...] over that order)
        self.runs: tuple[list[int], list[tuple[int, int, ProducerBatch, int]]] | None = None
        #: add_done_callback's callbacks of records not placed yet
        self.callbacks: list[tuple[Callable[[RecordFuture], Any], RecordFuture]] | None = None
        #: confluent-style delivery callbacks (a sync produce()) of the chunk's records
        self.deliveries: list[tuple[DeliveryCallback, RecordFuture]] | None = None

    def placed(self, i: int) -> tuple[ProducerBatch, int]:
        """Record ``i``'s batch and index there (settling the stage first if need be)."""
        batches = self.batches
        if batches is None:
            self.stage.acc.settle(self.stage)
            batches = self.batches
            assert batches is not None
        if batches is _UNLISTED:
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
_UNLISTED: list[ProducerBatch] = []


class KeyedStage:
    """One topic's keyed records waiting to be hashed to their partitions together.

    Appended to by the send fast paths (under the accumulator's lock for sync producers):
    ``keys``, ``values`` and ``stamps`` grow together; ``chunk`` is the handle their futures
    hold. Settled by :meth:`RecordAccumulator.settle_locked`.
    """

    __slots__ = ("acc", "chunk", "created", "keys", "limit", "queues", "stamps", "topic",
                 "values")

    def __init__(self, acc: RecordAccumulator, topic: str,
                 queues: list[deque[ProducerBatch]]) -> None:
        self.acc = acc
        self.topic = topic
        self.queues = queues
        self.keys: list[bytes] = []
        self.values: list[bytes] = []
        #: each record's time.time() when sent (seconds: a float is cheaper to get than an
        #: int of milliseconds; settling takes the milliseconds)
        self.stamps: list[float] = []
        self.chunk = StagedChunk(self)
        self.created = 0.0
        #: records to gather before settling, set from the first record's size
        self.limit = _STAGE_RECORDS

    @property
    def count(self) -> int:
        """The topic's partition count the stage places records by."""
        return len(self.queues)

    def started(self, size: int) -> None:
        """The first record went in (``size``: its key + value + overhead bytes): note the
        time (linger counts from it) and make sure the sender wakes by its deadline."""
        acc = self.acc
        self.created = now = time.monotonic()
        self.limit = min(_STAGE_RECORDS, _STAGE_BYTES // size + 1)
        if now + acc.linger < acc.sender_wake_at:
            acc.wakeup(False)


def keep_hook(holder: ProducerBatch | StagedChunk, fn: Any, fut: RecordFuture,
              delivery: bool) -> None:
    """Keep ``fn`` to run for ``fut``'s record with ``holder`` (its batch, or its staged
    chunk until that settles): a confluent-style delivery callback when ``delivery``, else
    an ``add_done_callback`` callback. The caller holds the accumulator's lock."""
    if delivery:
        if holder.deliveries is None:
            holder.deliveries = []
        holder.deliveries.append((fn, fut))
    else:
        if holder.callbacks is None:
            holder.callbacks = []
        holder.callbacks.append((fn, fut))


class _Cancelled:
    """A cancelled RecordFuture's head: done, and every read of the outcome raises."""

    __slots__ = ("message",)
    done = True

    def __init__(self, message: Any) -> None:
        self.message = message

    def placed(self, at: int) -> Any:
        raise asyncio.CancelledError(*(() if self.message is None else (self.message,)))


class _OnLoop:
    """A done callback that asyncio machinery (a Task, gather, wait) added from a running
    loop: it is run by that loop (``call_soon``), never inline in the producer's completion
    code, and from another thread (a sync producer's I/O thread) safely."""

    __slots__ = ("context", "fn", "loop", "threadsafe")

    def __init__(self, fn: Callable[..., Any], loop: asyncio.AbstractEventLoop,
                 context: Any, threadsafe: bool) -> None:
        self.fn = fn
        self.loop = loop
        self.context = context
        self.threadsafe = threadsafe

    def __call__(self, fut: RecordFuture) -> None:
        schedule = self.loop.call_soon_threadsafe if self.threadsafe else self.loop.call_soon
        try:
            schedule(self.fn, fut, context=self.context)
        except RuntimeError:  # the loop was closed meanwhile: nobody waits any more
            pass


class RecordFuture:
    """The future of one sent record: resolves to its :class:`~kontrakt.RecordMetadata`.

    Awaitable (async producers) and blocking via :meth:`result` (sync producers), with the
    ``concurrent.futures.Future`` methods ``done``, ``result``, ``exception``,
    ``add_done_callback``, ``cancel`` and ``cancelled``. It also speaks asyncio's future
    protocol (``asyncio.isfuture`` is true; ``get_loop``, ``remove_done_callback``), so
    ``asyncio.gather``, ``wait``, ``as_completed``, ``wait_for`` and ``shield`` take the
    futures as they are, without a Task per record. Resolved exactly once, including when
    the producer closes.

    Cancelling: a record cannot be taken back once sent. :meth:`cancel` on an async
    producer's pending future stops *this future's* waiting (it reports cancelled, and
    ``await`` raises ``CancelledError``, as asyncio's ``wait_for`` expects of a timed-out
    future); the record is still delivered and ``flush()`` still waits for it. A sync
    producer's futures are never cancelled (``cancel()`` returns False), as
    ``concurrent.futures`` futures that are running.
    """

    #: asyncio.isfuture() looks for this class attribute; the protocol's other half
    #: (``yield self`` from ``__await__``) is not used, so it is never set per instance.
    _asyncio_future_blocking = False

    # One is made per record, so it is made the cheapest way Python has: a slots class
    # without __init__, its slots set by the maker (new_future, or inlined on the send
    # fast paths). A tuple subclass costs ~45 ns more to make, a __init__ ~60 ns more.
    # _head: the record's batch, or its StagedChunk until the chunk settles; _at: its index
    # in the batch, or in the chunk; _timestamp: its timestamp, in milliseconds (an int),
    # or a staged record's time.time() (a float, see KeyedStage.stamps). _ksize / _vsize:
    # the key's and value's lengths (-1: None), set only when _head is a batch; a staged
    # record's are in its chunk's ``sizes``, so the staged send paths set nothing more.
    __slots__ = ("_at", "_head", "_ksize", "_timestamp", "_vsize")

    _head: Any  # ProducerBatch | StagedChunk, told apart by type() on the hot paths
    _at: int
    _timestamp: int | float
    _ksize: int
    _vsize: int

    def _sizes(self) -> tuple[int, int]:
        """(serialized key size, serialized value size); -1 for None."""
        head = self._head
        if type(head) is ProducerBatch:
            return self._ksize, self._vsize
        sizes = head.sizes
        if sizes is None:  # not settled yet
            head.placed(self._at)
            sizes = head.sizes
        return sizes[0][self._at], sizes[1][self._at]

    @property
    def _batch(self) -> ProducerBatch:
        b = self._head
        if type(b) is ProducerBatch:
            return b
        batch: ProducerBatch
        batch, index = b.placed(self._at)
        if type(b) is StagedChunk and not b.stage.acc.threaded:
            # An async producer's future is only read on its loop's thread: keep where the
            # record was placed, so that later reads (gather reads each future 3-4 times)
            # skip the chunk's lookup. A sync producer's I/O thread reads (_head, _at) as a
            # pair, so its futures keep pointing at their chunk. A batch-headed future
            # carries its sizes itself (see __slots__): taken from the chunk here.
            sizes = b.sizes
            assert sizes is not None  # placed() settled the chunk
            self._ksize = sizes[0][self._at]
            self._vsize = sizes[1][self._at]
            self._head = batch
            self._at = index
        return batch

    @property
    def _index(self) -> int:
        b = self._head
        index: int = self._at if type(b) is ProducerBatch else b.placed(self._at)[1]
        return index

    def __repr__(self) -> str:
        head = self._head
        if type(head) is _Cancelled:
            return "<RecordFuture cancelled>"
        if type(head) is StagedChunk and head.batches is None:
            return f"<RecordFuture {head.stage.topic} pending>"
        b = self._batch
        error = self.exception() if b.done else None
        state = ("pending" if not b.done else
                 f"failed: {error!r}" if error else f"offset {self.metadata().offset}")
        return f"<RecordFuture {b.topic}-{b.partition} {state}>"

    def done(self) -> bool:
        """True once the record was acknowledged or failed."""
        head = self._head
        if type(head) is StagedChunk:
            if head.batches is None:
                return False
            return self._batch.done
        return head.done  # type: ignore[no-any-return]

    def cancelled(self) -> bool:
        """True when :meth:`cancel` stopped this future's waiting."""
        return type(self._head) is _Cancelled

    def cancel(self, msg: Any = None) -> bool:
        """Stop waiting on this future (async producers; see the class docs).

        The record is not taken back: it is delivered (or fails) as if nothing happened,
        and ``flush()`` waits for it. Callbacks added to this future run now (on the loop),
        seeing it cancelled.

        Returns:
            True when the future was pending and belongs to an async producer; False when
            it is resolved or belongs to a sync producer.
        """
        head = self._head
        if type(head) is _Cancelled:
            return False
        acc = head.stage.acc if type(head) is StagedChunk else head.acc
        if acc.threaded:
            return False
        # An async producer's accumulator is only touched on its loop's thread: nothing
        # resolves or settles between these lines.
        if self.done():
            return False
        holder = head if type(head) is StagedChunk and head.batches is None else self._batch
        with acc.lock:
            mine = _take_callbacks(holder, self, None)
        self._head = _Cancelled(msg)
        for fn in mine:
            fn(self)
        return True

    def _make_cancelled_error(self) -> asyncio.CancelledError:
        # asyncio.gather asks a cancelled child for its error this way.
        head = self._head
        message = head.message if type(head) is _Cancelled else None
        return asyncio.CancelledError(*(() if message is None else (message,)))

    def get_loop(self) -> asyncio.AbstractEventLoop:
        """The running event loop (asyncio's future protocol).

        A record future belongs to no loop of its own: asyncio's functions ask for one only
        while running on a loop, which is where its callbacks are then run.

        Raises:
            RuntimeError: no event loop runs in this thread.
        """
        return asyncio.get_running_loop()

    def metadata(self) -> RecordMetadata:
        """Where the record landed (offset -1 with acks=0); only valid when done without
        error."""
        b = self._head
        if type(b) is ProducerBatch:
            index = self._at
        else:
            b, index = b.placed(self._at)
        if b.base_offset < 0 and b.split is not None:
            b, index = b.part(index)
        offset = b.base_offset + index if b.base_offset >= 0 else -1
        ts = b.log_append_time if b.log_append_time >= 0 else millis(self._timestamp)
        return _new_tuple(RecordMetadata, (b.topic, b.partition, offset, ts, *self._sizes()))

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """The record's metadata, blocking (sync producers) until it is resolved.

        Args:
            timeout: seconds to wait; None waits until delivery succeeds or fails
                (bounded by ``delivery.timeout.ms``).

        Raises:
            ProduceError / RecordTooLargeError / DeliveryTimeoutError: delivery failed
                (DeliveryTimeoutError: ``delivery.timeout.ms`` ran out; it is also a
                KafkaTimeoutError and a ProduceError).
            KafkaTimeoutError: not resolved within ``timeout``.
            IllegalStateError: called unresolved on an async producer's loop.
        """
        b = self._batch
        if not b.done:
            b.wait(timeout)
        if b.error is not None:
            if b.split is None:
                raise b.error
            self._raise_part_error()
        return self.metadata()

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """kafka-python's name for :meth:`result` (``producer.send(...).get(timeout=10)``)."""
        return self.result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The delivery error, or None on success; waits like :meth:`result`."""
        b = self._batch
        if not b.done:
            b.wait(timeout)
        if b.error is not None and b.split is not None:
            return self._part().error
        return b.error

    def _part(self) -> ProducerBatch:
        """The batch whose outcome is the record's (see ProducerBatch.part)."""
        head = self._head
        b, index = (head, self._at) if type(head) is ProducerBatch else head.placed(self._at)
        return b.part(index)[0]

    def _raise_part_error(self) -> None:
        """Raise the error of the record's part of a split batch, if its part failed."""
        error = self._part().error
        if error is not None:
            raise error

    def add_done_callback(self, fn: Callable[[RecordFuture], Any], *,
                          context: Any = None) -> None:
        """Call ``fn(self)`` once the record is resolved (at once if it already is, or, when
        added on a running event loop, on that loop's next turn, as asyncio's futures do).

        Callbacks run on the producer's event loop thread, in send order per partition; they
        must not block. Added from a coroutine on another loop (a sync producer's future
        in asyncio code), or with a ``context`` (asyncio's Tasks), they are run by the
        running loop instead, as asyncio's futures run theirs. A sync producer's
        ``produce(on_delivery=...)`` instead runs its callbacks on the caller's thread in
        ``poll()``/``flush()``.
        """
        head = self._head
        if type(head) is _Cancelled:
            loop = asyncio._get_running_loop()
            if loop is not None:
                loop.call_soon(fn, self, context=context)
            else:
                fn(self)
            return
        acc = head.stage.acc if type(head) is StagedChunk else head.acc
        loop = asyncio._get_running_loop()
        if loop is not None and (acc.threaded or context is not None):
            fn = _OnLoop(fn, loop, context, acc.threaded)
        if type(head) is StagedChunk:
            with head.stage.acc.lock:
                if head.batches is None:
                    # Kept with the chunk until it settles: adding a callback to each record
                    # as it is sent must not settle the stage record by record.
                    keep_hook(head, fn, self, False)
                    return
        b = self._batch
        with b.acc.lock:
            if not b.done:
                keep_hook(b, fn, self, False)
                return
        if loop is not None and type(fn) is not _OnLoop:
            # Resolved already, and added on a loop: run by the loop, as asyncio's futures
            # do (asyncio's as_completed and wait add callbacks while iterating their sets).
            _run_soon(loop, fn, self)
            return
        fn(self)

    def remove_done_callback(self, fn: Callable[[RecordFuture], Any]) -> int:
        """Forget the callbacks ``fn`` that were added and have not run (asyncio's future
        protocol: ``wait`` and ``as_completed`` call it when they time out).

        Returns:
            How many were removed.
        """
        head = self._head
        if type(head) is _Cancelled:
            return 0
        if type(head) is StagedChunk and head.batches is None:
            with head.stage.acc.lock:
                if head.batches is None:
                    return len(_take_callbacks(head, self, fn))
        # Settled (maybe just now, its hooks moved on to the record's batch).
        b = self._batch
        with b.acc.lock:
            return 0 if b.done else len(_take_callbacks(b, self, fn))

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        b = self._batch
        if not b.done:
            yield from b.wait_async().__await__()
        if b.error is not None:
            if b.split is None:
                raise b.error
            self._raise_part_error()
        return self.metadata()


class _Soon(threading.local):
    """Callbacks of resolved futures added on this thread's running loop, run together on
    its next turn: one ``call_soon`` a turn, not one a callback (gathering 200k futures adds
    most of their callbacks after their records were acknowledged)."""

    pending: list[tuple[Callable[..., Any], RecordFuture]] | None = None
    #: the loop ``pending`` will run on (a list left by a loop that closed first is not
    #: added to)
    loop: asyncio.AbstractEventLoop | None = None


_soon = _Soon()


def _run_soon(loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], fut: RecordFuture
              ) -> None:
    pending = _soon.pending
    if pending is None or _soon.loop is not loop:
        pending = _soon.pending = []
        _soon.loop = loop
        loop.call_soon(_run_pending, pending)
    pending.append((fn, fut))


def _run_pending(pending: list[tuple[Callable[..., Any], RecordFuture]]) -> None:
    if _soon.pending is pending:
        _soon.pending = None
    for fn, fut in pending:
        try:
            fn(fut)
        except Exception:
            log.exception("a producer callback raised")


def _take_callbacks(holder: ProducerBatch | StagedChunk, fut: RecordFuture,
                    fn: Callable[..., Any] | None) -> list[Callable[..., Any]]:
    """Take ``fut``'s done callbacks (those that are ``fn``, or all when None) out of
    ``holder`` and return them; the caller holds the accumulator's lock."""
    kept = holder.callbacks
    if not kept:
        return []
    taken: list[Callable[..., Any]] = []
    rest = []
    for entry in kept:
        cb, owner = entry
        if owner is fut and (fn is None or cb is fn
                             or (type(cb) is _OnLoop and cb.fn is fn)):
            taken.append(cb)
        else:
            rest.append(entry)
    holder.callbacks = rest or None
    return taken


def new_future(head: ProducerBatch | StagedChunk, at: int, timestamp: int | float,
               ksize: int = -1, vsize: int = -1) -> RecordFuture:
    """A record's future: index ``at`` of batch (or staged chunk) ``head``; ``ksize`` /
    ``vsize`` its key's and value's lengths (-1: None or not known)."""
    fut = RecordFuture()
    fut._head = head
    fut._at = at
    fut._timestamp = timestamp
    fut._ksize = ksize
    fut._vsize = vsize
    return fut


def millis(timestamp: int | float) -> int:
    """A RecordFuture's ``_timestamp`` in milliseconds."""
    return int(timestamp * 1000) if type(timestamp) is float else int(timestamp)


def _millisecond_segments(stamps: list[float]) -> tuple[list[int], list[int]]:
    """Where the milliseconds of ``stamps`` (time.time() seconds, non-decreasing) change:
    (bounds, millis), the records before bounds[0] sent in millis[0], and so on."""
    # int(t * 1000) >= ms exactly when t * 1000 >= ms, so bisecting on t * 1000 finds where
    # each millisecond starts.
    n = len(stamps)
    bounds: list[int] = []
    millis = [int(stamps[0] * 1000)]
    last = int(stamps[-1] * 1000)
    while millis[-1] != last:
        at = bisect_left(stamps, millis[-1] + 1, bounds[-1] if bounds else 0, n,
                         key=_THOUSAND_TIMES)  # type: ignore[arg-type]
        bounds.append(at)
        millis.append(int(stamps[at] * 1000))
    return bounds, millis


def _by_partition(partitions: list[int], count: int) -> list[list[int]]:
    """Each of ``count`` partitions' record indexes, in send order."""
    buckets: list[list[int]] = [[] for _ in range(count)]
    # list.append mapped over (the record's partition's bucket, index): the loop runs in C.
    _exhaust(map(_list_append, map(buckets.__getitem__, partitions), range(len(partitions))))
    return buckets


#: a bulk settle's run writer (see RecordAccumulator._settle_runs)
_RunWriter = Callable[[Any, ProducerBatch, int, int, int, int], tuple[int, int]]
#: one record's (key length varint, key, value length varint, value, rest) for _add_locked
_OneRecord = Callable[[Any, int], tuple[bytes, bytes, bytes, bytes, int]]


def _gather(idx: list[int], *columns: list[Any]) -> list[tuple[Any, ...]]:
    """The items at ``idx`` of each column, as tuples."""
    if len(idx) > 1:
        pick = itemgetter(*idx)
        return [pick(c) for c in columns]
    i = idx[0]  # itemgetter of one index gives the item, not a tuple
    return [(c[i],) for c in columns]


def _grow_prefixes(prefixes: list[bytes], sizes: list[int], delta: int, upto: int,
                   kb: bytes, rest: int) -> None:
    """Extend ``prefixes`` (of timestamp delta ``delta``) to offset delta ``upto - 1``, and
    ``sizes``, their running total length, with them. A prefix is a record's bytes before
    its key -- length, attributes, the two deltas and the key length ``kb`` -- for records
    whose bytes after the two deltas number ``rest``; it is kept after a zero byte, the
    header count of the record before it (see _settle_uniform), which ``sizes`` leaves
    out."""
    tb = VARINT_BYTES[delta]
    # The offset deltas of one varint length give entries of one length: each such range is
    # built by a map and its sizes by a range (~80 ns an entry against ~340 one by one; a
    # new producer grows ~8-10k entries in its first 200k records). Offset deltas stay below
    # _PREFIX_COUNTS and bodies below the stage limit, so every varint is in the table.
    for lo, hi in ((len(prefixes), min(upto, _TWO_BYTE_OFFSETS)),
                   (max(len(prefixes), _TWO_BYTE_OFFSETS), upto)):
        if lo >= hi:
            continue
        offsets = VARINT_BYTES[lo:hi]
        body = 1 + len(tb) + len(offsets[0]) + rest
        head = b"\x00" + VARINT_BYTES[body] + b"\x00" + tb
        prefixes += map(b"".join, zip(_repeat(head), offsets, _repeat(kb)))
        size = len(head) - 1 + len(offsets[0]) + len(kb)  # less the leading header count
        total = sizes[-1]
        sizes += range(total + size, total + size * (hi - lo) + 1, size)


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
        self.used = 0
        self.queues: dict[tuple[str, int], deque[ProducerBatch]] = {}
        #: each topic's staged keyed records (see KeyedStage)
        self.stages: dict[str, KeyedStage] = {}
        self.incomplete: set[ProducerBatch] = set()
        #: record prefixes for bulk settling, by (key length, value length) (see
        #: _prefix_table)
        self.prefixes: dict[tuple[int, int], list[tuple[list[bytes], list[int]]]] = {}
        self.prefix_entries = 0
        self.sender_wake_at = float("inf")
        #: set when an append found its partition's batch full (async senders then yield)
        self.filled = False
        self.flushing = 0
        self.closed = False
        self.on_complete: Callable[[ProducerBatch], None] | None = None
        self.on_memory: Callable[[], None] | None = None
        self.deliver: Callable[[ProducerBatch], None] = lambda b: None

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
        # The record is encoded right here, into the partition's open batch (v2 record
        # layout; see kontrakt.protocol.records). Offsets deltas are the record's index in
        # the batch.
        small = VARINT_BYTES
        if key is None:
            kb = b"\x01"
            klen = 0
            ksize = -1
            key = b""
        else:
            ksize = klen = len(key)
            kb = small[klen] if klen < _SMALL else encode_varint(klen)
        if value is None:
            vb = b"\x01"
            vlen = 0
            vsize = -1
            value = b""
        else:
            vsize = vlen = len(value)
            vb = small[vlen] if vlen < _SMALL else encode_varint(vlen)
        hb = encode_headers(headers) if headers else b"\x00"
        rest = len(kb) + klen + len(vb) + vlen + len(hb)
        tp = (topic, partition)
        with self.lock:
            if self.closed:
                raise IllegalStateError("the producer is closed")
            if self.used + size > self.buffer_memory and self.used > 0:
                return None
            dq = self.queues.get(tp)
            if dq is None:
                dq = self.queues[tp] = deque()
            placed = self._add_locked(topic, partition, dq, timestamp, kb, key, vb, value, hb,
                                      rest, None, not abort_on_new_batch)
            if placed is None:
                return ABORTED
            batch, index = placed
            fut = new_future(batch, index, timestamp, ksize, vsize)
            if delivery is not None:
                keep_hook(batch, delivery, fut, True)
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

    def _add_locked(self, topic: str, partition: int, dq: deque[ProducerBatch],
                    timestamp: int, kb: bytes, key: bytes, vb: bytes, value: bytes,
                    hb: bytes, rest: int, created: float | None,
                    may_open: bool = True) -> tuple[ProducerBatch, int] | None:
        """Encode a record (its length prefixes ``kb``/``vb``, headers ``hb``; ``rest`` their
        and the data's total length) into ``dq``'s open batch, or into a new batch (made at
        ``created``, default now) if there is none or it is full; the caller holds the lock.

        Returns:
            (batch, index in it); None when a new batch was needed and ``may_open`` is
            False.
        """
        small = VARINT_BYTES
        if dq:
            batch = dq[-1]
            if not batch.sealed:
                count = batch.count
                ts_delta = timestamp - batch.base_timestamp
                tsb = small[ts_delta] if 0 <= ts_delta < _SMALL else encode_varint(ts_delta)
                odb = small[count] if count < _SMALL else encode_varint(count)
                body_len = 1 + len(tsb) + len(odb) + rest
                lb = small[body_len] if body_len < _SMALL else encode_varint(body_len)
                added = len(lb) + body_len
                new_size = batch.size + added
                if new_size <= self.batch_size:
                    batch.parts += (lb, b"\x00", tsb, odb, kb, key, vb, value, hb)
                    batch.size = new_size
                    batch.count = count + 1
                    if timestamp > batch.max_timestamp:
                        batch.max_timestamp = timestamp
                    self.used += added
                    return batch, count
        if not may_open:
            return None
        batch = ProducerBatch(self, topic, partition, None,
                              time.monotonic() if created is None else created)
        body_len = 3 + rest  # attributes, ts delta 0, offset delta 0
        lb = small[body_len] if body_len < _SMALL else encode_varint(body_len)
        batch.parts += (lb, b"\x00\x00\x00", kb, key, vb, value, hb)
        batch.size += len(lb) + body_len
        batch.count = 1
        batch.base_timestamp = batch.max_timestamp = timestamp
        self.used += len(lb) + body_len
        dq.append(batch)
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
                wake = self.settle_locked(stage)
                stage.queues = queues
        if wake is not None:
            self.wakeup(wake, filled=wake)
        return stage

    def settle(self, stage: KeyedStage) -> None:
        """Place ``stage``'s records into their batches now (takes the lock)."""
        with self.lock:
            wake = self.settle_locked(stage)
        if wake is not None:
            self.wakeup(wake, filled=wake)

    def settle_all_locked(self) -> None:
        """Place every stage's records (the caller holds the lock and wakes the sender)."""
        for stage in self.stages.values():
            if stage.keys:
                self.settle_locked(stage)

    def settle_locked(self, stage: KeyedStage) -> bool | None:
        """Hash ``stage``'s records to their partitions in one go and encode them into
        the partitions' batches, in send order; the caller holds the lock.

        Returns:
            None, or how to wake the sender once the lock is released: True when a batch
            filled up, False when a new batch's linger ends before the sender's next pass.
        """
        keys = stage.keys
        n = len(keys)
        if not n:
            return None
        values, stamps, chunk = stage.values, stage.stamps, stage.chunk
        stage.keys = []
        stage.values = []
        stage.stamps = []
        stage.chunk = StagedChunk(stage)
        key_lengths = [*map(len, keys)]
        value_lengths = [*map(len, values)]
        chunk.sizes = (key_lengths, value_lengths)
        # The records' reservations give way to their encoded sizes (added below).
        self.used -= sum(key_lengths) + sum(value_lengths) + RECORD_OVERHEAD * n
        klen = key_lengths[0]
        vlen = value_lengths[0]
        partitions = murmur2_partitions(keys, stage.count, key_lengths)
        # In bulk when the clock did not step back while the chunk was staged (sorted() of
        # sorted floats is one pass; == compares the same objects).
        if n < _BULK_MIN or sorted(stamps) != stamps:
            opened, full = self._settle_each(stage, chunk, partitions, keys, values, stamps)
        elif key_lengths.count(klen) == n and value_lengths.count(vlen) == n:
            opened, full = self._settle_uniform(stage, chunk, partitions, keys, values, stamps,
                                                klen, vlen)
        else:
            opened, full = self._settle_mixed(stage, chunk, partitions, keys, values, stamps,
                                              key_lengths, value_lengths)
        if chunk.batches is _UNLISTED and (chunk.callbacks or chunk.deliveries):
            chunk.list_placements()
        batches = chunk.batches
        assert batches is not None
        # Hooks kept while the records were staged move to the records' batches.
        for fn, fut in chunk.callbacks or ():
            keep_hook(batches[fut._at], fn, fut, False)
        for cb, fut in chunk.deliveries or ():
            keep_hook(batches[fut._at], cb, fut, True)
        chunk.callbacks = chunk.deliveries = None
        if full:
            self.filled = True
            return True
        if opened and stage.created + self.linger < self.sender_wake_at:
            return False
        return None

    def _settle_each(self, stage: KeyedStage, chunk: StagedChunk, partitions: list[int],
                     keys: list[bytes], values: list[bytes], stamps: list[float]
                     ) -> tuple[bool, bool]:
        """Encode a chunk's records one by one, in send order (settle_locked's general
        case). Returns (a batch was opened, a batch filled up)."""
        batches: list[ProducerBatch] = []
        indexes: list[int] = []
        add_batch = batches.append
        add_index = indexes.append
        queues = stage.queues
        small = VARINT_BYTES
        sizes = _VARINT_SIZES
        batch_size = self.batch_size
        used = 0
        opened = full = False
        # The same encoding as _add_locked, inlined since it runs per record. Staged keys
        # and values are short enough (see AsyncProducer.send) that their lengths and the
        # record's length are in the varint table.
        for p, key, value, sent in zip(partitions, keys, values, stamps, strict=True):
            ts = int(sent * 1000)
            dq = queues[p]
            if dq:
                batch = dq[-1]
                count = batch.count
                delta = ts - batch.base_timestamp
                if not batch.sealed and -1 < delta < _SMALL and count < _SMALL:
                    klen = len(key)
                    vlen = len(value)
                    body = sizes[delta] + sizes[count] + sizes[klen] + sizes[vlen] + klen + \
                        vlen + 2
                    added = sizes[body] + body
                    new_size = batch.size + added
                    if new_size <= batch_size:
                        batch.parts += (small[body], b"\x00", small[delta], small[count],
                                        small[klen], key, small[vlen], value, b"\x00")
                        batch.size = new_size
                        batch.count = count + 1
                        if ts > batch.max_timestamp:
                            batch.max_timestamp = ts
                        used += added
                        add_batch(batch)
                        add_index(count)
                        continue
            klen = len(key)
            vlen = len(value)
            placed = self._add_locked(stage.topic, p, dq, ts, small[klen], key, small[vlen],
                                      value, b"\x00", sizes[klen] + klen + sizes[vlen] + vlen + 1,
                                      stage.created)
            assert placed is not None
            add_batch(placed[0])
            add_index(placed[1])
            if not placed[1]:
                opened = True
                if len(dq) > 1:
                    full = True
        self.used += used
        chunk.indexes = indexes
        chunk.batches = batches
        return opened, full

    def _settle_uniform(self, stage: KeyedStage, chunk: StagedChunk, partitions: list[int],
                        keys: list[bytes], values: list[bytes], stamps: list[float],
                        klen: int, vlen: int) -> tuple[bool, bool]:
        """Encode a chunk whose keys are all ``klen`` bytes long and values all ``vlen``,
        a run of records at a time (settle_locked's common case; see :meth:`_settle_runs`).

        Such records' bytes before their keys depend only on the timestamp and offset
        deltas, so they and their sizes are looked up (``prefixes``, each after the header
        count of the record before it: four parts a record to join, not five), and a run
        is written with four slice assignments. A run stops at offset delta
        _PREFIX_COUNTS.

        Returns:
            (a batch was opened, a batch filled up).
        """
        n = len(partitions)
        kb = VARINT_BYTES[klen]
        vb = VARINT_BYTES[vlen]
        length_bytes = [vb] * n  # each value's length varint
        # A record's bytes after its prefix, and after its two deltas (see _add_locked).
        tail = klen + len(vb) + vlen + 1
        rest = len(kb) + tail
        # The largest record a run can hold: one-byte timestamp delta, an offset delta below
        # _PREFIX_COUNTS (two bytes at most).
        body = 1 + 1 + 2 + rest
        largest = len(encode_varint(body)) + body
        table = self._prefix_table(klen, vlen)
        batch_size = self.batch_size

        def gather(idx: list[int]) -> Any:
            return _gather(idx, keys, values)

        def write(picked: Any, batch: ProducerBatch, count: int, delta: int, pos: int,
                  end: int) -> tuple[int, int]:
            k = min(end - pos, (batch_size - batch.size) // largest, _PREFIX_COUNTS - count)
            if k <= 0:
                return 0, 0
            p_keys, p_values = picked
            prefixes, sizes = table[delta]
            upto = count + k
            if len(prefixes) < upto:
                self.prefix_entries += upto - len(prefixes)
                _grow_prefixes(prefixes, sizes, delta, upto, kb, rest)
            # prefix, key, value length, value; the next record's prefix begins with this
            # one's header count, and the run's last count is a part of its own.
            parts: list[bytes] = [b""] * (4 * k + 1)
            parts[0] = prefixes[count][1:]
            parts[4:4 * k:4] = prefixes[count + 1:upto]
            parts[4 * k] = b"\x00"
            parts[1::4] = p_keys[pos:pos + k]
            parts[2::4] = length_bytes[:k]
            parts[3::4] = p_values[pos:pos + k]
            # Joined now, while the run's keys are in cache (the settle just hashed them):
            # the I/O thread joining a batch's thousands of parts at its first encode
            # misses the cache on each, and holds the GIL meanwhile (~100 us a 128 KiB
            # batch against ~30 here).
            batch.parts.append(b"".join(parts))
            return k, sizes[upto] - sizes[count] + tail * k

        def one(picked: Any, pos: int) -> tuple[bytes, bytes, bytes, bytes, int]:
            return kb, picked[0][pos], vb, picked[1][pos], rest

        return self._settle_runs(stage, chunk, partitions, stamps, gather, write, one)

    def _settle_mixed(self, stage: KeyedStage, chunk: StagedChunk, partitions: list[int],
                      keys: list[bytes], values: list[bytes], stamps: list[float],
                      key_lengths: list[int], value_lengths: list[int]) -> tuple[bool, bool]:
        """Encode a chunk of records of different sizes a run at a time (see
        :meth:`_settle_runs`).

        A run's offset deltas take varints of one length; its records' lengths, length
        varints and sizes are computed for the whole run by maps, and as many as fit the
        open batch (bisecting their running sizes) are written with eight slice
        assignments.

        Returns:
            (a batch was opened, a batch filled up).
        """
        small = VARINT_BYTES
        sizes = _VARINT_SIZES
        varint = small.__getitem__
        size_of = sizes.__getitem__
        n = len(partitions)
        header_counts = [b"\x00"] * n
        # Keys often share a length (ids) where values do not: then their part is a constant.
        klen = key_lengths[0]
        one_key_length = key_lengths.count(klen) == n
        key_varints = [small[klen]] * n
        batch_size = self.batch_size

        def gather(idx: list[int]) -> Any:
            p_keys, p_values, p_vlens = _gather(idx, keys, values, value_lengths)
            p_vb = [*map(varint, p_vlens)]
            # Each record's key and value with their length varints (_add_locked's rest
            # less the header count); its body is that plus attributes, the two deltas and
            # the header count.
            p_rest = [*map(_add, p_vlens, map(size_of, p_vlens))]
            if one_key_length:
                p_kb = key_varints
                p_rest = [*map(_add, p_rest, _repeat(klen + sizes[klen]))]
            else:
                (p_klens,) = _gather(idx, key_lengths)
                p_kb = [*map(varint, p_klens)]
                p_rest = [*map(_add, p_rest, map(_add, p_klens, map(size_of, p_klens)))]
            return p_keys, p_values, p_kb, p_vb, p_rest

        def write(picked: Any, batch: ProducerBatch, count: int, delta: int, pos: int,
                  end: int) -> tuple[int, int]:
            # Offset deltas of one varint length: below 64, or below 8192.
            k = min(end, pos + (64 if count < 64 else SMALL_LIMIT) - count) - pos
            if k <= 0:
                return 0, 0
            p_keys, p_values, p_kb, p_vb, p_rest = picked
            bodies = [*map(_add, p_rest[pos:pos + k], _repeat(3 + sizes[count]))]
            lengths = [*map(varint, bodies)]
            added = sum(bodies) + sum(map(len, lengths))
            room = batch_size - batch.size
            if added > room:  # the batch fills up: the records that fit
                totals = [*accumulate(map(_add, bodies, map(len, lengths)))]
                k = bisect_right(totals, room)
                if not k:
                    return 0, 0
                added = totals[k - 1]
            upto = count + k
            parts: list[bytes] = [b""] * (8 * k)
            parts[0::8] = lengths[:k]
            parts[1::8] = [_ATTRIBUTES_AND_DELTA[delta]] * k
            parts[2::8] = small[count:upto]
            parts[3::8] = p_kb[pos:pos + k]
            parts[4::8] = p_keys[pos:pos + k]
            parts[5::8] = p_vb[pos:pos + k]
            parts[6::8] = p_values[pos:pos + k]
            parts[7::8] = header_counts[:k]
            batch.parts.append(b"".join(parts))  # now, in cache (see _settle_uniform)
            return k, added

        def one(picked: Any, pos: int) -> tuple[bytes, bytes, bytes, bytes, int]:
            p_keys, p_values, p_kb, p_vb, p_rest = picked
            return p_kb[pos], p_keys[pos], p_vb[pos], p_values[pos], p_rest[pos] + 1

        return self._settle_runs(stage, chunk, partitions, stamps, gather, write, one)

    def _settle_runs(self, stage: KeyedStage, chunk: StagedChunk, partitions: list[int],
                     stamps: list[float], gather: Callable[[list[int]], Any],
                     write: _RunWriter, one: _OneRecord) -> tuple[bool, bool]:
        """The bulk settles' common part: the same bytes as :meth:`_settle_each`, with a
        fraction of its per-record Python.

        The chunk's records are gathered by partition (each partition's in send order) and
        cut where their millisecond changes; ``gather(indexes)`` picks what the other two
        need of one partition's records. Each run of a partition's records with one
        timestamp that its open batch takes is written by ``write(picked, batch, offset
        delta, timestamp delta, start, end)``, which returns how many records it wrote and
        their bytes; what it does not take -- a batch's last records, a new batch's first,
        a timestamp delta past one varint byte -- goes one record at a time through
        _add_locked, ``one(picked, position)`` giving its parts. Where each record went is
        kept as runs and listed only when someone asks (StagedChunk.placed).

        Returns:
            (a batch was opened, a batch filled up).
        """
        bounds, millis = _millisecond_segments(stamps)
        ts = millis[0]
        buckets = _by_partition(partitions, stage.count)
        queues = stage.queues
        topic = stage.topic
        created = stage.created
        runs: list[tuple[int, int, ProducerBatch, int]] = []
        used = 0
        opened = full = False
        start = 0
        for p, idx in enumerate(buckets):
            m = len(idx)
            if not m:
                continue
            picked = gather(idx)
            dq = queues[p]
            pos = 0
            while pos < m:
                end = m
                if bounds:
                    # This record's millisecond, and where in idx the next one starts.
                    segment = bisect_right(bounds, idx[pos])
                    ts = millis[segment]
                    if segment < len(bounds):
                        end = bisect_left(idx, bounds[segment], pos, m)
                if dq:
                    batch = dq[-1]
                    count = batch.count
                    delta = ts - batch.base_timestamp
                    if -1 < delta < _DELTAS and not batch.sealed:
                        k, added = write(picked, batch, count, delta, pos, end)
                        if k:
                            batch.size += added
                            batch.count = count + k
                            if ts > batch.max_timestamp:
                                batch.max_timestamp = ts
                            used += added
                            runs.append((start + pos, start + pos + k, batch, count))
                            pos += k
                            continue
                kb, key, vb, value, rest = one(picked, pos)
                placed = self._add_locked(topic, p, dq, ts, kb, key, vb, value, b"\x00", rest,
                                          created)
                assert placed is not None
                batch, index = placed
                runs.append((start + pos, start + pos + 1, batch, index))
                if not index:
                    opened = True
                    if len(dq) > 1:
                        full = True
                pos += 1
            start += m
        self.used += used
        chunk.runs = ([*_chain(*buckets)], runs)
        chunk.batches = _UNLISTED
        return opened, full

    def _prefix_table(self, klen: int, vlen: int) -> list[tuple[list[bytes], list[int]]]:
        """The prefixes of records with ``klen``-byte keys and ``vlen``-byte values: for
        each timestamp delta, the prefixes by offset delta and their running total sizes;
        made on first use, grown as offset deltas are reached (see _grow_prefixes)."""
        prefixes = self.prefixes
        if self.prefix_entries > _PREFIX_BUDGET:
            # Bounded memory: rows only grow to the deltas batches reach, but many shapes or
            # timestamp deltas could add up.
            prefixes.clear()
        table = prefixes.get((klen, vlen))
        if table is None:
            if len(prefixes) >= _PREFIX_SHAPES:
                prefixes.clear()
            if not prefixes:
                self.prefix_entries = 0
            table = prefixes[(klen, vlen)] = [([], [0]) for _ in range(_DELTAS)]
        return table

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
            dq.append(batch)
            self.incomplete.add(batch)
        self.wakeup(True)
        return batch

    def release(self, size: int) -> None:
        """Give back buffer memory (caller holds ``lock``)."""
        self.used -= size
        if self.threaded:
            self.memory_freed.notify_all()
        if self.on_memory is not None:
            self.on_memory()

    def reenqueue(self, batch: ProducerBatch) -> None:
        """Put a batch that must be resent back at the front of its queue, in sequence
        order behind any other resends (so per-partition order holds)."""
        with self.lock:
            self._reenqueue_locked(batch)

    def _reenqueue_locked(self, batch: ProducerBatch) -> None:
        dq = self.queues.setdefault((batch.topic, batch.partition), deque())
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
            for fn, fut in deliveries or ():
                head = fut._head
                index = fut._at if type(head) is ProducerBatch else head.placed(fut._at)[1]
                part, at = batch.part(index)
                keep_hook(part, fn, new_future(part, at, fut._timestamp, *fut._sizes()), True)
            # In order: sequence order, or (without sequences) each put at the front.
            for part in parts if batch.base_sequence >= 0 else parts[::-1]:
                self._reenqueue_locked(part)
            batch.parts = []
            batch.blob = batch.packed = None
        return parts

    def expire(self, now: float) -> list[ProducerBatch]:
        """Take out queued batches whose delivery timeout passed (oldest first per queue)."""
        out = []
        with self.lock:
            for dq in self.queues.values():
                while dq and dq[0].deadline <= now:
                    b = dq.popleft()
                    b.sealed = True
                    out.append(b)
        return out

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


def expired_error(batch: ProducerBatch, now: float,
                  cause: BaseException | None = None) -> DeliveryTimeoutError:
    """The error of a batch whose delivery.timeout.ms passed: its cause is the last error
    the batch met, else ``cause`` (what held the producer up, if anything)."""
    cause = batch.cause or cause
    return DeliveryTimeoutError(
        f"{batch.record_count} record(s) for {batch.topic}-{batch.partition} not delivered "
        f"within delivery.timeout.ms: {(now - batch.created) * 1000:.0f} ms since the batch "
        f"was created" + (f"; last error: {cause}" if cause is not None else ""), cause)
