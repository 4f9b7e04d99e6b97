"""The v2 record layout: the producer's one writer of record bytes.

A record (KIP-98) is its body's length as a zig-zag varint, then the body: attributes (a zero
byte), timestamp delta, offset delta, key length and key (-1 for None), value length and
value, header count and headers. :func:`encode_record` writes it field by field, plainly:
the reference. Everything else here writes the same bytes faster, for one situation each, and
is tested byte for byte against it and against
:class:`~kontrakt.protocol.records.RecordBatchBuilder` (tests/unit/producer/test_records.py):

- :func:`append_record` / :func:`first_record`: one record into a batch's parts (any key,
  value, headers, timestamp); the send paths and the accumulator's general append.
- :func:`append_staged`: one staged keyed record whose lengths and deltas are all in the
  varint table (settling a chunk record by record).
- :func:`uniform_runs` / :func:`mixed_runs`: writers of whole runs of staged records that
  share a batch and a timestamp, with slice assignments instead of a loop
  (see ``_stage.py``); records whose keys and values all share their lengths look their
  bytes before the key up in :class:`PrefixTables`.
- :func:`renumbered`: written records again with new offset deltas (the second half of a
  split batch, see ``_split.py``).

A batch's records are kept as a list of ``bytes`` parts (``ProducerBatch.parts``), joined
once when the batch is framed (``ProducerBatch.encode``).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from itertools import accumulate
from itertools import repeat as _repeat
from operator import add as _add
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from kontrakt.protocol.records._builder import encode_headers
from kontrakt.protocol.records._model import SMALL_LIMIT, VARINT_BYTES, encode_varint

if TYPE_CHECKING:
    from kontrakt.clients.producer._batch import ProducerBatch

__all__ = ["NULL_LENGTH", "RECORD_OVERHEAD", "PrefixTables", "append_record",
           "append_staged", "encode_record", "first_record", "mixed_runs", "record_fields",
           "renumbered", "uniform_runs"]

Header = tuple[str, bytes | None]

_SMALL = SMALL_LIMIT
#: byte length of each small varint (a subscript is cheaper than a len() call)
_VARINT_SIZES = [len(b) for b in VARINT_BYTES]
#: the first offset delta whose varint takes two bytes
_TWO_BYTE_OFFSETS = _VARINT_SIZES.index(2)
#: upper bound of a record's varints, attributes byte and header count: added to its key and
#: value lengths for size checks, and charged to buffer.memory while a record is staged
RECORD_OVERHEAD = 21
#: record prefixes are kept for offset deltas below this, those whose varint takes at most
#: two bytes (records past it go one by one)
_PREFIX_COUNTS = SMALL_LIMIT
#: (key length, value length) pairs whose prefixes are kept
_PREFIX_SHAPES = 8
#: prefixes kept in all (~70 bytes each); past this the tables start over
_PREFIX_BUDGET = 1 << 16
#: timestamp deltas whose varint is one byte (the prefixes kept are for these)
DELTAS = 64
#: the length varint of a null key or value (-1)
NULL_LENGTH = b"\x01"
#: a record's attributes (none) and timestamp delta, by delta below DELTAS
_ATTRIBUTES_AND_DELTA = [b"\x00" + VARINT_BYTES[d] for d in range(DELTAS)]

#: a run writer: ``write(picked, batch, offset delta, timestamp delta, start, end)`` ->
#: (records written, bytes added); see _stage._settle_runs
RunWriter = Callable[[Any, "ProducerBatch", int, int, int, int], tuple[int, int]]
#: one record of a run's gathered columns: (key length varint, key, value length varint,
#: value, rest) for append_record / first_record
OneRecord = Callable[[Any, int], tuple[bytes, bytes, bytes, bytes, int]]


def encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None,
                  value: bytes | None, headers: Sequence[Header] | None = None) -> bytes:
    """One record's bytes, field by field (the reference the fast writers are tested
    against)."""
    body = bytearray(b"\x00")  # attributes: none are defined for records
    body += encode_varint(timestamp_delta)
    body += encode_varint(offset_delta)
    for data in (key, value):
        if data is None:
            body += encode_varint(-1)
        else:
            body += encode_varint(len(data))
            body += data
    body += encode_headers(headers or [])
    return encode_varint(len(body)) + bytes(body)


def record_fields(key: bytes | None, value: bytes | None, headers: Sequence[Header] | None
                  ) -> tuple[bytes, bytes, int, bytes, bytes, int, bytes, int]:
    """A record's parts that do not depend on its batch: (key length varint, key, key size,
    value length varint, value, value size, header section, ``rest``), sizes -1 for None
    (None key or value as b""); ``rest`` is the bytes of all but the length, attributes and
    the two deltas (what :func:`append_record` takes).

    Raises:
        TypeError: a header name is not str or a header value not bytes-like or None.
    """
    small = VARINT_BYTES
    if key is None:
        kb = NULL_LENGTH
        klen = 0
        ksize = -1
        key = b""
    else:
        ksize = klen = len(key)
        kb = small[klen] if klen < _SMALL else encode_varint(klen)
    if value is None:
        vb = NULL_LENGTH
        vlen = 0
        vsize = -1
        value = b""
    else:
        vsize = vlen = len(value)
        vb = small[vlen] if vlen < _SMALL else encode_varint(vlen)
    hb = encode_headers(headers) if headers else b"\x00"
    return kb, key, ksize, vb, value, vsize, hb, len(kb) + klen + len(vb) + vlen + len(hb)


def append_record(batch: ProducerBatch, timestamp: int, kb: bytes, key: bytes, vb: bytes,
                  value: bytes, hb: bytes, rest: int, limit: int) -> int:
    """Write a record (parts as :func:`record_fields` gives them) after ``batch``'s last
    one, unless that takes the batch past ``limit`` bytes.

    Returns:
        The bytes added; 0 when the record does not fit (nothing written).
    """
    small = VARINT_BYTES
    count = batch.count
    ts_delta = timestamp - batch.base_timestamp
    tsb = small[ts_delta] if 0 <= ts_delta < _SMALL else encode_varint(ts_delta)
    odb = small[count] if count < _SMALL else encode_varint(count)
    body_len = 1 + len(tsb) + len(odb) + rest
    lb = small[body_len] if body_len < _SMALL else encode_varint(body_len)
    added = len(lb) + body_len
    new_size = batch.size + added
    if new_size > limit:
        return 0
    batch.parts += (lb, b"\x00", tsb, odb, kb, key, vb, value, hb)
    batch.size = new_size
    batch.count = count + 1
    if timestamp > batch.max_timestamp:
        batch.max_timestamp = timestamp
    return added


def first_record(batch: ProducerBatch, timestamp: int, kb: bytes, key: bytes, vb: bytes,
                 value: bytes, hb: bytes, rest: int) -> int:
    """Write the first record of the empty ``batch`` (it always fits): its timestamp is the
    batch's base. Returns the bytes added."""
    body_len = 3 + rest  # attributes, timestamp delta 0, offset delta 0
    lb = VARINT_BYTES[body_len] if body_len < _SMALL else encode_varint(body_len)
    batch.parts += (lb, b"\x00\x00\x00", kb, key, vb, value, hb)
    added = len(lb) + body_len
    batch.size += added
    batch.count = 1
    batch.base_timestamp = batch.max_timestamp = timestamp
    return added


