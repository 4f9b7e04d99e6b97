"""A randomized differential test of read_committed filtering: seeded schedules of interleaved
transactional (committed, aborted, left open), idempotent and plain writes by confluent-kafka
and Kontrakt producers on the in-process cluster, read back by Kontrakt's consumers (sync and
async; poll, getmany, consume; small fetch sizes, seeks, pause/resume) and by confluent-kafka's
consumer as the oracle. Neither external test broker can judge this (Tansu reports no aborted
transactions, librdkafka's mock filters nothing).

``KONTRAKT_RC_SEEDS`` picks the seeds for a longer hunt: a count (``200``: seeds 0-199), a
range (``100-300``) or a list (``3,17,42``; one seed: ``378,``). About 4 s a seed."""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import confluent_kafka as ck
import pytest

from kontrakt import AsyncConsumer, AsyncProducer, Consumer, Producer
from kontrakt._types import TopicPartition as TP
from kontrakt.testing import Cluster

pytestmark = pytest.mark.interop

T = TypeVar("T")
#: (offset, key, value, headers) of a record, as both clients are compared.
Rec = tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]
_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
_RC, _RU = "read_committed", "read_uncommitted"
_QUIET = 0.3  # seconds of silence that show a reader has nothing more (past the LSO)


def _seeds() -> list[int]:
    spec = os.environ.get("KONTRAKT_RC_SEEDS", "").strip()
    if not spec:
        return list(range(8))
    if "-" in spec:
        lo, hi = spec.split("-")
        return list(range(int(lo), int(hi)))
    if "," in spec:
        return [int(s) for s in spec.split(",") if s]
    return list(range(int(spec)))


