"""Kafka v2 record batches (magic 2): the batch layout and :class:`RecordBatch`, which reads
a batch's header and checks its CRC (its records: :mod:`._decode`; building: :mod:`._builder`).

Batch layout (all big-endian)::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 |
    crc uint32 (CRC-32C of everything after it) | attributes int16 | lastOffsetDelta int32 |
    baseTimestamp int64 | maxTimestamp int64 | producerId int64 | producerEpoch int16 |
    baseSequence int32 | recordCount int32 | records...

    attributes: bits 0-2 codec, bit 3 timestamp type (1 = log append time),
                bit 4 transactional, bit 5 control, bit 6 delete horizon set

The header is read with one precompiled struct. The record decoders of :mod:`._decode` are
also named here, where callers have imported them from.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any, Final, TypeVar

import crc32c as _crc32c_mod

from kontrakt.errors import CorruptRecordError
from kontrakt.protocol.records._compression import decompress
from kontrakt.protocol.records._decode import (
    _decode_as,
    decode_records,
    decode_records_as,
    decode_records_piece_as,
)
from kontrakt.protocol.records._model import Buffer, Record, TimestampType, located

__all__ = ["BATCH_HEADER_SIZE", "RecordBatch", "decode_records", "decode_records_as",
           "decode_records_piece_as"]

_crc32c = _crc32c_mod.crc32c
#: crc32c's gil_release_mode: keep the GIL. By default it gives the GIL up for inputs past
#: 32 KiB, to checksum ~5 us per 128 KiB; a thread that gives it up while another thread
#: runs Python gets it back at the interpreter's switch interval (5 ms) at worst, each time.
#: A sync producer's I/O thread beside a busy sending thread paid that for every batch.
_CRC_KEEP_GIL = 0

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

_T = TypeVar("_T", bound=tuple[Any, ...])


def _corrupt(message: str, topic: str | None, partition: int | None,
             offset: int | None) -> CorruptRecordError:
    return CorruptRecordError(message, topic=topic, partition=partition, offset=offset)


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
        return int(_crc32c(memoryview(self._data)[self._start + _ATTRIBUTES_OFFSET:self._end],
                            0, _CRC_KEEP_GIL))

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

    def payload(self, max_size: int | None = None) -> bytes:
        """The uncompressed bytes of the batch's records.

        Args:
            max_size: the most bytes a compressed batch may decompress to (see
                :func:`~kontrakt.protocol.records.decompress`); None: no limit.

        Raises:
            UnsupportedCodecError: unknown codec id.
            DecompressionLimitError: the payload decompresses to more than ``max_size``.
            CorruptRecordError: the compressed payload cannot be decompressed.
        """
        codec = self.attributes & CODEC_MASK
        body = memoryview(self._data)[self._start + BATCH_HEADER_SIZE:self._end]
        try:
            return decompress(codec, body, max_size=max_size)
        except CorruptRecordError as exc:
            raise located(exc, self.topic, self.partition, self.base_offset) from None

    def record_data(self, max_size: int | None = None) -> tuple[bytes, int, int]:
        """Where the batch's records are: ``(data, start, end)``, the batch's own buffer for
        an uncompressed batch, else the decompressed payload. For
        :func:`decode_records_piece_as`.

        Args:
            max_size: as for :meth:`payload`.

        Raises:
            see :meth:`payload`.
        """
        if self.attributes & CODEC_MASK == 0:
            return self._data, self._start + BATCH_HEADER_SIZE, self._end
        data = self.payload(max_size)
        return data, 0, len(data)

    def corrupt(self, message: str) -> CorruptRecordError:
        """A :class:`CorruptRecordError` naming this batch (topic, partition, base offset)."""
        return _corrupt(message, self.topic, self.partition, self.base_offset)

    def records(self, max_size: int | None = None) -> list[Record]:
        """Decompress (if needed) and decode the records.

        Args:
            max_size: the most bytes a compressed batch may decompress to; None: no limit.

        Returns:
            The records with absolute offsets and timestamps (log-append-time batches give
            every record ``max_timestamp``).

        Raises:
            UnsupportedCodecError: unknown codec id.
            DecompressionLimitError: the payload decompresses to more than ``max_size``.
            CorruptRecordError: bad compressed payload or malformed records.
        """
        codec = self.attributes & CODEC_MASK
        if codec == 0:
            data = self._data
            pos = self._start + BATCH_HEADER_SIZE
            end = self._end
        else:
            data = self.payload(max_size)
            pos = 0
            end = len(data)
        ts_type = 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0
        try:
            return decode_records(data, pos, end, self.records_count, self.base_offset,
                                  self.base_timestamp, ts_type, self.max_timestamp)
        except CorruptRecordError as exc:
            raise _corrupt(str(exc), self.topic, self.partition, self.base_offset) from None

    def records_as(self, record_type: type[_T], topic: str, partition: int,
                   timestamp_type_value: object, max_size: int | None = None) -> list[_T]:
        """Decompress (if needed) and decode the records straight into ``record_type``.

        See :func:`decode_records_as` for the layout ``record_type`` must have; every
        record gets ``topic``, ``partition``, this batch's leader epoch and
        ``timestamp_type_value``. ``max_size``: as for :meth:`records`.

        Raises:
            UnsupportedCodecError: unknown codec id.
            DecompressionLimitError: the payload decompresses to more than ``max_size``.
            CorruptRecordError: bad compressed payload or malformed records.
        """
        codec = self.attributes & CODEC_MASK
        if codec == 0:
            data = self._data
            pos = self._start + BATCH_HEADER_SIZE
            end = self._end
        else:
            data = self.payload(max_size)
            pos = 0
            end = len(data)
        ts_type = 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0
        try:
            # The compiled loop itself: a call a batch less than decode_records_as.
            return _decode_as(data, pos, end, self.records_count, self.base_offset,
                              self.base_timestamp, ts_type, self.max_timestamp, record_type,
                              topic, partition, timestamp_type_value,
                              self.partition_leader_epoch)
        except CorruptRecordError as exc:
            raise _corrupt(str(exc), self.topic, self.partition, self.base_offset) from None

    def __iter__(self) -> Iterator[Record]:
        """Iterate over :meth:`records`."""
        return iter(self.records())

    def __repr__(self) -> str:
        return (f"RecordBatch(base_offset={self.base_offset}, records={self.records_count}, "
                f"compression={self.compression}, transactional={self.is_transactional}, "
                f"control={self.is_control}, producer_id={self.producer_id})")
