"""Primitive serdes with the encodings of Kafka's (and confluent-kafka's) built-in serializers.

Integer is a 4-byte big-endian signed int, Long 8 bytes, Short 2 bytes, Double and Float IEEE
754 big-endian, String the text in a codec (UTF-8 by default), UUID its canonical 36-character
text in UTF-8 (as Kafka's ``UUIDSerializer``), Bytes as is. ``None`` maps to ``None`` both ways.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

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


class _StructSerializer:
    _struct: struct.Struct
    _what: str

    def __call__(self, obj: Any, ctx: SerializationContext | None = None) -> bytes | None:
        """Encode ``obj``; ``None`` gives ``None``.

        Raises:
            KeySerializationError / ValueSerializationError: wrong type or out of range.
        """
        if obj is None:
            return None
        if isinstance(obj, bool) or not isinstance(obj, self._accepts):
            raise serialization_error(
                f"{type(self).__name__} needs {self._what}, got {type(obj).__name__}", ctx)
        try:
            return self._struct.pack(obj)
        except (struct.error, OverflowError) as e:
            raise serialization_error(f"{obj!r} does not fit in {self._what}: {e}", ctx, e) from e

    _accepts: tuple[type, ...] = (int,)


class _StructDeserializer:
    _struct: struct.Struct
    _what: str

    def __call__(self, data: bytes | None, ctx: SerializationContext | None = None) -> Any:
        """Decode exactly one value; ``None`` gives ``None``.

        Raises:
            KeyDeserializationError / ValueDeserializationError: wrong length.
        """
        if data is None:
            return None
        if len(data) != self._struct.size:
            raise deserialization_error(
                f"{type(self).__name__} needs exactly {self._struct.size} bytes for {self._what},"
                f" got {len(data)}", ctx, data)
        return self._struct.unpack(data)[0]


class IntegerSerializer(_StructSerializer):
    """int32, 4 bytes big-endian (Kafka ``IntegerSerializer``)."""

    _struct = struct.Struct(">i")
    _what = "an int32"


class IntegerDeserializer(_StructDeserializer):
    """int32, 4 bytes big-endian (Kafka ``IntegerDeserializer``)."""

    _struct = struct.Struct(">i")
    _what = "an int32"


class LongSerializer(_StructSerializer):
    """int64, 8 bytes big-endian (Kafka ``LongSerializer``)."""

    _struct = struct.Struct(">q")
    _what = "an int64"


class LongDeserializer(_StructDeserializer):
    """int64, 8 bytes big-endian (Kafka ``LongDeserializer``)."""

    _struct = struct.Struct(">q")
    _what = "an int64"


class ShortSerializer(_StructSerializer):
    """int16, 2 bytes big-endian (Kafka ``ShortSerializer``)."""

    _struct = struct.Struct(">h")
    _what = "an int16"


class ShortDeserializer(_StructDeserializer):
    """int16, 2 bytes big-endian (Kafka ``ShortDeserializer``)."""

    _struct = struct.Struct(">h")
    _what = "an int16"


class DoubleSerializer(_StructSerializer):
    """IEEE 754 binary64, big-endian (Kafka ``DoubleSerializer``)."""

    _struct = struct.Struct(">d")
    _what = "a double"
    _accepts = (int, float)


class DoubleDeserializer(_StructDeserializer):
    """IEEE 754 binary64, big-endian (Kafka ``DoubleDeserializer``)."""

    _struct = struct.Struct(">d")
    _what = "a double"


class FloatSerializer(_StructSerializer):
    """IEEE 754 binary32, big-endian (Kafka ``FloatSerializer``); rounds to float32."""

    _struct = struct.Struct(">f")
    _what = "a float"
    _accepts = (int, float)


class FloatDeserializer(_StructDeserializer):
    """IEEE 754 binary32, big-endian (Kafka ``FloatDeserializer``)."""

    _struct = struct.Struct(">f")
    _what = "a float"


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