class _Loop:
    """An event loop in a thread, for an AsyncProducer driven step by step from the test."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


@dataclass
class _Writer:
    """One producer of the schedule; ``kind`` says whose and how it writes."""

    name: str
    kind: str  # ck-txn, k-txn, k-async-txn, ck-idem, ck-plain, k-plain
    client: Any
    in_txn: bool = False
    sent: int = 0

    @property
    def transactional(self) -> bool:
        return self.kind.endswith("txn")


@dataclass
class _World:
    rng: random.Random
    cluster: Cluster
    tps: list[TP]
    loop: _Loop
    writers: list[_Writer] = field(default_factory=list)

    @property
    def bs(self) -> str:
        return self.cluster.bootstrap_servers


def _new_writers(w: _World) -> None:
    rng, bs = w.rng, w.bs

    def ck_conf(**extra: Any) -> dict[str, Any]:
        return {"bootstrap.servers": bs, "log_level": 0, "linger.ms": 1000,
                "batch.num.messages": rng.choice([1, 2, 3, 1000]),
                "compression.type": rng.choice(_CODECS), **extra}

    def k_conf(**extra: Any) -> dict[str, Any]:
        return {"bootstrap_servers": bs, "linger_ms": 1000,
                "batch_size": rng.choice([60, 200, 1000, 131072]),
                "compression_type": rng.choice(_CODECS), **extra}

    for i in range(rng.randint(2, 3)):
        p = ck.Producer(ck_conf(**{"transactional.id": f"ck-{i}"}))
        p.init_transactions(10)
        w.writers.append(_Writer(f"ck{i}", "ck-txn", p))
    kp = Producer(**k_conf(transactional_id="k-sync"))
    kp.init_transactions(10)
    w.writers.append(_Writer("ks", "k-txn", kp))
    ap = AsyncProducer(**k_conf(transactional_id="k-async"))
    w.loop.run(ap.start())
    w.writers.append(_Writer("ka", "k-async-txn", ap))
    w.writers.append(_Writer("cki", "ck-idem", ck.Producer(ck_conf(**{
        "enable.idempotence": True}))))
    w.writers.append(_Writer("ckp", "ck-plain", ck.Producer(ck_conf(**{
        "enable.idempotence": False, "acks": 1}))))
    w.writers.append(_Writer("kp", "k-plain", Producer(**k_conf(enable_idempotence=False,
                                                                 acks=1))))


def _record(w: _World, wr: _Writer) -> tuple[bytes | None, bytes,
                                             list[tuple[str, bytes | None]] | None]:
    rng = w.rng
    wr.sent += 1
    value = f"{wr.name}-{wr.sent}".encode() + b"." * rng.choice([0, 0, 10, 100, 400])
    key = rng.choice([None, b"k", f"key-{rng.randrange(100)}".encode()])
    choices: list[list[tuple[str, bytes | None]] | None] = [
        None, [("h", b"v")], [("a", b"1"), ("n", None)]]
    headers = rng.choice(choices)
    return key, value, headers


def _write(w: _World, wr: _Writer, n: int) -> None:
    """Write ``n`` records to random partitions, then flush so they are on the log."""
    async def send_async(recs: list[Any]) -> None:
        for tp, key, value, headers in recs:
            await wr.client.send(tp.topic, value, key, partition=tp.partition,
                                 headers=headers)
        await wr.client.flush(10)

    recs = [(w.rng.choice(w.tps), *_record(w, wr)) for _ in range(n)]
    if wr.kind.startswith("ck"):
        for tp, key, value, headers in recs:
            wr.client.produce(tp.topic, value, key, partition=tp.partition, headers=headers)
        assert wr.client.flush(10) == 0
    elif wr.kind == "k-async-txn":
        w.loop.run(send_async(recs))
    else:
        for tp, key, value, headers in recs:
            wr.client.send(tp.topic, value, key, partition=tp.partition, headers=headers)
        assert wr.client.flush(10) == 0


def _begin(w: _World, wr: _Writer) -> None:
    wr.client.begin_transaction()
    wr.in_txn = True


def _end(w: _World, wr: _Writer, commit: bool) -> None:
    if wr.kind == "k-async-txn":
        w.loop.run(wr.client.commit_transaction(10) if commit
                   else wr.client.abort_transaction(10))
    elif commit:
        wr.client.commit_transaction(10)
    else:
        wr.client.abort_transaction(10)
    wr.in_txn = False


def _schedule(w: _World, steps: int) -> None:
    """Interleaved writes; transactions are begun, written to in several flushes (batches)
    and ended at random, so some are still open at the end."""
    rng = w.rng
    for _ in range(steps):
        wr = rng.choice(w.writers)
        if wr.transactional:
            if not wr.in_txn:
                _begin(w, wr)
            _write(w, wr, rng.randint(1, 6))
            if rng.random() < 0.4:
                _end(w, wr, rng.random() < 0.55)
        else:
            _write(w, wr, rng.randint(1, 4))


def _close_writers(w: _World) -> None:
    for wr in w.writers:
        if wr.kind == "k-async-txn":
            w.loop.run(wr.client.close(10))
        elif wr.kind.startswith("k"):
            wr.client.close(10)
        else:
            wr.client.flush(10)


# --- the oracle ---------------------------------------------------------------------------

def _ck_rec(m: Any) -> Rec:
    return (m.offset(), m.key(), m.value(), tuple(m.headers() or ()))


def _ck_read(bs: str, tp: TP, start: int, isolation: str, end: int,
             times: list[int] | None = None) -> tuple[list[Rec], int]:
    """confluent-kafka's records of ``tp`` from ``start`` to the end (its partition EOF; or
    silence when it starts past ``end``, the LSO, where librdkafka signals no EOF), and its
    position then. The records' timestamps are added to ``times``."""
    c = ck.Consumer({"bootstrap.servers": bs, "group.id": "rc-oracle", "log_level": 0,
                     "isolation.level": isolation, "enable.partition.eof": True,
                     "enable.auto.commit": False, "fetch.wait.max.ms": 10})
    out: list[Rec] = []
    try:
        c.assign([ck.TopicPartition(tp.topic, tp.partition, start)])
        deadline = time.monotonic() + 15
        while True:
            m = c.poll(_QUIET if start > end else 5)
            if m is None:
                assert start > end, "confluent-kafka never reached the end"
                break
            err = m.error()
            if err is not None:
                assert err.code() == ck.KafkaError._PARTITION_EOF, err
                break
            out.append(_ck_rec(m))
            if times is not None:
                times.append(m.timestamp()[1])
            assert time.monotonic() < deadline, "confluent-kafka never reached the end"
        pos = c.position([ck.TopicPartition(tp.topic, tp.partition)])[0].offset
    finally:
        c.close()
    # librdkafka has no position until it consumed or stepped over something.
    return out, start if pos < 0 else pos


