"""Value types shared by producers, consumers and admin: frozen, slotted, attribute access."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Generic, TypeVar

__all__ = [
    "OFFSET_BEGINNING",
    "OFFSET_END",
    "OFFSET_INVALID",
    "OFFSET_STORED",
    "ConsumerRecord",
    "DefaultTypeVar",
    "OffsetAndMetadata",
    "RecordMetadata",
    "TimestampType",
    "TopicPartition",
    "header_list",
]

K = TypeVar("K")
V = TypeVar("V")

# A TypeVar with a default (PEP 696) for type checkers, without a runtime dependency: they
# read typing_extensions.TypeVar (typeshed ships its stub, so it need not be installed); at
# run time typing.TypeVar is used and the default dropped (Python < 3.13 has no ``default``).
# A default lets ``AvroDeserializer(client)`` be an ``AvroDeserializer[dict[str, Any]]`` and
# ``SerializingProducer(conf)`` a ``SerializingProducer[Any, Any]`` where nothing says
# otherwise. Here rather than in a module of its own: ``import kontrakt`` loads no more.
if TYPE_CHECKING:
    from typing_extensions import TypeVar as DefaultTypeVar
else:
    def DefaultTypeVar(name: str, *constraints: Any, default: Any = None,
                       **kwargs: Any) -> Any:
        return TypeVar(name, *constraints, **kwargs)


class TimestampType(IntEnum):
    """Where a record's timestamp comes from."""

    NO_TIMESTAMP = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


#: confluent-kafka's logical offsets, for :class:`TopicPartition`'s ``offset``.
OFFSET_BEGINNING = -2
OFFSET_END = -1
OFFSET_STORED = -1000
OFFSET_INVALID = -1001


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    """A partition of a topic, optionally with an offset (confluent-kafka's
    ``TopicPartition(topic, partition, offset)``).

    Equality, ordering and hashing use ``topic`` and ``partition`` only (as in
    confluent-kafka), so a partition with an offset finds its entry in a dict keyed by
    partitions. ``offset`` is read by ``assign`` (where to start: an offset,
    :data:`OFFSET_BEGINNING`, :data:`OFFSET_END`, or :data:`OFFSET_STORED` /
    :data:`OFFSET_INVALID` for the committed offset), ``commit(offsets=[...])``,
    ``store_offsets(offsets=[...])`` and set by ``position([...])``.
    """

    topic: str
    partition: int
    offset: int = field(default=OFFSET_INVALID, compare=False, repr=False)

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    def __repr__(self) -> str:
        at = "" if self.offset == OFFSET_INVALID else f", offset={self.offset}"
        return f"TopicPartition(topic={self.topic!r}, partition={self.partition}{at})"


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """An offset to commit: the offset of the next record to read, optional metadata and the
    leader epoch of the last record read (-1 when unknown)."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


class _TupleRecord(tuple):  # type: ignore[type-arg]
    """A tuple with named read-only fields (``_fields``, the first four ``topic``,
    ``partition``, ``offset``, ``timestamp``), for value types made per record:
    building one is a single ``tuple.__new__``, where a frozen dataclass's ``__init__``
    costs an ``object.__setattr__`` call per field. Equality compares values of the same
    class, never one with a plain tuple."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # itemgetter properties: attribute reads run in C, as fast as slot reads.
        for i, name in enumerate(cls.__dict__.get("_fields", ())):
            setattr(cls, name, property(itemgetter(i)))

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
    def topic_partition(self) -> TopicPartition:
        """The record's :class:`TopicPartition`."""
        return TopicPartition(self[0], self[1])

    def replace(self, **changes: Any) -> Any:
        """A copy with some fields changed (like :func:`dataclasses.replace`).

        Raises:
            TypeError: an unknown field name.
        """
        values = dict(zip(self._fields, self, strict=True))
        for name in changes:
            if name not in values:
                raise TypeError(f"{type(self).__name__} has no field {name!r}")
        values.update(changes)
        return type(self)(**values)

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
        inner = ", ".join(f"{n}={v!r}" for n, v in zip(self._fields, self, strict=True))
        return f"{type(self).__name__}({inner})"

    def __getnewargs__(self) -> tuple[Any, ...]:
        return tuple(self)


class RecordMetadata(_TupleRecord):
    """Where a produced record landed.

    Attributes:
        topic, partition: where the record went.
        offset: the record's offset (-1 when produced with acks=0).
        timestamp: the record's timestamp in ms (the broker's time for LogAppendTime topics).
        serialized_key_size, serialized_value_size: the key's and value's size in bytes as
            sent (after any serializer); -1 for a None key or value, and for the records
            of a whole batch given to ``send_batch``.
    """

    __slots__ = ()
    __match_args__ = ("topic", "partition", "offset", "timestamp", "serialized_key_size",
                      "serialized_value_size")
    _fields = __match_args__

    def __new__(cls, topic: str, partition: int, offset: int, timestamp: int,
                serialized_key_size: int = -1,
                serialized_value_size: int = -1) -> RecordMetadata:
        return tuple.__new__(cls, (topic, partition, offset, timestamp, serialized_key_size,
                                   serialized_value_size))

    if TYPE_CHECKING:
        @property
        def serialized_key_size(self) -> int: ...
        @property
        def serialized_value_size(self) -> int: ...


class ConsumerRecord(Generic[K, V], _TupleRecord):
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
    value types on Python 3.10), see ``_TupleRecord``.
    """

    __slots__ = ()
    __match_args__ = ("topic", "partition", "offset", "timestamp", "timestamp_type", "key",
                      "value", "headers", "leader_epoch")
    _fields = __match_args__

    def __new__(cls, topic: str, partition: int, offset: int, timestamp: int,
                timestamp_type: TimestampType, key: K, value: V,
                headers: list[tuple[str, bytes | None]] | None = None,
                leader_epoch: int = -1) -> ConsumerRecord[K, V]:
        """Build a record; ``headers`` defaults to a new empty list."""
        return tuple.__new__(cls, (topic, partition, offset, timestamp, timestamp_type, key,
                                   value, [] if headers is None else headers, leader_epoch))

    if TYPE_CHECKING:
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


def header_list(headers: Any) -> list[tuple[str, bytes | None]]:
    """A fresh ``[(name, value), ...]`` of a record's headers given as pairs or a mapping
    (``None``: none). Never the caller's own object: serializers that carry the schema id
    in a header, and trace propagation, append to it."""
    if headers is None:
        return []
    if isinstance(headers, Mapping):
        return list(headers.items())
    return list(headers)
