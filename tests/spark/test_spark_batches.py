"""Fetched batches read into Arrow columns (``iter_partition_batches`` → ``decode_batches``)
give exactly the records the consumer's record path gives (``parse_partition``, the oracle):
random record sets with null keys and values, headers, every codec, log-append time,
transactions aborted and committed under both isolation levels, long varints and records
of 8 KiB and more; and corrupt batches fail with the record decoder's error. Pure: no
broker, no JVM."""

from __future__ import annotations

import itertools
import random
from typing import Any, cast

import pytest

pytest.importorskip("pyspark", reason="needs the spark extra")

import pyarrow as pa

from kontrakt._types import TopicPartition
from kontrakt.clients.consumer import AsyncConsumer
from kontrakt.clients.consumer._decoding import (
    RawBatch,
    iter_partition_batches,
    parse_partition,
)
from kontrakt.errors import ConfigError, CorruptRecordError
from kontrakt.protocol.records import ControlRecordType, RecordBatchBuilder, build_control_batch
from kontrakt.protocol.records._columnar import record_starts
from kontrakt.spark._arrow import Chunk
from kontrakt.spark._batches import decode_batches
from kontrakt.spark._fieldplan import OffsetRange
from kontrakt.spark._task import CHUNK_RECORDS, _chunks

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PID = 41


class _Aborted:
    def __init__(self, producer_id: int, first_offset: int) -> None:
        self.producer_id = producer_id
        self.first_offset = first_offset


def _random_log(rng: random.Random, batches: int) -> tuple[bytes, list[_Aborted]]:
    """A partition's record set: plain, transactional (some aborted) and control batches."""
    blobs: list[bytes] = []
    aborted: list[_Aborted] = []
    offset = rng.randrange(0, 1 << 40)
    open_txn: int | None = None  # first offset of the producer's open transaction
    for _ in range(batches):
        if open_txn is not None and rng.random() < 0.4:
            kind = ControlRecordType.ABORT if rng.random() < 0.5 else ControlRecordType.COMMIT
            if kind == ControlRecordType.ABORT:
                aborted.append(_Aborted(PID, open_txn))
            blobs.append(build_control_batch(kind, producer_id=PID, producer_epoch=0,
                                             base_offset=offset, timestamp=1))
            offset += 1
            open_txn = None
            continue
        txn = rng.random() < 0.3
        if txn and open_txn is None:
            open_txn = offset
        b = RecordBatchBuilder(
            compression=rng.choice(CODECS), base_offset=offset, max_batch_size=1 << 30,
            producer_id=PID if txn else -1, producer_epoch=0 if txn else -1,
            base_sequence=0 if txn else -1, is_transactional=txn,
            log_append_time=rng.random() < 0.15, partition_leader_epoch=rng.randrange(5))
        base_ts = rng.choice([0, 1_700_000_000_000, rng.randrange(1 << 45)])
        delta = 0
        with_headers = rng.random() < 0.2
        big = rng.random() < 0.1
        for i in range(rng.randrange(1, 300)):
            # Gaps in offsets (as after compaction) and timestamps of every varint size.
            delta += rng.choice([1, 1, 1, 2, 70])
            ts = base_ts + rng.choice([0, i, 100 * i, rng.randrange(-(1 << 20), 1 << 20),
                                       rng.randrange(1 << 40)])
            key = None if rng.random() < 0.5 else rng.randbytes(rng.randrange(0, 70))
            value = None if rng.random() < 0.1 else rng.randbytes(
                rng.randrange(9000, 20000) if big else rng.randrange(0, 200))
            headers = ([(f"h{j}", None if j % 2 else rng.randbytes(3))
                        for j in range(rng.randrange(0, 3))]
                       if with_headers and rng.random() < 0.5 else None)
            b.append(ts, key, value, headers, offset_delta=delta)
        blobs.append(b.build())
        offset += delta + 1
    return b"".join(blobs), aborted


