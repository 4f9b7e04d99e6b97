"""Differential, randomized tests of the producer's record paths, without a broker.

Random interleavings of every way a record enters a batch -- send() of keyed and unkeyed
records staged and settled (record by record, in uniform and mixed runs, the keyless sticky
writer), produce_batch() of mixed message dicts (bulk staging and its fallbacks), and the
general path (headers, explicit partitions and timestamps, None keys and values, values too
long for a stage) -- with settles, looks at futures, drains and a clock that moves by less
than a millisecond, past one-byte timestamp deltas, and back. Every drained batch is read
by a small independent v2 reader (below, not kontrakt's decoder), and each partition's
records must be exactly the records sent there, in send order: keys, values, headers,
timestamps (ms), offsets, the batch fields (CRC, base and max timestamp, last offset delta,
record count), and keyed records in kafka-python's murmur2 partition.
"""

from __future__ import annotations

import asyncio
import os
import random
import struct
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import crc32c
import pytest

with warnings.catch_warnings():
    # kafka-python's package import loads its JSON schemas with a deprecated importlib API.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.partitioner.default import murmur2 as kafka_murmur2

from kontrakt.clients.producer import (
    AsyncProducer,
    RecordFuture,
    _batch_api,
    _core,
    _stage,
)
from kontrakt.clients.producer._partitioner import murmur2_partition, murmur2_partitions
from kontrakt.errors import RecordTooLargeError
from tests.unit.producer.offline import offline_producer, sync_over
from tests.unit.producer.test_partition_changes import set_partitions
from tests.unit.producer.test_round_trip_paths import _sender

# --- an independent v2 reader ------------------------------------------------------------


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


