"""A Spark task's fetched record batches read into Arrow columns, with no Python object per
record.

The consumer hands the task its partition's batches undecoded
(:class:`~kontrakt.clients.consumer._decoding.RawBatch`: checked, decompressed, filtered
for ``read_committed`` exactly as for records). :func:`decode_batches` reads the records of
several batches at once:

1. :func:`~kontrakt.protocol.records._columnar.record_starts` walks each batch's record
   lengths (the one sequential step, a table lookup per record);
2. every other field is read column-wise with Arrow compute kernels over the buffer seen as
   ``uint8``: the varints at a column of positions (a byte a pass, as many passes as the
   longest varint takes), then the next column of positions, and so on;
3. keys and values become binary arrays by one ``take`` over the buffer: their bounds,
   interleaved (start, end, start, end, ...), are the offsets of a binary array whose even
   elements are the keys (values) and odd elements the bytes between them.

The records of a chunk must all pass the vectorised checks (varints of at most 5 bytes, no
key or value length below -1, no headers, each record's fields ending where the next record
starts); otherwise the chunk is decoded by the record decoder
(:func:`~kontrakt.protocol.records.decode_records`), which gives the same columns, reads
headers and raises the same errors as a consumer would.

Measured in-process on the project machine (CPU time, 2 cores shared at a load of 17; see
benchmarks/README.md), 16,384 records with 60-byte values, no keys: 0.79-0.87 µs a record
for all columns (0.25-0.29 of it in ``record_starts``), against 3.6-3.8 µs for the
consumer's record path (``parse_partition``) on the same bytes.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from kontrakt.clients.consumer._decoding import RawBatch
from kontrakt.errors import CorruptRecordError
from kontrakt.protocol.records._batch import decode_records
from kontrakt.protocol.records._columnar import record_starts
from kontrakt.protocol.records._model import Header

__all__ = ["RecordColumns", "decode_batches"]

_I64 = pa.int64()
_I32 = pa.int32()
_BIN = pa.binary()
_NULL_BIN = pa.scalar(None, _BIN)
#: the longest varint read column-wise; longer ones (a timestamp delta beyond ~400 days)
#: send the chunk to the record decoder
_MAX_VARINT = 5
_MAX_BUFFER = 2**31 - 1  # binary array offsets are int32


class RecordColumns:
    """Records of one partition as Arrow arrays.

    Attributes:
        offsets, timestamps: ``int64`` arrays (timestamps in ms; -1 for none).
        timestamp_types: ``int32`` array (0 create time, 1 log append time).
        keys, values: ``binary`` arrays, null where the record's key / value is.
        headers: each record's headers, or None when no record has any.
    """

    __slots__ = ("headers", "keys", "offsets", "timestamp_types", "timestamps", "values")

    def __init__(self, offsets: pa.Array, timestamps: pa.Array, timestamp_types: pa.Array,
                 keys: pa.Array, values: pa.Array,
                 headers: list[list[Header]] | None) -> None:
        self.offsets = offsets
        self.timestamps = timestamps
        self.timestamp_types = timestamp_types
        self.keys = keys
        self.values = values
        self.headers = headers

    def __len__(self) -> int:
        return len(self.offsets)

    def slice(self, start: int, length: int) -> RecordColumns:
        """Records ``start .. start + length`` (zero-copy)."""
        return RecordColumns(
            self.offsets.slice(start, length), self.timestamps.slice(start, length),
            self.timestamp_types.slice(start, length), self.keys.slice(start, length),
            self.values.slice(start, length),
            None if self.headers is None else self.headers[start:start + length])

    @staticmethod
    def concat(parts: Sequence[RecordColumns]) -> RecordColumns:
        """The records of ``parts``, one after another (the arrays are copied)."""
        if len(parts) == 1:
            return parts[0]
        headers = None
        if any(p.headers is not None for p in parts):
            headers = [h for p in parts
                       for h in (p.headers if p.headers is not None else [[]] * len(p))]
        offsets, stamps, kinds, keys, values = (
            pa.concat_arrays([getattr(p, name) for p in parts])
            for name in ("offsets", "timestamps", "timestamp_types", "keys", "values"))
        return RecordColumns(offsets, stamps, kinds, keys, values, headers)

    def filter(self, keep: pa.Array) -> RecordColumns:
        """The records where ``keep`` (a boolean array) is true."""
        headers = self.headers
        if headers is not None:
            headers = [h for h, k in zip(headers, keep.to_pylist(), strict=True) if k]
        return RecordColumns(self.offsets.filter(keep), self.timestamps.filter(keep),
                             self.timestamp_types.filter(keep), self.keys.filter(keep),
                             self.values.filter(keep), headers)

    def between(self, low: int, high: int) -> RecordColumns:
        """The records with ``low <= offset < high`` (offsets ascend, so a slice)."""
        n = len(self)
        if not n:
            return self
        first = self.offsets[0].as_py()
        last = self.offsets[n - 1].as_py()
        if first >= low and last < high:
            return self
        keep = pc.and_(pc.greater_equal(self.offsets, low), pc.less(self.offsets, high))
        start = pc.index(keep, True).as_py()
        if start < 0:
            return self.slice(0, 0)
        return self.slice(start, pc.sum(keep.cast(_I64)).as_py())


def decode_batches(batches: Sequence[RawBatch]) -> RecordColumns:
    """The records of ``batches`` (consecutive batches of one partition, in order) at or
    after each batch's ``min_offset``, as columns.

    Raises:
        CorruptRecordError: a batch's records are malformed (the record decoder's error,
            naming the batch's topic, partition and base offset).
    """
    if not batches:
        return _reference(batches)
    if any(b.is_legacy for b in batches):
        return _reference(batches)
    data = batches[0].data
    if all(b.data is data for b in batches):
        buf = data
        shifts = None
    else:
        # Batches in several buffers (compressed batches each have their own payload):
        # their records are copied into one, so that one pass reads them all.
        buf = b"".join(memoryview(b.data)[b.pos:b.end] for b in batches)
        shifts = []
        at = 0
        for b in batches:
            shifts.append(at - b.pos)
            at += b.end - b.pos
    if len(buf) > _MAX_BUFFER:
        return _reference(batches)
    starts = array("q")
    ends = array("q")
    moved = array("q")  # per record: where its batch's records moved to in ``buf``
    base_offsets = array("q")
    base_stamps = array("q")
    log_append = False
    for i, b in enumerate(batches):
        try:
            st = array("q", record_starts(b.data, b.pos, b.end, b.count))
        except CorruptRecordError:
            # The record decoder says what is wrong, as a consumer would.
            return _reference(batches)
        n = b.count
        starts += st[:n]
        ends += st[1:]
        if shifts is not None:
            moved += array("q", [shifts[i]]) * n
        base_offsets += array("q", [b.base_offset]) * n
        base_stamps += array("q", [b.max_timestamp if b.timestamp_type else b.base_timestamp]
                             ) * n
        log_append = log_append or b.timestamp_type == 1
    if not starts:
        return _reference(batches)  # empty batches (valid on the wire): empty columns
    start_array, end_array = _ints(starts), _ints(ends)
    if shifts is not None:
        start_array = pc.add(start_array, _ints(moved))
        end_array = pc.add(end_array, _ints(moved))
    try:
        fields = _read_fields(buf, start_array, end_array)
    except (pa.ArrowIndexError, IndexError):
        fields = None
    if fields is None:
        return _reference(batches)
    ts_delta, off_delta, key_start, key_len, value_start, value_len = fields
    offsets = pc.add(_ints(base_offsets), off_delta)
    stamps = _ints(base_stamps)
    if log_append:
        kinds_list = array("i")
        for b in batches:
            kinds_list += array("i", [b.timestamp_type]) * b.count
        kinds = _ints(kinds_list, "i", _I32)
        # Log-append-time batches give every record the batch's append time.
        timestamps = pc.if_else(pc.equal(kinds, 1), stamps, pc.add(stamps, ts_delta))
    else:
        kinds = pa.repeat(pa.scalar(0, _I32), len(starts))
        timestamps = pc.add(stamps, ts_delta)
    py_buf = pa.py_buffer(buf)
    columns = RecordColumns(offsets, timestamps, kinds,
                            _gather(py_buf, key_start, key_len),
                            _gather(py_buf, value_start, value_len), None)
    if all(b.base_offset >= b.min_offset for b in batches):
        return columns
    # The first batch of a fetch may start before the fetch offset: its records before it
    # were handed out already (or are not wanted).
    lows = array("q")
    for b in batches:
        lows += array("q", [b.min_offset]) * b.count
    return columns.filter(pc.greater_equal(offsets, _ints(lows)))


def _ints(values: array[int], code: str = "q", kind: pa.DataType = _I64) -> pa.Array:
    assert values.typecode == code
    return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(values)])


def _read_fields(buf: Any, starts: pa.Array, ends: pa.Array) -> tuple[pa.Array, ...] | None:
    """Every record's timestamp delta, offset delta, key start and length, value start and
    length (-1: null), or None when a record is beyond the vectorised checks."""
    u8 = pa.Array.from_buffers(pa.uint8(), len(buf), [None, pa.py_buffer(buf)])
    last = len(buf) - 1
    got = _varints(u8, starts, last)  # the record's length: its end is known already
    if got is None:
        return None
    pos = pc.add(starts, pc.add(got[1], 1))  # and the attributes byte, unused
    fields = []
    for _ in range(2):  # timestamp delta, offset delta
        got = _varints(u8, pos, last)
        if got is None:
            return None
        fields.append(got[0])
        pos = pc.add(pos, got[1])
    for _ in range(2):  # key, value
        got = _varints(u8, pos, last)
        if got is None:
            return None
        length, size = got
        start = pc.add(pos, size)
        fields += [start, length]
        if pc.min(length).as_py() < -1:
            return None
        pos = pc.add(start, pc.max_element_wise(length, 0))
    # No headers (a count of 0: one zero byte), and the record ends right there.
    if not pc.all(pc.equal(pc.add(pos, 1), ends)).as_py():
        return None
    if pc.max(pc.take(u8, pos)).as_py() != 0:
        return None
    return tuple(fields)


def _varints(u8: pa.Array, pos: pa.Array, last: int) -> tuple[pa.Array, Any] | None:
    """The zig-zag varints at ``pos``: (values, sizes in bytes), or None when one takes
    more than :data:`_MAX_VARINT` bytes."""
    b = pc.take(u8, pos).cast(_I64)
    more = pc.greater_equal(b, 128)
    if not pc.any(more).as_py():
        return _unzigzag(b), 1
    u = pc.bit_wise_and(b, 127)
    size = pc.add(more.cast(_I64), 1)
    for k in range(1, _MAX_VARINT):
        # Only where a byte continues; elsewhere the index may be past the buffer's end.
        nxt = pc.take(u8, pc.min_element_wise(pc.add(pos, k), last)).cast(_I64)
        nxt = pc.if_else(more, nxt, 0)
        u = pc.bit_wise_or(u, pc.shift_left(pc.bit_wise_and(nxt, 127), 7 * k))
        more = pc.greater_equal(nxt, 128)
        if not pc.any(more).as_py():
            return _unzigzag(u), size
        size = pc.add(size, more.cast(_I64))
    return None


def _unzigzag(u: pa.Array) -> pa.Array:
    return pc.bit_wise_xor(pc.shift_right(u, 1), pc.negate(pc.bit_wise_and(u, 1)))


_EVENS: dict[int, pa.Array] = {}
_INTERLEAVE: dict[int, pa.Array] = {}


def _gather(buf: pa.Buffer, start: pa.Array, length: pa.Array) -> pa.Array:
    """The binary array of ``buf[start[i]:start[i] + length[i]]`` (null where length is -1).

    The bounds of consecutive records only grow, so (start0, end0, start1, end1, ...) are
    the offsets of a binary array over ``buf`` of the values and, between them, the bytes
    that separate them; its even elements, taken, are the values, copied once in C."""
    n = len(start)
    if not n:
        return pa.array([], _BIN)
    nulls = pc.equal(length, -1)
    any_null = pc.any(nulls).as_py()
    if any_null and pc.all(nulls).as_py():
        return pa.nulls(n, _BIN)
    end = pc.add(start, pc.max_element_wise(length, 0)) if any_null else pc.add(start, length)
    bounds = pc.take(pa.concat_arrays([start, end, end.slice(n - 1, 1)]), _interleave(n))
    spans = pa.Array.from_buffers(_BIN, 2 * n, [None, bounds.cast(_I32).buffers()[1], buf])
    out = pc.take(spans, _evens(n))
    return pc.if_else(nulls, _NULL_BIN, out) if any_null else out


def _evens(n: int) -> pa.Array:
    got = _EVENS.get(n)
    if got is None:
        got = _EVENS[n] = _ints(array("q", range(0, 2 * n, 2)))
    return got


def _interleave(n: int) -> pa.Array:
    """Indices into ``concat(start, end, [last end])``: start0, end0, start1, ..., last end."""
    got = _INTERLEAVE.get(n)
    if got is None:
        idx = array("q", bytes(8 * (2 * n + 1)))
        idx[0:2 * n:2] = array("q", range(n))
        idx[1:2 * n:2] = array("q", range(n, 2 * n))
        idx[2 * n] = 2 * n
        got = _INTERLEAVE[n] = _ints(idx)
    if len(_INTERLEAVE) > 64:
        _INTERLEAVE.clear()
        _EVENS.clear()
    return got


def _reference(batches: Sequence[RawBatch]) -> RecordColumns:
    """The columns through the record decoder (headers, long varints, legacy batches, and
    the precise error of a malformed batch)."""
    offsets: list[int] = []
    stamps: list[int] = []
    kinds: list[int] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    headers: list[list[Header]] = []
    for b in batches:
        if b.is_legacy:
            records = b.data
        else:
            try:
                records = decode_records(b.data, b.pos, b.end, b.count, b.base_offset,
                                         b.base_timestamp, b.timestamp_type, b.max_timestamp)
            except CorruptRecordError as exc:
                raise b.corrupt(str(exc)) from None
        for r in records:
            if r[0] < b.min_offset:
                continue
            offsets.append(r[0])
            stamps.append(r[1])
            kinds.append(int(r[2]))
            keys.append(r[3])
            values.append(r[4])
            headers.append(r[5])
    return RecordColumns(pa.array(offsets, _I64), pa.array(stamps, _I64),
                         pa.array(kinds, _I32), pa.array(keys, _BIN), pa.array(values, _BIN),
                         headers if any(headers) else None)
