"""KIP-848 consumer groups (``group.protocol=consumer``) on the librdkafka mock cluster.

Which broker: Tansu 0.6.0 does not offer ConsumerGroupHeartbeat (API 68) in ApiVersions (it
lists ConsumerGroupDescribe only); librdkafka 2.16's mock cluster offers ConsumerGroupHeartbeat
v1 with a server-side assignor, target assignments, member epochs and injected errors
(confluent-kafka with group.protocol=consumer runs on it: two members split 4 partitions 2/2
after one revocation, and the survivor takes all back). So the protocol runs against the
mock, and Tansu shows the fail-fast path. The mock's heartbeat interval is lowered to 200 ms
with ``rd_kafka_mock_set_group_consumer_heartbeat_interval_ms`` to keep the tests short.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kontrakt._types import TopicPartition
from kontrakt.clients import AsyncKafkaClient
from kontrakt.clients.consumer import AsyncConsumer, Consumer
from kontrakt.errors import UnsupportedVersionError
from kontrakt.protocol.messages import OffsetCommitRequest
from kontrakt.protocol.records import RecordBatchBuilder
from kontrakt.testing import MockCluster, TansuBroker
from tests.integration.raw_ops import produce

pytestmark = pytest.mark.integration

FENCED_MEMBER_EPOCH = 110
HEARTBEAT_API = 68


def _fast_heartbeats(cluster: MockCluster, ms: int = 200) -> None:
    cluster.group_consumer_heartbeat_interval_ms(ms)


async def _fill(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    async with AsyncKafkaClient(bootstrap_servers=bootstrap) as client:
        for p in range(partitions):
            b = RecordBatchBuilder()
            for i in range(per_partition):
                b.append(None, None, f"{p}-{i}".encode())
            assert (await produce(client, topic, p, b.build())).error_code == 0


class Ownership:
    """Listener shared by the members: records callbacks, checks single ownership."""

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
                outer.events.append((name, "lost", frozenset(parts)))
                for tp in parts:
                    if outer.owner.get(tp) == name:
                        del outer.owner[tp]

        return L()


def _config(bootstrap: str, group: str) -> dict[str, Any]:
    return dict(bootstrap_servers=bootstrap, group_id=group, group_protocol="consumer",
                auto_offset_reset="earliest", auto_commit_interval_ms=60_000,
                max_poll_records=5)


def test_two_members_split_then_one_leaves(mock_cluster: MockCluster, topic_name: str) -> None:
    parts, per = 4, 60
    mock_cluster.create_topic(topic_name, parts)
    _fast_heartbeats(mock_cluster)
    bs = mock_cluster.bootstrap_servers

    async def main() -> None:
        await _fill(bs, topic_name, parts, per)
        own = Ownership()
        cfg = _config(bs, f"g-{topic_name}")
        members = [AsyncConsumer(cfg), AsyncConsumer(cfg)]
        seen: list[tuple[int, int]] = []
        stop = asyncio.Event()

        async def run(i: int, c: AsyncConsumer) -> None:
            c.subscribe([topic_name], listener=own.listener(f"m{i}"))
            while not stop.is_set():
                for recs in (await c.getmany(timeout=0.05)).values():
                    seen.extend((r.partition, r.offset) for r in recs)
                await asyncio.sleep(0.02)  # slow: records still flow during the rebalance

        deadline = time.monotonic() + 30
        t0 = asyncio.create_task(run(0, members[0]))
        while time.monotonic() < deadline and len(own.owner) < parts:
            await asyncio.sleep(0.02)
        assert set(own.owner.values()) == {"m0"} and len(own.owner) == parts
        t1 = asyncio.create_task(run(1, members[1]))
        while time.monotonic() < deadline and set(own.owner.values()) != {"m0", "m1"}:
            await asyncio.sleep(0.02)
        assert set(own.owner.values()) == {"m0", "m1"}, own.events
        # m0 gave up only what moved: it was never told to revoke everything.
        m0_revoked = [p for n, kind, p in own.events if n == "m0" and kind == "revoked"]
        assert m0_revoked and all(len(p) < parts for p in m0_revoked), own.events
        assert members[0]._coordinator.member_epoch > 0
        t0.cancel()
        await members[0].close()
        while time.monotonic() < deadline and (len(seen) < parts * per or set(
                own.owner.values()) != {"m1"} or len(own.owner) != parts):
            await asyncio.sleep(0.02)
        assert set(own.owner.values()) == {"m1"} and len(own.owner) == parts, own.events
        stop.set()
        await t1
        await members[1].close()
        assert not own.violations, own.violations
        assert sorted(set(seen)) == [(p, i) for p in range(parts) for i in range(per)]
        assert len(seen) == len(set(seen)), "a record was consumed twice"

    asyncio.run(main())


def test_fenced_member_loses_partitions_and_rejoins(mock_cluster: MockCluster,
                                                    topic_name: str) -> None:
    mock_cluster.create_topic(topic_name, 2)
    _fast_heartbeats(mock_cluster)
    bs = mock_cluster.bootstrap_servers

    async def main() -> None:
        own = Ownership()
        c = AsyncConsumer(_config(bs, f"g-{topic_name}"))
        c.subscribe([topic_name], listener=own.listener("m"))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(c.assignment()) < 2:
            await c.getmany(timeout=0.05)
        assert len(c.assignment()) == 2
        member_id = c._coordinator.member_id
        mock_cluster.push_request_errors(HEARTBEAT_API, [FENCED_MEMBER_EPOCH])
        while time.monotonic() < deadline and not any(k == "lost" for _, k, _ in own.events):
            await c.getmany(timeout=0.05)
        while time.monotonic() < deadline and len(c.assignment()) < 2:
            await c.getmany(timeout=0.05)
        kinds = [k for _, k, _ in own.events]
        assert kinds == ["assigned", "lost", "assigned"], own.events
        assert c.assignment() == {TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)}
        assert c._coordinator.member_id == member_id  # the member id is kept for life
        assert c._coordinator.member_epoch > 0
        await c.close()

    asyncio.run(main())


def test_commit_uses_member_epoch(mock_cluster: MockCluster, topic_name: str) -> None:
    mock_cluster.create_topic(topic_name, 1)
    _fast_heartbeats(mock_cluster)
    bs = mock_cluster.bootstrap_servers

    async def main() -> None:
        await _fill(bs, topic_name, 1, 10)
        c = AsyncConsumer(_config(bs, f"g-{topic_name}"), enable_auto_commit=False)
        c.subscribe([topic_name])
        got: list[int] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(got) < 10:
            for recs in (await c.getmany(timeout=0.05)).values():
                got.extend(r.offset for r in recs)
        assert got == list(range(10))
        group = c._coordinator
        assert group.member_epoch > 0 and group.generation == group.member_epoch
        # Commits carry member id + member epoch, which only OffsetCommit v9+ can.
        assert await group._conn_version(OffsetCommitRequest) >= 9
        await c.commit()
        tp = TopicPartition(topic_name, 0)
        committed = (await c.committed([tp]))[tp]
        assert committed is not None and committed.offset == 10
        await c.close()

    asyncio.run(main())


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_unsubscribe_revokes_commits_and_subscribe_again(mock_cluster: MockCluster,
                                                         topic_name: str, kind: str) -> None:
    """KIP-848 shares the hand-back of unsubscribe(): the partitions are revoked once, every
    record handed out is committed (auto commit, with the member epoch), and subscribing
    again at once gets them back from those offsets."""
    parts, per = 2, 30
    mock_cluster.create_topic(topic_name, parts)
    _fast_heartbeats(mock_cluster)
    bs = mock_cluster.bootstrap_servers
    asyncio.run(_fill(bs, topic_name, parts, per))
    cfg = _config(bs, f"g-{topic_name}")
    events: list[tuple[str, int]] = []
    positions: dict[TopicPartition, int] = {}
    firsts: dict[TopicPartition, int] = {}
    committed: dict[TopicPartition, int] = {}
    tps = [TopicPartition(topic_name, p) for p in range(parts)]

    def took(got: dict[TopicPartition, list[Any]], into: dict[TopicPartition, int],
             first: bool) -> None:
        for tp, recs in got.items():
            if first:
                into.setdefault(tp, recs[0].offset)
            else:
                into[tp] = recs[-1].offset + 1

    def done() -> bool:
        return len(events) >= 3 and firsts.keys() >= {
            tp for tp, pos in positions.items() if pos < per}

    if kind == "sync":
        class Listener:
            def on_partitions_assigned(self, ps: set[TopicPartition]) -> None:
                events.append(("assigned", len(ps)))

            def on_partitions_revoked(self, ps: set[TopicPartition]) -> None:
                events.append(("revoked", len(ps)))

        with Consumer(cfg) as c:
            c.subscribe([topic_name], listener=Listener())
            deadline = time.monotonic() + 20
            while len(positions) < parts:
                assert time.monotonic() < deadline, events
                took(c.getmany(0.05), positions, False)
            c.unsubscribe()
            got = c.committed(tps, timeout=10)
            committed.update({tp: om.offset for tp, om in got.items() if om is not None})
            c.subscribe([topic_name], listener=Listener())
            deadline = time.monotonic() + 20
            while not done() and time.monotonic() < deadline:
                took(c.getmany(0.05), firsts, True)
            events_seen = list(events)
    else:
        class AsyncListener:
            async def on_partitions_assigned(self, ps: set[TopicPartition]) -> None:
                events.append(("assigned", len(ps)))

            async def on_partitions_revoked(self, ps: set[TopicPartition]) -> None:
                events.append(("revoked", len(ps)))

        async def main() -> list[tuple[str, int]]:
            async with AsyncConsumer(cfg) as ac:
                ac.subscribe([topic_name], listener=AsyncListener())
                deadline = time.monotonic() + 20
                while len(positions) < parts:
                    assert time.monotonic() < deadline, events
                    took(await ac.getmany(0.05), positions, False)
                ac.unsubscribe()
                ac.subscribe([topic_name], listener=AsyncListener())
                deadline = time.monotonic() + 20
                while not done() and time.monotonic() < deadline:
                    took(await ac.getmany(0.05), firsts, True)
                got = await ac.committed(tps, timeout=10)
                committed.update({tp: om.offset for tp, om in got.items() if om is not None})
                return list(events)

        events_seen = asyncio.run(main())
    assert events_seen == [("assigned", parts), ("revoked", parts), ("assigned", parts)]
    assert committed == positions
    assert any(pos < per for pos in positions.values()), positions
    assert firsts == {tp: pos for tp, pos in positions.items() if pos < per}


def test_broker_without_consumer_group_heartbeat_fails_fast(tansu_broker: TansuBroker,
                                                             topic_name: str) -> None:
    tansu_broker.create_topic(topic_name, 1)

    async def main() -> None:
        c = AsyncConsumer(_config(tansu_broker.bootstrap_servers, f"g-{topic_name}"))
        c.subscribe([topic_name])
        started = time.monotonic()
        with pytest.raises(UnsupportedVersionError, match=r"group\.protocol=classic"):
            while time.monotonic() - started < 10:
                await c.getmany(timeout=0.05)
        assert time.monotonic() - started < 5
        assert not c.assignment()
        await c.close()

    asyncio.run(main())
