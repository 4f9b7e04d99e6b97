"""Wire framing of schema ids, kept apart from the formats.

Two places can carry the id of the schema a payload was written with:

* the Confluent prefix: magic byte ``0`` and the id as a 4-byte big-endian integer, or magic
  byte ``1`` and a 16-byte schema GUID; Protobuf payloads then carry the message indexes (the
  path to the message type in its file) as zig-zag varints, where the common path ``[0]`` is
  the single byte ``0``;
* a record header, ``__key_schema_id`` or ``__value_schema_id``, holding magic byte ``1``, the
  GUID and (Protobuf) the message indexes; the payload is then the bare encoding.

The dual deserializer looks at the header first and falls back to the prefix, so a consumer
reads both.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

from kontrakt.errors import SerializationError
from kontrakt.serde._context import MessageField, SerializationContext

__all__ = [
    "KEY_SCHEMA_ID_HEADER",
    "MAGIC_BYTE",
    "MAGIC_BYTE_GUID",
    "VALUE_SCHEMA_ID_HEADER",
    "SchemaId",
    "SchemaIdDeserializer",
    "SchemaIdSerializer",
    "decode_message_indexes",
    "dual_schema_id_deserializer",
    "encode_message_indexes",
    "has_schema_id_header",
    "header_schema_id_serializer",
    "prefix_schema_id_deserializer",
    "prefix_schema_id_serializer",
]

MAGIC_BYTE = 0
MAGIC_BYTE_GUID = 1
KEY_SCHEMA_ID_HEADER = "__key_schema_id"
VALUE_SCHEMA_ID_HEADER = "__value_schema_id"

# A message-index array longer than this is corrupt data, not a real nesting depth.
_MAX_INDEXES = 100_000


@dataclass(frozen=True, slots=True)
class SchemaId:
    """Identifies the writer schema of one payload.

    Attributes:
        id: the registry's numeric schema id, when known.
        guid: the schema's GUID, when known.
        message_indexes: Protobuf only: the path to the message type in its file.
        zigzag: whether message indexes use zig-zag varints (False only for the deprecated
            Protobuf format, which used unsigned varints).
    """

    id: int | None = None
    guid: uuid.UUID | None = None
    message_indexes: tuple[int, ...] | None = None
    zigzag: bool = field(default=True, compare=False)

    def id_to_bytes(self) -> bytes:
        """The Confluent prefix: magic 0, 4-byte id, message indexes.

        Raises:
            SerializationError: the id is not set or does not fit in 4 bytes.
        """
        if self.id is None:
            raise SerializationError("schema id is not set")
        if not 0 <= self.id <= 0xFFFFFFFF:
            raise SerializationError(f"schema id {self.id} does not fit in 4 bytes")
        out = b"\x00" + self.id.to_bytes(4, "big")
        if self.message_indexes is not None:
            out += encode_message_indexes(self.message_indexes, self.zigzag)
        return out

    def guid_to_bytes(self) -> bytes:
        """Magic 1, the 16-byte GUID, message indexes (the header form).

        Raises:
            SerializationError: the GUID is not set.
        """
        if self.guid is None:
            raise SerializationError("schema GUID is not set")
        out = b"\x01" + self.guid.bytes
        if self.message_indexes is not None:
            out += encode_message_indexes(self.message_indexes, self.zigzag)
        return out


def _varint(value: int, zigzag: bool) -> bytes:
    if zigzag:
        value = (value << 1) ^ (value >> 63)
    elif value < 0:
        raise SerializationError(f"message index {value} cannot be an unsigned varint")
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_message_indexes(indexes: Sequence[int], zigzag: bool = True) -> bytes:
    """Encode a Protobuf message-index path: count then each index, ``[0]`` as one zero byte.

    Args:
        indexes: the path, outermost first; must not be empty.
        zigzag: zig-zag varints (current format) or unsigned varints (deprecated format).

    Returns:
        The encoded bytes.

    Raises:
        SerializationError: the path is empty.
    """
    if not indexes:
        raise SerializationError("a message-index path cannot be empty")
    if len(indexes) == 1 and indexes[0] == 0:
        return b"\x00"
    return _varint(len(indexes), zigzag) + b"".join(_varint(i, zigzag) for i in indexes)


def _read_varint(data: bytes, pos: int, zigzag: bool) -> tuple[int, int]:
    value = 0
    shift = 0
    end = len(data)
    while True:
        if pos >= end:
            raise SerializationError("payload truncated inside a message-index varint")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise SerializationError("message-index varint is longer than 10 bytes")
    if zigzag:
        value = (value >> 1) ^ -(value & 1)
    return value, pos


def decode_message_indexes(data: bytes, pos: int, zigzag: bool = True) -> tuple[list[int], int]:
    """Decode a message-index path starting at ``data[pos]``.

    Returns:
        The path (``[0]`` for the shortcut) and the position after it.

    Raises:
        SerializationError: truncated data or an impossible count.
    """
    count, pos = _read_varint(data, pos, zigzag)
    if count == 0:
        return [0], pos
    if count < 0 or count > _MAX_INDEXES:
        raise SerializationError(f"invalid message-index count {count}")
    out = []
    for _ in range(count):
        value, pos = _read_varint(data, pos, zigzag)
        out.append(value)
    return out, pos


#: ``(payload, ctx, schema_id) -> bytes``: puts the schema id somewhere and returns the payload.
SchemaIdSerializer = Callable[[bytes, SerializationContext | None, SchemaId], bytes]
#: ``(data, ctx, protobuf, zigzag) -> (schema id, offset of the bare payload in data)``.
SchemaIdDeserializer = Callable[
    [bytes, SerializationContext | None, bool, bool], tuple[SchemaId, int]
]


def prefix_schema_id_serializer(
    payload: bytes, ctx: SerializationContext | None, schema_id: SchemaId
) -> bytes:
    """Prefix ``payload`` with magic 0 and the 4-byte schema id (the default).

    Raises:
        SerializationError: the schema id is not set.
    """
    return schema_id.id_to_bytes() + payload


def header_schema_id_serializer(
    payload: bytes, ctx: SerializationContext | None, schema_id: SchemaId
) -> bytes:
    """Put magic 1 and the schema GUID into the ``__key_schema_id``/``__value_schema_id`` header.

    Returns:
        ``payload`` unchanged.

    Raises:
        SerializationError: no context or headers to write into, or no GUID.
    """
    if ctx is None or ctx.headers is None:
        raise SerializationError("the header schema-id format needs a context with headers")
    key = KEY_SCHEMA_ID_HEADER if ctx.field is MessageField.KEY else VALUE_SCHEMA_ID_HEADER
    value = schema_id.guid_to_bytes()
    headers = ctx.headers
    if isinstance(headers, list):
        headers.append((key, value))
    elif isinstance(headers, dict):
        headers[key] = value
    else:
        raise SerializationError(f"cannot add a header to {type(headers).__name__}")
    return payload


def has_schema_id_header(ctx: SerializationContext) -> bool:
    """Whether ``ctx.headers`` carries the schema-id header for ``ctx.field``."""
    headers = ctx.headers
    if not headers:
        return False
    key = KEY_SCHEMA_ID_HEADER if ctx.field is MessageField.KEY else VALUE_SCHEMA_ID_HEADER
    if isinstance(headers, dict):
        return key in headers
    return any(h[0] == key for h in cast("list[tuple[str, bytes | None]]", headers))


def _parse_id(
    data: bytes, pos: int, protobuf: bool, zigzag: bool
) -> tuple[SchemaId, int]:
    if len(data) <= pos:
        raise SerializationError("empty payload: no schema id")
    magic = data[pos]
    if magic == MAGIC_BYTE:
        if len(data) < pos + 5:
            raise SerializationError(
                f"payload of {len(data)} bytes is too short for the 5-byte schema-id prefix")
        sid = int.from_bytes(data[pos + 1:pos + 5], "big")
        guid = None
        pos += 5
    elif magic == MAGIC_BYTE_GUID:
        if len(data) < pos + 17:
            raise SerializationError(
                f"payload of {len(data)} bytes is too short for a magic-1 schema GUID")
        sid = None
        guid = uuid.UUID(bytes=bytes(data[pos + 1:pos + 17]))
        pos += 17
    else:
        raise SerializationError(
            f"unknown magic byte {magic}: not written by a schema-registry serializer")
    indexes = None
    if protobuf:
        idx, pos = decode_message_indexes(data, pos, zigzag)
        indexes = tuple(idx)
    return SchemaId(sid, guid, indexes, zigzag), pos


def prefix_schema_id_deserializer(
    data: bytes, ctx: SerializationContext | None, protobuf: bool = False, zigzag: bool = True
) -> tuple[SchemaId, int]:
    """Read the schema id from the payload prefix.

    Returns:
        The schema id and the offset where the bare encoding starts.

    Raises:
        SerializationError: unknown magic byte or truncated prefix.
    """
    return _parse_id(data, 0, protobuf, zigzag)


def dual_schema_id_deserializer(
    data: bytes, ctx: SerializationContext | None, protobuf: bool = False, zigzag: bool = True
) -> tuple[SchemaId, int]:
    """Read the schema id from the record header when there is one, else from the prefix.

    Returns:
        The schema id and the offset where the bare encoding starts (0 for the header form).

    Raises:
        SerializationError: unreadable header or prefix.
    """
    if ctx is not None and ctx.headers:
        key = KEY_SCHEMA_ID_HEADER if ctx.field is MessageField.KEY else VALUE_SCHEMA_ID_HEADER
        value = None
        headers = ctx.headers
        if isinstance(headers, dict):
            value = headers.get(key)
        else:
            for k, v in cast("list[tuple[str, bytes | None]]", headers):
                if k == key:
                    value = v
                    break
        if value is not None:
            sid, _ = _parse_id(bytes(value), 0, protobuf, zigzag)
            return sid, 0
    return _parse_id(data, 0, protobuf, zigzag)
