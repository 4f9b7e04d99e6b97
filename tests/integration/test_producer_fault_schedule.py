"""The idempotent producer under a seeded random schedule of calls and faults (mock cluster,
and Kontrakt's in-process cluster with a strict oracle).

Each seed draws a producer (``AsyncProducer`` or ``Producer``; enable.idempotence left to its
default or set; max.in.flight 1, 2 or 5; linger, batch.size, compression none/zstd) and a
schedule that interleaves its calls -- ``send()`` keyed, unkeyed to an explicit partition or
to the partitioner, ``produce()`` and ``produce_batch()`` with delivery callbacks,
``send_batch()`` of a filled ``create_batch()``, ``flush()`` and pauses -- with faults on a
3-broker librdkafka mock cluster: injected Produce error codes (retriable:
NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS(_AFTER_APPEND), dropped
connections; sequence/epoch: OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID,
INVALID_PRODUCER_EPOCH), leader moves, a broker down for up to 0.6 s, RTT on a broker, and
in about a third of the seeds a broker down for longer than delivery.timeout.ms with records
sent to every partition meanwhile (those led by it fail with a timeout). The seed fixes the
schedule, not the timing of requests against it.

Afterwards every partition is read back raw (batches with their producer id, epoch and base
sequence) and, independently, with confluent-kafka's consumer; the producer ids it took are
read from its log line. The oracle checks that

* ``resolved-once``: every record is reported exactly once (future or callback), by the
  final flush, which must return within delivery.timeout.ms plus a margin; a future
  resolves at most delivery.timeout.ms (plus 0.5 s) after its send;
* ``typed-error``: a record reported failed carries a :class:`~kontrakt.errors.KafkaError`,
  and is not in the log unless its fate was unknown (a timeout);
* ``at-offset``: an acknowledged record is in its partition (its key's, the one asked for,
  or the one its metadata names) at exactly the offset its metadata reported;
* ``exactly-once``: nothing in the log was never sent, and an acknowledged record appears
  once, or more often only as allowed below;
* ``sequence``: within one producer id and epoch, a sequence number never carries two
  different records, and every id written under is one the producer took;
* ``order``: per partition (so per key), acknowledged records in send order have strictly
  increasing sequences under one producer id, never go back to an older id, and, with one
  request in flight, have increasing offsets (the last two only for records written in
  turn, see below);
* ``reader``: confluent-kafka's consumer reads the same (offset, key, value) as the raw read.

Deviations of the mock (librdkafka 2.16, see ``test_mock_accepts_sequence_gaps`` in
test_producer_faults.py) that the oracle allows for:

* It does not check sequence numbers: it writes a batch after a gap (where Kafka answers
  OUT_OF_ORDER_SEQUENCE_NUMBER) and a resend of a written batch (where Kafka answers
  DUPLICATE_SEQUENCE_NUMBER). So with several requests in flight, a batch sent after one
  that got an injected error is written first, and the resend lands behind it. A record is
  "in turn" when every lower sequence of its id and epoch is before it in the log (what
  Kafka enforces); log order and the order of ids are asserted only for records in turn
  (``gaps-accepted`` counts the others), sequence order for all. A duplicate under the same
  (producer id, epoch, sequence) is counted (``resent-duplicates``), not failed.
* Because of that acceptance, an injected OUT_OF_ORDER_SEQUENCE_NUMBER can hit a batch whose
  successor the mock has already acknowledged; the producer then fails the batch (see
  ``_idempotence``), which Kafka would not make it do. Failed records are therefore allowed
  (typed, and not in the log unless timed out); each seed prints how many.
* An injected error answers the whole Produce request and writes nothing (Kafka's
  NOT_ENOUGH_REPLICAS_AFTER_APPEND would have written it); a dropped connection
  (``DISCONNECT``) writes nothing either, but answers delayed by RTT that a drop or a
  broker going down cuts off are lost after the write.

Allowed, though not a mock deviation (``rewritten-under-new-id``): a batch written whose
answer was lost, then resent after the producer took a new producer id, is renumbered under
the new id and written again (the new id has no record of the old one's sequences, at the
mock as at Kafka). The copy acknowledged must be the last, under the newer id.

The same schedules also run against :class:`kontrakt.testing.Cluster`, which checks
sequence numbers as Kafka's ProducerStateManager does (a resend of one of the last five
batches is answered with its first offset and not written again; a gap is
OUT_OF_ORDER_SEQUENCE_NUMBER). It is Kontrakt's own code, not an independent peer: a bug shared
by it and the producer can hide, so the oracle stays the raw log and confluent-kafka's
consumer. Every fault control the schedule uses exists there (injected Produce errors and
dropped connections, leader moves, brokers down, RTT); as at the mock, an injected error
writes nothing. There a broker going down first delays its next three Produce answers by
150 ms and goes down 0.1 s later, cutting off answers to requests it wrote, so that written
batches are sent again (and must be deduplicated). Against it the oracle is strict
(``strict=True``):

* no duplicate under one (producer id, epoch, sequence) and no record out of turn (written
  after a gap): both are failures, not counts;
* ``order``: acknowledged records in send order have increasing offsets per partition with
  any max.in.flight, not only with one;
* a record may fail only with a timeout (a broker down past delivery.timeout.ms);
* a producer id's first write in a partition is sequence 0 (``first-write-past-0`` must
  stay 0): Kafka accepts any first sequence from a producer id it holds no state of, so
  were the request carrying sequence 0 refused (an injected error) while the next one is
  written, the refused batch could only fail or land behind it. The producer sends a
  partition's first batch under a producer id alone, for this (it takes a new producer id
  at each recovery, where the Java client bumps the epoch of the same one);
* ``rewritten-under-new-id`` stays allowed (it is Kafka's behaviour too) and is counted.

``KONTRAKT_FAULT_SEEDS=50`` (and ``KONTRAKT_FAULT_SEED_BASE``) runs a longer hunt; for the
in-process cluster ``KONTRAKT_CLUSTER_FAULT_SEEDS`` (default 4) and the same base.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from kontrakt import RecordMetadata
from kontrakt.clients import AsyncKafkaClient
from kontrakt.clients.producer import AsyncProducer, Producer, RecordFuture, murmur2_partition
from kontrakt.errors import KafkaError, KafkaTimeoutError
from kontrakt.protocol.messages import FetchRequest
from kontrakt.protocol.records import iter_batches
from kontrakt.testing import Cluster, MockCluster
from tests.integration.raw_ops import leader

pytestmark = pytest.mark.integration

#: more seeds for a longer hunt: KONTRAKT_FAULT_SEEDS=50
SEED_BASE = int(os.environ.get("KONTRAKT_FAULT_SEED_BASE", "0"))
SEEDS = range(SEED_BASE, SEED_BASE + int(os.environ.get("KONTRAKT_FAULT_SEEDS", "4")))
CLUSTER_SEEDS = range(SEED_BASE, SEED_BASE + int(
    os.environ.get("KONTRAKT_CLUSTER_FAULT_SEEDS", "4")))

PRODUCE = 0
#: NOT_LEADER, TIMED_OUT, NOT_ENOUGH_REPL.; the cluster's own DISCONNECT is swapped in there
RETRIABLE = [6, 7, 19, 20, MockCluster.DISCONNECT]
SEQUENCE = [45, 59, 47]  # OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID, INVALID_EPOCH
BROKERS = (1, 2, 3)
REQUEST_TIMEOUT_MS = 2000
DELIVERY_TIMEOUT_MS = 5000
#: a broker down this long: records waiting for it run out of delivery.timeout.ms
OUTAGE = DELIVERY_TIMEOUT_MS / 1000 + 1.5
#: what the final flush may take past delivery.timeout.ms
FLUSH_SLACK = 5.0
#: how late past delivery.timeout.ms a future may resolve (a loaded machine's loop)
LATE = 0.5
#: close() of a producer whose flush did not end fails what is left after this
CLOSE_TIMEOUT = 2.0
FAST: dict[str, Any] = {
    "retry_backoff_ms": 10, "retry_backoff_max_ms": 80, "reconnect_backoff_ms": 10,
    "reconnect_backoff_max_ms": 80, "metadata_max_age_ms": 500,
    "request_timeout_ms": REQUEST_TIMEOUT_MS, "delivery_timeout_ms": DELIVERY_TIMEOUT_MS}


@dataclass
class Sent:
    """One record handed to the producer, and what it was told."""

    index: int
    value: bytes
    key: bytes | None
    #: where it must land (its key's or the one asked for); None: the partitioner's choice
    partition: int | None
    path: str
    #: position in a send_batch() batch (whose future is the first record's)
    position: int = 0
    #: time.monotonic() when handed to the producer, and when its future resolved
    sent_at: float = 0.0
    resolved_at: float = 0.0
    reports: list[tuple[BaseException | None, RecordMetadata | None]] = field(
        default_factory=list)


@dataclass
class Entry:
    """One record in a partition's log, with its batch's idempotence fields."""

    offset: int
    key: bytes | None
    value: bytes | None
    era: tuple[int, int]
    sequence: int


@dataclass
class Schedule:
    """A seed's producer and its list of steps."""

    seed: int
    partitions: int
    sync: bool
    config: dict[str, Any]
    steps: list[tuple[Any, ...]]


