"""Decoding a stretch of v2 records of varying sizes in C loops: the fast path of the record
loop in :mod:`._decode` for records that :mod:`._decode_run` cannot take (values of
different lengths, what real data and Protobuf or Avro payloads look like).

One tight interpreted pass finds where each record ends from its length varint (two table
lookups a record: records up to 8,191 bytes have a length varint of at most two bytes) and
copies each record's first bytes into a table of fixed-width rows. Everything else is read
a field at a time for all records at once, as big integers of a 16-bit lane a record: an
extended slice of the table gives byte ``c`` of every row; a field whose place in the row
differs between records (by the widths of the varints before it) is selected from those
with masks; widths, values and every check are then a few big-integer operations a
stretch. Keys (of any lengths, or none) and values are read in order off one
``io.BytesIO`` of the buffer by a ``map`` of its ``read`` over their lengths and the
distances between them (no slice object or start position a record); the value-length
varint of a keyed record is read from the two bytes after its key, the same way. The
general loop runs ~40 bytecodes a varint field; here the interpreter runs a fixed number of
operations a *stretch*.

Exactly the records the general loop would decode are accepted: every byte it reads is
checked to parse the same way (the attributes byte is skipped by both), varints must be of
one or two bytes, a key length must be -1 in one byte (no key) or not negative, a value
length -1 (null) or not negative, the value must end at the header count, which must be 0,
and that must be the record's last byte. The stretch ends before the first record that
fails any of these; it and everything after it (malformed records included) go to the
general loop, which reports them.
"""

from __future__ import annotations

from io import BytesIO
from itertools import repeat
from operator import add, getitem
from typing import Any, Final

from kontrakt.protocol.records._decode_run import _EMPTY, _copy_list
from kontrakt.protocol.records._model import TWO_BYTE_VARINTS, ZIGZAG_DECODE

__all__ = ["MIN_STRETCH", "decode_varying"]

#: A stretch is taken only when at least this many records qualify: below that, the checks
#: and the per-column set-up cost more than the general loop would.
MIN_STRETCH: Final = 32

#: _VARINT[b][c]: the value of the varint whose first byte is b and second c (ignored when
#: b < 128), None when it has three bytes or more; as the general loop reads them.
_ONE_BYTE: Final[list[list[int | None]]] = [[ZIGZAG_DECODE[b]] * 256 for b in range(128)]
_VARINT: Final[list[list[int | None]]] = _ONE_BYTE + [
    row for row in TWO_BYTE_VARINTS[128:] if row is not None]
#: _STEP[b][c]: from a record's first byte to the next record's (the length varint's width
#: plus the length), None for a length below 1 or of three bytes or more.
_STEP: Final[list[list[int | None]]] = [
    [None if v is None or v < 1 else v + (1 if b < 128 else 2) for v in row]
    for b, row in enumerate(_VARINT)]
_from_bytes = int.from_bytes
#: 0, 1, 2, ..., 8191 a 16-bit lane each (the offset deltas of consecutive offsets, halved)
_RAMP: Final = _from_bytes(b"".join(d.to_bytes(2, "little") for d in range(8192)), "little")


def _layout(data: bytes, pos: int) -> tuple[int, bool] | None:
    """For a record at ``pos`` of a layout taken here: (how many bytes from the byte before
    it to the second byte of its key-length varint, or without a key of its value-length
    varint, at the widest varints; whether it has a key); else None. Read as the general
    loop reads it."""
    varint = _VARINT
    try:
        step = _STEP[data[pos]][data[pos + 1]]
        at = pos + 2 + (data[pos] >> 7)  # past the length and the attributes
        for _ in range(2):  # the timestamp and offset deltas
            if step is None or varint[data[at]][data[at + 1]] is None:
                return None
            at += 1 + (data[at] >> 7)
        keyed = data[at] != 1
        if keyed:
            n = varint[data[at]][data[at + 1]]
            if n is None or n < 0:
                return None
            at += 1 + (data[at] >> 7) + n
        else:
            at += 1
        n = varint[data[at]][data[at + 1]]
        if n is None or n < -1 or step is None:
            return None
        at += 1 + (data[at] >> 7) + max(n, 0)
        if at != pos + step - 1 or data[at] != 0:
            return None
    except IndexError:
        return None
    return (10 if keyed else 11), keyed


