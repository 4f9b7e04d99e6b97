"""Staging: records wait in their topic's stage and are placed into batches together.

Keyed records for the default partitioner first wait in their topic's :class:`KeyedStage`
(key, value and send time appended to lists, :meth:`KeyedStage.offer`), and are hashed and
put into their partitions' batches together, in send order (:func:`settle_locked`): murmur2
of hundreds of keys at once costs a fraction of hashing them one by one in Python, and a
chunk of records is encoded a run of records at a time (the run writers of ``_records.py``).
Records without a key wait the same way (:meth:`KeyedStage.offer_keyless`) and go into the
sticky partition's batches a run at a time (KIP-480: a new batch there moves the sticky
partition on first). A stage holds records of one kind at a time. It settles when it holds a
chunk's worth of records, when the sender finds it older than ``linger.ms``, before any other
record of its topic is appended (a record of the other kind too), and whenever one of its
records' futures is looked at; so ordering, lingering and every future's behaviour stay as if
each record had gone straight into its batch.
"""

from __future__ import annotations

import time
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable
from itertools import chain as _chain
from itertools import repeat
from time import time as _time
from typing import TYPE_CHECKING, Any, cast

from kontrakt.clients.producer._batch import (
    UNLISTED,
    DeliveryCallback,
    ProducerBatch,
    StagedChunk,
)
from kontrakt.clients.producer._future import RecordFuture
from kontrakt.clients.producer._partitioner import murmur2_partitions
from kontrakt.clients.producer._records import (
    DELTAS,
    RECORD_OVERHEAD,
    OneRecord,
    RunWriter,
    append_staged,
    mixed_runs,
    uniform_runs,
)
from kontrakt.protocol.records._model import VARINT_BYTES

if TYPE_CHECKING:
    from kontrakt.clients.producer._accumulator import RecordAccumulator

__all__ = ["KeyedStage", "Offer", "settle_locked"]

#: KeyedStage.offer, bound to a topic's stage: ``offer(key, value, delivery)``
Offer = Callable[[bytes, bytes, "DeliveryCallback | None"], "RecordFuture | None"]

_list_append = list.append
#: t * 1000, for bisecting seconds by milliseconds
_THOUSAND_TIMES: Callable[[float], float] = (1000.0).__mul__
#: runs an iterator to its end, keeping nothing
_exhaust: Callable[[Any], None] = deque(maxlen=0).extend
#: byte length of each small varint
_VARINT_SIZES = [len(b) for b in VARINT_BYTES]
#: bytes of records a stage gathers before settling (its chunk)
_STAGE_BYTES = 1 << 17
_STAGE_RECORDS = 2048
#: a settling chunk of at least this many records is encoded in bulk, a run of records at a
#: time (_settle_uniform when its keys share a length and its values share one, else
#: _settle_mixed); smaller chunks record by record (_settle_each)
_BULK_MIN = 32