def _columns_of(data: bytes, fetch_offset: int, read_committed: bool,
                aborted: list[Any]) -> Chunk:
    raw = [r for recs, *_ in iter_partition_batches(
        "t", 3, data, fetch_offset, read_committed=read_committed, aborted=aborted,
        check_crcs=True, chunk_bytes=1 << 16) for r in recs]
    return Chunk.of_columns(decode_batches(raw), "t", 3)


@pytest.mark.parametrize("seed", range(12))
def test_columns_are_the_records_the_record_path_decodes(seed: int) -> None:
    rng = random.Random(seed)
    data, aborted = _random_log(rng, rng.randrange(1, 25))
    first = parse_partition("t", 3, data, 0, read_committed=False, aborted=None,
                            check_crcs=True)[0]
    for read_committed in (False, True):
        # From the start, and from an offset in the middle of a batch.
        starts = [0] + ([rng.choice(first).offset] if first else [])
        for fetch_offset in starts:
            want = parse_partition("t", 3, data, fetch_offset, read_committed=read_committed,
                                   aborted=aborted, check_crcs=True)[0]
            got = _columns_of(data, fetch_offset, read_committed, aborted)
            assert len(got) == len(want)
            assert list(got.offsets) == [r.offset for r in want]
            assert list(got.timestamps) == [r.timestamp for r in want]
            assert list(got.kinds) == [int(r.timestamp_type) for r in want]
            assert got.key_array.to_pylist() == [r.key for r in want]
            assert got.value_array.to_pylist() == [r.value for r in want]
            assert list(got.headers) == [r.headers for r in want]
            assert got.has_headers == any(r.headers for r in want)
            assert [tuple(r)[:8] for r in got.records] == [tuple(r)[:8] for r in want]


def test_the_vectorised_path_takes_the_common_batches() -> None:
    """Batches without headers and with short varints are read without the record decoder
    (whose columns would come from Python lists; here the arrays are the gathered ones)."""
    b = RecordBatchBuilder(base_offset=100, max_batch_size=1 << 30)
    for i in range(5000):
        b.append(1_700_000_000_000 + i, None if i % 3 else b"k%d" % i,
                 None if i % 7 == 0 else b"v" * (i % 90), offset_delta=i)
    data = b.build()
    got = _columns_of(data, 2000, False, [])
    assert list(got.offsets) == list(range(2000, 5100))
    assert got.value_array.to_pylist() == [None if i % 7 == 0 else b"v" * (i % 90)
                                           for i in range(1900, 5000)]
    assert got.key_array.to_pylist() == [None if i % 3 else b"k%d" % i
                                         for i in range(1900, 5000)]
    # Gathered in one take: one data buffer holding exactly the values.
    values = got.value_array
    assert values.buffers()[2].size == sum(i % 90 for i in range(1900, 5000) if i % 7)


@pytest.mark.parametrize("damage", ["length", "key length", "value length", "trailing"])
def test_a_malformed_batch_fails_with_the_record_decoders_error(damage: str) -> None:
    b = RecordBatchBuilder(base_offset=10)
    for i in range(20):
        b.append(1_700_000_000_000, None, b"value-%02d" % i)
    blob = bytearray(b.build())
    first = 61  # the batch header's size: the first record starts here
    if damage == "length":
        blob[first] = 0x7E  # the first record claims 63 bytes
    elif damage == "key length":
        blob[first + 4] = 0x05  # key length -3
    elif damage == "value length":
        blob[first + 5] = 0x03  # value length -2
    else:
        blob += b"\x00"
        blob[8:12] = (int.from_bytes(blob[8:12], "big") + 1).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError) as want:
        parse_partition("t", 3, bytes(blob), 0, read_committed=False, aborted=None,
                        check_crcs=False)
    with pytest.raises(CorruptRecordError) as got:
        raw = [r for recs, *_ in iter_partition_batches(
            "t", 3, bytes(blob), 0, read_committed=False, aborted=None, check_crcs=False)
            for r in recs]
        decode_batches(raw)
    assert str(got.value) == str(want.value)
    assert (got.value.topic, got.value.partition, got.value.offset) == ("t", 3, 10)