def make_schedule(seed: int) -> Schedule:
    rng = random.Random(seed)
    partitions = rng.choice([2, 3, 4])
    sync = rng.random() < 0.5
    config: dict[str, Any] = {
        **FAST,
        "linger_ms": rng.choice([0, 1, 5, 20]),
        "batch_size": rng.choice([300, 2048, 16384]),
        "compression_type": rng.choice(["none", "zstd"]),
        "max_in_flight_requests_per_connection": rng.choice([1, 2, 5]),
    }
    if rng.random() < 0.5:
        config["enable_idempotence"] = True
    paths = ["send", "produce_batch", "send_batch"] + (["produce"] if sync else [])
    steps: list[tuple[Any, ...]] = []
    for _ in range(rng.randrange(30, 45)):
        roll = rng.random()
        if roll < 0.55:
            how = rng.choice(["keyed", "keyed", "explicit", "any"])
            steps.append(("records", rng.choice(paths), how, rng.randrange(partitions),
                          rng.randrange(1, 40)))
        elif roll < 0.62:
            steps.append(("flush",))
        elif roll < 0.70:
            steps.append(("pause", rng.choice([0.005, 0.02, 0.08])))
        elif roll < 0.80:
            steps.append(("errors", [rng.choice(RETRIABLE) for _ in range(rng.randrange(1, 4))]))
        elif roll < 0.85:
            steps.append(("errors", [rng.choice(SEQUENCE)]))
        elif roll < 0.92:
            steps.append(("leader", rng.randrange(partitions), rng.choice(BROKERS)))
        elif roll < 0.96:
            steps.append(("down", rng.choice(BROKERS), rng.choice([0.1, 0.3, 0.6])))
        else:
            steps.append(("rtt", rng.choice(BROKERS), rng.choice([50, 200, 500]),
                          rng.choice([0.2, 0.5])))
    if rng.random() < 0.3:
        # A broker down for longer than delivery.timeout.ms, records sent meanwhile.
        broker, at = rng.choice(BROKERS), rng.randrange(len(steps))
        steps[at:at] = [("outage", broker), *(("records", rng.choice(paths), "explicit", part,
                                               rng.randrange(1, 5))
                                              for part in range(partitions)),
                        ("outage-end", broker)]
    return Schedule(seed, partitions, sync, config, steps)


