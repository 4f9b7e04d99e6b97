"""The memory of decoded records stays within the prefetch cap, whatever a response holds.

The decompression limit bounds the bytes of one batch, not what they decode to: a batch of
minimal records (7-9 bytes each, ~250 bytes as ConsumerRecords) just under the limit, or a
response of many batches each just under it, used to be decoded whole. The consumer now
counts decoded records by what they cost (``RECORD_COST``) against
``queued.max.messages.kbytes``, materializes a large batch a bounded piece at a time, and
decodes further only while the buffer is below the cap.

Neither test broker serves such responses (both answer within the fetch's byte limits, and
neither holds batches crafted to inflate), so the floods come from :class:`FakeBroker`, the
crafted Fetch peer, which answers each fetch with the whole rest of the partition's log in
one response. The consumer runs in a child process (``flood_child.py``) so that its peak
RSS is its own.

Setting: ``max.partition.fetch.bytes`` 64 KiB, so batches may decompress to 4 MiB (the
default multiple, 64); prefetch cap 2 MiB, so records are materialized 256 KiB at a time.
Stated bound on the peak RSS growth: 16 MiB = one decompressed batch (4 MiB, held while it
is decoded) + the cap and a chunk (2.25 MiB) + allocator slack; before this change the
tiny-record batch alone took ~115 MB, the many-batch response ~64 MiB.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kontrakt._types import TopicPartition
from kontrakt.clients.consumer import AsyncConsumer, Consumer
from kontrakt.clients.consumer._fetcher import iter_partition_chunks, parse_partition
from kontrakt.protocol.messages import FetchResponse
from kontrakt.protocol.records import RecordBatchBuilder
from tests._crafted_broker import FakeBroker
from tests.unit.consumer.flood_child import batch, tiny_records, value_records

ROOT = Path(__file__).resolve().parents[3]
PARTITION_FETCH = 64 * 1024
LIMIT = 64 * PARTITION_FETCH  # the decompression limit at the default multiple
CAP_KIB = 2048
BOUND = 16 << 20
#: records of 7, 8 and 9 bytes (offset deltas of 1, 2 and 3 varint bytes) filling the limit
TINY = 8192 + (LIMIT - 64 * 7 - (8192 - 64) * 8) // 9

needs_proc = pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(),
                                reason="Linux /proc")


def _warm_log() -> bytes:
    b = RecordBatchBuilder(base_offset=0, compression="zstd")
    for i in range(200):
        b.append(1_700_000_000_000 + i, f"k{i}".encode(), b"v" * 100)
    return b.build()


def _run_child(tmp_path: Path, flood: bytes, drain_step: int) -> dict[str, Any]:
    (tmp_path / "p0").write_bytes(_warm_log())
    (tmp_path / "p1").write_bytes(flood)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({
        "logs": [str(tmp_path / "p0"), str(tmp_path / "p1")], "cap_kib": CAP_KIB,
        "partition_fetch": PARTITION_FETCH, "drain_step": drain_step}))
    proc = subprocess.run(
        [sys.executable, "-m", "tests.unit.consumer.flood_child", str(spec)],
        capture_output=True, text=True, timeout=240, cwd=ROOT, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    report: dict[str, Any] = json.loads(proc.stdout)
    assert report["warm_up"] == 200
    return report


@needs_proc
@pytest.mark.parametrize("codec", ["zstd", "gzip"])
def test_a_batch_of_millions_of_tiny_records_is_decoded_within_the_cap(
        codec: str, tmp_path: Path) -> None:
    records = tiny_records(TINY)
    assert LIMIT - 9 < len(records) <= LIMIT  # just under the decompression limit
    flood = batch(codec, records, TINY, 0)
    report = _run_child(tmp_path, flood, drain_step=20_000)
    # Stalled: the decoding waits with about the cap buffered, far from the whole batch.
    assert report["stalled_buffered"] <= CAP_KIB * 1024 + (CAP_KIB * 1024) // 8 + 64 * 1024
    assert report["stalled_rss_growth"] < BOUND, report
    # Drained: every record, in order, and the position after the last.
    assert report["delivered"] == TINY and report["in_order"], report
    assert report["position"] == TINY
    assert report["rss_growth"] < BOUND, report


@needs_proc
def test_a_response_of_many_batches_each_under_the_limit_is_decoded_within_the_cap(
        tmp_path: Path) -> None:
    per = 127  # 127 x ~32 KiB values: just under the 4 MiB limit per batch
    blobs = [batch("zstd" if i % 2 else "gzip", value_records(per, 32 * 1024), per, i * per)
             for i in range(16)]
    assert all(len(b) < 64 * 1024 for b in blobs)  # each well within a partition fetch
    report = _run_child(tmp_path, b"".join(blobs), drain_step=50)
    assert report["stalled_buffered"] <= CAP_KIB * 1024 + (CAP_KIB * 1024) // 8 + 64 * 1024
    assert report["stalled_rss_growth"] < BOUND, report
    assert report["delivered"] == 16 * per and report["in_order"], report
    assert report["rss_growth"] < BOUND, report


# --- decoding in pieces ------------------------------------------------------------------

def test_a_batch_costing_more_than_a_chunk_is_decoded_in_pieces() -> None:
    """Every record once, in order, each piece within the chunk's cost, next offsets
    consecutive, the batch's wire bytes counted once, and headers counted in the cost."""
    from kontrakt.clients.consumer._fetcher import HEADER_COST, RECORD_COST

    b = RecordBatchBuilder(base_offset=100, compression="lz4", max_batch_size=1 << 24)
    for i in range(5000):
        b.append(1_700_000_000_000 + i, None, b"x" * (i % 50),
                 [("h", b"1")] * (i % 3))
    small = RecordBatchBuilder(base_offset=5100, compression="none")
    small.append(1, b"k", b"v")
    data = b.build() + small.build()
    whole, nxt, _ = parse_partition("t", 0, data, 100, read_committed=False, aborted=None,
                                    check_crcs=True)
    budget = 64 * 1024
    chunks = list(iter_partition_chunks("t", 0, data, 100, read_committed=False, aborted=None,
                                        check_crcs=True, chunk_bytes=1 << 20,
                                        chunk_cost=budget))
    assert [r for recs, *_ in chunks for r in recs] == whole
    assert len(chunks) > 10
    # The first piece is sized by the batch's average record, which does not show the
    # headers (a piece stops at a chunk's cost of them, so at most twice the budget); the
    # next ones by what the first cost, so within the budget and one record.
    one_record = 50 + 9 + RECORD_COST + 2 * HEADER_COST
    assert chunks[0][4] <= 2 * budget
    assert all(cost <= budget + one_record for *_, cost in chunks[1:])
    for (recs, after, *_), (later, *_) in itertools.pairwise(chunks):
        assert recs[-1].offset + 1 == after == later[0].offset
    assert chunks[-1][1] == nxt == 5101
    assert sum(size for _, _, _, size, _ in chunks) == len(data)
    headers = sum(len(r.headers) for r in whole)
    assert sum(cost for *_, cost in chunks) >= len(whole) * RECORD_COST + headers * HEADER_COST
    # Starting inside the batch: the records before the fetch offset are skipped.
    later = list(iter_partition_chunks("t", 0, data, 3000, read_committed=False, aborted=None,
                                       check_crcs=True, chunk_bytes=1 << 20,
                                       chunk_cost=budget))
    assert [r.offset for recs, *_ in later for r in recs] == list(range(3000, 5101))


