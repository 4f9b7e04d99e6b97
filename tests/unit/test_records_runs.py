"""RecordBatchBuilder.append_many (kontrakt/protocol/records/_runs.py), byte for byte.

``append_many`` must leave a builder exactly as ``append`` of each record in turn until one
does not fit leaves it (the same batch bytes, count, size and timestamps, the same number
of records taken), and its records must be the producer's reference ``encode_record``'s
bytes: for random runs with and without keys and headers, one timestamp or one a record
(before and far after the batch's base), None and non-bytes values (the one-by-one path),
lengths and offset deltas whose varints take one, two and three bytes, batches that fill
up in the middle of a run, and runs appended to a batch that already holds records.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from kontrakt.clients.producer._records import encode_record
from kontrakt.protocol.records import BATCH_HEADER_SIZE, RecordBatchBuilder

BASE = 1_700_000_000_000


def _data(rnd: random.Random, none_ok: bool) -> Any:
    r = rnd.random()
    if none_ok and r < 0.02:
        return None
    if r < 0.1:
        return b""
    if r < 0.93:
        return rnd.randbytes(rnd.randrange(1, 130))
    return rnd.randbytes(rnd.choice([63, 64, 65, 8191, 8192, 8193, 9000]))


def _run(rnd: random.Random, n: int, keyed: bool, with_headers: bool, stamps: bool,
         odd: bool) -> tuple[Any, Any, list[Any], Any]:
    values = [_data(rnd, odd) for _ in range(n)]
    if odd and n:
        i = rnd.randrange(n)
        values[i] = bytearray(values[i] or b"x") if rnd.random() < 0.5 else memoryview(b"mv")
    keys = [_data(rnd, odd) for _ in range(n)] if keyed else None
    headers = None
    if with_headers:
        headers = [None if rnd.random() < 0.4 else
                   [(rnd.choice(["h", "trace-id", "ключ", "x" * 70]),
                     None if rnd.random() < 0.2 else rnd.randbytes(rnd.randrange(0, 90)))
                    for _ in range(rnd.randrange(0, 3))] for _ in range(n)]
    timestamps: Any = BASE + rnd.randrange(0, 5)
    if stamps:
        timestamps = [BASE + (rnd.randrange(0, 3) if rnd.random() < 0.7
                              else rnd.randrange(-5000, 10_000_000)) for _ in range(n)]
    return timestamps, keys, values, headers


def _one_by_one(b: RecordBatchBuilder, timestamps: Any, keys: Any, values: list[Any],
                headers: Any, start: int) -> int:
    for i in range(start, len(values)):
        if b.append(timestamps if isinstance(timestamps, int) else timestamps[i],
                    None if keys is None else keys[i], values[i],
                    None if headers is None else headers[i]) is None:
            return i - start
    return len(values) - start


def _state(b: RecordBatchBuilder) -> tuple[int, ...]:
    return (b.record_count, b.size_in_bytes, b.max_timestamp, b.last_offset_delta)


@pytest.mark.parametrize("seed", range(24))
def test_append_many_leaves_the_builder_as_append_one_by_one(seed: int) -> None:
    rnd = random.Random(seed)
    keyed, with_headers, stamps, odd = (bool(seed & 1), bool(seed & 2), bool(seed & 4),
                                        seed % 6 == 5)
    limit = rnd.choice([1 << 40, 40_000, 3000, 200])
    bulk = RecordBatchBuilder(max_batch_size=limit)
    each = RecordBatchBuilder(max_batch_size=limit)
    written: list[tuple[int, Any, Any, Any]] = []  # (timestamp, key, value, headers)
    for _ in range(rnd.randrange(1, 5)):
        if rnd.random() < 0.3:  # a record appended alone between runs
            ts, k, v, h = _run(rnd, 1, keyed, with_headers, False, False)
            one = (ts, None if k is None else k[0], v[0], None if h is None else h[0])
            accepted = bulk.append(*one) is not None
            assert accepted == (each.append(*one) is not None)
            written += [one] if accepted else []
        ts, keys, values, headers = _run(rnd, rnd.randrange(0, 700), keyed, with_headers,
                                         stamps, odd)
        start = rnd.randrange(0, 3) if values else 0
        taken = bulk.append_many(ts, keys, values, headers, start=start)
        assert taken == _one_by_one(each, ts, keys, values, headers, start)
        assert _state(bulk) == _state(each)
        written += [(ts if isinstance(ts, int) else ts[i], None if keys is None else keys[i],
                     values[i], None if headers is None else headers[i])
                    for i in range(start, start + taken)]
    built = bulk.build()
    assert built == each.build()
    if written:
        base = written[0][0]
        reference = b"".join(
            encode_record(i, t - base, None if k is None else bytes(k),
                          None if v is None else bytes(v), h)
            for i, (t, k, v, h) in enumerate(written))
        assert built[BATCH_HEADER_SIZE:] == reference


def test_append_many_crosses_the_one_and_two_byte_offset_deltas() -> None:
    # Offset deltas past 63 and 8191 take longer varints: runs are cut there.
    values = [b"v" * (i % 3) for i in range(9000)]
    bulk = RecordBatchBuilder(max_batch_size=1 << 30)
    each = RecordBatchBuilder(max_batch_size=1 << 30)
    assert bulk.append_many(BASE, None, values) == len(values)
    assert _one_by_one(each, BASE, None, values, None, 0) == len(values)
    assert bulk.build() == each.build()


def test_append_many_fills_one_batch_after_another_until_all_are_taken() -> None:
    rnd = random.Random(7)
    values = [rnd.randbytes(rnd.randrange(0, 200)) for _ in range(5000)]
    keys = [rnd.randbytes(8) for _ in range(5000)]
    bulk: list[bytes] = []
    pos = 0
    while pos < len(values):
        b = RecordBatchBuilder(max_batch_size=16384)
        taken = b.append_many(BASE, keys, values, start=pos)
        assert taken > 0
        pos += taken
        bulk.append(b.build())
    each: list[bytes] = []
    pos = 0
    while pos < len(values):
        b = RecordBatchBuilder(max_batch_size=16384)
        pos += _one_by_one(b, BASE, keys, values, None, pos)
        each.append(b.build())
    assert bulk == each and len(bulk) > 10


def test_append_many_refuses_what_append_refuses_after_adding_the_records_before() -> None:
    values: list[Any] = [b"a", b"b", "not bytes", b"d"]
    b = RecordBatchBuilder()
    with pytest.raises(TypeError, match="value must be bytes-like"):
        b.append_many(BASE, None, values)
    assert b.record_count == 2
    with pytest.raises(TypeError, match="header name must be str"):
        b.append_many(BASE, None, [b"e", b"f"], [None, [(1, b"x")]])  # type: ignore[list-item]
    assert b.record_count == 3


def test_builders_in_several_threads_write_the_same_bytes() -> None:
    """The tables runs are written from are shared by every builder: builders filled in
    several threads at once, each growing them, still write what append writes."""
    import sys
    import threading

    from kontrakt.protocol.records import _runs

    _runs._HEADS.clear()
    rnd = random.Random(3)
    # lengths that grow through each run: the tables grow all the time
    runs = [[rnd.randbytes(j * 10 + rnd.randrange(10)) for j in range(300)] for _ in range(8)]
    expected = []
    for values in runs:
        each = RecordBatchBuilder(max_batch_size=1 << 30)
        _one_by_one(each, BASE, None, values, None, 0)
        expected.append(each.build())
    for _ in range(4):  # a race: a few rounds make it likely where it exists
        _runs._HEADS.clear()
        got: list[bytes | None] = [None] * len(runs)
        start = threading.Barrier(len(runs))

        def fill(i: int, start: threading.Barrier, got: list[bytes | None]) -> None:
            start.wait(30)
            b = RecordBatchBuilder(max_batch_size=1 << 30)
            for lo in range(0, 300, 5):  # small runs: the tables grow often
                b.append_many(BASE, None, runs[i][lo:lo + 5])
            got[i] = b.build()

        interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)
        try:
            threads = [threading.Thread(target=fill, args=(i, start, got))
                       for i in range(len(runs))]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
        finally:
            sys.setswitchinterval(interval)
        assert got == expected