#: the broker the schedule runs against (both take the same fault calls)
Brokers = MockCluster | Cluster


class Run:
    """Carries out a schedule's records and faults; the producer calls are the caller's."""

    def __init__(self, mc: Brokers, topic: str, sched: Schedule,
                 lost_answers: bool = False) -> None:
        self.mc, self.topic, self.sched = mc, topic, sched
        #: a broker going down first delays its next Produce answers, so that it cuts off
        #: answers to requests it wrote (resends of written batches, to be deduplicated)
        self.lost_answers = lost_answers
        self.rng = random.Random(sched.seed * 7919 + 1)
        self.sent: list[Sent] = []
        #: what went wrong while running (the oracle adds its own)
        self.problems: list[str] = []
        self.lock = threading.Lock()
        #: faults to end (a broker to bring up, an RTT to clear), on timers: a flush in
        #: the schedule must not hold them
        self.timers: list[threading.Timer] = []

    def new_records(self, path: str, how: str, part: int, n: int) -> list[Sent]:
        out = []
        for _ in range(n):
            i = len(self.sent)
            value = b"%d:%06d:" % (self.sched.seed, i) + b"x" * self.rng.choice([0, 8, 90, 400])
            if how == "keyed":
                keyed = b"k%02d" % self.rng.randrange(24)
                key: bytes | None = keyed
                where: int | None = part if path == "send_batch" else murmur2_partition(
                    keyed, self.sched.partitions)
            else:
                key = None if self.rng.random() < 0.7 else b"u"
                where = part if how == "explicit" or path == "send_batch" else None
                if where is None:
                    key = None  # the partitioner's choice is only a keyless record's
            s = Sent(i, value, key, where, path, sent_at=time.monotonic())
            self.sent.append(s)
            out.append(s)
        return out

    def report(self, s: Sent, err: BaseException | None, md: RecordMetadata | None) -> None:
        with self.lock:
            s.reports.append((err, md))

    def on_delivery(self, s: Sent) -> Callable[[BaseException | None, RecordMetadata], None]:
        return lambda err, md: self.report(s, err, None if err else md)

    def on_future(self, records: list[Sent]) -> Callable[[RecordFuture], None]:
        def done(fut: RecordFuture) -> None:
            err = fut.exception()
            md = None if err is not None else fut.result()
            for s in records:
                s.resolved_at = time.monotonic()
                self.report(s, err, md)
        return done

    def later(self, delay: float, fn: Callable[[], None]) -> None:
        timer = threading.Timer(delay, fn)
        timer.daemon = True
        self.timers.append(timer)
        timer.start()

    def fault(self, step: tuple[Any, ...]) -> None:
        kind = step[0]
        if kind == "errors":
            codes = [self.mc.DISCONNECT if c == MockCluster.DISCONNECT else c for c in step[1]]
            self.mc.push_request_errors(PRODUCE, codes)
        elif kind == "leader":
            self.mc.set_partition_leader(self.topic, step[1], step[2])
        elif kind == "down":
            broker = step[1]
            if self.lost_answers:
                self.mc.broker_push_request_error_rtts(broker, PRODUCE, [(0, 150)] * 3)
                self.later(0.1, lambda: self.mc.broker_down(broker))
                self.later(0.1 + step[2], lambda: self.mc.broker_up(broker))
                return
            self.mc.broker_down(broker)
            self.later(step[2], lambda: self.mc.broker_up(broker))
        elif kind == "rtt":
            broker = step[1]
            self.mc.set_rtt(broker, step[2])
            self.later(step[3], lambda: self.mc.set_rtt(broker, 0))

    def finish_faults(self) -> None:
        """End every fault now (before the final flush)."""
        for timer in self.timers:
            timer.cancel()
            timer.join(5)
        self.mc.broker_up(-1)
        self.mc.set_rtt(-1, 0)


