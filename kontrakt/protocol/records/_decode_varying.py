"""Decoding a stretch of v2 records of varying sizes in C loops: the fast path of the record
loop in :mod:`._decode` for records that :mod:`._decode_run` cannot take (values of
different lengths, what real data and Protobuf or Avro payloads look like).

One tight interpreted pass finds where each record ends from its length varint (two table
lookups a record: records up to 8,191 bytes have a length varint of at most two bytes).
Everything else is read a field at a time for all records at once: an ``itemgetter`` of
the records' field positions gathers that field's first bytes (and, through a view one
byte further, its second bytes) into a ``bytes`` object, whose continuation bits give
every record's field width (``bytes.translate``) and whose two-byte table lookups give the
values; ``map(add, ...)`` moves every position past its field. Values and keys are one
``itemgetter`` of slices. The general loop runs ~40 bytecodes a varint field; here the
interpreter runs a fixed number of operations a *stretch*.

Exactly the records the general loop would decode are accepted: every byte it reads is
checked to parse the same way (the attributes byte is skipped by both), varints must be of
one or two bytes, the value must end at the header count, which must be 0, and that must
be the record's last byte. The stretch ends before the first record that fails any of
these; it and everything after it (malformed records included) go to the general loop,
which reports them.
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import repeat
from operator import add, getitem, itemgetter
from typing import Any, Final

from kontrakt.protocol.records._decode_run import _EMPTY, _IS_HIGH, _OFFSET_2_HIGH, _copy_list
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
#: ``bytes.translate`` tables of a varint's first byte: its width (one or two bytes), 0xFF
#: where the continuation bit is set, the seven value bits, the zig-zag sign bit (the
#: continuation bit alone: the run decoder's _IS_HIGH)
_WIDTH: Final = bytes(1 + (b >> 7) for b in range(256))
_HIGH_MASK: Final = bytes(255 * (b >> 7) for b in range(256))
_LOW_BITS: Final = bytes(b & 127 for b in range(256))
_NEGATIVE: Final = bytes(b & 1 for b in range(256))
#: _EQUAL[c]: a table giving 0xFF for byte c, else 0
_EQUAL: Final = [bytes(255 * (b == c) for b in range(256)) for c in range(256)]
# The first varint bytes of offset deltas 0-8191, so that the offset-delta columns of
# consecutive offsets are compared with slices of these (the second bytes: the run
# decoder's _OFFSET_2_HIGH, compared from delta 64 on).
_OFFSET_FIRST: Final = bytes(2 * d if d < 64 else ((2 * d) & 127) | 128 for d in range(8192))
_OFFSET_WIDTH: Final = bytes(1 if d < 64 else 2 for d in range(8192))
#: keys longer than this are left to the general loop (each record's first bytes are copied)
_MAX_KEY: Final = 64
_from_bytes = int.from_bytes


def _layout(data: bytes, pos: int) -> tuple[int, int] | None:
    """For a record at ``pos`` of a layout taken here: (how many bytes from the byte before
    it to its value-length varint's second byte, at the widest varints; its key's length,
    -1 for none); else None. Read as the general loop reads it."""
    varint = _VARINT
    try:
        step = _STEP[data[pos]][data[pos + 1]]
        at = pos + 2 + (data[pos] >> 7)  # past the length and the attributes
        for _ in range(2):  # the timestamp and offset deltas
            if step is None or varint[data[at]][data[at + 1]] is None:
                return None
            at += 1 + (data[at] >> 7)
        key = -1
        if data[at] == 1:
            at += 1
        else:
            n = varint[data[at]][data[at + 1]]
            if n is None or not 0 <= n <= _MAX_KEY:
                return None
            key = n
            at += 1 + (data[at] >> 7) + key
        n = varint[data[at]][data[at + 1]]
        if n is None or n < 0 or step is None:
            return None
        at += 1 + (data[at] >> 7) + n
        if at != pos + step - 1 or data[at] != 0:
            return None
    except IndexError:
        return None
    return (11 if key < 0 else 12 + key), key


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
    width, key_len = layout
    # The one interpreted pass: where every record ends (lasts[i + 1], its header count;
    # lasts[0] is the byte before the first record), and the first bytes of every record
    # after the previous one's last byte, a row of ``width`` bytes a record.
    step = _STEP
    q = pos - 1
    lasts: list[int] = []
    rows: list[bytes] = []
    append_last = lasts.append
    append_row = rows.append
    try:
        for _ in range(limit):
            append_last(q)
            append_row(row := data[q:q + width])
            q += step[row[1]][row[2]]  # type: ignore[operator]
        append_last(q)
        append_row(data[q:q + width])
    except (TypeError, IndexError):
        pass  # a length of 3+ bytes or below 1, or the buffer's end: the stretch ends there
    n = bisect_right(lasts, end - 1) - 1
    if n < MIN_STRETCH:
        return None
    del lasts[n + 1:], rows[n + 1:]
    j = n
    while len(rows[j]) < width:  # rows cut by the buffer's end
        rows[j] = rows[j].ljust(width, b"\0")
        j -= 1
    return _columns(b"".join(rows), width, key_len, data, lasts, n, base_offset,
                    base_timestamp)


def _columns(table: bytes, width: int, key_len: int, data: bytes, lasts: list[int], n: int,
             base_offset: int, base_timestamp: int
             ) -> tuple[int, int, Any, Any, Any, Any, Any] | None:
    """The stretch of the ``n`` records whose rows are ``table``'s, cut before the first one
    the general loop would read otherwise.

    Each field is read for all records at once: byte ``c`` of every row is the extended
    slice ``table[c::width]``; a field's column (whose offset in the rows differs between
    records by the widths of the varints before it) is put together from those as one big
    integer a byte a record, masked by where the field is in each row. Varints become 16
    bits a record in the same way, so that every check is a few operations on big integers.
    """
    def ints(column: bytes | bytearray) -> int:
        return _from_bytes(column, "little")

    def column(c: int) -> bytes:
        return table[c:c + width * n:width]

    columns: dict[int, int] = {}

    def column_int(c: int) -> int:
        if (got := columns.get(c)) is None:
            got = columns[c] = ints(column(c))
        return got

    def pick(at: int, lo: int, hi: int, *, both: bool = True) -> tuple[bytes, bytes]:
        """The bytes at row offset ``at`` (a byte a record) and (with ``both``) those after
        them."""
        where = at.to_bytes(n, "little")
        if where.count(where[0]) == n:  # the field at one offset in every row
            c = where[0]
            return column(c), column(c + 1) if both else b""
        first = second = 0
        for c in range(lo, hi + 1):
            if c in where:
                mask = ints(where.translate(_EQUAL[c]))
                first |= column_int(c) & mask
                if both:
                    second |= column_int(c + 1) & mask
        return first.to_bytes(n, "little"), second.to_bytes(n, "little")

    def long_bits(first: bytes, second: bytes) -> int:
        """The continuation bit of each record's second varint byte where its first has
        one: set for a varint of three bytes or more."""
        return ints(first.translate(_IS_HIGH)) & ints(second.translate(_IS_HIGH))

    def wide(column: bytes) -> int:
        """``column`` as a big integer of 16 bits a record."""
        lanes = bytearray(2 * n)
        lanes[::2] = column
        return ints(lanes)

    def zigzag(first: bytes, second: bytes) -> int:
        """The zig-zag (unsigned) values of 1-2 byte varints, 16 bits a record."""
        return wide(first.translate(_LOW_BITS)) | wide(
            (ints(second) & ints(first.translate(_HIGH_MASK))).to_bytes(n, "little")) << 7

    ones = ints(b"\x01" * n)
    ones16 = ones and (1 << 16 * n) // 65535  # 1 in every 16-bit lane
    cut: list[int] = []  # where each check fails first, in records
    long_varints = 0  # the continuation bit of every varint's second byte that needs it

    def first_set(bits: int, lane: int) -> None:
        if bits:
            cut.append(((bits & -bits).bit_length() - 1) // lane)

    def numbers(first: bytes, second: bytes, base: int) -> list[int]:
        """base + the varints' values (records past a long varint: wrong, cut below)."""
        u = zigzag(first, second)
        if not u & ones16:  # no negative value: the values are u / 2
            values = memoryview((u >> 1).to_bytes(2 * n, "little")).cast("H")
            return [*map(add, values, repeat(base))]
        good = long_bits(first, second)
        k = ((good & -good).bit_length() - 1) // 8 if good else n
        return [*map(add, map(getitem, map(_VARINT.__getitem__, first[:k]), second),
                     repeat(base))]

    # Every record's header count (the first byte of the next row) must be 0.
    counts = table[width:width * (n + 1):width]
    if counts.count(0) != n:
        cut.append(n - len(counts.lstrip(b"\0")))
    # The length varint (its width is known good: the pass read it), then the attributes.
    first, second = column(1), column(2)
    length = zigzag(first, second)
    length_width = first.translate(_WIDTH)
    at = ints(length_width) + 2 * ones
    # The timestamp delta.
    first, second = pick(at, 3, 4)
    long_varints |= long_bits(first, second)
    timestamps = numbers(first, second, base_timestamp)
    at += ints(first.translate(_WIDTH))
    # The offset delta: consecutive offsets are compared with their encoding.
    first, second = pick(at, 4, 6)
    delta = _VARINT[first[0]][second[0]]
    offsets: Any
    if (delta is not None and 0 <= delta <= 8192 - n
            and first == _OFFSET_FIRST[delta:delta + n]
            # (the second bytes of the deltas from 64 on: the others are one byte long)
            and second[max(64 - delta, 0):] == _OFFSET_2_HIGH[max(64, delta):delta + n]):
        offsets = range(base_offset + delta, base_offset + delta + n)
        at += ints(_OFFSET_WIDTH[delta:delta + n])
    else:
        long_varints |= long_bits(first, second)
        offsets = numbers(first, second, base_offset)
        at += ints(first.translate(_WIDTH))
    # The key: none in every record, or of the first record's length in every record.
    keys: Any
    if key_len < 0:
        first, _ = pick(at, 5, 8, both=False)
        first_set(ints(first) ^ ones, 8)
        keys = repeat(None)
        at += ones
    else:
        first, second = pick(at, 5, 8)
        long_varints |= long_bits(first, second)
        first_set(zigzag(first, second) ^ 2 * key_len * ones16, 16)
        at += ints(first.translate(_WIDTH))
        starts = [*map(add, lasts, at.to_bytes(n, "little"))]
        keys = itemgetter(*map(slice, starts, map(add, starts, repeat(key_len))))(data)
        at += key_len * ones
    # The value: not negative (a null value is the general loop's) and ending where the
    # record's length says (value length + its offset in the row = the record's last byte).
    first, second = pick(at, 6, width - 2)
    long_varints |= long_bits(first, second)
    first_set(ints(first.translate(_NEGATIVE)), 8)
    at += ints(first.translate(_WIDTH))
    first_set((zigzag(first, second) + (wide(at.to_bytes(n, "little")) << 1))
              ^ (length + (wide(length_width) << 1)), 16)
    first_set(long_varints, 8)
    value_at = at.to_bytes(n, "little")
    n = min(n, *cut) if cut else n
    if n < MIN_STRETCH:
        return None
    starts = [*map(add, lasts, value_at[:n])]
    values = itemgetter(*map(slice, starts, lasts[1:n + 1]))(data)
    return (n, lasts[n] + 1, offsets, timestamps, keys, values,
            map(_copy_list, repeat(_EMPTY, n)))
