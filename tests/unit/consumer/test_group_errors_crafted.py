"""Coordinator error codes on FindCoordinator, JoinGroup and SyncGroup, against crafted answers.

The librdkafka mock cluster answers these APIs' injected errors with null in non-nullable
fields at the versions kontrakt uses (see ``tests/integration/test_consumer_faults.py``), so
the codes are served here by :class:`FakeBroker` with a minimal single-member group
coordinator: NOT_COORDINATOR (16), COORDINATOR_LOAD_IN_PROGRESS (14),
COORDINATOR_NOT_AVAILABLE (15) and REBALANCE_IN_PROGRESS (27) must be retried until the
member joins, and consumption must continue from the committed offsets.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from kontrakt._types import TopicPartition
from kontrakt.clients.consumer import AsyncConsumer
from kontrakt.protocol.messages import (
    FetchResponse,
    FindCoordinatorResponse,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    SyncGroupResponse,
)
from kontrakt.protocol.records import RecordBatchBuilder
from tests._crafted_broker import FakeBroker, ServedOffsets

TOPIC = "crafted-group"
TP0 = TopicPartition(TOPIC, 0)
RECORDS = 30
FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, SYNC_GROUP = 10, 11, 12, 14
NOT_COORDINATOR, LOAD_IN_PROGRESS, NOT_AVAILABLE, REBALANCING = 16, 14, 15, 27
# What kontrakt negotiates with this peer: classic group APIs at versions whose answers
# carry the fields filled in below (JoinGroup v5: no MEMBER_ID_REQUIRED round trip needed).
VERSIONS = {8: (0, 7), 9: (0, 7), 10: (0, 3), 11: (0, 5), 12: (0, 3), 13: (0, 2),
            14: (0, 3)}


class Coordinator(ServedOffsets):
    """A single-member group coordinator that fails the next requests of an API on demand."""

    records = RECORDS

    def __init__(self) -> None:
        self.port = 0
        self.errors: dict[int, list[int]] = {}
        self.generation = 0
        self.committed: dict[int, int] = {}
        self.log = RecordBatchBuilder()
        for i in range(RECORDS):
            self.log.append(1_700_000_000_000 + i, None, f"v{i}".encode())
        self.blob = self.log.build(base_offset=0)

    def _error(self, api_key: int) -> int:
        queue = self.errors.get(api_key)
        return queue.pop(0) if queue else 0

    def handlers(self) -> dict[int, Any]:
        return {1: self.fetch, 2: self.list_offsets, 8: self.commit, 9: self.offset_fetch,
                10: self.find, 11: self.join, 12: self.heartbeat, 13: self.leave,
                14: self.sync}

    def find(self, version: int, req: Any) -> Any:
        code = self._error(FIND_COORDINATOR)
        if code:
            return FindCoordinatorResponse(error_code=code, node_id=-1, host="", port=-1)
        return FindCoordinatorResponse(error_code=0, node_id=1, host="127.0.0.1", port=self.port)

    def join(self, version: int, req: Any) -> Any:
        code = self._error(JOIN_GROUP)
        if code:
            return JoinGroupResponse(error_code=code, generation_id=-1, protocol_name="",
                                     leader="", member_id=req.member_id, members=[])
        self.generation += 1
        member = req.member_id or "member-1"
        M = JoinGroupResponse.JoinGroupResponseMember
        return JoinGroupResponse(
            error_code=0, generation_id=self.generation, protocol_name=req.protocols[0].name,
            leader=member, member_id=member,
            members=[M(member_id=member, metadata=req.protocols[0].metadata)])

    def sync(self, version: int, req: Any) -> Any:
        code = self._error(SYNC_GROUP)
        if code:
            return SyncGroupResponse(error_code=code, assignment=b"")
        return SyncGroupResponse(error_code=0, assignment=req.assignments[0].assignment)

    def heartbeat(self, version: int, req: Any) -> Any:
        return HeartbeatResponse(error_code=self._error(HEARTBEAT))

    def leave(self, version: int, req: Any) -> Any:
        return LeaveGroupResponse(error_code=0)

    async def fetch(self, version: int, req: Any) -> Any:
        R = FetchResponse.FetchableTopicResponse
        offset = req.topics[0].partitions[0].fetch_offset
        if offset >= RECORDS:
            await asyncio.sleep(0.02)  # nothing new: a short long-poll
        return FetchResponse(responses=[R(topic=TOPIC, partitions=[R.PartitionData(
            partition_index=0, error_code=0, high_watermark=RECORDS, log_start_offset=0,
            records=self.blob if offset < RECORDS else b"")])])


def test_join_sync_and_find_coordinator_errors_are_retried() -> None:
    coordinator = Coordinator()
    coordinator.errors = {FIND_COORDINATOR: [LOAD_IN_PROGRESS, NOT_AVAILABLE],
                          JOIN_GROUP: [NOT_COORDINATOR, LOAD_IN_PROGRESS, REBALANCING],
                          SYNC_GROUP: [NOT_COORDINATOR, LOAD_IN_PROGRESS, REBALANCING]}

    async def main() -> None:
        async with FakeBroker({TOPIC: 1}, coordinator.handlers(),
                              versions=VERSIONS) as broker:
            coordinator.port = broker.port
            async with AsyncConsumer(bootstrap_servers=broker.bootstrap, group_id="g",
                                     auto_offset_reset="earliest", enable_auto_commit=False,
                                     heartbeat_interval_ms=50, fetch_max_wait_ms=20,
                                     retry_backoff_ms=10, retry_backoff_max_ms=50) as c:
                c.subscribe([TOPIC])
                seen: list[int] = []
                deadline = time.monotonic() + 10
                while len(seen) < RECORDS // 2:
                    assert time.monotonic() < deadline, f"stalled after {seen}"
                    for recs in (await c.getmany(timeout=0.1, max_records=5)).values():
                        seen.extend(r.offset for r in recs)
                await c.commit()
                first_generation = coordinator.generation
                # Mid-stream: the group rebalances, and the rejoin meets the errors again.
                coordinator.errors = {
                    HEARTBEAT: [REBALANCING],
                    JOIN_GROUP: [NOT_COORDINATOR, LOAD_IN_PROGRESS, REBALANCING],
                    SYNC_GROUP: [NOT_COORDINATOR, LOAD_IN_PROGRESS, REBALANCING]}
                def pending() -> bool:
                    return any(coordinator.errors.values())

                while (pending() or len(set(seen)) < RECORDS or not c.assignment()
                       or coordinator.committed.get(0) != RECORDS):
                    assert time.monotonic() < deadline, f"stalled after {seen}"
                    for recs in (await c.getmany(timeout=0.1, max_records=5)).values():
                        seen.extend(r.offset for r in recs)
                    if c.assignment():
                        await c.commit()
                assert coordinator.generation > first_generation
            assert set(seen) == set(range(RECORDS))  # nothing lost
            joins = [m for k, _v, m in broker.requests if k == JOIN_GROUP]
            syncs = [m for k, _v, m in broker.requests if k == SYNC_GROUP]
            # Each phase: three failed joins, then three syncs failing (each followed by a
            # new join), then a sync that succeeds.
            assert len(joins) >= 2 * (3 + 3 + 1) and len(syncs) >= 2 * (3 + 1)
            finds = [m for k, _v, m in broker.requests if k == FIND_COORDINATOR]
            assert len(finds) >= 3  # two failures, then found (and again after moves)

    asyncio.run(main())