@dataclass
class Read:
    """A record as read back: key, value, headers, timestamp (ms)."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    ts: int


def _read_batch(blob: bytes, producer_id: int, epoch: int, split: bool = False) -> list[Read]:
    """The records of one uncompressed v2 batch, every batch-level field checked (``split``:
    a part of a split batch, whose base timestamp stays the whole batch's)."""
    (base_offset, length, _leader_epoch, magic, crc, attributes, last_delta, base_ts,
     max_ts, pid, pepoch, base_seq, count) = struct.unpack_from(">qiibIhiqqqhii", blob)
    assert base_offset == 0 and magic == 2 and attributes == 0
    assert length == len(blob) - 12
    assert crc == crc32c.crc32c(blob[21:]), "CRC"
    assert (pid, pepoch, base_seq) == (producer_id, epoch, -1)
    assert count >= 1 and last_delta == count - 1, (count, last_delta)
    pos = 61
    out: list[Read] = []
    for i in range(count):
        body_len, pos = _varint(blob, pos)
        end = pos + body_len
        assert blob[pos] == 0  # attributes
        ts_delta, p = _varint(blob, pos + 1)
        offset_delta, p = _varint(blob, p)
        assert offset_delta == i, (offset_delta, i)
        fields: list[bytes | None] = []
        for _ in range(2):
            n, p = _varint(blob, p)
            if n < 0:
                assert n == -1
                fields.append(None)
            else:
                fields.append(blob[p:p + n])
                p += n
        headers = []
        nh, p = _varint(blob, p)
        for _ in range(nh):
            n, p = _varint(blob, p)
            name = blob[p:p + n].decode()
            p += n
            n, p = _varint(blob, p)
            hv = None if n < 0 else blob[p:p + n]
            p += 0 if n < 0 else n
            headers.append((name, hv))
        assert p == end, "a record's length"
        pos = end
        out.append(Read(fields[0], fields[1], tuple(headers), base_ts + ts_delta))
    assert pos == len(blob)
    assert split or out[0].ts == base_ts, (base_ts, out[0].ts)
    assert max(r.ts for r in out) == max_ts, (base_ts, max_ts)
    return out


# --- the clock ---------------------------------------------------------------------------


class Clock:
    """time.time() / time_ns() for the producer's record paths: microseconds kept away from
    a millisecond's edges, so that int(t * 1000) and time_ns() // 10**6 agree."""

    def __init__(self, rnd: random.Random) -> None:
        self.rnd = rnd
        self.us = 1_764_000_000_000_500

    def time(self) -> float:
        return self.us / 1e6

    def time_ns(self) -> int:
        return self.us * 1000

    @property
    def ms(self) -> int:
        return self.us // 1000

    def step(self) -> None:
        r = self.rnd.random()
        if r < 0.55:
            d = self.rnd.randrange(0, 300)  # mostly the same millisecond
        elif r < 0.85:
            d = self.rnd.randrange(300, 4000)
        elif r < 0.93:
            d = self.rnd.randrange(60_000, 140_000)  # past a one-byte timestamp delta
        else:
            d = -self.rnd.randrange(1, 90_000)  # the clock steps back
        us = self.us + d
        frac = us % 1000
        if frac < 100:
            us += 100
        elif frac > 900:
            us -= 100
        self.us = us
        assert int(self.time() * 1000) == self.ms == self.time_ns() // 1_000_000


# --- what was sent -------------------------------------------------------------------------


@dataclass
class Sent:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    ts: int
    #: the partition it must be in (None: the sticky partitioner's choice)
    part: int | None
    fut: RecordFuture | None = None
    #: placed by the sticky partitioner (no key, no partition given)
    sticky: bool = False
    #: the topic's partition count when it was sent
    count: int = 0

    def read(self) -> Read:
        return Read(self.key, self.value, self.headers, self.ts)


@dataclass
class World:
    rnd: random.Random
    partitions: int
    batch_size: int
    clock: Clock
    stage_max: int  # the longest key + value a stage takes
    sent: list[Sent] = field(default_factory=list)
    #: each partition's batches' records, in drain order
    drained: dict[int, list[list[Read]]] = field(default_factory=dict)
    offsets: dict[int, int] = field(default_factory=dict)
    splits: int = 0
    #: the partitions with a leader, when not all
    available: list[int] | None = None
    #: the most partitions the topic had (its partition count changes: remade)
    most: int = 0
    remade: bool = False
    _records: list[list[Read]] | None = None
    #: drains from a drainer thread and the test's own are one at a time
    lock: Any = field(default_factory=threading.Lock)
    #: each partition's positions where a batch (not a split part) starts
    starts: dict[int, set[int]] = field(default_factory=dict)

    # -- records --

    def key(self, mode: Any) -> bytes:
        rnd = self.rnd
        if mode == "pool":
            return b"k%d" % rnd.randrange(40)
        n = mode if isinstance(mode, int) else rnd.choice(
            [0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 33, 63, 64, 65, 130, 500, 8100, 9000])
        return rnd.randbytes(n)

    def value(self, mode: Any, klen: int = 0) -> bytes:
        rnd = self.rnd
        if isinstance(mode, int):
            return rnd.randbytes(max(mode, 0))
        r = rnd.random()
        if r < 0.1:
            return b""
        if r < 0.15:  # at the stage's limit, either side
            return rnd.randbytes(max(self.stage_max - klen + rnd.choice([-1, 0, 1]), 0))
        if r < 0.2:
            return rnd.randbytes(rnd.randrange(self.batch_size // 2, self.batch_size + 200))
        return rnd.randbytes(rnd.choice([1, 5, 40, 63, 64, 100, 300]))

    def value_mode(self) -> Any:
        rnd = self.rnd
        r = rnd.random()
        if r < 0.45:  # one length: the uniform writers
            return rnd.choice([0, 1, 8, 50, 62, 63, 64, 120, 700, self.stage_max - 20])
        return "mixed"

    def key_mode(self) -> Any:
        rnd = self.rnd
        r = rnd.random()
        if r < 0.5:
            return rnd.choice([0, 1, 3, 4, 8, 10, 17, 63, 64, 100])
        return rnd.choice(["varying", "pool"])

    def unique(self, value: bytes | None) -> bytes:
        """``value`` made (almost surely) unlike every other record's, for a record placed
        by the sticky partitioner that has no future: its partition is then found by its
        bytes alone (records alike could be matched to each other's places, and searching
        through those is exponential). Short and None values become 4 random bytes more."""
        if value is not None and len(value) >= 8:
            return value
        return self.rnd.randbytes(4 + len(value or b"") + 4 * (value is None))

    def headers(self) -> Any:
        rnd = self.rnd
        hs = [(f"h{i}", None if rnd.random() < 0.2 else rnd.randbytes(rnd.randrange(0, 9)))
              for i in range(rnd.randrange(0, 3))]
        return dict(hs) if rnd.random() < 0.3 else hs

    def stamp(self) -> int:
        rnd = self.rnd
        return max(self.clock.ms + rnd.choice([0, 1, 63, 64, 65, -1, -64, -65, -5000,
                                                90_000, -(10 ** 9)]), 0)

    def single(self, timestamp_name: str) -> tuple[bytes | None, bytes | None, dict[str, Any]]:
        """A record for the general path: a key or None, a value or None, and send()'s (or
        produce()'s, ``timestamp_name`` telling the timestamp's keyword) keyword arguments:
        headers, a partition, a timestamp or none."""
        rnd = self.rnd
        key = self.key("varying") if rnd.random() < 0.6 else None
        value = self.value("mixed") if rnd.random() < 0.85 else None
        kw: dict[str, Any] = {}
        r = rnd.random()
        if r < 0.3:
            kw["headers"] = self.headers()
        elif r < 0.55:
            kw["partition"] = rnd.randrange(self.partitions)
        elif r < 0.8:
            kw[timestamp_name] = self.stamp()
        return key, value, kw

    def add(self, key: bytes | None, value: bytes | None, *, headers: Any = None,
            partition: int | None = None, ts: int | None = None,
            fut: RecordFuture | None = None) -> None:
        if partition is None and key is not None:
            partition = (kafka_murmur2(key) & 0x7FFFFFFF) % self.partitions
        if fut is not None and partition is None:
            # Placed by the sticky partitioner: among the topic's partitions at the time.
            assert fut.metadata().partition < self.partitions
        hs = tuple((headers.items() if isinstance(headers, dict) else headers) or ())
        self.sent.append(Sent(key, value, hs, self.clock.ms if ts is None else ts,
                              partition, fut, partition is None, self.partitions))

    # -- drains --

    def drain(self, s: Any, force: bool, rnd: random.Random | None = None) -> None:
        """A sender's drain: the batches it takes are read back and completed (or split
        and queued again). ``rnd``: a drainer thread's own generator."""
        with self.lock:
            self._drain(s, force, rnd or self.rnd)

    def _drain(self, s: Any, force: bool, rnd: random.Random) -> None:
        s.closing = force
        # now 0: only full batches (and every one when forced); past linger.ms: stages
        # settle, and every batch is ready
        now = 0.0 if rnd.random() < 0.7 else time.monotonic() + 120.0
        by_node, _wake_at, missing, _more = s._drain(now)
        assert not missing
        s._in_flight.clear()
        for b in by_node.get(1, []):
            blob = b.encode(7, 3, False)
            if b.count >= 2 and b.builder is None and rnd.random() < 0.1:
                # Refused as too large: split in two, both queued at the front again.
                assert s.acc.split_and_reenqueue(b) is not None
                self.splits += 1
                continue
            records = _read_batch(blob, 7, 3, b.parent is not None)
            assert len(records) == 1 or len(blob) <= self.batch_size, (len(blob), len(records))
            self.drained.setdefault(b.partition, []).append(records)
            base = self.offsets.get(b.partition, 0)
            if b.parent is None:
                self.starts.setdefault(b.partition, set()).add(base)
            self.offsets[b.partition] = base + len(records)
            b.complete(base)

    def drain_all(self, s: Any, acc: Any) -> None:
        for _ in range(10_000):
            if not acc.incomplete:
                break
            self.drain(s, True)
        assert not acc.incomplete

    # -- the oracle --

    def drained_records(self) -> list[list[Read]]:
        """Each partition's records read back, in offset order."""
        if self._records is None:
            self._records = [[r for batch in self.drained.get(p, ()) for r in batch]
                             for p in range(max(self.most, self.partitions))]
        return self._records

    def check(self) -> None:
        """Each partition's records are exactly the records sent there, in send order.

        A record produced without a future (produce_batch, produce) and without a key has
        no known partition: it is the next record of some partition, and where records
        alike make that ambiguous, each choice is tried (depth first, the previous
        unkeyed record's partition first, failed states remembered). Records alike are
        interchangeable there; a record with a future must be at its metadata's place."""
        most = max(self.most, self.partitions)
        got = [[r for batch in self.drained.get(p, ()) for r in batch] for p in range(most)]
        assert set(self.drained) <= set(range(most))
        sent = self.sent
        place: list[tuple[int, int] | None] = [None] * len(sent)
        for i, s in enumerate(sent):
            if s.fut is not None:
                md = s.fut.metadata()
                if s.part is None:
                    s.part = md.partition
                assert (md.partition, md.timestamp) == (s.part, s.ts), (i, md, s)
                assert md.offset < len(got[md.partition]), (i, md)
                assert got[md.partition][md.offset] == s.read(), (i, md, s)
                assert md.serialized_key_size == (-1 if s.key is None else len(s.key))
                assert md.serialized_value_size == (-1 if s.value is None else len(s.value))
                place[i] = (md.partition, md.offset)
        wants = [s.read() for s in sent]
        at = [0] * most
        stack: list[tuple[int, tuple[int, ...], int, list[int]]] = []
        failed: set[tuple[int, tuple[int, ...]]] = set()
        deepest = (-1, "")
        i, last, steps = 0, -1, 0
        while i < len(sent):
            steps += 1
            assert steps < 20 * len(sent) + 10_000, f"no match found; {deepest[1]}"
            want = wants[i]
            fixed = sent[i].part
            options = [fixed] if fixed is not None else sorted(
                range(most), key=lambda p: p != last)
            options = [p for p in options if at[p] < len(got[p]) and got[p][at[p]] == want]
            if options and (i, tuple(at)) in failed:
                options = []
            if not options:
                if i > deepest[0]:
                    near = [got[p][at[p]] if at[p] < len(got[p]) else None
                            for p in range(most)]
                    deepest = (i, f"record {i} {want!r:.300} (partition {fixed}) is not "
                                  f"next anywhere; next: {near!r:.1500}")
                while stack and not stack[-1][3]:
                    j, state, _, _ = stack.pop()
                    failed.add((j, state))
                assert stack, deepest[1]
                i, state, last, rest = stack[-1]
                at = list(state)
                options = [rest.pop(0)]
            elif len(options) > 1:
                stack.append((i, tuple(at), last, options[1:]))
            p = options[0]
            if sent[i].key is None:
                last = p
            at[p] += 1
            i += 1
        assert at == [len(g) for g in got], "records nobody sent"
        # KIP-480: a record the sticky partitioner placed opens a batch only in a
        # partition other than the previous such record's (a new batch there moves the
        # sticky partition on first). Only records with a future are surely placed.
        previous = -1
        moves = 0
        used: set[int] = set()
        for i, s in enumerate(sent):
            if not s.sticky:
                continue
            at_ = place[i]
            if at_ is None:
                previous = -1
                continue
            p, offset = at_
            used.add(p)
            if previous < 0:
                pass
            elif p != previous:
                moves += 1
            elif len(self.available or range(s.count)) > 1 and \
                    offset in self.starts.get(p, ()):
                raise AssertionError(f"record {i} opened a batch in the sticky partition "
                                     f"{p} of the record before it")
            previous = p
        if 1 < self.partitions < 8 and moves >= 12 * self.partitions and not self.remade:
            # The sticky partition moves among all partitions (it once only reached those
            # below a batch's record count).
            assert used == set(self.available or range(self.partitions)), (moves, used)
        if self.available:
            # The sticky partitioner picks among the partitions with a leader.
            assert used <= set(self.available), used


def _patch_clock(monkeypatch: pytest.MonkeyPatch, clock: Clock) -> None:
    monkeypatch.setattr(_stage, "_time", clock.time)
    monkeypatch.setattr(_batch_api, "_time", clock.time)
    monkeypatch.setattr(_core, "_time_ns", clock.time_ns)


def _world(seed: int, partitions: int, batch_size: int, p: AsyncProducer) -> World:
    rnd = random.Random(seed)
    random.seed(seed)  # the sticky partitioner's choices
    return World(rnd, partitions, batch_size, Clock(rnd),
                 p._acc.stage_limit - 21 - 1)


def _messages(w: World) -> list[dict[str, Any]]:
    """A produce_batch list: runs of bulk-stageable messages and others between them."""
    rnd = w.rnd
    out: list[dict[str, Any]] = []
    for _ in range(rnd.choice([1, 3, 8])):
        kind = rnd.random()
        n = rnd.choice([1, 2, 31, 33, 100, 700])
        if kind < 0.4:
            km, vm = w.key_mode(), w.value_mode()
            for _ in range(n):
                k = w.key(km)
                out.append({"key": k, "value": w.value(vm, len(k))})
        elif kind < 0.7:
            vm = w.value_mode()
            out += [{"value": w.unique(w.value(vm))} for _ in range(n)]
        else:
            for _ in range(rnd.choice([1, 2, 5])):
                m: dict[str, Any] = {"value": w.value("mixed")}
                r = rnd.random()
                if r < 0.15:
                    m["key"] = w.key("varying")
                    del m["value"]  # a key without a value
                elif r < 0.25:
                    m["value"] = None
                elif r < 0.4:
                    m["partition"] = rnd.choice([-1, rnd.randrange(w.partitions)])
                elif r < 0.55:
                    m["timestamp"] = rnd.choice([0, w.stamp()])
                elif r < 0.7:
                    m["headers"] = w.headers()
                elif r < 0.8:
                    m["_error"] = ValueError("left by an earlier call")
                elif r < 0.85:
                    m["value"] = bytearray(m["value"])
                elif r < 0.9:
                    m["key"] = memoryview(w.key("varying"))
                elif r < 0.93:
                    m["value"] = bytes(TOO_LARGE)  # '_error': RecordTooLargeError
                if rnd.random() < 0.5 and "key" not in m:
                    m["key"] = w.key("varying")
                v = m.get("value")
                if m.get("key") is None and (v is None or len(v) < TOO_LARGE):
                    # (the sticky partitioner's choice, without a future: see unique())
                    uv = w.unique(None if v is None else bytes(v))
                    m["value"] = bytearray(uv) if isinstance(v, bytearray) else uv
                out.append(m)
    return out


def _expect_messages(w: World, messages: list[dict[str, Any]], partition: int | None) -> int:
    """Expect what ``messages`` queue; returns how many should be."""
    n = 0
    for m in messages:
        if len(m.get("value") or b"") >= TOO_LARGE:
            assert isinstance(m.get("_error"), RecordTooLargeError), m.get("_error")
            continue
        assert "_error" not in m, m["_error"]
        n += 1
        part = m.get("partition")
        part = part if part is not None and part >= 0 else partition
        value = m.get("value")
        key = m.get("key")
        w.add(None if key is None else bytes(key), None if value is None else bytes(value),
              headers=m.get("headers"), partition=part, ts=m.get("timestamp") or None)
    return n


#: more seeds for a longer hunt: KONTRAKT_DIFF_SEEDS=200
SEEDS = range(int(os.environ.get("KONTRAKT_DIFF_SEEDS", "6")))
SHAPES = [(1, 700), (2, 1500), (6, 5000), (7, 16_384), (64, 2000)]
#: message.max.bytes of the producers here, and a value past it
MAX_BYTES = 40_000
TOO_LARGE = MAX_BYTES + 100


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("partitions", "batch_size"), SHAPES)
def test_async_record_paths_give_the_records_sent(
        seed: int, partitions: int, batch_size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Odd seeds: a small buffer.memory, so that sends and produce_batch wait for room (a
    # drainer task frees it) and stage_run stages what fits. Every third seed: only some
    # partitions (or none) have a leader, where the sticky partitioner must stay.
    pressure = seed % 2 == 1
    p = offline_producer(partitions, batch_size=batch_size, linger_ms=60_000,
                         message_max_bytes=MAX_BYTES,
                         **({"buffer_memory": 60_000, "max_block_ms": 20_000} if pressure
                            else {}))
    acc = p._acc
    w = _world(seed * 1000 + partitions, partitions, batch_size, p)
    if seed % 3 == 2:
        w.available = sorted(w.rnd.sample(range(partitions), w.rnd.randrange(w.partitions)))
        p._topics["t"].available = w.available
    _patch_clock(monkeypatch, w.clock)
    rnd, clock = w.rnd, w.clock
    s = _sender(acc)
    ops = ["keyed"] * 6 + ["keyless"] * 4 + ["single"] * 3 + ["batch"] * 2 + \
        ["whole", "settle", "look", "drain", "drain", "clock", "remake"]
    if w.available is None:
        set_partitions(p, partitions)  # the cluster's metadata, for remakes
    running = True
    delivered: list[tuple[Any, Any]] = []
    reported = [0]
    called: list[tuple[RecordFuture, Sent]] = []

    def on_delivery(e: Any, md: Any) -> None:
        delivered.append((e, md))

    async def drainer() -> None:
        while running:
            if acc.used > 30_000:
                w.drain(s, rnd.random() < 0.5)
            await asyncio.sleep(0)

    async def main() -> None:
        task = asyncio.ensure_future(drainer()) if pressure else None
        for _step in range(60):
            op = rnd.choice(ops)
            if op == "keyed":
                km, vm = w.key_mode(), w.value_mode()
                for _ in range(rnd.choice([1, 5, 31, 32, 33, 90, 300])):
                    if rnd.random() < 0.3:
                        clock.step()
                    k = w.key(km)
                    v = w.value(vm, len(k))
                    w.add(k, v, fut=await p.send("t", v, k))
            elif op == "keyless":
                vm = w.value_mode()
                for _ in range(rnd.choice([1, 5, 33, 90, 300])):
                    if rnd.random() < 0.3:
                        clock.step()
                    v = w.value(vm)
                    w.add(None, v, fut=await p.send("t", v))
            elif op == "single":
                k1, v1, kw = w.single("timestamp_ms")
                if rnd.random() < 0.05:
                    with pytest.raises(RecordTooLargeError):
                        await p.send("t", bytes(TOO_LARGE), k1, **kw)
                if k1 is not None and rnd.random() < 0.1:
                    fut = await p.send("t", v1, bytearray(k1), **kw)
                else:
                    fut = await p.send("t", v1, k1, **kw)
                w.add(k1, v1, headers=kw.get("headers"), partition=kw.get("partition"),
                      ts=kw.get("timestamp_ms"), fut=fut)
            elif op == "batch":
                messages = _messages(w)
                part = rnd.randrange(w.partitions) if rnd.random() < 0.15 else None
                report = rnd.random() < 0.3
                n = await p.produce_batch("t", messages, -1 if part is None else part,
                                          on_delivery=on_delivery if report else None)
                expected = _expect_messages(w, messages, part)
                assert n == expected
                reported[0] += expected if report else 0
            elif op == "whole":
                # A batch built by the caller (sealed: nothing is appended to it).
                builder = p.create_batch()
                part = rnd.randrange(w.partitions)
                for _ in range(rnd.choice([1, 3])):
                    k, v = w.key("varying"), w.value(rnd.choice([0, 10]))
                    ts = w.stamp()
                    if builder.append(ts, k, v, None) is None:
                        break  # the builder is full (batch.size)
                    w.add(k, v, partition=part, ts=ts)
                if builder.record_count:
                    await p.send_batch(builder, "t", partition=part)
            elif op == "settle":
                for stage in acc.stages.values():
                    acc.settle(stage)
            elif op == "look" and w.sent:
                s_ = rnd.choice(w.sent[-400:])
                if s_.fut is not None and not s_.fut.done() and rnd.random() < 0.5:
                    # A callback on a record still staged (or in an open batch).
                    s_.fut.add_done_callback(lambda f, s_=s_: called.append((f, s_)))
                elif s_.fut is not None and not s_.fut.done():
                    md = s_.fut.metadata()  # settles its stage
                    assert md.timestamp == s_.ts
                    if s_.part is not None:
                        assert md.partition == s_.part
            elif op == "drain":
                w.drain(s, rnd.random() < 0.6)
            elif op == "clock":
                clock.step()
            elif op == "remake" and w.available is None:
                # The topic is deleted and made again with another partition count: the
                # records staged are placed by the count they were sent under, the next
                # ones by the new count.
                w.most = max(w.most, w.partitions)
                w.partitions = rnd.choice([c for c in (1, 2, 3, 6, 7, 64) if c != w.partitions])
                w.remade = True
                set_partitions(p, w.partitions)
        nonlocal running
        running = False
        if task is not None:
            await task
        for stage in acc.stages.values():
            acc.settle(stage)
        w.drain_all(s, acc)
        for _ in range(3):
            await asyncio.sleep(0)  # done callbacks run on the loop's next turn

    asyncio.run(main())
    w.check()
    _check_delivered(w, delivered, reported[0])
    for f, s_ in called:
        md = f.metadata()
        assert (md.partition, md.timestamp) == (s_.fut.metadata().partition, s_.ts)
    assert len(w.sent) > 300
    assert acc.used == 0


def _check_delivered(w: World, delivered: list[tuple[Any, Any]], expected: int) -> None:
    """Every delivery callback ran once, without an error, with its record's metadata:
    the record read back at its partition and offset has its sizes and timestamp."""
    assert len(delivered) == expected
    places = set()
    for e, md in delivered:
        assert e is None
        r = w.drained_records()[md.partition][md.offset]
        assert (md.serialized_key_size, md.serialized_value_size, md.timestamp) == (
            -1 if r.key is None else len(r.key), -1 if r.value is None else len(r.value),
            r.ts), (md, r)
        places.add((md.partition, md.offset))
    assert len(places) == expected



@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("partitions", "batch_size"), SHAPES)
def test_sync_record_paths_give_the_records_sent(
        seed: int, partitions: int, batch_size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Odd seeds: a small buffer.memory; callers block for room that a drainer thread frees
    # (send(), produce() and produce_batch()'s waits).
    pressure = seed % 2 == 1
    core = offline_producer(partitions, _threaded=True, batch_size=batch_size,
                            linger_ms=60_000, message_max_bytes=MAX_BYTES,
                            **({"buffer_memory": 60_000, "max_block_ms": 20_000} if pressure
                               else {}))
    p = sync_over(core)
    acc = core._acc
    w = _world(seed * 1000 + partitions + 7, partitions, batch_size, core)
    _patch_clock(monkeypatch, w.clock)
    rnd, clock = w.rnd, w.clock
    s = _sender(acc)
    delivered: list[tuple[Any, Any]] = []
    reported = [0]

    def on_delivery(e: Any, md: Any) -> None:
        delivered.append((e, md))

    set_partitions(core, partitions)  # the cluster's metadata, for remakes
    ops = ["keyed"] * 6 + ["keyless"] * 4 + ["produce"] * 3 + ["batch"] * 2 + \
        ["settle", "look", "drain", "drain", "clock", "remake"]
    running = True

    def drainer() -> None:
        own = random.Random(seed)
        while running:
            if acc.used > 30_000:
                w.drain(s, own.random() < 0.5, own)
            else:
                time.sleep(0.0002)

    thread = threading.Thread(target=drainer, daemon=True)
    if pressure:
        thread.start()
    for _step in range(60):
        op = rnd.choice(ops)
        if op == "keyed":
            km, vm = w.key_mode(), w.value_mode()
            for _ in range(rnd.choice([1, 5, 31, 32, 33, 90, 300])):
                if rnd.random() < 0.3:
                    clock.step()
                k = w.key(km)
                v = w.value(vm, len(k))
                if rnd.random() < 0.2:
                    p.produce("t", v, k, on_delivery=on_delivery)
                    w.add(k, v)
                    reported[0] += 1
                else:
                    w.add(k, v, fut=p.send("t", v, k))
        elif op == "keyless":
            vm = w.value_mode()
            for _ in range(rnd.choice([1, 5, 33, 90, 300])):
                if rnd.random() < 0.3:
                    clock.step()
                v = w.value(vm)
                if rnd.random() < 0.2:
                    v = w.unique(v)
                    p.produce("t", v)
                    w.add(None, v)
                else:
                    w.add(None, v, fut=p.send("t", v))
        elif op == "produce":
            k1, v1, kw = w.single("timestamp")
            if k1 is None and "partition" not in kw:
                v1 = w.unique(v1)
            p.produce("t", v1, k1, **kw)
            w.add(k1, v1, headers=kw.get("headers"), partition=kw.get("partition"),
                  ts=kw.get("timestamp") or None)
        elif op == "batch":
            messages = _messages(w)
            part = rnd.randrange(w.partitions) if rnd.random() < 0.15 else None
            report = rnd.random() < 0.5
            n = p.produce_batch("t", messages, -1 if part is None else part,
                                on_delivery=on_delivery if report else None)
            assert n == _expect_messages(w, messages, part)
            reported[0] += n if report else 0
        elif op == "settle":
            for stage in acc.stages.values():
                acc.settle(stage)
        elif op == "look" and w.sent:
            s_ = rnd.choice(w.sent[-400:])
            if s_.fut is not None and not s_.fut.done():
                md = s_.fut.metadata()
                assert md.timestamp == s_.ts
                if s_.part is not None:
                    assert md.partition == s_.part
        elif op == "drain":
            w.drain(s, rnd.random() < 0.6)
            p.poll(0)
        elif op == "clock":
            clock.step()
        elif op == "remake":
            # The topic made again with another partition count (see the async test).
            w.most = max(w.most, w.partitions)
            w.partitions = rnd.choice([c for c in (1, 2, 3, 6, 7, 64) if c != w.partitions])
            w.remade = True
            set_partitions(core, w.partitions)
    running = False
    if pressure:
        thread.join(10)
        assert not thread.is_alive()
    for stage in acc.stages.values():
        acc.settle(stage)
    w.drain_all(s, acc)
    p.poll(0)
    w.check()
    assert len(w.sent) > 300
    assert acc.used == 0
    _check_delivered(w, delivered, reported[0])


# --- the partitioner -----------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_bulk_murmur2_partitions_match_kafka_python(seed: int) -> None:
    """murmur2_partitions (big-int lanes, division by magic constants) against kafka-python's
    murmur2 and murmur2_partition: keys of every length from 0 to 300, one length or many,
    partition counts from 1 to 2**31 - 1."""
    rnd = random.Random(seed)
    counts = [1, 2, 3, 6, 7, 64, 100, 1000, 65_537, 2**20 + 1, 2**30 + 3, 2**31 - 1,
              rnd.randrange(1, 2**31)]
    for _ in range(40):
        n = rnd.choice([1, 7, 8, 9, 33, 200])
        if rnd.random() < 0.5:
            length = rnd.randrange(0, 300)
            keys = [rnd.randbytes(length) for _ in range(n)]
        else:
            keys = [rnd.randbytes(rnd.choice([0, 1, 2, 3, 4, 5, rnd.randrange(300)]))
                    for _ in range(n)]
        if rnd.random() < 0.2:  # all-ones bytes: every lane's carries
            keys = [b"\xff" * len(k) for k in keys]
        for count in counts:
            want = [(kafka_murmur2(k) & 0x7FFFFFFF) % count for k in keys]
            assert murmur2_partitions(keys, count) == want, (count, [len(k) for k in keys])
            assert [murmur2_partition(k, count) for k in keys] == want


@pytest.mark.parametrize("keyed", [True, False])
def test_batches_of_more_than_8192_records(keyed: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches holding more records than two-byte offset deltas number (the run writers
    stop at 8192; the rest go one by one, with three-byte deltas): tiny records of one size
    and of many, sent and produce_batch'ed, into one partition's 1 MiB batches."""
    p = offline_producer(1, batch_size=1 << 20, linger_ms=60_000,
                         message_max_bytes=2 << 20)
    w = _world(8192 + keyed, 1, 1 << 20, p)
    _patch_clock(monkeypatch, w.clock)
    rnd = w.rnd
    s = _sender(p._acc)

    async def main() -> None:
        for step in range(6):
            sizes = [0] * 12_000 if step % 2 else [rnd.randrange(0, 3) for _ in range(12_000)]
            if step % 3 == 2:
                messages = [{"value": w.unique(rnd.randbytes(n))} if not keyed else
                            {"key": b"k", "value": rnd.randbytes(n)} for n in sizes]
                assert await p.produce_batch("t", messages) == len(messages)
                _expect_messages(w, messages, None)
            else:
                for n in sizes:
                    if rnd.random() < 0.01:
                        w.clock.step()
                    v = rnd.randbytes(n)
                    k = b"k" if keyed else None
                    w.add(k, v, fut=await p.send("t", v, k))
        for stage in p._acc.stages.values():
            p._acc.settle(stage)
        w.drain_all(s, p._acc)

    asyncio.run(main())
    w.check()
    assert max(len(b) for b in w.drained[0]) > 20_000


def _expand(bounds: list[int], millis: list[int], n: int) -> list[int]:
    """Each record's millisecond from (bounds, millis)."""
    out: list[int] = []
    for k, ms in enumerate(millis):
        out += [ms] * ((bounds[k] if k < len(bounds) else n) - len(out))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_millisecond_cuts_match_each_records_milliseconds(seed: int) -> None:
    """_millisecond_segments (sorted send times, bisected) and _millisecond_changes (any
    order) give each record int(t * 1000), for times on, just below and just above
    millisecond edges (the floats next to k / 1000), as time.time() gives them."""
    import math

    rnd = random.Random(seed)
    base = 1_764_000_000.0
    for _ in range(300):
        stamps = []
        t = base + rnd.randrange(10**6) / 1000
        for _ in range(rnd.choice([1, 2, 5, 40, 300])):
            r = rnd.random()
            if r < 0.3:
                t = math.nextafter(t, math.inf)
            elif r < 0.5:  # onto, or next to, a millisecond's edge
                edge = (math.floor(t * 1000) + rnd.randrange(0, 3)) / 1000
                t = max(t, rnd.choice([edge, math.nextafter(edge, 0.0),
                                       math.nextafter(edge, math.inf)]))
            elif r < 0.9:
                t += rnd.choice([0.0, 1e-6, 3e-4, 1e-3, 0.07])
            stamps.append(t)
        want = [int(s * 1000) for s in stamps]
        bounds, millis = _stage._millisecond_segments(stamps)
        assert _expand(bounds, millis, len(stamps)) == want
        assert len(set(millis)) == len(millis)
        rnd.shuffle(stamps)
        want = [int(s * 1000) for s in stamps]
        bounds, millis = _stage._millisecond_changes(stamps)
        assert _expand(bounds, millis, len(stamps)) == want
