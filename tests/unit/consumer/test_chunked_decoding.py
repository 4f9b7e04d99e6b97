"""Chunked decoding of fetched record sets (``iter_partition_chunks``) and the fetcher that
hands chunks to the buffer while later responses arrive: order, positions, byte
accounting, seeks during decoding, and the garbage collector's state."""

from __future__ import annotations

import asyncio
import gc
import itertools
from typing import Any

import pytest

from kontrakt._types import TopicPartition
from kontrakt.clients.consumer import AsyncConsumer
from kontrakt.clients.consumer._fetcher import iter_partition_chunks, parse_partition
from kontrakt.errors import CorruptRecordError
from kontrakt.protocol.messages import FetchResponse
from kontrakt.protocol.records import ControlRecordType, RecordBatchBuilder, build_control_batch
from tests._crafted_broker import FakeBroker

TOPIC = "chunks"
TP0 = TopicPartition(TOPIC, 0)
PID = 77


def _batch(base: int, n: int, *, txn: bool = False, headers: bool = False,
           compression: str = "none") -> bytes:
    b = RecordBatchBuilder(base_offset=base, compression=compression,
                           producer_id=PID if txn else -1, producer_epoch=0 if txn else -1,
                           base_sequence=0 if txn else -1, is_transactional=txn,
                           partition_leader_epoch=3)
    for i in range(n):
        b.append(1_700_000_000_000 + base + i, None if i % 2 else f"k{base + i}".encode(),
                 f"v{base + i}".encode(), [("h", str(i).encode())] if headers else None)
    return b.build()


def _log(batches: int, per: int) -> list[tuple[int, bytes]]:
    codecs = ["none", "gzip", "none", "zstd"]
    return [(i * per, _batch(i * per, per, headers=i % 3 == 0, compression=codecs[i % 4]))
            for i in range(batches)]


def _chunks(data: bytes, offset: int, chunk_bytes: int, **kw: Any) -> list[Any]:
    return list(iter_partition_chunks("t", 0, data, offset, read_committed=kw.get("rc", False),
                                      aborted=kw.get("aborted"), check_crcs=True,
                                      chunk_bytes=chunk_bytes))


@pytest.mark.parametrize("chunk_bytes", [0, 300, 1 << 20])
@pytest.mark.parametrize("start", [0, 7, 30])
def test_chunks_add_up_to_the_whole_partition(chunk_bytes: int, start: int) -> None:
    log = _log(8, 10)
    data = b"".join(blob for _, blob in log)
    whole, next_offset, epoch = parse_partition("t", 0, data, start, read_committed=False,
                                                aborted=None, check_crcs=True)
    chunks = _chunks(data, start, chunk_bytes)
    assert [r for recs, *_ in chunks for r in recs] == whole
    assert [r.offset for r in whole] == list(range(start, 80))
    assert chunks[-1][1:3] == (next_offset, epoch) == (80, 3)
    # Consecutive: each chunk ends where the next one's records begin.
    for (recs, nxt, *_), (later, *_) in itertools.pairwise(chunks):
        assert recs[-1].offset + 1 == nxt == later[0].offset
    past = [blob for base, blob in log if base + 10 > start]
    assert sum(size for _, _, _, size, _ in chunks) == sum(len(b) for b in past)
    if chunk_bytes == 0:
        assert len(chunks) == len(past)  # one chunk per batch
    if chunk_bytes == 1 << 20:
        assert len(chunks) == 1
    assert all(r.headers == ([("h", str(r.offset % 10).encode())] if r.offset < 10
                             or 30 <= r.offset < 40 or 60 <= r.offset < 70 else [])
               for r in whole)


def test_chunks_filter_aborted_transactions_across_chunk_boundaries() -> None:
    # 0-3 aborted txn, 4 abort marker, 5-8 plain, 9-10 committed txn, 11 commit marker.
    data = b"".join([
        _batch(0, 2, txn=True), _batch(2, 2, txn=True),
        build_control_batch(ControlRecordType.ABORT, producer_id=PID, producer_epoch=0,
                            base_offset=4, timestamp=1),
        _batch(5, 4), _batch(9, 2, txn=True),
        build_control_batch(ControlRecordType.COMMIT, producer_id=PID, producer_epoch=0,
                            base_offset=11, timestamp=1),
    ])

    class Aborted:
        producer_id = PID
        first_offset = 0

    for rc, want in ((True, [5, 6, 7, 8, 9, 10]), (False, [0, 1, 2, 3, 5, 6, 7, 8, 9, 10])):
        chunks = _chunks(data, 0, 0, rc=rc, aborted=[Aborted()])
        assert [r.offset for recs, *_ in chunks for r in recs] == want
        assert chunks[-1][0] == [] and chunks[-1][1] == 12  # the trailing commit marker