def append_staged(batch: ProducerBatch, timestamp: int, key: bytes, value: bytes,
                  limit: int) -> int:
    """:func:`append_record` for a staged record (bytes key and value, no headers) when
    its key, value and whole record are short enough for the varint table (see
    AsyncProducer.send's staging limit): a table subscript per varint.

    Returns:
        The bytes added; 0 when the record does not fit or a delta is out of the table
        (nothing written: take append_record).
    """
    count = batch.count
    delta = timestamp - batch.base_timestamp
    if not (-1 < delta < _SMALL and count < _SMALL):
        return 0
    sizes = _VARINT_SIZES
    small = VARINT_BYTES
    klen = len(key)
    vlen = len(value)
    body = sizes[delta] + sizes[count] + sizes[klen] + sizes[vlen] + klen + vlen + 2
    added = sizes[body] + body
    new_size = batch.size + added
    if new_size > limit:
        return 0
    batch.parts += (small[body], b"\x00", small[delta], small[count], small[klen], key,
                    small[vlen], value, b"\x00")
    batch.size = new_size
    batch.count = count + 1
    if timestamp > batch.max_timestamp:
        batch.max_timestamp = timestamp
    return added


def renumbered(records: bytes, spans: Sequence[tuple[int, int, int, int]]) -> bytes:
    """The records of ``records`` at ``spans`` -- each (where its body starts, where its
    offset delta starts, where that ends, where the record ends) -- written again with
    offset deltas 0, 1, ...: attributes, timestamp delta and the rest as they were."""
    parts: list[bytes] = []
    for i, (body, offset_at, rest_at, end) in enumerate(spans):
        new = records[body:offset_at] + encode_varint(i) + records[rest_at:end]
        parts += (encode_varint(len(new)), new)
    return b"".join(parts)


