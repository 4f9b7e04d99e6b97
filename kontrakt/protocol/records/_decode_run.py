"""Decoding a run of equally laid-out v2 records in one pass of C loops: the fast path of the
record loop in :mod:`._decode`.

Many record sets hold records of one size and shape: fixed-size payloads, one producer's
records with no key (or keys of one length) and no headers. Within a batch such records
differ only in their timestamp delta, offset delta, key and value bytes; every other byte
(the length varint, the key and value length varints, the header count) repeats at the same
place every ``size`` bytes. A run is then checked and decoded column by column instead of
record by record: an extended slice ``data[pos + j:stop:size]`` gathers byte ``j`` of every
record, and is compared with the byte repeated (the constant bytes), with the expected
offset-delta bytes of consecutive offsets, or tested for the varint continuation bit (the
timestamp deltas); the values and keys come from one ``struct`` unpack per record. The
general loop costs ~40 bytecodes a varint field and allocates an int per position update;
here the interpreter runs a fixed number of operations a *run*.

Exactly the records the general loop would decode are accepted: a run is only taken when
every byte the general loop reads is checked to parse the same way (the attributes byte is
skipped by both), so anything else, malformed records included, goes to the general loop,
which reports it.
"""

from __future__ import annotations

import struct
from functools import lru_cache
from itertools import repeat
from operator import add, getitem, itemgetter
from typing import Any, Final

from kontrakt.protocol.records._model import TWO_BYTE_VARINTS, ZIGZAG_DECODE

__all__ = ["MIN_RUN", "decode_run"]

#: A run is taken only when at least this many records qualify: below that, the checks and
#: the iterators cost more than the general loop would.
MIN_RUN: Final = 16

# The zig-zag varint bytes of offset deltas 0-63 (one byte each) and 64-8191 (two bytes:
# low and high byte), so that the offset-delta column of a run of consecutive offsets is
# compared with a slice of these.
_OFFSET_1: Final = bytes(2 * d for d in range(64))
_OFFSET_2_LOW: Final = bytes(((2 * d) & 127) | 128 for d in range(8192))
_OFFSET_2_HIGH: Final = bytes((2 * d) >> 7 for d in range(8192))
#: a ``bytes.translate`` table: 1 for a byte with the varint continuation bit, else 0
_IS_HIGH: Final = bytes(b >> 7 for b in range(256))
#: the values of the one-byte varints
_ONE_BYTE: Final = ZIGZAG_DECODE[:128]
_EMPTY: Final[list[Any]] = []
_copy_list = list.copy
_first = itemgetter(0)
_second = itemgetter(1)


@lru_cache(maxsize=256)
def _unpacker(size: int, key_at: int, key_len: int, value_at: int, value_len: int
              ) -> struct.Struct:
    """A struct reading a record's key (when ``key_len`` >= 0) and value (when
    ``value_len`` >= 0) out of its ``size`` bytes."""
    fmt = "<"
    at = 0
    for start, n in ((key_at, key_len), (value_at, value_len)):
        if n >= 0:
            fmt += f"{start - at}x{n}s"
            at = start + n
    return struct.Struct(fmt + f"{size - at}x")


def _matching(got: bytes, expected: bytes) -> int:
    """How many leading bytes of ``got`` equal ``expected``'s (as long)."""
    if got == expected:
        return len(got)
    lo, hi = 0, len(got) - 1  # the first difference is in got[lo:hi + 1]
    while lo < hi:
        mid = (lo + hi) // 2
        if got[lo:mid + 1] == expected[lo:mid + 1]:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """A one- or two-byte zig-zag varint at ``pos``: (value, bytes), bytes 0 when longer."""
    b = data[pos]
    if b < 128:
        return ZIGZAG_DECODE[b], 1
    c = data[pos + 1]
    if c < 128:
        return ZIGZAG_DECODE[(b & 127) | (c << 7)], 2
    return 0, 0


