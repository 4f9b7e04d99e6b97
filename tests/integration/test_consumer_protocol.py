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
import logging
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


#: the mock drops a member that sends no heartbeat for this long (its default is 45 s)
_SESSION_MS = 600
#: what the leaving member's revoke listener takes: more than two sessions
_SLOW_REVOKE = 1.5


class _Timeline:
    """Listener calls of the group's members, with when they started and ended."""

    def __init__(self) -> None:
        self.slow = False
        self.events: list[tuple[float, str, str, frozenset[TopicPartition]]] = []

    def note(self, who: str, what: str, parts: set[TopicPartition]) -> None:
        self.events.append((time.monotonic(), who, what, frozenset(parts)))

    def sync_listener(self, who: str) -> Any:
        outer = self

        class L:
            def on_partitions_assigned(self, parts: set[TopicPartition]) -> None:
                outer.note(who, "assigned", parts)

            def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
                outer.note(who, "revoking", parts)
                if outer.slow and parts:
                    time.sleep(_SLOW_REVOKE)  # (the application's thread)
                outer.note(who, "revoked", parts)

            def on_partitions_lost(self, parts: set[TopicPartition]) -> None:
                outer.note(who, "lost", parts)

        return L()

    def async_listener(self, who: str) -> Any:
        outer = self

        class L:
            async def on_partitions_assigned(self, parts: set[TopicPartition]) -> None:
                outer.note(who, "assigned", parts)

            async def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
                outer.note(who, "revoking", parts)
                if outer.slow and parts:
                    await asyncio.sleep(_SLOW_REVOKE)
                outer.note(who, "revoked", parts)

            async def on_partitions_lost(self, parts: set[TopicPartition]) -> None:
                outer.note(who, "lost", parts)

        return L()


@pytest.mark.parametrize("how", ["close-async", "close-sync", "unsubscribe-async",
                                 "unsubscribe-sync"])
def test_leaving_member_heartbeats_while_its_revoke_listener_runs(
        mock_cluster: MockCluster, topic_name: str, how: str,
        caplog: pytest.LogCaptureFixture) -> None:
    """A member that leaves (close() or unsubscribe()) first hands its partitions back:
    commit, then ``on_partitions_revoked``. As in the Java client (PREPARE_LEAVING), it
    keeps heartbeating meanwhile, and sends the leave heartbeat (epoch -1) only after: a
    listener slower than the session timeout does not get the member dropped, so the other
    member is given its partitions once, after the listener is done, and the leave is
    accepted. (Without those heartbeats, the coordinator drops the member after
    ``session.timeout.ms`` and gives its partitions away while its listener still runs.)"""
    mock_cluster.create_topic(topic_name, 2)
    _fast_heartbeats(mock_cluster, 100)
    mock_cluster.group_consumer_session_timeout_ms(_SESSION_MS)
    bs = mock_cluster.bootstrap_servers
    cfg = _config(bs, f"g-{topic_name}")
    action, form = how.split("-")
    line = _Timeline()
    caplog.set_level(logging.INFO, logger="kontrakt.consumer.group")

    async def main() -> None:
        await _fill(bs, topic_name, 2, 10)
        loop = asyncio.get_running_loop()
        if form == "sync":
            sync = await asyncio.to_thread(Consumer, cfg)

            async def call(name: str, *args: Any, **kwargs: Any) -> Any:
                return await asyncio.to_thread(getattr(sync, name), *args, **kwargs)

            leaving: Any = sync
            listener = line.sync_listener("m0")
        else:
            leaving = AsyncConsumer(cfg)
            await leaving.start()

            async def call(name: str, *args: Any, **kwargs: Any) -> Any:
                result = getattr(leaving, name)(*args, **kwargs)
                return await result if asyncio.iscoroutine(result) else result

            listener = line.async_listener("m0")
        stay = AsyncConsumer(cfg)
        await stay.start()
        closed = False

        async def poll(caller: Any, stop: asyncio.Event) -> None:
            while not stop.is_set():
                await caller("getmany", 0.05)

        async def stay_call(name: str, *args: Any) -> Any:
            return await getattr(stay, name)(*args)

        def owned(who: str) -> set[TopicPartition]:
            mine: set[TopicPartition] = set()
            for _, w, what, parts in line.events:
                if w == who and what == "assigned":
                    mine |= parts
                elif w == who and what in ("revoked", "lost"):
                    mine -= parts
            return mine

        async def until(cond: Any, what: str) -> None:
            end = loop.time() + 15
            while not cond():
                assert loop.time() < end, (what, line.events)
                await asyncio.sleep(0.02)

        stop_leaving, stop_staying = asyncio.Event(), asyncio.Event()
        try:
            await call("subscribe", [topic_name], listener=listener)
            polling = asyncio.create_task(poll(call, stop_leaving))
            await until(lambda: len(owned("m0")) == 2, "m0 owns both")
            stay.subscribe([topic_name], listener=line.async_listener("m1"))
            staying = asyncio.create_task(poll(stay_call, stop_staying))
            await until(lambda: len(owned("m0")) == 1 and len(owned("m1")) == 1,
                        "one each")
            (moving,) = owned("m0")
            mark = len(line.events)
            line.slow = True
            stop_leaving.set()
            await polling  # (a sync consumer's calls come from one thread at a time)
            started = loop.time()
            if action == "close":
                closed = True
                await call("close")
            else:
                await call("unsubscribe")
                stop_leaving.clear()
                # A sync consumer's listener runs in the application's next call.
                polling = asyncio.create_task(poll(call, stop_leaving))
            await until(lambda: len(owned("m1")) == 2, "m1 owns both")
            took = loop.time() - started
            stop_leaving.set()
            stop_staying.set()
            await asyncio.gather(staying, polling)
        finally:
            stop_leaving.set()
            stop_staying.set()
            await stay.close()
            if not closed:
                await call("close")
        after = line.events[mark:]
        revoked = [t for t, w, what, parts in after if w == "m0" and what == "revoked"
                   and moving in parts]
        given = [t for t, w, what, parts in after if w == "m1" and what == "assigned"
                 and moving in parts]
        assert len(revoked) == 1 and len(given) == 1, after
        # Given to m1 only once m0 handed it back (not when the coordinator dropped m0).
        assert given[0] >= revoked[0], after
        assert not [e for e in line.events if e[2] == "lost"], line.events
        assert took < _SLOW_REVOKE + 3, took
        refused = [r.getMessage() for r in caplog.records
                   if "FENCED_MEMBER_EPOCH" in r.getMessage()
                   or "UNKNOWN_MEMBER_ID" in r.getMessage()
                   or "UnknownMemberId" in r.getMessage()
                   or "FencedMemberEpoch" in r.getMessage()]
        assert not refused, refused

    asyncio.run(main())