# --- runs of records ---------------------------------------------------------------------


def gather_columns(idx: list[int], *columns: list[Any]) -> list[tuple[Any, ...]]:
    """The items at ``idx`` of each column, as tuples."""
    if len(idx) > 1:
        pick = itemgetter(*idx)
        return [pick(c) for c in columns]
    i = idx[0]  # itemgetter of one index gives the item, not a tuple
    return [(c[i],) for c in columns]


def _grow_prefixes(prefixes: list[bytes], sizes: list[int], delta: int, upto: int,
                   kb: bytes, rest: int) -> None:
    """Extend ``prefixes`` (of timestamp delta ``delta``) to offset delta ``upto - 1``, and
    ``sizes``, their running total length, with them. A prefix is a record's bytes before
    its key -- length, attributes, the two deltas and the key length ``kb`` -- for records
    whose bytes after the two deltas number ``rest``; it is kept after a zero byte, the
    header count of the record before it (see uniform_runs), which ``sizes`` leaves
    out."""
    tb = VARINT_BYTES[delta]
    # The offset deltas of one varint length give entries of one length: each such range is
    # built by a map and its sizes by a range (~80 ns an entry against ~340 one by one; a
    # new producer grows ~8-10k entries in its first 200k records). Offset deltas stay below
    # _PREFIX_COUNTS and bodies below the stage limit, so every varint is in the table.
    for lo, hi in ((len(prefixes), min(upto, _TWO_BYTE_OFFSETS)),
                   (max(len(prefixes), _TWO_BYTE_OFFSETS), upto)):
        if lo >= hi:
            continue
        offsets = VARINT_BYTES[lo:hi]
        body = 1 + len(tb) + len(offsets[0]) + rest
        head = b"\x00" + VARINT_BYTES[body] + b"\x00" + tb
        prefixes += map(b"".join, zip(_repeat(head), offsets, _repeat(kb)))
        size = len(head) - 1 + len(offsets[0]) + len(kb)  # less the leading header count
        total = sizes[-1]
        sizes += range(total + size, total + size * (hi - lo) + 1, size)


