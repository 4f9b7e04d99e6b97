"""Building v2 record batches (see :mod:`._batch` for the layout).

The builder keeps each record as a handful of small ``bytes`` pieces (varints from the lookup
table of :mod:`._model`, the caller's key and value objects) and joins them once in
:meth:`RecordBatchBuilder.build`, so appending a record costs a few list operations and no
copies of its payload.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Literal

import crc32c as _crc32c_mod

from kontrakt.protocol.records._batch import (
    _ATTRIBUTES_OFFSET,
    _CRC,
    _CRC_KEEP_GIL,
    _CRC_OFFSET,
    BATCH_HEADER_SIZE,
    CONTROL_MASK,
    HEADER,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
)
from kontrakt.protocol.records._compression import CompressionType, compress
from kontrakt.protocol.records._model import (
    SMALL_LIMIT,
    VARINT_BYTES,
    Buffer,
    Header,
    encode_varint,
)
from kontrakt.protocol.records._runs import deltas_from, encode_run, run_end

__all__ = ["RecordBatchBuilder", "encode_headers", "frame_batch"]

_BYTES = {bytes}
_INTS = {int}

_crc32c = _crc32c_mod.crc32c


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
        hb = encode_headers(headers) if headers else b"\x00"
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

    def append_many(
        self,
        timestamps: int | Sequence[int] | None,
        keys: Sequence[Buffer | None] | None,
        values: Sequence[Buffer | None],
        headers: Sequence[Sequence[Header] | None] | None = None,
        *,
        start: int = 0,
    ) -> int:
        """Add the records ``start``, ``start + 1``, ... of ``values`` in order, as many as
        fit: byte for byte what :meth:`append` of each in turn writes until one returns
        None, in a few loops in C a run of records instead of ~40 Python operations a
        record (see :mod:`._runs`); records of bytes keys and values take that path, any
        others (None values, other bytes-like objects) :meth:`append`'s.

        Args:
            timestamps: milliseconds since the epoch, one for all records (None: now), or
                one a record (indexed as ``values``).
            keys: one a record (bytes-like or None), or None when every key is null.
            values: bytes-like or None.
            headers: one ``[(name, value or None), ...]`` (or None) a record, or None when
                no record has headers.
            start: the index of the first record to add.

        Returns:
            How many records were added: ``len(values) - start`` unless the batch filled
            up (the first record of an empty batch always fits).

        Raises:
            TypeError: a key, value or header is not of a type :meth:`append` takes (the
                records before it are added, as by :meth:`append` one by one).
        """
        if timestamps is None:
            timestamps = int(time.time() * 1000)
        end = len(values)
        pos = start
        window = 256  # records encoded at a time; then sized to what the batch has room for
        while pos < end:
            count = self._count
            offset = self._last_offset_delta + 1
            stop = min(end, pos + window, pos + run_end(offset) - offset)
            room = self._max_size - self._size
            run = _run(timestamps, keys, values, headers, pos, stop,
                       self._base_timestamp if count else None)
            encoded = None if run is None else encode_run(offset, *run[:4], room, not count)
            if encoded is None:  # appended one by one
                for i in range(pos, stop):
                    if self.append(timestamps if isinstance(timestamps, int)
                                   else timestamps[i], None if keys is None else keys[i],
                                   values[i], None if headers is None else headers[i]
                                   ) is None:
                        return i - start
                pos = stop
                continue
            assert run is not None
            base = run[4]
            data, k, size = encoded
            if not k:
                break
            if not count:
                self._base_timestamp = self._max_timestamp = base
            self._parts.append(data)
            self._size += size
            self._count = count + k
            self._last_offset_delta = offset + k - 1
            latest = (timestamps if isinstance(timestamps, int)
                      else max(timestamps[pos:pos + k]))
            if latest > self._max_timestamp:
                self._max_timestamp = latest
            if k < stop - pos:
                return pos + k - start  # the batch is full
            pos += k
            window = max(64, (self._max_size - self._size) * k // size + 16)
        return pos - start

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
        if self._log_append_time:
            attributes |= TIMESTAMP_TYPE_MASK
        if self.is_transactional:
            attributes |= TRANSACTIONAL_MASK
        if self._is_control:
            attributes |= CONTROL_MASK
        return frame_batch(
            b"".join(self._parts), self._count, self._base_timestamp, self._max_timestamp,
            producer_id=self.producer_id, producer_epoch=self.producer_epoch,
            base_sequence=self.base_sequence, attributes=attributes, codec=self._codec,
            level=self._level, snappy_framing=self._snappy_framing,
            base_offset=self.base_offset, last_offset_delta=self._last_offset_delta,
            partition_leader_epoch=self.partition_leader_epoch)


def frame_batch(
    records: bytes,
    count: int,
    base_timestamp: int,
    max_timestamp: int,
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    attributes: int = 0,
    codec: CompressionType = CompressionType.NONE,
    level: int | None = None,
    snappy_framing: Literal["xerial", "raw"] = "xerial",
    base_offset: int = 0,
    last_offset_delta: int | None = None,
    partition_leader_epoch: int = -1,
    compressed: bool = False,
) -> bytes:
    """A v2 batch around ``count`` already encoded records: compression, header and CRC.

    Shared by :meth:`RecordBatchBuilder.build` and the producer, which encodes its records
    as they are appended and frames them only when a batch is sent.

    Args:
        records: the records' bytes, concatenated.
        count: how many records ``records`` holds.
        base_timestamp, max_timestamp: milliseconds (-1 for an empty batch).
        attributes: flag bits other than the codec (transactional, control, timestamp type).
        last_offset_delta: default ``count - 1`` (records numbered from 0 without gaps).
        compressed: ``records`` are already compressed with ``codec``.

    Raises:
        ValueError: a compression level the codec rejects.
    """
    if codec:
        if not compressed:
            records = compress(codec, records, level, snappy_framing=snappy_framing)
        attributes |= int(codec)
    header = bytearray(HEADER.pack(
        base_offset, BATCH_HEADER_SIZE - LOG_OVERHEAD + len(records), partition_leader_epoch,
        2, 0, attributes, count - 1 if last_offset_delta is None else last_offset_delta,
        base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence, count,
    ))
    _CRC.pack_into(header, _CRC_OFFSET,
                   _crc32c(records, _crc32c(memoryview(header)[_ATTRIBUTES_OFFSET:]),
                           _CRC_KEEP_GIL))
    return bytes(header) + records


def _run(timestamps: int | Sequence[int], keys: Sequence[Buffer | None] | None,
         values: Sequence[Buffer | None], headers: Sequence[Sequence[Header] | None] | None,
         start: int, stop: int, base: int | None
         ) -> tuple[int | list[int], list[bytes] | None, list[bytes], list[bytes] | None,
                    int] | None:
    """The columns of records ``start:stop`` as :func:`encode_run` takes them, and the
    base timestamp (``base``, or the first record's for an empty batch); None when one
    of them needs :meth:`RecordBatchBuilder.append` (not bytes, or a header it refuses:
    it adds the records before it and raises)."""
    vs: list[bytes] = list(values[start:stop])  # type: ignore[arg-type]  # checked next
    if set(map(type, vs)) != _BYTES:
        return None
    ks: list[bytes] | None = None
    if keys is not None:
        ks = list(keys[start:stop])  # type: ignore[arg-type]  # checked next
        if set(map(type, ks)) != _BYTES:
            return None
    hs: list[bytes] | None = None
    if headers is not None:
        try:
            hs = [encode_headers(h) if h else b"\x00" for h in headers[start:stop]]
        except TypeError:
            return None
    deltas: int | list[int]
    if isinstance(timestamps, int):
        base = timestamps if base is None else base
        deltas = timestamps - base
    else:
        stamps = list(timestamps[start:stop])
        if set(map(type, stamps)) != _INTS:
            return None
        base = stamps[0] if base is None else base
        deltas = deltas_from(stamps, base)
    return deltas, ks, vs, hs, base


def _as_bytes(data: object, what: str) -> bytes:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"record {what} must be bytes-like or None, not {type(data).__name__}")


def encode_headers(headers: Sequence[Header]) -> bytes:
    """A record's header section: the count, then each name and value as varint-sized bytes
    (a None value as length -1).

    Raises:
        TypeError: a name is not str, or a value not bytes-like or None (the message names
            the header).
    """
    parts = [encode_varint(len(headers))]
    for name, hvalue in headers:
        if type(name) is not str:
            raise TypeError(f"header name must be str, not {type(name).__name__}")
        raw = name.encode("utf-8")
        parts.append(encode_varint(len(raw)))
        parts.append(raw)
        if hvalue is None:
            parts.append(b"\x01")
        elif isinstance(hvalue, (bytes, bytearray, memoryview)):
            parts.append(encode_varint(len(hvalue)))
            parts.append(bytes(hvalue))
        else:
            raise TypeError(f"header {name!r} value must be bytes or None, "
                            f"not {type(hvalue).__name__}")
    return b"".join(parts)
