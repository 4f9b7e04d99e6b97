"""KIP-848: a commit refused with STALE_MEMBER_EPOCH goes again with the member's new epoch.

A real coordinator refuses a commit with STALE_MEMBER_EPOCH when it has moved the member to
a newer epoch that the member has not heard of yet (the heartbeat answer that carries it is
still to come). The librdkafka mock only moves a member's epoch in the heartbeat answer
itself, so it never gets there; this crafted single-member coordinator (on
:class:`FakeBroker`) moves the epoch on demand and refuses commits that carry any other.
Heartbeats are 5 s apart: a commit that succeeds well within that proves the member sent a
heartbeat for it rather than waiting for the next one.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from kontrakt._types import TopicPartition
from kontrakt.clients.consumer import AsyncConsumer
from kontrakt.protocol.messages import ConsumerGroupHeartbeatResponse, OffsetCommitResponse
from tests._crafted_broker import FakeBroker
from tests.unit.consumer.test_group_errors_crafted import RECORDS, TOPIC
from tests.unit.consumer.test_group_errors_crafted import Coordinator as ClassicCoordinator

TP0 = TopicPartition(TOPIC, 0)
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, CONSUMER_GROUP_HEARTBEAT = 8, 9, 10, 68
STALE_MEMBER_EPOCH = 113
VERSIONS = {OFFSET_COMMIT: (0, 9), OFFSET_FETCH: (0, 7), FIND_COORDINATOR: (0, 3),
            CONSUMER_GROUP_HEARTBEAT: (0, 1)}


class Coordinator(ClassicCoordinator):
    """One KIP-848 member, one partition; commits must carry the member's current epoch.
    Fetch, ListOffsets, OffsetFetch and FindCoordinator are the classic crafted ones."""

    def __init__(self) -> None:
        super().__init__()
        self.topic_id: Any = None
        self.epoch = 0
        self.heartbeats = 0
        self.commits: list[int] = []  # the member epoch of each commit

    def handlers(self) -> dict[int, Any]:
        return {**super().handlers(), OFFSET_COMMIT: self.epoch_commit,
                CONSUMER_GROUP_HEARTBEAT: self.consumer_heartbeat}

    def consumer_heartbeat(self, version: int, req: Any) -> Any:
        self.heartbeats += 1
        if req.member_epoch < 0:  # leaving
            return ConsumerGroupHeartbeatResponse(error_code=0, member_id=req.member_id,
                                                  member_epoch=req.member_epoch,
                                                  heartbeat_interval_ms=5000)
        if self.epoch == 0:
            self.epoch = 1
        A = ConsumerGroupHeartbeatResponse.Assignment
        return ConsumerGroupHeartbeatResponse(
            error_code=0, member_id=req.member_id, member_epoch=self.epoch,
            heartbeat_interval_ms=5000,
            assignment=A(topic_partitions=[A.TopicPartitions(topic_id=self.topic_id,
                                                             partitions=[0])]))

    def epoch_commit(self, version: int, req: Any) -> Any:
        self.commits.append(req.generation_id_or_member_epoch)
        if req.generation_id_or_member_epoch != self.epoch:
            self.errors[OFFSET_COMMIT] = [STALE_MEMBER_EPOCH]
        return self.commit(version, req)

    def commit(self, version: int, req: Any) -> Any:
        code = self._error(OFFSET_COMMIT)
        if not code:
            return super().commit(version, req)
        T = OffsetCommitResponse.OffsetCommitResponseTopic
        return OffsetCommitResponse(topics=[T(name=t.name, partitions=[
            T.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
            for p in t.partitions]) for t in req.topics])


def test_stale_member_epoch_commit_goes_again_with_the_new_epoch() -> None:
    coordinator = Coordinator()

    async def main() -> None:
        async with FakeBroker({TOPIC: 1}, coordinator.handlers(), versions=VERSIONS) as broker:
            coordinator.port = broker.port
            coordinator.topic_id = broker.topic_ids[TOPIC]
            async with AsyncConsumer(bootstrap_servers=broker.bootstrap, group_id="g",
                                     group_protocol="consumer", auto_offset_reset="earliest",
                                     enable_auto_commit=False, fetch_max_wait_ms=20,
                                     retry_backoff_ms=10, retry_backoff_max_ms=50) as c:
                c.subscribe([TOPIC])
                seen: list[int] = []
                deadline = time.monotonic() + 10
                while len(seen) < RECORDS:
                    assert time.monotonic() < deadline, f"stalled after {seen}"
                    for recs in (await c.getmany(timeout=0.1)).values():
                        seen.extend(r.offset for r in recs)
                assert seen == list(range(RECORDS))
                await c.commit(timeout=3)
                assert coordinator.commits == [1] and coordinator.committed[0] == RECORDS
                # The coordinator moves the member on; the member has not heard yet.
                coordinator.epoch = 2
                heartbeats = coordinator.heartbeats
                started = time.monotonic()
                await c.commit({TP0: RECORDS - 1}, timeout=3)
                took = time.monotonic() - started
                assert coordinator.commits == [1, 1, 2]  # refused, then with the new epoch
                assert coordinator.committed[0] == RECORDS - 1
                assert coordinator.heartbeats > heartbeats
                assert took < 1.0, f"commit took {took:.2f} s (heartbeats are 5 s apart)"

    asyncio.run(main())