class PrefixTables:
    """Record prefixes for :func:`uniform_runs`, by (key length, value length): for each
    timestamp delta below DELTAS, the prefixes by offset delta and their running total
    sizes; made on first use, grown as offset deltas are reached (see _grow_prefixes), and
    bounded (``_PREFIX_SHAPES`` shapes, ``_PREFIX_BUDGET`` entries)."""

    __slots__ = ("entries", "shapes")

    def __init__(self) -> None:
        self.shapes: dict[tuple[int, int], list[tuple[list[bytes], list[int]]]] = {}
        self.entries = 0

    def __len__(self) -> int:
        return len(self.shapes)

    def table(self, klen: int, vlen: int) -> list[tuple[list[bytes], list[int]]]:
        shapes = self.shapes
        if self.entries > _PREFIX_BUDGET:
            # Bounded memory: rows only grow to the deltas batches reach, but many shapes or
            # timestamp deltas could add up.
            shapes.clear()
        table = shapes.get((klen, vlen))
        if table is None:
            if len(shapes) >= _PREFIX_SHAPES:
                shapes.clear()
            if not shapes:
                self.entries = 0
            table = shapes[(klen, vlen)] = [([], [0]) for _ in range(DELTAS)]
        return table


def uniform_runs(tables: PrefixTables, batch_size: int, keys: list[bytes],
                 values: list[bytes], klen: int, vlen: int
                 ) -> tuple[Callable[[list[int]], Any], RunWriter, OneRecord]:
    """The run writers for a chunk whose keys are all ``klen`` bytes long and values all
    ``vlen``: (gather, write, one), see _stage._settle_runs. ``klen`` -1: the records have
    no key (``keys`` holds empty bytes).

    Such records' bytes before their keys depend only on the timestamp and offset deltas,
    so they and their sizes are looked up (each after the header count of the record
    before it: four parts a record to join, not five), and a run is written with four
    slice assignments. A run stops at offset delta _PREFIX_COUNTS.
    """
    n = len(keys)
    kb = VARINT_BYTES[klen] if klen >= 0 else NULL_LENGTH
    vb = VARINT_BYTES[vlen]
    length_bytes = [vb] * n  # each value's length varint
    # A record's bytes after its prefix, and after its two deltas (see record_fields).
    tail = max(klen, 0) + len(vb) + vlen + 1
    rest = len(kb) + tail
    # The largest record a run can hold: one-byte timestamp delta, an offset delta below
    # _PREFIX_COUNTS (two bytes at most).
    body = 1 + 1 + 2 + rest
    largest = len(encode_varint(body)) + body
    table = tables.table(klen, vlen)
    prefix_counts = _PREFIX_COUNTS

    def gather(idx: list[int]) -> Any:
        return gather_columns(idx, keys, values)

    def write(picked: Any, batch: ProducerBatch, count: int, delta: int, pos: int,
              end: int) -> tuple[int, int]:
        k = min(end - pos, (batch_size - batch.size) // largest, prefix_counts - count)
        if k <= 0:
            return 0, 0
        p_keys, p_values = picked
        prefixes, sizes = table[delta]
        upto = count + k
        if len(prefixes) < upto:
            tables.entries += upto - len(prefixes)
            _grow_prefixes(prefixes, sizes, delta, upto, kb, rest)
        # prefix, key, value length, value; the next record's prefix begins with this
        # one's header count, and the run's last count is a part of its own.
        parts: list[bytes] = [b""] * (4 * k + 1)
        parts[0] = prefixes[count][1:]
        parts[4:4 * k:4] = prefixes[count + 1:upto]
        parts[4 * k] = b"\x00"
        parts[1::4] = p_keys[pos:pos + k]
        parts[2::4] = length_bytes[:k]
        parts[3::4] = p_values[pos:pos + k]
        # Joined now, while the run's keys are in cache (the settle just hashed them):
        # the I/O thread joining a batch's thousands of parts at its first encode
        # misses the cache on each, and holds the GIL meanwhile (~100 us a 128 KiB
        # batch against ~30 here).
        batch.parts.append(b"".join(parts))
        return k, sizes[upto] - sizes[count] + tail * k

    def one(picked: Any, pos: int) -> tuple[bytes, bytes, bytes, bytes, int]:
        return kb, picked[0][pos], vb, picked[1][pos], rest

    return gather, write, one


def mixed_runs(batch_size: int, keys: list[bytes], values: list[bytes],
               key_lengths: list[int], value_lengths: list[int]
               ) -> tuple[Callable[[list[int]], Any], RunWriter, OneRecord]:
    """The run writers for a chunk of records of different sizes: (gather, write, one),
    see _stage._settle_runs. Key lengths all -1: the records have no key (``keys`` holds
    empty bytes).

    A run's offset deltas take varints of one length; its records' lengths, length
    varints and sizes are computed for the whole run by maps, and as many as fit the
    open batch (bisecting their running sizes) are written with eight slice
    assignments.
    """
    small = VARINT_BYTES
    sizes = _VARINT_SIZES
    varint = small.__getitem__
    size_of = sizes.__getitem__
    n = len(keys)
    header_counts = [b"\x00"] * n
    # Keys often share a length (ids) where values do not: then their part is a constant.
    klen = key_lengths[0]
    one_key_length = key_lengths.count(klen) == n
    kb = small[klen] if klen >= 0 else NULL_LENGTH
    key_varints = [kb] * n

    def gather(idx: list[int]) -> Any:
        p_keys, p_values, p_vlens = gather_columns(idx, keys, values, value_lengths)
        p_vb = [*map(varint, p_vlens)]
        # Each record's key and value with their length varints (record_fields' rest
        # less the header count); its body is that plus attributes, the two deltas and
        # the header count.
        p_rest = [*map(_add, p_vlens, map(size_of, p_vlens))]
        if one_key_length:
            p_kb = key_varints
            p_rest = [*map(_add, p_rest, _repeat(max(klen, 0) + len(kb)))]
        else:
            (p_klens,) = gather_columns(idx, key_lengths)
            p_kb = [*map(varint, p_klens)]
            p_rest = [*map(_add, p_rest, map(_add, p_klens, map(size_of, p_klens)))]
        return p_keys, p_values, p_kb, p_vb, p_rest

    def write(picked: Any, batch: ProducerBatch, count: int, delta: int, pos: int,
              end: int) -> tuple[int, int]:
        # Offset deltas of one varint length: below 64, or below 8192.
        k = min(end, pos + (64 if count < 64 else SMALL_LIMIT) - count) - pos
        if k <= 0:
            return 0, 0
        p_keys, p_values, p_kb, p_vb, p_rest = picked
        bodies = [*map(_add, p_rest[pos:pos + k], _repeat(3 + sizes[count]))]
        lengths = [*map(varint, bodies)]
        added = sum(bodies) + sum(map(len, lengths))
        room = batch_size - batch.size
        if added > room:  # the batch fills up: the records that fit
            totals = [*accumulate(map(_add, bodies, map(len, lengths)))]
            k = bisect_right(totals, room)
            if not k:
                return 0, 0
            added = totals[k - 1]
        upto = count + k
        parts: list[bytes] = [b""] * (8 * k)
        parts[0::8] = lengths[:k]
        parts[1::8] = [_ATTRIBUTES_AND_DELTA[delta]] * k
        parts[2::8] = small[count:upto]
        parts[3::8] = p_kb[pos:pos + k]
        parts[4::8] = p_keys[pos:pos + k]
        parts[5::8] = p_vb[pos:pos + k]
        parts[6::8] = p_values[pos:pos + k]
        parts[7::8] = header_counts[:k]
        batch.parts.append(b"".join(parts))  # now, in cache (see uniform_runs)
        return k, added

    def one(picked: Any, pos: int) -> tuple[bytes, bytes, bytes, bytes, int]:
        p_keys, p_values, p_kb, p_vb, p_rest = picked
        return p_kb[pos], p_keys[pos], p_vb[pos], p_values[pos], p_rest[pos] + 1

    return gather, write, one
