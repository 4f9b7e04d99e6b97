"""The consumer in a group against librdkafka's mock cluster, with faults mid-stream.

Single-member classic groups (the only kind the mock serves to non-librdkafka clients, see
TEST-BROKERS.md). Each scenario writes half of the records (raw Produce requests through
``AsyncKafkaClient.request()``), consumes them committing after every batch, injects a
fault, writes the other half, and then checks that

- consumption resumes and every record written is read (none lost; re-reading after a
  rebalance is allowed: at-least-once),
- the group's committed offsets, read back after every successful commit, never go
  backwards, and end at the log end of every partition,
- the fault really happened (request tracking shows the failed requests and the retries).

Where the mock is not faithful (TEST-BROKERS.md), the scenarios work around it:

- Its error answers to JoinGroup (v5, the highest it parses), SyncGroup (v3) and
  FindCoordinator carry null in non-nullable strings (protocol name, assignment, host);
  kontrakt's decoder rejects them, as Java's does. Those APIs get dropped connections here
  (``MockCluster.DISCONNECT``), and their error codes are tested against crafted answers in
  ``tests/unit/consumer/test_group_errors_crafted.py``.
- It rejects an OffsetCommit whose committed leader epoch differs from the partition's
  current one (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH); a Kafka broker stores the epoch
  without checking it. Scenarios that move leaders commit with the epoch unknown (-1).
- It holds the JoinGroup of a member that rejoins a stable group for session.timeout.ms
  minus one second (measured: 6000 -> 5 s, 2000 -> 1 s, 1500 -> 0.5 s), so the members
  here use 1500 ms to keep the rebalancing scenarios short.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kontrakt._types import OffsetAndMetadata, TopicPartition
from kontrakt.clients import AsyncKafkaClient
from kontrakt.clients.consumer import AsyncConsumer
from kontrakt.errors import CommitFailedError
from kontrakt.protocol.records import RecordBatchBuilder
from kontrakt.testing import MockCluster
from tests.integration.raw_ops import produce

pytestmark = pytest.mark.timeout(60)

PARTITIONS = 3
HALF = 60  # records per partition and half
FETCH, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 1, 8, 9, 10
JOIN_GROUP, HEARTBEAT, SYNC_GROUP = 11, 12, 14
NOT_LEADER_OR_FOLLOWER = 6
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR = 14, 15, 16
REBALANCE_IN_PROGRESS = 27
COORDINATOR_ERRORS = [NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, REBALANCE_IN_PROGRESS]

Fault = Callable[["Scenario"], Awaitable[None]]


async def _write(bootstrap: str, topic: str, first: int, count: int) -> None:
    """Records ``first .. first+count-1`` of every partition; values name them."""
    async with AsyncKafkaClient(bootstrap_servers=bootstrap, retry_backoff_ms=20) as client:
        for p in range(PARTITIONS):
            for start in range(first, first + count, 20):
                b = RecordBatchBuilder()
                for i in range(start, min(first + count, start + 20)):
                    b.append(None, None, f"{p}:{i}".encode())
                deadline = time.monotonic() + 15
                while True:  # a leader may just have moved: retry until written
                    part = await produce(client, topic, p, b.build())
                    if part is not None and part.error_code == 0:
                        break
                    assert time.monotonic() < deadline, f"cannot write to {topic}-{p}: {part}"
                    client.request_metadata_refresh()
                    await asyncio.sleep(0.05)


class Scenario:
    """One consumer, its bookkeeping and the checks."""

    def __init__(self, mc: MockCluster, topic: str, *, commit_epochs: bool = True) -> None:
        self.mc = mc
        self.commit_epochs = commit_epochs
        self.topic = topic
        self.group = f"g-{topic}"
        self.parts = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        self.seen: set[str] = set()
        self.committed: dict[TopicPartition, int] = {}
        self.failed_commits = 0
        self.consumer = AsyncConsumer(
            bootstrap_servers=mc.bootstrap_servers, group_id=self.group,
            auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=1500,
            heartbeat_interval_ms=100, fetch_max_wait_ms=50, retry_backoff_ms=20,
            retry_backoff_max_ms=200, reconnect_backoff_ms=20, reconnect_backoff_max_ms=200,
            request_timeout_ms=5000, rebalance_timeout_ms=1000)

    async def commit(self) -> bool:
        """Commit the positions; read the committed offsets back and check they only grow."""
        c = self.consumer
        try:
            if self.commit_epochs:
                await c.commit(timeout=3)
            else:
                await c.commit({tp: OffsetAndMetadata(await c.position(tp), "", -1)
                                for tp in c.assignment()}, timeout=3)
            now = await c.committed(self.parts, timeout=5)
        except CommitFailedError:
            # E.g. REBALANCE_IN_PROGRESS: as in the Java client the application is told and
            # commits again after its next poll.
            self.failed_commits += 1
            return False
        for tp, om in now.items():
            if om is None:
                continue
            before = self.committed.get(tp, -1)
            assert om.offset >= before, f"committed offset of {tp} went back {before} -> {om}"
            self.committed[tp] = om.offset
        return True

    async def consume_until(self, want: set[str], timeout: float = 20.0) -> None:
        """Poll and commit until every value in ``want`` was read and committed."""
        c = self.consumer
        deadline = time.monotonic() + timeout
        while True:
            got = await c.getmany(timeout=0.1)
            for recs in got.values():
                self.seen.update(r.value.decode() for r in recs)
            done = want <= self.seen
            if got or done:
                await self.commit()
            end = max(int(v.split(":")[1]) for v in want) + 1
            if done and all(self.committed.get(tp) == end for tp in self.parts):
                return
            missing = sorted(want - self.seen)
            assert time.monotonic() < deadline, (
                f"stalled: {len(missing)} records never read (first {missing[:5]}), "
                f"committed {self.committed}")

    async def run(self, fault: Fault, *, before_subscribe: Fault | None = None,
                  write_during_fault: bool = True, heal: Fault | None = None,
                  settle: Callable[[Scenario], bool] | None = None) -> None:
        bs = self.mc.bootstrap_servers
        await _write(bs, self.topic, 0, HALF)
        first = {f"{p}:{i}" for p in range(PARTITIONS) for i in range(HALF)}
        second = {f"{p}:{i}" for p in range(PARTITIONS) for i in range(HALF, 2 * HALF)}
        async with self.consumer as c:
            if before_subscribe is not None:
                await before_subscribe(self)
            c.subscribe([self.topic])
            await self.consume_until(first)
            await fault(self)
            if write_during_fault:
                await _write(bs, self.topic, HALF, HALF)
            if heal is not None:
                await self.poll_for(0.6)  # the fault lasts a while, the consumer polling on
                await heal(self)
            if not write_during_fault:
                await _write(bs, self.topic, HALF, HALF)
            await self.consume_until(first | second)
            if settle is not None:
                # Keep the member running until every injected fault has been met (e.g. a
                # heartbeat error arrives only on the next heartbeat), then check again.
                deadline = time.monotonic() + 15
                while not settle(self):
                    assert time.monotonic() < deadline, "the injected faults were not all met"
                    await self.poll_for(0.05)
                await self.consume_until(first | second)
        assert self.committed == {tp: 2 * HALF for tp in self.parts}

    async def poll_for(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for recs in (await self.consumer.getmany(timeout=0.05)).values():
                self.seen.update(r.value.decode() for r in recs)

    def requests(self, api_key: int) -> list[Any]:
        return [r for r in self.mc.get_requests() if r.api_key == api_key]

    async def coordinator(self) -> int:
        return await self.consumer.client.coordinator(self.group, "group")


def _inject(api_key: int, codes: list[int]) -> Fault:
    async def fault(s: Scenario) -> None:
        s.mc.start_request_tracking()
        s.mc.push_request_errors(api_key, codes)
    return fault


def _rejoin_with(api_key: int, codes: list[int]) -> Fault:
    """Errors for ``api_key``, then a REBALANCE_IN_PROGRESS heartbeat that makes the member
    rejoin (JoinGroup, SyncGroup, OffsetFetch for the positions) into them."""
    async def fault(s: Scenario) -> None:
        s.mc.start_request_tracking()
        s.mc.push_request_errors(api_key, codes)
        s.mc.push_request_errors(HEARTBEAT, [REBALANCE_IN_PROGRESS])
    return fault


def _run(mc: MockCluster, topic: str, *, commit_epochs: bool = True, **kwargs: Any
         ) -> Scenario:
    mc.create_topic(topic, PARTITIONS, 3)
    s = Scenario(mc, topic, commit_epochs=commit_epochs)
    asyncio.run(s.run(**kwargs))
    return s


# --- injected error codes -------------------------------------------------------------------


@pytest.mark.parametrize("api_key", [OFFSET_COMMIT, HEARTBEAT])
def test_coordinator_errors_mid_stream(mock_cluster: MockCluster, topic_name: str,
                                       api_key: int) -> None:
    s = _run(mock_cluster, topic_name, fault=_inject(api_key, COORDINATOR_ERRORS),
             settle=lambda s: len(s.requests(api_key)) > len(COORDINATOR_ERRORS))
    # Every injected error was consumed by a request, and one more request followed.
    assert len(s.requests(api_key)) > len(COORDINATOR_ERRORS)
    if api_key == OFFSET_COMMIT:
        assert s.failed_commits == 1  # REBALANCE_IN_PROGRESS reaches the application
    else:
        # REBALANCE_IN_PROGRESS on a heartbeat made the member rejoin.
        assert s.requests(JOIN_GROUP)


@pytest.mark.parametrize("api_key", [JOIN_GROUP, SYNC_GROUP, FIND_COORDINATOR])
def test_join_sync_and_find_coordinator_connections_drop(mock_cluster: MockCluster,
                                                         topic_name: str, api_key: int) -> None:
    drops = [MockCluster.DISCONNECT, MockCluster.DISCONNECT]

    async def fault(s: Scenario) -> None:
        s.mc.start_request_tracking()
        s.mc.push_request_errors(api_key, drops)
        # NOT_COORDINATOR on a heartbeat: the member looks the coordinator up again and
        # rejoins (as after a coordinator move).
        s.mc.push_request_errors(HEARTBEAT, [NOT_COORDINATOR, REBALANCE_IN_PROGRESS])

    s = _run(mock_cluster, topic_name, before_subscribe=_inject(api_key, drops), fault=fault,
             settle=lambda s: len(s.requests(api_key)) > len(drops))
    assert len(s.requests(api_key)) > len(drops)


def test_offset_fetch_errors_do_not_reset_positions(mock_cluster: MockCluster,
                                                    topic_name: str) -> None:
    # Positions after the rejoin come from OffsetFetch; an error there must be retried, not
    # taken for "nothing committed" (which would reset to earliest and commit backwards).
    codes = [NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS]
    s = _run(mock_cluster, topic_name, before_subscribe=_inject(OFFSET_FETCH, codes),
             fault=_rejoin_with(OFFSET_FETCH, codes),
             settle=lambda s: len(s.requests(OFFSET_FETCH)) > len(codes))
    assert len(s.requests(OFFSET_FETCH)) > len(codes)
    assert len(s.requests(JOIN_GROUP)) >= 1


def test_fetch_errors(mock_cluster: MockCluster, topic_name: str) -> None:
    codes = [NOT_LEADER_OR_FOLLOWER, *COORDINATOR_ERRORS]
    s = _run(mock_cluster, topic_name, fault=_inject(FETCH, codes),
             settle=lambda s: len(s.requests(FETCH)) > len(codes))
    assert len(s.requests(FETCH)) > len(codes)  # and fetched again after them


# --- moves and outages ----------------------------------------------------------------------


def test_coordinator_moves(mock_cluster: MockCluster, topic_name: str) -> None:
    moved: dict[str, int] = {}

    async def fault(s: Scenario) -> None:
        old = await s.coordinator()
        moved["to"] = new = 1 + old % 3
        s.mc.start_request_tracking()
        s.mc.coordinator_set("group", s.group, new)

    s = _run(mock_cluster, topic_name, fault=fault)
    # The last commits and heartbeats went to the new coordinator.
    assert s.requests(OFFSET_COMMIT)[-1].broker_id == moved["to"]
    assert s.requests(HEARTBEAT)[-1].broker_id == moved["to"]


def test_leaders_move(mock_cluster: MockCluster, topic_name: str) -> None:
    async def fault(s: Scenario) -> None:
        meta = await s.consumer.client.refresh_metadata([s.topic])
        s.mc.start_request_tracking()
        for p, info in meta.topics[s.topic].partitions.items():
            s.mc.set_partition_leader(s.topic, p, 1 + info.leader % 3)

    s = _run(mock_cluster, topic_name, fault=fault, commit_epochs=False)
    leaders = s.consumer.client.cluster.topics[topic_name].partitions
    fetched_from = {r.broker_id for r in s.requests(FETCH)}
    assert {leaders[p].leader for p in range(PARTITIONS)} <= fetched_from


def test_broker_down_and_up(mock_cluster: MockCluster, topic_name: str) -> None:
    # The coordinator, which also leads partition 0, goes down for a while.
    down: dict[str, int] = {}

    async def before(s: Scenario) -> None:
        node = await s.coordinator()
        s.mc.set_partition_leader(s.topic, 0, node)
        down["node"] = node

    async def fault(s: Scenario) -> None:
        s.mc.start_request_tracking()
        s.mc.broker_down(down["node"])

    async def heal(s: Scenario) -> None:
        s.mc.broker_up(down["node"])

    s = _run(mock_cluster, topic_name, before_subscribe=before, fault=fault,
             write_during_fault=False, heal=heal, commit_epochs=False)
    assert any(r.broker_id == down["node"] and r.api_key == FETCH
               for r in s.mc.get_requests())


def test_committed_offsets_survive_a_new_consumer(mock_cluster: MockCluster,
                                                  topic_name: str) -> None:
    # After the faults above a restarted member must continue from the committed offsets:
    # nothing is read again when nothing new was written.
    s = _run(mock_cluster, topic_name, fault=_inject(HEARTBEAT, [REBALANCE_IN_PROGRESS]),
             settle=lambda s: len(s.requests(JOIN_GROUP)) >= 1)

    async def again() -> None:
        s2 = Scenario(mock_cluster, topic_name)
        async with s2.consumer as c:
            c.subscribe([topic_name])
            deadline = time.monotonic() + 10
            while not c.assignment() and time.monotonic() < deadline:
                await c.getmany(timeout=0.05)
            assert {tp: await c.position(tp) for tp in s2.parts} == {
                tp: 2 * HALF for tp in s2.parts}
            assert await c.getmany(timeout=0.2) == {}

    asyncio.run(again())
    assert s.requests(JOIN_GROUP)  # the first member did rejoin mid-stream