def test_a_malformed_record_in_a_batch_decoded_in_pieces_comes_after_the_pieces_before() -> None:
    from kontrakt.errors import CorruptRecordError
    from kontrakt.protocol.records._builder import frame_batch

    good = RecordBatchBuilder(base_offset=0, compression="none")
    good.append(1, None, b"v")
    records = tiny_records(20_000)
    # Record 15000 claims one byte more than it holds: the records after it are misread.
    at = sum(8 if i >= 64 else 7 for i in range(15_000)) + (9 - 8) * max(0, 15_000 - 8192)
    bad = bytearray(records)
    assert bad[at] == 0x10  # the length varint (8) of a 9-byte record
    bad[at] = 0x12
    data = good.build() + frame_batch(bytes(bad), 20_000, 1, 1, base_offset=1)
    got: list[int] = []
    with pytest.raises(CorruptRecordError) as info:
        for recs, *_ in iter_partition_chunks("t", 0, data, 0, read_committed=False,
                                              aborted=None, check_crcs=True,
                                              chunk_bytes=1 << 20, chunk_cost=64 * 1024):
            got.extend(r.offset for r in recs)
    assert (info.value.topic, info.value.partition, info.value.offset) == ("t", 0, 1)
    assert got == list(range(len(got))) and 1 < len(got) <= 15_001


