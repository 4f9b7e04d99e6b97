"""The sink's bulk append: keyless records of one topic go into record batches the task
fills itself (``Producer.create_batch`` / ``send_batch``), not record by record through
``send``.

Why: a keyless ``send`` takes the producer's general path (partitioner, size checks,
per-record future, lock), measured at ~3.7 µs of a sink task's ~8 µs a record in all
(cProfile, 100,000 60-byte values, the project machine under load); a filled batch costs
the builder's ``append`` a record and one future a batch.

Partitions: what the producer's default partitioner does for keyless records (KIP-480,
sticky): all records go to one partition until its batch is full, then to another; here
the partitions are taken in turn from a random start, so a task spreads its records
evenly. Records get the time their chunk was handed over (one clock read a chunk).
"""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kontrakt.clients.producer import Producer

__all__ = ["KeylessBatches", "bulk_partitioner"]


def bulk_partitioner(kafka: dict[str, str]) -> bool:
    """Whether the producer's configuration places keyless records the way
    :class:`KeylessBatches` does (sticky or random): no ``partitioner`` option, or one of
    those that treat keyless records so."""
    name = kafka.get("partitioner", "default").strip().lower()
    return name in ("default", "murmur2_random")


class KeylessBatches:
    """Fills record batches of one topic with keyless values and queues each when full.

    Args:
        producer: a started producer (``partitions_for`` is asked once).
        topic: where the records go.

    Raises (from :meth:`add` and :meth:`close`):
        RecordTooLargeError: a value that alone exceeds ``message.max.bytes``.
        KafkaTimeoutError: no metadata, or no buffer room within ``max.block.ms``.
    """

    def __init__(self, producer: Producer, topic: str) -> None:
        self._producer = producer
        self._topic = topic
        self._partitions = sorted(producer.partitions_for(topic))
        self._next = random.randrange(len(self._partitions))
        self._builder: Any = None
        #: one future a queued batch (its first record's); the caller checks them
        self.pending: list[Any] = []

    def add(self, values: list[bytes | None]) -> None:
        """Append the values (None: a null value) to the current batch, queueing each
        batch that fills."""
        builder = self._builder
        if builder is None:
            builder = self._builder = self._producer.create_batch()
        append = builder.append
        now = int(time.time() * 1000)
        for value in values:
            if append(now, None, value) is None:
                self._queue(builder)
                builder = self._builder = self._producer.create_batch()
                append = builder.append
                append(now, None, value)

    def close(self) -> None:
        """Queue the batch being filled (if any record is in it)."""
        builder, self._builder = self._builder, None
        if builder is not None and builder.record_count:
            self._queue(builder)

    def _queue(self, builder: Any) -> None:
        partition = self._partitions[self._next % len(self._partitions)]
        self._next += 1
        self.pending.append(self._producer.send_batch(builder, self._topic,
                                                      partition=partition))
