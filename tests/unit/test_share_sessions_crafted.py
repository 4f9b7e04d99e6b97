# Nested struct classes are set on the message classes at run time.
# mypy: disable-error-code="attr-defined"
"""The share consumer's requests, checked field by field against a crafted broker: share
session epochs, where acknowledgements go and how they are written, acquired ranges and
gaps. The mock cluster does not check session epochs (a client whose epoch never moved past
1 passed every mock test), so they are checked here."""

from __future__ import annotations

import asyncio
from typing import Any

from kontrakt.clients.share import AcknowledgeType, AsyncShareConsumer
from kontrakt.protocol.messages import (
    ShareAcknowledgeResponse,
    ShareFetchResponse,
    ShareGroupHeartbeatResponse,
)
from kontrakt.protocol.records import RecordBatchBuilder
from tests._crafted_broker import CraftedBroker

_A = ShareGroupHeartbeatResponse.Assignment
_TOPIC = ShareFetchResponse.ShareFetchableTopicResponse
_PART = _TOPIC.PartitionData


def _batch(n: int) -> bytes:
    b = RecordBatchBuilder()
    for i in range(n):
        b.append(0, None, str(i).encode())
    return b.build(base_offset=0)


def test_session_epochs_and_piggybacked_acknowledgements() -> None:
    fetches: list[Any] = []
    acks: list[Any] = []
    beats: list[Any] = []

    def run() -> list[tuple[int, int | None]]:
        broker: CraftedBroker

        def heartbeat(ver: int, req: Any) -> Any:
            beats.append(req)
            tid = broker.topic_ids["t"]
            return ShareGroupHeartbeatResponse(
                member_id=req.member_id, member_epoch=0 if req.member_epoch < 0 else 3,
                heartbeat_interval_ms=60_000, assignment=_A(topic_partitions=[
                    _A.TopicPartitions(topic_id=tid, partitions=[0])]))

        def fetch(ver: int, req: Any) -> Any:
            fetches.append(req)
            tid = broker.topic_ids["t"]
            if len(fetches) > 1:
                return ShareFetchResponse(responses=[_TOPIC(topic_id=tid, partitions=[
                    _PART(partition_index=0, records=None)])])
            # Offsets 0-9 come back whole; this member acquired 0-3 (first delivery) and
            # 6-10 (second delivery; offset 10 holds no record: a gap), not 4-5.
            return ShareFetchResponse(acquisition_lock_timeout_ms=30_000, responses=[_TOPIC(
                topic_id=tid, partitions=[_PART(
                    partition_index=0, records=_batch(10), acquired_records=[
                        _PART.AcquiredRecords(first_offset=0, last_offset=3,
                                              delivery_count=1),
                        _PART.AcquiredRecords(first_offset=6, last_offset=10,
                                              delivery_count=2)])])])

        def acknowledge(ver: int, req: Any) -> Any:
            acks.append(req)
            return ShareAcknowledgeResponse()

        broker = CraftedBroker({76: heartbeat, 78: fetch, 79: acknowledge}, topics={"t": 1})

        async def main() -> list[tuple[int, int | None]]:
            async with broker, AsyncShareConsumer(
                    bootstrap_servers=broker.bootstrap, group_id="g",
                    share_acknowledgement_mode="explicit", fetch_max_wait_ms=10) as consumer:
                consumer.subscribe(["t"])
                got = await consumer.poll(5)
                out = [(r.offset, consumer.delivery_count(r)) for r in got]
                for r in got:
                    kind = {2: AcknowledgeType.RELEASE, 7: AcknowledgeType.REJECT}.get(
                        r.offset, AcknowledgeType.ACCEPT)
                    consumer.acknowledge(r, kind)
                assert await consumer.poll(0.05) == []
                assert await consumer.poll(0.05) == []
                assert await consumer.commit_sync(5) == {
                    next(iter(consumer.assignment())): None}
            return out
        return asyncio.run(main())

    delivered = run()
    assert delivered == [(0, 1), (1, 1), (2, 1), (3, 1), (6, 2), (7, 2), (8, 2), (9, 2)]
    epochs = [f.share_session_epoch for f in fetches]
    assert epochs == list(range(len(epochs))) and len(epochs) >= 3
    first, second = fetches[0], fetches[1]
    assert (first.group_id, first.member_id) == ("g", beats[0].member_id)
    [topic] = first.topics
    [part] = topic.partitions
    assert part.acknowledgement_batches == []  # a session-opening request carries none
    [topic] = second.topics
    [part] = topic.partitions
    assert [(b.first_offset, b.last_offset, b.acknowledge_types)
            for b in part.acknowledgement_batches] == [
        (0, 3, [1, 1, 2, 1]), (6, 10, [1, 3, 1, 1, 0])]
    # Later fetches name no partition: the session has it.
    assert all(f.topics == [] for f in fetches[2:])
    # close(): the session ends with ShareAcknowledge epoch -1, then the member leaves.
    assert [a.share_session_epoch for a in acks] == [-1]
    assert [b.member_epoch for b in beats][-1] == -1