def batch_of(p: AsyncProducer | Producer, records: list[Sent]) -> tuple[Any, list[Sent]]:
    """A create_batch() batch of as many of ``records`` as fit (at least the first)."""
    b = p.create_batch()
    taken: list[Sent] = []
    for s in records:
        if b.append(int(time.time() * 1000), s.key, s.value) is None:
            break
        s.position = len(taken)
        taken.append(s)
    return b, taken


async def run_async(mc: Brokers, topic: str, sched: Schedule, lost_answers: bool) -> Run:
    run = Run(mc, topic, sched, lost_answers)
    p = AsyncProducer(bootstrap_servers=mc.bootstrap_servers, **sched.config)
    await p.start()
    try:
        for step in sched.steps:
            kind = step[0]
            if kind == "records":
                _, path, how, part, n = step
                records = run.new_records(path, how, part, n)
                if path == "send":
                    for s in records:
                        fut = await p.send(topic, s.value, s.key, partition=s.partition)
                        fut.add_done_callback(run.on_future([s]))
                elif path == "produce_batch":
                    msgs: list[dict[str, Any]] = [
                        {"value": s.value, "key": s.key,
                         **({} if s.partition is None else {"partition": s.partition})}
                        for s in records]
                    for s, m in zip(records, msgs, strict=True):
                        m["callback"] = run.on_delivery(s)
                    assert await p.produce_batch(topic, msgs) == len(msgs)
                else:
                    while records:
                        b, taken = batch_of(p, records)
                        if not taken:
                            # Too large for a batch of its own: it goes through send().
                            taken = records[:1]
                            taken[0].path = "send"
                            fut = await p.send(topic, taken[0].value, taken[0].key,
                                               partition=part)
                        else:
                            fut = await p.send_batch(b, topic, partition=part)
                        fut.add_done_callback(run.on_future(taken))
                        records = records[len(taken):]
            elif kind == "flush":
                try:
                    await asyncio.wait_for(p.flush(DELIVERY_TIMEOUT_MS / 1000 + FLUSH_SLACK),
                                           DELIVERY_TIMEOUT_MS / 1000 + 2 * FLUSH_SLACK)
                except (KafkaTimeoutError, asyncio.TimeoutError) as exc:
                    run.problems.append(f"resolved-once: a flush() did not end: {exc!r}")
                    break
            elif kind == "pause":
                await asyncio.sleep(step[1])
            elif kind == "outage":
                mc.broker_down(step[1])
            elif kind == "outage-end":
                await asyncio.sleep(OUTAGE)
                mc.broker_up(step[1])
            else:
                run.fault(step)
            await asyncio.sleep(0)
        await asyncio.sleep(0.05)
        run.finish_faults()
        try:
            if not run.problems:
                await asyncio.wait_for(p.flush(DELIVERY_TIMEOUT_MS / 1000 + FLUSH_SLACK),
                                       DELIVERY_TIMEOUT_MS / 1000 + 2 * FLUSH_SLACK)
        except (KafkaTimeoutError, asyncio.TimeoutError) as exc:
            run.problems.append(f"resolved-once: the final flush did not end: {exc!r}")
        await asyncio.sleep(0.01)  # done callbacks run on the loop's next turn
    finally:
        run.finish_faults()
        # Bounded: records a broken producer never resolves must not hang the test.
        await asyncio.wait_for(p.close(CLOSE_TIMEOUT), CLOSE_TIMEOUT + 5)
    return run


