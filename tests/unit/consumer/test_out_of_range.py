"""OFFSET_OUT_OF_RANGE handling as in the Java client: the position is reset only when it
still equals the offset whose fetch was refused.

Against :class:`FakeBroker` (crafted Fetch / ListOffsets answers): neither test broker can
refuse one chosen fetch while serving the next (TEST-BROKERS.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from kontrakt._types import TopicPartition
from kontrakt.clients.consumer import AsyncConsumer
from kontrakt.protocol.messages import FetchResponse, ListOffsetsResponse
from kontrakt.protocol.records import RecordBatchBuilder
from tests._crafted_broker import FakeBroker

TOPIC = "oor"
TP0 = TopicPartition(TOPIC, 0)
OUT_OF_RANGE = 1


def _records(base: int, n: int) -> bytes:
    b = RecordBatchBuilder(base_offset=base)
    for i in range(n):
        b.append(1_700_000_000_000 + i, None, f"v{base + i}".encode())
    return b.build()


def _answer(error: int = 0, records: bytes = b"") -> Any:
    R = FetchResponse.FetchableTopicResponse
    return FetchResponse(responses=[R(topic=TOPIC, partitions=[R.PartitionData(
        partition_index=0, error_code=error, high_watermark=100, log_start_offset=0,
        records=records)])])


def _list_offsets(earliest: int) -> Callable[[int, Any], Any]:
    def handle(version: int, req: Any) -> Any:
        T = ListOffsetsResponse.ListOffsetsTopicResponse
        P = T.ListOffsetsPartitionResponse
        return ListOffsetsResponse(topics=[T(name=t.name, partitions=[
            P(partition_index=p.partition_index, error_code=0,
              offset=earliest if p.timestamp == -2 else 100, timestamp=-1, leader_epoch=0)
            for p in t.partitions]) for t in req.topics])
    return handle


async def _consume_until(c: AsyncConsumer, position: int) -> list[Any]:
    out: list[Any] = []
    for _ in range(100):
        for recs in (await c.getmany(timeout=0.1)).values():
            out.extend(recs)
        if await c.position(TP0) >= position:
            break
    return out


def _list_offsets_requests(broker: FakeBroker) -> list[Any]:
    return [m for k, _v, m in broker.requests if k == 2]


def test_out_of_range_behind_buffered_records_refetches_instead_of_resetting() -> None:
    # Fetch 0 -> records 0-9 (buffered, not yet consumed); fetch 10 -> OUT_OF_RANGE once,
    # then records 10-12. The refusal is for an offset past the position (0): the buffered
    # records must still come out, and offset 10 be fetched again rather than reset to the
    # earliest offset (which would replay 0-9).
    refused: list[int] = []

    async def fetch(version: int, req: Any) -> Any:
        offset = req.topics[0].partitions[0].fetch_offset
        if offset == 0:
            return _answer(records=_records(0, 10))
        if offset == 10 and not refused:
            refused.append(offset)
            return _answer(OUT_OF_RANGE)
        if offset == 10:
            return _answer(records=_records(10, 3))
        await asyncio.sleep(0.02)  # nothing new: a short long-poll
        return _answer()

    async def main() -> None:
        async with FakeBroker({TOPIC: 1}, {1: fetch, 2: _list_offsets(0)}) as broker:
            async with AsyncConsumer(bootstrap_servers=broker.bootstrap,
                                     auto_offset_reset="earliest", fetch_max_wait_ms=20) as c:
                c.assign([TP0])
                c.seek(TP0, 0)
                st = c._subs.state(TP0)
                for _ in range(300):  # until the refusal has been handled, one way or another
                    if st.out_of_range_at is not None or _list_offsets_requests(broker):
                        break
                    await asyncio.sleep(0.01)
                assert refused == [10]
                recs = await _consume_until(c, 13)
            assert [r.offset for r in recs] == list(range(13))
            assert [r.value for r in recs] == [f"v{i}".encode() for i in range(13)]
            assert _list_offsets_requests(broker) == []

    asyncio.run(main())


def test_out_of_range_at_the_position_resets() -> None:
    async def fetch(version: int, req: Any) -> Any:
        offset = req.topics[0].partitions[0].fetch_offset
        if offset == 50:
            return _answer(OUT_OF_RANGE)
        if offset == 5:
            return _answer(records=_records(5, 3))
        await asyncio.sleep(0.02)
        return _answer()

    async def main() -> None:
        async with FakeBroker({TOPIC: 1}, {1: fetch, 2: _list_offsets(5)}) as broker:
            async with AsyncConsumer(bootstrap_servers=broker.bootstrap,
                                     auto_offset_reset="earliest", fetch_max_wait_ms=20) as c:
                c.assign([TP0])
                c.seek(TP0, 50)
                recs = await _consume_until(c, 8)
            assert [r.offset for r in recs] == [5, 6, 7]
            asked = _list_offsets_requests(broker)
            assert [m.topics[0].partitions[0].timestamp for m in asked] == [-2]

    asyncio.run(main())


def test_out_of_range_answer_to_a_fetch_before_a_seek_is_ignored() -> None:
    release = asyncio.Event()
    seen: list[int] = []

    async def fetch(version: int, req: Any) -> Any:
        offset = req.topics[0].partitions[0].fetch_offset
        seen.append(offset)
        if offset == 50:
            await release.wait()  # answered only after the application sought elsewhere
            return _answer(OUT_OF_RANGE)
        if offset == 2:
            return _answer(records=_records(2, 3))
        await asyncio.sleep(0.02)
        return _answer()

    async def main() -> None:
        async with FakeBroker({TOPIC: 1}, {1: fetch, 2: _list_offsets(0)}) as broker:
            async with AsyncConsumer(bootstrap_servers=broker.bootstrap,
                                     auto_offset_reset="earliest", fetch_max_wait_ms=20) as c:
                c.assign([TP0])
                c.seek(TP0, 50)
                for _ in range(300):
                    if seen:
                        break
                    await asyncio.sleep(0.01)
                c.seek(TP0, 2)
                release.set()
                recs = await _consume_until(c, 5)
            assert [r.offset for r in recs] == [2, 3, 4]
            assert _list_offsets_requests(broker) == []

    asyncio.run(main())
