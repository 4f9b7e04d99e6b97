"""Cutting a batch's records in two (KIP-126 splits), checked through the reference
decoder: each half framed as a batch of its own decodes to the original records, in order,
with offset deltas from 0."""

from __future__ import annotations

import pytest

from kontrakt.clients.producer._split import cut_records
from kontrakt.protocol.records import BATCH_HEADER_SIZE, RecordBatchBuilder, iter_batches
from kontrakt.protocol.records._builder import frame_batch

BASE = 1_700_000_000_000


def _batch(sizes: list[int], headers: bool = False) -> bytes:
    builder = RecordBatchBuilder()
    for i, size in enumerate(sizes):
        # Timestamps out of order too: the deltas are kept relative to the base.
        builder.append(BASE + (i * 7919) % 50 - 10, None if i % 5 == 4 else b"k%d" % i,
                       None if i % 7 == 6 else bytes([i % 251]) * size,
                       [("h", b"%d" % i), ("n", None)] if headers else None)
    return builder.build()


def _decoded(batch: bytes) -> list[tuple[object, ...]]:
    (b,) = iter_batches(batch)
    return [(r.timestamp, r.key, r.value, r.headers) for r in b.records()]


@pytest.mark.parametrize("sizes", [
    [10, 10],
    [100] * 200,
    [5, 5, 5, 50_000, 5, 5, 5],  # one large record among small ones
    [50_000, 5, 5],
    [5, 5, 50_000],
    [300 + i for i in range(130)],  # offset deltas past one varint byte
])
@pytest.mark.parametrize("headers", [False, True])
def test_halves_decode_to_the_records_in_order(sizes: list[int], headers: bool) -> None:
    whole = _batch(sizes, headers)
    records = whole[BATCH_HEADER_SIZE:]
    halves = cut_records(records, len(sizes))
    assert len(halves) == 2 and all(count >= 1 for _, count, _ in halves)
    assert sum(count for _, count, _ in halves) == len(sizes)
    got = []
    for part, count, max_delta in halves:
        (b,) = iter_batches(whole)
        framed = frame_batch(part, count, b.base_timestamp, b.base_timestamp + max_delta)
        (decoded,) = iter_batches(framed)  # checks the CRC and the layout
        assert [r.offset for r in decoded.records()] == list(range(count))
        assert decoded.max_timestamp == max(r.timestamp for r in decoded.records())
        got += _decoded(framed)
    assert got == _decoded(whole)
    # About half the bytes each, unless one record outweighs the rest.
    if max(sizes) * 3 < sum(sizes):
        first, second = (len(p) for p, _, _ in halves)
        # (the first takes the record across the middle; the second's offset deltas shrink)
        assert abs(first - second) <= max(sizes) + len(sizes) + 20


def test_a_lone_large_record_ends_in_a_part_of_its_own_within_two_cuts() -> None:
    sizes = [5, 5, 5, 50_000, 5, 5, 5]
    records = _batch(sizes)[BATCH_HEADER_SIZE:]
    (first, n1, _), (_, n2, _) = cut_records(records, len(sizes))
    assert (n1, n2) == (4, 3)
    (_, m1, _), (_, m2, _) = cut_records(first, n1)
    assert (m1, m2) == (3, 1)


def test_refuses_what_cannot_be_cut() -> None:
    records = _batch([10])[BATCH_HEADER_SIZE:]
    with pytest.raises(ValueError):
        cut_records(records, 1)
    with pytest.raises(ValueError):
        cut_records(_batch([10, 10])[BATCH_HEADER_SIZE:], 3)