def _nones(items: list[Any], spots: int, n: int) -> list[Any]:
    """``items`` with None in the first ``n`` items where a 16-bit lane of ``spots`` is 1."""
    lanes = (spots & (1 << 16 * n) - 1).to_bytes(n * 2, "little")
    i = lanes.find(1)
    while i >= 0:
        items[i >> 1] = None
        i = lanes.find(1, i + 2)
    return items


def decode_varying(data: bytes, pos: int, end: int, limit: int, base_offset: int,
                   base_timestamp: int) -> tuple[int, int, Any, Any, Any, Any, Any] | None:
    """The records at ``pos`` without headers and of one- or two-byte varints, as columns.

    Args:
        data, end: the records' buffer and where the batch's records end.
        pos: where the stretch would start (a record's first byte).
        limit: the most records to take.
        base_offset, base_timestamp: the batch's.

    Returns:
        None when fewer than :data:`MIN_STRETCH` records at ``pos`` qualify; else ``(count,
        next position, offsets, timestamps, keys, values, headers)``, the last five
        iterables of at least ``count`` items each (the headers exactly ``count``: a fresh
        empty list per record). Never raises for malformed input: such records are left to
        the general loop.
    """
    if limit < MIN_STRETCH or type(data) is not bytes:
        # (a bytearray or memoryview: the general loop's values are slices of its type)
        return None
    layout = _layout(data, pos)
    if layout is None:
        return None  # headers, long varints, a long or no value, ...: the general loop's
    width, keyed = layout
    # The one interpreted pass: the first bytes of every record after the previous one's
    # last byte (a row of ``width`` bytes a record: rows[i] starts at the byte before
    # record i; the last row's first byte is the last record's header count).
    step = _STEP
    q = pos - 1
    rows: list[bytes] = []
    append_row = rows.append
    try:
        # (four records an iteration: the loop's own bytecodes are a tenth of the pass)
        for _ in repeat(None, limit >> 2):
            append_row(row := data[q:q + width])
            q += step[row[1]][row[2]]  # type: ignore[operator]
            append_row(row := data[q:q + width])
            q += step[row[1]][row[2]]  # type: ignore[operator]
            append_row(row := data[q:q + width])
            q += step[row[1]][row[2]]  # type: ignore[operator]
            append_row(row := data[q:q + width])
            q += step[row[1]][row[2]]  # type: ignore[operator]
        for _ in repeat(None, limit & 3):
            append_row(row := data[q:q + width])
            q += step[row[1]][row[2]]  # type: ignore[operator]
        append_row(data[q:q + width])
    except (TypeError, IndexError):
        pass  # a length of 3+ bytes or below 1, or the buffer's end: the stretch ends there
    n = len(rows) - 1  # records, the last ending at q
    if q >= end:  # (records read past the batch: only those ending in it are taken)
        n = 0
        q = pos - 1
        while (q := q + step[rows[n][1]][rows[n][2]]) < end:  # type: ignore[operator]
            n += 1
    if n < MIN_STRETCH:
        return None
    del rows[n + 1:]
    j = n
    while len(rows[j]) < width:  # rows cut by the buffer's end
        rows[j] = rows[j].ljust(width, b"\0")
        j -= 1
    return _columns(b"".join(rows), width, keyed, data, pos - 1, n, base_offset,
                    base_timestamp)


