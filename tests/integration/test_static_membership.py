"""Static group membership (KIP-345, ``group.instance.id``) on Tansu.

What is tested here, on Tansu with session.timeout.ms 2000 (see TEST-BROKERS.md):

* a static member that closes does not send LeaveGroup: DescribeGroups still lists it (with
  its instance id) after close, and the group stays Stable;
* restarting it causes no rebalance: the new consumer gets the same partitions in the same
  generation, resumes from the committed offsets, and no other rebalance happens while it
  runs on for 1.5 session timeouts.

Tansu's static membership is slow, not wrong, for one member: it holds the JoinGroup and then
the SyncGroup of a static member for ~3 s each (session.timeout.ms 2000), on the first join
and on the rejoin alike, so a restart takes ~6 s, longer than the session timeout; it still
answers with the old generation and even the old member id (Kafka would issue a new member
id), and never sets JoinGroup v9's skip_assignment, so the static leader recomputes the
same assignment. The test therefore does not time the rejoin against the session timeout.

What is NOT tested on a broker, and why (measured 2026 with Tansu 0.6.0, confluent-kafka
2.16.1 as the oracle, session.timeout.ms 2000, heartbeat.interval.ms 100, 4 partitions,
range assignor, 15-30 s runs):

* Tansu cannot keep a group with two or more members stable when any of them is static.
  Two static confluent-kafka members: generation 0 completes (JoinGroup held 3 s, SyncGroup
  gives each two partitions), then the first heartbeats get REBALANCE_IN_PROGRESS (one member)
  and UNKNOWN_MEMBER_ID (the other: Tansu drops the static leader's member id right after
  SyncGroup); the next rounds end in SyncGroup REBALANCE_IN_PROGRESS, and partitions are
  assigned and revoked again every ~6 s for as long as the group runs. One static plus one
  dynamic confluent-kafka member: the static one never gets partitions, the dynamic one is
  assigned and revoked every ~3 s. Two dynamic members are stable (one assignment at ~1 s).
  kontrakt members show exactly the same pattern in all three set-ups, so it is the broker.
  Hence "the other members keep their partitions and generation while a static member
  restarts" cannot be shown on Tansu; it is checked here with a single member.
* The librdkafka mock cluster does not implement static membership either: a static
  confluent-kafka member that restarts gets a new member id, a JoinGroup naming the old
  (gone) member as leader and SyncGroup REBALANCE_IN_PROGRESS, with no partitions for 8 s;
  kontrakt's follower SyncGroup there gets a reply whose (non-nullable) assignment is null.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kontrakt._types import TopicPartition
from kontrakt.clients import AsyncKafkaClient
from kontrakt.clients.consumer import AsyncConsumer
from kontrakt.protocol.messages import DescribeGroupsRequest
from kontrakt.protocol.records import RecordBatchBuilder
from kontrakt.testing import TansuBroker
from tests.integration.raw_ops import produce

pytestmark = [pytest.mark.integration, pytest.mark.also_on_cluster]

SESSION_MS = 2000


class Events:
    """Rebalance listener recording every callback."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, frozenset[TopicPartition]]] = []

    def on_partitions_assigned(self, parts: set[TopicPartition]) -> None:
        self.calls.append(("assigned", frozenset(parts)))

    def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
        self.calls.append(("revoked", frozenset(parts)))

    def on_partitions_lost(self, parts: set[TopicPartition]) -> None:
        self.calls.append(("lost", frozenset(parts)))


async def _describe(bootstrap: str, group: str) -> Any:
    async with AsyncKafkaClient(bootstrap_servers=bootstrap) as client:
        node = await client.coordinator(group, "group")
        resp = await client.request(DescribeGroupsRequest(groups=[group]), node=node)
        return resp.groups[0]


async def _until_assigned(consumer: AsyncConsumer, deadline: float) -> list[Any]:
    got: list[Any] = []
    while time.monotonic() < deadline and not consumer.assignment():
        for recs in (await consumer.getmany(timeout=0.05)).values():
            got.extend(recs)
    return got


def test_static_restart_within_session_timeout_keeps_generation_and_partitions(
        tansu_broker: TansuBroker, topic_name: str) -> None:
    tansu_broker.create_topic(topic_name, 4)
    bs = tansu_broker.bootstrap_servers
    group = f"g-{topic_name}"

    async def main() -> None:
        async with AsyncKafkaClient(bootstrap_servers=bs) as client:
            for p in range(4):
                b = RecordBatchBuilder()
                for i in range(5):
                    b.append(None, None, f"{p}-{i}".encode())
                assert (await produce(client, topic_name, p, b.build())).error_code == 0
        cfg = dict(bootstrap_servers=bs, group_id=group, group_instance_id="static-a",
                   session_timeout_ms=SESSION_MS, heartbeat_interval_ms=100,
                   auto_offset_reset="earliest", enable_auto_commit=False)
        deadline = time.monotonic() + 30
        first_events = Events()
        a = AsyncConsumer(cfg)
        a.subscribe([topic_name], listener=first_events)
        await _until_assigned(a, deadline)
        parts, generation = a.assignment(), a._coordinator.generation
        member_id = a._coordinator.member_id
        assert len(parts) == 4 and generation >= 0
        await a.commit({tp: 2 for tp in parts})
        await a.close()

        # No LeaveGroup: the coordinator still holds the static member (Tansu's
        # DescribeGroups leaves group_instance_id empty, so it is found by member id).
        described = await _describe(bs, group)
        assert described.error_code == 0
        assert [m.member_id for m in described.members] == [member_id], described
        assert described.group_state.lower() == "stable", described

        events = Events()
        a2 = AsyncConsumer(cfg)
        a2.subscribe([topic_name], listener=events)
        records = await _until_assigned(a2, deadline)
        assert a2.assignment() == parts
        assert a2._coordinator.generation == generation, "the group rebalanced"
        # It resumes from the committed offsets, and nothing moves while it runs on.
        stay = time.monotonic() + SESSION_MS / 1000 * 1.5
        while time.monotonic() < stay:
            for recs in (await a2.getmany(timeout=0.05)).values():
                records.extend(recs)
        assert sorted((r.partition, r.offset) for r in records) == [
            (p, o) for p in range(4) for o in range(2, 5)]
        assert a2._coordinator.generation == generation
        assert events.calls == [("assigned", frozenset(parts))], events.calls
        assert a2._coordinator.rebalances == 1
        await a2.close()

    asyncio.run(main())
