"""A randomized differential run of the sync consumer's read paths against Tansu: one consumer
is driven through a seeded random mix of ``poll()`` (its lease fast paths), ``getmany()``,
``consume()``, ``seek()``, ``pause()``/``resume()``, ``assign()`` changes and commits, and
after every step the records, positions and committed offsets are checked against a model:
every record comes out once, in offset order per partition; ``position()`` is the last
returned offset + 1; ``commit()`` commits the positions; auto commit never passes a record
that was not handed out (or sought past).

The partitions hold records of one size (the run decoder), of varying sizes, keys and
headers (the general decoders) and compressed batches of both."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from typing import Any

import pytest

from kontrakt._types import TopicPartition
from kontrakt.clients import AsyncKafkaClient
from kontrakt.clients.consumer import Consumer
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


def _run(c: Consumer[Any, Any], topic: str, seed: int, mode: str) -> _Model:
    """``mode``: nogroup; group (commit() between calls); autocommit; store (auto commit
    of what store_offsets() stored only); race (commit() in a loop on another thread)."""
    rnd = random.Random(seed)
    group = mode == "group" or mode == "store"
    auto = mode != "nogroup" and mode != "group"
    store = mode == "store"
    tps = [TopicPartition(topic, p) for p in range(PARTS)]
    m = _Model(tps)
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTS)])
    for tp in tps:
        m.move(tp, 0)
    log: list[str] = []

    def check_positions() -> None:
        for tp, off in m.pos.items():
            assert c.position(tp) == off, f"position({tp}) after {log[-8:]}"

    def check_committed() -> None:
        got = c.committed(list(m.pos), timeout=10)
        for tp, om in got.items():
            if om is not None:
                bound = m.max_stored.get(tp, -1) if store else m.allowed[tp]
                assert om.offset <= bound, \
                    f"committed {tp} {om.offset} > {bound} after {log[-8:]}"

    def took(rec: Any, where: str) -> None:
        m.took(rec, where)
        if store and rnd.random() < 0.3:
            tp = TopicPartition(rec.topic, rec.partition)
            c.store_offsets(rec)
            m.stored[tp] = rec.offset + 1
            m.max_stored[tp] = max(m.max_stored.get(tp, 0), rec.offset + 1)

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

    for _ in range(150):
        op = rnd.choices(("poll", "polls", "getmany", "consume", "seek", "pause", "resume",
                          "assign", "commit"), (6, 8, 3, 3, 2, 1, 2, 1, 2 if group else 0))[0]
        log.append(op)
        if op == "poll":
            rec = c.poll(0.2)
            if rec is not None:
                took(rec, op)
        elif op == "polls":
            for _ in range(rnd.randint(1, 60)):
                rec = c.poll(0.05)
                if rec is None:
                    break
                took(rec, op)
        elif op == "getmany":
            got = c.getmany(0.2, max_records=rnd.choice((1, 3, 50, 500)))
            for recs in got.values():
                for rec in recs:
                    took(rec, op)
        elif op == "consume":
            for rec in c.consume(rnd.choice((1, 5, 100)), 0.2):
                took(rec, op)
        elif op == "seek" and m.pos:
            tp = rnd.choice(sorted(m.pos))
            off = rnd.choice((0, N, rnd.randrange(N), max(0, m.pos[tp] - 1),
                              min(N, m.pos[tp] + 1)))
            log[-1] = f"seek {tp.partition} {off}"
            c.seek(tp, off)
            m.move(tp, off)
        elif op == "pause" and m.pos:
            tp = rnd.choice(sorted(m.pos))
            log[-1] = f"pause {tp.partition}"
            c.pause(tp)
            m.paused.add(tp)
        elif op == "resume" and m.paused:
            tp = rnd.choice(sorted(m.paused))
            log[-1] = f"resume {tp.partition}"
            c.resume(tp)
            m.paused.discard(tp)
        elif op == "assign":
            keep = rnd.sample(tps, rnd.randint(1, PARTS))
            new = [TopicPartition(topic, tp.partition, m.pos.get(tp, rnd.randrange(N)))
                   for tp in keep]
            log[-1] = f"assign {[(t.partition, t.offset) for t in new]}"
            c.assign(new)
            m.pos = {}
            m.stored = {tp: off for tp, off in m.stored.items() if tp in keep}
            m.paused &= set(keep)  # kept partitions stay paused (their state is kept)
            for t in new:
                m.move(TopicPartition(topic, t.partition), t.offset)
        elif op == "commit":
            c.commit(timeout=10)
            done = c.committed(list(m.pos), timeout=10)
            for tp, off in m.pos.items():
                om = done[tp]
                if store:  # only what was stored
                    if tp in m.stored:
                        assert om is not None and om.offset == m.stored[tp], \
                            f"commit(): {tp} committed {om}, stored {m.stored[tp]}"
                    continue
                assert om is not None and om.offset == off, \
                    f"commit(): {tp} committed {om}, position {off} after {log[-8:]}"
        check_positions()
        if auto and rnd.random() < 0.2:
            check_committed()

    # Everything left comes out exactly once, in order.
    if m.paused:
        c.resume(*m.paused)
        m.paused = set()
    deadline = time.monotonic() + 15
    while any(off < N for off in m.pos.values()) and time.monotonic() < deadline:
        rec = c.poll(0.2)
        if rec is not None:
            took(rec, "final")
    assert all(off == N for off in m.pos.values()), f"{m.pos} {c.paused()} {'|'.join(log)}"
    assert c.poll(0.3) is None
    check_positions()
    if racer is not None:
        stop.set()
        racer.join(20)
        assert not errors, errors
    if auto:
        check_committed()
    if mode == "race":
        c.commit(timeout=10)
        assert all(om is not None and om.offset == N
                   for om in c.committed(list(m.pos), timeout=10).values())
    return m


@pytest.fixture
def _topic(tansu_broker: TansuBroker) -> str:
    name = f"consumer-differential-{random.Random().getrandbits(40):x}"
    tansu_broker.create_topic(name, PARTS)
    asyncio.run(_produce(tansu_broker.bootstrap_servers, name))
    return name


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("mode", ["nogroup", "group", "autocommit", "store", "race"])
def test_random_calls_match_model(tansu_broker: TansuBroker, _topic: str, seed: int,
                                  mode: str) -> None:
    cfg: dict[str, Any] = {"bootstrap_servers": tansu_broker.bootstrap_servers,
                           "fetch_max_wait_ms": 50,
                           "enable_auto_commit": mode in ("autocommit", "store"),
                           "enable_auto_offset_store": mode != "store",
                           "auto_commit_interval_ms": 50}
    if mode != "nogroup":
        cfg["group_id"] = f"g-{_topic}-{mode}-{seed}"
    if seed == 2:
        cfg["max_partition_fetch_bytes"] = 2000  # many small fetches, many leases
    with Consumer(**cfg) as c:
        m = _run(c, _topic, seed, mode)
    if mode in ("autocommit", "store"):
        # What close() committed never passes a record not handed out (or not stored).
        with Consumer(bootstrap_servers=tansu_broker.bootstrap_servers,
                      group_id=cfg["group_id"]) as other:
            got = other.committed(list(m.pos), timeout=10)
        for tp, om in got.items():
            bound = m.max_stored.get(tp, -1) if mode == "store" else m.allowed[tp]
            assert om is None or om.offset <= bound, (tp, om, bound)


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