def decode_run(data: bytes, pos: int, end: int, limit: int, base_offset: int,
               base_timestamp: int) -> tuple[int, int, Any, Any, Any, Any, Any] | None:
    """The records at ``pos`` laid out as the first one, as columns.

    Args:
        data, end: the records' buffer and where the batch's records end.
        pos: where the run would start (a record's first byte).
        limit: the most records to take.
        base_offset, base_timestamp: the batch's.

    Returns:
        None when fewer than :data:`MIN_RUN` records at ``pos`` share the first one's layout
        (or the first one is not of a layout taken here); else ``(count, next position,
        offsets, timestamps, keys, values, headers)``, the last five iterables of ``count``
        items each (a fresh empty headers list per record). Never raises for malformed
        input: such records are left to the general loop.
    """
    if limit < MIN_RUN or type(data) is not bytes:
        # (a bytearray or memoryview: the general loop's values are slices of its type)
        return None
    try:
        length, wl = _varint(data, pos)
        if not wl or length <= 0:
            return None
        size = wl + length
        at = pos + wl + 1  # past the attributes
        ts_at = at
        if data[at] < 128:
            wt = 1
        elif data[at + 1] < 128:
            wt = 2
        else:
            return None
        at += wt
        off_at = at
        first, wo = _varint(data, at)
        if not wo or first < 0 or (wo == 1) != (first < 64):
            return None  # a longer or non-canonical offset delta: not compared here
        at += wo
        # the bytes besides the deltas, key and value: the key and value lengths, the
        # header count (and the record length, ``range(wl)``)
        fixed = [*range(wl)]
        key_at = key_len = -1
        if data[at] == 1:
            fixed.append(at - pos)
            at += 1
        else:
            key_len, w = _varint(data, at)
            if not w or key_len < 0:
                return None
            fixed += range(at - pos, at - pos + w)
            at += w
            key_at = at
            at += key_len
        value_len, w = _varint(data, at)
        if not w or value_len < -1:
            return None
        fixed += range(at - pos, at - pos + w)
        value_at = at + w
        at = value_at + max(value_len, 0)
        if data[at] != 0 or at + 1 != pos + size:
            return None  # headers, or fields that do not end where the length says
    except IndexError:
        return None
    # Consecutive offset deltas keep their varint's length below 64 (one byte) or 8192.
    count = min(limit, (64 if wo == 1 else 8192) - first, (end - pos) // size)
    if count < MIN_RUN:
        return None
    fixed.append(size - 1)
    # A cheap look at the next record first: records of varying sizes end here.
    if data[pos + size:pos + size + wl] != data[pos:pos + wl]:
        return None
    # The run ends before the first record whose bytes read by the general loop differ
    # from the first record's, except the timestamp and offset deltas, the key and the
    # value (their column stripped of that byte's repeats is what follows it) ...
    stop = pos + count * size
    for j in fixed:
        column = data[pos + j:stop:size]
        if column == column[:1] * count:  # a memcmp; lstrip is a memchr a byte
            continue
        n = count - len(column.lstrip(column[:1]))
        if n < count:
            if n < MIN_RUN:
                return None
            count = n
            stop = pos + count * size
    # ... or whose timestamp delta is not a one- (or two-) byte varint ...
    deltas = data[ts_at:stop:size]
    if wt == 1:
        n = deltas.translate(_IS_HIGH).find(1) % (count + 1)
    else:
        highs = data[ts_at + 1:stop:size]
        n = min(deltas.translate(_IS_HIGH).find(0) % (count + 1),
                highs.translate(_IS_HIGH).find(1) % (count + 1))
    # ... or whose offset is not the one after the previous record's (a compacted batch).
    o = off_at
    if wo == 1:
        n = min(n, _matching(data[o:stop:size], _OFFSET_1[first:first + count]))
    else:
        n = min(n, _matching(data[o:stop:size], _OFFSET_2_LOW[first:first + count]),
                _matching(data[o + 1:stop:size], _OFFSET_2_HIGH[first:first + count]))
    if n < count:
        if n < MIN_RUN:
            return None
        count = n
        stop = pos + count * size
        deltas = deltas[:count]
        if wt == 2:
            highs = highs[:count]
    two_byte_stamps = wt == 2
    if two_byte_stamps:
        two: Any = TWO_BYTE_VARINTS
        timestamps: Any = map(add, map(getitem, map(two.__getitem__, deltas), highs),
                              repeat(base_timestamp))
    else:
        # Records of a batch share few timestamps: one int object each, by delta byte.
        if count >= 256:
            stamps = [*map(add, _ONE_BYTE, repeat(base_timestamp, 128))]
        else:
            stamps = [0] * 128
            for b in set(deltas):
                stamps[b] = base_timestamp + ZIGZAG_DECODE[b]
        timestamps = map(stamps.__getitem__, deltas)
    offsets = range(base_offset + first, base_offset + first + count)
    unpack = _unpacker(size, key_at - pos, key_len, value_at - pos, value_len).iter_unpack
    fields = unpack(memoryview(data)[pos:stop]) if key_len >= 0 or value_len >= 0 else ()
    if key_len >= 0 and value_len >= 0:
        pairs = list(fields)
        keys: Any = map(_first, pairs)
        values: Any = map(_second, pairs)
    elif key_len >= 0:
        keys, values = map(_first, fields), repeat(None)
    elif value_len >= 0:
        keys, values = repeat(None), map(_first, fields)
    else:
        keys = values = repeat(None)
    return (count, stop, offsets, timestamps, keys, values,
            map(_copy_list, repeat(_EMPTY, count)))
