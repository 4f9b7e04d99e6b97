"""Runs of records written in one call: the bytes behind
:meth:`~kontrakt.protocol.records.RecordBatchBuilder.append_many`.

:meth:`RecordBatchBuilder.append` writes a record with ~40 Python operations (varint
lookups, length sums, a tuple of nine parts), ~1 us a record; a sink or bulk loader with
thousands of records at hand pays that for each. :func:`encode_run` writes the same bytes
for a run of records with a fixed number of operations a *run*, each a loop in C over the
run: ``map(len, ...)``, table lookups of many indices at once (``itemgetter(*lengths)``
of a list, ~4x cheaper a record than ``map`` of a bound ``__getitem__``), slice
assignments into one parts list and one ``b"".join``.

The run's offset deltas share one varint length (runs are cut where it grows) and, with
one timestamp for all, so does its timestamp delta: a record's body is a constant plus
its key, value and header bytes (``rest``), and the bytes before its offset delta -- the
header count of the record before it, its length, attributes and timestamp delta -- and its
size are looked up by ``rest`` in tables kept per constant (:func:`_heads`). A record is
then four parts (head, offset delta, null key and value length, value) when keyless.

Tested byte for byte against ``RecordBatchBuilder.append`` and the producer's reference
``encode_record`` (tests/unit/test_records_runs.py).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from itertools import accumulate, repeat
from operator import add, itemgetter, sub
from typing import Any

from kontrakt.protocol.records._model import SMALL_LIMIT, VARINT_BYTES, encode_varint

__all__ = ["deltas_from", "encode_run", "run_end"]

_SIZES = [len(b) for b in VARINT_BYTES]
#: ``n`` plus the length of its varint: what a key or value of ``n`` bytes adds to a body
_WITH_LENGTH = [n + s for n, s in enumerate(_SIZES)]
#: a null key's length (-1) and a value's length varint, by value length
_NULL_KEY_AND_LENGTH = [b"\x01" + v for v in VARINT_BYTES]
#: (constant, bytes after the length, leading header count) -> (heads, sizes) by rest
_HEADS: dict[tuple[int, bytes, bool], tuple[list[bytes], list[int]]] = {}
_HEAD_BUDGET = 1 << 16  # entries kept in all (a few tens of bytes each)
_head_entries = 0


def run_end(offset: int) -> int:
    """The first offset delta at or after ``offset`` whose varint is longer than
    ``offset``'s (a run's offset deltas stay below it)."""
    end = 64  # zig-zag varints grow at 2 ** (7 * k - 1)
    while end <= offset:
        end <<= 7
    return end


def deltas_from(timestamps: list[int], base: int) -> list[int]:
    """Each timestamp less ``base``."""
    return [*map(sub, timestamps, repeat(base))]


def _pick(indexes: Sequence[int]) -> Callable[[Sequence[Any]], Sequence[Any]]:
    """The items of a table at ``indexes``, in one call."""
    if len(indexes) > 1:
        return itemgetter(*indexes)
    index = indexes[0]  # itemgetter of one index gives the item, not a tuple
    return lambda table: (table[index],)


def _heads(constant: int, after: bytes, leading: bool, upto: int
           ) -> tuple[list[bytes], list[int]]:
    """For each rest below ``upto``: the bytes of a record of body ``constant + rest``
    before its offset delta (the record before's header count when ``leading``, the
    length varint, then ``after``: attributes, and the timestamp delta when the run has
    one), and the record's size.

    A table grows by a new pair of lists put in place of the old one, never in place:
    builders in other threads may be reading it (or growing it at the same time, to the
    same entries)."""
    global _head_entries
    key = (constant, after, leading)
    table = _HEADS.get(key)
    if table is not None and len(table[0]) >= upto:
        return table
    if _head_entries > _HEAD_BUDGET:
        _HEADS.clear()
        _head_entries = 0
        table = None
    heads, sizes = table or ([], [])
    lead = b"\x00" if leading else b""
    more = range(constant + len(heads), constant + upto)
    table = _HEADS[key] = (heads + [lead + VARINT_BYTES[body] + after for body in more],
                           sizes + [body + _SIZES[body] for body in more])
    _head_entries += len(more)
    return table


def encode_run(offset: int, deltas: int | list[int], keys: list[bytes] | None,
               values: list[bytes], headers: list[bytes] | None, room: int,
               at_least_one: bool) -> tuple[bytes, int, int] | None:
    """The bytes of records with offset deltas ``offset``, ``offset + 1``, ... (all below
    ``run_end(offset)``), as many as fit in ``room`` bytes.

    Args:
        offset: the first record's offset delta.
        deltas: the records' timestamp deltas, or one for all.
        keys: bytes keys (None: every key null).
        values: bytes values (not None).
        headers: each record's header section as ``encode_headers`` writes it (None:
            none has headers).
        room: bytes the batch may still grow by.
        at_least_one: write the first record even if it does not fit (an empty batch's).

    Returns:
        (bytes, records written, bytes written), (b"", 0, 0) when none fits; None when a
        length or timestamp delta is out of the varint table (a record of 8 KiB or more, a
        timestamp before the batch's base or 8 s after it): append those one by one.
    """
    small = SMALL_LIMIT
    vlens = [*map(len, values)]
    if max(vlens) >= small:
        return None
    pick_values = _pick(vlens)
    rests: Sequence[int] = pick_values(_WITH_LENGTH)
    # attributes and offset delta; a null key's length, an empty header section and the
    # timestamp delta where those are the run's
    constant = 1 + len(encode_varint(offset))
    if keys is not None:
        klens = [*map(len, keys)]
        if max(klens) >= small:
            return None
        pick_keys = _pick(klens)
        rests = [*map(add, rests, pick_keys(_WITH_LENGTH))]
    else:
        constant += 1
    if headers is not None:
        rests = [*map(add, rests, map(len, headers))]
    else:
        constant += 1
    after = b"\x00"
    if isinstance(deltas, int):
        if not 0 <= deltas < small:
            return None
        after += VARINT_BYTES[deltas]
        constant += _SIZES[deltas]
    else:
        if min(deltas) < 0 or max(deltas) >= small:
            return None
        pick_deltas = _pick(deltas)
        rests = [*map(add, rests, pick_deltas(_SIZES))]
    most = max(rests)
    if constant + most >= small:
        return None
    heads, sizes = _heads(constant, after, headers is None, most + 1)
    pick_rests = _pick(rests)
    record_sizes = pick_rests(sizes)
    n = len(values)
    total = sum(record_sizes)
    if total > room:
        totals = [*accumulate(record_sizes)]
        n = bisect_right(totals, room)
        if n == 0:
            if not at_least_one:
                return b"", 0, 0
            n = 1
        total = totals[n - 1]
    end = offset + n
    # Each record's parts in order: head (see _heads), [timestamp delta], offset delta,
    # key length and key or the null key's length, value length, value, [header section];
    # a slice of stride ``width`` puts each column in place.
    columns: list[Sequence[bytes]] = [pick_rests(heads)]
    if not isinstance(deltas, int):
        columns.append(pick_deltas(VARINT_BYTES))
    columns.append(VARINT_BYTES[offset:end] if end <= small
                   else [*map(encode_varint, range(offset, end))])
    if keys is None:
        columns.append(pick_values(_NULL_KEY_AND_LENGTH))
    else:
        columns += (pick_keys(VARINT_BYTES), keys, pick_values(VARINT_BYTES))
    columns.append(values)
    if headers is not None:
        columns.append(headers)
    width = len(columns)
    last = width * n
    parts: list[bytes] = [b""] * (last + 1)
    for i, column in enumerate(columns):
        parts[i:last:width] = column[:n]
    if headers is None:
        # The first head's leading header count belongs to no record here; the last
        # record's comes after it.
        parts[0] = parts[0][1:]
        parts[last] = b"\x00"
    return b"".join(parts), n, total
