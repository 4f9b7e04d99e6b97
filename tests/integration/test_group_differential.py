"""A randomized differential run of consumer GROUPS across rebalances, on Tansu
(session.timeout.ms 2000: Tansu holds a JoinGroup about 1 s, see TEST-BROKERS.md).

Two or three sync consumers subscribe to one topic in one group and are driven from this
thread by a seeded random schedule: ``poll()``, ``getmany()``, ``consume()``, ``commit()``,
``commit_async()``, records produced meanwhile, members joining, leaving with ``close()``,
and one member abandoned (it stops calling the consumer without closing it: after
max.poll.interval.ms its on_partitions_lost call waits for a call that never comes, its
heartbeats stop, and the group evicts it). A rebalance listener on every member tracks
what it owns (sync listeners run on this thread, inside that member's calls, so the model
is exact when a call returns); the model checks after every step:

- a member hands out records only of partitions it owns, contiguous per partition, the
  first one of an ownership at the offset committed when it was assigned; a partition is
  revoked or lost only by its owner, and once;
- the committed offset of a partition never passes a record not processed yet (handed out
  and then polled past, committed explicitly, or closed) — auto commit included: no loss;
- committed offsets never go backwards, except on a partition two live members owned at
  once (one left out of a generation while its revoke listener waited, which Kafka allows);
- nothing is handed out after ``close()`` (and no listener runs after it);
- a partition a live member revoked or closed (auto commit, or a revoke listener that
  commits) starts at its next owner where it was revoked, and what the last owners closed
  at is what is committed at the end: no record handed out twice (unless that commit was
  refused, logged, because the group was rebalancing: then the records are read again);
- at the end a fresh consumer of the group starts at the committed offsets, and with what
  the group handed out before it covers every record produced (at least once).

Each run must move partitions between members, and the runs that abandon a member must see
its partitions taken over. Modes: auto commit only; auto commit with explicit commits
(and a revoke listener that commits); enable.auto.commit off with explicit commits (and a
revoke listener that commits); over the eager (range, roundrobin) and cooperative-sticky
assignors.

The members are sync ``Consumer``s, ``AsyncConsumer``s, or both in one group, the async runs
driven from one event loop (``_AsyncRun``: a sync member's calls run in a worker thread).
An AsyncConsumer runs its (coroutine) listener calls in its group task whenever the loop is
free, not inside the application's calls, so the model takes each call's updates under a
lock and checks instead that no record of a partition is handed out while its assigned or
revoked call runs; an abandoned async member takes part in rebalances until
max.poll.interval.ms, when its on_partitions_lost runs at once (it needs no call) and it
leaves the group. Async-only steps: a ``getmany()`` that waits while the driver commits,
seeks, pauses or resumes, and ``close()`` while a ``getmany()`` waits.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
import threading
import time
from typing import Any

import pytest

from kontrakt._types import OffsetAndMetadata, TopicPartition
from kontrakt.clients import AsyncKafkaClient
from kontrakt.clients.consumer import AsyncConsumer, Consumer
from kontrakt.clients.producer import Producer
from kontrakt.errors import CommitFailedError, IllegalStateError
from kontrakt.protocol.records import RecordBatchBuilder
from kontrakt.testing import TansuBroker
from tests.integration.raw_ops import produce

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

PARTS = 4
PREFILL = 1000  # records per partition: the members stay behind the end
STEPS = 110
SESSION_MS = 2000
#: every live member makes a call at least this often (seconds): a member whose revoke
#: listener waits longer than Tansu holds the JoinGroup is left out of the generation
CALL_EVERY = 0.4


def _value(p: int, off: int) -> bytes:
    return b"%d-%d" % (p, off)


async def _prefill(bootstrap: str, topic: str) -> None:
    async with AsyncKafkaClient(bootstrap_servers=bootstrap) as client:
        for p in range(PARTS):
            off = 0
            while off < PREFILL:
                # Two batches: a produce takes Tansu ~30 ms.
                n = min(PREFILL - off, PREFILL // 2 + p)
                b = RecordBatchBuilder()
                for j in range(off, off + n):
                    b.append(0, None, _value(p, j))
                part = await produce(client, topic, p, b.build())
                assert part.error_code == 0, part
                off += n


class _CommitFailures(logging.Handler):
    """Collects the partitions of failed auto commits (GroupOffsets._commit_quietly)."""

    def __init__(self, into: set[str]) -> None:
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if msg.startswith("auto commit of "):
            self.into.update(re.findall(r"'([^']+)'", msg.split(" failed", 1)[0]))


class _Member:
    def __init__(self, name: str, consumer: Consumer[Any, Any] | AsyncConsumer[Any, Any]
                 ) -> None:
        self.name = name
        self.consumer = consumer
        self.is_async = isinstance(consumer, AsyncConsumer)
        #: partition -> next offset this member must hand out (None: not known yet, the
        #: partition was owned by two members at once)
        self.owned: dict[TopicPartition, int | None] = {}
        #: offsets handed out by this member's latest poll (not processed yet)
        self.pending: dict[TopicPartition, list[int]] = {}
        self.closed = False
        self.abandoned = False
        self.last_call = time.monotonic()
        #: partitions paused by the application (async steps)
        self.paused: set[TopicPartition] = set()
        #: partitions whose on_partitions_assigned / _revoked call is running: none of
        #: their records may be handed out meanwhile
        self.assigning: set[TopicPartition] = set()
        self.revoking: set[TopicPartition] = set()

    @property
    def sync(self) -> Consumer[Any, Any]:
        assert isinstance(self.consumer, Consumer)
        return self.consumer

    @property
    def aio(self) -> AsyncConsumer[Any, Any]:
        assert isinstance(self.consumer, AsyncConsumer)
        return self.consumer


class _Listener:
    """Rebalance listener of one member (plain methods: they run on the caller's thread).
    The consumer logs and swallows what a listener raises: a failed check is kept for the
    driver to raise after the call."""

    def __init__(self, run: _Run, member: _Member) -> None:
        self.run = run
        self.member = member

    def _checked(self, fn: Any, *args: Any, **kwargs: Any) -> None:
        try:
            fn(*args, **kwargs)
        except BaseException as exc:
            self.run.listener_errors.append(exc)
            raise

    def on_partitions_assigned(self, parts: set[TopicPartition]) -> None:
        self._checked(self.run.assigned, self.member, parts)

    def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
        self._checked(self.run.revoked, self.member, parts, lost=False)

    def on_partitions_lost(self, parts: set[TopicPartition]) -> None:
        self._checked(self.run.revoked, self.member, parts, lost=True)


class _Run:
    """The model of one run, and the members it drives."""

    def __init__(self, bootstrap: str, topic: str, seed: int, mode: str,
                 strategy: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.rnd = random.Random(seed)
        self.mode = mode
        self.auto = mode.startswith("auto")
        #: explicit commit()/commit_async() steps
        self.commits = mode != "auto"
        #: the revoke listener commits
        self.revoke_commits = mode.endswith("revoke")
        self.strategy = strategy
        self.group = f"g-{topic}-{mode}-{seed}"
        self.tps = [TopicPartition(topic, p) for p in range(PARTS)]
        self.end = {tp: PREFILL for tp in self.tps}
        self.handed: dict[TopicPartition, set[int]] = {tp: set() for tp in self.tps}
        self.processed: dict[TopicPartition, set[int]] = {tp: set() for tp in self.tps}
        #: the first offset of each partition not processed (commits may not pass it)
        self.prefix = {tp: 0 for tp in self.tps}
        self.last_committed: dict[TopicPartition, int] = {}
        #: partitions that two members owned at once (in the listeners' view)
        self.contested: set[TopicPartition] = set()
        self.members: list[_Member] = []
        self.log: list[str] = []
        self.async_commits: list[Any] = []
        self.async_errors: list[BaseException] = []
        self.refused = 0  # commits refused for a rebalance (CommitFailedError)
        self.listener_errors: list[BaseException] = []
        #: what the run exercised: partitions that changed owner, abandoned members whose
        #: partitions others took, records handed out more than once
        self.moves = 0
        self.evicted = 0
        self.duplicates = 0
        self.previous_owner: dict[TopicPartition, str] = {}
        #: partition -> the position a live member revoked it at, committed then (auto
        #: commit, after its next poll; or the revoke listener's commit): its next owner
        #: starts there, no record is handed out twice
        self.handoff: dict[TopicPartition, int] = {}
        self.handoffs = 0
        self.abandon = False  # whether the schedule may abandon a member
        #: partitions an abandoned async member lost, not taken by another member yet
        self.lost_by_abandoned: set[TopicPartition] = set()
        #: the model is updated by the driver, sync listeners on a sync member's calling
        #: thread and async listeners on the loop: each update is whole under this lock
        self.lock = threading.RLock()
        self.observer: Consumer[Any, Any] = Consumer(
            bootstrap_servers=bootstrap, group_id=self.group, enable_auto_commit=False)
        self.producer = Producer(bootstrap_servers=bootstrap, linger_ms=0)
        #: partitions named by an auto commit that failed (logged, not raised): the one on
        #: revocation or close() is refused while the group rebalances (a new generation),
        #: as with Kafka, and its records are read again: no hand-off is expected then
        self.refused_auto: set[str] = set()
        self.warnings = _CommitFailures(self.refused_auto)
        logging.getLogger("kontrakt.consumer.group").addHandler(self.warnings)

    # --- the model ---------------------------------------------------------------------

    def where(self) -> str:
        return " | ".join(self.log[-14:])

    def assigned(self, m: _Member, parts: set[TopicPartition]) -> None:
        """The sync listener's on_partitions_assigned (on the thread calling ``m``)."""
        with self.lock:
            self.assign_start(m, parts)
            got = m.sync.committed(list(parts), timeout=10) if parts else {}
            self.assign_done(m, parts, got)

    async def assigned_async(self, m: _Member, parts: set[TopicPartition]) -> None:
        """The async listener's (on the loop, in the member's group task): its await of
        committed() lets every other task run, this member's reads too."""
        with self.lock:
            self.assign_start(m, parts)
        got = await m.aio.committed(list(parts), timeout=10) if parts else {}
        with self.lock:
            self.assign_done(m, parts, got)

    def assign_start(self, m: _Member, parts: set[TopicPartition]) -> None:
        assert not m.closed, f"{m.name}: listener called after close(): {self.where()}"
        self.log.append(f"{m.name}+{sorted(tp.partition for tp in parts)}")
        for tp in parts:
            assert tp not in m.owned and tp not in m.assigning, \
                f"{m.name}: {tp} assigned twice: {self.where()}"
        m.assigning |= parts

    def assign_done(self, m: _Member, parts: set[TopicPartition],
                    got: dict[TopicPartition, OffsetAndMetadata | None]) -> None:
        assert not m.closed, f"{m.name}: listener ran on after close(): {self.where()}"
        m.assigning -= parts
        for tp in parts:
            others = [o.name for o in self.members if o is not m and tp in o.owned]
            if self.previous_owner.get(tp, m.name) != m.name:
                self.moves += 1
            self.previous_owner[tp] = m.name
            # (an abandoned async member loses its partitions before others get them)
            self.evicted += any(o.abandoned and not o.is_async for o in self.members
                                if o is not m and tp in o.owned)
            if tp in self.lost_by_abandoned:
                self.lost_by_abandoned.discard(tp)
                self.evicted += 1
            om = got[tp]
            start: int | None = 0 if om is None else om.offset
            if others:
                self.log.append(f"contested {tp.partition} {others}")
            if any(not o.abandoned or o.is_async for o in self.members if o.name in others):
                # A live member still owns it in its own view (left out of the generation
                # while its revoke listener waited for its next call): its late commits
                # may move the committed offset. An abandoned sync member commits nothing
                # more once its listener call waits for a call that never comes; an
                # abandoned async one's group task goes on (its listener calls run on the
                # loop) until max.poll.interval.ms.
                self.contested.add(tp)
                start = None
            moved_at = self.handoff.pop(tp, None)
            self.handoffs += moved_at is not None and start is not None
            assert start is None or moved_at is None or start == moved_at, \
                f"{m.name}: {tp} was revoked at {moved_at} but starts at the committed " \
                f"offset {start}: {self.where()}"
            m.owned[tp] = start

    def revoked(self, m: _Member, parts: set[TopicPartition], *, lost: bool) -> None:
        """The sync listener's on_partitions_revoked / _lost."""
        with self.lock:
            commits = self.revoke_start(m, parts, lost=lost)
            listener_committed = False
            if commits:
                try:
                    m.sync.commit(timeout=10)
                    listener_committed = True
                except CommitFailedError:
                    self.refused += 1
            self.revoke_done(m, parts, lost=lost, listener_committed=listener_committed)

    async def revoked_async(self, m: _Member, parts: set[TopicPartition], *, lost: bool
                            ) -> None:
        """The async listener's: its commit is awaited (other tasks run meanwhile)."""
        with self.lock:
            commits = self.revoke_start(m, parts, lost=lost)
        listener_committed = False
        if commits:
            try:
                await m.aio.commit(timeout=10)
                listener_committed = True
            except CommitFailedError:
                self.refused += 1
        with self.lock:
            self.revoke_done(m, parts, lost=lost, listener_committed=listener_committed)

    def revoke_start(self, m: _Member, parts: set[TopicPartition], *, lost: bool) -> bool:
        """Whether the listener commits now (all ``m`` handed out counts as processed)."""
        assert not m.closed, f"{m.name}: listener called after close(): {self.where()}"
        self.log.append(f"{m.name}{'~' if lost else '-'}{sorted(tp.partition for tp in parts)}")
        for tp in parts:
            assert tp in m.owned and tp not in m.revoking, \
                f"{m.name}: revoked {tp} it does not own: {self.where()}"
        m.revoking |= parts
        # Its commit (auto commit after its next poll: an abandoned one did not poll; or
        # this listener's) covered every record it handed out.
        if self.revoke_commits and not lost:
            self.processed_all(m)
            return True
        return False

    def revoke_done(self, m: _Member, parts: set[TopicPartition], *, lost: bool,
                    listener_committed: bool) -> None:
        assert not m.closed, f"{m.name}: listener ran on after close(): {self.where()}"
        m.revoking -= parts
        m.paused -= parts
        for tp in parts:
            at = m.owned.pop(tp)
            # An abandoned async member takes part in rebalances (its group task runs on)
            # but polls no more: its revocation's auto commit stops at the first record of
            # its last poll.
            unpolled = m.abandoned and (not m.is_async or bool(m.pending.get(tp)))
            auto_committed = self.auto and not unpolled and str(tp) not in self.refused_auto
            self.refused_auto.discard(str(tp))
            if lost and m.abandoned and m.is_async:
                self.lost_by_abandoned.add(tp)
            if lost or at is None or not (auto_committed or listener_committed):
                self.handoff.pop(tp, None)
            else:
                self.handoff[tp] = at

    def processed_all(self, m: _Member) -> None:
        """The application is done with every record ``m`` handed out."""
        with self.lock:
            for tp, offs in m.pending.items():
                done = self.processed[tp]
                done.update(offs)
                n = self.prefix[tp]
                while n in done:
                    n += 1
                self.prefix[tp] = n
            m.pending = {}

    def took(self, m: _Member, rec: Any, where: str) -> None:
        if self.listener_errors:  # (the listener call that failed ran inside this call)
            raise self.listener_errors[0]
        with self.lock:
            self._took(m, rec, where)

    def _took(self, m: _Member, rec: Any, where: str) -> None:
        tp = TopicPartition(rec.topic, rec.partition)
        off = rec.offset
        assert not m.closed, f"{where}: {m.name} handed out {tp}@{off} after close(): " \
                             f"{self.where()}"
        assert tp in m.owned, f"{where}: {m.name} handed out {tp}@{off} it does not own " \
                              f"(owns {sorted(t.partition for t in m.owned)}): {self.where()}"
        assert tp not in m.paused, f"{where}: {m.name} handed out {tp}@{off} paused: " \
                                   f"{self.where()}"
        assert tp not in m.assigning and tp not in m.revoking, \
            f"{where}: {m.name} handed out {tp}@{off} while its listener call for it " \
            f"runs: {self.where()}"
        want = m.owned[tp]
        assert want is None or off == want, \
            f"{where}: {m.name} handed out {tp}@{off}, expected {want}: {self.where()}"
        assert off < self.end[tp] and rec.value == _value(tp.partition, off), (where, rec)
        m.owned[tp] = off + 1
        self.duplicates += off in self.handed[tp]
        self.handed[tp].add(off)
        m.pending.setdefault(tp, []).append(off)

    def check_committed(self, where: str) -> dict[TopicPartition, int]:
        if self.listener_errors:
            raise self.listener_errors[0]
        got = self.observer.committed(self.tps, timeout=10)
        with self.lock:
            return self._check_committed(where, got)

    def _check_committed(self, where: str, got: dict[TopicPartition, OffsetAndMetadata | None]
                         ) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        for tp, om in got.items():
            if om is None:
                continue
            c = out[tp] = om.offset
            assert c <= self.prefix[tp], \
                f"{where}: committed {tp}@{c} passes a record not processed " \
                f"(first unprocessed {self.prefix[tp]}): {self.where()}"
            last = self.last_committed.get(tp)
            assert last is None or c >= last or tp in self.contested, \
                f"{where}: committed {tp} went back from {last} to {c}: {self.where()}"
            self.last_committed[tp] = c
        return out

    # --- the members ---------------------------------------------------------------------

    def stable(self) -> bool:
        """Whether the live members own every partition, each some (no rebalance on)."""
        live = self.live()
        owned = [tp for m in live for tp in m.owned]
        return all(m.owned for m in live) and sorted(owned) == self.tps

    def live(self) -> list[_Member]:
        return [m for m in self.members if not m.closed and not m.abandoned]

    def member_config(self) -> dict[str, Any]:
        return dict(
            bootstrap_servers=self.bootstrap, group_id=self.group,
            session_timeout_ms=SESSION_MS, heartbeat_interval_ms=100,
            max_poll_interval_ms=2500, auto_offset_reset="earliest",
            enable_auto_commit=self.auto, auto_commit_interval_ms=self.rnd.choice((200, 1000)),
            fetch_max_wait_ms=50, partition_assignment_strategy=self.strategy,
            max_partition_fetch_bytes=self.rnd.choice((200, 1 << 20)))

    def join(self) -> _Member:
        name = f"m{len(self.members)}"
        c: Consumer[Any, Any] = Consumer(**self.member_config())
        m = _Member(name, c)
        self.members.append(m)
        c.subscribe([self.topic], listener=_Listener(self, m))
        self.log.append(f"{name} joins")
        return m

    def poll(self, m: _Member, op: str) -> None:
        c = m.sync
        self.processed_all(m)  # each poll: the records of the one before are processed
        m.last_call = time.monotonic()
        if op == "poll":
            rec = c.poll(0.1)
            if rec is not None:
                self.took(m, rec, f"{m.name} poll")
        elif op == "polls":
            for _ in range(self.rnd.randint(2, 10)):
                rec = c.poll(0.05)
                if rec is None:
                    break
                self.took(m, rec, f"{m.name} polls")
                self.processed_all(m)
        elif op in ("getmany", "settle"):
            # (settling: one record a call, so that members stay behind the end and a
            # revocation that does not commit shows)
            got = c.getmany(0.1, max_records=1 if op == "settle" else
                            self.rnd.choice((1, 3, 10)))
            for recs in got.values():
                for rec in recs:
                    self.took(m, rec, f"{m.name} getmany")
        else:
            for rec in c.consume(self.rnd.choice((1, 5)), 0.1):
                self.took(m, rec, f"{m.name} consume")
        m.last_call = time.monotonic()

    def quiet(self, m: _Member) -> list[TopicPartition]:
        """Pause the async member's settled partitions (none being assigned or revoked)
        before a race, so that what it reads meanwhile is known; returns them."""
        with self.lock:
            parts = sorted(set(m.owned) - m.paused - m.assigning - m.revoking)
            if parts:
                m.aio.pause(*parts)
                m.paused.update(parts)
                self.log.append(f"  task: quiet {[tp.partition for tp in parts]}")
        return parts

    def commit_done(self, _offsets: dict[TopicPartition, OffsetAndMetadata],
                    err: BaseException | None) -> None:
        """commit_async()'s callback: a refusal during a rebalance is allowed."""
        if err is not None and not isinstance(err, CommitFailedError):
            self.async_errors.append(err)

    def commit(self, m: _Member, asynchronous: bool) -> None:
        self.processed_all(m)
        m.last_call = time.monotonic()
        if asynchronous:
            self.async_commits.append(m.sync.commit_async(callback=self.commit_done))
            return
        try:
            m.sync.commit(timeout=10)
        except CommitFailedError:
            self.refused += 1

    def close(self, m: _Member) -> None:
        self.log.append(f"{m.name} closes")
        if self.auto:
            self.processed_all(m)  # close() commits every record handed out
        m.sync.close(timeout=10)
        m.closed = True
        m.owned = {}
        with pytest.raises(IllegalStateError):
            m.sync.poll(0)

    def produce(self) -> None:
        futs = []
        for _ in range(self.rnd.randint(1, 8)):
            tp = self.rnd.choice(self.tps)
            futs.append((tp, self.end[tp], self.producer.send(
                self.topic, _value(tp.partition, self.end[tp]), partition=tp.partition)))
            self.end[tp] += 1
        self.producer.flush(10)
        for tp, off, fut in futs:
            assert fut.result(10).offset == off, (tp, off)

    # --- the schedule --------------------------------------------------------------------

    def choose(self, i: int) -> tuple[str, _Member]:
        """The step ``i``: an operation and the member that makes it (logged)."""
        rnd = self.rnd
        live = self.live()
        stale = [m for m in live if time.monotonic() - m.last_call > CALL_EVERY]
        if stale:
            m = stale[0]
            op = rnd.choice(("poll", "getmany"))
            self.log.append(f"{i} {m.name} {op}!")
            return op, m
        ops = ["poll", "polls", "getmany", "consume", "produce", "idle"]
        weights = [6, 3, 5, 3, 2, 1]
        if self.commits:
            ops += ["commit", "commit_async"]
            weights += [2, 2]
        # Members join and leave only while the group is stable: once every member of a
        # rebalance in progress has left (some of them while Tansu held their JoinGroup),
        # Tansu never completes a JoinGroup of the group again (confluent-kafka members
        # alike), and a member closing mid-join makes the others' join take seconds.
        stable = self.stable()
        if stable and len(live) < 3 and len(self.members) < 5:
            ops.append("join")
            weights.append(2)
        if stable and len(live) > 1:
            ops.append("close")
            weights.append(2)
            if self.abandon and not any(m.abandoned for m in self.members):
                ops.append("abandon")
                weights.append(1 if i < STEPS // 3 else 100)
        self.more_ops(ops, weights, stable and len(live) > 1)
        op = rnd.choices(ops, weights)[0]
        m = rnd.choice(live)
        self.log.append(f"{i} {m.name} {op}")
        return op, m

    def more_ops(self, ops: list[str], weights: list[int], may_close: bool) -> None:
        """Operations of the async driver only."""

    def step(self, i: int) -> None:
        op, m = self.choose(i)
        if op in ("poll", "polls", "getmany", "consume"):
            self.poll(m, op)
        elif op in ("commit", "commit_async"):
            self.commit(m, op == "commit_async")
        elif op == "produce":
            self.produce()
        elif op == "idle":
            time.sleep(0.1)
        elif op == "join":
            self.join()
        elif op == "close":
            self.close(m)
        elif op == "abandon":
            m.abandoned = True

    def run(self, abandon: bool) -> None:
        self.abandon = abandon
        self.join()
        self.join()
        for i in range(STEPS):
            self.step(i)
            self.check_committed(f"step {i}")
        # Until the run has moved a partition between members and, when it abandons one,
        # seen the group evict it (max.poll.interval.ms, then session.timeout.ms without
        # heartbeats: its listener call waits for a call that never comes) and its
        # partitions taken over.
        deadline = time.monotonic() + 20
        i = STEPS
        while (todo := self.settling(i, deadline)) is not None:
            op, m = todo
            if op == "join":
                self.join()
            elif op == "abandon":
                m.abandoned = True
            elif op == "close":
                self.close(m)
            else:
                self.poll(m, "settle")
                time.sleep(0.02)
            self.check_committed(f"step {i}")
            i += 1
        # The end: everyone closes (the abandoned member last, long after it was left out).
        for m in self.live() + [m for m in self.members if m.abandoned]:
            if not m.closed:
                self.close(m)
        for fut in self.async_commits:
            fut.exception(10)  # done (their errors go to the callback)
        assert not self.async_errors, self.async_errors
        final = self.check_committed("closed")
        for tp, at in self.handoff.items():  # what the last owners committed
            assert final.get(tp) == at, \
                f"{tp} committed {final.get(tp)} after its owner closed at {at}: {self.where()}"
        self.produce()
        self.fresh_member(final)

    def settling(self, i: int, deadline: float) -> tuple[str, _Member] | None:
        """The step ``i`` after the random ones (logged), None when the run is done."""
        live = self.live()
        stable = self.stable()
        abandoned = any(m.abandoned for m in self.members)
        if stable and self.moves and (self.evicted or not self.abandon):
            return None
        assert time.monotonic() < deadline, \
            f"no moves or no eviction: {self.where()} ## members: " + "; ".join(
                f"{m.name}{' async' if m.is_async else ''}{' closed' if m.closed else ''}"
                f"{' abandoned' if m.abandoned else ''} owns "
                f"{sorted(tp.partition for tp in m.owned)}" for m in self.members) + \
            " ## before settling: " + " | ".join(
                x for x in self.log if "settle" not in x)[-3000:]
        if stable and len(live) == 1 and (not self.moves or (not abandoned and self.abandon)):
            self.log.append(f"{i} join")
            return "join", live[0]
        if stable and self.abandon and not abandoned:
            self.log.append(f"{i} {live[-1].name} abandon")
            return "abandon", live[-1]
        if stable and not self.moves:
            self.log.append(f"{i} {live[-1].name} close")
            return "close", live[-1]
        m = min(live, key=lambda m: m.last_call)
        self.log.append(f"{i} {m.name} settle")
        return "settle", m

    def fresh_member(self, committed: dict[TopicPartition, int]) -> None:
        """A fresh consumer of the group starts at the committed offsets and reads to the
        end; with what the group handed out before, every record was handed out.

        It takes the partitions with assign() (the committed offsets are where it starts):
        after every member left while Tansu held a JoinGroup, Tansu never completes
        another JoinGroup of the group (confluent-kafka members alike)."""
        got: dict[TopicPartition, list[int]] = {tp: [] for tp in self.tps}
        with Consumer(bootstrap_servers=self.bootstrap, group_id=self.group,
                      auto_offset_reset="earliest", fetch_max_wait_ms=50,
                      enable_auto_commit=False) as c:
            c.assign(self.tps)
            deadline = time.monotonic() + 10
            while any(len(got[tp]) < self.end[tp] - committed.get(tp, 0) for tp in self.tps):
                assert time.monotonic() < deadline, (committed, self.end,
                                                     {tp: v[-1:] for tp, v in got.items()})
                for tp, recs in c.getmany(0.2, max_records=500).items():
                    got[tp].extend(r.offset for r in recs)
        for tp in self.tps:
            start = committed.get(tp, 0)
            assert got[tp] == list(range(start, self.end[tp])), \
                f"fresh consumer: {tp} from committed {start}: {got[tp][:5]}..."
            missed = set(range(start)) - self.handed[tp]
            assert not missed, f"{tp}: records below the committed offset {start} were " \
                               f"never handed out: {sorted(missed)[:10]}"

    def close_all(self) -> None:
        for m in self.members:
            if not m.closed:
                m.closed = True
                m.sync.close(timeout=5)
        self.observer.close(timeout=5)
        logging.getLogger("kontrakt.consumer.group").removeHandler(self.warnings)
        self.producer.close(5)

class _AsyncListener:
    """Rebalance listener of an async member: coroutine functions, run on the loop by the
    member's group task whenever the group needs them (not inside the application's
    calls); the on_partitions_revoked of the revoke modes awaits a commit."""

    def __init__(self, run: _Run, member: _Member) -> None:
        self.run = run
        self.member = member

    async def _checked(self, coro: Any) -> None:
        try:
            await coro
        except asyncio.CancelledError:
            self.run.listener_errors.append(AssertionError(
                f"{self.member.name}: a listener call was cancelled: {self.run.where()}"))
            raise
        except BaseException as exc:
            self.run.listener_errors.append(exc)
            raise

    async def on_partitions_assigned(self, parts: set[TopicPartition]) -> None:
        await self._checked(self.run.assigned_async(self.member, parts))

    async def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
        await self._checked(self.run.revoked_async(self.member, parts, lost=False))

    async def on_partitions_lost(self, parts: set[TopicPartition]) -> None:
        await self._checked(self.run.revoked_async(self.member, parts, lost=True))


class _AsyncRun(_Run):
    """The same schedule and model driven from one event loop, with async members
    (``kinds`` "async") or async and sync ones in one group ("mixed"; a sync member's
    calls run in a worker thread, its listeners inside them, while the loop runs on).

    An AsyncConsumer runs its listener calls in its group task on the loop, at any moment
    the loop is free (while any task awaits), not inside the application's calls: the
    model takes each listener call's updates under the run's lock, and checks that no
    record of a partition is handed out while its assigned or revoked call runs (and that
    none is handed out of a partition the application paused). An abandoned async member
    keeps taking part in rebalances (its group task runs on) until max.poll.interval.ms,
    when its on_partitions_lost runs at once (no call needed) and it leaves the group.

    Its own steps: a getmany() that waits while the driver commits, seeks (to the
    position, or back to the first record not processed), pauses or resumes one of the
    member's partitions; and close() while a getmany() waits (that getmany returns, or
    raises IllegalStateError, by the time close() returns)."""

    def __init__(self, bootstrap: str, topic: str, seed: int, mode: str, strategy: str,
                 kinds: str) -> None:
        super().__init__(bootstrap, topic, seed, mode, strategy)
        self.kinds = kinds
        self.tasks: list[asyncio.Task[None]] = []
        #: partitions an async member sought back: what its revocation commits may be the
        #: position before the seek (the revocation took it first)
        self.sought: set[tuple[str, TopicPartition]] = set()
        self.races = 0

    def revoke_done(self, m: _Member, parts: set[TopicPartition], *, lost: bool,
                    listener_committed: bool) -> None:
        super().revoke_done(m, parts, lost=lost, listener_committed=listener_committed)
        for tp in parts:
            if (m.name, tp) in self.sought:
                self.sought.discard((m.name, tp))
                self.handoff.pop(tp, None)

    async def ajoin(self) -> _Member:
        is_async = self.kinds == "async" or (
            len(self.members) % 2 == 1 if len(self.members) < 2 else self.rnd.random() < 0.5)
        if not is_async:
            return await asyncio.to_thread(self.join)
        name = f"m{len(self.members)}"
        c: AsyncConsumer[Any, Any] = AsyncConsumer(**self.member_config())
        m = _Member(name, c)
        self.members.append(m)
        c.subscribe([self.topic], listener=_AsyncListener(self, m))
        await c.start()
        self.log.append(f"{name} joins (async)")
        return m

    async def apoll(self, m: _Member, op: str) -> None:
        if not m.is_async:
            await asyncio.to_thread(self.poll, m, op)
            return
        c = m.aio
        self.processed_all(m)  # each poll: the records of the one before are processed
        m.last_call = time.monotonic()
        if op == "poll":
            rec = await c.poll(0.1)
            if rec is not None:
                self.took(m, rec, f"{m.name} poll")
        elif op == "polls":
            for _ in range(self.rnd.randint(2, 10)):
                rec = await c.poll(0.05)
                if rec is None:
                    break
                self.took(m, rec, f"{m.name} polls")
                self.processed_all(m)
        elif op in ("getmany", "settle"):
            got = await c.getmany(0.1, max_records=1 if op == "settle" else
                                  self.rnd.choice((1, 3, 10)))
            for recs in got.values():
                for rec in recs:
                    self.took(m, rec, f"{m.name} getmany")
        else:
            for rec in await c.consume(self.rnd.choice((1, 5)), 0.1):
                self.took(m, rec, f"{m.name} consume")
        m.last_call = time.monotonic()

    async def acommit(self, m: _Member, asynchronous: bool) -> None:
        if not m.is_async:
            await asyncio.to_thread(self.commit, m, asynchronous)
            return
        self.processed_all(m)
        m.last_call = time.monotonic()
        if asynchronous:
            self.tasks.append(m.aio.commit_async(callback=self.commit_done))
            return
        try:
            await m.aio.commit(timeout=10)
        except CommitFailedError:
            self.refused += 1

    async def aclose(self, m: _Member) -> None:
        if not m.is_async:
            await asyncio.to_thread(self.close, m)
            return
        self.log.append(f"{m.name} closes")
        assert not (m.abandoned and m.owned), \
            f"{m.name}: abandoned, its on_partitions_lost did not run: {self.where()}"
        if self.auto:
            self.processed_all(m)  # close() commits every record handed out
        await m.aio.close(timeout=10)
        with self.lock:
            if self.auto:
                # (also those a getmany waiting meanwhile took before close() paused them)
                self.processed_all(m)
            m.closed = True
            m.owned = {}
        with pytest.raises(IllegalStateError):
            await m.aio.poll(0)

    def more_ops(self, ops: list[str], weights: list[int], may_close: bool) -> None:
        ops.append("race")
        weights.append(5)
        if may_close:
            ops.append("close-race")
            weights.append(1)

    async def race(self, m: _Member) -> None:
        """A getmany() waits while the driver commits, seeks, pauses or resumes. The
        member's partitions are behind their ends (records are buffered): half of the
        races pause all of them first, so that the getmany waits for the step (a resume
        or a seek lets it return), and resume them after it."""
        c = m.aio
        rnd = self.rnd
        self.processed_all(m)
        m.last_call = time.monotonic()
        wait = rnd.choice((0.1, 0.3))
        quiet: list[TopicPartition] = []
        if rnd.random() < 0.5:
            quiet = self.quiet(m)

        async def read() -> None:
            got = await c.getmany(wait, max_records=rnd.choice((1, 3, 10)))
            for recs in got.values():
                for rec in recs:
                    self.took(m, rec, f"{m.name} getmany (raced)")

        reader = asyncio.create_task(read())
        await asyncio.sleep(rnd.uniform(0, wait))
        self.races += not reader.done()
        act = rnd.choice(("commit", "commit_async", "seek", "pause", "resume", "resume"))
        if act in ("commit", "commit_async"):
            self.log.append(f"  task: {act}")
            await self.acommit(m, act == "commit_async")
        else:
            with self.lock:
                busy = m.assigning | m.revoking
                if act == "resume":
                    cands = sorted(m.paused - busy)
                elif act == "pause":
                    cands = sorted(set(m.owned) - m.paused - busy)
                else:
                    cands = sorted(tp for tp, at in m.owned.items()
                                   if at is not None and tp not in busy)
                if cands:
                    tp = rnd.choice(cands)
                    if act == "resume":
                        c.resume(tp)
                        m.paused.discard(tp)
                    elif act == "pause":
                        c.pause(tp)
                        m.paused.add(tp)
                    else:
                        at = m.owned[tp]
                        assert at is not None
                        to = rnd.choice((at, min(at, self.prefix[tp])))
                        c.seek(tp, to)
                        m.owned[tp] = to
                        if to < at:
                            # Records handed out again: a later commit may be below one
                            # made before (by the application's will), not below ``to``.
                            self.sought.add((m.name, tp))
                            last = self.last_committed.get(tp)
                            if last is not None:
                                self.last_committed[tp] = min(last, to)
                    self.log.append(f"  task: {act} {tp.partition}"
                                    + (f" {m.owned[tp]}" if act == "seek" else ""))
        await reader
        if quiet:
            with self.lock:
                back = sorted(m.paused & set(quiet))
                if back:
                    c.resume(*back)
                    m.paused -= set(back)
        m.last_call = time.monotonic()

    async def close_race(self, m: _Member, *, quiet: bool = False) -> bool:
        """close() while a getmany() waits (mostly, or ``quiet``, with every partition of
        the member paused first: they are behind their ends, a getmany returns at once).

        Returns:
            Whether the getmany was still waiting when close() began.
        """
        c = m.aio
        raised: list[BaseException] = []
        if quiet or self.rnd.random() < 0.7:
            self.quiet(m)

        async def read() -> None:
            try:
                got = await c.getmany(2.0, max_records=self.rnd.choice((1, 10)))
            except IllegalStateError as exc:
                raised.append(exc)
                return
            for recs in got.values():
                for rec in recs:
                    self.took(m, rec, f"{m.name} getmany (closing)")

        self.processed_all(m)
        reader = asyncio.create_task(read())
        await asyncio.sleep(self.rnd.uniform(0, 0.1))
        waiting = not reader.done()
        self.races += waiting
        await self.aclose(m)
        done, _ = await asyncio.wait([reader], timeout=0.5)
        assert reader in done, f"{m.name}: a getmany waiting when close() returned goes " \
                               f"on: {self.where()}"
        reader.result()
        self.log.append(f"  {m.name}'s getmany {'raised' if raised else 'returned'}")
        return waiting

    async def perform(self, op: str, m: _Member) -> None:
        if op in ("race", "close-race") and not m.is_async:
            op = "getmany"
        if op in ("poll", "polls", "getmany", "consume"):
            await self.apoll(m, op)
        elif op in ("commit", "commit_async"):
            await self.acommit(m, op == "commit_async")
        elif op == "produce":
            await asyncio.to_thread(self.produce)
        elif op == "idle":
            await asyncio.sleep(0.1)
        elif op == "join":
            await self.ajoin()
        elif op == "close":
            await self.aclose(m)
        elif op == "abandon":
            m.abandoned = True
        elif op == "race":
            await self.race(m)
        elif op == "close-race":
            await self.close_race(m)

    async def acheck_committed(self, where: str) -> dict[TopicPartition, int]:
        if self.listener_errors:
            raise self.listener_errors[0]
        got = await asyncio.to_thread(self.observer.committed, self.tps, timeout=10)
        with self.lock:
            return self._check_committed(where, got)

    async def arun(self, abandon: bool) -> None:
        self.abandon = abandon
        await self.ajoin()
        await self.ajoin()
        for i in range(STEPS):
            op, m = self.choose(i)
            await self.perform(op, m)
            await self.acheck_committed(f"step {i}")
        for m in self.live():  # (a paused partition would not move on)
            if m.is_async and m.paused:
                m.aio.resume(*m.paused)
                m.paused = set()
        deadline = time.monotonic() + 20
        i = STEPS
        while (todo := self.settling(i, deadline)) is not None:
            op, m = todo
            if op == "join":
                await self.ajoin()
            elif op == "abandon":
                m.abandoned = True
            elif op == "close":
                await self.aclose(m)
            else:
                await self.apoll(m, "settle")
                await asyncio.sleep(0.02)
            await self.acheck_committed(f"step {i}")
            i += 1
        # The live async members close while a getmany waits: the first in a stable group
        # (the others may be given partitions meanwhile, which a getmany returns at once).
        first = True
        for m in self.live() + [m for m in self.members if m.abandoned]:
            if m.closed:
                continue
            if m.is_async and not m.abandoned:
                waited = await self.close_race(m, quiet=True)
                assert waited or not first, \
                    f"{m.name}: its getmany did not wait for close(): {self.where()}"
                first = False
            else:
                await self.aclose(m)
        for fut in self.async_commits:
            await asyncio.to_thread(fut.exception, 10)
        if self.tasks:
            await asyncio.wait(self.tasks, timeout=10)
            assert all(t.done() for t in self.tasks)
        assert not self.async_errors, self.async_errors
        final = await self.acheck_committed("closed")
        for tp, at in self.handoff.items():  # what the last owners committed
            assert final.get(tp) == at, \
                f"{tp} committed {final.get(tp)} after its owner closed at {at}: {self.where()}"
        await asyncio.to_thread(self.produce)
        await asyncio.to_thread(self.fresh_member, final)

    async def aclose_all(self) -> None:
        for m in self.members:
            if not m.closed:
                m.closed = True
                if m.is_async:
                    await m.aio.close(timeout=5)
                else:
                    await asyncio.to_thread(m.sync.close, timeout=5)
        for t in self.tasks:
            t.cancel()
        await asyncio.to_thread(self.close_all)


CASES = [
    # (mode, strategy, seed, abandon, members: sync, async or mixed)
    ("auto", "range", 1, True, "sync"),
    ("auto-commit", "cooperative-sticky", 2, False, "sync"),
    ("manual-revoke", "range", 3, True, "sync"),
    ("manual", "roundrobin", 4, False, "sync"),
    ("auto-revoke", "cooperative-sticky", 5, True, "sync"),
    ("auto-commit", "range", 11, True, "async"),
    ("manual-revoke", "cooperative-sticky", 12, True, "async"),
    ("auto-revoke", "roundrobin", 13, False, "mixed"),
    ("auto", "cooperative-sticky", 14, True, "mixed"),
]


@pytest.mark.parametrize(("mode", "strategy", "seed", "abandon", "members"), CASES)
def test_group_rebalances_match_model(tansu_broker: TansuBroker, mode: str, strategy: str,
                                      seed: int, abandon: bool, members: str) -> None:
    """``mode``: auto (auto commit only); auto-commit (auto commit and explicit commits);
    auto-revoke (auto commit, explicit commits, the revoke listener commits too);
    manual (enable.auto.commit off, explicit commits); manual-revoke (and the revoke
    listener commits). ``members``: sync (Consumer), async (AsyncConsumer, on one loop)
    or mixed (both in one group, see ``_AsyncRun``)."""
    topic = f"group-differential-{random.Random().getrandbits(40):x}"
    tansu_broker.create_topic(topic, PARTS)
    asyncio.run(_prefill(tansu_broker.bootstrap_servers, topic))
    if members == "sync":
        run = _Run(tansu_broker.bootstrap_servers, topic, seed, mode, strategy)
        try:
            run.run(abandon)
        finally:
            run.close_all()
        return

    async def main() -> None:
        arun = _AsyncRun(tansu_broker.bootstrap_servers, topic, seed, mode, strategy,
                         members)
        try:
            await arun.arun(abandon)
        finally:
            await arun.aclose_all()
        assert arun.races or members == "mixed", "no step raced a waiting getmany"

    asyncio.run(main())


@pytest.mark.parametrize(("how", "commit"), [("assign", "commit"),
                                              ("subscribe", "commit_async")])
def test_auto_commit_does_not_undo_an_explicit_commit(tansu_broker: TansuBroker, how: str,
                                                      commit: str) -> None:
    """commit() says every record handed out is processed: a timed auto commit before the
    next poll must not commit the first record of the latest poll again (which moved the
    committed offset back, and those records were read twice after a rebalance)."""
    topic = f"group-differential-{random.Random().getrandbits(40):x}"
    tansu_broker.create_topic(topic, PARTS)
    asyncio.run(_prefill(tansu_broker.bootstrap_servers, topic))
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=tansu_broker.bootstrap_servers, group_id=f"g-{topic}",
                  session_timeout_ms=SESSION_MS, heartbeat_interval_ms=100,
                  auto_offset_reset="earliest", auto_commit_interval_ms=50,
                  fetch_max_wait_ms=50) as c:
        if how == "assign":
            c.assign([tp])
        else:
            c.subscribe([topic])
        got: list[int] = []
        deadline = time.monotonic() + 10
        while len(got) < 10:
            assert time.monotonic() < deadline, got
            got.extend(r.offset for r in c.getmany(0.2, max_records=10 - len(got)).get(tp, []))
        position = c.position(tp)
        if commit == "commit":
            c.commit(timeout=10)
        else:
            c.commit_async().result(10)
        assert c.committed(tp, timeout=10) == position
        time.sleep(0.3)  # timed auto commits, no poll
        assert c.committed(tp, timeout=10) == position


def test_close_after_a_lost_assignment_neither_revokes_nor_commits(
        tansu_broker: TansuBroker) -> None:
    """A member that stopped calling the consumer for max.poll.interval.ms loses its
    partitions; the on_partitions_lost call waits for its next call. When that call is
    close(), the partitions are lost once: close() neither commits them (the group has
    moved on) nor calls on_partitions_revoked for them afterwards."""
    topic = f"group-differential-{random.Random().getrandbits(40):x}"
    tansu_broker.create_topic(topic, PARTS)
    asyncio.run(_prefill(tansu_broker.bootstrap_servers, topic))
    group = f"g-{topic}"
    events: list[tuple[str, int]] = []

    class Listener:
        def on_partitions_assigned(self, parts: set[TopicPartition]) -> None:
            events.append(("assigned", len(parts)))

        def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
            events.append(("revoked", len(parts)))

        def on_partitions_lost(self, parts: set[TopicPartition]) -> None:
            events.append(("lost", len(parts)))

    c: Consumer[Any, Any] = Consumer(
        bootstrap_servers=tansu_broker.bootstrap_servers, group_id=group,
        session_timeout_ms=SESSION_MS, heartbeat_interval_ms=100, max_poll_interval_ms=1000,
        auto_offset_reset="earliest", auto_commit_interval_ms=600_000, fetch_max_wait_ms=50)
    try:
        c.subscribe([topic], listener=Listener())
        deadline = time.monotonic() + 10
        n = 0
        while n < 10:
            assert time.monotonic() < deadline, events
            n += len(c.consume(10, 0.2))
        time.sleep(1.5)  # no call: max.poll.interval.ms passes
    finally:
        c.close(timeout=10)
    assert events == [("assigned", PARTS), ("lost", PARTS)]
    with Consumer(bootstrap_servers=tansu_broker.bootstrap_servers, group_id=group,
                  enable_auto_commit=False) as other:
        got = other.committed([TopicPartition(topic, p) for p in range(PARTS)], timeout=10)
    assert all(om is None for om in got.values()), got


def test_a_listener_call_does_not_run_inside_another(tansu_broker: TansuBroker) -> None:
    """A sync listener that makes a blocking call (here committed()) finishes before the
    next listener call runs, also inside close(), which runs a pending assignment's call
    and queues the revocation meanwhile."""
    topic = f"group-differential-{random.Random().getrandbits(40):x}"
    tansu_broker.create_topic(topic, PARTS)
    events: list[str] = []
    c: Consumer[Any, Any] = Consumer(
        bootstrap_servers=tansu_broker.bootstrap_servers, group_id=f"g-{topic}",
        session_timeout_ms=SESSION_MS, heartbeat_interval_ms=100, fetch_max_wait_ms=50)

    class Listener:
        def on_partitions_assigned(self, parts: set[TopicPartition]) -> None:
            events.append("assigned")
            c.committed(list(parts), timeout=10)
            events.append("assigned done")

        def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
            events.append("revoked")

    try:
        c.subscribe([topic], listener=Listener())
        assert c.poll(0.1) is None  # started; not joined yet (~1 s)
        assert not events
        time.sleep(1.6)  # joined meanwhile: the assignment's call waits for a call
    finally:
        c.close(timeout=10)
    assert events == ["assigned", "assigned done", "revoked"]


@pytest.mark.parametrize("during", ["assigned", "revoked"])
def test_close_waits_for_an_async_listener_call(tansu_broker: TansuBroker, during: str
                                                ) -> None:
    """An AsyncConsumer runs listener calls in its group task; close() while one awaits
    (here on_partitions_assigned awaiting a lookup, or on_partitions_revoked awaiting its
    final commit) lets it finish before revoking, as the sync Consumer does: it is not
    cancelled, and the revoke listener's commit is made (else the next owner reads again
    what this member processed)."""
    topic = f"group-differential-{random.Random().getrandbits(40):x}"
    tansu_broker.create_topic(topic, PARTS)
    asyncio.run(_prefill(tansu_broker.bootstrap_servers, topic))
    cfg: dict[str, Any] = dict(
        bootstrap_servers=tansu_broker.bootstrap_servers, group_id=f"g-{topic}",
        session_timeout_ms=SESSION_MS, heartbeat_interval_ms=100, fetch_max_wait_ms=50,
        auto_offset_reset="earliest", enable_auto_commit=False)
    events: list[str] = []
    tps = [TopicPartition(topic, p) for p in range(PARTS)]

    async def main() -> dict[TopicPartition, int]:
        inside = asyncio.Event()
        c: AsyncConsumer[Any, Any] = AsyncConsumer(**cfg)

        class Listener:
            async def on_partitions_assigned(self, parts: set[TopicPartition]) -> None:
                events.append("assigned")
                if during == "assigned":
                    inside.set()
                    await asyncio.sleep(0.3)  # (a lookup, say)
                    await c.committed(list(parts), timeout=10)
                events.append("assigned done")

            async def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
                events.append("revoked")
                if during == "revoked" and not inside.is_set():
                    inside.set()
                    await asyncio.sleep(0.3)
                    await c.commit(timeout=10)
                events.append("revoked done")

        other: AsyncConsumer[Any, Any] = AsyncConsumer(**cfg)
        try:
            c.subscribe([topic], listener=Listener())
            positions: dict[TopicPartition, int] = {}
            if during == "revoked":
                deadline = time.monotonic() + 10
                while len(positions) < PARTS:
                    assert time.monotonic() < deadline, events
                    for tp, recs in (await c.getmany(0.1, max_records=40)).items():
                        positions[tp] = recs[-1].offset + 1
                other.subscribe([topic])  # a rebalance: c revokes everything
                await other.start()
            deadline = time.monotonic() + 10
            while not inside.is_set():
                assert time.monotonic() < deadline, events
                for tp, recs in (await c.getmany(0.05, max_records=40)).items():
                    positions[tp] = recs[-1].offset + 1
            await c.close(timeout=10)
            events.append("closed")
        finally:
            await other.close(timeout=5)
        return positions

    positions = asyncio.run(main())
    assert events == ["assigned", "assigned done", "revoked", "revoked done", "closed"], events
    with Consumer(bootstrap_servers=tansu_broker.bootstrap_servers, group_id=f"g-{topic}",
                  enable_auto_commit=False) as observer:
        got = observer.committed(tps, timeout=10)
    assert {tp: om.offset for tp, om in got.items() if om is not None} == positions


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_unsubscribe_revokes_and_commits(tansu_broker: TansuBroker, kind: str) -> None:
    """unsubscribe() says it leaves the group revoking the partitions: the listener's
    on_partitions_revoked is called for them and (enable.auto.commit) every record handed
    out is committed, as by close() (kontrakt's _give_up_membership), else the next owner
    reads it again and a listener's final commit never happens."""
    topic = f"group-differential-{random.Random().getrandbits(40):x}"
    tansu_broker.create_topic(topic, PARTS)
    asyncio.run(_prefill(tansu_broker.bootstrap_servers, topic))
    cfg: dict[str, Any] = dict(
        bootstrap_servers=tansu_broker.bootstrap_servers, group_id=f"g-{topic}",
        session_timeout_ms=SESSION_MS, heartbeat_interval_ms=100, fetch_max_wait_ms=50,
        auto_offset_reset="earliest", auto_commit_interval_ms=600_000)
    events: list[tuple[str, int]] = []
    tps = [TopicPartition(topic, p) for p in range(PARTS)]
    positions: dict[TopicPartition, int] = {}

    def took(got: dict[TopicPartition, list[Any]]) -> None:
        for tp, recs in got.items():
            positions[tp] = recs[-1].offset + 1

    if kind == "sync":
        class Listener:
            def on_partitions_assigned(self, parts: set[TopicPartition]) -> None:
                events.append(("assigned", len(parts)))

            def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
                events.append(("revoked", len(parts)))

        with Consumer(**cfg) as c:
            c.subscribe([topic], listener=Listener())
            deadline = time.monotonic() + 10
            while len(positions) < PARTS:
                assert time.monotonic() < deadline, events
                took(c.getmany(0.1, max_records=40))
            # Handed out before unsubscribe(): committed too (as by close(), and as
            # librdkafka commits the offsets stored when records are handed out).
            took(c.getmany(0))
            c.unsubscribe()
            deadline = time.monotonic() + 3
            while len(events) < 2 and time.monotonic() < deadline:
                assert not c.getmany(0.1)
    else:
        class AsyncListener:
            async def on_partitions_assigned(self, parts: set[TopicPartition]) -> None:
                events.append(("assigned", len(parts)))

            async def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
                events.append(("revoked", len(parts)))

        async def main() -> None:
            async with AsyncConsumer(**cfg) as c:
                c.subscribe([topic], listener=AsyncListener())
                deadline = time.monotonic() + 10
                while len(positions) < PARTS:
                    assert time.monotonic() < deadline, events
                    took(await c.getmany(0.1, max_records=40))
                took(await c.getmany(0))
                c.unsubscribe()
                deadline = time.monotonic() + 3
                while len(events) < 2 and time.monotonic() < deadline:
                    assert not await c.getmany(0.1)

        asyncio.run(main())
    assert events == [("assigned", PARTS), ("revoked", PARTS)], events
    with Consumer(bootstrap_servers=tansu_broker.bootstrap_servers, group_id=f"g-{topic}",
                  enable_auto_commit=False) as observer:
        got = observer.committed(tps, timeout=10)
    assert {tp: om.offset for tp, om in got.items() if om is not None} == positions


def _unsub_setup(broker: TansuBroker, **extra: Any
                 ) -> tuple[str, dict[str, Any], list[TopicPartition]]:
    """A prefilled topic and a member's config for the unsubscribe() cases."""
    topic = f"group-differential-{random.Random().getrandbits(40):x}"
    broker.create_topic(topic, PARTS)
    asyncio.run(_prefill(broker.bootstrap_servers, topic))
    cfg: dict[str, Any] = dict(
        bootstrap_servers=broker.bootstrap_servers, group_id=f"g-{topic}",
        session_timeout_ms=SESSION_MS, heartbeat_interval_ms=100, fetch_max_wait_ms=50,
        auto_offset_reset="earliest", auto_commit_interval_ms=600_000, **extra)
    return topic, cfg, [TopicPartition(topic, p) for p in range(PARTS)]


class _Events:
    """A sync and an async rebalance listener recording (event, partition count)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []
        #: called with the revoked partitions before recording (sync listener)
        self.on_revoke: Any = None
        #: awaited with the revoked partitions before recording (async listener)
        self.on_revoke_async: Any = None

    def sync(self) -> Any:
        ev = self

        class Listener:
            def on_partitions_assigned(self, parts: set[TopicPartition]) -> None:
                ev.events.append(("assigned", len(parts)))

            def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
                if ev.on_revoke is not None:
                    ev.on_revoke(parts)
                ev.events.append(("revoked", len(parts)))

            def on_partitions_lost(self, parts: set[TopicPartition]) -> None:
                ev.events.append(("lost", len(parts)))
        return Listener()

    def async_(self) -> Any:
        ev = self

        class AsyncListener:
            async def on_partitions_assigned(self, parts: set[TopicPartition]) -> None:
                ev.events.append(("assigned", len(parts)))

            async def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
                if ev.on_revoke_async is not None:
                    await ev.on_revoke_async(parts)
                ev.events.append(("revoked", len(parts)))

            async def on_partitions_lost(self, parts: set[TopicPartition]) -> None:
                ev.events.append(("lost", len(parts)))
        return AsyncListener()


def _took(positions: dict[TopicPartition, int],
          got: dict[TopicPartition, list[Any]]) -> None:
    for tp, recs in got.items():
        positions[tp] = recs[-1].offset + 1


def _consume_all_sync(c: Consumer[Any, Any], positions: dict[TopicPartition, int],
                      ev: _Events) -> None:
    """Poll until every partition handed out records (those count as handed out)."""
    deadline = time.monotonic() + 10
    while len(positions) < PARTS:
        assert time.monotonic() < deadline, ev.events
        _took(positions, c.getmany(0.1, max_records=40))


async def _consume_all_async(c: AsyncConsumer[Any, Any], positions: dict[TopicPartition, int],
                             ev: _Events) -> None:
    deadline = time.monotonic() + 10
    while len(positions) < PARTS:
        assert time.monotonic() < deadline, ev.events
        _took(positions, await c.getmany(0.1, max_records=40))


def _left(positions: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    """The positions of partitions not read to the end."""
    return {tp: pos for tp, pos in positions.items() if pos < PREFILL}


def _committed(broker: TansuBroker, group: str, tps: list[TopicPartition]
               ) -> dict[TopicPartition, int]:
    with Consumer(bootstrap_servers=broker.bootstrap_servers, group_id=group,
                  enable_auto_commit=False) as observer:
        got = observer.committed(tps, timeout=10)
    return {tp: om.offset for tp, om in got.items() if om is not None}


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_unsubscribe_then_assign_at_once(tansu_broker: TansuBroker, kind: str) -> None:
    """unsubscribe(); assign([p]) at once (p one of the old partitions): the old ones are
    revoked once, the hand-back leaves the new assignment alone (p is not dropped with the
    old p), and p starts at the offset the hand-back committed, not at an older commit (no
    record handed out twice)."""
    topic, cfg, tps = _unsub_setup(tansu_broker)
    ev = _Events()
    positions: dict[TopicPartition, int] = {}
    after: list[tuple[TopicPartition, int]] = []
    assigned: set[TopicPartition] = set()
    again = tps[0]  # (the partition read least: records of it are left to read)

    def more(got: dict[TopicPartition, list[Any]]) -> None:
        after.extend((tp, r.offset) for tp, recs in got.items() for r in recs)

    if kind == "sync":
        with Consumer(**cfg) as c:
            c.subscribe([topic], listener=ev.sync())
            _consume_all_sync(c, positions, ev)
            again = min(positions, key=positions.__getitem__)
            c.unsubscribe()
            c.assign([again])
            deadline = time.monotonic() + 5
            while len(after) < 10 and time.monotonic() < deadline:
                more(c.getmany(0.1))
            assigned = c.assignment()
    else:
        async def main() -> None:
            nonlocal assigned, again
            async with AsyncConsumer(**cfg) as c:
                c.subscribe([topic], listener=ev.async_())
                await _consume_all_async(c, positions, ev)
                again = min(positions, key=positions.__getitem__)
                c.unsubscribe()
                c.assign([again])
                deadline = time.monotonic() + 5
                while (len(after) < 10 or len(ev.events) < 2) and time.monotonic() < deadline:
                    more(await c.getmany(0.1))
                assigned = c.assignment()

        asyncio.run(main())
    assert ev.events == [("assigned", PARTS), ("revoked", PARTS)], ev.events
    assert positions[again] < PREFILL, positions
    assert assigned == {again}
    assert after and {tp for tp, _ in after} == {again}, after[:5]
    assert after[0][1] == positions[again], (after[0], positions)
    others = [tp for tp in tps if tp != again]
    got = _committed(tansu_broker, cfg["group_id"], tps)
    assert {tp: got.get(tp) for tp in others} == {tp: positions[tp] for tp in others}


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_unsubscribe_then_subscribe_again(tansu_broker: TansuBroker, kind: str) -> None:
    """unsubscribe(); subscribe() at once: the partitions come back to the same member,
    revoked once, then assigned again, each starting at the offset the hand-back
    committed (those read to the end hand out nothing again)."""
    topic, cfg, _tps = _unsub_setup(tansu_broker)
    ev = _Events()
    positions: dict[TopicPartition, int] = {}
    firsts: dict[TopicPartition, int] = {}
    events: list[tuple[str, int]] = []

    def first(got: dict[TopicPartition, list[Any]]) -> None:
        for tp, recs in got.items():
            firsts.setdefault(tp, recs[0].offset)

    if kind == "sync":
        with Consumer(**cfg) as c:
            listener = ev.sync()
            c.subscribe([topic], listener=listener)
            _consume_all_sync(c, positions, ev)
            c.unsubscribe()
            c.subscribe([topic], listener=listener)
            deadline = time.monotonic() + 10
            while (len(ev.events) < 3 or len(firsts) < len(_left(positions))) \
                    and time.monotonic() < deadline:
                first(c.getmany(0.1))
            for _ in range(5):  # (an exhausted partition read again would show now)
                first(c.getmany(0.1))
            events = list(ev.events)  # (close() revokes them again)
    else:
        async def main() -> None:
            async with AsyncConsumer(**cfg) as c:
                listener = ev.async_()
                c.subscribe([topic], listener=listener)
                await _consume_all_async(c, positions, ev)
                c.unsubscribe()
                c.subscribe([topic], listener=listener)
                deadline = time.monotonic() + 10
                while (len(ev.events) < 3 or len(firsts) < len(_left(positions))) \
                        and time.monotonic() < deadline:
                    first(await c.getmany(0.1))
                for _ in range(5):
                    first(await c.getmany(0.1))
                events.extend(ev.events)

        asyncio.run(main())
    assert events == [("assigned", PARTS), ("revoked", PARTS), ("assigned", PARTS)], events
    assert _left(positions), positions
    assert firsts == _left(positions)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_unsubscribe_then_close_at_once(tansu_broker: TansuBroker, kind: str) -> None:
    """unsubscribe(); close() at once: the revocation and the commit of every record
    handed out happen exactly once (close() completes a hand-back that had not run)."""
    topic, cfg, tps = _unsub_setup(tansu_broker)
    ev = _Events()
    positions: dict[TopicPartition, int] = {}
    if kind == "sync":
        c = Consumer(**cfg)
        c.subscribe([topic], listener=ev.sync())
        _consume_all_sync(c, positions, ev)
        c.unsubscribe()
        # The sync consumer's unsubscribe() waits for the hand-back (as the Java client's).
        assert ev.events == [("assigned", PARTS), ("revoked", PARTS)], ev.events
        c.close()
    else:
        async def main() -> None:
            ac: AsyncConsumer[Any, Any] = AsyncConsumer(**cfg)
            ac.subscribe([topic], listener=ev.async_())
            await _consume_all_async(ac, positions, ev)
            ac.unsubscribe()
            await ac.close()

        asyncio.run(main())
    assert ev.events == [("assigned", PARTS), ("revoked", PARTS)], ev.events
    assert _committed(tansu_broker, cfg["group_id"], tps) == positions


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_unsubscribe_listener_uses_position_and_commit(tansu_broker: TansuBroker,
                                                       kind: str) -> None:
    """The manual-commit pattern: on_partitions_revoked after unsubscribe() reads each
    partition's position() and commit()s (no auto commit), as inside the Java client's
    unsubscribe(); committed() sees the commit."""
    topic, cfg, tps = _unsub_setup(tansu_broker, enable_auto_commit=False)
    ev = _Events()
    positions: dict[TopicPartition, int] = {}
    seen: dict[TopicPartition, int] = {}
    after_commit: dict[TopicPartition, int] = {}
    if kind == "sync":
        with Consumer(**cfg) as c:
            def revoke(parts: set[TopicPartition]) -> None:
                for tp in parts:
                    seen[tp] = c.position(tp)
                c.commit()
                got = c.committed(sorted(parts), timeout=10)
                after_commit.update({tp: om.offset for tp, om in got.items()
                                     if om is not None})
            ev.on_revoke = revoke
            c.subscribe([topic], listener=ev.sync())
            _consume_all_sync(c, positions, ev)
            c.unsubscribe()
            assert seen == positions  # (inside unsubscribe(), as in the Java client)
    else:
        async def main() -> None:
            async with AsyncConsumer(**cfg) as ac:
                async def revoke(parts: set[TopicPartition]) -> None:
                    for tp in parts:
                        seen[tp] = await ac.position(tp)
                    await ac.commit()
                    got = await ac.committed(sorted(parts), timeout=10)
                    after_commit.update({tp: om.offset for tp, om in got.items()
                                         if om is not None})
                ev.on_revoke_async = revoke
                ac.subscribe([topic], listener=ev.async_())
                await _consume_all_async(ac, positions, ev)
                ac.unsubscribe()
                deadline = time.monotonic() + 5
                while len(ev.events) < 2 and time.monotonic() < deadline:
                    assert not await ac.getmany(0.1)

        asyncio.run(main())
    assert ev.events == [("assigned", PARTS), ("revoked", PARTS)], ev.events
    assert seen == positions
    assert after_commit == positions
    assert _committed(tansu_broker, cfg["group_id"], tps) == positions


def test_unsubscribe_after_the_membership_is_gone_loses(tansu_broker: TansuBroker) -> None:
    """unsubscribe() when the group no longer counts this member (its generation gone, as
    after a fenced heartbeat, before the rejoin): the partitions are lost, not revoked, and
    nothing is committed for them (as the Java client's onLeavePrepare)."""
    topic, cfg, tps = _unsub_setup(tansu_broker)
    ev = _Events()
    positions: dict[TopicPartition, int] = {}

    async def main() -> None:
        async with AsyncConsumer(**cfg) as c:
            c.subscribe([topic], listener=ev.async_())
            await _consume_all_async(c, positions, ev)
            assert c._coordinator is not None
            c._coordinator.generation = -1  # (what a fenced heartbeat leaves)
            c.unsubscribe()
            deadline = time.monotonic() + 5
            while len(ev.events) < 2 and time.monotonic() < deadline:
                assert not await c.getmany(0.1)

    asyncio.run(main())
    assert ev.events == [("assigned", PARTS), ("lost", PARTS)], ev.events
    assert _committed(tansu_broker, cfg["group_id"], tps) == {}


def test_unsubscribe_while_a_join_finishes(tansu_broker: TansuBroker) -> None:
    """unsubscribe() while SyncGroup is in flight: the assignment the join applies after it
    belongs to the group, not to the unsubscribed consumer: it is handed back with the
    membership (revoked), and nothing of it is handed out."""
    topic, cfg, _tps = _unsub_setup(tansu_broker)
    ev = _Events()
    got: list[Any] = []

    async def main() -> set[TopicPartition]:
        async with AsyncConsumer(**cfg) as c:
            group = c._coordinator
            assert group is not None
            apply = group._apply  # type: ignore[attr-defined]

            async def unsubscribed_first(assignment: Any) -> None:
                c.unsubscribe()  # (the application, between SyncGroup's send and answer)
                await apply(assignment)
            group._apply = unsubscribed_first  # type: ignore[attr-defined]
            c.subscribe([topic], listener=ev.async_())
            deadline = time.monotonic() + 10
            while len(ev.events) < 2 and time.monotonic() < deadline:
                got.extend(await c.getmany(0.1))
            for _ in range(5):
                got.extend(await c.getmany(0.1))
            return c.assignment()

    assigned = asyncio.run(main())
    assert ev.events == [("assigned", PARTS), ("revoked", PARTS)], ev.events
    assert assigned == set() and got == []


def test_sync_unsubscribe_from_a_listener_does_not_wait_for_itself(
        tansu_broker: TansuBroker) -> None:
    """The sync consumer's unsubscribe() called inside on_partitions_assigned returns at
    once (the revoke call it would wait for can only run after the listener returns) and
    the revocation follows in the next call."""
    topic, cfg, _tps = _unsub_setup(tansu_broker)
    ev = _Events()
    took: list[float] = []
    got: list[Any] = []
    with Consumer(**cfg) as c:
        listener = ev.sync()
        assigned = listener.on_partitions_assigned

        def assigned_then_unsubscribe(parts: set[TopicPartition]) -> None:
            assigned(parts)
            start = time.monotonic()
            c.unsubscribe()
            took.append(time.monotonic() - start)
        listener.on_partitions_assigned = assigned_then_unsubscribe
        c.subscribe([topic], listener=listener)
        deadline = time.monotonic() + 10
        while len(ev.events) < 2 and time.monotonic() < deadline:
            got.extend(c.getmany(0.1))
    assert ev.events == [("assigned", PARTS), ("revoked", PARTS)], ev.events
    assert len(took) == 1 and took[0] < 5, took
    assert got == []