def run_sync(mc: Brokers, topic: str, sched: Schedule, lost_answers: bool) -> Run:
    run = Run(mc, topic, sched, lost_answers)
    bound = DELIVERY_TIMEOUT_MS / 1000 + FLUSH_SLACK
    p = Producer(bootstrap_servers=mc.bootstrap_servers, **sched.config)
    try:
        for step in sched.steps:
            kind = step[0]
            if kind == "records":
                _, path, how, part, n = step
                records = run.new_records(path, how, part, n)

                if path == "send":
                    for s in records:
                        p.send(topic, s.value, s.key, partition=s.partition).add_done_callback(
                            run.on_future([s]))
                elif path == "produce":
                    for s in records:
                        p.produce(topic, s.value, s.key, partition=s.partition,
                                  on_delivery=run.on_delivery(s))
                elif path == "produce_batch":
                    msgs = [{"value": s.value, "key": s.key, "callback": run.on_delivery(s),
                             **({} if s.partition is None else {"partition": s.partition})}
                            for s in records]
                    assert p.produce_batch(topic, msgs) == len(msgs)
                else:
                    while records:
                        b, taken = batch_of(p, records)
                        if not taken:
                            taken = records[:1]
                            taken[0].path = "send"
                            fut = p.send(topic, taken[0].value, taken[0].key, partition=part)
                        else:
                            fut = p.send_batch(b, topic, partition=part)
                        fut.add_done_callback(run.on_future(taken))
                        records = records[len(taken):]
                p.poll(0)
            elif kind == "flush":
                try:
                    p.flush(bound)
                except KafkaTimeoutError as exc:
                    run.problems.append(f"resolved-once: a flush() did not end: {exc!r}")
                    break
            elif kind == "pause":
                time.sleep(step[1])
            elif kind == "outage":
                mc.broker_down(step[1])
            elif kind == "outage-end":
                time.sleep(OUTAGE)
                mc.broker_up(step[1])
            else:
                run.fault(step)
        time.sleep(0.05)
        run.finish_faults()
        try:
            if not run.problems:
                p.flush(bound)
        except KafkaTimeoutError as exc:
            run.problems.append(f"resolved-once: the final flush did not end: {exc!r}")
    finally:
        run.finish_faults()
        p.close(CLOSE_TIMEOUT)
    return run


