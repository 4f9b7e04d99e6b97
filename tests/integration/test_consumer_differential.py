"""A randomized differential run of the consumers' read paths against Tansu: one consumer
is driven through a seeded random mix of ``poll()`` (its lease fast paths), ``getmany()``,
``consume()``, ``seek()``, ``pause()``/``resume()``, ``assign()`` changes and commits, and
after every step the records, positions and committed offsets are checked against a model:
every record comes out once, in offset order per partition; ``position()`` is the last
returned offset + 1; ``commit()`` commits the positions; auto commit never passes a record
that was not handed out (or sought past).

The sync :class:`Consumer` and the :class:`AsyncConsumer` (whose poll() and getmany() are
paths of their own) run the same steps, choices and checks (``_Run``); each driver only
makes the calls that block or are awaited. The async one also runs other tasks against
the reads: commits, and seeks, pauses and assignments while a read waits.

The partitions hold records of one size (the run decoder), of varying sizes, keys and
headers (the general decoders) and compressed batches of both."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Mapping
from typing import Any, Protocol

import pytest

from kontrakt._types import OffsetAndMetadata, TopicPartition
from kontrakt.clients import AsyncKafkaClient
from kontrakt.clients.consumer import AsyncConsumer, Consumer
from kontrakt.protocol.records import RecordBatchBuilder
from kontrakt.testing import TansuBroker
from tests.integration.raw_ops import produce

pytestmark = [pytest.mark.integration]

N = 400  # records per partition
PARTS = 3


def _value(p: int, off: int) -> bytes:
    if p == 0:  # one size, no key, no headers
        return b"r%06d" % off
    return b"v%d-%d-" % (p, off) + b"x" * ((off * 37) % 300)


async def _produce(bootstrap: str, topic: str) -> None:
    rnd = random.Random(7)
    async with AsyncKafkaClient(bootstrap_servers=bootstrap) as client:
        for p in range(PARTS):
            off = 0
            while off < N:
                n = min(N - off, rnd.choice((1, 7, 50, 120)))
                codec = "none" if p == 0 else ("zstd" if p == 2 else rnd.choice(("none",
                                                                                  "gzip")))
                if p == 0 and off >= N // 2:
                    codec = "gzip"
                b = RecordBatchBuilder(compression=codec)
                for j in range(off, off + n):
                    key = None if p == 0 or j % 3 == 0 else b"k%d" % j
                    headers = [] if p == 0 or j % 2 else [("h", b"%d" % j)]
                    b.append(0, key, _value(p, j), headers)
                part = await produce(client, topic, p, b.build())
                assert part.error_code == 0, part
                off += n


class _Model:
    def __init__(self, tps: list[TopicPartition]) -> None:
        self.pos: dict[TopicPartition, int] = {}
        #: the furthest position each partition had (auto commit may reach it, not beyond)
        self.allowed: dict[TopicPartition, int] = {tp: 0 for tp in tps}
        self.paused: set[TopicPartition] = set()
        #: store_offsets() mode: the offset stored for each partition of its current state
        self.stored: dict[TopicPartition, int] = {}
        self.max_stored: dict[TopicPartition, int] = {}

    def move(self, tp: TopicPartition, off: int) -> None:
        self.pos[tp] = off
        self.allowed[tp] = max(self.allowed[tp], off)

    def took(self, rec: Any, where: str) -> None:
        tp = TopicPartition(rec.topic, rec.partition)
        assert tp in self.pos, f"{where}: record of unassigned {tp}: {rec.offset}"
        assert tp not in self.paused, f"{where}: record of paused {tp}: {rec.offset}"
        assert rec.offset == self.pos[tp], \
            f"{where}: {tp} gave offset {rec.offset}, expected {self.pos[tp]}"
        assert rec.value == _value(tp.partition, rec.offset), (where, rec.offset)
        self.move(tp, rec.offset + 1)


class _Controls(Protocol):
    """The calls both consumers make without awaiting (the async one's too)."""

    def seek(self, partition: TopicPartition, offset: int) -> None: ...
    def pause(self, *partitions: TopicPartition) -> None: ...
    def resume(self, *partitions: TopicPartition) -> None: ...
    def assign(self, partitions: list[TopicPartition]) -> None: ...
    def store_offsets(self, records: Any) -> None: ...


class _Run:
    """One random run's choices and checks against the model, shared by the sync and the
    async driver (which make the calls that block or are awaited: reads, positions,
    commits).

    ``mode``: nogroup; group (commit() between calls); autocommit; store (auto commit of
    what store_offsets() stored only); race (commits in a loop on another thread or task);
    nogroup-race (async only: seek/pause/resume/assign from another task, no group)."""

    STEPS = 150

    def __init__(self, topic: str, seed: int, mode: str) -> None:
        self.topic = topic
        self.rnd = random.Random(seed)
        self.mode = mode
        self.group = mode in ("group", "store")
        self.auto = mode in ("autocommit", "store", "race")
        self.store = mode == "store"
        self.tps = [TopicPartition(topic, p) for p in range(PARTS)]
        self.m = _Model(self.tps)
        self.log: list[str] = []

    def assign_all(self, c: _Controls) -> None:
        c.assign([TopicPartition(self.topic, p, 0) for p in range(PARTS)])
        for tp in self.tps:
            self.m.move(tp, 0)

    def next_op(self) -> str:
        op = self.rnd.choices(("poll", "polls", "getmany", "consume", "seek", "pause",
                               "resume", "assign", "commit"),
                              (6, 8, 3, 3, 2, 1, 2, 1, 2 if self.group else 0))[0]
        self.log.append(op)
        return op

    def burst(self) -> int:
        """How many polls a "polls" step makes at most."""
        return self.rnd.randint(1, 60)

    def max_records(self) -> int:
        return self.rnd.choice((1, 3, 50, 500))

    def num_records(self) -> int:
        return self.rnd.choice((1, 5, 100))

    def control(self, op: str, c: _Controls, rnd: random.Random | None = None) -> None:
        """Make the step ``op`` (seek, pause, resume or assign; logged last) on ``c`` and
        the model; ``rnd``: the choices' source (default the run's)."""
        rnd = rnd or self.rnd
        m, topic = self.m, self.topic
        if op == "seek" and m.pos:
            tp = rnd.choice(sorted(m.pos))
            off = rnd.choice((0, N, rnd.randrange(N), max(0, m.pos[tp] - 1),
                              min(N, m.pos[tp] + 1)))
            self.log[-1] = f"seek {tp.partition} {off}"
            c.seek(tp, off)
            m.move(tp, off)
        elif op == "pause" and m.pos:
            tp = rnd.choice(sorted(m.pos))
            self.log[-1] = f"pause {tp.partition}"
            c.pause(tp)
            m.paused.add(tp)
        elif op == "resume" and m.paused:
            tp = rnd.choice(sorted(m.paused))
            self.log[-1] = f"resume {tp.partition}"
            c.resume(tp)
            m.paused.discard(tp)
        elif op == "assign":
            keep = rnd.sample(self.tps, rnd.randint(1, PARTS))
            new = [TopicPartition(topic, tp.partition, m.pos.get(tp, rnd.randrange(N)))
                   for tp in keep]
            self.log[-1] = f"assign {[(t.partition, t.offset) for t in new]}"
            c.assign(new)
            m.pos = {}
            m.stored = {tp: off for tp, off in m.stored.items() if tp in keep}
            m.paused &= set(keep)  # kept partitions stay paused (their state is kept)
            for t in new:
                m.move(TopicPartition(topic, t.partition), t.offset)

    def took(self, rec: Any, where: str, c: _Controls) -> None:
        """``rec`` was handed out by ``c``: check it; in store mode store it, now and then."""
        m = self.m
        m.took(rec, where)
        if self.store and self.rnd.random() < 0.3:
            tp = TopicPartition(rec.topic, rec.partition)
            c.store_offsets(rec)
            m.stored[tp] = rec.offset + 1
            m.max_stored[tp] = max(m.max_stored.get(tp, 0), rec.offset + 1)

    def check_positions(self, got: Mapping[TopicPartition, int]) -> None:
        """``got``: position() of every partition in the model."""
        for tp, off in self.m.pos.items():
            assert got[tp] == off, \
                f"position({tp}) {got[tp]}, expected {off}, after {self.log[-8:]}"

    def wants_committed_check(self) -> bool:
        return self.auto and self.rnd.random() < 0.2

    def bound(self, tp: TopicPartition) -> int:
        """How far a commit of ``tp`` may be: never past a record not handed out (or
        sought past), nor, in store mode, past the furthest offset stored."""
        return self.m.max_stored.get(tp, -1) if self.store else self.m.allowed[tp]

    def check_committed(self, got: Mapping[TopicPartition, OffsetAndMetadata | None]) -> None:
        for tp, om in got.items():
            if om is not None:
                assert om.offset <= self.bound(tp), \
                    f"committed {tp} {om.offset} > {self.bound(tp)} after {self.log[-8:]}"

    def check_commit(self, done: Mapping[TopicPartition, OffsetAndMetadata | None]) -> None:
        """``done``: committed() right after a commit() without offsets."""
        for tp, off in self.m.pos.items():
            om = done[tp]
            if self.store:  # only what was stored
                if tp in self.m.stored:
                    assert om is not None and om.offset == self.m.stored[tp], \
                        f"commit(): {tp} committed {om}, stored {self.m.stored[tp]}"
                continue
            assert om is not None and om.offset == off, \
                f"commit(): {tp} committed {om}, position {off} after {self.log[-8:]}"

    def resume_all(self, c: _Controls) -> None:
        """Before the final drain."""
        if self.m.paused:
            c.resume(*self.m.paused)
            self.m.paused = set()

    def left(self) -> bool:
        """Records not handed out yet."""
        return any(off < N for off in self.m.pos.values())

    def check_all_taken(self, paused: set[TopicPartition]) -> None:
        """Everything was handed out exactly once, in order (``paused``: the consumer's)."""
        assert all(off == N for off in self.m.pos.values()), \
            f"{self.m.pos} {paused} {'|'.join(self.log)}"

    def check_all_committed(self, got: Mapping[TopicPartition, OffsetAndMetadata | None]
                            ) -> None:
        """A commit() after everything was handed out committed the end."""
        assert all(om is not None and om.offset == N for om in got.values()), got


def _run(c: Consumer[Any, Any], topic: str, seed: int, mode: str) -> _Model:
    """The sync driver (modes: see ``_Run``)."""
    run = _Run(topic, seed, mode)
    m = run.m
    run.assign_all(c)

    def check_positions() -> None:
        run.check_positions({tp: c.position(tp) for tp in m.pos})

    def check_committed() -> None:
        run.check_committed(c.committed(list(m.pos), timeout=10))

    stop = threading.Event()
    errors: list[BaseException] = []

    def committer() -> None:
        try:
            while not stop.is_set():
                c.commit(timeout=10)
        except BaseException as exc:
            errors.append(exc)

    racer = threading.Thread(target=committer) if mode == "race" else None
    if racer is not None:
        racer.start()

    for _ in range(run.STEPS):
        op = run.next_op()
        if op == "poll":
            rec = c.poll(0.2)
            if rec is not None:
                run.took(rec, op, c)
        elif op == "polls":
            for _ in range(run.burst()):
                rec = c.poll(0.05)
                if rec is None:
                    break
                run.took(rec, op, c)
        elif op == "getmany":
            got = c.getmany(0.2, max_records=run.max_records())
            for recs in got.values():
                for rec in recs:
                    run.took(rec, op, c)
        elif op == "consume":
            for rec in c.consume(run.num_records(), 0.2):
                run.took(rec, op, c)
        elif op == "commit":
            c.commit(timeout=10)
            run.check_commit(c.committed(list(m.pos), timeout=10))
        else:
            run.control(op, c)
        check_positions()
        if run.wants_committed_check():
            check_committed()

    # Everything left comes out exactly once, in order.
    run.resume_all(c)
    deadline = time.monotonic() + 15
    while run.left() and time.monotonic() < deadline:
        rec = c.poll(0.2)
        if rec is not None:
            run.took(rec, "final", c)
    run.check_all_taken(c.paused())
    assert c.poll(0.3) is None
    check_positions()
    if racer is not None:
        stop.set()
        racer.join(20)
        assert not errors, errors
    if run.auto:
        check_committed()
    if mode == "race":
        c.commit(timeout=10)
        run.check_all_committed(c.committed(list(m.pos), timeout=10))
    return m


#: How long the async driver's reads wait (seconds): shorter than the sync driver's, so
#: that the steps after everything was read, which wait it out, take less of CI's time.
WAIT = 0.06


async def _run_async(c: AsyncConsumer[Any, Any], topic: str, seed: int, mode: str) -> _Model:
    """The async driver: the sync one's steps, awaited. In the race modes other tasks run
    while this one awaits: commit() in a loop (race), and seek/pause/resume/assign while a
    read waits for records (race, nogroup-race). The loop runs one task at a time and a
    read hands its records to the caller without awaiting again, so the model stays exact:
    what a read returns comes after every call another task made before it returned."""
    run = _Run(topic, seed, mode)
    m = run.m
    run.assign_all(c)
    reading = False  # this task awaits a read: another task's control comes in between
    stop = asyncio.Event()
    errors: list[BaseException] = []

    async def check_positions() -> None:
        run.check_positions({tp: await c.position(tp, timeout=10) for tp in list(m.pos)})

    async def check_committed() -> None:
        run.check_committed(await c.committed(list(m.pos), timeout=10))

    async def committer() -> None:
        try:
            while not stop.is_set():
                await c.commit(timeout=10)
                await asyncio.sleep(0)  # (a commit with nothing to do need not suspend)
        except Exception as exc:
            errors.append(exc)

    async def disturber() -> None:
        rnd = random.Random(seed + 1000)
        try:
            while not calm.is_set():
                await asyncio.sleep(rnd.uniform(0.0, WAIT))
                if reading and not calm.is_set():
                    op = rnd.choices(("seek", "pause", "resume", "assign"), (4, 1, 3, 1))[0]
                    run.log.append(op)
                    run.control(op, c, rnd)
                    run.log[-1] = "task: " + run.log[-1]
        except Exception as exc:
            errors.append(exc)

    calm = asyncio.Event()  # the disturber stops
    commits = asyncio.create_task(committer()) if mode == "race" else None
    controls = (asyncio.create_task(disturber()) if mode in ("race", "nogroup-race")
                else None)
    tasks = [t for t in (commits, controls) if t is not None]
    try:
        for _ in range(run.STEPS):
            op = run.next_op()
            reading = True
            if op == "poll":
                rec = await c.poll(WAIT)
                if rec is not None:
                    run.took(rec, op, c)
            elif op == "polls":
                for _ in range(run.burst()):
                    rec = await c.poll(WAIT / 4)
                    if rec is None:
                        break
                    run.took(rec, op, c)
            elif op == "getmany":
                got = await c.getmany(WAIT, max_records=run.max_records())
                for recs in got.values():
                    for rec in recs:
                        run.took(rec, op, c)
            elif op == "consume":
                for rec in await c.consume(run.num_records(), WAIT):
                    run.took(rec, op, c)
            elif op == "commit":
                reading = False
                await c.commit(timeout=10)
                run.check_commit(await c.committed(list(m.pos), timeout=10))
            else:
                reading = False
                run.control(op, c)
            reading = False
            await check_positions()
            if run.wants_committed_check():
                await check_committed()

        # The other tasks' controls stop; everything left comes out exactly once, in order.
        calm.set()
        if controls is not None:
            await asyncio.wait([controls], timeout=10)
            assert controls.done()
            # (else the race mode went by without a race: reads that never waited)
            assert any(step.startswith("task: ") for step in run.log), run.log
        run.resume_all(c)
        deadline = time.monotonic() + 15
        while run.left() and time.monotonic() < deadline:
            rec = await c.poll(0.2)
            if rec is not None:
                run.took(rec, "final", c)
        run.check_all_taken(c.paused())
        assert await c.poll(0.3) is None
        await check_positions()
        stop.set()
        if commits is not None:
            await asyncio.wait([commits], timeout=20)
            assert commits.done()
        assert not errors, errors
        if run.auto:
            await check_committed()
        if mode == "race":
            await c.commit(timeout=10)
            run.check_all_committed(await c.committed(list(m.pos), timeout=10))
    finally:
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=10)
    return m


