"""Kafka v2 record batches (magic 2): building and decoding.

Batch layout (all big-endian)::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 |
    crc uint32 (CRC-32C of everything after it) | attributes int16 | lastOffsetDelta int32 |
    baseTimestamp int64 | maxTimestamp int64 | producerId int64 | producerEpoch int16 |
    baseSequence int32 | recordCount int32 | records...

    attributes: bits 0-2 codec, bit 3 timestamp type (1 = log append time),
                bit 4 transactional, bit 5 control, bit 6 delete horizon set

    record: length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
            keyLength varint | key | valueLength varint | value | headerCount varint |
            (keyLength varint | key utf-8 | valueLength varint | value) * headerCount

Both directions are written for speed: precompiled structs, the varint tables of
:mod:`._model`, one ``b"".join`` per batch, and decoded records as plain named tuples.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator, Sequence
from typing import Final, Literal

import crc32c as _crc32c_mod

from kontrakt.errors import CorruptRecordError, UnsupportedCodecError
from kontrakt.protocol.records._compression import CompressionType, compress, decompress
from kontrakt.protocol.records._model import (
    SMALL_LIMIT,
    VARINT_BYTES,
    ZIGZAG_DECODE,
    Buffer,
    Header,
    Record,
    TimestampType,
    decode_varint_slow,
    encode_varint,
)

__all__ = ["BATCH_HEADER_SIZE", "RecordBatch", "RecordBatchBuilder", "decode_records"]

_crc32c = _crc32c_mod.crc32c

HEADER: Final = struct.Struct(">qiibIhiqqqhii")
BATCH_HEADER_SIZE: Final = HEADER.size  # 61
#: offset + length: the "log overhead" before every batch or legacy message
LOG_OVERHEAD: Final = 12
_CRC_OFFSET: Final = 17
_ATTRIBUTES_OFFSET: Final = 21
_CRC: Final = struct.Struct(">I")

CODEC_MASK: Final = 0x07
TIMESTAMP_TYPE_MASK: Final = 0x08
TRANSACTIONAL_MASK: Final = 0x10
CONTROL_MASK: Final = 0x20
DELETE_HORIZON_MASK: Final = 0x40

_new_record = tuple.__new__


def _corrupt(message: str, topic: str | None, partition: int | None,
             offset: int | None) -> CorruptRecordError:
    return CorruptRecordError(message, topic=topic, partition=partition, offset=offset)


def decode_records(
    data: bytes,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    timestamp_type: int,
    max_timestamp: int,
) -> list[Record]:
    """Decode ``count`` v2 records from ``data[pos:end]``.

    Args:
        data: buffer holding the records (the batch blob, or the decompressed payload).
        pos, end: where the records start and end in ``data``.
        count: the batch's record count.
        base_offset, base_timestamp, max_timestamp: from the batch header.
        timestamp_type: 0 create time, 1 log append time (every record then gets
            ``max_timestamp``).

    Returns:
        The records in order.

    Raises:
        CorruptRecordError: the bytes do not hold exactly ``count`` well-formed records
            (no location attached; :class:`RecordBatch` adds it).
    """
    zz = ZIGZAG_DECODE
    slow = decode_varint_slow
    new = _new_record
    rec_cls = Record
    log_append = timestamp_type == 1
    out: list[Record] = []
    append = out.append
    try:
        for _ in range(count):
            # Every varint read below is the same three-way unrolled pattern:
            # one byte (table), two bytes (table), otherwise the generic loop. Unrolled by
            # hand because a helper call per varint would cost more than the decoding.
            b = data[pos]
            if b < 128:
                length = zz[b]
                pos += 1
            elif (c := data[pos + 1]) < 128:
                length = zz[(b & 127) | (c << 7)]
                pos += 2
            else:
                length, pos = slow(data, pos)
            rec_end = pos + length
            # pos + 1: skip the record attributes byte, unused by every Kafka version so far.
            b = data[pos + 1]
            if b < 128:
                ts_delta = zz[b]
                pos += 2
            elif (c := data[pos + 2]) < 128:
                ts_delta = zz[(b & 127) | (c << 7)]
                pos += 3
            else:
                ts_delta, pos = slow(data, pos + 1)
            b = data[pos]
            if b < 128:
                offset_delta = zz[b]
                pos += 1
            elif (c := data[pos + 1]) < 128:
                offset_delta = zz[(b & 127) | (c << 7)]
                pos += 2
            else:
                offset_delta, pos = slow(data, pos)
            b = data[pos]
            if b < 128:
                n = zz[b]
                pos += 1
            elif (c := data[pos + 1]) < 128:
                n = zz[(b & 127) | (c << 7)]
                pos += 2
            else:
                n, pos = slow(data, pos)
            if n >= 0:
                key: bytes | None = data[pos:pos + n]
                pos += n
            elif n == -1:
                key = None
            else:
                raise CorruptRecordError(f"negative key length {n}")
            b = data[pos]
            if b < 128:
                n = zz[b]
                pos += 1
            elif (c := data[pos + 1]) < 128:
                n = zz[(b & 127) | (c << 7)]
                pos += 2
            else:
                n, pos = slow(data, pos)
            if n >= 0:
                value: bytes | None = data[pos:pos + n]
                pos += n
            elif n == -1:
                value = None
            else:
                raise CorruptRecordError(f"negative value length {n}")
            b = data[pos]
            if b == 0:
                headers: list[Header] = []
                pos += 1
            else:
                headers, pos = _decode_headers(data, pos)
            if pos != rec_end:
                raise CorruptRecordError(
                    f"record length says {length} bytes but its fields take "
                    f"{pos - rec_end + length}"
                )
            append(new(rec_cls, (
                base_offset + offset_delta,
                base_timestamp + ts_delta, timestamp_type, key, value, headers,
            )))
    except IndexError:
        raise CorruptRecordError(f"record {len(out)} of {count} runs past the batch") from None
    if pos != end:
        raise CorruptRecordError(
            f"batch holds {end - pos} bytes after its {count} records" if pos < end
            else f"records of the batch run {pos - end} bytes past its end"
        )
    if log_append:
        # Rare (topics with LogAppendTime): every record takes the batch's append time. Done
        # afterwards so the hot loop has no branch for it.
        return [new(rec_cls, (r[0], max_timestamp, 1, r[3], r[4], r[5])) for r in out]
    return out


def _decode_headers(data: bytes, pos: int) -> tuple[list[Header], int]:
    count, pos = decode_varint_slow(data, pos)
    if count < 0:
        raise CorruptRecordError(f"negative header count {count}")
    headers: list[Header] = []
    size = len(data)
    for _ in range(count):
        n, pos = decode_varint_slow(data, pos)
        if n < 0 or pos + n > size:
            raise CorruptRecordError(f"bad header key length {n}")
        try:
            name = data[pos:pos + n].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptRecordError(f"header key is not UTF-8: {exc}") from None
        pos += n
        n, pos = decode_varint_slow(data, pos)
        if n >= 0:
            if pos + n > size:
                raise CorruptRecordError(f"header value of {n} bytes runs past the batch")
            headers.append((name, data[pos:pos + n]))
            pos += n
        elif n == -1:
            headers.append((name, None))
        else:
            raise CorruptRecordError(f"negative header value length {n}")
    return headers, pos


class RecordBatch:
    """A v2 record batch found in a record set; header fields are read eagerly, records on
    demand with :meth:`records`.

    Attributes:
        base_offset: offset of the first record (assigned by the broker).
        batch_length: bytes after the length field.
        partition_leader_epoch: leader epoch of the partition when the batch was appended.
        magic: always 2.
        crc: CRC-32C stored in the batch.
        attributes: raw attribute bits.
        last_offset_delta: offset of the last record relative to ``base_offset``.
        base_timestamp: timestamp of the first record (or delete horizon, see attributes).
        max_timestamp: largest record timestamp (the append time for log-append-time topics).
        producer_id, producer_epoch, base_sequence: idempotence state (-1 when absent).
        records_count: number of records the header declares.
        topic, partition: where the batch came from, when the caller said so (error messages).
    """

    __slots__ = (
        "_data", "_end", "_start", "attributes", "base_offset", "base_sequence",
        "base_timestamp", "batch_length", "crc", "last_offset_delta", "magic",
        "max_timestamp", "partition", "partition_leader_epoch", "producer_epoch",
        "producer_id", "records_count", "topic",
    )

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    def __init__(self, data: bytes, start: int = 0, *, topic: str | None = None,
                 partition: int | None = None) -> None:
        """Parse the header of the batch at ``data[start:]``.

        Args:
            data: buffer holding the batch (not copied).
            start: where the batch starts.
            topic, partition: attached to every error this batch raises.

        Raises:
            CorruptRecordError: the header is truncated, the magic is not 2, or the length
                field is too small or runs past ``data``.
        """
        self.topic = topic
        self.partition = partition
        if len(data) - start < BATCH_HEADER_SIZE:
            raise _corrupt(f"truncated batch header: {len(data) - start} bytes", topic,
                           partition, None)
        (self.base_offset, self.batch_length, self.partition_leader_epoch, self.magic,
         self.crc, self.attributes, self.last_offset_delta, self.base_timestamp,
         self.max_timestamp, self.producer_id, self.producer_epoch, self.base_sequence,
         self.records_count) = HEADER.unpack_from(data, start)
        if self.magic != 2:
            raise _corrupt(f"batch has magic {self.magic}, expected 2", topic, partition,
                           self.base_offset)
        if self.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
            raise _corrupt(f"batch length {self.batch_length} is smaller than a batch header",
                           topic, partition, self.base_offset)
        end = start + LOG_OVERHEAD + self.batch_length
        if end > len(data):
            raise _corrupt(f"batch of {self.batch_length} bytes is truncated to "
                           f"{len(data) - start - LOG_OVERHEAD}", topic, partition,
                           self.base_offset)
        if self.records_count < 0:
            raise _corrupt(f"negative record count {self.records_count}", topic, partition,
                           self.base_offset)
        self._data = data
        self._start = start
        self._end = end

    @classmethod
    def from_bytes(cls, data: Buffer, *, check_crc: bool = True, topic: str | None = None,
                   partition: int | None = None) -> RecordBatch:
        """Read exactly one batch from ``data`` (strict: trailing or missing bytes raise).

        Raises:
            CorruptRecordError: see :meth:`__init__`; also on a CRC mismatch or extra bytes.
        """
        raw = data if isinstance(data, bytes) else bytes(data)
        batch = cls(raw, 0, topic=topic, partition=partition)
        if batch._end != len(raw):
            raise _corrupt(f"{len(raw) - batch._end} bytes after the batch", topic, partition,
                           batch.base_offset)
        if check_crc:
            batch.validate_crc()
        return batch

    # --- derived attributes ----------------------------------------------------------------
    @property
    def size_in_bytes(self) -> int:
        """Size of the whole batch including offset and length fields."""
        return self._end - self._start

    @property
    def compression(self) -> int:
        """Codec id (a :class:`CompressionType` value when known)."""
        return self.attributes & CODEC_MASK

    @property
    def timestamp_type(self) -> TimestampType:
        """CREATE_TIME or LOG_APPEND_TIME."""
        return TimestampType(1 if self.attributes & TIMESTAMP_TYPE_MASK else 0)

    @property
    def is_transactional(self) -> bool:
        """True when the batch was written by a transactional producer."""
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        """True for a control batch (transaction commit/abort markers)."""
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        """True when ``base_timestamp`` holds the compaction delete horizon (KIP-534)."""
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def last_offset(self) -> int:
        """Offset of the last record the batch held when written (compaction may remove it)."""
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        """Offset a consumer continues from after this batch."""
        return self.base_offset + self.last_offset_delta + 1

    @property
    def leader_epoch(self) -> int:
        """Alias of ``partition_leader_epoch``."""
        return self.partition_leader_epoch

    @property
    def last_sequence(self) -> int:
        """Sequence number of the last record, or -1 without idempotence."""
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF

    def raw(self) -> bytes:
        """The batch's bytes exactly as received."""
        return self._data[self._start:self._end]

    def compute_crc(self) -> int:
        """CRC-32C of the batch bytes after the crc field."""
        return int(_crc32c(memoryview(self._data)[self._start + _ATTRIBUTES_OFFSET:self._end]))

    def validate_crc(self) -> None:
        """Check the stored CRC.

        Raises:
            CorruptRecordError: the CRC does not match.
        """
        actual = self.compute_crc()
        if actual != self.crc:
            raise _corrupt(f"batch CRC mismatch: stored {self.crc:#010x}, "
                           f"computed {actual:#010x}", self.topic, self.partition,
                           self.base_offset)

    def payload(self) -> bytes:
        """The uncompressed bytes of the batch's records.

        Raises:
            UnsupportedCodecError: unknown codec id.
            CorruptRecordError: the compressed payload cannot be decompressed.
        """
        codec = self.attributes & CODEC_MASK
        body = memoryview(self._data)[self._start + BATCH_HEADER_SIZE:self._end]
        try:
            return decompress(codec, body)
        except UnsupportedCodecError as exc:
            raise UnsupportedCodecError(str(exc), topic=self.topic, partition=self.partition,
                                        offset=self.base_offset) from None
        except CorruptRecordError as exc:
            raise _corrupt(str(exc), self.topic, self.partition, self.base_offset) from None

    def records(self) -> list[Record]:
        """Decompress (if needed) and decode the records.

        Returns:
            The records with absolute offsets and timestamps (log-append-time batches give
            every record ``max_timestamp``).

        Raises:
            UnsupportedCodecError: unknown codec id.
            CorruptRecordError: bad compressed payload or malformed records.
        """
        codec = self.attributes & CODEC_MASK
        if codec == 0:
            data = self._data
            pos = self._start + BATCH_HEADER_SIZE
            end = self._end
        else:
            data = self.payload()
            pos = 0
            end = len(data)
        ts_type = 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0
        try:
            return decode_records(data, pos, end, self.records_count, self.base_offset,
                                  self.base_timestamp, ts_type, self.max_timestamp)
        except CorruptRecordError as exc:
            raise _corrupt(str(exc), self.topic, self.partition, self.base_offset) from None

    def __iter__(self) -> Iterator[Record]:
        """Iterate over :meth:`records`."""
        return iter(self.records())

    def __repr__(self) -> str:
        return (f"RecordBatch(base_offset={self.base_offset}, records={self.records_count}, "
                f"compression={self.compression}, transactional={self.is_transactional}, "
                f"control={self.is_control}, producer_id={self.producer_id})")