def test_record_starts_walks_short_and_long_lengths() -> None:
    b = RecordBatchBuilder(max_batch_size=1 << 30)
    sizes = [0, 50, 70, 8000, 9000, 70_000, 3]
    for n in sizes:
        b.append(1, None, b"x" * n)
    data = b.build()
    starts = record_starts(data, 61, len(data), len(sizes))
    assert starts[0] == 61 and starts[-1] == len(data)
    # Each record: attributes, timestamp and offset deltas, key length, header count (a
    # byte each here), the value and its length, and the record's length (1 to 3 bytes).
    assert [b - a for a, b in itertools.pairwise(starts)] == [
        1 + 5 + 1, 1 + 5 + 1 + 50, 2 + 5 + 2 + 70, 2 + 5 + 2 + 8000, 3 + 5 + 3 + 9000,
        3 + 5 + 3 + 70_000, 1 + 5 + 1 + 3]
    with pytest.raises(CorruptRecordError, match="runs past"):
        record_starts(data, 61, len(data), len(sizes) + 1)
    with pytest.raises(CorruptRecordError, match="after its"):
        record_starts(data, 61, len(data), len(sizes) - 1)


@pytest.mark.parametrize("share", [0.0, 0.002, 0.05, 0.5, 1.0])
def test_record_starts_walks_short_records_a_block_at_a_time(share: float) -> None:
    """Records under 64 bytes (a one-byte length) are walked a block at a time with the
    one-byte table; a block holding a longer record is walked again with the two-byte
    table, wherever in the block it is: the positions are the slow walk's for every mix,
    and a buffer cut short is still refused."""
    from kontrakt.protocol.records._columnar import _BLOCK, _starts_slow, _steps, _walk

    rng = random.Random(int(share * 1000))
    b = RecordBatchBuilder(max_batch_size=1 << 30)
    for i in range(_BLOCK * 9 + 5):
        width = rng.choice([70, 300]) if rng.random() < share else rng.randrange(0, 50)
        b.append(1_700_000_000_000 + rng.choice([0, i]), None, b"v" * width)
    data = b.build()
    count = b.record_count
    want = _starts_slow(data, 61, len(data), count)
    assert record_starts(data, 61, len(data), count) == want
    starts = [61]
    _walk(data, 61, count, _steps(), starts)
    assert starts == want
    with pytest.raises(CorruptRecordError):
        record_starts(data[:-1], 61, len(data) - 1, count)


@pytest.mark.parametrize("seed", range(6))
def test_record_starts_takes_runs_of_one_size_as_the_walk_does(seed: int) -> None:
    """Runs of records of one size (taken a run at a time) give exactly the positions of
    the record-by-record walk: runs long and short, one- and two-byte lengths, sizes that
    change as the deltas grow a byte, a lone odd record between runs, and truncated or
    overlong counts refused the same way."""
    from kontrakt.protocol.records._columnar import _starts_slow

    rng = random.Random(seed)
    b = RecordBatchBuilder(max_batch_size=1 << 30)
    i = 0
    for _ in range(rng.randrange(3, 12)):
        width = rng.choice([0, 5, 40, 60, 61, 120, 200, 5000])
        for _ in range(rng.choice([1, 2, 63, 64, 65, 200, 700])):
            key = None if width != 40 else b"k%04d" % (i % 10_000)
            b.append(1_700_000_000_000 + rng.choice([0, i, 70 * i]), key, b"v" * width)
            i += 1
    data = b.build()
    count = b.record_count
    assert record_starts(data, 61, len(data), count) == _starts_slow(data, 61, len(data),
                                                                      count)
    for wrong in (count + 1, count - 1):
        with pytest.raises(CorruptRecordError):
            record_starts(data, 61, len(data), wrong)
    with pytest.raises(CorruptRecordError):
        record_starts(data[:-1], 61, len(data) - 1, count)


