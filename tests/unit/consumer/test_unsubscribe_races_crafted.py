"""unsubscribe() racing a revocation in progress, against a crafted group coordinator.

Each race is made deterministic: the application calls ``unsubscribe()`` (and ``assign()``)
inside the revoke listener, which is where the revocation stands then, and a hook holds the
group task back where the real one may be busy (a heartbeat in flight):

- a cooperative (classic) or KIP-848 revocation of p hands back exactly the states it
  revoked: after ``unsubscribe(); assign([p])`` the new, manual p stays, and what the group
  assigns afterwards is not added to a manual assignment;
- a KIP-848 reconciliation dropped by ``unsubscribe()`` in the middle of its revoke call
  lets that call finish (once): the partitions it revokes are revoked exactly once and the
  rest are handed back by the unsubscribe;
- ``position()`` inside the unsubscribe hand-back's ``on_partitions_revoked`` for a
  partition never positioned answers as the Java client's (still assigned there: the
  committed offset, else ``auto.offset.reset``; ``none`` raises OffsetOutOfRangeResetError)
  instead of waiting for a lookup that no task makes.

The crafted coordinator serves one topic of three partitions, each holding ``RECORDS``
records, with group answers the test steers: classic (this member a follower, SyncGroup
answering the assignment the test sets, a rebalance on demand) and KIP-848 (the target
assignment the test sets).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from kontrakt._types import TopicPartition
from kontrakt.clients.consumer import AsyncConsumer, Consumer
from kontrakt.clients.group._protocol import Assignment, encode_assignment
from kontrakt.errors import OffsetOutOfRangeResetError
from kontrakt.protocol.messages import (
    ConsumerGroupHeartbeatResponse,
    FetchResponse,
    FindCoordinatorResponse,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    SyncGroupResponse,
)
from kontrakt.protocol.records import RecordBatchBuilder
from tests._crafted_broker import FakeBroker, ServedOffsets

TOPIC = "crafted-unsubscribe"
PARTS = 3
P0, P1, P2 = (TopicPartition(TOPIC, p) for p in range(PARTS))
RECORDS = 20
REBALANCE_IN_PROGRESS = 27
FETCH, LIST_OFFSETS, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 1, 2, 8, 9, 10
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, CONSUMER_GROUP_HEARTBEAT = 11, 12, 13, 14, 68
VERSIONS = {OFFSET_COMMIT: (0, 9), OFFSET_FETCH: (0, 7), FIND_COORDINATOR: (0, 3),
            JOIN_GROUP: (0, 5), HEARTBEAT: (0, 3), LEAVE_GROUP: (0, 2), SYNC_GROUP: (0, 3),
            CONSUMER_GROUP_HEARTBEAT: (0, 1)}


class Coordinator(ServedOffsets):
    """A group coordinator for one member, both protocols, its assignment set by the test.

    Attributes:
        target: the partitions the member is given (classic: from the next SyncGroup, after
            ``rebalance()``; KIP-848: at the next heartbeat, with a new epoch).
        committed: partition -> committed offset.
        left: the member left the group (LeaveGroup, or a heartbeat with epoch -1).
    """

    records = RECORDS

    def __init__(self, target: set[int]) -> None:
        self.port = 0
        self.topic_id: Any = None
        self.target = set(target)
        self.committed: dict[int, int] = {}
        self.left = False
        self.generation = 0
        self._rebalance = False
        self._epoch_target: set[int] | None = None
        self.epoch = 0
        log = RecordBatchBuilder()
        for i in range(RECORDS):
            log.append(1_700_000_000_000 + i, None, f"v{i}".encode())
        self.blob = log.build(base_offset=0)

    def handlers(self) -> dict[int, Any]:
        return {FETCH: self.fetch, LIST_OFFSETS: self.list_offsets,
                OFFSET_COMMIT: self.commit, OFFSET_FETCH: self.offset_fetch,
                FIND_COORDINATOR: self.find, JOIN_GROUP: self.join,
                HEARTBEAT: self.heartbeat, LEAVE_GROUP: self.leave, SYNC_GROUP: self.sync,
                CONSUMER_GROUP_HEARTBEAT: self.consumer_heartbeat}

    def rebalance(self, target: set[int]) -> None:
        """Move the member to ``target`` (classic: via a rebalance the next heartbeat
        starts)."""
        self.target = set(target)
        self._rebalance = True

    # --- classic: this member is a follower; the "leader" is a member that never talks -----

    def join(self, version: int, req: Any) -> Any:
        self.generation += 1
        member = req.member_id or "member-1"
        return JoinGroupResponse(error_code=0, generation_id=self.generation,
                                 protocol_name=req.protocols[0].name, leader="the-leader",
                                 member_id=member, members=[])

    def sync(self, version: int, req: Any) -> Any:
        self._rebalance = False
        blob = encode_assignment(Assignment([TopicPartition(TOPIC, p)
                                             for p in sorted(self.target)]))
        return SyncGroupResponse(error_code=0, assignment=blob)

    def heartbeat(self, version: int, req: Any) -> Any:
        return HeartbeatResponse(error_code=REBALANCE_IN_PROGRESS if self._rebalance else 0)

    def leave(self, version: int, req: Any) -> Any:
        self.left = True
        return LeaveGroupResponse(error_code=0)

    # --- KIP-848 ---------------------------------------------------------------------------

    def consumer_heartbeat(self, version: int, req: Any) -> Any:
        if req.member_epoch < 0:
            self.left = True
            return ConsumerGroupHeartbeatResponse(error_code=0, member_id=req.member_id,
                                                  member_epoch=req.member_epoch,
                                                  heartbeat_interval_ms=100)
        if self._epoch_target != self.target:
            self._epoch_target = set(self.target)
            self.epoch += 1
        A = ConsumerGroupHeartbeatResponse.Assignment
        return ConsumerGroupHeartbeatResponse(
            error_code=0, member_id=req.member_id, member_epoch=self.epoch,
            heartbeat_interval_ms=100,
            assignment=A(topic_partitions=[A.TopicPartitions(
                topic_id=self.topic_id, partitions=sorted(self.target))]))

    # --- offsets and records -----------------------------------------------------------------

    def find(self, version: int, req: Any) -> Any:
        return FindCoordinatorResponse(error_code=0, node_id=1, host="127.0.0.1",
                                       port=self.port)

    async def fetch(self, version: int, req: Any) -> Any:
        R = FetchResponse.FetchableTopicResponse
        parts = [(p.partition, p.fetch_offset) for t in req.topics for p in t.partitions]
        if all(offset >= RECORDS for _p, offset in parts):
            await asyncio.sleep(0.02)  # nothing new: a short long-poll
        return FetchResponse(responses=[R(topic=TOPIC, partitions=[R.PartitionData(
            partition_index=p, error_code=0, high_watermark=RECORDS, log_start_offset=0,
            records=self.blob if offset < RECORDS else b"") for p, offset in parts])])


class Events:
    """The listener calls, in order: (what, partitions)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, frozenset[int]]] = []
        #: called with the revoked partitions (sync listener) before recording the end
        self.on_revoke: Callable[[set[TopicPartition]], None] | None = None
        #: awaited with them (async listener)
        self.on_revoke_async: Any = None

    def add(self, what: str, parts: set[TopicPartition]) -> None:
        self.events.append((what, frozenset(tp.partition for tp in parts)))

    def sync(self) -> Any:
        ev = self

        class Listener:
            def on_partitions_assigned(self, parts: set[TopicPartition]) -> None:
                ev.add("assigned", parts)

            def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
                ev.add("revoking", parts)
                if ev.on_revoke is not None:
                    ev.on_revoke(parts)
                ev.add("revoked", parts)

            def on_partitions_lost(self, parts: set[TopicPartition]) -> None:
                ev.add("lost", parts)
        return Listener()

    def async_(self) -> Any:
        ev = self

        class AsyncListener:
            async def on_partitions_assigned(self, parts: set[TopicPartition]) -> None:
                ev.add("assigned", parts)

            async def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
                ev.add("revoking", parts)
                if ev.on_revoke_async is not None:
                    await ev.on_revoke_async(parts)
                ev.add("revoked", parts)

            async def on_partitions_lost(self, parts: set[TopicPartition]) -> None:
                ev.add("lost", parts)
        return AsyncListener()