async def read_log(bootstrap: str, topic: str, partition: int) -> list[Entry]:
    """The partition's records from offset 0 to the high watermark, with batch fields."""
    out: list[Entry] = []
    async with AsyncKafkaClient(bootstrap_servers=bootstrap) as client:
        node, topic_id = await leader(client, topic, partition)
        for _ in range(1000):
            offset = out[-1].offset + 1 if out else 0
            req = FetchRequest(max_wait_ms=100, min_bytes=1, max_bytes=1 << 20, topics=[
                FetchRequest.FetchTopic(topic=topic, topic_id=topic_id, partitions=[
                    FetchRequest.FetchTopic.FetchPartition(
                        partition=partition, fetch_offset=offset,
                        partition_max_bytes=1 << 20)])])
            resp = await asyncio.wait_for(client.request(req, node=node), 10)
            part = resp.responses[0].partitions[0]
            assert part.error_code == 0, part
            if offset >= part.high_watermark:
                return out
            for batch in iter_batches(part.records or b"", topic=topic, partition=partition):
                assert not batch.is_control
                for r in batch.records():
                    if r.offset >= offset:
                        out.append(Entry(r.offset, r.key, r.value,
                                         (batch.producer_id, batch.producer_epoch),
                                         batch.base_sequence + r.offset - batch.base_offset))
    raise AssertionError(f"partition {partition}: log not read in 1000 fetches")


def read_with_confluent(bootstrap: str, topic: str, partition: int,
                        end: int) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of offsets [0, end) read by confluent-kafka's consumer."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "fault-schedule-oracle",
                  "enable.auto.commit": False, "log_level": 3})
    out: list[tuple[int, bytes | None, bytes | None]] = []
    if end == 0:
        return out
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + 15
        while (not out or out[-1][0] + 1 < end) and time.monotonic() < deadline:
            for m in c.consume(500, 0.5):
                assert m.error() is None, m.error()
                out.append((m.offset() or 0, m.key(), m.value()))
    finally:
        c.close()
    return out


def tag(value: bytes | None) -> str:
    """A record's value without its padding: 'seed:index:'."""
    return repr(value if value is None else value.rstrip(b"x"))


def in_turn(entries: list[Entry]) -> dict[int, bool]:
    """offset -> whether Kafka would have written the record then: every lower sequence of
    its producer id and epoch is before it in the log (the mock also writes after a gap)."""
    seen: dict[tuple[int, int], set[int]] = defaultdict(set)
    prefix: dict[tuple[int, int], int] = defaultdict(int)
    out = {}
    for e in entries:
        before = prefix[e.era]
        seen[e.era].add(e.sequence)
        while prefix[e.era] in seen[e.era]:
            prefix[e.era] += 1
        out[e.offset] = e.sequence <= before
    return out


def refused_by_kafka(entries: list[Entry]) -> tuple[list[int], list[int]]:
    """(offsets Kafka would have refused, offsets where a producer id's first write here
    started past sequence 0).

    Kafka's ProducerStateManager accepts any sequence from a producer id it holds no state
    of (its records gone, or never written here), then only the next one under the same
    epoch, or 0 under a newer epoch; an older epoch is refused."""
    last: dict[int, tuple[int, int]] = {}
    refused, fresh_past_zero = [], []
    for e in entries:
        pid, epoch = e.era
        before = last.get(pid)
        if before is None:
            if e.sequence != 0:
                fresh_past_zero.append(e.offset)
        elif epoch < before[0] or (epoch == before[0] and e.sequence != before[1] + 1) \
                or (epoch > before[0] and e.sequence != 0):
            refused.append(e.offset)
        last[pid] = (epoch, e.sequence)
    return refused, fresh_past_zero


