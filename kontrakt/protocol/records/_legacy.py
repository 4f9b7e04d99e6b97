"""Legacy message sets (magic 0 and 1): decoding, and a small builder for tests and old peers.

Message layout (big-endian)::

    offset int64 | messageSize int32 | crc uint32 (CRC-32 of the rest) | magic int8 |
    attributes int8 (bits 0-2 codec, bit 3 timestamp type, magic 1 only) |
    [timestamp int64, magic 1 only] | key bytes (int32 length, -1 = null) | value bytes

A compressed message is a *wrapper*: its value is a compressed message set of inner
(uncompressed) messages. With magic 1 the inner offsets are relative (0, 1, ...) and the
wrapper's offset is the absolute offset of the *last* inner message; with magic 0 the inner
offsets are absolute. A magic 1 wrapper with log-append time gives every inner message the
wrapper's timestamp.
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Iterator
from typing import Final

from kontrakt.errors import CorruptRecordError
from kontrakt.protocol.records._compression import CompressionType, compress, decompress
from kontrakt.protocol.records._model import Buffer, Record, TimestampType, located

__all__ = ["LegacyBatch", "LegacyMessageSetBuilder"]

_V0: Final = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_V1: Final = struct.Struct(">qiIbbq")  # + timestamp
_INT32: Final = struct.Struct(">i")
_OFFSET_SIZE: Final = struct.Struct(">qi")
_CRC: Final = struct.Struct(">I")
_HEADER_SIZE: Final = {0: _V0.size, 1: _V1.size}
#: smallest messageSize: crc + magic + attributes (+ timestamp) + two null lengths
MIN_MESSAGE_SIZE: Final = {0: 14, 1: 22}
_CODEC_MASK: Final = 0x07
_TIMESTAMP_TYPE_MASK: Final = 0x08
_new_record = tuple.__new__


class LegacyBatch:
    """One top-level legacy message: a plain message (one record) or a compressed wrapper.

    It offers the same read-only attributes as :class:`~kontrakt.protocol.records.RecordBatch`
    so record-set readers can treat both alike (idempotence fields are -1, never control).

    Attributes:
        offset: the message's offset field (for a magic 1 wrapper: its last inner offset).
        magic: 0 or 1.
        crc: stored CRC-32.
        attributes: raw attribute bits.
        timestamp: message timestamp (-1 for magic 0).
        key, value: raw key and value (for a wrapper the value is the compressed inner set).
        topic, partition: attached to errors.
    """

    __slots__ = ("_data", "_end", "_start", "_value", "attributes", "crc", "key", "magic",
                 "offset", "partition", "timestamp", "topic")

    producer_id: Final = -1
    producer_epoch: Final = -1
    base_sequence: Final = -1
    partition_leader_epoch: Final = -1
    is_transactional: Final = False
    is_control: Final = False

    offset: int
    magic: int
    crc: int
    attributes: int
    timestamp: int
    _start: int
    _end: int

    def __init__(self, data: bytes, start: int = 0, *, topic: str | None = None,
                 partition: int | None = None) -> None:
        """Parse the message at ``data[start:]`` (the caller checked it is complete).

        Raises:
            CorruptRecordError: bad magic, size too small or past the buffer, bad lengths.
        """
        self.topic = topic
        self.partition = partition
        self._data = data
        self._start = start
        if len(data) - start < _V0.size:
            raise self._error("truncated legacy message header", None)
        offset, size, crc, magic, attrs = _V0.unpack_from(data, start)
        self.offset = offset
        if magic not in (0, 1):
            raise self._error(f"legacy message has magic {magic}", offset)
        if size < MIN_MESSAGE_SIZE[magic]:
            raise self._error(f"legacy message size {size} is too small", offset)
        end = start + 12 + size
        if end > len(data):
            raise self._error(f"legacy message of {size} bytes is truncated", offset)
        self._end = end
        self.magic = magic
        self.crc = crc
        self.attributes = attrs
        pos = start + _HEADER_SIZE[magic]
        self.timestamp = _V1.unpack_from(data, start)[5] if magic == 1 else -1
        self.key, pos = self._read_bytes(pos)
        value, pos = self._read_bytes(pos)
        if pos != end:
            raise self._error(f"legacy message has {end - pos} bytes after its value", offset)
        self._value = value

    def _error(self, message: str, offset: int | None) -> CorruptRecordError:
        return CorruptRecordError(message, topic=self.topic, partition=self.partition,
                                  offset=offset)

    def _read_bytes(self, pos: int) -> tuple[bytes | None, int]:
        data = self._data
        if pos + 4 > self._end:
            raise self._error("truncated legacy message length field", self.offset)
        (n,) = _INT32.unpack_from(data, pos)
        pos += 4
        if n == -1:
            return None, pos
        if n < 0 or pos + n > self._end:
            raise self._error(f"legacy message field length {n} is invalid", self.offset)
        return data[pos:pos + n], pos + n

    @property
    def value(self) -> bytes | None:
        """The raw value (compressed inner set for a wrapper)."""
        return self._value

    @property
    def compression(self) -> int:
        """Codec id."""
        return self.attributes & _CODEC_MASK

    @property
    def timestamp_type(self) -> TimestampType:
        """NO_TIMESTAMP_TYPE for magic 0, else CREATE_TIME or LOG_APPEND_TIME."""
        if self.magic == 0:
            return TimestampType.NO_TIMESTAMP_TYPE
        return TimestampType(1 if self.attributes & _TIMESTAMP_TYPE_MASK else 0)

    @property
    def size_in_bytes(self) -> int:
        """Size of the message including offset and size fields."""
        return self._end - self._start

    @property
    def base_offset(self) -> int:
        """Offset of the first record (decompresses a wrapper to find it)."""
        if not self.attributes & _CODEC_MASK:
            return self.offset
        records = self.records(check_crcs=False)
        return records[0].offset if records else self.offset

    @property
    def last_offset(self) -> int:
        """Offset of the last record in this message."""
        return self.offset

    @property
    def next_offset(self) -> int:
        """Offset a consumer continues from after this message."""
        return self.offset + 1

    @property
    def leader_epoch(self) -> int:
        """Always -1: legacy messages carry no leader epoch."""
        return -1

    def raw(self) -> bytes:
        """The message's bytes exactly as received."""
        return self._data[self._start:self._end]

    def compute_crc(self) -> int:
        """CRC-32 of the message bytes after the crc field."""
        return zlib.crc32(memoryview(self._data)[self._start + 16:self._end]) & 0xFFFFFFFF

    def validate_crc(self) -> None:
        """Check the stored CRC.

        Raises:
            CorruptRecordError: the CRC does not match.
        """
        actual = self.compute_crc()
        if actual != self.crc:
            raise self._error(f"legacy message CRC mismatch: stored {self.crc:#010x}, "
                              f"computed {actual:#010x}", self.offset)

    def records(self, *, check_crcs: bool = True, max_size: int | None = None) -> list[Record]:
        """The record(s) this message holds.

        Args:
            check_crcs: validate inner messages' CRCs of a compressed wrapper.
            max_size: the most bytes a wrapper's value may decompress to; None: no limit.

        Returns:
            One record for a plain message, the inner records for a wrapper.

        Raises:
            UnsupportedCodecError: unknown codec id.
            DecompressionLimitError: the wrapper decompresses to more than ``max_size``.
            CorruptRecordError: bad compressed payload or malformed inner messages.
        """
        return [r for piece in self.iter_records(check_crcs=check_crcs, max_size=max_size)
                for r in piece]

    def iter_records(self, *, check_crcs: bool = True, max_size: int | None = None,
                     piece: int = 1 << 62) -> Iterator[list[Record]]:
        """The records of :meth:`records`, in lists of at most ``piece`` records made one
        at a time: a wrapper of millions of small messages is never materialized whole.

        A wrapper's inner messages are walked once first, reading only their offsets and
        sizes (magic 1 offsets are relative to the last one's), so a malformed inner set
        raises before any record is yielded; a bad inner message (CRC, nested compression)
        raises after the pieces before it.

        Raises:
            see :meth:`records`.
        """
        codec = self.attributes & _CODEC_MASK
        ts_type = int(self.timestamp_type)
        if codec == 0:
            yield [_new_record(Record, (self.offset, self.timestamp, ts_type, self.key,
                                        self._value, []))]
            return
        if self._value is None:
            raise self._error("compressed legacy message has a null value", self.offset)
        try:
            raw = decompress(codec, self._value, lz4_legacy_header=self.magic == 0,
                             max_size=max_size)
        except CorruptRecordError as exc:
            raise located(exc, self.topic, self.partition, self.offset) from None
        size = len(raw)
        pos = 0
        last = None
        # The inner set must hold only complete messages; bound the loop by its size.
        while pos < size:
            if size - pos < 12:
                raise self._error("truncated message inside compressed wrapper", self.offset)
            offset, length = _OFFSET_SIZE.unpack_from(raw, pos)
            end = pos + 12 + length
            if length < MIN_MESSAGE_SIZE[0] or end > size:
                LegacyBatch(raw, pos, topic=self.topic, partition=self.partition)  # raises
                raise self._error("malformed message inside compressed wrapper", self.offset)
            last = offset
            pos = end
        if last is None:
            return
        delta = self.offset - last if self.magic == 1 else 0
        if delta < 0:
            # A producer-side wrapper (offset 0, before the broker assigned offsets): keep the
            # relative offsets, as kafka-python does, rather than yield negative offsets.
            delta = 0
        log_append = self.magic == 1 and ts_type == TimestampType.LOG_APPEND_TIME
        out: list[Record] = []
        pos = 0
        while pos < size:
            m = LegacyBatch(raw, pos, topic=self.topic, partition=self.partition)
            if m.attributes & _CODEC_MASK:
                raise self._error("nested compression in legacy message", self.offset)
            if check_crcs:
                m.validate_crc()
            out.append(_new_record(Record, (
                m.offset + delta, self.timestamp if log_append else m.timestamp, ts_type,
                m.key, m._value, [])))
            pos = m._end
            if len(out) >= piece:
                yield out
                out = []
        if out:
            yield out

    def __repr__(self) -> str:
        return (f"LegacyBatch(offset={self.offset}, magic={self.magic}, "
                f"compression={self.compression})")


