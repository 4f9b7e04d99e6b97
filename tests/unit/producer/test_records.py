"""The producer's record writers (kontrakt/clients/producer/_records.py), byte for byte.

Each fast writer must write what the reference ``encode_record`` writes, and that must be
what the protocol room's RecordBatchBuilder writes, for random records: None and empty keys
and values, headers (None values, non-ASCII names), timestamps before and far after the
batch's base, and lengths, deltas and records whose varints take one, two and three bytes.
"""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import pytest

from kontrakt.clients.producer._records import (
    DELTAS,
    PrefixTables,
    append_record,
    append_staged,
    encode_record,
    first_record,
    mixed_runs,
    record_fields,
    renumbered,
    uniform_runs,
)
from kontrakt.clients.producer._split import _parse
from kontrakt.protocol.records import BATCH_HEADER_SIZE, RecordBatchBuilder

Rec = tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]] | None]

BASE = 1_700_000_000_000


def _data(rnd: random.Random, none_ok: bool = True) -> bytes | None:
    r = rnd.random()
    if none_ok and r < 0.1:
        return None
    if r < 0.15:
        return b""
    if r < 0.9:
        return rnd.randbytes(rnd.randrange(1, 130))
    # past one and two varint bytes (64, 8192)
    return rnd.randbytes(rnd.choice([63, 64, 65, 8191, 8192, 8193, 20000]))


def _records(rnd: random.Random, n: int) -> list[Rec]:
    out: list[Rec] = []
    for _ in range(n):
        r = rnd.random()
        ts = BASE + (rnd.randrange(0, 3) if r < 0.6 else rnd.randrange(-5000, 10_000_000))
        headers = None
        if rnd.random() < 0.3:
            headers = [(rnd.choice(["h", "trace-id", "ключ", "x" * 70]),
                        None if rnd.random() < 0.2 else rnd.randbytes(rnd.randrange(0, 90)))
                       for _ in range(rnd.randrange(1, 4))]
        out.append((ts, _data(rnd), _data(rnd), headers))
    return out


def _builder_records(records: list[Rec]) -> bytes:
    """The records section RecordBatchBuilder writes for ``records`` (offset deltas 0..)."""
    b = RecordBatchBuilder(max_batch_size=1 << 40)
    for ts, key, value, headers in records:
        assert b.append(ts, key, value, headers) is not None
    return b.build()[BATCH_HEADER_SIZE:]


def _reference(records: list[Rec], first_offset: int = 0) -> bytes:
    """The reference bytes of ``records``: with offset deltas from ``first_offset`` and
    timestamp deltas from the first record's (first_offset 0) or BASE; -1: offset deltas
    from 0, timestamps from BASE."""
    base = records[0][0] if first_offset == 0 else BASE
    first_offset = max(first_offset, 0)
    return b"".join(encode_record(first_offset + i, ts - base, key, value, headers)
                    for i, (ts, key, value, headers) in enumerate(records))


def _batch() -> Any:
    # The fields the writers touch, as ProducerBatch has them for an empty batch.
    return SimpleNamespace(parts=[], size=BATCH_HEADER_SIZE, count=0, base_timestamp=-1,
                           max_timestamp=-1)


@pytest.mark.parametrize("seed", range(6))
def test_the_reference_writes_what_record_batch_builder_writes(seed: int) -> None:
    records = _records(random.Random(seed), 300)
    assert _reference(records) == _builder_records(records)


@pytest.mark.parametrize("seed", range(6))
def test_append_record_writes_the_reference_bytes_and_sizes(seed: int) -> None:
    rnd = random.Random(100 + seed)
    records = _records(rnd, 400)
    batch = _batch()
    for i, (ts, key, value, headers) in enumerate(records):
        kb, k, ksize, vb, v, vsize, hb, rest = record_fields(key, value, headers)
        assert (ksize, vsize) == (-1 if key is None else len(key),
                                  -1 if value is None else len(value))
        before = batch.size
        if i == 0:
            added = first_record(batch, ts, kb, k, vb, v, hb, rest)
        else:
            added = append_record(batch, ts, kb, k, vb, v, hb, rest, 1 << 40)
        assert added == batch.size - before > 0
    body = b"".join(batch.parts)
    assert body == _reference(records) == _builder_records(records)
    assert batch.size == BATCH_HEADER_SIZE + len(body)
    assert batch.count == len(records)
    assert batch.base_timestamp == records[0][0]
    assert batch.max_timestamp == max(r[0] for r in records)


def test_append_record_refuses_what_does_not_fit_and_writes_nothing() -> None:
    batch = _batch()
    first_record(batch, BASE, *_parts(b"k", b"v" * 50))
    size = batch.size
    kb, k, _, vb, v, _, hb, rest = record_fields(b"k", b"v" * 50, None)
    assert append_record(batch, BASE, kb, k, vb, v, hb, rest, size + 10) == 0
    assert (batch.size, batch.count, len(batch.parts)) == (size, 1, 7)
    added = append_record(batch, BASE, kb, k, vb, v, hb, rest, size + 1000)
    assert added and batch.size == size + added


def _parts(key: bytes | None, value: bytes | None) -> tuple[bytes, bytes, bytes, bytes, bytes,
                                                           int]:
    kb, k, _, vb, v, _, hb, rest = record_fields(key, value, None)
    return kb, k, vb, v, hb, rest