def _config(broker: FakeBroker, protocol: str, **extra: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = dict(
        bootstrap_servers=broker.bootstrap, group_id="g", auto_offset_reset="earliest",
        fetch_max_wait_ms=20, heartbeat_interval_ms=50, auto_commit_interval_ms=600_000,
        retry_backoff_ms=10, retry_backoff_max_ms=50, max_poll_records=5)
    if protocol == "consumer":
        cfg.update(group_protocol="consumer")
        del cfg["heartbeat_interval_ms"]  # (the coordinator's choice)
    else:
        cfg.update(partition_assignment_strategy="cooperative-sticky")
    cfg.update(extra)
    return cfg


def _started(coordinator: Coordinator, broker: FakeBroker) -> None:
    coordinator.port = broker.port
    coordinator.topic_id = broker.topic_ids[TOPIC]


Took = Callable[[dict[TopicPartition, list[Any]]], None]


async def _poll_until(c: AsyncConsumer[Any, Any], ok: Callable[[], bool],
                      what: Callable[[], object], took: Took | None = None,
                      timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        assert time.monotonic() < deadline, what()
        got = await c.getmany(0.05)
        if took is not None:
            took(got)


def _poll_until_sync(c: Consumer[Any, Any], ok: Callable[[], bool],
                     what: Callable[[], object], took: Took | None = None,
                     timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        assert time.monotonic() < deadline, what()
        got = c.getmany(0.05)
        if took is not None:
            took(got)


class Handed:
    """What the application was handed: the positions it reached per partition until
    ``mark()``, and every record after."""

    def __init__(self) -> None:
        self.positions: dict[int, int] = {}
        self.after: list[tuple[int, int]] = []
        self.marked = False

    def __call__(self, got: dict[TopicPartition, list[Any]]) -> None:
        for tp, recs in got.items():
            if self.marked:
                self.after.extend((tp.partition, r.offset) for r in recs)
            else:
                self.positions[tp.partition] = recs[-1].offset + 1

    def mark(self) -> None:
        self.marked = True

    def seen(self) -> object:
        return self.positions, self.after[:5]


def _late_drop(group: Any) -> None:
    """Hold the group task back before it drops a reconciliation (as while a heartbeat is
    in flight when unsubscribe() comes): the reconciliation runs on past its revoke call."""
    drop = group._drop_reconciliation

    async def late() -> None:
        await asyncio.sleep(0.3)
        await drop()
    group._drop_reconciliation = late


def _run_sync(body: Callable[[FakeBroker], None], coordinator: Coordinator) -> None:
    """Run ``body`` (driving a sync Consumer) in a thread beside the crafted broker."""
    async def main() -> None:
        async with FakeBroker({TOPIC: PARTS}, coordinator.handlers(),
                              versions=VERSIONS) as broker:
            _started(coordinator, broker)
            await asyncio.to_thread(body, broker)
    asyncio.run(main())


# --- (a) a revocation in progress and unsubscribe(); assign([p]) -----------------------------

@pytest.mark.parametrize("protocol", ["classic", "consumer"])
@pytest.mark.parametrize("kind", ["async", "sync"])
def test_a_revoke_in_progress_leaves_an_assign_made_meanwhile(protocol: str, kind: str
                                                              ) -> None:
    """The group moves P1 away (cooperative-sticky, or a KIP-848 target) and gives P2; the
    application calls unsubscribe(); assign([P1]) inside the revoke of P1. The revocation
    hands back the group's P1 only: the manual P1 stays assigned (and starts at what the
    revocation committed), P2 is neither added to the manual assignment nor announced, and
    the unsubscribe hands back P0."""
    coordinator = Coordinator({0, 1})
    ev = Events()
    handed = Handed()
    result: dict[str, Any] = {}

    def done() -> bool:
        return coordinator.left and sum(what == "revoked" for what, _ in ev.events) >= 2

    def moved_by_hand(parts: set[TopicPartition], c: Any) -> None:
        if parts == {P1}:
            handed.mark()
            c.unsubscribe()
            c.assign([P1])

    if kind == "async":
        async def main() -> None:
            async with FakeBroker({TOPIC: PARTS}, coordinator.handlers(),
                                  versions=VERSIONS) as broker:
                _started(coordinator, broker)
                async with AsyncConsumer(_config(broker, protocol)) as c:
                    if protocol == "consumer":
                        _late_drop(c._coordinator)

                    async def revoke(parts: set[TopicPartition]) -> None:
                        moved_by_hand(parts, c)
                    ev.on_revoke_async = revoke
                    c.subscribe([TOPIC], listener=ev.async_())
                    # P1 paused once it handed out records: some are left for the manual P1.
                    await _poll_until(c, lambda: 1 in handed.positions, handed.seen, handed)
                    c.pause(P1)
                    await _poll_until(c, lambda: 0 in handed.positions, handed.seen, handed)
                    coordinator.rebalance({0, 2})
                    await _poll_until(c, done, lambda: ev.events, handed)
                    result["committed"] = dict(coordinator.committed)
                    await _poll_until(c, lambda: len(handed.after) >= 5, handed.seen, handed)
                    result["assignment"] = c.assignment()
        asyncio.run(main())
    else:
        def body(broker: FakeBroker) -> None:
            with Consumer(_config(broker, protocol)) as c:
                if protocol == "consumer":
                    _late_drop(c._async._coordinator)
                ev.on_revoke = lambda parts: moved_by_hand(parts, c)
                c.subscribe([TOPIC], listener=ev.sync())
                _poll_until_sync(c, lambda: 1 in handed.positions, handed.seen, handed)
                c.pause(P1)
                _poll_until_sync(c, lambda: 0 in handed.positions, handed.seen, handed)
                coordinator.rebalance({0, 2})
                _poll_until_sync(c, done, lambda: ev.events, handed)
                result["committed"] = dict(coordinator.committed)
                _poll_until_sync(c, lambda: len(handed.after) >= 5, handed.seen, handed)
                result["assignment"] = c.assignment()
        _run_sync(body, coordinator)

    assert ev.events == [("assigned", frozenset({0, 1})),
                         ("revoking", frozenset({1})), ("revoked", frozenset({1})),
                         ("revoking", frozenset({0})), ("revoked", frozenset({0}))], ev.events
    assert result["assignment"] == {P1}
    # The revocation committed P1's position, the unsubscribe P0's; the manual P1 goes on
    # from P1's.
    pos = handed.positions
    assert pos[1] < RECORDS and result["committed"] == pos
    assert {p for p, _ in handed.after} == {1}, handed.after[:5]
    assert handed.after[0][1] == pos[1], (handed.after[0], pos)


# --- (b) a KIP-848 reconciliation dropped by unsubscribe() in its revoke call --------------

@pytest.mark.parametrize("kind", ["async", "sync"])
def test_unsubscribe_during_a_reconciliation_revoke_revokes_each_partition_once(kind: str
                                                                                ) -> None:
    """KIP-848 moves P1 away; the application calls unsubscribe() while on_partitions_revoked
    for P1 runs (it then commits P1 itself, auto commit off). The revoke call in progress
    finishes, its commit included, and is not repeated: the unsubscribe revokes P0 only."""
    coordinator = Coordinator({0, 1})
    ev = Events()
    handed = Handed()

    def done() -> bool:
        return coordinator.left and sum(what == "revoked" for what, _ in ev.events) >= 2

    if kind == "async":
        async def main() -> None:
            async with FakeBroker({TOPIC: PARTS}, coordinator.handlers(),
                                  versions=VERSIONS) as broker:
                _started(coordinator, broker)
                async with AsyncConsumer(_config(broker, "consumer",
                                                 enable_auto_commit=False)) as c:
                    async def revoke(parts: set[TopicPartition]) -> None:
                        if parts == {P1}:
                            c.unsubscribe()
                        await asyncio.sleep(0.3)  # (the listener's own work)
                        await c.commit({tp: 7 for tp in parts})
                    ev.on_revoke_async = revoke
                    c.subscribe([TOPIC], listener=ev.async_())
                    await _poll_until(c, lambda: set(handed.positions) == {0, 1},
                                      handed.seen, handed)
                    coordinator.rebalance({0})
                    await _poll_until(c, done, lambda: ev.events)
        asyncio.run(main())
    else:
        def body(broker: FakeBroker) -> None:
            with Consumer(_config(broker, "consumer", enable_auto_commit=False)) as c:
                def revoke(parts: set[TopicPartition]) -> None:
                    if parts == {P1}:
                        c.unsubscribe()
                    time.sleep(0.3)
                    c.commit({tp: 7 for tp in parts})
                ev.on_revoke = revoke
                c.subscribe([TOPIC], listener=ev.sync())
                _poll_until_sync(c, lambda: set(handed.positions) == {0, 1}, handed.seen,
                                 handed)
                coordinator.rebalance({0})
                _poll_until_sync(c, done, lambda: ev.events)
        _run_sync(body, coordinator)

    assert ev.events == [("assigned", frozenset({0, 1})),
                         ("revoking", frozenset({1})), ("revoked", frozenset({1})),
                         ("revoking", frozenset({0})), ("revoked", frozenset({0}))], ev.events
    assert coordinator.committed == {0: 7, 1: 7}


# --- (c) position() inside the unsubscribe hand-back ---------------------------------------

async def _never(partitions: list[TopicPartition]) -> Any:
    await asyncio.Event().wait()  # (the fetcher's lookup never answers: no position)


@pytest.mark.parametrize("reset", ["latest", "none"])
@pytest.mark.parametrize("kind", ["async", "sync"])
def test_position_of_a_partition_never_positioned_inside_the_hand_back(kind: str, reset: str
                                                                       ) -> None:
    """unsubscribe() before the fetcher positioned the partitions; on_partitions_revoked asks
    position() for them. As in the Java client (whose unsubscribe() calls the listener while
    they are still assigned, and whose position() then looks them up): P1 answers its
    committed offset, P0 (nothing committed) auto.offset.reset's offset, or with
    auto.offset.reset=none raises OffsetOutOfRangeResetError — at once, not after the
    timeout."""
    coordinator = Coordinator({0, 1})
    coordinator.committed = {1: 4}
    ev = Events()
    answers: dict[int, Any] = {}
    took: list[float] = []

    def ask(position: Callable[[TopicPartition], Any]) -> None:
        start = time.monotonic()
        for tp in (P0, P1):
            try:
                answers[tp.partition] = position(tp)
            except Exception as exc:
                answers[tp.partition] = type(exc)
        took.append(time.monotonic() - start)

    if kind == "async":
        async def main() -> None:
            async with FakeBroker({TOPIC: PARTS}, coordinator.handlers(),
                                  versions=VERSIONS) as broker:
                _started(coordinator, broker)
                async with AsyncConsumer(_config(broker, "classic",
                                                 auto_offset_reset=reset)) as c:
                    c._fetcher.committed_lookup = _never

                    async def revoke(parts: set[TopicPartition]) -> None:
                        start = time.monotonic()
                        for tp in (P0, P1):
                            try:
                                answers[tp.partition] = await c.position(tp, timeout=2)
                            except Exception as exc:
                                answers[tp.partition] = type(exc)
                        took.append(time.monotonic() - start)
                    ev.on_revoke_async = revoke
                    c.subscribe([TOPIC], listener=ev.async_())
                    await _poll_until(c, lambda: bool(ev.events), lambda: "no assignment")
                    c.unsubscribe()
                    await _poll_until(c, lambda: len(ev.events) == 3, lambda: ev.events)
        asyncio.run(main())
    else:
        def body(broker: FakeBroker) -> None:
            with Consumer(_config(broker, "classic", auto_offset_reset=reset)) as c:
                c._async._fetcher.committed_lookup = _never
                ev.on_revoke = lambda _parts: ask(lambda tp: c.position(tp, timeout=2))
                c.subscribe([TOPIC], listener=ev.sync())
                _poll_until_sync(c, lambda: bool(ev.events), lambda: "no assignment")
                c.unsubscribe()  # (waits for the hand-back, its listener call here)
                assert len(ev.events) == 3, ev.events
        _run_sync(body, coordinator)

    assert ev.events == [("assigned", frozenset({0, 1})), ("revoking", frozenset({0, 1})),
                         ("revoked", frozenset({0, 1}))], ev.events
    if reset == "latest":
        assert answers == {0: RECORDS, 1: 4}
    else:
        assert answers == {0: OffsetOutOfRangeResetError, 1: 4}
    assert took[0] < 1.5, took
