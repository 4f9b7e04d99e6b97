"""The run fast path of the record loop (:mod:`kontrakt.protocol.records._decode_run`):
records of one size and shape decoded column by column give exactly what the general loop
gives, record by record, and anything else is left to the general loop."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kontrakt._types import ConsumerRecord, TimestampType
from kontrakt.errors import CorruptRecordError
from kontrakt.protocol.records import RecordBatch, RecordBatchBuilder, _decode
from kontrakt.protocol.records._decode_run import MIN_RUN, decode_run

_LOOPS = (_decode._decode_plain, _decode._decode_as, _decode._decode_piece_as)


@contextmanager
def runs(taken: list[int] | None = None, *, enabled: bool = True,
         names: tuple[str, ...] = ("decode_run",)) -> Iterator[None]:
    """Count the records the compiled loops take as runs (or, with ``names``
    including "decode_varying", as stretches of varying sizes); or turn both off."""
    namespace = _decode._decode_plain.__globals__
    originals = {key: namespace[key] for key in ("decode_run", "decode_varying")}

    def counter(name: str) -> Callable[..., Any]:
        def counted(*args: Any) -> Any:
            run = originals[name](*args) if enabled else None
            if run is not None and taken is not None:
                taken.append(run[0])
            return run
        return counted

    for fn in _LOOPS:
        fn.__globals__.update({name: counter(name) for name in (names if enabled else originals)})
    try:
        yield
    finally:
        for fn in _LOOPS:
            fn.__globals__.update(originals)


def build(records: list[tuple[int, bytes | None, bytes | None, list[Any] | None]], *,
          base_offset: int = 100, gaps: dict[int, int] | None = None, codec: str = "none",
          log_append_time: bool = False) -> RecordBatch:
    builder = RecordBatchBuilder(base_offset=base_offset, compression=codec,
                                 max_batch_size=1 << 30, log_append_time=log_append_time)
    delta = 0
    for i, (ts, key, value, headers) in enumerate(records):
        delta += (gaps or {}).get(i, 0)
        builder.append(ts, key, value, headers, offset_delta=delta)
        delta += 1
    return RecordBatch.from_bytes(builder.build())


def decode_both(batch: RecordBatch, decode: Callable[[RecordBatch], Any]) -> tuple[Any, Any]:
    """(with runs, general loop only), each a result or the error's message."""
    results = []
    for enabled in (True, False):
        with runs(enabled=enabled):
            try:
                results.append(decode(batch))
            except CorruptRecordError as exc:
                results.append(("error", str(exc)))
    return results[0], results[1]


def as_consumer_records(batch: RecordBatch) -> list[Any]:
    return batch.records_as(ConsumerRecord, "t", 2, TimestampType.CREATE_TIME)


def plain(batch: RecordBatch) -> list[Any]:
    return batch.records()


def uniform(n: int, *, key: bytes | None = None, value: bytes | None = b"v" * 100,
            headers: list[Any] | None = None, step_ms: int = 1) -> list[Any]:
    return [(1_700_000_000_000 + i * step_ms, key, value, headers) for i in range(n)]