@pytest.mark.parametrize("seed", range(4))
def test_append_staged_writes_the_reference_bytes(seed: int) -> None:
    # Staged records: bytes keys and values short enough for the varint table; timestamps
    # within the table of the batch's base; offset deltas across the one/two-byte edge.
    rnd = random.Random(200 + seed)
    records: list[Rec] = [(BASE + rnd.randrange(0, 8000), rnd.randbytes(rnd.randrange(0, 40)),
                           rnd.randbytes(rnd.randrange(0, 3000)), None) for _ in range(300)]
    records[0] = (BASE, *records[0][1:])
    batch = _batch()
    first_record(batch, BASE, *_parts(records[0][1], records[0][2]))
    for ts, key, value, _ in records[1:]:
        assert key is not None and value is not None
        assert append_staged(batch, ts, key, value, 1 << 40)
    assert b"".join(batch.parts) == _reference(records) == _builder_records(records)
    assert batch.size == BATCH_HEADER_SIZE + len(b"".join(batch.parts))


def test_append_staged_leaves_deltas_past_the_table_to_append_record() -> None:
    batch = _batch()
    first_record(batch, BASE, *_parts(b"k", b"v"))
    before = list(batch.parts)
    assert append_staged(batch, BASE - 1, b"k", b"v", 1 << 40) == 0  # clock stepped back
    assert append_staged(batch, BASE + 8192, b"k", b"v", 1 << 40) == 0
    assert append_staged(batch, BASE, b"k", b"v", batch.size + 3) == 0  # does not fit
    assert batch.parts == before and batch.count == 1


def _run_through(writers: Any, records: list[Rec], batch_size: int, delta: int,
                 first_count: int) -> tuple[bytes, int]:
    """Write ``records`` (one timestamp, base + ``delta``) with a run writer into a batch
    that holds ``first_count`` records already, as _stage._settle_runs does; returns the
    bytes the runs wrote and how many records went in."""
    gather, write, one = writers
    batch = _batch()
    first_record(batch, BASE, *_parts(b"f", b"first"))
    filler = _parts(b"f", b"first")
    while batch.count < first_count:  # offset deltas up to where the runs start
        assert append_record(batch, BASE, *filler, 1 << 40)
    start = len(b"".join(batch.parts))
    picked = gather(list(range(len(records))))
    pos = 0
    while pos < len(records):
        count = batch.count
        k, added = write(picked, batch, count, delta, pos, len(records))
        if not k:
            break
        batch.size += added
        batch.count = count + k
        pos += k
    body = b"".join(batch.parts)
    assert batch.size == BATCH_HEADER_SIZE + len(body)
    # what ``one`` gives for a record is what record_fields gives
    for i in range(0, len(records), 97):
        kb, key, vb, value, rest = one(picked, i)
        ref = record_fields(records[i][1], records[i][2], None)
        assert (kb, key, vb, value, rest) == (ref[0], ref[1], ref[3], ref[4], ref[7])
    return body[start:], pos


@pytest.mark.parametrize(("klen", "vlen", "first_count"),
                         [(10, 100, 1), (0, 0, 60), (63, 64, 1), (1, 8000, 1), (8, 40, 8100),
                          (-1, 100, 1), (-1, 0, 60), (-1, 64, 8100)])
@pytest.mark.parametrize("delta", [0, 1, DELTAS - 1])
def test_uniform_runs_write_the_reference_bytes(klen: int, vlen: int, first_count: int,
                                                delta: int) -> None:
    # klen -1: records without a key (a staged produce(topic, value)), keys as b"".
    rnd = random.Random(klen * 1000 + vlen + delta)
    records: list[Rec] = [(BASE + delta, rnd.randbytes(klen) if klen >= 0 else None,
                           rnd.randbytes(vlen), None) for _ in range(300)]
    keys = [r[1] or b"" for r in records]
    values = [r[2] for r in records]
    batch_size = 200_000
    body, written = _run_through(
        uniform_runs(PrefixTables(), batch_size, keys, values, klen, vlen),  # type: ignore
        records, batch_size, delta, first_count)
    # every record, or as many as the batch (or the prefix tables' offset deltas) take
    assert written == len(records) or vlen > 600 or first_count > 8000
    assert written > 10
    assert body == _reference(records[:written], first_offset=first_count)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("first_count", [1, 50, 70, 8150])
def test_mixed_runs_write_the_reference_bytes(seed: int, first_count: int) -> None:
    # Keys of one length, of many, or none (seeds 4 and 5: a staged produce(topic, value),
    # key lengths -1 and keys b"").
    rnd = random.Random(300 + seed)
    same_key_length = seed % 2 == 0
    records: list[Rec] = [
        (BASE + 5, None if seed > 3 else
         rnd.randbytes(12 if same_key_length else rnd.randrange(0, 70)),
         rnd.randbytes(rnd.randrange(0, 300)), None) for _ in range(400)]
    keys = [r[1] or b"" for r in records]
    values = [r[2] for r in records]
    batch_size = 200_000
    body, written = _run_through(
        mixed_runs(batch_size, keys, values,  # type: ignore[arg-type]
                   [-1 if r[1] is None else len(r[1]) for r in records],
                   [len(v) for v in values]),  # type: ignore[arg-type]
        records, batch_size, 5, first_count)
    assert written > 0
    assert body == _reference(records[:written], first_offset=first_count)


@pytest.mark.parametrize("seed", range(4))
def test_renumbered_records_are_the_reference_bytes_from_offset_zero(seed: int) -> None:
    # A split batch's second half: its records written again with offset deltas from 0,
    # across the one/two-byte varint edge of the old deltas.
    rnd = random.Random(400 + seed)
    records = _records(rnd, 200)
    start = rnd.choice([1, 60, 63, 64, 150])
    body = b"".join(encode_record(i, ts - BASE, key, value, headers)
                    for i, (ts, key, value, headers) in enumerate(records))
    spans = [r[1:] for r in _parse(body)][start:]
    assert renumbered(body, spans) == _reference(records[start:], first_offset=-1)