def test_the_collector_is_running_after_every_way_of_leaving() -> None:
    data = b"".join(blob for _, blob in _log(4, 5))
    assert gc.isenabled()
    it = iter_partition_chunks("t", 0, data, 0, read_committed=False, aborted=None,
                               check_crcs=True, chunk_bytes=0)
    next(it)
    assert gc.isenabled()  # never paused across a yield
    it.close()
    assert gc.isenabled()
    bad = bytearray(data)
    bad[-3] ^= 0xFF  # last batch: CRC mismatch
    got = []
    with pytest.raises(CorruptRecordError):
        for recs, *_ in iter_partition_chunks("t", 0, bytes(bad), 0, read_committed=False,
                                              aborted=None, check_crcs=True, chunk_bytes=0):
            got.extend(recs)
    assert gc.isenabled()
    assert [r.offset for r in got] == list(range(15))  # the good batches came first
    gc.disable()
    try:
        _chunks(data, 0, 0)
        assert not gc.isenabled()  # an application's choice is left alone
    finally:
        gc.enable()


def _serving(log: list[tuple[int, bytes]], per_response: int,
             fetch_offsets: list[int]) -> Any:
    """Answer each fetch at once with the next ``per_response`` batches from its offset."""
    end = log[-1][0] + 10

    async def handle(version: int, req: Any) -> Any:
        R = FetchResponse.FetchableTopicResponse
        P = R.PartitionData
        parts = []
        for t in req.topics:
            for p in t.partitions:
                fetch_offsets.append(p.fetch_offset)
                blobs = [b for base, b in log if base + 10 > p.fetch_offset][:per_response]
                if not blobs:
                    await asyncio.sleep(0.02)
                parts.append(P(partition_index=p.partition, error_code=0, high_watermark=end,
                               last_stable_offset=end, log_start_offset=0,
                               records=b"".join(blobs)))
        return FetchResponse(session_id=0, responses=[R(topic=TOPIC, partitions=parts)])
    return handle


def test_responses_arriving_during_decoding_keep_offset_order() -> None:
    # Many small chunks: the pipelined next response arrives while the previous one is
    # still being decoded, and must wait for it (records stay in offset order).
    log = _log(60, 10)
    fetched: list[int] = []

    async def main() -> None:
        async with FakeBroker({TOPIC: 1}, {1: _serving(log, 20, fetched)}) as broker:  # noqa: SIM117
            async with AsyncConsumer(bootstrap_servers=broker.bootstrap,
                                     max_poll_records=7) as c:
                c._fetcher.chunk_bytes = 0
                c.assign([TP0])
                c.seek(TP0, 0)
                offsets: list[int] = []
                for _ in range(2000):
                    for recs in (await c.getmany(timeout=1.0)).values():
                        offsets.extend(r.offset for r in recs)
                    if len(offsets) >= 600:
                        break
                assert offsets == list(range(600))
                assert await c.position(TP0) == 600
                st = c._subs.assignment[TP0]
                for _ in range(100):  # the fetch of the end may still be running
                    if not c._fetcher._decoding:
                        break
                    await asyncio.sleep(0.01)
                assert st.buffered_bytes == 0 and c._buffer.total_bytes == 0
        # Pipelined: offsets 200 and 400 were asked for before 0-199 / 200-399 were all
        # handed out.
        assert fetched[:3] == [0, 200, 400]

    asyncio.run(main())


def test_seek_while_a_response_is_decoded_drops_the_rest_of_it() -> None:
    log = _log(40, 10)
    fetched: list[int] = []

    async def main() -> None:
        async with FakeBroker({TOPIC: 1}, {1: _serving(log, 40, fetched)}) as broker:  # noqa: SIM117
            async with AsyncConsumer(bootstrap_servers=broker.bootstrap) as c:
                c._fetcher.chunk_bytes = 0
                c.assign([TP0])
                c.seek(TP0, 0)
                first = await c.getmany(timeout=2.0, max_records=5)
                assert [r.offset for r in first[TP0]] == [0, 1, 2, 3, 4]
                c.seek(TP0, 2)
                offsets: list[int] = []
                for _ in range(2000):
                    for recs in (await c.getmany(timeout=1.0)).values():
                        offsets.extend(r.offset for r in recs)
                    if offsets and offsets[-1] >= 399:
                        break
                assert offsets == list(range(2, 400))
                assert await c.position(TP0) == 400

    asyncio.run(main())


