"""Value types shared by producers, consumers and admin: frozen, slotted, attribute access."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Generic, TypeVar

__all__ = [
    "ConsumerRecord",
    "OffsetAndMetadata",
    "RecordMetadata",
    "TimestampType",
    "TopicPartition",
]

K = TypeVar("K")
V = TypeVar("V")


class TimestampType(IntEnum):
    """Where a record's timestamp comes from."""

    NO_TIMESTAMP = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    """A partition of a topic."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """An offset to commit: the offset of the next record to read, optional metadata and the
    leader epoch of the last record read (-1 when unknown)."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where a produced record landed.

    Attributes:
        offset: the record's offset (-1 when produced with acks=0).
        timestamp: the record's timestamp in ms (the broker's time for LogAppendTime topics).
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int = -1
    serialized_value_size: int = -1

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class ConsumerRecord(Generic[K, V]):
    """A record read from Kafka."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: TimestampType
    key: K
    value: V
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    leader_epoch: int = -1

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)