def _config(broker: TansuBroker, topic: str, seed: int, mode: str) -> dict[str, Any]:
    cfg: dict[str, Any] = {"bootstrap_servers": broker.bootstrap_servers,
                           "fetch_max_wait_ms": 50,
                           "enable_auto_commit": mode in ("autocommit", "store"),
                           "enable_auto_offset_store": mode != "store",
                           "auto_commit_interval_ms": 50}
    if mode not in ("nogroup", "nogroup-race"):
        cfg["group_id"] = f"g-{topic}-{mode}-{seed}"
    if seed == 2:
        cfg["max_partition_fetch_bytes"] = 2000  # many small fetches, many leases
    return cfg


def _check_closed_commits(run_mode: str, m: _Model,
                          got: Mapping[TopicPartition, OffsetAndMetadata | None]) -> None:
    """What close() committed never passes a record not handed out (or not stored)."""
    for tp, om in got.items():
        bound = m.max_stored.get(tp, -1) if run_mode == "store" else m.allowed[tp]
        assert om is None or om.offset <= bound, (tp, om, bound)


def _new_topic(broker: TansuBroker) -> str:
    name = f"consumer-differential-{random.Random().getrandbits(40):x}"
    broker.create_topic(name, PARTS)
    asyncio.run(_produce(broker.bootstrap_servers, name))
    return name