def _columns(table: bytes, width: int, keyed: bool, data: bytes, start: int, n: int,
             base_offset: int, base_timestamp: int
             ) -> tuple[int, int, Any, Any, Any, Any, Any] | None:
    """The stretch of the ``n`` records whose rows are ``table``'s (the first starting at
    ``start``, the byte before the first record), cut before the first one the general
    loop would read otherwise.

    Each field is read for all records at once: byte ``c`` of every row, widened to 16 bits
    a record, is one big integer (a strided view of the table widened once); a field's
    column (whose offset in the rows differs between records by the widths of the varints
    before it) is put together from those, masked by where the field is in each row. Every
    check and every varint's value is then a few operations on those integers, 16-bit lanes
    that never carry into each other (a lane holds at most 15 bits); only the timestamps,
    a scattered offset column and the lengths read off the buffer go back to bytes.
    """
    wide = bytearray(2 * n)
    stop = width * n
    columns: dict[int, int] = {}

    def column(c: int) -> int:
        if (got := columns.get(c)) is None:
            wide[::2] = table[c:c + stop:width]
            got = columns[c] = _from_bytes(wide, "little")
        return got

    ones = (1 << 16 * n) // 0xFFFF  # 1 in every lane
    low7 = (ones << 7) - ones
    low15 = (ones << 15) - ones
    all_but_one = (1 << 16 * (n - 1)) - 1  # (lanes 0 to n - 2)

    def ones_in(x: int) -> int:
        """1 in the lanes of ``x`` that hold 1, else 0 (no lane carries: its sum is at
        most 0xFFFE)."""
        d = x ^ ones
        return ((((d & low15) + low15) | d) >> 15 & ones) ^ ones

    def pick(at: int, lo: int, hi: int) -> tuple[int, int]:
        """The bytes at row offset ``at`` (from ``lo`` to ``hi``) and those after them, a
        lane a record: chosen a bit of ``at - lo`` at a time, each bit's lanes selecting
        between the candidate columns and those 1, 2, ... further on."""
        if at >> 16 == at & all_but_one:  # the field at one offset in every row
            return column(at & 0xFFFF), column((at & 0xFFFF) + 1)
        d = at - lo * ones
        bits = (hi - lo).bit_length()
        got = [*map(column, range(lo, lo + (1 << bits) + 1))]
        for bit in range(bits):
            b = d >> bit & ones
            mask = (b << 16) - b
            got = [x ^ (x ^ y) & mask for x, y in zip(got, got[1 << bit:], strict=False)]
        return got[0], got[1]

    def high(first: int) -> int:
        """1 where the byte has the continuation bit."""
        return first >> 7 & ones

    def value(first: int, second: int) -> int:
        """The zig-zag (unsigned) values of 1-2 byte varints."""
        h = high(first)
        return first & low7 | (second & (h << 16) - h) << 7

    cut: list[int] = []  # where each check fails first, in records
    long_varints = 0  # 1 where a varint has three bytes or more

    def first_set(bits: int) -> None:
        if bits:
            cut.append(((bits & -bits).bit_length() - 1) >> 4)

    def halves(u: int, count: int = n) -> memoryview:
        """The first ``count`` lanes of ``u`` (not negative there)."""
        return memoryview(u.to_bytes(2 * count, "little")).cast("H")

    def numbers(first: int, second: int, u: int, base: int) -> Any:
        """base + the varints' values (records past a long varint: wrong, cut below)."""
        if not u & ones:  # no negative value: the values are u / 2
            u >>= 1
            # Records share few timestamps: when the values are below a bound of at most
            # one a record, one int each (a list of them, indexed) instead of one a record.
            spread = u
            lanes = n
            while lanes > 1:
                half = lanes >> 1
                spread = spread >> 16 * half | spread & (1 << 16 * (lanes - half)) - 1
                lanes -= half
            if (bound := 1 << spread.bit_length()) <= n:
                return map([*map(add, range(bound), repeat(base))].__getitem__,
                           u.to_bytes(2 * n, "little")[::2] if bound <= 256 else halves(u))
            return [*map(add, halves(u), repeat(base))]
        longs = high(first) & high(second)
        k = ((longs & -longs).bit_length() - 1) >> 4 if longs else n
        return [*map(add, map(getitem, map(_VARINT.__getitem__, halves(first)[:k]),
                              halves(second)), repeat(base))]

    # Every record's header count (the first byte of the next row) must be 0.
    counts = table[width:width * (n + 1):width]
    if counts.count(0) != n:
        cut.append(n - len(counts.lstrip(b"\0")))
    # The length varint (its width is known good: the pass read it), then the attributes.
    first = column(1)
    length = value(first, column(2))
    length_width = ones + high(first)
    at = length_width + (ones << 1)
    # The timestamp delta.
    first, second = pick(at, 3, 4)
    long_varints |= high(first) & high(second)
    timestamps = numbers(first, second, value(first, second), base_timestamp)
    at += ones + high(first)
    # The offset delta: consecutive offsets are compared with the lanes 0, 1, 2, ...
    first, second = pick(at, 4, 6)
    long_varints |= high(first) & high(second)
    u = value(first, second)
    delta = ZIGZAG_DECODE[u & 0xFFFF] if u & 0xFFFF < 16384 else -1
    offsets: Any
    if 0 <= delta <= 8192 - n and u == (delta * ones + (_RAMP & (1 << 16 * n) - 1)) << 1:
        offsets = range(base_offset + delta, base_offset + delta + n)
    else:
        offsets = numbers(first, second, u, base_offset)
    at += ones + high(first)
    # The key: none (a one-byte -1), or its bytes, whose end is where the value-length
    # varint is read from (its two bytes; the row stops at the key length).
    keys: Any
    first, second = pick(at, 5, 8)
    key_nulls = ones_in(first)
    if not keyed:
        first_set(key_nulls ^ ones)
        keys = repeat(None)
        at += ones
        first, second = pick(at, 6, width - 2)
    else:
        long_varints |= high(first) & high(second)
        u = value(first, second)
        first_set(u & ones ^ key_nulls)  # (a longer -1 is the general loop's error)
        at += ones + high(first)
        key_lengths = (u ^ key_nulls) >> 1 & low15  # (an odd lane's bit 0 shifted out)
        # The key ends before the record's last byte (so its value-length varint's two
        # bytes are in the buffer): at + key length + 1 <= length width + length, compared
        # in lanes biased by 0x8000 (both sides below it).
        first_set((((length >> 1) + length_width + (ones << 15) - at - key_lengths - ones)
                   >> 15 & ones) ^ ones)
        key_at = at
        k = min(n, *cut) if cut else n
        if k < MIN_STRETCH:
            return None
        # The two bytes after each key, read off a BytesIO (see the values below): from
        # the previous record's two bytes to this record's key end, then two bytes.
        ends = at + key_lengths
        sizes = (length >> 1) + length_width  # (every length is even: the pass read it)
        reads = bytearray(b"\0\0\2\0" * k)
        two = (ends + (sizes - ends - (ones << 1) << 16) & (1 << 16 * k) - 1).to_bytes(
            2 * k, "little")
        reads[::4] = two[::2]
        reads[1::4] = two[1::2]
        stream = BytesIO(data)
        stream.seek(start)
        pairs = b"".join([*map(stream.read, memoryview(reads).cast("H"))][1::2])
        rest = bytearray(2 * n)
        rest[:2 * k:2] = pairs[::2]
        first = _from_bytes(rest, "little")
        rest[:2 * k:2] = pairs[1::2]
        second = _from_bytes(rest, "little")
        at += key_lengths
    # The value: of -1 bytes (null) or not negative, and ending where the record's length
    # says (value length + its offset in the row = the record's last byte).
    long_varints |= high(first) & high(second)
    u = value(first, second)
    nulls = ones_in(u)
    first_set(u & ones ^ nulls)
    at += ones + high(first)
    first_set((u ^ nulls) + (at << 1) ^ length + (length_width << 1))
    first_set(long_varints)
    m = min(n, *cut) if cut else n
    if m < MIN_STRETCH:
        return None
    # The keys and values are read in order off one BytesIO: a read of the bytes before
    # each (thrown away), then its own (reads of lengths: no slice object or start
    # position a record, and the lengths below 257 are shared ints).
    mask = (1 << 16 * m) - 1
    sizes = (length >> 1) + length_width
    lengths: tuple[int, ...]
    if keyed:
        lengths = (key_at, key_lengths, at - key_at - key_lengths, sizes - at)
    else:
        lengths = (at, sizes - at)
    # (lengths all below 256, e.g. no key and values below 256 B: read from bytes, whose
    # items are cheaper to iterate than a memoryview's)
    spread = 0
    for u in lengths:
        spread |= u & mask
    narrow = not spread & (ones << 16) - (ones << 8)
    size = 1 if narrow else 2
    every = size * len(lengths)
    reads = bytearray(every * m)
    for i, u in enumerate(lengths):
        two = (u & mask).to_bytes(2 * m, "little")
        reads[size * i::every] = two[::2]
        if not narrow:
            reads[2 * i + 1::every] = two[1::2]
    stream = BytesIO(data)
    stream.seek(start)
    got = [*map(stream.read, reads if narrow else memoryview(reads).cast("H"))]
    values: Any = got[len(lengths) - 1::len(lengths)]
    if nulls & mask:
        values = _nones(values, nulls, m)
    if keyed:
        keys = got[1::4]
        if key_nulls & mask:
            keys = _nones(keys, key_nulls, m)
    return (m, stream.tell() + 1, offsets, timestamps, keys, values,
            map(_copy_list, repeat(_EMPTY, m)))
