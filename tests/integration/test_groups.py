"""Classic consumer groups on Tansu (session.timeout.ms 1000-2000, see TEST-BROKERS.md).

Ownership is tracked through the rebalance listeners: a partition must never be owned by
two members at once, and with commit-on-revoke nothing is consumed twice.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kontrakt._types import TopicPartition
from kontrakt.clients import AsyncKafkaClient
from kontrakt.clients.consumer import AsyncConsumer
from kontrakt.protocol.records import RecordBatchBuilder
from kontrakt.testing import TansuBroker
from tests.integration.raw_ops import produce

pytestmark = [pytest.mark.integration, pytest.mark.also_on_cluster]


async def _fill(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    async with AsyncKafkaClient(bootstrap_servers=bootstrap) as client:
        for p in range(partitions):
            b = RecordBatchBuilder()
            for i in range(per_partition):
                b.append(None, None, f"{p}-{i}".encode())
            assert (await produce(client, topic, p, b.build())).error_code == 0


class Ownership:
    """Listener shared by the members: asserts single ownership at all times."""

    def __init__(self) -> None:
        self.owner: dict[TopicPartition, str] = {}
        self.violations: list[str] = []
        self.events: list[tuple[str, str, frozenset[TopicPartition]]] = []

    def listener(self, name: str) -> Any:
        outer = self

        class L:
            def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
                outer.events.append((name, "revoked", frozenset(parts)))
                for tp in parts:
                    if outer.owner.get(tp) == name:
                        del outer.owner[tp]

            async def on_partitions_assigned(self, parts: set[TopicPartition]) -> None:
                outer.events.append((name, "assigned", frozenset(parts)))
                for tp in parts:
                    other = outer.owner.get(tp)
                    if other is not None and other != name:
                        outer.violations.append(f"{tp} given to {name} while {other} owns it")
                    outer.owner[tp] = name

            def on_partitions_lost(self, parts: set[TopicPartition]) -> None:
                self.on_partitions_revoked(parts)

        return L()


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_three_members_then_one_leaves(tansu_broker: TansuBroker, topic_name: str,
                                       strategy: str) -> None:
    parts, per = 6, 100
    tansu_broker.create_topic(topic_name, parts)
    bs = tansu_broker.bootstrap_servers

    async def main() -> None:
        await _fill(bs, topic_name, parts, per)
        own = Ownership()
        # Tansu holds a JoinGroup for about half the session timeout: a member that has not
        # rejoined by then (a loaded machine stalling it) is left out of the generation and
        # its partitions go to another member before it learns it lost them, which Kafka
        # allows but this test counts as double ownership. 4 s gives a ~2 s window.
        cfg = dict(bootstrap_servers=bs, group_id=f"g-{topic_name}", session_timeout_ms=4000,
                   heartbeat_interval_ms=100, auto_offset_reset="earliest",
                   auto_commit_interval_ms=60_000, partition_assignment_strategy=strategy,
                   max_poll_records=7)
        members = [AsyncConsumer(cfg) for _ in range(3)]
        seen: list[tuple[int, int]] = []
        stop = asyncio.Event()

        async def run(i: int, c: AsyncConsumer) -> None:
            c.subscribe([topic_name], listener=own.listener(f"m{i}"))
            while not stop.is_set():
                got = await c.getmany(timeout=0.05)
                for recs in got.values():
                    seen.extend((r.partition, r.offset) for r in recs)
                await asyncio.sleep(0.01)  # slow consumers keep records flowing across rebalances

        tasks = [asyncio.create_task(run(i, c)) for i, c in enumerate(members)]
        deadline = time.monotonic() + 30
        # Wait until all three own partitions, then let the first one leave.
        while time.monotonic() < deadline and len(set(own.owner.values())) < 3:
            await asyncio.sleep(0.05)
        assert len(set(own.owner.values())) == 3, own.events
        tasks[0].cancel()
        await members[0].close()
        while time.monotonic() < deadline and (len(seen) < parts * per or set(
                own.owner.values()) != {"m1", "m2"} or len(own.owner) != parts):
            await asyncio.sleep(0.05)
        stop.set()
        await asyncio.gather(*tasks[1:])
        for c in members[1:]:
            await c.close()
        assert not own.violations, (own.violations, own.events)
        assert sorted(set(seen)) == [(p, i) for p in range(parts) for i in range(per)]
        assert len(seen) == len(set(seen)), "a record was consumed twice"
        assert set(own.owner.values()) == {"m1", "m2"} or not own.owner

    asyncio.run(main())


@pytest.mark.tansu_only(
    "Kafka (KIP-345) gives a static member that rejoins with an unknown member id a new "
    "member id and fences the old one, as Cluster does; Tansu keeps the old id, which "
    "this assertion expects (generation and assignment match on both)")
def test_static_member_restart_causes_no_rebalance(tansu_broker: TansuBroker,
                                                    topic_name: str) -> None:
    # One static member: Tansu keeps re-running rebalances for a group of two static
    # members (seen with kontrakt members; not investigated further), so the restart is
    # checked on a single member: it must come back in the same generation with the same
    # partitions, i.e. the coordinator did not rebalance.
    tansu_broker.create_topic(topic_name, 4)
    bs = tansu_broker.bootstrap_servers

    async def main() -> None:
        base = dict(bootstrap_servers=bs, group_id=f"g-{topic_name}", session_timeout_ms=2000,
                    heartbeat_interval_ms=100, auto_offset_reset="earliest")
        a = AsyncConsumer(base, group_instance_id="a")
        a.subscribe([topic_name])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not a.assignment():
            await a.getmany(timeout=0.05)
        parts, generation = a.assignment(), a._coordinator.generation
        member = a._coordinator.member_id
        assert len(parts) == 4
        await a.close()  # a static member does not leave the group on close
        a2 = AsyncConsumer(base, group_instance_id="a")
        a2.subscribe([topic_name])
        while time.monotonic() < deadline and not a2.assignment():
            await a2.getmany(timeout=0.05)
        assert a2.assignment() == parts
        assert a2._coordinator.generation == generation
        assert a2._coordinator.member_id == member
        await a2.close()

    asyncio.run(main())