@pytest.mark.parametrize(("name", "records", "kwargs"), [
    ("null key, 100 B", uniform(300), {}),
    ("fixed key", uniform(200, key=b"key-01"), {}),
    ("empty key and value", uniform(100, key=b"", value=b""), {}),
    ("null value", uniform(100, key=b"k", value=None), {}),
    ("null key and value", uniform(100, value=None), {}),
    ("two-byte timestamp deltas", uniform(300, step_ms=40), {}),
    ("timestamp deltas growing past one byte", uniform(300, step_ms=1)[:40]
     + [(1_700_000_000_000 + 5000 + i, None, b"v" * 100, None) for i in range(100)], {}),
    ("negative timestamp deltas", [(1_700_000_000_000 - (i % 5), None, b"x" * 30, None)
                                   for i in range(100)], {}),
    ("offset gaps (compaction)", uniform(300), {"gaps": {30: 1, 100: 5, 250: 70}}),
    ("a bigger record in the middle",
     [*uniform(100), (1, None, b"w" * 101, None), *uniform(100)], {}),
    ("a record with headers in the middle",
     [*uniform(50), (1, None, b"v" * 100, [("h", b"1")]), *uniform(50)], {}),
    ("log append time", uniform(100), {"log_append_time": True}),
    ("zstd", uniform(300, key=b"abc"), {"codec": "zstd"}),
    ("2 KiB values", uniform(100, value=b"z" * 2000), {}),
    ("offsets past 8191", uniform(8300, value=b"q"), {}),
])
def test_runs_decode_what_the_general_loop_does(name: str, records: list[Any],
                                                 kwargs: dict[str, Any]) -> None:
    batch = build(records, **kwargs)
    taken: list[int] = []
    with runs(taken, names=("decode_run", "decode_varying")):
        as_consumer_records(batch)
    # most records are taken as runs (or, past a change of layout, as stretches)
    assert sum(taken) >= len(records) // 2, name
    for decode in (as_consumer_records, plain):
        fast, general = decode_both(batch, decode)
        assert fast == general, name
        assert [type(r) for r in fast] == [type(r) for r in general]
    records_out = as_consumer_records(batch)
    # Every record has a headers list of its own (an application may append to it).
    assert len({id(r.headers) for r in records_out}) == len(records_out)


def test_varying_sizes_are_not_taken_as_runs() -> None:
    batch = build([(1, None, b"v" * (50 + i % 7), None) for i in range(500)])
    taken: list[int] = []
    with runs(taken):
        out = as_consumer_records(batch)
    assert taken == []  # (decode_varying takes them: tests/unit/test_records_decode_varying.py)
    assert [len(r.value) for r in out] == [50 + i % 7 for i in range(500)]


def test_a_run_stops_before_a_corrupt_record_and_the_general_loop_reports_it() -> None:
    batch = build(uniform(200, step_ms=0), gaps={0: 64})  # offset deltas of 2 bytes: one size
    raw = bytearray(batch.raw())
    size = (len(raw) - 61) // 200
    assert size * 200 == len(raw) - 61
    at = 61 + 150 * size + size - 1  # the header count of record 150
    for bad in (1, 0x80):
        raw[at] = bad
        broken = RecordBatch.from_bytes(bytes(raw), check_crc=False)
        taken: list[int] = []
        with runs(taken), pytest.raises(CorruptRecordError) as fast:
            as_consumer_records(broken)
        assert 0 < sum(taken) <= 150
        fast_error, general_error = decode_both(broken, as_consumer_records)
        assert fast_error == general_error == ("error", str(fast.value))


def pieces(batch: Any, count: int, size: int) -> list[Any]:
    """``batch``'s ``count`` records decoded ``size`` at a time (at most 3 headers a piece)
    as a fetch's chunks are: (records, next position, headers) of each piece."""
    data, at, end = batch.record_data()
    out, left = [], count
    while left:
        recs, at, headers = _decode.decode_records_piece_as(
            data, at, end, min(size, left), batch.base_offset, batch.base_timestamp, 0,
            batch.max_timestamp, ConsumerRecord, "t", 0, TimestampType.CREATE_TIME, -1, 3)
        out.append((recs, at, headers))
        left -= len(recs)
    return out


def test_pieces_and_the_header_stop_are_unchanged() -> None:
    records = uniform(100) + [(2, None, b"v" * 100, [("a", b"1"), ("b", None)])] * 3 \
        + uniform(100)
    batch = build(records)
    with runs(enabled=False):
        general = pieces(batch, len(records), 37)
    taken: list[int] = []
    with runs(taken):
        fast = pieces(batch, len(records), 37)
    assert fast == general
    assert sum(taken) > 100
    # the third piece stops after record 101, its 4th header
    assert [len(p[0]) for p in fast][:4] == [37, 37, 28, 37]
    assert fast[2][2] == 4