def test_member_fenced_while_handing_back_does_not_leave(mock_cluster: MockCluster,
                                                         topic_name: str,
                                                         caplog: pytest.LogCaptureFixture
                                                         ) -> None:
    """A heartbeat sent while the revoke listener runs on close() is answered
    FENCED_MEMBER_EPOCH: the member is no longer one, so (as in the Java client) it sends
    no further heartbeat and no leave; the listener call under way finishes, and is the
    only one (no ``on_partitions_lost`` after it)."""
    mock_cluster.create_topic(topic_name, 1)
    _fast_heartbeats(mock_cluster, 100)
    bs = mock_cluster.bootstrap_servers
    caplog.set_level(logging.INFO, logger="kontrakt.consumer.group")
    line = _Timeline()

    class Listener:
        async def on_partitions_assigned(self, parts: set[TopicPartition]) -> None:
            line.note("m", "assigned", parts)

        async def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
            line.note("m", "revoking", parts)
            mock_cluster.start_request_tracking()
            mock_cluster.push_request_errors(HEARTBEAT_API, [FENCED_MEMBER_EPOCH])
            await asyncio.sleep(0.6)  # six heartbeat intervals
            line.note("m", "revoked", parts)

        async def on_partitions_lost(self, parts: set[TopicPartition]) -> None:
            line.note("m", "lost", parts)

    async def main() -> list[int]:
        c = AsyncConsumer(_config(bs, f"g-{topic_name}"))
        c.subscribe([topic_name], listener=Listener())
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not c.assignment():
            await c.getmany(timeout=0.05)
        assert c.assignment()
        try:
            await c.close()
            return [r.api_key for r in mock_cluster.get_requests()]
        finally:
            mock_cluster.stop_request_tracking()

    apis = asyncio.run(main())
    assert apis.count(HEARTBEAT_API) == 1, apis
    assert [what for _, _, what, _ in line.events] == ["assigned", "revoking", "revoked"]
    assert any("FencedMemberEpochError while handing partitions back" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]


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
