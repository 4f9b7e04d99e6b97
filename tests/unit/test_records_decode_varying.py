"""Records of varying sizes decoded a stretch at a time
(:mod:`kontrakt.protocol.records._decode_varying`): exactly what the general loop gives,
record by record, errors included; anything else is left to the general loop.

A differential guard for speed work: every test compares the compiled loops with the
stretches on against the general loop alone (``runs(enabled=False)``), and the tests that
count the records taken as stretches fail on the code before it (nothing was taken)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kontrakt.errors import CorruptRecordError
from kontrakt.protocol.records import (
    ControlRecordType,
    RecordBatch,
    _decode,
    build_control_batch,
)
from kontrakt.protocol.records._decode_varying import MIN_STRETCH, decode_varying
from tests.unit.test_records_decode_runs import (
    _LOOPS,
    as_consumer_records,
    build,
    decode_both,
    pieces,
    plain,
    runs,
)

T0 = 1_700_000_000_000


def varying(n: int, lo: int = 50, hi: int = 150, *, key: Any = None, seed: int = 1,
            step_ms: int = 1, null_every: int = 0) -> list[Any]:
    """``n`` records of values of ``lo``-``hi`` bytes; with ``null_every``, every such
    record (from the first) has a null value instead."""
    rnd = random.Random(seed)
    return [(T0 + i * step_ms, key(rnd) if callable(key) else key,
             None if null_every and i % null_every == 0
             else b"%d" % i + b"v" * rnd.randint(lo, hi), None) for i in range(n)]


def taken_as_stretches(batch: RecordBatch) -> int:
    taken: list[int] = []
    with runs(taken, names=("decode_varying",)):
        as_consumer_records(batch)
    return sum(taken)


def assert_same(batch: RecordBatch) -> None:
    for decode in (as_consumer_records, plain):
        fast, general = decode_both(batch, decode)
        assert fast == general
        if not isinstance(fast, tuple):
            assert [type(r) for r in fast] == [type(r) for r in general]
            assert len({id(r.headers) for r in fast}) == len(fast)


@pytest.mark.parametrize(("name", "records", "kwargs", "most"), [
    ("no key, 50-150 B", varying(2000), {}, True),
    ("no key, 20-300 B", varying(1000, 20, 300), {}, True),
    ("10 B keys", varying(1000, key=b"k" * 10), {}, True),
    ("empty keys and values", varying(300, 0, 0, key=b""), {}, True),
    ("64 B keys", varying(300, key=b"k" * 64), {}, True),
    ("keys of varying lengths",
     varying(300, key=lambda rnd: b"k" * rnd.randint(0, 9)), {}, True),
    ("keys of 0-300 B", varying(300, key=lambda rnd: b"k" * rnd.randint(0, 300)), {}, True),
    ("keys of varying lengths or none, null values",
     varying(600, key=lambda rnd: rnd.choice([None, b"k" * rnd.randint(0, 20)]),
             null_every=5), {}, False),
    ("keys of varying lengths after a record without one",
     [(T0, None, b"v", None), *varying(300, key=lambda rnd: b"k" * rnd.randint(1, 40))], {},
     True),
    ("keys of varying lengths, then none",
     varying(300, key=lambda rnd: b"k" * rnd.randint(1, 40))
     + [(T0, None, b"v", None)] * 7 + varying(100, key=lambda rnd: b"k" * rnd.randint(1, 40)),
     {}, True),
    ("lengths crossing 63/64", varying(600, 45, 70), {}, True),
    ("lengths crossing 8191/8192", varying(300, 8160, 8200), {}, False),
    ("lengths just below 8192", varying(100, 8000, 8170), {}, True),
    ("two-byte timestamp deltas", varying(500, step_ms=7), {}, True),
    ("timestamp deltas past 8191 (three bytes)", varying(500, step_ms=30), {}, False),
    ("negative timestamp deltas", [(T0 - (i * 37) % 500, None, b"x" * (i % 90), None)
                                   for i in range(400)], {}, True),
    ("offset deltas crossing 63/64", varying(200), {}, True),
    ("offset gaps (compaction)", varying(500), {"gaps": {3: 1, 70: 5, 100: 900, 300: 5000}},
     True),
    ("a null value in the middle", [*varying(100), (T0, None, None, None), *varying(100)],
     {}, True),
    ("null values, no key", varying(500, null_every=3), {}, True),
    ("null values only (a run)", varying(300, null_every=1), {}, False),
    ("null values, 10 B keys", varying(500, key=b"k" * 10, null_every=5), {}, True),
    ("null values, lengths crossing 63/64", varying(600, 45, 70, null_every=4), {}, True),
    ("a key in the middle", [*varying(100), (T0, b"k", b"v", None), *varying(100)], {}, True),
    ("headers in the middle", [*varying(100), (T0, None, b"v", [("h", b"1")]),
                               *varying(100)], {}, True),
    ("headers everywhere", [(T0, None, b"v" * (i % 70), [("h", b"1")]) for i in range(200)],
     {}, False),
    ("log append time", varying(300), {"log_append_time": True}, True),
    ("zstd", varying(300, key=b"abc"), {"codec": "zstd"}, True),
    ("a base offset past 2**31", varying(300), {"base_offset": 1 << 40}, True),
])
def test_stretches_decode_what_the_general_loop_does(name: str, records: list[Any],
                                                     kwargs: dict[str, Any],
                                                     most: bool) -> None:
    batch = build(records, **kwargs)
    taken = taken_as_stretches(batch)
    if most:
        assert taken >= len(records) * 2 // 3, name
    assert_same(batch)


def test_records_of_varying_sizes_are_taken_as_stretches() -> None:
    """New behaviour: the general loop took every record of varying sizes before."""
    batch = build(varying(2000))
    assert taken_as_stretches(batch) == 2000
    data, pos, end = batch.record_data()
    stretch = decode_varying(data, pos, end, 2000, batch.base_offset, batch.base_timestamp)
    assert stretch is not None and stretch[:2] == (2000, end)


def test_records_with_null_values_are_taken_as_stretches() -> None:
    """New behaviour: a null value (length -1) ended a stretch before."""
    for key in (None, b"0123456789"):
        batch = build(varying(1000, key=key, null_every=9))
        assert taken_as_stretches(batch) == 1000
        assert_same(batch)


def test_records_with_keys_of_varying_lengths_are_taken_as_stretches() -> None:
    """New behaviour: keys of different lengths ended a stretch before."""
    batch = build(varying(1000, key=lambda rnd: b"k" * rnd.randint(0, 30), null_every=11))
    assert taken_as_stretches(batch) == 1000
    assert_same(batch)


def test_short_stretches_and_control_batches_are_left_to_the_general_loop() -> None:
    batch = build(varying(MIN_STRETCH - 1))
    data, pos, end = batch.record_data()
    assert decode_varying(data, pos, end, MIN_STRETCH - 1, 0, 0) is None
    assert taken_as_stretches(batch) == 0
    control = RecordBatch.from_bytes(build_control_batch(
        ControlRecordType.COMMIT, producer_id=7, producer_epoch=0, base_offset=5,
        timestamp=T0))
    data, pos, end = control.record_data()
    assert decode_varying(data, pos, end, 1, 0, 0) is None
    assert taken_as_stretches(control) == 0
    assert_same(control)


def test_a_buffer_other_than_bytes_is_left_to_the_general_loop() -> None:
    batch = build(varying(100))
    data, pos, end = batch.record_data()
    for buffer in (bytearray(data), memoryview(data)):
        assert decode_varying(buffer, pos, end, 100, 0, 0) is None  # type: ignore[arg-type]


def test_pieces_end_where_the_general_loop_ends_them() -> None:
    records = varying(150) + [(T0, None, b"v", [("a", b"1"), ("b", None)])] * 3 + varying(150)
    batch = build(records)
    with runs(enabled=False):
        general = pieces(batch, len(records), 97)
    taken: list[int] = []
    with runs(taken, names=("decode_varying",)):
        fast = pieces(batch, len(records), 97)
    assert fast == general
    assert sum(taken) > 200


@pytest.mark.parametrize("null_every", [0, 4])
@pytest.mark.parametrize("key", [None, b"0123456789", lambda rnd: b"k" * rnd.randint(0, 30)])
def test_truncated_record_sets_fail_as_the_general_loop_does(key: Any,
                                                             null_every: int) -> None:
    batch = build(varying(80, 0, 140, key=key, null_every=null_every))
    data, pos, end = batch.record_data()
    for cut in range(end - 1, pos, -37):
        results = []
        for enabled in (True, False):
            with runs(enabled=enabled):
                try:
                    results.append(_decode.decode_records(
                        data[:cut], pos, cut, 80, batch.base_offset, batch.base_timestamp, 0,
                        batch.max_timestamp))
                except CorruptRecordError as exc:
                    results.append(str(exc))
        assert isinstance(results[1], str)
        assert results[0] == results[1]


@settings(max_examples=200, deadline=None)
@given(st.integers(MIN_STRETCH, 120), st.integers(0, 10), st.integers(0, 200),
       st.sampled_from([None, b"", b"key-1", "varying"]), st.integers(0, 3),
       st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=4),
       st.integers(0, 2**32), st.sampled_from([0, 1, 2, 7]))
def test_any_corruption_decodes_as_the_general_loop(
        n: int, lo: int, spread: int, key: bytes | str | None, gap: int,
        flips: list[tuple[int, int]], seed: int, null_every: int) -> None:
    if key == "varying":
        key = lambda rnd: rnd.choice([None, b"k" * rnd.randint(0, 150)])  # noqa: E731
    records = varying(n, lo, lo + spread, key=key, seed=seed, step_ms=seed % 40,
                      null_every=null_every)
    batch = build(records, gaps={n // 2: gap * 33})
    raw = bytearray(batch.raw())
    for where, byte in flips:
        raw[61 + where % (len(raw) - 61)] = byte
    broken = RecordBatch.from_bytes(bytes(raw), check_crc=False)
    fast, general = decode_both(broken, as_consumer_records)
    assert fast == general
    if not flips:
        assert not isinstance(fast, tuple)


@pytest.mark.parametrize(("key", "null_every"), [
    (None, 0), (None, 3), (lambda rnd: b"k" * rnd.randint(0, 12), 4)])
def test_corrupt_records_give_the_general_loops_errors(key: Any, null_every: int) -> None:
    batch = build(varying(200, key=key, null_every=null_every))
    raw = bytes(batch.raw())
    errors = set()
    for at in range(61, len(raw), 7):
        for byte in (0x00, 0x01, 0x7F, 0x80, 0xFF):
            broken = RecordBatch.from_bytes(raw[:at] + bytes([byte]) + raw[at + 1:],
                                            check_crc=False)
            fast, general = decode_both(broken, as_consumer_records)
            assert fast == general
            if isinstance(fast, tuple):
                errors.add(fast[1].split(" ")[0])
    assert errors  # (some corruptions are reported, the same way)
    with pytest.raises(CorruptRecordError):
        as_consumer_records(RecordBatch.from_bytes(raw[:-5] + b"\xff" * 5, check_crc=False))


def test_stretches_cut_by_records_with_headers_do_not_walk_the_rest_of_the_batch() -> None:
    """A stretch finds every record end in reach before it checks the records, so the record
    loop bounds how far a stretch may look after one was cut; otherwise a header now and
    then makes every stretch walk the rest of the batch (2,000 records, a header every 50:
    ~40 walks of ~1,000 records; 10x the decoding time)."""
    records = [(ts, key, value, [("h", b"1")] if i % 50 == 49 else None)
               for i, (ts, key, value, _) in enumerate(varying(2000))]
    batch = build(records)
    assert_same(batch)
    assert taken_as_stretches(batch) > 1000  # the rest: the general loop's, after each cut
    looked_at: list[int] = []
    namespace = _decode._decode_plain.__globals__
    original = namespace["decode_varying"]

    def spy(data: bytes, pos: int, end: int, limit: int, *rest: Any) -> Any:
        looked_at.append(limit)
        return original(data, pos, end, limit, *rest)

    for fn in _LOOPS:
        fn.__globals__["decode_varying"] = spy
    try:
        decoded = as_consumer_records(batch)
    finally:
        for fn in _LOOPS:
            fn.__globals__["decode_varying"] = original
    assert [r.value for r in decoded] == [v for _, _, v, _ in records]
    assert sum(looked_at) < 4 * len(records), looked_at


@pytest.mark.parametrize("n", [33, 40, 64, 65, 600])
def test_shared_timestamps_cover_the_largest_delta_wherever_it_is(n: int) -> None:
    """Timestamp deltas below a bound of at most one a record share an int each; the bound
    is taken over every record (one delta near it, the others small, at each place; a
    bound above 256 with 600 records)."""
    top = 1 << (n.bit_length() - 1)
    for where in range(1, n) if n < 100 else (1, 299, n - 1):
        batch = build([(T0 + (top - 1 if i == where else i % 3), None,
                        b"v" * (50 + i % 7), None) for i in range(n)])
        assert taken_as_stretches(batch) == n
        assert_same(batch)


@pytest.mark.parametrize("n", [33, 40])
@pytest.mark.parametrize("field", ["length", "timestamp delta"])
def test_a_field_placed_differently_in_one_record_only(n: int, field: str) -> None:
    """A varint one byte wider or narrower in a single record (the first, one inside, or
    the last) moves the fields after it in that record only; the stretch still takes every
    record and reads them where they are."""
    for where in (0, n // 2, n - 1):
        records = [(T0 + (100 if field == "timestamp delta" and i == where else i % 3),
                    None, b"v" * (10 if field == "length" and i == where else 60 + i % 9),
                    None) for i in range(n)]
        if field == "timestamp delta" and where == 0:
            records = [(T0 + 200 + i % 3, None, v, h) for i, (_, _, v, h) in
                       enumerate(records)]
            records[0] = (T0, None, records[0][2], None)
        batch = build(records)
        assert taken_as_stretches(batch) == n, where
        assert_same(batch)


def test_keyed_records_whose_bytes_between_keys_need_more_than_13_bits() -> None:
    """Long keys after long values: the distance from one record's key end to the next's
    (read off the buffer as a 16-bit lane) is above 8191 bytes, near 16,384."""
    rnd = random.Random(5)
    records = [(T0 + i, b"k" * (rnd.randint(8100, 8160) if i % 2 else rnd.randint(0, 9)),
                b"v" * (rnd.randint(0, 9) if i % 2 else rnd.randint(8100, 8160)), None)
               for i in range(80)]
    batch = build(records)
    assert taken_as_stretches(batch) == 80
    assert_same(batch)


@pytest.mark.parametrize(("lo", "hi"), [(200, 255), (245, 265), (240, 520)])
def test_values_around_256_bytes(lo: int, hi: int) -> None:
    """Read lengths below 256 are read from a byte each, others from two."""
    batch = build([(T0, None, b"v" * random.Random(i).randint(lo, hi), None)
                   for i in range(300)])
    assert taken_as_stretches(batch) == 300
    assert_same(batch)
