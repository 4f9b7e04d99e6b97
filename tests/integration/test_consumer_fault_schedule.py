"""A seeded random schedule of one consumer's calls interleaved with faults, on librdkafka's
mock cluster (3 brokers, a topic of 3 partitions, replication factor 3).

Each seed drives one consumer (``group.id`` set, auto commit off): the blocking
:class:`~kontrakt.Consumer`, or :class:`~kontrakt.clients.consumer.AsyncConsumer` driven
call by call on an event loop (:class:`OnLoop`), through a schedule of ``poll``,
``getmany``, ``consume``, ``commit``, ``committed``, ``position``, ``seek`` (backwards,
or forwards over records already read), ``seek_to_beginning``, ``pause`` / ``resume`` and
restarts (close and a new consumer of the group, either subscribed as a single-member group
or with a manual ``assign()``), mixed with records written meanwhile (raw Produce
requests, batches of random size and codec) and faults: leader moves, a broker down then
up, the coordinator moving, RTT, and injected error codes on Fetch, ListOffsets,
OffsetCommit, OffsetFetch, Heartbeat (and dropped connections on Fetch, JoinGroup,
SyncGroup, FindCoordinator).

Checked after every step (the model in :class:`Run`):

- records of a partition come in offset order with no gap and no duplicate: each is the
  expected next offset (the last one handed out + 1, or a seek's target); after a
  (re)assignment or a restart the first one is the group's committed offset (or 0 with
  nothing committed) or, when the consumer kept the partition, the position it had;
- a record's value is the one written at its offset; no record of a paused or unassigned
  partition;
- ``position()`` is the expected next offset;
- a commit of the positions stores exactly them (read back with ``committed()``), and what
  ``committed()`` reports is always one of the offsets committed (or, for a commit that
  failed or timed out, perhaps committed), so never past what was handed out or sought;
- at the end, with the faults healed, the consumer reaches the end of every partition and
  commits; a fresh consumer of the group starts at the committed offsets and reads the
  records written after, and the two together read every offset of the log.

Mock deviations allowed for (see TEST-BROKERS.md and test_consumer_faults.py):

- JoinGroup, SyncGroup and FindCoordinator error answers carry null in non-nullable
  strings, which kontrakt rejects (as Java does): those APIs only get dropped connections.
  A member that rejoins while the coordinator moves still meets such an answer (e.g.
  NOT_COORDINATOR to a SyncGroup): its membership then fails with CorruptMessageError, and
  the schedule restarts the consumer (a crash: it continues from the committed offsets).
- A member rejoining a stable group has its JoinGroup held for session.timeout.ms minus a
  second: the consumers use 1500 ms.
- Injected errors are per API, cluster-wide (any broker, any client): the writer here sends
  only Produce and Metadata, which get none. Fetch errors are answered at the top level.
- No multi-member classic groups with non-librdkafka clients: one member at a time (a
  restart closes the member first; close() leaves the group).
- Once a member has joined the group, the mock refuses commits without a generation
  (manual ``assign()`` with ``group.id``) with UNKNOWN_MEMBER_ID, even with the group empty
  again (Kafka accepts them in an empty group): the manual-assignment incarnations of a
  seed all come before its first subscribed one.
- OFFSET_OUT_OF_RANGE is not injected (it legitimately resets a position), and seeks stay
  within the records written.

``KONTRAKT_CFAULT_SEEDS=30`` runs seeds 0..29 with each consumer instead of the fixed
ones (a longer hunt); ``KONTRAKT_CFAULT_STEPS`` sets the schedule length.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest

from kontrakt import Consumer
from kontrakt._types import OffsetAndMetadata, TopicPartition
from kontrakt.clients import AsyncKafkaClient
from kontrakt.clients.consumer import AsyncConsumer
from kontrakt.errors import (
    CommitFailedError,
    CorruptMessageError,
    KafkaError,
    KafkaTimeoutError,
)
from kontrakt.protocol.records import RecordBatchBuilder
from kontrakt.testing import MockCluster
from tests.integration.raw_ops import list_offset, produce

pytestmark = pytest.mark.timeout(120)

#: a longer hunt: KONTRAKT_CFAULT_SEEDS=30 runs seeds 0..29
_N = os.environ.get("KONTRAKT_CFAULT_SEEDS")
SEEDS = list(range(int(_N))) if _N else [0, 2, 4, 6]
ASYNC_SEEDS = list(range(int(_N))) if _N else [1, 3]
STEPS = int(os.environ.get("KONTRAKT_CFAULT_STEPS", "90"))

PARTITIONS = 3
BROKERS = 3
FETCH, LIST_OFFSETS, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 1, 2, 8, 9, 10
JOIN_GROUP, HEARTBEAT, SYNC_GROUP = 11, 12, 14
UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER = 3, 5, 6
REQUEST_TIMED_OUT = 7
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR = 14, 15, 16
REBALANCE_IN_PROGRESS = 27
DROP = MockCluster.DISCONNECT
COORD = [COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR]
#: api key -> error codes the schedule injects (all retriable, or telling of a rebalance)
INJECT: dict[int, list[int]] = {
    FETCH: [NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, REQUEST_TIMED_OUT, DROP],
    LIST_OFFSETS: [NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE,
                   REQUEST_TIMED_OUT],
    OFFSET_COMMIT: [*COORD, REQUEST_TIMED_OUT, REBALANCE_IN_PROGRESS, DROP],
    OFFSET_FETCH: [*COORD, DROP],
    HEARTBEAT: [*COORD, REBALANCE_IN_PROGRESS],
    JOIN_GROUP: [DROP],
    SYNC_GROUP: [DROP],
    FIND_COORDINATOR: [DROP],
}
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
T = TypeVar("T")


@dataclass
class Part:
    """What the model knows of one partition."""

    #: the offset the next record handed out must have (None: not pinned yet)
    next: int | None = None
    #: with ``next`` None: the offsets the first record (or position()) may be at
    allowed: set[int] = field(default_factory=set)
    #: offsets the group's committed offset may be (perhaps committed ones included)
    committed: set[int] = field(default_factory=set)
    assigned: bool = False
    paused: bool = False
    #: every offset handed out, by any consumer of the run
    read: set[int] = field(default_factory=set)
    #: offset -> value written there (from the Produce answers)
    log: dict[int, bytes] = field(default_factory=dict)


class Listener:
    def __init__(self, run: Run) -> None:
        self.run = run

    def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
        self.run.revoked(parts)

    def on_partitions_lost(self, parts: set[TopicPartition]) -> None:
        self.run.revoked(parts)

    def on_partitions_assigned(self, parts: set[TopicPartition]) -> None:
        self.run.assigned(parts)


class OnLoop:
    """An :class:`AsyncConsumer` driven step by step on the run's event loop, with the
    blocking consumer's methods that the schedule calls. Its background work (fetching,
    heartbeats) runs while a call (or a write, on the same loop) runs: the schedule's steps
    follow each other without pause, well within session.timeout.ms."""

    def __init__(self, loop: asyncio.AbstractEventLoop, **config: Any) -> None:
        self.loop = loop
        self.c: AsyncConsumer[Any, Any] = AsyncConsumer(**config)

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def subscribe(self, topics: list[str], *, listener: Any) -> None:
        self.c.subscribe(topics, listener=listener)

    def assign(self, tps: list[TopicPartition]) -> None:
        self.c.assign(tps)

    def poll(self, timeout: float) -> Any:
        return self._run(self.c.poll(timeout))

    def getmany(self, timeout: float, max_records: int | None = None
                ) -> dict[TopicPartition, list[Any]]:
        return self._run(self.c.getmany(timeout=timeout, max_records=max_records))

    def consume(self, num_records: int, timeout: float) -> list[Any]:
        return self._run(self.c.consume(num_records, timeout))

    def commit(self, timeout: float) -> None:
        self._run(self.c.commit(timeout=timeout))

    def committed(self, tps: list[TopicPartition], timeout: float
                  ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return self._run(self.c.committed(tps, timeout=timeout))

    def position(self, tp: TopicPartition, timeout: float) -> int:
        return self._run(self.c.position(tp, timeout))

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.c.seek(tp, offset)

    def seek_to_beginning(self, tp: TopicPartition) -> None:
        self.c.seek_to_beginning(tp)

    def pause(self, tps: list[TopicPartition]) -> None:
        self.c.pause(tps)

    def resume(self, tps: list[TopicPartition]) -> None:
        self.c.resume(tps)

    def close(self, autocommit: bool, timeout: float) -> None:
        self._run(self.c.close(autocommit=autocommit, timeout=timeout))


class Run:
    """One seed: the cluster, the writer, the consumer and the model."""

    def __init__(self, mc: MockCluster, topic: str, seed: int, client: str) -> None:
        self.mc = mc
        self.client = client
        self.topic = topic
        self.seed = seed
        self.rng = random.Random(seed)
        self.group = f"g-{topic}"
        self.tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        self.parts = {tp: Part() for tp in self.tps}
        for st in self.parts.values():
            st.committed = {0}  # nothing committed: auto.offset.reset=earliest, log start 0
        self.leaders = {p: 1 + p % BROKERS for p in range(PARTITIONS)}
        self.down: int | None = None
        self.down_steps = 0
        self.trace: list[str] = []
        self.loop = asyncio.new_event_loop()
        self.writer = AsyncKafkaClient(bootstrap_servers=mc.bootstrap_servers,
                                       retry_backoff_ms=20, request_timeout_ms=5000)
        self.loop.run_until_complete(self.writer.start())
        self.consumer: Consumer[Any, Any] | OnLoop | None = None
        self.mode = ""
        #: a member has joined the group (see the module docstring)
        self.joined = False
        self.counts: dict[str, int] = {}

    # --- bookkeeping -----------------------------------------------------------------------

    def note(self, what: str) -> None:
        self.trace.append(what)
        self.counts[what.split()[0]] = self.counts.get(what.split()[0], 0) + 1

    def fail(self, msg: str) -> None:
        trace = [t for i, t in enumerate(self.trace) if i == 0 or t != self.trace[i - 1]]
        tail = "\n  ".join(trace[-40:])
        pytest.fail(f"seed {self.seed} ({self.mode}): {msg}\nlast steps:\n  {tail}")

    def check(self, ok: bool, msg: str) -> None:
        if not ok:
            self.fail(msg)

    def revoked(self, parts: set[TopicPartition]) -> None:
        self.note(f"revoked {sorted(tp.partition for tp in parts)}")
        for tp in parts:
            st = self.parts[tp]
            st.assigned = False
            st.paused = False

    def assigned(self, parts: set[TopicPartition]) -> None:
        self.note(f"assigned {sorted(tp.partition for tp in parts)}")
        for tp in parts:
            st = self.parts[tp]
            # Restarts from the committed offset, or (the partition kept) where it was.
            st.allowed = set(st.committed) | ({st.next} if st.next is not None else set())
            st.next = None
            st.assigned = True
            st.paused = False

    def unpin_all(self) -> None:
        for st in self.parts.values():
            st.allowed = set(st.committed)
            st.next = None
            st.assigned = False
            st.paused = False

    def took(self, recs: list[Any]) -> None:
        for r in recs:
            tp = TopicPartition(r.topic, r.partition)
            st = self.parts[tp]
            o = r.offset
            self.check(st.assigned, f"record {tp.partition}@{o} of an unassigned partition")
            self.check(not st.paused, f"record {tp.partition}@{o} of a paused partition")
            if st.next is not None:
                if o != st.next:
                    kind = "a gap" if o > st.next else "a duplicate / out of order"
                    self.fail(f"partition {tp.partition}: got offset {o}, expected {st.next} "
                              f"({kind})")
            else:
                self.check(o in st.allowed, f"partition {tp.partition}: first record at {o}, "
                                            f"expected one of {sorted(st.allowed)}")
            want = st.log.get(o)
            self.check(want is None or want == r.value,
                       f"partition {tp.partition}@{o}: value {r.value!r}, written {want!r}")
            st.next = o + 1
            st.read.add(o)

    def end(self, p: int) -> int:
        log = self.parts[self.tps[p]].log
        return max(log) + 1 if log else 0

    # --- writing ---------------------------------------------------------------------------

    def write(self, count: int, partitions: list[int] | None = None) -> None:
        self.loop.run_until_complete(self._write(count, partitions))

    async def _write(self, count: int, partitions: list[int] | None) -> None:
        for p in (range(PARTITIONS) if partitions is None else partitions):
            if self.leaders[p] == self.down:
                continue
            st = self.parts[self.tps[p]]
            left = count
            while left:
                n = min(left, self.rng.randint(1, 15))
                codec = self.rng.choice(CODECS)
                b = RecordBatchBuilder(compression=codec)
                base = self.end(p)
                values = [f"{p}:{base + i}:{self.rng.randrange(10**6)}".encode()
                          for i in range(n)]
                for v in values:
                    b.append(None, None, v)
                batch = b.build()
                deadline = time.monotonic() + 15
                while True:  # a leader may just have moved: retry until written
                    try:
                        part = await produce(self.writer, self.topic, p, batch)
                    except KafkaError as exc:
                        part = exc
                    if not isinstance(part, BaseException) and part is not None \
                            and part.error_code == 0:
                        break
                    assert time.monotonic() < deadline, f"cannot write to {p}: {part}"
                    self.writer.request_metadata_refresh()
                    await asyncio.sleep(0.05)
                self.check(part.base_offset == base,
                           f"partition {p}: batch written at {part.base_offset}, expected "
                           f"{base} (a write this model did not see)")
                for i, v in enumerate(values):
                    st.log[base + i] = v
                left -= n

    def log_end(self, p: int) -> int:
        async def ask() -> int:
            return int((await list_offset(self.writer, self.topic, p, -1)).offset)
        return self.loop.run_until_complete(ask())

    # --- the consumer ----------------------------------------------------------------------

    def start_consumer(self, mode: str | None = None) -> None:
        self.mode = mode or self.rng.choice(["subscribe", "assign"])
        if self.joined:
            self.mode = "subscribe"  # the mock refuses the group's simple commits from now on
        self.joined = self.joined or self.mode == "subscribe"
        self.unpin_all()
        config: dict[str, Any] = dict(
            bootstrap_servers=self.mc.bootstrap_servers, group_id=self.group,
            auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=1500,
            heartbeat_interval_ms=100, fetch_max_wait_ms=50, retry_backoff_ms=20,
            retry_backoff_max_ms=200, reconnect_backoff_ms=20, reconnect_backoff_max_ms=200,
            request_timeout_ms=3000, rebalance_timeout_ms=1000,
            max_poll_records=self.rng.choice([1, 7, 50, 500]),
            max_partition_fetch_bytes=self.rng.choice([300, 4096, 1 << 20]))
        c: Consumer[Any, Any] | OnLoop = (Consumer(**config) if self.client == "sync"
                                          else OnLoop(self.loop, **config))
        if self.mode == "subscribe":
            c.subscribe([self.topic], listener=Listener(self))
        else:
            c.assign(self.tps)
            for st in self.parts.values():
                st.assigned = True
        self.note(f"start {self.mode}")
        self.consumer = c

    def stop_consumer(self) -> None:
        c, self.consumer = self.consumer, None
        if c is not None:
            c.close(autocommit=False, timeout=5)
        self.unpin_all()

    @property
    def patience(self) -> float:
        """Seconds to wait for a commit or lookup: short while a broker (perhaps the
        coordinator, which stays where it is) is down, to keep the run short."""
        return 3.0 if self.down is None else 1.0

    def pin(self, tp: TopicPartition, timeout: float | None = None) -> bool:
        """position(): checked against the model; pins an unpinned partition."""
        c = self.consumer
        assert c is not None
        st = self.parts[tp]
        try:
            pos = c.position(tp, timeout=timeout or self.patience)
        except KafkaTimeoutError:
            self.note(f"position-timeout {tp.partition}")
            return False
        if not st.assigned:
            return False  # revoked while waiting (the listener ran meanwhile)
        if st.next is not None:
            self.check(pos == st.next, f"position({tp.partition}) = {pos}, expected {st.next} "
                                       "(the last record handed out + 1)")
        else:
            self.check(pos in st.allowed, f"position({tp.partition}) = {pos}, expected one "
                                          f"of {sorted(st.allowed)}")
            st.next = pos
        return True

    def commit(self) -> None:
        c = self.consumer
        assert c is not None
        held = [tp for tp in self.tps if self.parts[tp].assigned]
        if not all(self.pin(tp) for tp in held):
            return
        want = {tp: self.parts[tp].next for tp in held if self.parts[tp].assigned}
        try:
            c.commit(timeout=self.patience)
        except (CommitFailedError, KafkaTimeoutError) as exc:
            # Perhaps stored (a timeout after the broker wrote it), perhaps not.
            self.note(f"commit-failed {type(exc).__name__}: {str(exc)[:90]}")
            for tp, o in want.items():
                if o is not None:
                    self.parts[tp].committed.add(o)
            return
        self.note(f"commit {sorted((tp.partition, o) for tp, o in want.items())}")
        for tp, o in want.items():
            assert o is not None
            self.parts[tp].committed = {o}
        self.read_committed(want)

    def read_committed(self, exact: dict[TopicPartition, int | None] | None = None) -> None:
        c = self.consumer
        assert c is not None
        try:
            got = c.committed(self.tps, timeout=self.patience)
        except KafkaTimeoutError:
            self.note("committed-timeout")
            return
        for tp, om in got.items():
            st = self.parts[tp]
            o = 0 if om is None else om.offset  # none: the reset (earliest) applies
            if exact is not None and tp in exact:
                self.check(o == exact[tp], f"committed({tp.partition}) = {o} right after "
                                           f"committing {exact[tp]}")
            self.check(o in st.committed, f"committed({tp.partition}) = {o}, not one of the "
                                          f"offsets committed {sorted(st.committed)}")
            self.check(o <= max(st.read, default=-1) + 1,
                       f"committed({tp.partition}) = {o} is past what was handed out")
            st.committed = {o}

    # --- faults ----------------------------------------------------------------------------

    def up_brokers(self) -> list[int]:
        return [b for b in range(1, BROKERS + 1) if b != self.down]

    def seek(self, tp: TopicPartition, beginning: bool) -> None:
        c = self.consumer
        assert c is not None
        st = self.parts[tp]
        if not st.assigned:
            return
        if beginning:
            to = 0
            c.seek_to_beginning(tp)
        else:
            # Back, or forward over records read already: nothing is skipped unread.
            to = self.rng.randint(0, max(st.read, default=-1) + 1)
            c.seek(tp, to)
        st.next, st.allowed = to, set()
        self.note(f"{'beginning' if beginning else 'seek'} {tp.partition}->{to}")

    def fault(self) -> None:
        rng, mc = self.rng, self.mc
        kind = rng.choice(["leader", "leader", "leaders", "down", "coordinator", "inject",
                           "inject", "inject", "rtt"])
        if kind == "leaders":
            # Every partition to another broker: fetches in flight meet NOT_LEADER_OR_FOLLOWER
            # / FENCED_LEADER_EPOCH per partition.
            for p in range(PARTITIONS):
                b = rng.choice([b for b in self.up_brokers() if b != self.leaders[p]]
                               or self.up_brokers())
                mc.set_partition_leader(self.topic, p, b)
                self.leaders[p] = b
            self.note(f"fault-leaders {sorted(self.leaders.items())}")
        elif kind == "leader":
            p = rng.randrange(PARTITIONS)
            b = rng.choice(self.up_brokers())
            mc.set_partition_leader(self.topic, p, b)
            self.leaders[p] = b
            self.note(f"fault-leader {p}->{b}")
        elif kind == "down" and self.down is None:
            self.down = rng.randint(1, BROKERS)
            self.down_steps = rng.randint(1, 4)
            mc.broker_down(self.down)
            self.note(f"fault-down {self.down}")
        elif kind == "coordinator":
            b = rng.choice(self.up_brokers())
            mc.coordinator_set("group", self.group, b)
            self.note(f"fault-coordinator ->{b}")
        elif kind == "rtt":
            b, rtt = rng.randint(1, BROKERS), rng.choice([0, 0, 30, 150, 400])
            mc.set_rtt(b, rtt)
            self.note(f"fault-rtt {b}={rtt}")
        else:
            api = rng.choice(sorted(INJECT))
            codes = [rng.choice(INJECT[api]) for _ in range(rng.randint(1, 3))]
            mc.push_request_errors(api, codes)
            self.note(f"fault-inject api{api} {codes}")
            if api == FETCH:
                # A caught-up consumer's next fetch has nothing to lose: seek back, so that
                # the failed fetches are of records.
                for tp in self.tps:
                    self.seek(tp, False)

    def heal(self, force: bool = False) -> None:
        if self.down is not None:
            self.down_steps -= 1
            if force or self.down_steps <= 0:
                self.mc.broker_up(self.down)
                self.note(f"fault-up {self.down}")
                self.down = None

    # --- the schedule ----------------------------------------------------------------------

    def step(self) -> None:
        c = self.consumer
        assert c is not None
        rng = self.rng
        what = rng.choices(
            ["poll", "getmany", "consume", "commit", "committed", "position", "seek",
             "beginning", "pause", "resume", "restart", "write", "fault"],
            weights=[10, 10, 5, 6, 2, 3, 3, 1, 2, 3, 1, 4, 9])[0]
        if what == "poll":
            for _ in range(rng.randint(1, 20)):
                r = c.poll(rng.choice([0, 0.02, 0.1]))
                if r is None:
                    break
                self.took([r])
            self.note("poll")
        elif what in ("getmany", "consume"):
            if what == "getmany":
                got = c.getmany(timeout=rng.choice([0, 0.05, 0.2]),
                                max_records=rng.choice([None, 3, 40]))
                for tp, recs in got.items():
                    self.check(all(r.partition == tp.partition for r in recs),
                               "getmany: a record under another partition")
                    self.took(recs)
            else:
                self.took(c.consume(rng.randint(1, 60), timeout=rng.choice([0.02, 0.2])))
            self.note(what)
        elif what == "commit":
            self.commit()
        elif what == "committed":
            self.read_committed()
        elif what == "position":
            tp = rng.choice(self.tps)
            if self.parts[tp].assigned:
                self.pin(tp)
                self.note(f"position {tp.partition}")
        elif what in ("seek", "beginning"):
            self.seek(rng.choice(self.tps), what == "beginning")
        elif what == "pause":
            tps = rng.sample(self.tps, rng.randint(1, PARTITIONS))
            held = [tp for tp in tps if self.parts[tp].assigned]
            c.pause(held)
            for tp in held:
                # A revocation's listener may have run during the call (the blocking
                # consumer runs listeners inside its calls): then the partition is gone.
                self.parts[tp].paused = self.parts[tp].assigned
            self.note(f"pause {[tp.partition for tp in held]}")
        elif what == "resume":
            held = [tp for tp in self.tps if self.parts[tp].paused]
            c.resume(held)
            for tp in held:
                self.parts[tp].paused = False
            self.note(f"resume {[tp.partition for tp in held]}")
        elif what == "restart":
            self.stop_consumer()
            self.start_consumer()
        elif what == "write":
            n = rng.randint(1, 40)
            self.write(n, rng.sample(range(PARTITIONS), rng.randint(1, PARTITIONS)))
            self.note(f"write {n}")
        else:
            self.fault()
        if what != "fault":
            self.heal()

    def drain(self) -> None:
        assert self.consumer is not None
        self.took(self.consumer.consume(500, timeout=0.1))
        for tp, st in self.parts.items():
            if st.assigned and st.next is None:
                self.pin(tp, timeout=1)  # e.g. committed at the end: no record pins it

    def guarded(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except CorruptMessageError as exc:
            if "is null but the version does not allow it" not in str(exc):
                raise
            # The mock's JoinGroup / SyncGroup error answer to a member that reached the
            # old coordinator after a move (see the module's docstring): the membership
            # fails as against a broker sending garbage; start again.
            self.note(f"mock-null-answer {exc}")
            self.stop_consumer()
            self.start_consumer()

    def finish(self) -> None:
        """Heal everything, read to the end, commit; then a fresh consumer of the group."""
        self.heal(force=True)
        for api in INJECT:
            self.mc.clear_request_errors(api)
        self.mc.set_rtt(-1, 0)
        assert self.consumer is not None
        held = [tp for tp in self.tps if self.parts[tp].paused]
        self.consumer.resume(held)
        for tp in held:
            self.parts[tp].paused = False
        ends = [self.end(p) for p in range(PARTITIONS)]
        self.check(ends == [self.log_end(p) for p in range(PARTITIONS)],
                   f"log ends {[self.log_end(p) for p in range(PARTITIONS)]}, written {ends}")
        deadline = time.monotonic() + 25
        while True:
            self.guarded(self.drain)
            done = all(st.assigned and st.next == ends[tp.partition]
                       for tp, st in self.parts.items())
            if done:
                self.guarded(self.commit)
                if all(st.committed == {ends[tp.partition]} for tp, st in self.parts.items()):
                    break
            if time.monotonic() > deadline:
                self.fail("did not read to the end and commit: "
                          + ", ".join(f"{tp.partition}: next {st.next} of {ends[tp.partition]}"
                                      f" assigned {st.assigned} committed {st.committed}"
                                      for tp, st in self.parts.items()))
        self.stop_consumer()
        # A fresh consumer starts at the committed offsets and reads what was written since.
        self.write(5)
        self.start_consumer(self.rng.choice(["subscribe", "assign"]))
        ends = [self.end(p) for p in range(PARTITIONS)]
        deadline = time.monotonic() + 20
        while not all(st.next == ends[tp.partition] for tp, st in self.parts.items()):
            self.guarded(self.drain)
            self.check(time.monotonic() < deadline, "the fresh consumer did not read the "
                       f"records written after the commit: "
                       f"{[(st.next, ends[tp.partition]) for tp, st in self.parts.items()]}")
        for tp in self.tps:
            self.pin(tp)
        self.stop_consumer()
        for tp, st in self.parts.items():
            missing = sorted(set(range(ends[tp.partition])) - st.read)
            self.check(not missing, f"partition {tp.partition}: offsets never read: "
                                    f"{missing[:10]} ({len(missing)})")

    def close(self) -> None:
        try:
            if self.consumer is not None:
                self.consumer.close(autocommit=False, timeout=2)
        finally:
            self.loop.run_until_complete(self.writer.close())
            self.loop.close()


@pytest.mark.parametrize(("client", "seed"),
                         [("sync", s) for s in SEEDS] + [("async", s) for s in ASYNC_SEEDS])
def test_random_fault_schedule(mock_cluster: MockCluster, topic_name: str, client: str,
                               seed: int) -> None:
    mock_cluster.create_topic(topic_name, PARTITIONS, BROKERS)
    run = Run(mock_cluster, topic_name, seed, client)
    try:
        for p, b in run.leaders.items():
            mock_cluster.set_partition_leader(topic_name, p, b)
        run.write(30)
        run.start_consumer()
        try:
            for _ in range(STEPS):
                run.guarded(run.step)
            run.finish()
            if os.environ.get("KONTRAKT_CFAULT_VERBOSE"):
                print(f"seed {seed}: {sorted(run.counts.items())}, read "
                      f"{sum(len(st.read) for st in run.parts.values())}")
        except Exception as exc:
            run.fail(f"{type(exc).__name__}: {exc}")
    finally:
        run.close()
