"""Kafka producers: :class:`AsyncProducer` (asyncio) and :class:`Producer` (blocking).

Both share one core: a thread-safe per-partition :class:`RecordAccumulator`, a sender task on
an event loop, the Java client's partitioners, idempotence and transactions.
"""

from __future__ import annotations

from kontrakt.clients.producer._accumulator import RecordAccumulator
from kontrakt.clients.producer._config import PRODUCER_OPTIONS
from kontrakt.clients.producer._future import RecordFuture
from kontrakt.clients.producer._partitioner import (
    DefaultPartitioner,
    Partitioner,
    RoundRobinPartitioner,
    murmur2,
    murmur2_partition,
)
from kontrakt.clients.producer._producer import AsyncProducer
from kontrakt.clients.producer._sync import Producer

__all__ = [
    "PRODUCER_OPTIONS",
    "AsyncProducer",
    "DefaultPartitioner",
    "Partitioner",
    "Producer",
    "RecordAccumulator",
    "RecordFuture",
    "RoundRobinPartitioner",
    "murmur2",
    "murmur2_partition",
]