def test_per_record_polls_move_the_position_through_the_cursor() -> None:
    from kontrakt.clients.consumer._fetcher import CompletedFetch, FetchBuffer
    from kontrakt.clients.consumer._subscription import FetchPosition, SubscriptionState

    subs = SubscriptionState()
    subs.assign([TP0])
    subs.seek(TP0, 10)
    st = subs.state(TP0)
    recs, nxt, _ = parse_partition(TOPIC, 0, _batch(10, 5), 10, read_committed=False,
                                   aborted=None, check_crcs=True)
    buf = FetchBuffer(1 << 20)
    cf = CompletedFetch(TP0, st, st.gen, recs, nxt + 1, 3, 100)  # 15: a control record
    buf.add(cf)
    for want in (10, 11, 12):
        rec = buf.drain_one()
        assert rec is not None and rec.offset == want
        assert st.position == FetchPosition(want + 1, 3)
    assert st.cursor is buf.lease and st.cursor.cf is cf
    assert subs.consumed_offsets()[TP0].offset == 13  # what a commit would send
    got = buf.drain_one()
    assert got is not None and got.offset == 13 and st.position == FetchPosition(14, 3)
    last = buf.drain_one()  # the fetch's last record: the position jumps past the marker
    assert last is not None and last.offset == 14
    assert st.position == FetchPosition(16, 3) and st.cursor is None
    assert buf.drain_one() is None and buf.total_bytes == 0
    # A seek in the middle of a fetch wins over the cursor and drops the rest.
    recs2, _, _ = parse_partition(TOPIC, 0, _batch(16, 4), 16, read_committed=False,
                                  aborted=None, check_crcs=True)
    buf.add(CompletedFetch(TP0, st, st.gen, recs2, 20, 3, 100))
    first = buf.drain_one()
    assert first is not None and first.offset == 16 and st.position == FetchPosition(17, 3)
    subs.seek(TP0, 5)
    assert st.cursor is None and st.position == FetchPosition(5, -1)
    assert buf.drain_one() is None and st.position == FetchPosition(5, -1)
    # drain() after per-record polls takes the rest and sets the position itself.
    recs3, _, _ = parse_partition(TOPIC, 0, _batch(5, 4), 5, read_committed=False,
                                  aborted=None, check_crcs=True)
    buf.add(CompletedFetch(TP0, st, st.gen, recs3, 9, 3, 100))
    one = buf.drain_one()
    assert one is not None and one.offset == 5
    rest = buf.drain(10)
    assert [r.offset for r in rest[TP0]] == [6, 7, 8]
    assert st.position == FetchPosition(9, 3) and st.cursor is None


def test_no_fetch_of_only_caught_up_partitions_while_others_wait_for_buffer_space() -> None:
    # p0 has data in many responses, p1 none. Each response puts p0 over
    # max.partition.fetch.bytes until consumed; a fetch listing only p1 would be held by
    # the broker for fetch.max.wait.ms and keep p0 from being fetched meanwhile.
    log = _log(12, 10)
    requests: list[tuple[list[int], int]] = []

    async def handle(version: int, req: Any) -> Any:
        R = FetchResponse.FetchableTopicResponse
        P = R.PartitionData
        parts = []
        asked = sorted(p.partition for t in req.topics for p in t.partitions)
        offsets = {p.partition: p.fetch_offset for t in req.topics for p in t.partitions}
        requests.append((asked, offsets.get(0, -1)))
        for part, offset in offsets.items():
            blobs = ([b for base, b in log if base + 10 > offset][:3] if part == 0 else [])
            parts.append(P(partition_index=part, error_code=0,
                           high_watermark=120 if part == 0 else 0, last_stable_offset=-1,
                           log_start_offset=0, records=b"".join(blobs)))
        if not any(p.records for p in parts):
            await asyncio.sleep(req.max_wait_ms / 1000)
        return FetchResponse(session_id=0, responses=[R(topic=TOPIC, partitions=parts)])

    async def main() -> None:
        async with FakeBroker({TOPIC: 2}, {1: handle}) as broker:  # noqa: SIM117
            async with AsyncConsumer(bootstrap_servers=broker.bootstrap,
                                     max_partition_fetch_bytes=100,
                                     fetch_max_wait_ms=3000) as c:
                tp1 = TopicPartition(TOPIC, 1)
                c.assign([TP0, tp1])
                c.seek(TP0, 0)
                c.seek(tp1, 0)
                offsets: list[int] = []
                loop = asyncio.get_running_loop()
                started = loop.time()
                for _ in range(500):
                    for recs in (await c.getmany(timeout=5.0, max_records=4)).values():
                        offsets.extend(r.offset for r in recs)
                    if len(offsets) >= 120:
                        break
                    await asyncio.sleep(0.003)  # a slow application: p0's buffer stays full
                took = loop.time() - started
        assert offsets == list(range(120))
        # Every fetch made before p0's last one listed p0; none waited out
        # fetch.max.wait.ms.
        last_p0 = max(i for i, (_, p0_offset) in enumerate(requests) if 0 <= p0_offset < 120)
        assert all(0 in asked for asked, _ in requests[:last_p0]), requests
        assert took < 2.5, requests

    asyncio.run(main())
