"""Primitive serdes with the encodings of Kafka's (and confluent-kafka's) built-in serializers.

Integer is a 4-byte big-endian signed int, Long 8 bytes, Short 2 bytes, Double and Float IEEE
754 big-endian, String the text in a codec (UTF-8 by default), UUID its canonical 36-character
text in UTF-8 (as Kafka's ``UUIDSerializer``), Bytes as is. ``None`` maps to ``None`` both ways.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from kontrakt.serde._context import (
    SerializationContext,
    deserialization_error,
    serialization_error,
)

__all__ = [
    "BytesDeserializer",
    "BytesSerializer",
    "DoubleDeserializer",
    "DoubleSerializer",
    "FloatDeserializer",
    "FloatSerializer",
    "IntegerDeserializer",
    "IntegerSerializer",
    "LongDeserializer",
    "LongSerializer",
    "ShortDeserializer",
    "ShortSerializer",
    "StringDeserializer",
    "StringSerializer",
    "UUIDDeserializer",
    "UUIDSerializer",
]

#: The Python type a fixed-width serde takes or gives: int, or float for the floating ones.
_N = TypeVar("_N", int, float)


@dataclass(frozen=True, slots=True)
class _Fixed:
    """A fixed-width encoding, shared by a serializer and its deserializer so both agree."""

    layout: struct.Struct
    what: str
    accepts: tuple[type, ...] = (int,)


_INT16 = _Fixed(struct.Struct(">h"), "an int16")
_INT32 = _Fixed(struct.Struct(">i"), "an int32")
_INT64 = _Fixed(struct.Struct(">q"), "an int64")
_FLOAT32 = _Fixed(struct.Struct(">f"), "a float", (int, float))
_FLOAT64 = _Fixed(struct.Struct(">d"), "a double", (int, float))


class _FixedWidth:
    """Base of the fixed-width serdes: ``class X(_StructSerializer[int], fixed=_INT32)``."""

    _fixed: _Fixed

    def __init_subclass__(cls, *, fixed: _Fixed | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if fixed is not None:  # None: an abstract base (_StructSerializer, ...)
            cls._fixed = fixed


class _StructSerializer(_FixedWidth, Generic[_N]):
    def __call__(self, obj: _N | None, ctx: SerializationContext | None = None) -> bytes | None:
        """Encode ``obj``; ``None`` gives ``None``.

        Raises:
            KeySerializationError / ValueSerializationError: wrong type or out of range.
        """
        if obj is None:
            return None
        fixed = self._fixed
        if isinstance(obj, bool) or not isinstance(obj, fixed.accepts):
            raise serialization_error(
                f"{type(self).__name__} needs {fixed.what}, got {type(obj).__name__}", ctx)
        try:
            return fixed.layout.pack(obj)
        except (struct.error, OverflowError) as e:
            raise serialization_error(f"{obj!r} does not fit in {fixed.what}: {e}", ctx, e) from e


class _StructDeserializer(_FixedWidth, Generic[_N]):
    def __call__(self, data: bytes | None,
                 ctx: SerializationContext | None = None) -> _N | None:
        """Decode exactly one value; ``None`` gives ``None``.

        Raises:
            KeyDeserializationError / ValueDeserializationError: wrong length.
        """
        if data is None:
            return None
        fixed = self._fixed
        if len(data) != fixed.layout.size:
            raise deserialization_error(
                f"{type(self).__name__} needs exactly {fixed.layout.size} bytes for {fixed.what},"
                f" got {len(data)}", ctx, data)
        value: _N = fixed.layout.unpack(data)[0]
        return value


class IntegerSerializer(_StructSerializer[int], fixed=_INT32):
    """int32, 4 bytes big-endian (Kafka ``IntegerSerializer``)."""


class IntegerDeserializer(_StructDeserializer[int], fixed=_INT32):
    """int32, 4 bytes big-endian (Kafka ``IntegerDeserializer``)."""


class LongSerializer(_StructSerializer[int], fixed=_INT64):
    """int64, 8 bytes big-endian (Kafka ``LongSerializer``)."""


class LongDeserializer(_StructDeserializer[int], fixed=_INT64):
    """int64, 8 bytes big-endian (Kafka ``LongDeserializer``)."""


class ShortSerializer(_StructSerializer[int], fixed=_INT16):
    """int16, 2 bytes big-endian (Kafka ``ShortSerializer``)."""


class ShortDeserializer(_StructDeserializer[int], fixed=_INT16):
    """int16, 2 bytes big-endian (Kafka ``ShortDeserializer``)."""


class DoubleSerializer(_StructSerializer[float], fixed=_FLOAT64):
    """IEEE 754 binary64, big-endian (Kafka ``DoubleSerializer``)."""


class DoubleDeserializer(_StructDeserializer[float], fixed=_FLOAT64):
    """IEEE 754 binary64, big-endian (Kafka ``DoubleDeserializer``)."""


class FloatSerializer(_StructSerializer[float], fixed=_FLOAT32):
    """IEEE 754 binary32, big-endian (Kafka ``FloatSerializer``); rounds to float32."""


class FloatDeserializer(_StructDeserializer[float], fixed=_FLOAT32):
    """IEEE 754 binary32, big-endian (Kafka ``FloatDeserializer``)."""


class StringSerializer:
    """Text in a codec (Kafka ``StringSerializer``).

    Args:
        codec: a Python codec name; ``"utf_8"`` by default.
    """

    def __init__(self, codec: str = "utf_8") -> None:
        self.codec = codec

    def __call__(self, obj: str | None, ctx: SerializationContext | None = None) -> bytes | None:
        """Encode ``obj``; ``None`` gives ``None``.

        Raises:
            KeySerializationError / ValueSerializationError: not a str or not encodable.
        """
        if obj is None:
            return None
        if not isinstance(obj, str):
            raise serialization_error(f"StringSerializer needs a str, got {type(obj).__name__}",
                                      ctx)
        try:
            return obj.encode(self.codec)
        except UnicodeError as e:
            raise serialization_error(f"cannot encode text as {self.codec}: {e}", ctx, e) from e


class StringDeserializer:
    """Text in a codec (Kafka ``StringDeserializer``).

    Args:
        codec: a Python codec name; ``"utf_8"`` by default.
    """

    def __init__(self, codec: str = "utf_8") -> None:
        self.codec = codec

    def __call__(self, data: bytes | None, ctx: SerializationContext | None = None) -> str | None:
        """Decode ``data``; ``None`` gives ``None``.

        Raises:
            KeyDeserializationError / ValueDeserializationError: bytes not valid in the codec.
        """
        if data is None:
            return None
        try:
            return bytes(data).decode(self.codec)
        except UnicodeError as e:
            raise deserialization_error(f"bytes are not valid {self.codec}: {e}", ctx, data,
                                        e) from e


class BytesSerializer:
    """Bytes as they are (Kafka ``ByteArraySerializer``)."""

    def __call__(self, obj: bytes | bytearray | memoryview | None,
                 ctx: SerializationContext | None = None) -> bytes | None:
        """Return ``obj`` as bytes; ``None`` gives ``None``.

        Raises:
            KeySerializationError / ValueSerializationError: not bytes-like.
        """
        if obj is None:
            return None
        if not isinstance(obj, (bytes, bytearray, memoryview)):
            raise serialization_error(f"BytesSerializer needs bytes, got {type(obj).__name__}",
                                      ctx)
        return bytes(obj)


class BytesDeserializer:
    """Bytes as they are (Kafka ``ByteArrayDeserializer``)."""

    def __call__(self, data: bytes | None, ctx: SerializationContext | None = None) -> bytes | None:
        """Return ``data`` unchanged."""
        return data


class UUIDSerializer:
    """A UUID as its 36-character text in UTF-8 (Kafka ``UUIDSerializer``)."""

    def __call__(self, obj: uuid.UUID | None,
                 ctx: SerializationContext | None = None) -> bytes | None:
        """Encode ``obj``; ``None`` gives ``None``.

        Raises:
            KeySerializationError / ValueSerializationError: not a ``uuid.UUID``.
        """
        if obj is None:
            return None
        if not isinstance(obj, uuid.UUID):
            raise serialization_error(f"UUIDSerializer needs a uuid.UUID, got {type(obj).__name__}",
                                      ctx)
        return str(obj).encode("ascii")


class UUIDDeserializer:
    """A UUID from its text form in UTF-8 (Kafka ``UUIDDeserializer``)."""

    def __call__(self, data: bytes | None,
                 ctx: SerializationContext | None = None) -> uuid.UUID | None:
        """Decode ``data``; ``None`` gives ``None``.

        Raises:
            KeyDeserializationError / ValueDeserializationError: not a UUID's text.
        """
        if data is None:
            return None
        try:
            return uuid.UUID(bytes(data).decode("ascii"))
        except (UnicodeError, ValueError) as e:
            raise deserialization_error(f"bytes are not a UUID's text form: {e}", ctx, data,
                                        e) from e


def ignores_context(serde: Any) -> bool:
    """Whether ``serde`` is one of these classes with its own ``__call__``, which reads its
    context only to word an error.

    Why: the serializing clients then call it with ``None`` (no context built a record)
    and, if it raises, again with the record's context, whose error is raised.
    """
    return getattr(type(serde).__call__, "__module__", None) == __name__