def test_decode_run_refuses_short_runs_and_other_layouts() -> None:
    batch = build(uniform(MIN_RUN - 1))
    data, pos, end = batch.record_data()
    assert decode_run(data, pos, end, MIN_RUN - 1, 0, 0) is None
    batch = build(uniform(40, headers=[("h", b"v")]))
    data, pos, end = batch.record_data()
    assert decode_run(data, pos, end, 40, 0, 0) is None  # headers: the general loop's


@settings(max_examples=150, deadline=None)
@given(st.integers(MIN_RUN, 200), st.integers(0, 300), st.sampled_from([None, b"", b"key"]),
       st.lists(st.integers(0, 250), max_size=4), st.integers(0, 255), st.integers(0, 255))
def test_any_corruption_of_a_run_decodes_as_the_general_loop(
        n: int, size: int, key: bytes | None, flips: list[int], where: int,
        byte: int) -> None:
    batch = build(uniform(n, key=key, value=b"v" * size))
    raw = bytearray(batch.raw())
    for flip in flips:
        raw[61 + (where * 7919 + flip * 104729) % (len(raw) - 61)] = byte ^ flip
    broken = RecordBatch.from_bytes(bytes(raw), check_crc=False)
    fast, general = decode_both(broken, as_consumer_records)
    assert fast == general


def test_a_buffer_other_than_bytes_gives_slices_of_its_type() -> None:
    batch = build(uniform(100))
    data, pos, end = batch.record_data()
    for buffer in (bytearray(data), memoryview(data)):
        with runs(enabled=False):
            general = _decode.decode_records(buffer, pos, end, 100, 0, 0, 0, 0)
        out = _decode.decode_records(buffer, pos, end, 100, 0, 0, 0, 0)
        assert [type(r.value) for r in out] == [type(buffer)] * 100
        assert [tuple(r) for r in out] == [tuple(r) for r in general]


def _headers_section() -> tuple[bytes, int, list[Any]]:
    headers: list[Any] = [("", b""), ("a", None), ("k" * 70, b"v" * 100), ("é" * 3, b"x" * 9000),
                          ("n" * 10000, b"")]
    builder = RecordBatchBuilder(max_batch_size=1 << 30)
    builder.append(1, None, b"value", headers)
    data, pos, _ = RecordBatch.from_bytes(builder.build()).record_data()
    # the record: length (3 bytes), attributes, deltas, null key, value length and value
    return data, pos + 3 + 1 + 1 + 1 + 1 + 1 + 5, headers


def test_headers_round_trip_with_short_and_long_varints() -> None:
    data, at, headers = _headers_section()
    assert _decode._decode_headers(data, at) == (headers, len(data))


def test_headers_read_short_varints_without_a_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """One- and two-byte varints (nearly all header counts and lengths) are read from the
    tables; only the 9,000-byte value and the 10,000-byte name take the generic reader."""
    data, at, headers = _headers_section()
    calls: list[int] = []
    slow = _decode.decode_varint_slow

    def counted(buf: bytes, pos: int) -> tuple[int, int]:
        calls.append(pos)
        return slow(buf, pos)

    monkeypatch.setattr(_decode, "decode_varint_slow", counted)
    assert _decode._decode_headers(data, at) == (headers, len(data))
    assert len(calls) == 2


def test_headers_cut_or_changed_anywhere_fail_as_the_checked_reader_does() -> None:
    data, at, _ = _headers_section()
    small = data[:at + 300]  # the first three headers and part of the fourth
    cases = [small[:cut] for cut in range(at, len(small))]
    for i in range(at, len(small)):
        for byte in (0, 1, 0x7F, 0x80, 0xFF):
            cases.append(small[:i] + bytes([byte]) + small[i + 1:])
    for case in cases:
        results = []
        for reader in (_decode._decode_headers, _decode._decode_headers_checked):
            try:
                results.append(reader(case, at))
            except CorruptRecordError as exc:
                results.append(("error", str(exc)))
        assert results[0] == results[1]