class RecordBatchBuilder:
    """Accumulates records and builds one v2 batch.

    The size the builder tracks is the *uncompressed* batch size, which is what
    ``max_batch_size`` bounds (compression can only make the batch smaller).

    Example:
        >>> b = RecordBatchBuilder(compression="zstd")
        >>> b.append(1700000000000, b"k", b"v", [("h", b"1")])
        0
        >>> blob = b.build(base_offset=0)
    """

    __slots__ = (
        "_base_timestamp", "_codec", "_count", "_is_control", "_last_offset_delta",
        "_level", "_log_append_time", "_max_size", "_max_timestamp", "_parts", "_size",
        "_snappy_framing", "base_offset", "base_sequence", "is_transactional",
        "partition_leader_epoch", "producer_epoch", "producer_id",
    )

    def __init__(
        self,
        *,
        compression: CompressionType | int | str | None = CompressionType.NONE,
        compression_level: int | None = None,
        snappy_framing: Literal["xerial", "raw"] = "xerial",
        max_batch_size: int = 1024 * 1024,
        base_offset: int = 0,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        is_transactional: bool = False,
        partition_leader_epoch: int = -1,
        log_append_time: bool = False,
        is_control: bool = False,
    ) -> None:
        """Create an empty builder.

        Args:
            compression: codec (name, id or :class:`CompressionType`).
            compression_level: codec level, None for the default.
            snappy_framing: ``"xerial"`` (as the Java client writes) or ``"raw"``.
            max_batch_size: :meth:`append` refuses a record that would take the uncompressed
                batch past this many bytes (the first record is always accepted).
            base_offset: written as the batch's base offset (producers send 0).
            producer_id, producer_epoch, base_sequence: idempotence state, -1 for none.
            is_transactional: set the transactional attribute.
            partition_leader_epoch: normally -1 from producers; set by brokers.
            log_append_time: set the timestamp-type bit (what a broker does for topics with
                ``message.timestamp.type=LogAppendTime``); used to craft test responses.
            is_control: set the control bit; see :func:`build_control_batch`.

        Raises:
            UnsupportedCodecError: unknown compression.
        """
        self._codec = CompressionType.from_name(compression)
        self._level = compression_level
        self._snappy_framing: Literal["xerial", "raw"] = snappy_framing
        self._max_size = max_batch_size
        self.base_offset = base_offset
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.partition_leader_epoch = partition_leader_epoch
        self._log_append_time = log_append_time
        self._is_control = is_control
        self._parts: list[bytes] = []
        self._size = BATCH_HEADER_SIZE
        self._count = 0
        self._last_offset_delta = -1
        self._base_timestamp = -1
        self._max_timestamp = -1

    @property
    def record_count(self) -> int:
        """Number of records appended so far."""
        return self._count

    @property
    def size_in_bytes(self) -> int:
        """Uncompressed size of the batch built from the records so far."""
        return self._size

    @property
    def compression(self) -> CompressionType:
        """The codec :meth:`build` uses."""
        return self._codec

    @property
    def max_timestamp(self) -> int:
        """Largest timestamp appended so far (-1 when empty)."""
        return self._max_timestamp

    @property
    def last_offset_delta(self) -> int:
        """Offset delta of the last record appended (-1 when empty)."""
        return self._last_offset_delta

    @staticmethod
    def estimate_size(key: Buffer | None, value: Buffer | None,
                      headers: Sequence[Header] | None = None) -> int:
        """Upper bound of the bytes one record adds to a batch (deltas assumed 5 bytes each).

        Args:
            key, value, headers: as for :meth:`append`.

        Returns:
            Bytes.
        """
        size = 1 + 5 + 5 + 5 + 5 + 5 + 5  # length, attrs, ts/offset deltas, k/v lengths, hdrs
        if key is not None:
            size += len(key)
        if value is not None:
            size += len(value)
        for name, hvalue in headers or ():
            size += 10 + len(name.encode("utf-8")) + (len(hvalue) if hvalue is not None else 0)
        return size

    def append(
        self,
        timestamp: int | None,
        key: Buffer | None,
        value: Buffer | None,
        headers: Sequence[Header] | None = None,
        *,
        offset_delta: int | None = None,
    ) -> int | None:
        """Add a record.

        Args:
            timestamp: milliseconds since the epoch; None means now.
            key, value: bytes-like or None.
            headers: ``[(name, value or None), ...]``.
            offset_delta: record offset relative to the base offset; default: one past the
                previous record. Must increase.

        Returns:
            The record's offset delta, or None when the record would take the batch past
            ``max_batch_size`` (the batch is then unchanged; the first record always fits).

        Raises:
            TypeError: key, value or a header value is not bytes-like or None.
            ValueError: ``offset_delta`` does not increase.
        """
        if timestamp is None:
            timestamp = int(time.time() * 1000)
        count = self._count
        if count == 0:
            self._base_timestamp = timestamp
            self._max_timestamp = timestamp
            ts_delta = 0
        else:
            ts_delta = timestamp - self._base_timestamp
        if offset_delta is None:
            offset_delta = self._last_offset_delta + 1
        elif offset_delta <= self._last_offset_delta:
            raise ValueError(f"offset delta {offset_delta} does not follow "
                             f"{self._last_offset_delta}")
        small = VARINT_BYTES
        limit = SMALL_LIMIT
        # Record body = attrs(0) + ts delta + offset delta + key + value + headers; the body's
        # pieces are kept apart and joined once in build().
        tsb = small[ts_delta] if 0 <= ts_delta < limit else encode_varint(ts_delta)
        odb = small[offset_delta] if offset_delta < limit else encode_varint(offset_delta)
        if key is None:
            kb = b"\x01"
            klen = 0
            key = b""
        else:
            klen = len(key)
            kb = small[klen] if klen < limit else encode_varint(klen)
        if value is None:
            vb = b"\x01"
            vlen = 0
            value = b""
        else:
            vlen = len(value)
            vb = small[vlen] if vlen < limit else encode_varint(vlen)
        hb = _encode_headers(headers) if headers else b"\x00"
        body_len = 1 + len(tsb) + len(odb) + len(kb) + klen + len(vb) + vlen + len(hb)
        lb = small[body_len] if body_len < limit else encode_varint(body_len)
        size = self._size + len(lb) + body_len
        if size > self._max_size and count:
            return None
        if type(key) is not bytes or type(value) is not bytes:
            key, value = _as_bytes(key, "key"), _as_bytes(value, "value")
        self._parts += (lb, b"\x00", tsb, odb, kb, key, vb, value, hb)
        self._size = size
        self._count = count + 1
        self._last_offset_delta = offset_delta
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        return offset_delta

    def has_room_for(self, key: Buffer | None, value: Buffer | None,
                     headers: Sequence[Header] | None = None) -> bool:
        """True when a record of this shape would be accepted by :meth:`append` (estimate)."""
        if self._count == 0:
            return True
        return self._size + self.estimate_size(key, value, headers) <= self._max_size

    def build(
        self,
        *,
        base_offset: int | None = None,
        producer_id: int | None = None,
        producer_epoch: int | None = None,
        base_sequence: int | None = None,
        is_transactional: bool | None = None,
        partition_leader_epoch: int | None = None,
    ) -> bytes:
        """Encode the batch; keyword arguments override the constructor's values (the
        producer assigns sequence numbers only when it sends a batch).

        Returns:
            The batch bytes, starting with the base offset. An empty builder builds an empty
            batch (last offset delta -1, timestamps -1), which is valid on the wire.

        Raises:
            ValueError: a compression level the codec rejects.
        """
        if base_offset is not None:
            self.base_offset = base_offset
        if producer_id is not None:
            self.producer_id = producer_id
        if producer_epoch is not None:
            self.producer_epoch = producer_epoch
        if base_sequence is not None:
            self.base_sequence = base_sequence
        if is_transactional is not None:
            self.is_transactional = is_transactional
        if partition_leader_epoch is not None:
            self.partition_leader_epoch = partition_leader_epoch
        attributes = 0
        body = b"".join(self._parts)
        codec = self._codec
        if codec:
            body = compress(codec, body, self._level, snappy_framing=self._snappy_framing)
            attributes = int(codec)
        if self._log_append_time:
            attributes |= TIMESTAMP_TYPE_MASK
        if self.is_transactional:
            attributes |= TRANSACTIONAL_MASK
        if self._is_control:
            attributes |= CONTROL_MASK
        header = bytearray(HEADER.pack(
            self.base_offset, BATCH_HEADER_SIZE - LOG_OVERHEAD + len(body),
            self.partition_leader_epoch, 2, 0, attributes, self._last_offset_delta,
            self._base_timestamp, self._max_timestamp, self.producer_id,
            self.producer_epoch, self.base_sequence, self._count,
        ))
        crc = _crc32c(body, _crc32c(memoryview(header)[_ATTRIBUTES_OFFSET:]))
        _CRC.pack_into(header, _CRC_OFFSET, crc)
        return bytes(header) + body


def _as_bytes(data: object, what: str) -> bytes:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"record {what} must be bytes-like or None, not {type(data).__name__}")


def _encode_headers(headers: Sequence[Header]) -> bytes:
    parts = [encode_varint(len(headers))]
    for name, hvalue in headers:
        if not isinstance(name, str):
            raise TypeError(f"header name must be str, not {type(name).__name__}")
        raw = name.encode("utf-8")
        parts.append(encode_varint(len(raw)))
        parts.append(raw)
        if hvalue is None:
            parts.append(b"\x01")
        else:
            hv = _as_bytes(hvalue, "header value")
            parts.append(encode_varint(len(hv)))
            parts.append(hv)
    return b"".join(parts)