@pytest.fixture
def _topic(tansu_broker: TansuBroker) -> str:
    return _new_topic(tansu_broker)


#: bootstrap servers -> the topic the random runs read (only read: one is enough)
_read_only_topics: dict[str, str] = {}


@pytest.fixture
def _shared_topic(tansu_broker: TansuBroker) -> str:
    """A topic written once per broker: the random runs only read it, each in its own
    group (the sync and async runs' group ids differ too)."""
    key = tansu_broker.bootstrap_servers
    if key not in _read_only_topics:
        _read_only_topics[key] = _new_topic(tansu_broker)
    return _read_only_topics[key]


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("mode", ["nogroup", "group", "autocommit", "store", "race"])
def test_random_calls_match_model(tansu_broker: TansuBroker, _shared_topic: str, seed: int,
                                  mode: str) -> None:
    _topic = _shared_topic
    cfg = _config(tansu_broker, _topic, seed, mode)
    with Consumer(**cfg) as c:
        m = _run(c, _topic, seed, mode)
    if mode in ("autocommit", "store"):
        with Consumer(bootstrap_servers=tansu_broker.bootstrap_servers,
                      group_id=cfg["group_id"]) as other:
            got = other.committed(list(m.pos), timeout=10)
        _check_closed_commits(mode, m, got)


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("mode", ["nogroup", "nogroup-race", "group", "autocommit", "store",
                                  "race"])
