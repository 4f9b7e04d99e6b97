"""Consumer logic against crafted Fetch / ListOffsets responses.

Aborted-transaction filtering and timestamp lookups are not implemented faithfully by
either test broker (TEST-BROKERS.md), so they are tested here against :class:`FakeBroker`,
which returns record sets built with ``kontrakt.protocol.records`` (transactional batches of
interleaved producers, commit/abort control batches) and hand-written ListOffsets answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from kontrakt._types import TopicPartition
from kontrakt.clients.consumer import AsyncConsumer, Consumer, OffsetAndTimestamp
from kontrakt.errors import OffsetOutOfRangeResetError
from kontrakt.protocol.messages import FetchResponse, ListOffsetsResponse
from kontrakt.protocol.records import ControlRecordType, RecordBatchBuilder, build_control_batch
from tests._crafted_broker import FakeBroker

TOPIC = "crafted"
TP0 = TopicPartition(TOPIC, 0)
A, B = 1000, 2000  # producer ids


def _batch(base: int, n: int, *, pid: int = -1, txn: bool = False, tag: str = "",
           epoch: int = 0) -> bytes:
    b = RecordBatchBuilder(base_offset=base, producer_id=pid, producer_epoch=0 if txn else -1,
                           base_sequence=0 if pid >= 0 else -1, is_transactional=txn,
                           partition_leader_epoch=epoch)
    for i in range(n):
        b.append(1_700_000_000_000 + base + i, f"k{base + i}".encode(),
                 f"{tag}{base + i}".encode(), [("h", b"x")])
    return b.build()


def _marker(kind: ControlRecordType, pid: int, offset: int) -> bytes:
    return build_control_batch(kind, producer_id=pid, producer_epoch=0, base_offset=offset,
                               timestamp=1_700_000_000_000)


# Offsets: 0-2 A (aborted), 3-5 B (committed), 6-7 plain, 8 abort(A), 9 commit(B),
# 10-11 A again (aborted), 12 abort(A), 13-14 plain.
LOG = b"".join([
    _batch(0, 3, pid=A, txn=True, tag="a"), _batch(3, 3, pid=B, txn=True, tag="b"),
    _batch(6, 2, tag="p"), _marker(ControlRecordType.ABORT, A, 8),
    _marker(ControlRecordType.COMMIT, B, 9), _batch(10, 2, pid=A, txn=True, tag="a"),
    _marker(ControlRecordType.ABORT, A, 12), _batch(13, 2, tag="p"),
])
ABORTED = [(A, 0), (A, 10)]
END = 15


def _fetch_handler(log: bytes, aborted: list[tuple[int, int]], end: int,
                   calls: list[Any] | None = None) -> Callable[[int, Any], Any]:
    """Serve the whole crafted log once, then empty responses."""
    served: set[int] = set()

    async def handle(version: int, req: Any) -> Any:
        if calls is not None:
            calls.append(req)
        R = FetchResponse.FetchableTopicResponse
        P = R.PartitionData
        parts = []
        for t in req.topics:
            for p in t.partitions:
                first = p.partition not in served and p.fetch_offset < end
                if not first:
                    await asyncio.sleep(min(req.max_wait_ms, 50) / 1000)
                served.add(p.partition)
                parts.append(P(
                    partition_index=p.partition, error_code=0, high_watermark=end,
                    last_stable_offset=end, log_start_offset=0,
                    aborted_transactions=[P.AbortedTransaction(producer_id=pid,
                                                               first_offset=off)
                                          for pid, off in aborted]
                    if req.isolation_level == 1 else None,
                    records=log if first else b""))
        return FetchResponse(session_id=0, responses=[R(topic=TOPIC, partitions=parts)])
    return handle


async def _drain(consumer: AsyncConsumer, want_position: int) -> list[Any]:
    out: list[Any] = []
    for _ in range(100):
        got = await consumer.getmany(timeout=0.2)
        for recs in got.values():
            out.extend(recs)
        if await consumer.position(TP0) >= want_position:
            break
    return out


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_aborted_transactions_are_filtered(isolation: str) -> None:
    async def main() -> None:
        handlers = {1: _fetch_handler(LOG, ABORTED, END)}
        async with FakeBroker({TOPIC: 1}, handlers) as broker:  # noqa: SIM117
            async with AsyncConsumer(bootstrap_servers=broker.bootstrap,
                                     isolation_level=isolation) as c:
                c.assign([TP0])
                c.seek(TP0, 0)
                recs = await _drain(c, END)
                assert await c.position(TP0) == END
        offsets = [r.offset for r in recs]
        if isolation == "read_committed":
            assert offsets == [3, 4, 5, 6, 7, 13, 14]
        else:
            # Control batches are never surfaced, even when reading uncommitted.
            assert offsets == [0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 13, 14]
        assert [r.value for r in recs][:3] == (
            [b"b3", b"b4", b"b5"] if isolation == "read_committed" else [b"a0", b"a1", b"a2"])
        assert all(r.headers == [("h", b"x")] for r in recs)
        assert broker.fetches()[0].isolation_level == (1 if isolation == "read_committed"
                                                       else 0)

    asyncio.run(main())


def test_abort_marker_ends_only_its_own_producer() -> None:
    # B's records interleave with an aborted transaction of A; B's commit arrives after A's
    # abort marker. Only A's records disappear.
    log = b"".join([
        _batch(0, 2, pid=A, txn=True, tag="a"), _batch(2, 2, pid=B, txn=True, tag="b"),
        _batch(4, 1, pid=A, txn=True, tag="a"), _marker(ControlRecordType.ABORT, A, 5),
        _batch(6, 1, pid=B, txn=True, tag="b"), _marker(ControlRecordType.COMMIT, B, 7),
    ])

    async def main() -> None:
        async with FakeBroker({TOPIC: 1}, {1: _fetch_handler(log, [(A, 0)], 8)}) as broker:  # noqa: SIM117
            async with AsyncConsumer(bootstrap_servers=broker.bootstrap,
                                     isolation_level="read_committed") as c:
                c.assign([TP0])
                c.seek(TP0, 0)
                recs = await _drain(c, 8)
        assert [(r.offset, r.value) for r in recs] == [(2, b"b2"), (3, b"b3"), (6, b"b6")]

    asyncio.run(main())


def test_fetch_from_the_middle_of_a_batch_skips_earlier_records() -> None:
    async def main() -> None:
        async with FakeBroker({TOPIC: 1}, {1: _fetch_handler(LOG, ABORTED, END)}) as broker:  # noqa: SIM117
            async with AsyncConsumer(bootstrap_servers=broker.bootstrap) as c:
                c.assign([TP0])
                c.seek(TP0, 4)
                recs = await _drain(c, END)
        assert [r.offset for r in recs] == [4, 5, 6, 7, 10, 11, 13, 14]

    asyncio.run(main())


def _list_offsets_handler(answers: dict[int, tuple[int, int]]) -> Callable[[int, Any], Any]:
    """timestamp asked -> (offset, timestamp) answered; unknown times answer -1."""
    def handle(version: int, req: Any) -> Any:
        T = ListOffsetsResponse.ListOffsetsTopicResponse
        P = T.ListOffsetsPartitionResponse
        return ListOffsetsResponse(topics=[T(name=t.name, partitions=[
            P(partition_index=p.partition_index, error_code=0,
              offset=answers.get(p.timestamp, (-1, -1))[0],
              timestamp=answers.get(p.timestamp, (-1, -1))[1], leader_epoch=3)
            for p in t.partitions]) for t in req.topics])
    return handle


def test_offsets_for_times_and_edges() -> None:
    answers = {1000: (7, 1005), -2: (2, -1), -1: (42, -1)}

    async def main() -> None:
        async with FakeBroker({TOPIC: 2}, {2: _list_offsets_handler(answers)}) as broker:
            async with AsyncConsumer(bootstrap_servers=broker.bootstrap) as c:
                tp1 = TopicPartition(TOPIC, 1)
                got = await c.offsets_for_times({TP0: 1000, tp1: 5000})
                assert got == {TP0: OffsetAndTimestamp(7, 1005, 3), tp1: None}
                assert await c.beginning_offsets([TP0, tp1]) == {TP0: 2, tp1: 2}
                assert await c.end_offsets([TP0]) == {TP0: 42}
                with pytest.raises(ValueError):
                    await c.offsets_for_times({TP0: -5})
            asked = [m for k, _v, m in broker.requests if k == 2]
            assert asked[0].topics[0].partitions[0].timestamp == 1000
            assert asked[0].replica_id == -1

    asyncio.run(main())


def test_sync_consumer_offsets_for_times() -> None:
    answers = {1000: (7, 1005)}

    async def serve(ready: asyncio.Future[FakeBroker], stop: asyncio.Event) -> None:
        async with FakeBroker({TOPIC: 1}, {2: _list_offsets_handler(answers)}) as broker:
            ready.set_result(broker)
            await stop.wait()

    import threading

    box: dict[str, Any] = {}
    started = threading.Event()

    def run() -> None:
        async def main() -> None:
            loop = asyncio.get_running_loop()
            box["loop"] = loop
            box["stop"] = asyncio.Event()
            fut: asyncio.Future[FakeBroker] = loop.create_future()
            task = loop.create_task(serve(fut, box["stop"]))
            box["broker"] = await fut
            started.set()
            await task
        asyncio.run(main())

    th = threading.Thread(target=run, daemon=True)
    th.start()
    assert started.wait(10)
    try:
        with Consumer(bootstrap_servers=box["broker"].bootstrap) as c:
            assert c.offsets_for_times({TP0: 1000}) == {TP0: OffsetAndTimestamp(7, 1005, 3)}
    finally:
        box["loop"].call_soon_threadsafe(box["stop"].set)
        th.join(10)


def test_out_of_range_with_reset_none_raises_until_seek() -> None:
    calls: list[Any] = []

    def handle(version: int, req: Any) -> Any:
        calls.append(req)
        R = FetchResponse.FetchableTopicResponse
        P = R.PartitionData
        offset = req.topics[0].partitions[0].fetch_offset
        if offset >= 100:
            return FetchResponse(responses=[R(topic=TOPIC, partitions=[P(
                partition_index=0, error_code=1, high_watermark=3)])])
        return FetchResponse(responses=[R(topic=TOPIC, partitions=[P(
            partition_index=0, error_code=0, high_watermark=3,
            records=_batch(0, 3) if offset < 3 else b"")])])

    async def main() -> None:
        async with FakeBroker({TOPIC: 1}, {1: handle}) as broker:  # noqa: SIM117
            async with AsyncConsumer(bootstrap_servers=broker.bootstrap,
                                     auto_offset_reset="none", fetch_max_wait_ms=10) as c:
                c.assign([TP0])
                with pytest.raises(OffsetOutOfRangeResetError):
                    await c.getmany(timeout=2)  # no position and no reset allowed
                c.seek(TP0, 100)
                with pytest.raises(OffsetOutOfRangeResetError):
                    for _ in range(50):
                        await c.getmany(timeout=0.1)
                with pytest.raises(OffsetOutOfRangeResetError):
                    await c.getmany(timeout=0.1)  # still raised: no seek yet
                c.seek(TP0, 1)
                recs = await _drain(c, 3)
                assert [r.offset for r in recs] == [1, 2]

    asyncio.run(main())


def test_diverging_epoch_truncates_position() -> None:
    state = {"n": 0}

    def handle(version: int, req: Any) -> Any:
        R = FetchResponse.FetchableTopicResponse
        P = R.PartitionData
        p = req.topics[0].partitions[0]
        state["n"] += 1
        if p.fetch_offset == 10:
            return FetchResponse(responses=[R(topic=TOPIC, partitions=[P(
                partition_index=0, error_code=0, high_watermark=8,
                diverging_epoch=P.EpochEndOffset(epoch=1, end_offset=6))])])
        records = _batch(p.fetch_offset, 8 - p.fetch_offset, epoch=2) if p.fetch_offset < 8 \
            else b""
        return FetchResponse(responses=[R(topic=TOPIC, partitions=[P(
            partition_index=0, error_code=0, high_watermark=8, records=records)])])

    async def main() -> None:
        async with FakeBroker({TOPIC: 1}, {1: handle}) as broker:  # noqa: SIM117
            async with AsyncConsumer(bootstrap_servers=broker.bootstrap,
                                     fetch_max_wait_ms=10) as c:
                c.assign([TP0])
                c.seek(TP0, 10)
                recs = await _drain(c, 8)
                assert [r.offset for r in recs] == [6, 7]
                assert all(r.leader_epoch == 2 for r in recs)

    asyncio.run(main())
