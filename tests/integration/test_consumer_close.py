"""Closing a group consumer (Tansu; session.timeout.ms 1000, see TEST-BROKERS.md).

- The revoke listener runs while the consumer still works, so the documented pattern —
  commit the final offsets in ``on_partitions_revoked`` — commits them during ``close()``.
- ``close(timeout=)`` is bounded with every broker gone: the auto commit, the listener's
  own commit (which gets a typed KafkaTimeoutError) and leaving the group all stop at it.
- With auto commit, ``close()`` commits every record handed out; leaving a ``with`` block
  on an exception commits only what the application moved past by polling again.
- A classic member keeps heartbeating while it hands its partitions back on close() and
  unsubscribe(): a revoke listener slower than session.timeout.ms can still commit, and the
  next owner reads nothing twice (Tansu and the Cluster; heartbeat errors meanwhile on
  librdkafka's mock cluster, whose classic groups take one Kontrakt member only).

Each Tansu test runs over the four consumer forms: Consumer, AsyncConsumer and their
Deserializing wrappers; the bound is also checked on librdkafka's mock cluster with every
broker down, for both group protocols.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import Callable
from typing import Any

import pytest

from kontrakt._types import TopicPartition
from kontrakt.clients.consumer import AsyncConsumer, Consumer
from kontrakt.clients.serializing import AsyncDeserializingConsumer, DeserializingConsumer
from kontrakt.errors import InvalidArgumentError, KafkaTimeoutError, KontraktError
from kontrakt.testing import MockCluster, TansuBroker
from tests.integration.test_groups import _fill

pytestmark = [pytest.mark.integration, pytest.mark.also_on_cluster, pytest.mark.timeout(60)]

FORMS: dict[str, Callable[..., Any]] = {
    "Consumer": Consumer, "AsyncConsumer": AsyncConsumer,
    "DeserializingConsumer": DeserializingConsumer,
    "AsyncDeserializingConsumer": AsyncDeserializingConsumer,
}
PARTITIONS, PER_PARTITION = 2, 20


async def _maybe(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class Driver:
    """One consumer form, driven the same way from a coroutine (sync forms are called
    directly: their calls block this test's own loop, which runs nothing else)."""

    def __init__(self, form: str, **config: Any) -> None:
        self.consumer = FORMS[form](**config)
        self.is_async = form.startswith("Async")

    async def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return await _maybe(getattr(self.consumer, name)(*args, **kwargs))

    async def consume(self, count: int, max_records: int | None = None) -> list[Any]:
        got: list[Any] = []
        deadline = time.monotonic() + 20
        while len(got) < count:
            assert time.monotonic() < deadline, f"stalled after {len(got)} records"
            batch = await self.call("getmany", timeout=0.2,
                                    max_records=max_records or count - len(got))
            for recs in batch.values():
                got.extend(recs)
        return got

    def committing_listener(self, outcomes: list[Any]) -> Any:
        """A listener committing in on_partitions_revoked; records what the commit did."""
        consumer = self.consumer
        if self.is_async:
            class AsyncListener:
                async def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
                    try:
                        await consumer.commit(timeout=10)
                        outcomes.append(("committed", frozenset(parts)))
                    except Exception as exc:
                        outcomes.append(exc)

                def on_partitions_assigned(self, parts: set[TopicPartition]) -> None:
                    pass
            return AsyncListener()

        class SyncListener:
            def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
                try:
                    consumer.commit(timeout=10)
                    outcomes.append(("committed", frozenset(parts)))
                except Exception as exc:
                    outcomes.append(exc)

            def on_partitions_assigned(self, parts: set[TopicPartition]) -> None:
                pass
        return SyncListener()


def _config(bs: str, topic: str, **extra: Any) -> dict[str, Any]:
    return dict(bootstrap_servers=bs, group_id=f"g-{topic}", auto_offset_reset="earliest",
                session_timeout_ms=1000, heartbeat_interval_ms=100, fetch_max_wait_ms=100,
                **extra)


def _committed(bs: str, topic: str) -> dict[int, int | None]:
    with Consumer(bootstrap_servers=bs, group_id=f"g-{topic}") as checker:
        got = checker.committed([TopicPartition(topic, p) for p in range(PARTITIONS)],
                                timeout=10)
    return {tp.partition: (om.offset if om is not None else None) for tp, om in got.items()}


@pytest.mark.parametrize("form", FORMS)
def test_revoke_listener_commits_during_close(tansu_broker: TansuBroker, topic_name: str,
                                              form: str) -> None:
    tansu_broker.create_topic(topic_name, PARTITIONS)
    bs = tansu_broker.bootstrap_servers

    async def main() -> None:
        await _fill(bs, topic_name, PARTITIONS, PER_PARTITION)
        d = Driver(form, **_config(bs, topic_name, enable_auto_commit=False))
        outcomes: list[Any] = []
        await d.call("subscribe", [topic_name], listener=d.committing_listener(outcomes))
        await d.consume(PARTITIONS * PER_PARTITION)
        await d.call("close")
        everything = frozenset(TopicPartition(topic_name, p) for p in range(PARTITIONS))
        assert outcomes == [("committed", everything)]

    asyncio.run(main())
    assert _committed(bs, topic_name) == {p: PER_PARTITION for p in range(PARTITIONS)}


@pytest.mark.parametrize("form", FORMS)
def test_close_timeout_is_bounded_with_every_broker_gone(
        tansu_broker_factory: Callable[..., TansuBroker], topic_name: str, form: str) -> None:
    broker = tansu_broker_factory(stop_timeout=0.2)  # gone at once: SIGKILL after 0.2 s
    broker.create_topic(topic_name, PARTITIONS)
    bs = broker.bootstrap_servers

    async def main() -> None:
        await _fill(bs, topic_name, PARTITIONS, PER_PARTITION)
        d = Driver(form, **_config(bs, topic_name))
        outcomes: list[Any] = []
        await d.call("subscribe", [topic_name], listener=d.committing_listener(outcomes))
        await d.consume(PARTITIONS * PER_PARTITION)
        broker.stop()
        with pytest.raises(InvalidArgumentError):
            await d.call("close", timeout=-1)
        started = time.monotonic()
        await d.call("close", timeout=1.0)
        took = time.monotonic() - started
        assert took < 2.5, f"close(timeout=1.0) took {took:.1f}s with the broker gone"
        # The listener ran, and its commit failed with a typed error, within the bound.
        assert len(outcomes) == 1 and isinstance(outcomes[0], KafkaTimeoutError), outcomes
        assert isinstance(outcomes[0], KontraktError)
        await d.call("close", timeout=1.0)  # idempotent

    asyncio.run(main())


@pytest.mark.parametrize("form", FORMS)
def test_close_commits_everything_but_an_error_exit_only_what_was_polled_past(
        tansu_broker: TansuBroker, topic_name: str, form: str) -> None:
    tansu_broker.create_topic(topic_name, 1)
    bs = tansu_broker.bootstrap_servers
    per = 2 * 10

    async def run(group: str, fail: bool) -> int | None:
        d = Driver(form, **_config(bs, topic_name, auto_commit_interval_ms=60_000,
                                   ) | {"group_id": group})
        await d.call("subscribe", [topic_name])

        async def body() -> None:
            first = await d.consume(10, max_records=10)   # processed: the next poll says so
            second = await d.consume(10, max_records=10)  # handed out, then the failure
            assert [r.offset for r in first + second] == list(range(per))
            if fail:
                raise RuntimeError("processing failed")

        with pytest.raises(RuntimeError) if fail else contextlib.nullcontext():
            if d.is_async:
                async with d.consumer:
                    await body()
            else:
                with d.consumer:
                    await body()
        tp = TopicPartition(topic_name, 0)
        with Consumer(bootstrap_servers=bs, group_id=group) as checker:
            om = checker.committed([tp], timeout=10)[tp]
        return None if om is None else om.offset

    async def main() -> None:
        await _fill(bs, topic_name, 1, per)
        assert await run(f"g-{topic_name}-clean", fail=False) == per
        assert await run(f"g-{topic_name}-failed", fail=True) == 10

    asyncio.run(main())


@pytest.mark.parametrize("group_protocol", ["classic", "consumer"])
def test_close_timeout_is_bounded_with_every_mock_broker_down(
        mock_cluster_factory: Callable[..., MockCluster], topic_name: str,
        group_protocol: str) -> None:
    """The same bound on librdkafka's mock cluster (three brokers, all set down), for both
    group protocols: KIP-848 leaves with a ConsumerGroupHeartbeat, classic with
    LeaveGroup."""
    cluster = mock_cluster_factory(3)
    cluster.create_topic(topic_name, PARTITIONS)
    cluster.group_initial_rebalance_delay_ms(0)
    cluster.group_consumer_heartbeat_interval_ms(200)
    bs = cluster.bootstrap_servers

    async def main() -> None:
        await _fill(bs, topic_name, PARTITIONS, PER_PARTITION)
        d = Driver("AsyncConsumer", **_config(bs, topic_name, group_protocol=group_protocol)
                   | {"session_timeout_ms": 1500})
        c = d.consumer
        outcomes: list[Any] = []

        class Listener:  # commits, then looks the committed offsets up
            async def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
                for step in (c.commit(timeout=10), c.committed(parts, timeout=10)):
                    try:
                        await step
                    except Exception as exc:
                        outcomes.append(exc)

        await d.call("subscribe", [topic_name], listener=Listener())
        await d.consume(PARTITIONS * PER_PARTITION)
        for broker in range(1, cluster.num_brokers + 1):
            cluster.broker_down(broker)
        started = time.monotonic()
        await d.call("close", timeout=1.0)
        took = time.monotonic() - started
        assert took < 2.5, f"close(timeout=1.0) took {took:.1f}s with every broker down"
        assert [type(e) for e in outcomes] == [KafkaTimeoutError] * 2, outcomes

    asyncio.run(main())


#: longer than two sessions (session.timeout.ms 1000): the leaving member's revoke listener
_SLOW_REVOKE = 2.5


@pytest.mark.parametrize("how", ["close-async", "close-sync", "unsubscribe-async",
                                 "unsubscribe-sync"])
def test_classic_member_heartbeats_while_handing_back_before_leaving(
        tansu_broker: TansuBroker, topic_name: str, how: str,
        caplog: pytest.LogCaptureFixture) -> None:
    """A classic member that leaves (close() or unsubscribe()) first hands its partitions
    back: the auto commit, then ``on_partitions_revoked``, where the application finishes
    what it still had in hand and commits it. A listener slower than session.timeout.ms
    does not get the member dropped meanwhile: it keeps heartbeating, so its own commit
    succeeds (no UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION), and the other member is given its
    partition once, after the listener is done, and reads from that commit: nothing twice.
    (Without those heartbeats the coordinator drops it after session.timeout.ms, gives the
    partition away from the older commit while the listener still runs, and the
    listener's commit fails.)"""
    tansu_broker.create_topic(topic_name, PARTITIONS)
    bs = tansu_broker.bootstrap_servers
    action, form = how.split("-")
    caplog.set_level(logging.INFO, logger="kontrakt")
    cfg = _config(bs, topic_name, auto_commit_interval_ms=60_000)
    events: list[tuple[float, str, str, frozenset[TopicPartition]]] = []
    outcomes: list[Any] = []

    def note(who: str, what: str, parts: set[TopicPartition]) -> None:
        events.append((time.monotonic(), who, what, frozenset(parts)))

    def owned(who: str) -> set[TopicPartition]:
        mine: set[TopicPartition] = set()
        for _, w, what, parts in events:
            if w == who and what == "assigned":
                mine |= parts
            elif w == who and what in ("revoked", "lost"):
                mine -= parts
        return mine

    async def main() -> None:
        # The leaving member stores only what it processed: what it still has in hand when
        # it leaves is finished, stored and committed by its revoke listener.
        c: Any
        if form == "sync":
            # Called from threads: its close() blocks for the listener, and the staying
            # member heartbeats on this loop meanwhile.
            c = await asyncio.to_thread(Consumer, **cfg, enable_auto_offset_store=False)

            async def call(name: str, *args: Any, **kwargs: Any) -> Any:
                return await asyncio.to_thread(getattr(c, name), *args, **kwargs)
        else:
            c = AsyncConsumer(**cfg, enable_auto_offset_store=False)

            async def call(name: str, *args: Any, **kwargs: Any) -> Any:
                return await _maybe(getattr(c, name)(*args, **kwargs))
        in_hand: list[Any] = []
        slow = False

        def finish() -> dict[TopicPartition, int]:
            c.store_offsets(in_hand)
            return {TopicPartition(r.topic, r.partition): r.offset + 1 for r in in_hand}

        if form == "async":
            class AsyncListener:
                async def on_partitions_assigned(self, parts: set[TopicPartition]) -> None:
                    note("m0", "assigned", parts)

                async def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
                    note("m0", "revoking", parts)
                    if slow and parts:
                        await asyncio.sleep(_SLOW_REVOKE)
                        try:
                            await c.commit(finish(), timeout=10)
                            outcomes.append("committed")
                        except Exception as exc:
                            outcomes.append(exc)
                    note("m0", "revoked", parts)

                async def on_partitions_lost(self, parts: set[TopicPartition]) -> None:
                    note("m0", "lost", parts)
            listener: Any = AsyncListener()
        else:
            class SyncListener:
                def on_partitions_assigned(self, parts: set[TopicPartition]) -> None:
                    note("m0", "assigned", parts)

                def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
                    note("m0", "revoking", parts)
                    if slow and parts:
                        time.sleep(_SLOW_REVOKE)  # (the application's thread)
                        try:
                            c.commit(finish(), timeout=10)
                            outcomes.append("committed")
                        except Exception as exc:
                            outcomes.append(exc)
                    note("m0", "revoked", parts)

                def on_partitions_lost(self, parts: set[TopicPartition]) -> None:
                    note("m0", "lost", parts)
            listener = SyncListener()

        class StayingListener:
            async def on_partitions_assigned(self, parts: set[TopicPartition]) -> None:
                note("m1", "assigned", parts)

            async def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
                note("m1", "revoked", parts)

            async def on_partitions_lost(self, parts: set[TopicPartition]) -> None:
                note("m1", "lost", parts)

        stay = AsyncConsumer(**cfg)
        await stay.start()
        got: list[Any] = []  # what the staying member reads
        stop = asyncio.Event()

        async def staying() -> None:
            while not stop.is_set():
                for recs in (await stay.getmany(timeout=0.05)).values():
                    got.extend(recs)

        async def until(cond: Callable[[], bool], what: str) -> None:
            end = time.monotonic() + 15
            while not cond():
                assert time.monotonic() < end, (what, events)
                await asyncio.sleep(0.02)

        poller = asyncio.create_task(staying())
        closed = False
        try:
            await call("subscribe", [topic_name], listener=listener)
            stay.subscribe([topic_name], listener=StayingListener())
            # (the sync consumer's listener runs inside its calls: poll it meanwhile)
            end = time.monotonic() + 15
            while not (len(owned("m0")) == 1 and len(owned("m1")) == 1):
                assert time.monotonic() < end, events
                await call("getmany", timeout=0.05)
            (moving,) = owned("m0")
            await _fill(bs, topic_name, PARTITIONS, PER_PARTITION)
            handed: list[Any] = []
            while len(handed) < PER_PARTITION:
                assert time.monotonic() < end + 15, handed
                for recs in (await call("getmany", timeout=0.05)).values():
                    handed.extend(recs)
            assert {TopicPartition(r.topic, r.partition) for r in handed} == {moving}
            c.store_offsets(handed[:PER_PARTITION // 2])  # processed; the rest is in hand
            in_hand.extend(handed[PER_PARTITION // 2:])
            mark = len(events)
            slow = True
            started = time.monotonic()
            if action == "close":
                closed = True
                await call("close")
            else:
                await call("unsubscribe")
            await until(lambda: len(owned("m1")) == PARTITIONS, "m1 owns both")
            took = time.monotonic() - started
            # The leaving member's final commit holds: everything it was handed.
            committed = await stay.committed(moving, timeout=10)
            assert committed == PER_PARTITION, committed
            # What comes next in the moving partition: read by the staying member, after
            # what the leaving member committed.
            await _fill(bs, topic_name, PARTITIONS, 3)
            await until(lambda: sum(1 for r in got if r.partition == moving.partition
                                    ) >= 3, "m1 reads the new records")
        finally:
            stop.set()
            await poller
            await stay.close()
            if not closed:
                await call("close")
        assert outcomes == ["committed"], outcomes
        mine = [r.offset for r in got if r.partition == moving.partition]
        assert mine == [PER_PARTITION, PER_PARTITION + 1, PER_PARTITION + 2], mine
        after = events[mark:]
        revoked = [t for t, w, what, parts in after if w == "m0" and what == "revoked"
                   and moving in parts]
        given = [t for t, w, what, parts in after if w == "m1" and what == "assigned"
                 and moving in parts]
        assert len(revoked) == 1 and len(given) == 1, after
        assert given[0] >= revoked[0], after  # given away only once handed back
        assert not [e for e in events if e[2] == "lost"], events
        assert took < _SLOW_REVOKE + 5, took
        dropped = [r.getMessage() for r in caplog.records
                   if any(s in r.getMessage() for s in (
                       "UnknownMemberId", "IllegalGeneration", "UNKNOWN_MEMBER_ID",
                       "ILLEGAL_GENERATION"))]
        assert not dropped, dropped

    asyncio.run(main())


_HEARTBEAT, _LEAVE_GROUP, _OFFSET_COMMIT = 12, 13, 8
_ERRORS = {"UNKNOWN_MEMBER_ID": 25, "ILLEGAL_GENERATION": 22, "FENCED_INSTANCE_ID": 82,
           "REBALANCE_IN_PROGRESS": 27, "COORDINATOR_LOAD_IN_PROGRESS": 14}


@pytest.mark.parametrize("error", _ERRORS)
def test_classic_heartbeat_errors_while_handing_back(mock_cluster: MockCluster,
                                                     topic_name: str, error: str,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    """Heartbeats sent while the revoke listener runs on close() are answered ``error``
    (librdkafka's mock cluster, one classic member, heartbeat every 100 ms):

    - UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID: the member is no longer
      one: no further heartbeat and no LeaveGroup (as the Java client); the listener call
      under way finishes.
    - REBALANCE_IN_PROGRESS: the member is leaving, not rejoining: it keeps heartbeating
      (the coordinator waits for it), its listener's commit is still taken, and it leaves.
    - COORDINATOR_LOAD_IN_PROGRESS (retriable, twice): retried after a backoff, then as
      before.
    """
    mock_cluster.create_topic(topic_name, 1)
    mock_cluster.group_initial_rebalance_delay_ms(0)
    bs = mock_cluster.bootstrap_servers
    caplog.set_level(logging.INFO, logger="kontrakt")
    code = _ERRORS[error]
    dropped = error in ("UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION", "FENCED_INSTANCE_ID")
    outcomes: list[Any] = []

    async def main() -> list[int]:
        await _fill(bs, topic_name, 1, 5)
        c = AsyncConsumer(**_config(bs, topic_name) | {"session_timeout_ms": 6000})

        class Listener:
            async def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
                mock_cluster.start_request_tracking()
                mock_cluster.push_request_errors(_HEARTBEAT, [code] * (
                    2 if error == "COORDINATOR_LOAD_IN_PROGRESS" else 1))
                await asyncio.sleep(0.8)  # eight heartbeat intervals
                try:
                    await c.commit(timeout=5)
                    outcomes.append("committed")
                except Exception as exc:
                    outcomes.append(exc)

        c.subscribe([topic_name], listener=Listener())
        got = 0
        deadline = time.monotonic() + 15
        while got < 5:
            assert time.monotonic() < deadline, got
            got += sum(map(len, (await c.getmany(timeout=0.05)).values()))
        try:
            await c.close()
            return [r.api_key for r in mock_cluster.get_requests()]
        finally:
            mock_cluster.stop_request_tracking()

    apis = asyncio.run(main())
    heartbeats = apis.count(_HEARTBEAT)
    messages = [r.getMessage() for r in caplog.records]
    if dropped:
        assert heartbeats == 1, apis
        assert _LEAVE_GROUP not in apis, apis
        assert any(f"{error}" in m or "while handing partitions back" in m
                   for m in messages), messages
    else:
        # (two retries back off about 100 and 200 ms)
        assert heartbeats >= (4 if error == "COORDINATOR_LOAD_IN_PROGRESS" else 6), apis
        assert apis[-1] == _LEAVE_GROUP, apis
        assert outcomes == ["committed"], outcomes


def test_member_dropped_during_the_close_commit_loses_its_partitions(
        mock_cluster: MockCluster, topic_name: str) -> None:
    """close()'s auto-commit is retried (COORDINATOR_LOAD_IN_PROGRESS three times, on
    librdkafka's mock cluster) while the keep-alive heartbeat is answered
    UNKNOWN_MEMBER_ID: the member is no longer one when the commit ends, so its listener
    gets on_partitions_lost, not on_partitions_revoked (the Java client's onLeavePrepare
    asks once the commit is done), and no LeaveGroup is sent."""
    mock_cluster.create_topic(topic_name, 1)
    mock_cluster.group_initial_rebalance_delay_ms(0)
    bs = mock_cluster.bootstrap_servers
    calls: list[str] = []

    async def main() -> list[int]:
        await _fill(bs, topic_name, 1, 5)
        c = AsyncConsumer(**_config(bs, topic_name) | {"session_timeout_ms": 6000})

        class Listener:
            def on_partitions_assigned(self, parts: set[TopicPartition]) -> None:
                calls.append("assigned")

            def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
                calls.append("revoked")

            def on_partitions_lost(self, parts: set[TopicPartition]) -> None:
                calls.append("lost")

        c.subscribe([topic_name], listener=Listener())
        got = 0
        deadline = time.monotonic() + 15
        while got < 5:
            assert time.monotonic() < deadline, got
            got += sum(map(len, (await c.getmany(timeout=0.05)).values()))
        mock_cluster.start_request_tracking()
        try:
            mock_cluster.push_request_errors(_OFFSET_COMMIT,
                                             [_ERRORS["COORDINATOR_LOAD_IN_PROGRESS"]] * 3)
            mock_cluster.push_request_errors(_HEARTBEAT, [_ERRORS["UNKNOWN_MEMBER_ID"]])
            await c.close()
            return [r.api_key for r in mock_cluster.get_requests()]
        finally:
            mock_cluster.stop_request_tracking()

    apis = asyncio.run(main())
    assert apis.count(_HEARTBEAT) == 1 and apis.count(_OFFSET_COMMIT) >= 2, apis
    assert _LEAVE_GROUP not in apis, apis
    assert calls == ["assigned", "lost"], calls