def _encode_message(magic: int, offset: int, timestamp: int, attributes: int,
                    key: bytes | None, value: bytes | None) -> bytes:
    parts = [bytes([magic, attributes])]
    if magic == 1:
        parts.append(struct.pack(">q", timestamp))
    for field in (key, value):
        if field is None:
            parts.append(b"\xff\xff\xff\xff")
        else:
            parts.append(_INT32.pack(len(field)))
            parts.append(bytes(field))
    body = b"".join(parts)
    crc = zlib.crc32(body) & 0xFFFFFFFF
    return struct.pack(">qiI", offset, len(body) + 4, crc) + body


class LegacyMessageSetBuilder:
    """Builds a magic 0 or 1 message set (for tests and brokers that only speak old formats).

    Records are appended with offsets relative to the set; :meth:`build` writes absolute
    offsets from ``base_offset`` (inner offsets of a magic 1 wrapper stay relative, as Kafka
    writes them).
    """

    __slots__ = ("_codec", "_level", "_log_append_time", "_magic", "_records")

    def __init__(self, magic: int, *, compression: CompressionType | int | str | None = None,
                 compression_level: int | None = None, log_append_time: bool = False) -> None:
        """Create an empty builder.

        Args:
            magic: 0 or 1.
            compression: codec; compressed sets become one wrapper message.
            compression_level: codec level, None for the default.
            log_append_time: (magic 1) mark timestamps as log append time.

        Raises:
            ValueError: magic is not 0 or 1.
            UnsupportedCodecError: unknown codec.
        """
        if magic not in (0, 1):
            raise ValueError(f"legacy magic must be 0 or 1, not {magic}")
        self._magic = magic
        self._codec = CompressionType.from_name(compression)
        self._level = compression_level
        self._log_append_time = log_append_time
        self._records: list[tuple[int, bytes | None, bytes | None]] = []

    def append(self, timestamp: int | None, key: bytes | None, value: bytes | None) -> int:
        """Add a message; returns its offset relative to the set."""
        if timestamp is None:
            timestamp = int(time.time() * 1000)
        self._records.append((timestamp, key, value))
        return len(self._records) - 1

    def build(self, base_offset: int = 0) -> bytes:
        """Encode the message set.

        Args:
            base_offset: absolute offset of the first message.

        Returns:
            The message set bytes (empty for an empty builder).
        """
        magic = self._magic
        ts_attr = _TIMESTAMP_TYPE_MASK if magic == 1 and self._log_append_time else 0
        if not self._codec:
            return b"".join(
                _encode_message(magic, base_offset + i, ts if magic else -1, ts_attr, k, v)
                for i, (ts, k, v) in enumerate(self._records))
        if not self._records:
            return b""
        first = 0 if magic == 1 else base_offset
        inner = b"".join(
            _encode_message(magic, first + i, ts if magic else -1, 0, k, v)
            for i, (ts, k, v) in enumerate(self._records))
        payload = compress(self._codec, inner, self._level, lz4_legacy_header=magic == 0)
        last = base_offset + len(self._records) - 1
        max_ts = max(ts for ts, _, _ in self._records) if magic else -1
        return _encode_message(magic, last, max_ts, int(self._codec) | ts_attr, None, payload)


def read_legacy_records(data: Buffer, *, check_crcs: bool = True) -> list[Record]:
    """Decode every record of a complete legacy message set (test helper)."""
    raw = bytes(data)
    out: list[Record] = []
    pos = 0
    while pos < len(raw):
        msg = LegacyBatch(raw, pos)
        if check_crcs:
            msg.validate_crc()
        out.extend(msg.records(check_crcs=check_crcs))
        pos = msg._end
    return out