def test_a_control_batch_of_many_records_is_read_by_its_first() -> None:
    """read_committed reads an abort marker from a control batch; one that claims (and
    holds) 200,000 records is not materialized for it."""
    import tracemalloc

    from kontrakt.protocol.records import ControlRecordType, build_control_batch
    from kontrakt.protocol.records._builder import frame_batch

    marker = build_control_batch(ControlRecordType.ABORT, producer_id=7, producer_epoch=0,
                                 base_offset=2, timestamp=1)
    # The same marker record, then 199,999 tiny ones, in a control batch of producer 7.
    from kontrakt.protocol.records import RecordBatch
    ctrl = RecordBatch.from_bytes(marker)
    first = ctrl.raw()[61:]
    padded = frame_batch(first + tiny_records(199_999, 1), 200_000, 1, 1, producer_id=7,
                         producer_epoch=0, attributes=0x30, base_offset=2)
    txn = RecordBatchBuilder(base_offset=0, producer_id=7, producer_epoch=0, base_sequence=0,
                             is_transactional=True)
    txn.append(1, None, b"aborted")
    txn.append(1, None, b"aborted")
    plain = RecordBatchBuilder(base_offset=200_002)
    plain.append(1, None, b"kept")
    data = txn.build() + padded + plain.build()

    class Aborted:
        producer_id = 7
        first_offset = 0

    tracemalloc.start()
    try:
        recs, nxt, _ = parse_partition("t", 0, data, 0, read_committed=True,
                                       aborted=[Aborted()], check_crcs=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [(r.offset, r.value) for r in recs] == [(200_002, b"kept")] and nxt == 200_003
    assert peak < 4 << 20  # 200,000 records would take ~50 MB


@pytest.mark.parametrize("magic", [0, 1])
def test_a_legacy_wrapper_of_many_messages_is_decoded_in_pieces(magic: int) -> None:
    """A compressed legacy wrapper (magic 0/1) holding 40,000 minimal messages is handed
    out in pieces with their absolute offsets, never all at once: taking the chunks one at
    a time peaks far below the whole wrapper's records."""
    import tracemalloc

    from kontrakt.protocol.records import LegacyMessageSetBuilder

    plain = LegacyMessageSetBuilder(magic)
    plain.append(1, None, b"first")
    wrapper = LegacyMessageSetBuilder(magic, compression="gzip")
    for _ in range(40_000):
        wrapper.append(1, None, None)
    data = plain.build(0) + wrapper.build(1)
    whole, nxt, _ = parse_partition("t", 0, data, 0, read_committed=False, aborted=None,
                                    check_crcs=True)
    assert [r.offset for r in whole] == list(range(40_001)) and nxt == 40_001
    del whole
    budget = 256 * 1024
    tracemalloc.start()
    try:
        offsets: list[int] = []
        sizes = 0
        for recs, after, _, size, cost in iter_partition_chunks(
                "t", 0, data, 0, read_committed=False, aborted=None, check_crcs=True,
                chunk_bytes=1 << 20, chunk_cost=budget):
            assert cost <= 2 * budget and after == recs[-1].offset + 1
            offsets.extend(r.offset for r in recs[:: max(1, len(recs) - 1)])
            sizes += size
            del recs
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert offsets[0] == 0 and offsets[-1] == 40_000 and offsets == sorted(offsets)
    assert sizes == len(data)
    assert peak < 4 << 20, peak  # the whole wrapper's records: ~16 MB


def test_records_of_many_headers_are_decoded_a_bounded_piece_at_a_time() -> None:
    """Empty headers take 2 bytes each and ~70 decoded: a piece stops once it holds a
    chunk's cost of them, also in a batch that looked small enough to join a chunk."""
    from kontrakt.clients.consumer._fetcher import HEADER_COST, RECORD_COST

    b = RecordBatchBuilder(base_offset=0, compression="zstd", max_batch_size=1 << 24)
    for _ in range(2000):
        b.append(1, None, None, [("", None)] * 100)
    small = []
    for base in range(2000, 2030, 10):
        s = RecordBatchBuilder(base_offset=base)
        for _ in range(10):
            s.append(1, None, b"v")
        small.append(s.build())
    # 22 KB and 10 records: it joins the small batches' chunk, then its headers (10,000,
    # 1.3 MB decoded) stop the piece after its first record.
    sneaky = RecordBatchBuilder(base_offset=2030, compression="gzip")
    for _ in range(10):
        sneaky.append(1, None, None, [("", None)] * 1000)
    data = b.build() + b"".join(small) + sneaky.build()
    budget = 64 * 1024
    chunks = list(iter_partition_chunks("t", 0, data, 0, read_committed=False,
                                        aborted=None, check_crcs=True, chunk_bytes=1 << 20,
                                        chunk_cost=budget))
    assert [r.offset for recs, *_ in chunks for r in recs] == list(range(2040))
    for (recs, after, *_), (later, *_) in itertools.pairwise(chunks):
        assert recs[-1].offset + 1 == after == later[0].offset
    assert sum(size for _, _, _, size, _ in chunks) == len(data)
    # Within the budget, but for the one record that takes a piece past it.
    assert all(cost <= budget + RECORD_COST + 2000 + 1000 * HEADER_COST
               for *_, cost in chunks)
    assert all(len(recs) <= budget // HEADER_COST // 100 + 1
               for recs, *_ in chunks if recs[0].offset < 1998)
    joined = [recs for recs, *_ in chunks if recs[0].offset < 2030 <= recs[-1].offset]
    assert [[r.offset for r in recs] for recs in joined] == [list(range(1998, 2031))]


# --- the fetcher waiting for room --------------------------------------------------------

def _whole_log_server(log: bytes, fetched: list[int]) -> Any:
    """Answer each fetch with every batch from its offset on, in one response."""
    from kontrakt.protocol.records import iter_batches

    batches = [(b.next_offset, b.raw()) for b in iter_batches(log, check_crcs=False)]
    end = batches[-1][0]

    async def handle(version: int, req: Any) -> Any:
        R = FetchResponse.FetchableTopicResponse
        P = R.PartitionData
        parts = []
        for t in req.topics:
            for p in t.partitions:
                fetched.append(p.fetch_offset)
                blobs = [blob for nxt, blob in batches if nxt > p.fetch_offset]
                if not blobs:
                    await asyncio.sleep(0.02)
                parts.append(P(partition_index=p.partition, error_code=0, high_watermark=end,
                               last_stable_offset=end, log_start_offset=0,
                               records=b"".join(blobs)))
        return FetchResponse(session_id=0, responses=[R(topic=t.topic, partitions=parts)])
    return handle


def _parked(c: AsyncConsumer) -> bool:
    space = c._fetcher._space
    return space is not None and bool(space._waiters)  # type: ignore[attr-defined]


async def _until(cond: Any, what: str) -> None:
    for _ in range(1000):  # bounded: 10 s
        if cond():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_seek_while_the_decoding_waits_for_room_cancels_it_cleanly() -> None:
    """The decoding of a 20,000-record response waits with the 16 KiB cap full; a seek
    ends it at once (nothing more of it is decoded or buffered), and consumption goes on
    from the sought offset, in order, to the end. Then close() while a decoding waits
    returns promptly."""
    n = 20_000
    log = batch("zstd", tiny_records(n), n, 0)
    fetched: list[int] = []
    tp = TopicPartition("flood", 0)

    async def main() -> None:
        async with FakeBroker({"flood": 1}, {1: _whole_log_server(log, fetched)}) as broker:
            c = AsyncConsumer(bootstrap_servers=broker.bootstrap, fetch_max_wait_ms=50,
                              queued_max_messages_kbytes=16)
            await c.start()
            c.assign([tp])
            c.seek(tp, 0)
            first = await c.getmany(timeout=5.0, max_records=10)
            assert [r.offset for r in first[tp]] == list(range(10))
            await _until(lambda: _parked(c), "the decoding to wait for room")
            assert c._buffer.total_bytes >= c._buffer.max_bytes
            waiting = set(c._fetcher._decoding)
            assert waiting
            c.seek(tp, 12_345)
            await _until(lambda: not (waiting & c._fetcher._decoding), "the decoding to end")
            assert all(t.done() and not t.cancelled() and t.exception() is None
                       for t in waiting)
            offsets: list[int] = []
            for _ in range(2000):
                for recs in (await c.getmany(timeout=2.0, max_records=500)).values():
                    offsets.extend(r.offset for r in recs)
                if offsets and offsets[-1] >= n - 1:
                    break
            assert offsets == list(range(12_345, n))
            assert await c.position(tp) == n
            assert 12_345 in fetched
            # Close while a decoding waits: the fetch from 0 again parks; close ends it.
            c.seek(tp, 0)
            await _until(lambda: _parked(c), "the decoding to wait for room again")
            await asyncio.wait_for(c.close(), 10)
            assert not c._fetcher._decoding

    asyncio.run(main())


def test_a_paused_partition_filling_the_buffer_does_not_hold_the_others_back() -> None:
    """p0's flood fills the 16 KiB cap and its decoding waits, with p1's records of the same
    response behind it. Pausing p0 stops that decoding (its rest is fetched again on
    resume): p1's records come, and later fetches of p1 go on although p0's buffered
    records still fill the cap. Resumed, p0 delivers every record, in order."""
    n = 20_000
    flood = batch("zstd", tiny_records(n), n, 0)
    fetched: list[int] = []
    handle = _whole_log_server(flood, fetched)
    p0, p1 = TopicPartition("flood", 0), TopicPartition("flood", 1)
    p1_log = [batch("gzip", value_records(5, 10), 5, base) for base in range(0, 50, 5)]
    served_p1: list[int] = []

    async def two(version: int, req: Any) -> Any:
        resp = await handle(version, req)
        R = FetchResponse.FetchableTopicResponse
        parts = []
        for t in req.topics:
            for p in t.partitions:
                if p.partition == 1:
                    # One batch per fetch: p1 needs fetch after fetch.
                    served_p1.append(p.fetch_offset)
                    blobs = [b for i, b in enumerate(p1_log) if i * 5 + 5 > p.fetch_offset][:1]
                    parts.append(R.PartitionData(
                        partition_index=1, error_code=0, high_watermark=50,
                        last_stable_offset=50, log_start_offset=0, records=b"".join(blobs)))
        for part in resp.responses[0].partitions:
            if part.partition_index == 0:
                parts.insert(0, part)
        return FetchResponse(session_id=0, responses=[R(topic="flood", partitions=parts)])

    async def main() -> None:
        async with FakeBroker({"flood": 2}, {1: two}) as broker:  # noqa: SIM117
            async with AsyncConsumer(bootstrap_servers=broker.bootstrap, fetch_max_wait_ms=50,
                                     queued_max_messages_kbytes=16) as c:
                c.assign([p0, p1])
                c.seek(p0, 0)
                c.seek(p1, 0)
                await _until(lambda: _parked(c), "p0's decoding to wait for room")
                c.pause(p0)
                got1: list[int] = []
                for _ in range(20):
                    for tp, recs in (await c.getmany(timeout=1.0)).items():
                        assert tp == p1
                        got1.extend(r.offset for r in recs)
                    if len(got1) >= 50:
                        break
                assert got1 == list(range(50))
                assert c._buffer.total_bytes >= c._buffer.max_bytes  # p0's, still there
                c.resume(p0)
                got0: list[int] = []
                for _ in range(2000):
                    for tp, recs in (await c.getmany(timeout=1.0, max_records=2000)).items():
                        assert tp == p0
                        got0.extend(r.offset for r in recs)
                    if got0 and got0[-1] >= n - 1:
                        break
                assert got0 == list(range(n))
                assert await c.position(p0) == n

    asyncio.run(main())


def test_pausing_a_parked_partition_drops_its_next_response_already_received() -> None:
    """The response from 0 fills the 16 KiB cap and its decoding waits; the pipelined
    response from 4000 has arrived meanwhile and waits behind it. Pausing stops the first
    decoding, to fetch its rest again on resume; the second response must then be dropped
    too (decoded, it would skip the first one's rest: records lost; or repeat what the fetch
    again brings: records twice). Resumed, every record comes once, in order."""
    per, n = 1000, 10_000
    blobs = [batch("zstd", tiny_records(per), per, base) for base in range(0, n, per)]
    fetched: list[int] = []
    tp = TopicPartition("flood", 0)

    async def handle(version: int, req: Any) -> Any:
        R = FetchResponse.FetchableTopicResponse
        parts = []
        for t in req.topics:
            for p in t.partitions:
                fetched.append(p.fetch_offset)
                # Four batches a response: the next fetch starts past them.
                mine = [b for i, b in enumerate(blobs) if (i + 1) * per > p.fetch_offset][:4]
                if not mine:
                    await asyncio.sleep(0.02)
                parts.append(R.PartitionData(
                    partition_index=p.partition, error_code=0, high_watermark=n,
                    last_stable_offset=n, log_start_offset=0, records=b"".join(mine)))
        return FetchResponse(session_id=0, responses=[R(topic="flood", partitions=parts)])

    async def main() -> None:
        async with FakeBroker({"flood": 1}, {1: handle}) as broker:  # noqa: SIM117
            async with AsyncConsumer(bootstrap_servers=broker.bootstrap, fetch_max_wait_ms=50,
                                     queued_max_messages_kbytes=16) as c:
                c.assign([tp])
                c.seek(tp, 0)
                await _until(lambda: _parked(c) and 4000 in fetched,
                             "the decoding to wait with the next response received")
                c.pause(tp)
                for _ in range(5):
                    assert await c.getmany(timeout=0.02) == {}
                c.resume(tp)
                got: list[int] = []
                for _ in range(2000):
                    for recs in (await c.getmany(timeout=1.0, max_records=2000)).values():
                        got.extend(r.offset for r in recs)
                    if await c.position(tp) >= n:
                        break
                assert got == list(range(n))

    asyncio.run(main())


def test_a_sync_consumer_draining_slowly_from_its_thread_wakes_the_decoding() -> None:
    """Drained from the application's thread (poll and consume), the buffer's freed room
    reaches the loop and the waiting decoding goes on: every record of three responses'
    worth, in order, with positions and the offsets a commit would send following them."""
    per = 4000
    log = b"".join(batch("gzip" if i % 2 else "zstd", tiny_records(per), per, i * per)
                   for i in range(5))
    fetched: list[int] = []
    tp = TopicPartition("flood", 0)

    def application(bootstrap: str) -> None:
        with Consumer(bootstrap_servers=bootstrap, fetch_max_wait_ms=50,
                      queued_max_messages_kbytes=16, enable_auto_commit=False) as c:
            c.assign([tp])
            c.seek(tp, 0)
            waits = [0]
            fetcher = c._async._fetcher
            real = fetcher._wait_for_space

            async def counting(st: Any, gen: int) -> None:
                waits[0] += 1
                await real(st, gen)
            fetcher._wait_for_space = counting  # type: ignore[method-assign]
            offsets: list[int] = []
            for i in range(100_000):
                if i % 2:
                    rec = c.poll(5.0)
                    assert rec is not None
                    offsets.append(rec.offset)
                else:
                    offsets.extend(r.offset for r in c.consume(300, timeout=5.0))
                    time.sleep(0.002)  # a slow application: the buffer stays full
                if offsets[-1] >= 5 * per - 1:
                    break
            assert offsets == list(range(5 * per))
            assert c.position(tp) == 5 * per
            assert c._async._subs.consumed_offsets()[tp].offset == 5 * per
            assert waits[0] > 20  # the decoding did wait for room, again and again

    async def main() -> None:
        async with FakeBroker({"flood": 1}, {1: _whole_log_server(log, fetched)}) as broker:
            # The application's thread; the broker stays on this loop.
            await asyncio.to_thread(application, broker.bootstrap)

    asyncio.run(main())


@pytest.mark.integration
def test_consumption_under_a_small_cap_is_unchanged_on_tansu(tansu_broker: Any,
                                                              topic_name: str) -> None:
    """Against a real broker, with every codec and headers: a 16 KiB cap (so decoding
    waits for room over and over) and the default one hand out the same records in the
    same order, end at the same positions, and commit them."""
    from kontrakt.clients import AsyncKafkaClient
    from kontrakt.protocol.records import RecordBatchBuilder as Builder
    from tests.integration.raw_ops import produce

    tansu_broker.create_topic(topic_name, 2)
    bs = tansu_broker.bootstrap_servers
    tps = [TopicPartition(topic_name, p) for p in (0, 1)]
    per_partition = 3000

    async def fill() -> None:
        async with AsyncKafkaClient(bootstrap_servers=bs) as client:
            for tp in tps:
                for i, codec in enumerate(["none", "gzip", "snappy", "lz4", "zstd"] * 2):
                    b = Builder(compression=codec)
                    for j in range(300):
                        n = i * 300 + j
                        b.append(1_700_000_000_000 + n, f"k{n}".encode(), b"v" * (n % 200),
                                 [("n", str(n).encode())] if n % 3 else None)
                    part = await produce(client, topic_name, tp.partition, b.build())
                    assert part.error_code == 0, part

    async def consume(cap_kib: int | None, group: str) -> list[tuple[int, int, bytes | None]]:
        extra = {} if cap_kib is None else {"queued_max_messages_kbytes": cap_kib}
        async with AsyncConsumer(bootstrap_servers=bs, group_id=group,
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 **extra) as c:
            c.assign(tps)
            out: list[tuple[int, int, bytes | None]] = []
            for _ in range(2000):
                for recs in (await c.getmany(timeout=1.0, max_records=97)).values():
                    out.extend((r.partition, r.offset, r.value) for r in recs)
                if len(out) >= 2 * per_partition:
                    break
                await asyncio.sleep(0.001)  # a slow application
            assert [await c.position(tp) for tp in tps] == [per_partition] * 2
            await c.commit()
            committed = await c.committed(tps)
            assert [committed[tp].offset for tp in tps] == [per_partition] * 2  # type: ignore[union-attr]
            return out

    async def main() -> None:
        await fill()
        small = await consume(16, f"g-small-{topic_name}")
        default = await consume(None, f"g-default-{topic_name}")
        for got in (small, default):
            for p in (0, 1):
                mine = [(o, v) for part, o, v in got if part == p]
                assert mine == [(n, b"v" * (n % 200)) for n in range(per_partition)]

    asyncio.run(main())