def _ck_ends(bs: str, tp: TP) -> tuple[int, int]:
    """(last stable offset, high watermark) as confluent-kafka's uncached watermark query
    reports them with each isolation level."""
    ends = []
    for iso in (_RC, _RU):
        c = ck.Consumer({"bootstrap.servers": bs, "group.id": "rc-oracle", "log_level": 0,
                         "isolation.level": iso})
        try:
            ends.append(c.get_watermark_offsets(
                ck.TopicPartition(tp.topic, tp.partition), timeout=10, cached=False)[1])
        finally:
            c.close()
    return ends[0], ends[1]


# --- Kontrakt's readers -------------------------------------------------------------------

def _k_rec(r: Any) -> Rec:
    return (r.offset, r.key, r.value, tuple(r.headers))


@dataclass
class _Reader:
    """A Kontrakt sync Consumer reading ``tps`` in one of its modes, with pauses."""

    c: Consumer[Any, Any]
    rng: random.Random
    tps: list[TP]
    mode: str
    got: dict[TP, list[Rec]] = field(default_factory=dict)

    def step(self) -> list[Any]:
        if self.mode == "poll":
            r = self.c.poll(0.05)
            return [] if r is None else [r]
        if self.mode == "consume":
            return self.c.consume(self.rng.randint(1, 7), 0.05)
        got = self.c.getmany(0.05, self.rng.choice([None, 1, 3]))
        return [r for recs in got.values() for r in recs]

    def read_to(self, ends: dict[TP, int]) -> None:
        """Read until every partition's position reaches its end, pausing and resuming
        partitions at random on the way."""
        paused: dict[TP, int] = {}
        deadline = time.monotonic() + 20
        while True:
            for r in self.step():
                tp = TP(r.topic, r.partition)
                assert tp not in paused, f"a record of paused {tp}: {r.offset}"
                self.got.setdefault(tp, []).append(_k_rec(r))
            for tp in [tp for tp, n in paused.items() if n <= 1]:
                self.c.resume(tp)
                del paused[tp]
            paused = {tp: n - 1 for tp, n in paused.items()}
            if self.rng.random() < 0.1:
                tp = self.rng.choice(self.tps)
                if tp not in paused:
                    self.c.pause(tp)
                    paused[tp] = self.rng.randint(1, 4)
            if not paused and all(self.c.position(tp) >= ends[tp] for tp in self.tps):
                break
            assert time.monotonic() < deadline, (
                f"stuck: positions {[self.c.position(tp) for tp in self.tps]}, ends {ends}")
        # Nothing more comes before the end moves.
        extra = self.step() + self.step()
        assert extra == [], [(r.partition, r.offset) for r in extra]


