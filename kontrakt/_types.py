"""Value types shared by producers, consumers and admin: frozen, slotted, attribute access."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Generic, TypeVar

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


_CONSUMER_RECORD_FIELDS = (
    "topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value", "headers",
    "leader_epoch")


class ConsumerRecord(Generic[K, V], tuple):  # type: ignore[type-arg]
    """A record read from Kafka: immutable, slotted, read by attribute.

    Attributes:
        topic, partition, offset: where the record is.
        timestamp: milliseconds since the epoch (-1 when unknown).
        timestamp_type: what the timestamp means.
        key, value: the record's key and value (bytes, or what a deserializer made of them).
        headers: ``[(name, value or None), ...]``.
        leader_epoch: leader epoch of the batch the record came in (-1 when unknown).

    Consumers build millions of these, so the class is a tuple with named read-only
    attributes (like a named tuple; written by hand so that it stays generic over the key and
    value types on Python 3.10) instead of a dataclass, whose frozen ``__init__`` costs a
    ``object.__setattr__`` call per field. Equality compares records, never a record with a
    plain tuple.
    """

    __slots__ = ()
    __match_args__ = ("topic", "partition", "offset", "timestamp", "timestamp_type", "key",
                      "value", "headers", "leader_epoch")

    def __new__(cls, topic: str, partition: int, offset: int, timestamp: int,
                timestamp_type: TimestampType, key: K, value: V,
                headers: list[tuple[str, bytes | None]] | None = None,
                leader_epoch: int = -1) -> ConsumerRecord[K, V]:
        """Build a record; ``headers`` defaults to a new empty list."""
        return tuple.__new__(cls, (topic, partition, offset, timestamp, timestamp_type, key,
                                   value, [] if headers is None else headers, leader_epoch))

    if TYPE_CHECKING:
        @property
        def topic(self) -> str: ...
        @property
        def partition(self) -> int: ...
        @property
        def offset(self) -> int: ...
        @property
        def timestamp(self) -> int: ...
        @property
        def timestamp_type(self) -> TimestampType: ...
        @property
        def key(self) -> K: ...
        @property
        def value(self) -> V: ...
        @property
        def headers(self) -> list[tuple[str, bytes | None]]: ...
        @property
        def leader_epoch(self) -> int: ...
    else:
        # itemgetter properties: attribute reads run in C, as fast as slot reads.
        topic = property(itemgetter(0), doc="The record's topic.")
        partition = property(itemgetter(1), doc="The record's partition.")
        offset = property(itemgetter(2), doc="The record's offset.")
        timestamp = property(itemgetter(3), doc="Milliseconds since the epoch (-1 unknown).")
        timestamp_type = property(itemgetter(4), doc="What the timestamp means.")
        key = property(itemgetter(5), doc="The key (bytes or deserialized).")
        value = property(itemgetter(6), doc="The value (bytes or deserialized).")
        headers = property(itemgetter(7), doc="``[(name, value or None), ...]``.")
        leader_epoch = property(itemgetter(8), doc="Leader epoch of the record's batch.")

    @property
    def topic_partition(self) -> TopicPartition:
        """The record's :class:`TopicPartition`."""
        return TopicPartition(self[0], self[1])

    def replace(self, **changes: Any) -> ConsumerRecord[Any, Any]:
        """A copy with some fields changed (like :func:`dataclasses.replace`).

        Raises:
            TypeError: an unknown field name.
        """
        values = dict(zip(_CONSUMER_RECORD_FIELDS, self, strict=True))
        for name in changes:
            if name not in values:
                raise TypeError(f"ConsumerRecord has no field {name!r}")
        values.update(changes)
        return ConsumerRecord(**values)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return False
        return tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        if type(other) is not type(self):
            return True
        return tuple.__ne__(self, other)

    __hash__ = tuple.__hash__

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={v!r}" for n, v in zip(_CONSUMER_RECORD_FIELDS, self, strict=True))
        return f"ConsumerRecord({inner})"

    def __getnewargs__(self) -> tuple[Any, ...]:
        return tuple(self)