def oracle(sched: Schedule, sent: list[Sent], logs: dict[int, list[Entry]],
           era_order: dict[tuple[int, int], int],
           strict: bool = False) -> tuple[list[str], dict[str, int]]:
    """The problems found (each starts with its check's name) and counts to print.

    ``era_order``: the producer's ids and epochs in the order it took them. ``strict``: the
    broker checks sequences as Kafka does (see the module docstring)."""
    problems: list[str] = []
    stats = {"records": len(sent), "failed": 0, "resent-duplicates": 0,
             "rewritten-under-new-id": 0, "gaps-accepted": 0, "first-write-past-0": 0}
    refused_at: dict[int, set[int]] = {}
    by_value = {s.value: s for s in sent}
    copies: dict[bytes, list[tuple[int, Entry]]] = defaultdict(list)
    at: dict[tuple[int, int], Entry] = {}
    for part, entries in logs.items():
        era_seqs: dict[tuple[int, int], dict[int, bytes | None]] = defaultdict(dict)
        for e in entries:
            at[part, e.offset] = e
            if e.value not in by_value:
                problems.append(f"exactly-once: p{part}@{e.offset} holds a record never sent")
                continue
            assert e.value is not None
            copies[e.value].append((part, e))
            seen = era_seqs[e.era].setdefault(e.sequence, e.value)
            if seen != e.value:
                problems.append(f"sequence: p{part} {e.era} seq {e.sequence} carries "
                                f"{tag(seen)} and {tag(e.value)}")
    for part, entries in logs.items():
        for e in entries:
            if e.era not in era_order:
                problems.append(f"sequence: p{part}@{e.offset} written under {e.era}, which "
                                f"the producer never had")
                era_order[e.era] = -1
        stats["gaps-accepted"] += sum(not t for t in in_turn(entries).values())
        refused, fresh = refused_by_kafka(entries)
        refused_at[part] = set(refused)
        if fresh:
            stats["first-write-past-0"] += 1
            if strict:
                problems.append(f"sequence: p{part} took a producer id's first write past "
                                f"sequence 0 at {fresh[:10]}")
        if strict and refused:
            problems.append(f"sequence: p{part} holds records Kafka would have refused at "
                            f"{refused[:10]}")
    acked: dict[int, list[tuple[Sent, Entry]]] = defaultdict(list)
    for s in sent:
        if len(s.reports) != 1:
            problems.append(f"resolved-once: record {s.index} ({s.path}) reported "
                            f"{len(s.reports)} times: {s.reports[:3]}")
            if not s.reports:
                continue
        err, md = s.reports[0]
        # (A future's; delivery callbacks run only when poll() or flush() runs them.)
        if s.resolved_at and s.resolved_at - s.sent_at > DELIVERY_TIMEOUT_MS / 1000 + LATE:
            problems.append(f"resolved-once: record {s.index} ({s.path}) resolved "
                            f"{s.resolved_at - s.sent_at:.2f} s after it was sent")
        mine = copies.get(s.value, [])
        if err is not None:
            stats["failed"] += 1
            if not isinstance(err, KafkaError):
                problems.append(f"typed-error: record {s.index} failed with {err!r}")
            elif strict and not isinstance(err, KafkaTimeoutError):
                problems.append(f"typed-error: record {s.index} ({s.path}) failed with "
                                f"{err!r}, which Kafka would have written")
            if mine and not isinstance(err, KafkaTimeoutError):
                problems.append(f"typed-error: record {s.index} failed ({err!r}) but is in "
                                f"the log at {[(p, e.offset) for p, e in mine]}")
            continue
        assert md is not None
        offset = md.offset + s.position
        if s.partition is not None and md.partition != s.partition:
            problems.append(f"at-offset: record {s.index} reported in p{md.partition}, sent "
                            f"to p{s.partition}")
        found = at.get((md.partition, offset))
        if found is None or found.value != s.value or found.key != s.key:
            problems.append(f"at-offset: record {s.index} ({s.path}) reported at "
                            f"p{md.partition}@{offset}, which holds "
                            f"{None if found is None else tag(found.value)}; copies at "
                            f"{[(p, c.offset) for p, c in mine]}")
            continue
        e = found
        if len(mine) > 1:
            rank = era_order
            if len({(p, c.era, c.sequence) for p, c in mine}) == 1:
                stats["resent-duplicates"] += len(mine) - 1
                if strict:
                    problems.append(f"exactly-once: record {s.index} ({s.path}) written "
                                    f"{len(mine)} times under {e.era} seq {e.sequence} at "
                                    f"{[(p, c.offset) for p, c in mine]}")
            elif all(p == md.partition and c.offset < e.offset and rank[c.era] < rank[e.era]
                     for p, c in mine if c is not e):
                # Written, its answer lost, then sent again under a new producer id (see
                # the module docstring): the copy acknowledged is the last.
                stats["rewritten-under-new-id"] += len(mine) - 1
            else:
                where = [(p, c.offset, c.era, c.sequence) for p, c in mine]
                problems.append(f"exactly-once: record {s.index} ({s.path}) written "
                                f"{len(mine)} times, as {where}")
        acked[md.partition].append((s, e))
    ordered = strict or sched.config["max_in_flight_requests_per_connection"] == 1
    for part, pairs in acked.items():
        # Against a checking broker every record it took is in turn by Kafka's rule (a
        # refused one is a problem already); in_turn() would skip a fresh id's first writes.
        turn = {e.offset: e.offset not in refused_at[part] for e in logs[part]} if strict \
            else in_turn(logs[part])
        last_seq: dict[tuple[int, int], tuple[Sent, Entry]] = {}
        newest: tuple[Sent, Entry] | None = None  # under the newest id so far, in turn
        prev: tuple[Sent, Entry] | None = None  # in turn
        for s, e in pairs:  # send order
            before = last_seq.get(e.era)
            if before is not None and before[1].sequence >= e.sequence:
                problems.append(
                    f"order: p{part} record {before[0].index} has sequence "
                    f"{before[1].sequence} under {e.era}, the later {s.index} {e.sequence}")
            last_seq[e.era] = (s, e)
            if not turn[e.offset]:
                continue  # written where Kafka would have refused it (see above)
            if newest is not None and era_order[newest[1].era] > era_order[e.era]:
                problems.append(
                    f"order: p{part} record {newest[0].index} went under {newest[1].era}, "
                    f"the later {s.index} under the older {e.era}")
            if newest is None or era_order[e.era] >= era_order[newest[1].era]:
                newest = (s, e)
            if ordered and prev is not None and prev[1].offset >= e.offset:
                problems.append(f"order: p{part} record {prev[0].index} at {prev[1].offset}, "
                                f"the later {s.index} at {e.offset}")
            prev = (s, e)
    return problems, stats


