"""Shared pieces of the record codecs: the decoded :class:`Record`, timestamp types, and the
varint lookup tables the hot loops use.

Record fields are all zig-zag varints; almost every value (lengths of keys and values, offset
and timestamp deltas inside one batch) is below 8192 and so fits in one or two varint bytes.
The tables turn those cases into one list index instead of a Python loop.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final, NamedTuple, TypeAlias

from kontrakt.errors import CorruptRecordError, DecompressionLimitError, UnsupportedCodecError

__all__ = ["Buffer", "Header", "Record", "TimestampType"]

Buffer: TypeAlias = bytes | bytearray | memoryview
Header: TypeAlias = tuple[str, bytes | None]


def located(exc: CorruptRecordError, topic: str | None, partition: int | None,
            offset: int | None) -> CorruptRecordError:
    """``exc`` (raised without a location) again, of the same class, naming where."""
    if isinstance(exc, DecompressionLimitError):
        return DecompressionLimitError(str(exc), limit=exc.limit, topic=topic,
                                       partition=partition, offset=offset)
    if isinstance(exc, UnsupportedCodecError):
        return UnsupportedCodecError(str(exc), topic=topic, partition=partition, offset=offset)
    return CorruptRecordError(str(exc), topic=topic, partition=partition, offset=offset)


class TimestampType(IntEnum):
    """What a record's timestamp means."""

    NO_TIMESTAMP_TYPE = -1
    """Magic 0 messages carry no timestamp (the timestamp reads as -1)."""
    CREATE_TIME = 0
    """Set by the producer."""
    LOG_APPEND_TIME = 1
    """Set by the broker when it appended the batch (topic ``message.timestamp.type``)."""


class Record(NamedTuple):
    """One decoded record: a light immutable tuple with named fields.

    Attributes:
        offset: absolute offset in the partition.
        timestamp: milliseconds since the epoch (-1 when the message format has none).
        timestamp_type: a :class:`TimestampType` value (plain int for speed).
        key: key bytes or None.
        value: value bytes or None.
        headers: ``[(name, value or None), ...]``; an empty list when there are none.
    """

    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list[Header]


# --- varint tables -------------------------------------------------------------------------

_TABLE_BITS: Final = 14
#: zig-zag decode of every unsigned value below 2**14 (the one- and two-byte varints).
ZIGZAG_DECODE: Final[list[int]] = [(u >> 1) ^ -(u & 1) for u in range(1 << _TABLE_BITS)]
#: first value whose zig-zag varint needs three bytes
SMALL_LIMIT: Final = 1 << (_TABLE_BITS - 1)
#: TWO_BYTE_VARINTS[b][c]: the zig-zag value of the varint whose first byte is b (>= 128)
#: and second byte is c, or None when c has its continuation bit set too. Two list lookups
#: are cheaper in CPython than the shifts and masks that combine the two bytes.
TWO_BYTE_VARINTS: Final[list[list[int | None] | None]] = [None] * 128 + [
    [ZIGZAG_DECODE[(b & 127) | (c << 7)] if c < 128 else None for c in range(256)]
    for b in range(128, 256)]


def _encode_varint_slow(value: int) -> bytes:
    u = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while u > 0x7F:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


#: zig-zag varint bytes of every value in ``range(SMALL_LIMIT)``
VARINT_BYTES: Final[list[bytes]] = [_encode_varint_slow(v) for v in range(SMALL_LIMIT)]


def encode_varint(value: int) -> bytes:
    """Zig-zag varint bytes of ``value`` (any signed 64-bit integer)."""
    if 0 <= value < SMALL_LIMIT:
        return VARINT_BYTES[value]
    return _encode_varint_slow(value)


def decode_varint_slow(data: bytes, pos: int) -> tuple[int, int]:
    """Read a zig-zag varint of up to 10 bytes at ``pos``; return (value, new position).

    Raises:
        CorruptRecordError: the varint runs past the data or is longer than 10 bytes.
    """
    result = 0
    shift = 0
    n = len(data)
    for _ in range(10):
        if pos >= n:
            raise CorruptRecordError(f"truncated varint at byte {pos}")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    raise CorruptRecordError(f"varint longer than 10 bytes before byte {pos}")
