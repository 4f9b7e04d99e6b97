"""Where a v2 batch's records start: the one sequential step of reading records as columns.

A v2 record begins with its length (a zig-zag varint), so finding record ``i + 1`` needs
record ``i``'s length, and nothing else: once the starts are known, every field of every
record can be read column-wise (all timestamp deltas, then all offset deltas, ...) by a
vectorised reader, e.g. ``kontrakt.spark._batches`` with Arrow compute kernels, without a
Python object per record.

:func:`record_starts` walks the lengths with one table lookup per record (a 64 Ki-entry
table from a record's first two bytes to its whole size, for records under 8 KiB) in a list
comprehension. Measured in-process on the project machine (2 shared cores, busy; a machine
on which ``decode_records`` takes ~2.8 µs a record): ~0.28 µs a record for 10,000 records
of 60-byte values. Runs of records of one size (fixed-size records) are taken at once
first (:func:`_runs`: strided slices and ``lstrip`` in C, the starts a ``range``): ~0.02 µs
a record for those records, measured the same way. Records under 64 bytes (a one-byte
length: small Avro or Protobuf values) are walked with a 256-entry table a block at a time
(:func:`_walk`): 0.10-0.12 µs a record against 0.25-0.28 for the two-byte table, 16,384
records of 20-50-byte values, CPU time, load 10.

It checks only that the lengths lead from ``pos`` to exactly ``end``; the reader must check
that each record's fields end where the next record starts (which also rules out a
length that is negative or zero), as :func:`~kontrakt.protocol.records.decode_records`
(the oracle) checks each record against its length.
"""

from __future__ import annotations

from typing import Any

from kontrakt.errors import CorruptRecordError
from kontrakt.protocol.records._model import ZIGZAG_DECODE, decode_varint_slow

__all__ = ["record_starts"]

_STEPS: list[int | None] = []


def _steps() -> list[int | None]:
    """``table[(b0 << 8) | b1]``: the size (length varint included) of a record whose first
    two bytes are b0, b1, or None when its length varint takes three bytes or more."""
    if not _STEPS:
        zz = ZIGZAG_DECODE
        table: list[int | None] = [None] * 65536
        for b0 in range(256):
            for b1 in range(256):
                if b0 < 128:
                    table[(b0 << 8) | b1] = 1 + zz[b0]
                elif b1 < 128:
                    table[(b0 << 8) | b1] = 2 + zz[(b0 & 127) | (b1 << 7)]
        _STEPS[:] = table
    return _STEPS


def record_starts(data: Any, pos: int, end: int, count: int) -> list[int]:
    """Where each of the ``count`` records in ``data[pos:end]`` starts, and where the last
    ends: ``count + 1`` positions, the first ``pos`` and the last ``end``.

    Args:
        data: ``bytes`` holding the records (a batch's buffer or decompressed payload).
        pos, end: where the records start and end.
        count: the batch's record count.

    Raises:
        CorruptRecordError: the records' lengths do not lead from ``pos`` to ``end`` (a
            malformed length, records running past ``end`` or stopping short of it); no
            location attached. A walk that arrives at ``end`` through a wrong length (a
            negative one) is the reader's to find (see the module's docstring).
    """
    step = _steps()
    first = pos
    try:
        starts = [first]
        left = count
        if count >= _RUN_MIN and type(data) is bytes:  # lstrip, strided slices
            pos, left = _runs(data, pos, end, count, step, starts)
        _walk(data, pos, left, step, starts)
    except (TypeError, IndexError):
        # A record of 8 KiB or more (a three-byte length), or bytes that run out: the
        # general loop, which says what is wrong.
        starts = _starts_slow(data, first, end, count)
    if starts[-1] != end:
        # Walked again the slow way only when wrong, for a precise message.
        starts = _starts_slow(data, first, end, count)
    return starts


_RUN_MIN = 64  # records: fewer are walked one by one
#: records walked at a time: a block tries the one-byte table first
_BLOCK = 128
_ONE: list[int | None] = []


def _one_byte() -> list[int | None]:
    """``table[b0]``: the size of a record whose length is the one-byte varint b0 (a
    record under 64 bytes), or None for the first byte of a longer length."""
    if not _ONE:
        _ONE[:] = [1 + ZIGZAG_DECODE[b0] if b0 < 128 else None for b0 in range(256)]
    return _ONE


def _walk(data: Any, pos: int, left: int, step: list[int | None], starts: list[int]) -> None:
    """Append the ends of the next ``left`` records from ``pos`` to ``starts``.

    Per record: an indexing, a lookup in a 256-entry table and an add, in a comprehension
    (~0.10 us a record on the project machine); a block of records that holds a length of
    two bytes or more (a record of 64 bytes or more) fails on its None and is walked again
    with the two-byte table (two indexings and a 64 Ki-entry table: ~0.25 us). After such
    a block the next ones go to the two-byte walk at once, twice as many after each failed
    try (up to 256 blocks), so that records of mixed sizes do not pay for both walks.
    Raises TypeError / IndexError as the two-byte walk does."""
    one = _one_byte()
    skip = 0
    backoff = 2
    while left > 0:
        k = min(left, _BLOCK)
        at = pos
        if not skip:
            try:
                starts += [pos := pos + one[data[pos]] for _ in range(k)]
                left -= k
                backoff = 2
                continue
            except TypeError:
                pos = at
                skip = backoff
                backoff = min(2 * backoff, 256)
        else:
            skip -= 1
        starts += [pos := pos + step[(data[pos] << 8) | data[pos + 1]]
                   for _ in range(k)]
        left -= k


def _runs(data: Any, pos: int, end: int, count: int, step: list[int | None],
          starts: list[int]) -> tuple[int, int]:
    """Take runs of records of one size at once, appending their starts' successors to
    ``starts``; return where the walk goes on and how many records are left for it.

    Records whose length varints are the same bytes have the same size, and a run of them
    lies at one stride: the first (and second) bytes at that stride, sliced in C, show
    how far the run goes (``lstrip``), and its starts are a ``range``. Fixed-size records
    (a fixed-width value, no key or one of fixed width) make a handful of runs a batch,
    as the offset and timestamp deltas grow a byte; once a run is short (other records)
    the caller's walk takes the rest."""
    left = count
    while left:
        b0 = data[pos]
        size = step[(b0 << 8) | data[pos + 1]]
        if size is None or size <= 0:
            break  # a long or malformed length: the walk (and its checks) decide
        k = min(left, (end - pos) // size)
        if k <= 1:
            break
        stop = pos + k * size
        firsts = data[pos:stop:size]
        same = len(firsts) - len(firsts.lstrip(firsts[:1]))
        if b0 >= 0x80:  # a two-byte length: the second bytes must agree too
            seconds = data[pos + 1:stop:size]
            same = min(same, len(seconds) - len(seconds.lstrip(seconds[:1])))
        starts += range(pos + size, pos + (same + 1) * size, size)
        pos += same * size
        left -= same
        if same < _RUN_MIN:
            break
    return pos, left


def _starts_slow(data: Any, pos: int, end: int, count: int) -> list[int]:
    starts = [pos]
    for i in range(count):
        if pos >= end:
            raise CorruptRecordError(f"record {i} of {count} runs past the batch")
        n, after = decode_varint_slow(data, pos)
        if n < 1:
            raise CorruptRecordError(f"record {i} has length {n}")
        pos = after + n
        if pos > end:
            raise CorruptRecordError(f"record {i} of {count} runs past the batch")
        starts.append(pos)
    if pos != end:
        raise CorruptRecordError(f"batch holds {end - pos} bytes after its {count} records")
    return starts
