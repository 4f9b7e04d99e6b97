"""The sink's bulk append: records of one topic go into record batches the task fills
itself (``Producer.create_batch`` / ``send_batch``), not record by record through ``send``.

Why: a keyless ``send`` takes the producer's general path (partitioner, size checks,
per-record future, lock), measured at ~3.7 µs of a sink task's ~8 µs a record in all
(cProfile, 100,000 60-byte values, the project machine under load), and a keyed one its
staging path (~5.6 µs a record in all); a filled batch costs the builder's
``append_many`` a run of records (a few loops in C, see
:mod:`kontrakt.protocol.records._runs`) and one future a batch.

Partitions: what the producer's default partitioner does. Keyed records go to
``murmur2(key) % partitions`` (the Java client's choice, hashed many keys at once);
keyless ones as KIP-480's sticky partitioner sends them: all to one partition until its
batch is full, then to another; here the partitions are taken in turn from a random
start, so a task spreads its records evenly. Records get the time their chunk was handed
over (one clock read a chunk).
"""

from __future__ import annotations

import random
import time
from bisect import bisect_right
from itertools import compress, repeat
from operator import eq, itemgetter
from typing import TYPE_CHECKING, Any

from kontrakt.clients.producer._partitioner import murmur2_partitions

if TYPE_CHECKING:
    from kontrakt.clients.producer import Producer

Headers = list[tuple[str, "bytes | None"]]

__all__ = ["BulkBatches", "bulk_partitioner"]

#: keyed records of at most this many partitions are grouped by a pass a partition, those
#: of more by a sort
_FEW_PARTITIONS = 8


def bulk_partitioner(kafka: dict[str, str]) -> bool:
    """Whether the producer's configuration places records the way :class:`BulkBatches`
    does (murmur2 for keys, sticky or random without): no ``partitioner`` option, or one of
    those that do so."""
    name = kafka.get("partitioner", "default").strip().lower()
    return name in ("default", "murmur2_random")


class BulkBatches:
    """Fills record batches of one topic and queues each when full (keyless values in
    turn, keyed records by their key's partition).

    Args:
        producer: a started producer (``partitions_for`` is asked at the first record).
        topic: where the records go.

    Raises (from :meth:`add` and :meth:`close`):
        RecordTooLargeError: a value that alone exceeds ``message.max.bytes``.
        KafkaTimeoutError: no metadata, or no buffer room within ``max.block.ms``.
    """

    def __init__(self, producer: Producer, topic: str) -> None:
        self._producer = producer
        self._topic = topic
        # Asked at the first record: a task without rows needs no metadata.
        self._partitions: list[int] = []
        self._next = 0
        self._builder: Any = None
        self._keyed: list[Any] = []  # a builder a partition
        #: one future a queued batch (its first record's); the caller checks them
        self.pending: list[Any] = []

    def add(self, values: list[bytes | None], headers: list[Headers] | None = None) -> None:
        """Append the values (None: a null value), with each record's headers if given, to
        the current batch, queueing each batch that fills."""
        if not self._partitions:
            self._start()
        builder = self._builder
        if builder is None:
            builder = self._builder = self._producer.create_batch()
        now = int(time.time() * 1000)
        pos = builder.append_many(now, None, values, headers)
        while pos < len(values):
            self._queue(builder)
            builder = self._builder = self._producer.create_batch()
            pos += builder.append_many(now, None, values, headers, start=pos)

    def add_keyed(self, keys: list[bytes], values: list[bytes | None],
                  headers: list[Headers] | None = None) -> None:
        """Append records with keys (none None), and headers if given, to the batch of each
        key's partition, queueing each batch that fills."""
        if not self._partitions:
            self._start()
        now = int(time.time() * 1000)
        indexes = murmur2_partitions(keys, len(self._partitions))
        if len(keys) == 1:
            self._add_run(indexes[0], now, keys, values, headers)
            return
        present = sorted(set(indexes))
        if len(present) <= _FEW_PARTITIONS:
            # A pass a partition (a loop in C each) picks its records in order.
            for index in present:
                picked = [*compress(range(len(keys)), map(eq, indexes, repeat(index)))]
                if len(picked) == 1:
                    i = picked[0]
                    self._add_run(index, now, [keys[i]], [values[i]],
                                  None if headers is None else [headers[i]])
                else:
                    pick = itemgetter(*picked)
                    self._add_run(index, now, [*pick(keys)], [*pick(values)],
                                  None if headers is None else [*pick(headers)])
            return
        # Many partitions: grouped by a stable sort (each partition's order kept).
        pick = itemgetter(*sorted(range(len(keys)), key=indexes.__getitem__))
        keys, values, indexes = [*pick(keys)], [*pick(values)], [*pick(indexes)]
        if headers is not None:
            headers = [*pick(headers)]
        start = 0
        while start < len(keys):
            index = indexes[start]
            end = bisect_right(indexes, index, start)
            self._add_run(index, now, keys[start:end], values[start:end],
                          None if headers is None else headers[start:end])
            start = end

    def _add_run(self, index: int, now: int, keys: list[bytes], values: list[bytes | None],
                 headers: list[Headers] | None) -> None:
        builders, create = self._keyed, self._producer.create_batch
        builder = builders[index]
        if builder is None:
            builder = builders[index] = create()
        pos = builder.append_many(now, keys, values, headers)
        while pos < len(values):
            self._send(builder, self._partitions[index])
            builder = builders[index] = create()
            pos += builder.append_many(now, keys, values, headers, start=pos)

    def _start(self) -> None:
        self._partitions = sorted(self._producer.partitions_for(self._topic))
        self._next = random.randrange(len(self._partitions))
        self._keyed = [None] * len(self._partitions)

    def close(self) -> None:
        """Queue every batch being filled (those with a record in them); records sent
        after this through ``send`` follow them in their partitions."""
        builder, self._builder = self._builder, None
        if builder is not None and builder.record_count:
            self._queue(builder)
        for index, builder in enumerate(self._keyed):
            if builder is not None and builder.record_count:
                self._send(builder, self._partitions[index])
        self._keyed = [None] * len(self._keyed)

    def _queue(self, builder: Any) -> None:
        partition = self._partitions[self._next % len(self._partitions)]
        self._next += 1
        self._send(builder, partition)

    def _send(self, builder: Any, partition: int) -> None:
        self.pending.append(self._producer.send_batch(builder, self._topic,
                                                      partition=partition))