def test_async_random_calls_match_model(tansu_broker: TansuBroker, _shared_topic: str,
                                        seed: int, mode: str) -> None:
    """The async consumer's twin: its own read paths (poll()'s lease without a group,
    drain_one with one, getmany) under the same steps and model."""
    _topic = _shared_topic
    cfg = _config(tansu_broker, _topic, seed, mode)
    if "group_id" in cfg:
        cfg["group_id"] = "async-" + cfg["group_id"]

    async def main() -> None:
        async with AsyncConsumer(**cfg) as c:
            m = await asyncio.wait_for(_run_async(c, _topic, seed, mode), 90)
        if mode in ("autocommit", "store"):
            async with AsyncConsumer(bootstrap_servers=tansu_broker.bootstrap_servers,
                                     group_id=cfg["group_id"]) as other:
                got = await other.committed(list(m.pos), timeout=10)
            _check_closed_commits(mode, m, got)

    asyncio.run(main())


def test_auto_commit_with_assign(tansu_broker: TansuBroker, _topic: str) -> None:
    """enable.auto.commit documents commits every interval and on close(); the Java client
    and librdkafka do both for a manual assignment with a group.id too."""
    tp = TopicPartition(_topic, 0)
    group = f"g-{_topic}-assign"
    with Consumer(bootstrap_servers=tansu_broker.bootstrap_servers, group_id=group,
                  auto_commit_interval_ms=50, fetch_max_wait_ms=50) as c:
        c.assign([TopicPartition(_topic, 0, 0)])
        got = c.consume(10, 10.0)
        assert got
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            c.poll(0.1)  # the records count as processed; the interval passes
        assert c.committed(tp, timeout=10) is not None, "no timed auto commit"
    with Consumer(bootstrap_servers=tansu_broker.bootstrap_servers, group_id=group) as other:
        assert other.committed(tp, timeout=10) is not None, "no auto commit on close()"


@pytest.mark.parametrize("auto_commit", [True, False])
def test_close_commits_a_manual_assignment_only_with_auto_commit(
        tansu_broker: TansuBroker, _topic: str, auto_commit: bool) -> None:
    """close() commits every record handed out of partitions given by assign(), before
    any timed auto commit, and only when enable.auto.commit is on."""
    tp = TopicPartition(_topic, 0)
    group = f"g-{_topic}-close-{auto_commit}"
    with Consumer(bootstrap_servers=tansu_broker.bootstrap_servers, group_id=group,
                  enable_auto_commit=auto_commit, auto_commit_interval_ms=600_000,
                  fetch_max_wait_ms=50) as c:
        c.assign([TopicPartition(_topic, 0, 0)])
        got = c.consume(10, 10.0)
        assert got
        position = c.position(tp)
        assert c.committed(tp, timeout=10) is None  # (no timed commit yet)
    with Consumer(bootstrap_servers=tansu_broker.bootstrap_servers, group_id=group) as other:
        om = other.committed(tp, timeout=10)
    if auto_commit:
        assert om == position
    else:
        assert om is None