class ProducerIds(logging.Handler):
    """The producer ids and epochs the producer takes, in order (from its INFO log line)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.order: dict[tuple[int, int], int] = {}
        self.logger = logging.getLogger("kontrakt.producer")
        self.level_before = self.logger.level

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg == "producer id %s epoch %s (was %s)" and isinstance(record.args, tuple):
            pid, epoch = record.args[:2]
            self.order.setdefault((int(pid), int(epoch)), len(self.order))  # type: ignore

    def __enter__(self) -> ProducerIds:
        self.logger.addHandler(self)
        self.logger.setLevel(logging.INFO)
        return self

    def __exit__(self, *exc: object) -> None:
        self.logger.removeHandler(self)
        self.logger.setLevel(self.level_before)


def check_schedule(seed: int, brokers: Brokers, topic_name: str, strict: bool) -> None:
    """Run the seed's schedule against ``brokers`` and assert the oracle."""
    sched = make_schedule(seed)
    brokers.create_topic(topic_name, sched.partitions)
    rng = random.Random(seed)
    for part in range(sched.partitions):
        brokers.set_partition_leader(topic_name, part, rng.choice(BROKERS))
    started = time.monotonic()
    with ProducerIds() as ids:
        if sched.sync:
            run = run_sync(brokers, topic_name, sched, lost_answers=strict)
        else:
            run = asyncio.run(run_async(brokers, topic_name, sched, lost_answers=strict))
    brokers.clear_request_errors(PRODUCE)

    async def read_all() -> dict[int, list[Entry]]:
        return {part: await read_log(brokers.bootstrap_servers, topic_name, part)
                for part in range(sched.partitions)}

    logs = asyncio.run(read_all())
    problems, stats = oracle(sched, run.sent, logs, dict(ids.order), strict)
    problems[:0] = run.problems
    for part, entries in logs.items():
        theirs = read_with_confluent(brokers.bootstrap_servers, topic_name, part,
                                     entries[-1].offset + 1 if entries else 0)
        if theirs != [(e.offset, e.key, e.value) for e in entries]:
            problems.append(f"reader: p{part}: confluent-kafka reads {len(theirs)} records, "
                            f"the raw read {len(entries)}")
    faults = sum(1 for st in sched.steps if st[0] not in ("records", "flush", "pause"))
    print(f"seed {seed} ({'cluster' if strict else 'mock'}): "
          f"{'sync' if sched.sync else 'async'} {sched.partitions} partitions "
          f"{ {k: v for k, v in sched.config.items() if k not in FAST} } {faults} faults, "
          f"{stats}, {time.monotonic() - started:.1f} s")
    assert not problems, f"seed {seed} ({sched.config}):\n" + "\n".join(problems[:25])


@pytest.mark.parametrize("seed", SEEDS)
def test_random_faults_keep_the_idempotent_promise(seed: int, mock_cluster: MockCluster,
                                                   topic_name: str) -> None:
    check_schedule(seed, mock_cluster, topic_name, strict=False)


@pytest.mark.parametrize("seed", CLUSTER_SEEDS)
def test_random_faults_keep_the_idempotent_promise_on_a_checking_broker(
        seed: int, topic_name: str) -> None:
    with Cluster(num_brokers=3) as cluster:
        check_schedule(seed, cluster, topic_name, strict=True)
        assert cluster.internal_errors() == []