def _fetch_sizes(rng: random.Random) -> dict[str, Any]:
    """Small fetch limits, so fetches end inside aborted ranges and inside batches (the
    decompression bound, a multiple of the partition limit, kept at 1 MiB or more), and a
    small buffer cap, so responses are decoded a few records at a time."""
    per_partition = rng.choice([1, 100, 700, 3000, 1 << 20])
    return {"max_partition_fetch_bytes": per_partition,
            "fetch_max_bytes": rng.choice([1, 500, 5000, 1 << 20]),
            "max_decompressed_batch_multiple": max(64, (1 << 20) // per_partition),
            "queued_max_messages_kbytes": rng.choice([1, 2, 65536])}


def _k_consumer(w: _World, isolation: str) -> Consumer[Any, Any]:
    return Consumer(bootstrap_servers=w.bs, isolation_level=isolation,
                    auto_offset_reset="earliest", fetch_max_wait_ms=20,
                    fetch_sessions=w.rng.random() < 0.5, **_fetch_sizes(w.rng))


def _k_ends(bs: str, tps: list[TP], isolation: str) -> dict[TP, int]:
    with Consumer(bootstrap_servers=bs, isolation_level=isolation) as c:
        return c.end_offsets(tps)


async def _k_async_read(bs: str, tps: list[TP], starts: dict[TP, int], ends: dict[TP, int],
                        seed: int) -> tuple[dict[TP, list[Rec]], dict[TP, int]]:
    """AsyncConsumer (read_committed) from ``starts`` to ``ends`` via getmany, poll or
    consume; the records and the positions then."""
    rng = random.Random(seed)
    got: dict[TP, list[Rec]] = {tp: [] for tp in tps}
    async with AsyncConsumer(bootstrap_servers=bs, isolation_level=_RC,
                             auto_offset_reset="earliest", fetch_max_wait_ms=20,
                             **_fetch_sizes(rng)) as c:
        c.assign(tps)
        for tp in tps:
            c.seek(tp, starts[tp])
        mode = rng.choice(["getmany", "poll", "consume"])
        deadline = time.monotonic() + 20
        while not all([await c.position(tp) >= ends[tp] for tp in tps]):
            assert time.monotonic() < deadline, "AsyncConsumer stuck"
            if mode == "poll":
                r = await c.poll(0.05)
                recs = [] if r is None else [r]
            elif mode == "consume":
                recs = await c.consume(rng.randint(1, 5), 0.05)
            else:
                many = await c.getmany(0.05, rng.choice([None, 2]))
                recs = [r for rs in many.values() for r in rs]
            for r in recs:
                got[TP(r.topic, r.partition)].append(_k_rec(r))
        assert await c.getmany(0.05) == {}
        return got, {tp: await c.position(tp) for tp in tps}


def _seek_targets(rng: random.Random, rc: list[Rec], ru: list[Rec], hw: int) -> list[int]:
    """Offsets to seek to: into aborted (or open) transactions, onto control records, the
    end, and random ones."""
    committed = {r[0] for r in rc}
    hidden = [r[0] for r in ru if r[0] not in committed]
    data = {r[0] for r in ru}
    control = [o for o in range(hw) if o not in data]
    out = {rng.randrange(hw + 1), hw}
    for pool in (hidden, control):
        if pool:
            out.add(rng.choice(pool))
    return sorted(out)


def _same_position(ck_pos: int, k_pos: int, rc: list[Rec], ru: list[Rec]) -> None:
    """confluent-kafka's position equals Kontrakt's, or stops short of it only over aborted
    (or open) transactions' records whose marker is past the LSO: librdkafka moves its
    position over aborted batches only once it reads their abort marker, where Kafka's Java
    consumer moves it to the fetch's next offset (FetchCollector.fetchRecords), as Kontrakt
    does; both step over control records."""
    committed = {r[0] for r in rc}
    hidden = {r[0] for r in ru if r[0] not in committed}
    assert ck_pos <= k_pos and all(o in hidden for o in range(ck_pos, k_pos)), (ck_pos, k_pos)


def _check_open_phase(w: _World, seed: int) -> tuple[_Reader, dict[TP, list[Rec]]]:
    """Read while transactions are open: nothing at or past the LSO, the same records and
    positions as confluent-kafka, the same ends. Returns a reader left at the LSO."""
    rng, bs = w.rng, w.bs
    lso = _k_ends(bs, w.tps, _RC)
    hw = _k_ends(bs, w.tps, _RU)
    oracle: dict[TP, list[Rec]] = {}
    times: list[int] = []
    for tp in w.tps:
        assert _ck_ends(bs, tp) == (lso[tp], hw[tp])
        recs, pos = _ck_read(bs, tp, 0, _RC, lso[tp])
        assert all(r[0] < lso[tp] for r in recs)
        _same_position(pos, lso[tp], recs, _ck_read(bs, tp, 0, _RU, hw[tp], times)[0])
        oracle[tp] = recs
    _check_times(w, times)
    reader = _Reader(_k_consumer(w, _RC), rng, w.tps, rng.choice(["poll", "getmany",
                                                                   "consume"]))
    reader.c.assign(w.tps)
    reader.read_to(lso)
    for tp in w.tps:
        assert reader.got.get(tp, []) == oracle[tp], (seed, tp)
        assert reader.c.position(tp) == lso[tp]
        assert (reader.c.last_stable_offset(tp), reader.c.highwater(tp)) == (lso[tp], hw[tp])
    got, ends = asyncio.run(_k_async_read(bs, w.tps, dict.fromkeys(w.tps, 0), lso, seed))
    assert got == oracle and ends == lso
    # A seek past the LSO (into or beyond the open transaction) shows nothing, as with
    # confluent-kafka, and stays there.
    tp = rng.choice(w.tps)
    if hw[tp] > lso[tp]:
        target = rng.randint(lso[tp] + 1, hw[tp])
        recs, pos = _ck_read(bs, tp, target, _RC, lso[tp])
        with _k_consumer(w, _RC) as c:
            c.assign([tp])
            c.seek(tp, target)
            time.sleep(_QUIET)
            assert c.getmany(_QUIET) == {}
            assert (recs, pos) == ([], c.position(tp)) == ([], target)
    return reader, oracle


def _run_seed(seed: int) -> None:
    rng = random.Random(seed)
    brokers = rng.randint(1, 3)
    with Cluster(num_brokers=brokers) as cluster:
        topics = [f"rc-{seed}-{i}" for i in range(rng.randint(1, 2))]
        tps = []
        for t in topics:
            n = rng.randint(1, 3)
            cluster.create_topic(t, partitions=n, replication_factor=rng.randint(1, brokers))
            tps += [TP(t, p) for p in range(n)]
        w = _World(rng, cluster, tps, _Loop())
        try:
            _new_writers(w)
            _schedule(w, rng.randint(12, 24))
            txn = [wr for wr in w.writers if wr.transactional]
            if not any(wr.in_txn for wr in txn):
                wr = rng.choice(txn)
                _begin(w, wr)
                _write(w, wr, rng.randint(1, 4))
            for wr in w.writers:  # written past the open transactions' start
                if not wr.transactional:
                    _write(w, wr, 1)
                elif not wr.in_txn:
                    _begin(w, wr)
                    _write(w, wr, 1)
                    _end(w, wr, rng.random() < 0.5)
            reader, _ = _check_open_phase(w, seed)
            for wr in txn:
                if wr.in_txn:
                    _end(w, wr, rng.random() < 0.5)
        finally:
            _close_writers(w)
            w.loop.close()
        _check_closed_phase(w, seed, reader)
        assert cluster.internal_errors() == []


def _check_closed_phase(w: _World, seed: int, reader: _Reader) -> None:
    """Every transaction ended: the reader left at the LSO carries on to the end; fresh
    readers from seek targets (sync and async), and read_uncommitted, match the oracle."""
    rng, bs = w.rng, w.bs
    lso = _k_ends(bs, w.tps, _RC)
    hw = _k_ends(bs, w.tps, _RU)
    assert lso == hw
    times: list[int] = []
    rc: dict[TP, tuple[list[Rec], int]] = {}
    ru: dict[TP, tuple[list[Rec], int]] = {}
    for tp in w.tps:
        assert _ck_ends(bs, tp) == (lso[tp], hw[tp])
        rc[tp] = _ck_read(bs, tp, 0, _RC, lso[tp])
        ru[tp] = _ck_read(bs, tp, 0, _RU, hw[tp], times)
        assert rc[tp][1] == ru[tp][1] == hw[tp]
    _check_times(w, times)
    with reader.c:
        reader.read_to(lso)
        for tp in w.tps:
            assert reader.got.get(tp, []) == rc[tp][0], (seed, tp)
            assert reader.c.position(tp) == rc[tp][1]
    # read_uncommitted: every data record, the control records stepped over.
    with _k_consumer(w, _RU) as c:
        r = _Reader(c, rng, w.tps, rng.choice(["poll", "getmany", "consume"]))
        c.assign(w.tps)
        r.read_to(hw)
        for tp in w.tps:
            assert r.got.get(tp, []) == ru[tp][0], (seed, tp)
            assert c.position(tp) == ru[tp][1]
    # Seeks into aborted transactions, onto markers, to the end; one target per partition
    # at a time, each checked against confluent-kafka reading from there.
    targets = {tp: _seek_targets(rng, rc[tp][0], ru[tp][0], hw[tp]) for tp in w.tps}
    with _k_consumer(w, _RC) as c:
        r = _Reader(c, rng, w.tps, rng.choice(["poll", "getmany", "consume"]))
        c.assign(w.tps)
        for i in range(max(len(t) for t in targets.values())):
            starts = {tp: t[min(i, len(t) - 1)] for tp, t in targets.items()}
            # Seek with records buffered and fetches in flight half the time: none of what
            # was fetched for the old positions may come out after the seek.
            c.seek_to_beginning(*w.tps)
            for _ in range(rng.choice([0, 1, 3])):
                r.step()
            for tp, start in starts.items():
                c.seek(tp, start)
            r.got = {}
            r.read_to(hw)
            for tp, start in starts.items():
                want, pos = _ck_read(bs, tp, start, _RC, lso[tp])
                assert want == [x for x in rc[tp][0] if x[0] >= start]
                assert r.got.get(tp, []) == want, (seed, tp, start)
                assert c.position(tp) == pos
    starts = {tp: rng.choice(targets[tp]) for tp in w.tps}
    got, ends = asyncio.run(_k_async_read(bs, w.tps, starts, hw, seed))
    for tp in w.tps:
        assert got[tp] == [x for x in rc[tp][0] if x[0] >= starts[tp]], (seed, tp, starts)
        assert ends[tp] == rc[tp][1]


def _check_times(w: _World, times: list[int]) -> None:
    """offsets_for_times with either isolation level equals confluent-kafka's, at times of
    records (aborted and open ones too), just after them, and past all of them: with
    read_committed nothing at or past the LSO is found."""
    rng = w.rng
    picks = [rng.choice(times) + rng.choice([0, 1]) for _ in range(3)] if times else []
    for at in [0, *picks, max(times, default=0) + 1]:
        for iso in (_RC, _RU):
            with Consumer(bootstrap_servers=w.bs, isolation_level=iso) as c:
                found = c.offsets_for_times({tp: at for tp in w.tps})
            cc = ck.Consumer({"bootstrap.servers": w.bs, "group.id": "rc-oracle",
                              "log_level": 0, "isolation.level": iso})
            try:
                want = cc.offsets_for_times([ck.TopicPartition(tp.topic, tp.partition, at)
                                             for tp in w.tps], 10)
            finally:
                cc.close()
            for tp, x in zip(w.tps, want, strict=True):
                got = found[tp]
                assert (got.offset if got is not None else -1) == x.offset, (iso, tp, at)


@pytest.mark.parametrize("seed", _seeds())
def test_read_committed_matches_confluent(seed: int) -> None:
    _run_seed(seed)