class KeyedStage:
    """One topic's keyed records waiting to be hashed to their partitions together.

    Appended to by the send fast paths (under the accumulator's lock for sync producers):
    ``keys``, ``values`` and ``stamps`` grow together; ``chunk`` is the handle their futures
    hold. Settled by :meth:`RecordAccumulator.settle_locked`.
    """

    __slots__ = ("acc", "chunk", "created", "keyless", "keys", "limit", "lock", "queues",
                 "stamps", "topic", "values")

    def __init__(self, acc: RecordAccumulator, topic: str,
                 queues: list[deque[ProducerBatch]]) -> None:
        self.acc = acc
        self.topic = topic
        self.queues = queues
        #: the accumulator's lock for a sync producer's stage (see offer), else None
        self.lock = acc.lock if acc.threaded else None
        #: the staged records' keys (None for each while ``keyless``)
        self.keys: list[bytes | None] = []
        self.values: list[bytes] = []
        #: the staged records have no key (offer_keyless); keyed ones wait for them to settle
        self.keyless = False
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

    @staticmethod
    def limit_for(size: int) -> int:
        """The records a stage whose first record is ``size`` bytes gathers (its chunk)."""
        return min(_STAGE_RECORDS, _STAGE_BYTES // size + 1)

    def started(self, size: int) -> None:
        """The first record went in (``size``: its key + value + overhead bytes): note the
        time (linger counts from it) and make sure the sender wakes by its deadline."""
        acc = self.acc
        self.created = now = time.monotonic()
        self.limit = self.limit_for(size)
        if now + acc.linger < acc.sender_wake_at:
            acc.wakeup(False)

    def offer(self, key: bytes, value: bytes, delivery: DeliveryCallback | None
              ) -> RecordFuture | None:
        """Stage a keyed record sent now, and return its future; None when it does not fit
        a stage (key and value together, plus RECORD_OVERHEAD, not under
        ``acc.stage_limit``: their varints must be in the settle's tables), the buffer is
        full, or the producer closed (nothing staged: take the general path).
        ``delivery``: a produce() callback, or None.

        The one place records are staged: the async send(), the sync send() and the
        general path (_ProducerCore._append) all call it, the sends through the bound
        method their producer keeps per topic (``_fast_topics``). It takes the
        accumulator's lock for a sync producer, whose I/O thread settles stages; an async
        producer's stages are only touched on its loop's thread. Once the stage holds its
        chunk's worth, it is settled here (an async caller then yields if a batch filled,
        see AsyncProducer.send).
        """
        # Every step counts here (it runs per record, and was once inlined into the async
        # send): positional parameters only (CPython >= 3.11 specializes no call of a
        # function with keyword-only ones), and the closed check folded into the size
        # check (a closing producer sets stage_limit to 0 under the lock).
        acc = self.acc
        # What the record reserves of buffer.memory until it is encoded.
        size = len(key) + len(value) + RECORD_OVERHEAD
        lock = self.lock
        if lock is not None:
            lock.acquire()
        try:
            # Unkeyed records staged before it go into their batches first: the general
            # path settles them.
            if size >= acc.stage_limit or acc.used + size > acc.buffer_memory or \
                    self.keyless:
                return None
            keys = self.keys
            i = len(keys)
            # time.time(): a float is cheaper to get than an int of milliseconds
            # (settling takes the milliseconds).
            sent = _time()
            keys.append(key)
            self.values.append(value)
            self.stamps.append(sent)
            acc.used += size
            # RecordFuture made as new_future does, without the call (it runs per record).
            fut = RecordFuture()
            fut._head = self.chunk
            fut._at = i
            fut._timestamp = sent
            if delivery is not None:
                # chunk.keep() inlined but for the chunk's first callback (a call less a
                # record in produce()'s idiom).
                chunk = self.chunk
                fns = chunk.fns
                if fns is None:
                    chunk.keep(i, delivery)
                else:
                    chunk.delivery_at.append(i)  # type: ignore[union-attr]
                    fns.append(delivery)
            if not i:
                self.started(size)
        finally:
            if lock is not None:
                lock.release()
        if i >= self.limit:
            acc.settle(self)
        return fut

    def offer_keyless(self, value: bytes, delivery: DeliveryCallback | None
                      ) -> RecordFuture | None:
        """Stage a record without a key sent now (its partition is the sticky one when it
        settles), and return its future; None when it does not fit a stage, the buffer is
        full, the producer closed, or keyed records are staged (nothing staged: take the
        general path, which settles them first). See :meth:`offer`.
        """
        acc = self.acc
        size = len(value) + RECORD_OVERHEAD
        lock = self.lock
        if lock is not None:
            lock.acquire()
        try:
            keys = self.keys
            i = len(keys)
            if size >= acc.stage_limit or acc.used + size > acc.buffer_memory or \
                    (i and not self.keyless):
                return None
            sent = _time()
            keys.append(None)
            self.values.append(value)
            self.stamps.append(sent)
            acc.used += size
            fut = RecordFuture()
            fut._head = self.chunk
            fut._at = i
            fut._timestamp = sent
            if delivery is not None:
                self.chunk.keep(i, delivery)
            if not i:
                self.keyless = True
                self.started(size)
        finally:
            if lock is not None:
                lock.release()
        if i >= self.limit:
            acc.settle(self)
        return fut


def settle_locked(acc: RecordAccumulator, stage: KeyedStage) -> bool | None:
    """Hash ``stage``'s records to their partitions in one go (or, records without a key,
    take the sticky partition) and encode them into the partitions' batches, in send order;
    the caller holds the lock.

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
    if stage.keyless:
        stage.keyless = False
        opened, full = _settle_keyless(acc, stage, chunk, values, stamps)
        return _settled(acc, stage, chunk, stamps, opened, full)
    keyed = cast("list[bytes]", keys)
    key_lengths = [*map(len, keyed)]
    value_lengths = [*map(len, values)]
    chunk.sizes = (key_lengths, value_lengths)
    # The records' reservations give way to their encoded sizes (added below).
    acc.used -= sum(key_lengths) + sum(value_lengths) + RECORD_OVERHEAD * n
    klen = key_lengths[0]
    vlen = value_lengths[0]
    partitions = murmur2_partitions(keyed, stage.count, key_lengths)
    # In bulk when the clock did not step back while the chunk was staged (sorted() of
    # sorted floats is one pass; == compares the same objects).
    if n < _BULK_MIN or sorted(stamps) != stamps:
        opened, full = _settle_each(acc, stage, chunk, partitions, keyed, values, stamps)
    elif key_lengths.count(klen) == n and value_lengths.count(vlen) == n:
        opened, full = _settle_uniform(acc, stage, chunk, partitions, keyed, values, stamps,
                                       klen, vlen)
    else:
        opened, full = _settle_mixed(acc, stage, chunk, partitions, keyed, values, stamps,
                                     key_lengths, value_lengths)
    return _settled(acc, stage, chunk, stamps, opened, full)


def _settled(acc: RecordAccumulator, stage: KeyedStage, chunk: StagedChunk,
             stamps: list[float], opened: bool, full: bool) -> bool | None:
    """Move what ``chunk``'s records kept while staged to their batches; settle_locked's
    result from whether a batch was opened and whether one filled up."""
    if chunk.callbacks:
        batches = chunk.list_placements() if chunk.batches is UNLISTED else chunk.batches
        assert batches is not None
        # Hooks kept while the records were staged move to the records' batches (the same
        # entries, appended inline: one callback a record in the callbacks idiom).
        for entry in chunk.callbacks:
            batch = batches[entry[1]._at]
            kept = batch.callbacks
            if kept is None:
                batch.callbacks = [entry]
            else:
                kept.append(entry)
        chunk.callbacks = None
    if chunk.fns is not None:
        # (a settle record by record computed no millisecond segments: each record's own)
        chunk.hand_deliveries(len(stamps), chunk.millis if chunk.millis is not None else
                              [*map(int, map(_THOUSAND_TIMES, stamps))])
    if full:
        acc.filled = True
        return True
    if opened and stage.created + acc.linger < acc.sender_wake_at:
        return False
    return None


def _settle_each(acc: RecordAccumulator, stage: KeyedStage, chunk: StagedChunk,
                 partitions: list[int], keys: list[bytes], values: list[bytes],
                 stamps: list[float]) -> tuple[bool, bool]:
    """Encode a chunk's records one by one, in send order (settle_locked's general
    case). Returns (a batch was opened, a batch filled up)."""
    batches: list[ProducerBatch] = []
    indexes: list[int] = []
    add_batch = batches.append
    add_index = indexes.append
    queues = stage.queues
    small = VARINT_BYTES
    sizes = _VARINT_SIZES
    batch_size = acc.batch_size
    used = 0
    opened = full = False
    # Staged keys and values are short enough (see AsyncProducer.send) that their lengths
    # and the record's length are in the varint table: append_staged, else (a new batch, a
    # delta past the table) the accumulator's general append.
    for p, key, value, sent in zip(partitions, keys, values, stamps, strict=True):
        ts = int(sent * 1000)
        dq = queues[p]
        if dq:
            batch = dq[-1]
            if not batch.sealed:
                added = append_staged(batch, ts, key, value, batch_size)
                if added:
                    used += added
                    add_batch(batch)
                    add_index(batch.count - 1)
                    continue
        klen = len(key)
        vlen = len(value)
        placed = acc.add_locked(stage.topic, p, dq, ts, small[klen], key, small[vlen],
                                value, b"\x00", sizes[klen] + klen + sizes[vlen] + vlen + 1,
                                stage.created)
        assert placed is not None
        add_batch(placed[0])
        add_index(placed[1])
        if not placed[1]:
            opened = True
            if len(dq) > 1:
                full = True
    acc.used += used
    chunk.indexes = indexes
    chunk.batches = batches
    return opened, full


def _settle_uniform(acc: RecordAccumulator, stage: KeyedStage, chunk: StagedChunk,
                    partitions: list[int], keys: list[bytes], values: list[bytes],
                    stamps: list[float], klen: int, vlen: int) -> tuple[bool, bool]:
    """Encode a chunk whose keys are all ``klen`` bytes long and values all ``vlen``, a run
    of records at a time (settle_locked's common case; see _records.uniform_runs).

    Returns:
        (a batch was opened, a batch filled up).
    """
    gather, write, one = uniform_runs(acc.prefixes, acc.batch_size, keys, values, klen, vlen)
    return _settle_runs(acc, stage, chunk, partitions, stamps, gather, write, one)


def _settle_mixed(acc: RecordAccumulator, stage: KeyedStage, chunk: StagedChunk,
                  partitions: list[int], keys: list[bytes], values: list[bytes],
                  stamps: list[float], key_lengths: list[int], value_lengths: list[int]
                  ) -> tuple[bool, bool]:
    """Encode a chunk of records of different sizes a run at a time (see
    _records.mixed_runs).

    Returns:
        (a batch was opened, a batch filled up).
    """
    gather, write, one = mixed_runs(acc.batch_size, keys, values, key_lengths, value_lengths)
    return _settle_runs(acc, stage, chunk, partitions, stamps, gather, write, one)


def _settle_keyless(acc: RecordAccumulator, stage: KeyedStage, chunk: StagedChunk,
                    values: list[bytes], stamps: list[float]) -> tuple[bool, bool]:
    """Encode a chunk of records without a key into the sticky partition's batches, a run
    at a time (the writers of _settle_runs). Where the open batch takes no more, a record
    that would open a new batch moves the sticky partition on first (KIP-480), as the
    general path does (RecordAccumulator.append's abort_on_new_batch).

    Returns:
        (a batch was opened, a batch filled up).
    """
    n = len(values)
    value_lengths = [*map(len, values)]
    chunk.sizes = ([-1] * n, value_lengths)
    acc.used -= sum(value_lengths) + RECORD_OVERHEAD * n
    keys = [b""] * n
    vlen = value_lengths[0]
    if value_lengths.count(vlen) == n:
        gather, write, one = uniform_runs(acc.prefixes, acc.batch_size, keys, values, -1, vlen)
    else:
        gather, write, one = mixed_runs(acc.batch_size, keys, values, [-1] * n, value_lengths)
    picked = gather([*range(n)])
    if sorted(stamps) == stamps:
        bounds, millis = _millisecond_segments(stamps)
    else:  # the clock stepped back while the chunk was staged
        bounds, millis = _millisecond_changes(stamps)
    _keep_millis(chunk, bounds, millis, n)
    topic = stage.topic
    queues = stage.queues
    created = stage.created
    sticky = acc.sticky
    # The partition count the stage places by (not ``count`` below: a batch's records).
    partitions = len(queues)
    p = sticky(topic, -1, partitions)
    runs: list[tuple[int, int, ProducerBatch, int]] = []
    used = 0
    opened = full = False
    pos = 0
    segment = 0
    ts = millis[0]
    while pos < n:
        if bounds:
            # This record's millisecond, and where the next one starts.
            segment = bisect_right(bounds, pos, segment)
            ts = millis[segment]
            end = bounds[segment] if segment < len(bounds) else n
        else:
            end = n
        dq = queues[p]
        if dq:
            batch = dq[-1]
            count = batch.count
            delta = ts - batch.base_timestamp
            if -1 < delta < DELTAS and not batch.sealed:
                k, added = write(picked, batch, count, delta, pos, end)
                if k:
                    batch.size += added
                    batch.count = count + k
                    if ts > batch.max_timestamp:
                        batch.max_timestamp = ts
                    used += added
                    runs.append((pos, pos + k, batch, count))
                    pos += k
                    continue
        kb, key, vb, value, rest = one(picked, pos)
        placed = acc.add_locked(topic, p, dq, ts, kb, key, vb, value, b"\x00", rest, created,
                                False)
        if placed is None:
            p = sticky(topic, p, partitions)
            dq = queues[p]
            placed = acc.add_locked(topic, p, dq, ts, kb, key, vb, value, b"\x00", rest,
                                    created)
            assert placed is not None
        batch, index = placed
        runs.append((pos, pos + 1, batch, index))
        if not index:
            opened = True
            if len(dq) > 1:
                full = True
        pos += 1
    acc.used += used
    chunk.runs = ([*range(n)], runs)
    chunk.batches = UNLISTED
    return opened, full


def _settle_runs(acc: RecordAccumulator, stage: KeyedStage, chunk: StagedChunk,
                 partitions: list[int], stamps: list[float], gather: Callable[[list[int]], Any],
                 write: RunWriter, one: OneRecord) -> tuple[bool, bool]:
    """The bulk settles' common part: the same bytes as :func:`_settle_each`, with a
    fraction of its per-record Python.

    The chunk's records are gathered by partition (each partition's in send order) and
    cut where their millisecond changes; ``gather(indexes)`` picks what the other two
    need of one partition's records. Each run of a partition's records with one
    timestamp that its open batch takes is written by ``write(picked, batch, offset
    delta, timestamp delta, start, end)``, which returns how many records it wrote and
    their bytes; what it does not take -- a batch's last records, a new batch's first,
    a timestamp delta past one varint byte -- goes one record at a time through
    RecordAccumulator.add_locked, ``one(picked, position)`` giving its parts. Where each
    record went is kept as runs and listed only when someone asks (StagedChunk.placed).

    Returns:
        (a batch was opened, a batch filled up).
    """
    bounds, millis = _millisecond_segments(stamps)
    _keep_millis(chunk, bounds, millis, len(stamps))
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
                if -1 < delta < DELTAS and not batch.sealed:
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
            placed = acc.add_locked(topic, p, dq, ts, kb, key, vb, value, b"\x00", rest,
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
    acc.used += used
    chunk.runs = ([*_chain(*buckets)], runs)
    chunk.batches = UNLISTED
    return opened, full


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


def _millisecond_changes(stamps: list[float]) -> tuple[list[int], list[int]]:
    """:func:`_millisecond_segments` for ``stamps`` in any order: where each record's
    millisecond differs from the one before it."""
    ms = [int(t * 1000) for t in stamps]
    bounds = [i for i in range(1, len(ms)) if ms[i] != ms[i - 1]]
    return bounds, [ms[0], *(ms[i] for i in bounds)]


def _keep_millis(chunk: StagedChunk, bounds: list[int], millis: list[int], n: int) -> None:
    """Give a chunk whose records have delivery callbacks each record's timestamp in
    milliseconds, from the settle's segments (``millis[k]`` from ``bounds[k - 1]`` on).

    The records of one millisecond share one int, so a delivery reads a list slot where it
    would convert a float of its own, which costs most when the records come back cold
    from the broker (see StagedRun)."""
    if chunk.fns is not None:
        chunk.millis = [*_chain.from_iterable(map(repeat, millis, map(
            int.__sub__, [*bounds, n], [0, *bounds])))]


def _by_partition(partitions: list[int], count: int) -> list[list[int]]:
    """Each of ``count`` partitions' record indexes, in send order."""
    buckets: list[list[int]] = [[] for _ in range(count)]
    # list.append mapped over (the record's partition's bucket, index): the loop runs in C.
    _exhaust(map(_list_append, map(buckets.__getitem__, partitions), range(len(partitions))))
    return buckets