def test_record_starts_takes_fixed_size_records_in_runs() -> None:
    """1,000 records of a 60-byte value: a few runs (the deltas grow a byte at 64 and
    8,192) cover them, leaving the one-by-one walk almost nothing."""
    from kontrakt.protocol.records._columnar import _runs, _steps

    b = RecordBatchBuilder(max_batch_size=1 << 30)
    for i in range(1_000):
        b.append(1_700_000_000_000 + i, None, b"%060d" % i)
    data = b.build()
    starts = [61]
    pos, left = _runs(data, 61, len(data), 1_000, _steps(), starts)
    assert pos == starts[-1]
    assert left < 64 and len(starts) == 1_001 - left
    assert starts == _starts_slow_of(data)[:len(starts)]
    # Lengths 64 apart share their varint's first byte: the second tells the runs apart.
    b = RecordBatchBuilder(max_batch_size=1 << 30)
    for i in range(1_000):
        b.append(1_700_000_000_000, None, b"x" * (100 if i < 500 else 164))
    data = b.build()
    starts = [61]
    _runs(data, 61, len(data), 1_000, _steps(), starts)
    assert starts == _starts_slow_of(data)[:len(starts)]


def _starts_slow_of(data: bytes) -> list[int]:
    from kontrakt.protocol.records._columnar import _starts_slow

    return _starts_slow(data, 61, len(data), 1_000)


def test_raw_batches_are_refused_with_a_group() -> None:
    with pytest.raises(ConfigError, match=r"group\.id"):
        AsyncConsumer({"bootstrap.servers": "127.0.0.1:9", "group.id": "g"}, _raw_batches=True)


class _BatchConsumer:
    """Hands out one raw batch per getmany, as a ``_raw_batches`` consumer does."""

    def __init__(self, raw: list[RawBatch]) -> None:
        self.raw = raw

    def getmany(self, timeout: float, max_records: int) -> dict[TopicPartition, Any]:
        return {TopicPartition("t", 3): [self.raw.pop(0)]} if self.raw else {}

    def position(self, tp: TopicPartition) -> int:
        return 1 << 40


def test_a_task_yields_chunks_of_chunk_records_across_fetched_batches() -> None:
    blobs = []
    for base in range(0, 30_000, 10_000):
        b = RecordBatchBuilder(base_offset=base, max_batch_size=1 << 30)
        for i in range(10_000):
            b.append(1_000 + base + i, None, b"%d" % (base + i),
                     [("h", None)] if base + i == 12_345 else None)
        blobs.append(b.build())
    raw = [r for recs, *_ in iter_partition_batches(
        "t", 3, b"".join(blobs), 0, read_committed=False, aborted=None, check_crcs=True)
        for r in recs]
    chunks = list(_chunks(cast(Any, _BatchConsumer(raw)), TopicPartition("t", 3),
                          OffsetRange("t", 3, 5, 29_990), 5.0))
    assert [len(c) for c in chunks] == [CHUNK_RECORDS, 29_985 - CHUNK_RECORDS]
    assert [o for c in chunks for o in c.offsets] == list(range(5, 29_990))
    assert [v for c in chunks for v in c.values] == [b"%d" % i for i in range(5, 29_990)]
    headers = [h for c in chunks for h in c.headers]
    assert headers[12_340] == [("h", None)] and sum(map(len, headers)) == 1


def test_empty_batches_give_empty_columns() -> None:
    empty = RecordBatchBuilder(base_offset=7).build()
    raw = RawBatch("t", 3, empty, 61, len(empty), 0, 7, -1, 0, -1, 7, 6, 0)
    columns = decode_batches([raw, raw])
    assert len(columns) == 0 and columns.values.type == pa.binary()
