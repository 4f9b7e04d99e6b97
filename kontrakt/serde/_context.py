"""What a serializer knows about the record it is working on."""

from __future__ import annotations

import enum
from collections.abc import MutableMapping, MutableSequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from kontrakt.errors import (
    KeyDeserializationError,
    KeySerializationError,
    SerializationError,
    ValueDeserializationError,
    ValueSerializationError,
)

__all__ = ["Deserializer", "HeadersType", "MessageField", "SerializationContext", "Serializer"]

#: Record headers as a list of ``(key, value)`` pairs or a mapping; header serializers append.
HeadersType = MutableSequence[tuple[str, bytes | None]] | MutableMapping[str, Any]

T_co = TypeVar("T_co", covariant=True)
T_contra = TypeVar("T_contra", contravariant=True)


class MessageField(str, enum.Enum):
    """Which part of a record is being (de)serialized."""

    NONE = "none"
    KEY = "key"
    VALUE = "value"

    def __str__(self) -> str:
        return str(self.value)


@dataclass(frozen=True, slots=True, init=False)
class SerializationContext:
    """Metadata handed to a serializer or deserializer with each key or value.

    Attributes:
        topic: the topic the record is produced to or was consumed from.
        field: whether the key or the value is being handled.
        headers: the record's headers; serializers that carry the schema id in a header append to
            it, so pass a list (or dict) the producer will send.
        partition: the partition the record came from, when known (consumer side).
        offset: the record's offset, when known (consumer side).
    """

    topic: str
    field: MessageField = MessageField.VALUE
    headers: HeadersType | None = None
    partition: int | None = None
    offset: int | None = None

    def __init__(self, topic: str, field: MessageField = MessageField.VALUE,
                 headers: HeadersType | None = None, partition: int | None = None,
                 offset: int | None = None) -> None:
        # The serializing clients build one per key and value of every record. A frozen
        # dataclass's own __init__ sets each field through object.__setattr__ (1.9 us for
        # the five); the slots' own setters do it in 1.0 us, and the instance stays frozen.
        _set_topic(self, topic)
        _set_field(self, field)
        _set_headers(self, headers)
        _set_partition(self, partition)
        _set_offset(self, offset)


_set_topic = SerializationContext.__dict__["topic"].__set__
_set_field = SerializationContext.__dict__["field"].__set__
_set_headers = SerializationContext.__dict__["headers"].__set__
_set_partition = SerializationContext.__dict__["partition"].__set__
_set_offset = SerializationContext.__dict__["offset"].__set__


class ContextShell:
    """A :class:`SerializationContext` under construction: the same slots, in the same
    order, and nothing else, so an instance can take ``SerializationContext`` as its
    class once its slots are set (:func:`shell_fits` checks the layouts at import).

    Why: the serializing clients build a context per key and value. Through its
    constructor that is 5,000 instructions (a Python ``__init__`` setting five frozen slots
    through their descriptors' ``__set__``, each a wrapped call with an argument tuple);
    five plain slot stores on this class and one ``__class__`` assignment are 2,700
    (callgrind, CPython 3.11). The result is an ordinary frozen ``SerializationContext``
    (equal to, and hashing as, one built by its constructor).
    """

    __slots__ = ("topic", "field", "headers", "partition", "offset")  # noqa: RUF023 (layout)
    topic: str
    field: MessageField
    headers: Any
    partition: int | None
    offset: int | None


def shell_fits(shell: type = ContextShell) -> bool:
    """Whether a ``shell`` can become a ``SerializationContext`` (the same slots; else
    contexts are built by the constructor)."""
    if SerializationContext.__dict__.get("__slots__") != shell.__dict__.get("__slots__"):
        return False
    probe: Any = object.__new__(shell)
    try:
        probe.__class__ = SerializationContext
    except TypeError:
        return False
    return True


#: whether contexts are built as shells (see ContextShell)
SHELL_FITS = shell_fits()


def new_context(topic: str, field: MessageField, headers: HeadersType | None,
                partition: int | None = None, offset: int | None = None
                ) -> SerializationContext:
    """A context built as a shell (see :class:`ContextShell`), or by the constructor where
    shells do not fit: for the serializing clients, which build one per key and value."""
    if not SHELL_FITS:
        return SerializationContext(topic, field, headers, partition, offset)
    ctx: Any = object.__new__(ContextShell)
    ctx.topic = topic
    ctx.field = field
    ctx.headers = headers
    ctx.partition = partition
    ctx.offset = offset
    ctx.__class__ = SerializationContext
    return ctx  # type: ignore[no-any-return]


class Serializer(Protocol[T_contra]):
    """Turns an object into bytes: ``serializer(obj, ctx) -> bytes | None``."""

    def __call__(self, obj: T_contra, ctx: SerializationContext | None = None) -> bytes | None:
        """Serialize ``obj``; ``None`` stays ``None``."""


class Deserializer(Protocol[T_co]):
    """Turns bytes back into an object: ``deserializer(data, ctx) -> obj``."""

    def __call__(self, data: bytes | None, ctx: SerializationContext | None = None) -> T_co:
        """Deserialize ``data``; ``None`` stays ``None``."""


def describe(ctx: SerializationContext | None) -> str:
    """Say where a record is, for error messages: topic, field, partition, offset."""
    if ctx is None:
        return "no serialization context"
    parts = [f"topic {ctx.topic!r}", f"{ctx.field.value}"]
    if ctx.partition is not None:
        parts.append(f"partition {ctx.partition}")
    if ctx.offset is not None:
        parts.append(f"offset {ctx.offset}")
    return ", ".join(parts)


def serialization_error(
    message: str, ctx: SerializationContext | None, cause: BaseException | None = None
) -> SerializationError:
    """Build the key or value serialization error for ``ctx``, naming where it happened."""
    text = f"{message} ({describe(ctx)})"
    if ctx is not None and ctx.field is MessageField.KEY:
        err: SerializationError = KeySerializationError(text)
    elif ctx is not None and ctx.field is MessageField.VALUE:
        err = ValueSerializationError(text)
    else:
        err = SerializationError(text)
    err.__cause__ = cause
    return err


def deserialization_error(
    message: str,
    ctx: SerializationContext | None,
    data: bytes | None,
    cause: BaseException | None = None,
) -> SerializationError:
    """Build the key or value deserialization error for ``ctx``; ``.record`` holds the bytes."""
    text = f"{message} ({describe(ctx)})"
    if ctx is not None and ctx.field is MessageField.KEY:
        err: SerializationError = KeyDeserializationError(text, record=data)
    elif ctx is not None and ctx.field is MessageField.VALUE:
        err = ValueDeserializationError(text, record=data)
    else:
        err = SerializationError(text, record=data)
    err.__cause__ = cause
    return err
