"""The transactional producer under a seeded random schedule of transactions and faults
(mock cluster, and Kontrakt's in-process cluster with a strict oracle).

Each seed draws a producer (``AsyncProducer`` or ``Producer``), one or two topics with 2-4
partitions in all on a 3-broker librdkafka mock cluster, and 4-8 transactions: begin,
records (``send()`` keyed, to an explicit partition or to the partitioner, ``produce()``
with a delivery callback), sometimes ``send_offsets_to_transaction()`` (a group id or a
group-metadata object), then commit (mostly) or abort -- a quarter of them as a
``transaction()`` block, left normally or by raising. Faults land meanwhile: error codes
injected on InitProducerId (at a start, and at the epoch bump after an aborted
transaction), FindCoordinator, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
TxnOffsetCommit and Produce -- retriable ones (coordinator moved/loading, concurrent
transactions, timeouts, leader moves, dropped connections), abortable ones (topic or group
authorization, unknown member) and fatal ones (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH,
TRANSACTIONAL_ID_AUTHORIZATION_FAILED) -- moves of the transaction and group coordinators
and of partition leaders, a broker down for up to 0.6 s, RTT, and sometimes, right before
the commit or abort, an EndTxn that is done but answered late while the coordinator goes
down for 0.8 or 2.8 s (request.timeout.ms is 2 s). The application is a careful one: a
commit that times out is retried (its outcome may be unknown); an abortable error makes it
abort (retrying the abort a few times) and go on; a fatal one makes it check that the
producer refuses the next calls, close it and start a new one with the same
transactional.id (as it does when a commit stays unknown after three tries).

Afterwards every partition is read raw, data and control batches, and the oracle checks:

* ``committed``: a transaction whose commit returned has each record in the log (exactly
  once, up to the mock's duplicates below) where its metadata said, under one producer id
  and epoch, and on every partition it wrote a COMMIT marker of that id and epoch follows
  its records before any record of another transaction of that id;
* ``aborted``: a transaction whose abort returned has no COMMIT marker after any of its
  records, and an ABORT marker after each;
* ``unmarked``: no record is left without a marker (except as allowed below), and a marker
  never closes records of two transactions; a transaction whose end is unknown (or whose
  producer failed fatally) is committed everywhere or nowhere, and one that failed fatally
  is committed only if a commit call of it timed out or failed on an EndTxn (an attempt
  whose answer was lost may have done it: ``commit_maybe_done``);
* ``never-sent``: nothing is in the log that was not sent, or whose send raised;
* ``typed``: every failure is a TransactionAbortableError, TransactionFatalError or
  KafkaTimeoutError whose broker code (its cause) matches the class the Java client gives
  it (fatal: PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
  INVALID_TXN_STATE; INVALID_PRODUCER_EPOCH on Produce is abortable, here as in the Java
  client since KIP-588, while fatal on the coordinator APIs: the oracle, not knowing which
  request a code answered, accepts either class for it); a call refused because the transaction
  failed earlier names that error in its message, unchained, and is judged by it; every
  call returns within its bound; a producer that failed fatally refuses
  begin_transaction() and send() with TransactionFatalError;
* ``requests`` (request tracking, per transaction): no TxnOffsetCommit reaches a broker
  after the transaction's EndTxn, one does before the EndTxn of a transaction that
  committed with offsets, and no Produce reaches a broker after the EndTxn; and (from the
  producer's own count, as the brokers' log has no answer times) no EndTxn is sent while a
  Produce request is unanswered.

Deviations of the mock (librdkafka 2.16, measured with probes) the oracle allows for:

* InitProducerId for a transactional id that has a producer id gives a new producer id at
  epoch 0 (Kafka bumps the epoch of the same id), fences nothing and does not abort the
  transaction the old instance left open. So after a fatal error the old instance's open
  transaction stays without a marker (``left-open-after-fatal``), and fencing is only ever
  the injected error codes. (Such a transaction's records must still carry no COMMIT.)
* It does not check sequence numbers: a resend of a written batch (its answer lost) is
  written again under the same producer id, epoch and sequence, where Kafka answers
  DUPLICATE_SEQUENCE_NUMBER. Such copies are counted (``resent-duplicates``), not failed.
* An injected error code answers the request without doing it (EndTxn writes no marker);
  a dropped connection (``DISCONNECT``) does nothing either. A response delayed by RTT
  and cut off by a broker going down is lost after the request was done.
* FindCoordinator answers an injected error code with a null host, which the decoder
  refuses as corrupt (a probe: CorruptMessageError at v3, where the field is not
  nullable; Kafka sends an empty host): only dropped connections are injected there.
  Coordinator errors are still injected on the APIs that make the producer look up its
  coordinator again.
* Once in about 180 seed runs a record was acknowledged with offset -1 (what the
  producer reports, as the Java client does, for DUPLICATE_SEQUENCE_NUMBER: written
  before, offset not known); it was in the log once. Such a report (``offset-unknown``)
  is checked for its partition only. (Not reproduced in reruns of that seed.)
* Fetch returns one batch per request, and control batches carry CRC 0 (data batches'
  CRCs are checked). Offsets sent in a transaction are not stored, so only the requests
  (tracking) show them.

The same schedules also run against :class:`kontrakt.testing.Cluster`, which has Kafka's
transaction semantics (InitProducerId for a transactional id with an open transaction aborts
it with a bumped epoch and fences the old instance; sequence checks; an aborted-transaction
index and LSO for read_committed). It is Kontrakt's own code, not an independent peer, so
the oracle stays the raw log and two consumers. There the oracle is strict:

* no ``left-open-after-fatal``: the new instance's InitProducerId must have ended the old
  one's open transaction (an ABORT marker, under the bumped epoch), so a record without a
  marker is ``unmarked``;
* no ``resent-duplicates``: a committed record is in the log once;
* ``read-committed``: confluent-kafka's consumer and Kontrakt's, both read_committed, read
  exactly the records a COMMIT marker closes in the raw log, at their offsets.

The Cluster has every fault control the schedule uses but request tracking (it only counts
requests), so the ``requests`` checks are skipped there. Its injected FindCoordinator errors
are well formed, but the schedule keeps injecting only dropped connections there, so that a
seed means the same schedule on both brokers. ``KONTRAKT_CLUSTER_TXN_SEEDS`` (default 3)
sets how many seeds run against it.

``KONTRAKT_TXN_SEEDS=50`` (and ``KONTRAKT_TXN_SEED_BASE``) runs a longer hunt.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import pytest

from kontrakt import RecordMetadata
from kontrakt._types import TopicPartition
from kontrakt.clients import AsyncKafkaClient
from kontrakt.clients.producer import AsyncProducer, Producer, RecordFuture, murmur2_partition
from kontrakt.errors import (
    BrokerResponseError,
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    TransactionAbortableError,
    TransactionFatalError,
)
from kontrakt.protocol.messages import EndTxnRequest, FetchRequest
from kontrakt.protocol.records import (
    ControlRecordType,
    RecordBatch,
    iter_batches,
    parse_control_record,
)
from kontrakt.testing import Cluster, MockCluster
from tests.integration.raw_ops import leader

pytestmark = pytest.mark.integration

SEED_BASE = int(os.environ.get("KONTRAKT_TXN_SEED_BASE", "0"))
SEEDS = range(SEED_BASE, SEED_BASE + int(os.environ.get("KONTRAKT_TXN_SEEDS", "4")))

PRODUCE, FIND_COORDINATOR, INIT_PID = 0, 10, 22
ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28
DISCONNECT = MockCluster.DISCONNECT
COORDINATOR_RETRIABLE = [15, 16, 14, 51, DISCONNECT]  # not available, not coord., loading,
#                                                       concurrent transactions
RETRIABLE: dict[int, list[int]] = {
    PRODUCE: [6, 7, 19, 20, DISCONNECT],  # not leader, timed out, not enough replicas
    FIND_COORDINATOR: [DISCONNECT],  # (error codes: see the module docstring)
    INIT_PID: COORDINATOR_RETRIABLE,
    ADD_PARTITIONS: COORDINATOR_RETRIABLE,
    ADD_OFFSETS: COORDINATOR_RETRIABLE,
    END_TXN: COORDINATOR_RETRIABLE,
    TXN_OFFSET_COMMIT: [15, 16, 14, DISCONNECT],
}
#: abortable as the Java client classifies them: topic / group authorization, unknown member
ABORTABLE: dict[int, list[int]] = {
    PRODUCE: [29],
    ADD_PARTITIONS: [29],
    ADD_OFFSETS: [30],
    TXN_OFFSET_COMMIT: [30, 25],
}
#: UNKNOWN_PRODUCER_ID, OUT_OF_ORDER_SEQUENCE_NUMBER on Produce: abortable for a
#: transactional producer in the Java client (the epoch is bumped when aborting)
SEQUENCE = [59, 45]
PRODUCER_FENCED, INVALID_EPOCH, TXN_ID_AUTH, INVALID_TXN_STATE = 90, 47, 53, 48
FATAL: dict[int, list[int]] = {
    PRODUCE: [PRODUCER_FENCED, INVALID_EPOCH],
    INIT_PID: [PRODUCER_FENCED, TXN_ID_AUTH],  # (the epoch bump after an abort)
    ADD_PARTITIONS: [PRODUCER_FENCED, INVALID_EPOCH, TXN_ID_AUTH, INVALID_TXN_STATE],
    ADD_OFFSETS: [PRODUCER_FENCED, INVALID_EPOCH, TXN_ID_AUTH],
    END_TXN: [PRODUCER_FENCED, INVALID_EPOCH, TXN_ID_AUTH, INVALID_TXN_STATE],
    TXN_OFFSET_COMMIT: [PRODUCER_FENCED, INVALID_EPOCH, TXN_ID_AUTH],
}
#: codes the Java client always treats as fatal (INVALID_PRODUCER_EPOCH on Produce is
#: abortable since KIP-588, fatal on the coordinator APIs: either class is accepted)
ALWAYS_FATAL = {PRODUCER_FENCED, TXN_ID_AUTH}
FATAL_CODES = {PRODUCER_FENCED, INVALID_EPOCH, TXN_ID_AUTH, INVALID_TXN_STATE, 49}
ALL_APIS = [PRODUCE, FIND_COORDINATOR, ADD_PARTITIONS, ADD_OFFSETS, END_TXN,
            TXN_OFFSET_COMMIT, INIT_PID]
BROKERS = (1, 2, 3)
REQUEST_TIMEOUT_MS = 2000
DELIVERY_TIMEOUT_MS = 5000
#: what a commit or abort may take: its flush bound, then EndTxn within request.timeout.ms
#: (plus backoffs and a loaded machine)
CALL_BOUND = DELIVERY_TIMEOUT_MS / 1000 + REQUEST_TIMEOUT_MS / 1000 + 3.0
CONFIG: dict[str, Any] = {
    "retry_backoff_ms": 10, "retry_backoff_max_ms": 80, "reconnect_backoff_ms": 10,
    "reconnect_backoff_max_ms": 80, "metadata_max_age_ms": 500, "max_block_ms": 5000,
    "request_timeout_ms": REQUEST_TIMEOUT_MS, "delivery_timeout_ms": DELIVERY_TIMEOUT_MS}
GROUP = "txn-schedule-group"
#: the broker a schedule runs against (both take the same fault calls)
Brokers = MockCluster | Cluster
CLUSTER_SEEDS = range(SEED_BASE, SEED_BASE + int(
    os.environ.get("KONTRAKT_CLUSTER_TXN_SEEDS", "3")))


@dataclass(frozen=True)
class GroupMeta:
    """What send_offsets_to_transaction() reads of a consumer's group metadata."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass
class Sent:
    """One record handed to the producer, and what it was told."""

    txn: int
    value: bytes
    key: bytes | None
    topic: str
    #: where it must land; None: the partitioner's choice
    partition: int | None
    #: False when send()/produce() raised: it must not be in the log
    accepted: bool = True
    reports: list[tuple[BaseException | None, RecordMetadata | None]] = field(
        default_factory=list)


@dataclass
class Txn:
    """One transaction of the schedule and what became of it."""

    index: int
    #: which producer instance ran it (a new one after a fatal error)
    instance: int
    records: list[Sent] = field(default_factory=list)
    #: "committed", "aborted", "fatal" (its producer failed fatally; never ended),
    #: "unknown" (neither commit nor abort returned, the producer not fatal)
    outcome: str = "unknown"
    offsets_sent: bool = False
    errors: list[tuple[str, BaseException]] = field(default_factory=list)


@dataclass
class Entry:
    """One batch-level item of a partition's log: a record or a control marker."""

    offset: int
    era: tuple[int, int]
    value: bytes | None = None
    key: bytes | None = None
    sequence: int = -1
    #: "COMMIT" / "ABORT" for a control record, None for data
    marker: str | None = None


@dataclass
class Schedule:
    seed: int
    sync: bool
    #: (topic suffix, partitions)
    topics: list[tuple[str, int]]
    txns: list[tuple[str, list[tuple[Any, ...]]]]
    #: injected into InitProducerId before each producer start
    init_errors: list[int]


def make_schedule(seed: int) -> Schedule:
    rng = random.Random(seed)
    total = rng.choice([2, 3, 4])
    topics = [("a", total)] if total == 2 or rng.random() < 0.5 else \
        [("a", total - 1), ("b", 1)]
    sync = rng.random() < 0.5
    txns: list[tuple[str, list[tuple[Any, ...]]]] = []
    for _ in range(rng.randrange(4, 9)):
        steps: list[tuple[Any, ...]] = []
        for _ in range(rng.randrange(3, 9)):
            roll = rng.random()
            if roll < 0.45:
                t, parts = rng.choice(topics)
                steps.append(("records", rng.choice(["send", "produce"]),
                              rng.choice(["keyed", "explicit", "any"]), t,
                              rng.randrange(parts), rng.randrange(1, 12)))
            elif roll < 0.55:
                steps.append(("offsets", rng.random() < 0.5))
            elif roll < 0.60:
                steps.append(("pause", rng.choice([0.005, 0.03, 0.1])))
            elif roll < 0.78:
                api = rng.choice(ALL_APIS)
                steps.append(("errors", api, [rng.choice(RETRIABLE[api])
                                              for _ in range(rng.randrange(1, 3))]))
            elif roll < 0.81:
                api = rng.choice(list(ABORTABLE))
                steps.append(("errors", api, [rng.choice(ABORTABLE[api])]))
            elif roll < 0.83:
                steps.append(("errors", PRODUCE, [rng.choice(SEQUENCE)]))
            elif roll < 0.85:
                api = rng.choice(list(FATAL))
                steps.append(("errors", api, [rng.choice(FATAL[api])]))
            elif roll < 0.90:
                steps.append(("coordinator", rng.choice(["transaction", "group"]),
                              rng.choice(BROKERS)))
            elif roll < 0.94:
                t, parts = rng.choice(topics)
                steps.append(("leader", t, rng.randrange(parts), rng.choice(BROKERS)))
            elif roll < 0.97:
                steps.append(("down", rng.choice(BROKERS), rng.choice([0.1, 0.3, 0.6])))
            else:
                steps.append(("rtt", rng.choice(BROKERS), rng.choice([50, 200]),
                              rng.choice([0.2, 0.5])))
        if rng.random() < 0.15:
            # EndTxn done, its answer delayed, the coordinator down meanwhile: shorter
            # than request.timeout.ms (retried within the call) or longer (the outcome
            # is unknown to the producer).
            steps.append(("end-outage", rng.choice([300, 600]), rng.choice([0.8, 2.8])))
        end = "commit" if rng.random() < 0.8 else "abort"
        # Some run as a transaction() block, which commits or (the block raising) aborts.
        txns.append(("block-" + end if rng.random() < 0.25 else end, steps))
    init_errors = [rng.choice(RETRIABLE[INIT_PID]) for _ in range(rng.randrange(0, 3))]
    if rng.random() < 0.1:
        init_errors.append(rng.choice([TXN_ID_AUTH, PRODUCER_FENCED]))
    return Schedule(seed, sync, topics, txns, init_errors)


class Rollback(Exception):
    """The application's own error inside a transaction() block."""


class Hang(Exception):
    """A call did not return within its bound."""


class App:
    """The application: one producer instance at a time, async or sync behind one face."""

    def __init__(self, mc: Brokers, sched: Schedule, tid: str) -> None:
        self.mc, self.sched, self.tid = mc, sched, tid
        self.loop = asyncio.new_event_loop()
        self.ap: AsyncProducer | None = None
        self.sp: Producer | None = None
        self.lock = threading.Lock()
        #: the transaction() block open, if any
        self.block: Any = None
        #: EndTxn requests sent too early (see watch())
        self.early_ends: list[str] = []

    def _run(self, coro: Coroutine[Any, Any, Any], bound: float) -> Any:
        async def bounded() -> Any:
            try:
                return await asyncio.wait_for(coro, bound)
            except asyncio.TimeoutError as exc:
                if isinstance(exc, KafkaError):
                    raise
                raise Hang(f"did not return within {bound} s") from None
        return self.loop.run_until_complete(bounded())

    def timed(self, what: str, fn: Callable[[], Any], bound: float) -> Any:
        started = time.monotonic()
        try:
            return fn()
        finally:
            took = time.monotonic() - started
            if took > bound:
                raise Hang(f"{what} took {took:.1f} s (bound {bound} s)")

    def start(self) -> None:
        config = {**CONFIG, "transactional_id": self.tid}
        if self.sched.sync:
            self.sp = Producer(bootstrap_servers=self.mc.bootstrap_servers, **config)
            self.timed("init_transactions", self.sp.init_transactions, 8.0)
            self.watch(self.sp._async)
        else:
            self.ap = AsyncProducer(bootstrap_servers=self.mc.bootstrap_servers, **config)
            self._run(self.ap.start(), 8.0)
            self._run(self.ap.init_transactions(), 8.0)
            self.watch(self.ap)

    def watch(self, p: AsyncProducer) -> None:
        """Note every EndTxn sent while a Produce request is unanswered (the brokers'
        request log shows when a request arrived, not when it was answered: this looks at
        the producer's own count of unanswered requests, on its loop)."""
        txn, sender = p._txn, p._sender
        assert txn is not None and sender is not None
        send = txn._coordinator_request

        async def checked(req: Any, **kwargs: Any) -> Any:
            if isinstance(req, EndTxnRequest):
                busy = {node: n for node, n in sender._in_flight.items() if n}
                if busy:
                    self.early_ends.append(f"EndTxn(committed={req.committed}) sent with "
                                           f"Produce requests unanswered: {busy}")
            return await send(req, **kwargs)

        txn._coordinator_request = checked  # type: ignore[method-assign]

    def close(self) -> None:
        if self.sp is not None:
            self.sp.close(2.0)
            self.sp = None
        if self.ap is not None:
            self._run(self.ap.close(2.0), 8.0)
            self.ap = None

    def producer_id(self) -> tuple[int, int]:
        p = self.sp or self.ap
        assert p is not None
        return p.producer_id_and_epoch

    def begin(self) -> None:
        if self.sp is not None:
            self.sp.begin_transaction()
        else:
            assert self.ap is not None
            self.ap.begin_transaction()

    def report(self, s: Sent, err: BaseException | None, md: RecordMetadata | None) -> None:
        with self.lock:
            s.reports.append((err, md))

    def send(self, s: Sent, path: str) -> None:
        def done(fut: RecordFuture) -> None:
            err = fut.exception()
            self.report(s, err, None if err is not None else fut.result())

        if self.sp is not None:
            if path == "produce":
                self.sp.produce(s.topic, s.value, s.key, partition=s.partition,
                                on_delivery=lambda err, md: self.report(
                                    s, err, None if err else md))
            else:
                self.sp.send(s.topic, s.value, s.key,
                             partition=s.partition).add_done_callback(done)
            self.sp.poll(0)
            return
        assert self.ap is not None
        fut = self._run(self.ap.send(s.topic, s.value, s.key, partition=s.partition), 8.0)
        fut.add_done_callback(done)

    def offsets(self, offsets: dict[TopicPartition, int], meta: bool) -> None:
        group: Any = GroupMeta(GROUP) if meta else GROUP
        if self.sp is not None:
            sp = self.sp
            self.timed("send_offsets_to_transaction",
                       lambda: sp.send_offsets_to_transaction(offsets, group), CALL_BOUND)
        else:
            assert self.ap is not None
            self._run(self.ap.send_offsets_to_transaction(offsets, group), CALL_BOUND)

    def end(self, commit: bool) -> None:
        bound = DELIVERY_TIMEOUT_MS / 1000
        if self.sp is not None:
            sp = self.sp
            self.timed("commit/abort", lambda: (
                sp.commit_transaction(bound) if commit else sp.abort_transaction(bound)),
                CALL_BOUND)
        else:
            assert self.ap is not None
            self._run(self.ap.commit_transaction(bound) if commit
                      else self.ap.abort_transaction(bound), CALL_BOUND)

    def open_block(self) -> None:
        """Enter a ``transaction()`` block (begins the transaction)."""
        if self.sp is not None:
            self.block = self.sp.transaction()
            self.block.__enter__()
        else:
            assert self.ap is not None
            self.block = self.ap.transaction()
            self._run(self.block.__aenter__(), 8.0)

    def close_block(self, exc: BaseException | None) -> None:
        """Leave the block, normally or with ``exc`` raised in it (which the block lets go
        on: not raised here); raises what the block raises instead."""
        block, self.block = self.block, None
        args = (None, None, None) if exc is None else (type(exc), exc, exc.__traceback__)
        if self.sp is not None:
            self.timed("transaction block", lambda: block.__exit__(*args), 2 * CALL_BOUND)
        else:
            self._run(block.__aexit__(*args), 2 * CALL_BOUND)

    def pause(self, seconds: float) -> None:
        if self.sp is not None:
            time.sleep(seconds)
        else:
            self.loop.run_until_complete(asyncio.sleep(seconds))


def root_code(exc: BaseException) -> int | None:
    """The broker error code behind ``exc``: its cause's, or (a call refused because the
    transaction failed earlier names that error, unchained) the one in its message."""
    seen = 0
    cur: BaseException | None = exc
    while cur is not None and seen < 10:
        if isinstance(cur, BrokerResponseError):
            return int(cur.code)
        cur = cur.__cause__ or cur.__context__
        seen += 1
    named = re.search(r"\[[A-Z_]+ \((-?\d+)\)\]", str(exc))
    return None if named is None else int(named.group(1))


class Run:
    """Carries out a schedule: the app's calls, the faults, what every call answered."""

    def __init__(self, mc: Brokers, sched: Schedule, topic: str) -> None:
        self.mc, self.sched = mc, sched
        #: the mock tracks requests; the in-process cluster only counts them
        self.tracked = mc if isinstance(mc, MockCluster) else None
        self.topics = {t: f"{topic}-{t}" for t, _ in sched.topics}
        self.parts = {f"{topic}-{t}": n for t, n in sched.topics}
        self.tid = f"{topic}-tx"
        self.rng = random.Random(sched.seed * 7919 + 1)
        self.txns: list[Txn] = []
        self.refused: list[Sent] = []
        self.problems: list[str] = []
        self.stats: dict[str, int] = defaultdict(int)
        self.timers: list[threading.Timer] = []
        self.instance = 0
        self.counter = 0
        #: the transaction coordinator (set at the start, moved by the schedule)
        self.coordinator = self.rng.choice(BROKERS)
        self.app = App(mc, sched, self.tid)
        #: per transaction: the api keys the brokers received, in order
        self.requests: dict[int, list[int]] = {}

    def later(self, delay: float, fn: Callable[[], None]) -> None:
        timer = threading.Timer(delay, fn)
        timer.daemon = True
        self.timers.append(timer)
        timer.start()

    def fault(self, step: tuple[Any, ...]) -> None:
        kind = step[0]
        if kind == "errors":
            self.mc.push_request_errors(step[1], step[2])
        elif kind == "coordinator":
            self.mc.coordinator_set(step[1], self.tid if step[1] == "transaction" else GROUP,
                                    step[2])
            if step[1] == "transaction":
                self.coordinator = step[2]
        elif kind == "end-outage":
            broker, rtt, outage = self.coordinator, step[1], step[2]
            self.mc.broker_push_request_error_rtts(broker, END_TXN, [(0, rtt)])
            self.later(rtt / 2000, lambda: self.mc.broker_down(broker))
            self.later(rtt / 2000 + outage, lambda: self.mc.broker_up(broker))
        elif kind == "leader":
            self.mc.set_partition_leader(self.topics[step[1]], step[2], step[3])
        elif kind == "down":
            broker = step[1]
            self.mc.broker_down(broker)
            self.later(step[2], lambda: self.mc.broker_up(broker))
        elif kind == "rtt":
            broker = step[1]
            self.mc.set_rtt(broker, step[2])
            self.later(step[3], lambda: self.mc.set_rtt(broker, 0))

    def finish_faults(self) -> None:
        for timer in self.timers:
            timer.cancel()
            timer.join(5)
        self.timers.clear()
        self.mc.broker_up(-1)
        self.mc.set_rtt(-1, 0)

    def failure(self, txn: Txn | None, what: str, exc: BaseException) -> str:
        """Classify a call's exception: "abortable", "fatal" or "timeout"; records
        problems for untyped or misclassified ones."""
        if txn is not None:
            txn.errors.append((what, exc))
        code = root_code(exc)
        self.stats[f"{type(exc).__name__}:{code}"] += 1
        if isinstance(exc, Hang):
            self.problems.append(f"typed: {what} in txn {txn and txn.index}: {exc}")
            return "hang"
        if isinstance(exc, TransactionFatalError):
            if code not in FATAL_CODES:
                self.problems.append(f"typed: {what} raised fatal {exc!r} for code {code}")
            return "fatal"
        if isinstance(exc, TransactionAbortableError):
            if code in ALWAYS_FATAL:
                self.problems.append(f"typed: {what} raised abortable {exc!r} for fatal "
                                     f"code {code}")
            return "abortable"
        if isinstance(exc, KafkaTimeoutError):
            return "timeout"
        self.problems.append(f"typed: {what} in txn {txn and txn.index} raised {exc!r}")
        return "untyped"

    def new_producer(self) -> bool:
        """Start a producer instance (after a fatal error: a new one); False if that
        kept failing."""
        for _attempt in range(4):
            self.instance += 1
            try:
                self.app.start()
                self.stats["instances"] += 1
                return True
            except Exception as exc:
                code = root_code(exc)
                self.stats[f"start:{type(exc).__name__}:{code}"] += 1
                if not isinstance(exc, KafkaError) or isinstance(exc, Hang):
                    self.problems.append(f"typed: starting the producer raised {exc!r}")
                elif code is not None and code not in FATAL_CODES:
                    self.problems.append(f"typed: start failed for retriable code {code}: "
                                         f"{exc!r}")
                self.app.close()
        self.problems.append("start: no producer could start in 4 attempts")
        return False

    def fenced_check(self, txn: Txn) -> None:
        """A producer that failed fatally refuses the next calls (typed)."""
        app = self.app
        for what, call in (("begin_transaction", app.begin),
                           ("send", lambda: app.send(Sent(txn.index, b"refused", None,
                                                          next(iter(self.parts)), 0),
                                                     "send"))):
            try:
                call()
            except TransactionFatalError:
                continue
            except Exception as exc:
                self.problems.append(f"typed: after a fatal error {what} raised {exc!r}")
                continue
            self.problems.append(f"typed: after a fatal error {what} was accepted")

    def records(self, txn: Txn, step: tuple[Any, ...]) -> str | None:
        """Send a step's records; the kind of failure if a send raised."""
        _, path, how, t, part, n = step
        topic = self.topics[t]
        for _ in range(n):
            self.counter += 1
            value = b"%d:%d:%05d:" % (self.sched.seed, txn.index, self.counter) + \
                b"x" * self.rng.choice([0, 10, 200])
            key: bytes | None = None
            where: int | None = part if how == "explicit" else None
            if how == "keyed":
                keyed = b"k%02d" % self.rng.randrange(16)
                key, where = keyed, murmur2_partition(keyed, self.parts[topic])
            # A keyed record goes to the partitioner, and must land where its key says.
            s = Sent(txn.index, value, key, topic, part if how == "explicit" else None)
            try:
                self.app.send(s, path)
            except Exception as exc:
                s.accepted = False
                self.refused.append(s)
                kind = self.failure(txn, "send", exc)
                self.stats["sends-refused"] += 1
                return kind
            s.partition = where
            txn.records.append(s)
        return None

    def run_txn(self, txn: Txn, end: str, steps: list[tuple[Any, ...]]) -> str:
        """One transaction; returns "ok", "fatal", "restart" (a new producer) or
        "stop"."""
        app = self.app
        if self.tracked is not None:
            self.tracked.clear_requests()
        blocked = end.startswith("block-")
        end = end.removeprefix("block-")
        try:
            app.open_block() if blocked else app.begin()
        except Exception as exc:
            kind = self.failure(txn, "begin_transaction", exc)
            txn.outcome = "fatal" if kind == "fatal" else "unknown"
            return "fatal" if kind == "fatal" else "stop"
        failed: str | None = None
        for step in steps:
            kind = step[0]
            if kind == "records":
                if failed is None:
                    failed = self.records(txn, step)
            elif kind == "offsets":
                if failed is not None:
                    continue
                topic = next(iter(self.parts))
                offs = {TopicPartition(topic, p): self.rng.randrange(1000)
                        for p in range(self.parts[topic])}
                try:
                    app.offsets(offs, step[1])
                    txn.offsets_sent = True
                except Exception as exc:
                    failed = self.failure(txn, "send_offsets_to_transaction", exc)
            elif kind == "pause":
                app.pause(step[1])
            elif kind != "end-outage":
                self.fault(step)
        for step in steps:
            if step[0] == "end-outage" and failed is None:
                self.fault(step)
        if failed in ("fatal", "hang", "untyped"):
            txn.outcome = "fatal" if failed == "fatal" else "unknown"
            return "fatal" if failed == "fatal" else "stop"
        timed_out = False
        attempts = 3
        #: the block let the application's error go on: it must have aborted
        block_left = False
        if blocked:
            # The block commits when left normally, aborts when left with an error (the
            # application's own here, or a call's that failed in it).
            rollback = None if failed is None and end == "commit" else Rollback()
            attempts = 0
            self.stats["blocks"] += 1
            try:
                app.close_block(rollback)
                if rollback is None:
                    txn.outcome = "committed"
                    return "ok"
                block_left = True
                # The block let the application's error go on; whether it aborted first
                # (it does unless the producer failed) the abort below finds out.
            except Exception as exc:
                kind = self.failure(txn, "transaction block", exc)
                if kind not in ("abortable", "timeout"):
                    txn.outcome = "fatal" if kind == "fatal" else "unknown"
                    return "fatal" if kind == "fatal" else "stop"
                # A commit that timed out is retried below; after an abortable one the
                # block has aborted, unless that abort failed (then it is retried below).
                timed_out = kind == "timeout" and rollback is None
                attempts = 2 if timed_out else 0
        if failed is None and end == "commit":
            # A commit that timed out is retried (its outcome may be unknown); one that
            # failed otherwise is aborted.
            for _attempt in range(attempts):
                try:
                    app.end(True)
                    txn.outcome = "committed"
                    return "ok"
                except Exception as exc:
                    kind = self.failure(txn, "commit_transaction", exc)
                    if kind == "timeout":
                        timed_out = True
                        app.pause(0.5)
                        continue
                    if kind != "abortable":
                        txn.outcome = "fatal" if kind == "fatal" else "unknown"
                        return "fatal" if kind == "fatal" else "stop"
                    break
        for _attempt in range(4):
            try:
                app.end(False)
                txn.outcome = "aborted"
                if block_left:
                    self.problems.append(f"typed: txn {txn.index}: the transaction() block "
                                         f"raised the application's error without aborting")
                return "ok"
            except IllegalStateError as exc:
                if blocked and not timed_out and "begin_transaction" in str(exc):
                    # No transaction open: the block aborted it before raising.
                    txn.outcome = "aborted"
                    return "ok"
                if not timed_out:
                    self.failure(txn, "abort_transaction", exc)
                    return "stop"
                # The commit's outcome stayed unknown: a new producer takes over.
                self.stats["commit-unknown"] += 1
                txn.outcome = "unknown"
                return "restart"
            except Exception as exc:
                kind = self.failure(txn, "abort_transaction", exc)
                if kind not in ("abortable", "timeout"):
                    txn.outcome = "fatal" if kind == "fatal" else "unknown"
                    return "fatal" if kind == "fatal" else "stop"
                app.pause(0.3)
        self.problems.append(f"typed: txn {txn.index}: abort failed 4 times")
        return "stop"

    def go(self) -> None:
        self.mc.coordinator_set("transaction", self.tid, self.coordinator)
        if self.tracked is not None:
            self.tracked.start_request_tracking()
        self.mc.push_request_errors(INIT_PID, self.sched.init_errors)
        try:
            if not self.new_producer():
                return
            for index, (end, steps) in enumerate(self.sched.txns):
                txn = Txn(index, self.instance)
                self.txns.append(txn)
                result = self.run_txn(txn, end, steps)
                if self.tracked is not None:
                    self.requests[index] = [r.api_key for r in self.tracked.get_requests()]
                if result == "stop":
                    break
                if result in ("fatal", "restart"):
                    if result == "fatal":
                        self.stats["fatal-restarts"] += 1
                        self.fenced_check(txn)
                    self.finish_faults()
                    self.app.close()
                    if not self.new_producer():
                        break
            self.finish_faults()
        finally:
            self.finish_faults()
            self.app.close()
            for api in ALL_APIS:
                self.mc.clear_request_errors(api)
            self.app.loop.close()


async def read_log(bootstrap: str, topic: str, partition: int) -> list[Entry]:
    """Every batch of the partition from offset 0 to the high watermark, data and control
    (the mock answers one batch per Fetch)."""
    out: list[Entry] = []
    offset = 0
    async with AsyncKafkaClient(bootstrap_servers=bootstrap) as client:
        node, topic_id = await leader(client, topic, partition)
        for _ in range(5000):
            req = FetchRequest(max_wait_ms=50, min_bytes=1, max_bytes=1 << 20,
                               isolation_level=0, topics=[
                                   FetchRequest.FetchTopic(topic=topic, topic_id=topic_id,
                                                           partitions=[
                    FetchRequest.FetchTopic.FetchPartition(
                        partition=partition, fetch_offset=offset,
                        partition_max_bytes=1 << 20)])])
            resp = await asyncio.wait_for(client.request(req, node=node), 10)
            part = resp.responses[0].partitions[0]
            assert part.error_code == 0, part
            if offset >= part.high_watermark:
                return out
            # Control batches carry CRC 0 at the mock: data batches are checked below.
            for batch in iter_batches(part.records or b"", check_crcs=False, topic=topic,
                                      partition=partition):
                assert isinstance(batch, RecordBatch)
                era = (batch.producer_id, batch.producer_epoch)
                offset = batch.base_offset + batch.last_offset_delta + 1
                if batch.is_control:
                    rec = batch.records()[0]
                    kind = ControlRecordType(parse_control_record(rec).type)
                    out.append(Entry(rec.offset, era, marker=kind.name))
                    continue
                batch.validate_crc()
                assert batch.is_transactional, (topic, partition, batch.base_offset)
                for r in batch.records():
                    out.append(Entry(r.offset, era, r.value, r.key,
                                     batch.base_sequence + r.offset - batch.base_offset))
    raise AssertionError(f"{topic}-{partition}: log not read in 5000 fetches")


def tag(value: bytes | None) -> str:
    return repr(value if value is None else value.rstrip(b"x"))


def commit_maybe_done(txn: Txn) -> bool:
    """Whether an EndTxn(commit) of ``txn`` may have been done though no commit returned:
    a commit call timed out, or failed fatally on an EndTxn (a retry whose first attempt's
    answer was lost, fenced or refused). Such a transaction's end is unknown."""
    return any(what in ("commit_transaction", "transaction block") and (
        isinstance(exc, KafkaTimeoutError)
        or (isinstance(exc, TransactionFatalError) and "EndTxn" in str(exc)))
        for what, exc in txn.errors)


def oracle(run: Run, logs: dict[tuple[str, int], list[Entry]],
           strict: bool = False) -> list[str]:
    """The problems found. ``strict``: the broker is Kontrakt's cluster, which checks
    sequences and fences a re-initialised transactional id (see the module docstring)."""
    problems: list[str] = []
    stats = run.stats
    by_value: dict[bytes, Sent] = {}
    for txn in run.txns:
        for s in txn.records:
            by_value[s.value] = s
    refused = {s.value for s in run.refused}
    txn_of = {s.value: run.txns[s.txn] for s in by_value.values()}
    #: value -> [(tp, data entry, the marker entry that closed it or None)]
    copies: dict[bytes, list[tuple[tuple[str, int], Entry, Entry | None]]] = defaultdict(list)
    for tp, entries in logs.items():
        open_: dict[int, list[Entry]] = defaultdict(list)  # producer id -> unclosed records
        for e in entries:
            if e.marker is None:
                if e.value in refused:
                    problems.append(f"never-sent: {tp}@{e.offset} {tag(e.value)} was refused "
                                    f"by send() but is in the log")
                elif e.value not in by_value:
                    problems.append(f"never-sent: {tp}@{e.offset} holds {tag(e.value)}")
                open_[e.era[0]].append(e)
                continue
            closed = open_.pop(e.era[0], [])
            txns = {txn_of[c.value].index for c in closed if c.value in txn_of}
            if len(txns) > 1:
                problems.append(f"unmarked: the {e.marker} at {tp}@{e.offset} closes records "
                                f"of transactions {sorted(txns)}")
            for c in closed:
                if c.value is not None:
                    copies[c.value].append((tp, c, e))
        for left in open_.values():
            for c in left:
                if c.value is not None:
                    copies[c.value].append((tp, c, None))
    for txn in run.txns:
        eras = set()
        for s in txn.records:
            mine = copies.get(s.value, [])
            ok = [(err, md) for err, md in s.reports if err is None]
            if txn.outcome == "committed":
                if len(s.reports) != 1 or not ok:
                    problems.append(f"committed: txn {txn.index} record {tag(s.value)} was "
                                    f"reported {s.reports} by the time commit returned")
                if not mine:
                    problems.append(f"committed: txn {txn.index} record {tag(s.value)} is "
                                    f"not in the log")
                    continue
                if len({(c.era, c.sequence, tp) for tp, c, _ in mine}) > 1:
                    problems.append(f"committed: txn {txn.index} record {tag(s.value)} is "
                                    f"in the log {len(mine)} times: "
                                    f"{[(tp, c.offset, c.era, c.sequence) for tp, c, _ in mine]}")
                stats["resent-duplicates"] += len(mine) - 1
                if strict and len(mine) > 1:
                    problems.append(f"committed: txn {txn.index} record {tag(s.value)} is "
                                    f"in the log {len(mine)} times (a resend written again)")
                for tp, c, m in mine:
                    eras.add(c.era)
                    if s.partition is not None and tp[1] != s.partition:
                        problems.append(f"committed: record {tag(s.value)} in {tp}, sent to "
                                        f"partition {s.partition}")
                    if m is None or m.marker != "COMMIT" or m.era != c.era:
                        problems.append(
                            f"committed: txn {txn.index} record {tag(s.value)} at {tp}@"
                            f"{c.offset} under {c.era} is followed by "
                            f"{None if m is None else (m.marker, m.era, m.offset)}")
                if ok and ok[0][1] is not None:
                    md = ok[0][1]
                    if md.offset == -1:
                        # Acknowledged with no offset: the producer's answer to
                        # DUPLICATE_SEQUENCE_NUMBER (written before), as the Java client's.
                        stats["offset-unknown"] += 1
                    at = [c for tp, c, _ in mine if tp == (md.topic, md.partition)
                          and md.offset in (c.offset, -1)]
                    if not at:
                        problems.append(f"committed: record {tag(s.value)} reported at "
                                        f"{md.topic}-{md.partition}@{md.offset}, in the log at "
                                        f"{[(tp, c.offset) for tp, c, _ in mine]}")
            else:
                maybe = txn.outcome == "unknown" or (
                    txn.outcome == "fatal" and commit_maybe_done(txn))
                for tp, c, m in mine:
                    if m is not None and m.marker == "COMMIT" and not maybe:
                        problems.append(
                            f"{txn.outcome}: txn {txn.index} record {tag(s.value)} at {tp}@"
                            f"{c.offset} is followed by a COMMIT at {m.offset}")
                    elif m is None and txn.outcome == "aborted":
                        problems.append(f"aborted: txn {txn.index} record {tag(s.value)} at "
                                        f"{tp}@{c.offset} has no marker after it")
                    elif m is None and txn.outcome == "fatal" and not strict:
                        stats["left-open-after-fatal"] += 1
                    elif m is None:
                        problems.append(f"unmarked: txn {txn.index} ({txn.outcome}) record "
                                        f"{tag(s.value)} at {tp}@{c.offset} has no marker")
                if ok and not mine and txn.outcome != "fatal":
                    problems.append(f"{txn.outcome}: txn {txn.index} record {tag(s.value)} "
                                    f"was acknowledged but is not in the log")
        if txn.outcome in ("unknown", "fatal"):
            # Whatever became of it, it became of all of it.
            ends = {None if m is None else m.marker for s in txn.records
                    for _, _, m in copies.get(s.value, [])}
            if "COMMIT" in ends and len(ends) > 1:
                problems.append(f"{txn.outcome}: txn {txn.index} is committed in part: "
                                f"{sorted(map(str, ends))}")
        if txn.outcome == "committed" and len(eras) > 1:
            problems.append(f"committed: txn {txn.index} written under several producer "
                            f"ids/epochs {sorted(eras)}")
        stats[txn.outcome] += 1
        if run.tracked is None:
            continue  # (no request tracking)
        # Requests the brokers received during the transaction, in order.
        keys = run.requests.get(txn.index, [])
        if END_TXN in keys:
            first_end = keys.index(END_TXN)
            late = [k for k in keys[first_end:] if k in (PRODUCE, TXN_OFFSET_COMMIT)]
            if late:
                problems.append(f"requests: txn {txn.index} ({txn.outcome}): {late} received "
                                f"after its EndTxn: {keys}")
            if txn.outcome == "committed" and txn.offsets_sent and \
                    TXN_OFFSET_COMMIT not in keys[:first_end]:
                problems.append(f"requests: txn {txn.index} committed offsets without a "
                                f"TxnOffsetCommit before EndTxn: {keys}")
        elif txn.outcome == "committed" and (txn.records or txn.offsets_sent):
            problems.append(f"requests: txn {txn.index} committed without an EndTxn: {keys}")
    return problems


def committed_view(entries: list[Entry]) -> list[tuple[int, bytes | None]]:
    """(offset, value) of the data records a read_committed reader must see: those a COMMIT
    marker of their producer id closes (from the raw log)."""
    out: list[tuple[int, bytes | None]] = []
    open_: dict[int, list[Entry]] = defaultdict(list)
    for e in entries:
        if e.marker is None:
            open_[e.era[0]].append(e)
            continue
        closed = open_.pop(e.era[0], [])
        if e.marker == "COMMIT":
            out.extend((c.offset, c.value) for c in closed)
    return sorted(out)


def read_committed_confluent(bootstrap: str, topic: str, partition: int,
                             want: int) -> list[tuple[int, bytes | None]]:
    """(offset, value) read with isolation.level=read_committed by confluent-kafka."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTP

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-schedule-oracle",
                  "enable.auto.commit": False, "isolation.level": "read_committed",
                  "log_level": 3})
    out: list[tuple[int, bytes | None]] = []
    try:
        c.assign([CTP(topic, partition, 0)])
        deadline = time.monotonic() + (10 if want else 1.5)
        while time.monotonic() < deadline and len(out) <= want:
            for m in c.consume(500, 0.3):
                assert m.error() is None, m.error()
                out.append((m.offset() or 0, m.value()))
            if want and len(out) >= want:
                deadline = min(deadline, time.monotonic() + 0.5)  # anything more?
    finally:
        c.close()
    return out


def read_committed_kontrakt(bootstrap: str, topic: str, partition: int,
                            want: int) -> list[tuple[int, bytes | None]]:
    """(offset, value) read with isolation_level="read_committed" by Kontrakt's consumer."""
    from kontrakt import Consumer

    out: list[tuple[int, bytes | None]] = []
    with Consumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                  auto_offset_reset="earliest", enable_auto_commit=False) as c:
        c.assign([TopicPartition(topic, partition)])
        deadline = time.monotonic() + (10 if want else 1.5)
        while time.monotonic() < deadline and len(out) <= want:
            r = c.poll(0.3)
            if r is not None:
                out.append((r.offset, r.value))
            if want and len(out) >= want:
                deadline = min(deadline, time.monotonic() + 0.5)
    return out


def check_schedule(seed: int, brokers: Brokers, topic_name: str, strict: bool) -> None:
    """Run the seed's schedule against ``brokers`` and assert the oracle."""
    sched = make_schedule(seed)
    started = time.monotonic()
    run = Run(brokers, sched, topic_name)
    rng = random.Random(seed)
    for topic, parts in run.parts.items():
        brokers.create_topic(topic, parts)
        for part in range(parts):
            brokers.set_partition_leader(topic, part, rng.choice(BROKERS))
    run.go()

    async def read_all() -> dict[tuple[str, int], list[Entry]]:
        return {(t, p): await read_log(brokers.bootstrap_servers, t, p)
                for t, n in run.parts.items() for p in range(n)}

    logs = asyncio.run(read_all())
    problems = run.problems + [f"requests: {e}" for e in run.app.early_ends] + \
        oracle(run, logs, strict)
    if strict:
        for (topic, part), entries in logs.items():
            want = committed_view(entries)
            for who, read in (("confluent-kafka", read_committed_confluent),
                              ("kontrakt", read_committed_kontrakt)):
                got = read(brokers.bootstrap_servers, topic, part, len(want))
                if got != want:
                    differ = next(((g, w) for g, w in zip(got, want, strict=False) if g != w),
                                  None)
                    problems.append(
                        f"read-committed: {who} reads {len(got)} records of {topic}-{part}, "
                        f"the committed transactions hold {len(want)}; first differing: "
                        f"{differ}")
    faults = sum(1 for _, steps in sched.txns for st in steps
                 if st[0] not in ("records", "offsets", "pause"))
    print(f"seed {seed} ({'cluster' if strict else 'mock'}): "
          f"{'sync' if sched.sync else 'async'} {run.parts} "
          f"{len(sched.txns)} txns, {faults} faults, {dict(sorted(run.stats.items()))}, "
          f"{time.monotonic() - started:.1f} s")
    assert not problems, f"seed {seed}:\n" + "\n".join(problems[:25])


@pytest.mark.parametrize("seed", SEEDS)
def test_random_faults_keep_the_transactional_promise(seed: int, mock_cluster: MockCluster,
                                                      topic_name: str) -> None:
    check_schedule(seed, mock_cluster, topic_name, strict=False)


@pytest.mark.parametrize("seed", CLUSTER_SEEDS)
def test_random_faults_keep_the_transactional_promise_on_a_fencing_broker(
        seed: int, topic_name: str) -> None:
    with Cluster(num_brokers=3) as cluster:
        check_schedule(seed, cluster, topic_name, strict=True)
        assert cluster.internal_errors() == []


async def _partition_log(mc: MockCluster, topic: str, partition: int) -> list[Entry]:
    return await read_log(mc.bootstrap_servers, topic, partition)


# OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_EPOCH
@pytest.mark.parametrize("code", [45, 59, INVALID_EPOCH])
def test_a_sequence_error_in_a_transaction_makes_it_abortable(
        code: int, mock_cluster: MockCluster, topic_name: str) -> None:
    """Found by seed 0: an idempotent producer recovers from these by taking a new epoch and
    resending, but a transaction must keep one epoch from its first record to its marker.
    (At Kafka, InitProducerId in the middle of a transaction aborts it, so the records
    written before would be lost from a commit that returned; the Java client makes the
    transaction abortable and bumps the epoch after the abort.) INVALID_PRODUCER_EPOCH
    too, since KIP-588 (the Java client's InvalidProducerEpochException): abortable, not
    fatal; the mock does not fence the abort, where Kafka would after a coordinator's
    timeout (tests/cluster/test_transactions.py)."""
    mock_cluster.create_topic(topic_name, 1)

    async def main() -> None:
        async with AsyncProducer(bootstrap_servers=mock_cluster.bootstrap_servers,
                                 transactional_id=f"{topic_name}-tx", **CONFIG) as p:
            first = p.producer_id_and_epoch
            p.begin_transaction()
            await (await p.send(topic_name, b"before", partition=0))
            mock_cluster.push_request_errors(PRODUCE, [code])
            fut = await p.send(topic_name, b"after", partition=0)
            with pytest.raises(TransactionAbortableError) as caught:
                await p.commit_transaction(5)
            assert root_code(caught.value) == code
            with pytest.raises(TransactionAbortableError):
                await fut
            await p.abort_transaction(5)
            p.begin_transaction()
            await p.send(topic_name, b"next", partition=0)
            await p.commit_transaction(5)
            assert p.producer_id_and_epoch == (first[0], first[1] + 1)

    asyncio.run(main())
    log = asyncio.run(_partition_log(mock_cluster, topic_name, 0))
    pid, epoch = log[0].era
    assert [(e.value, e.marker, e.era) for e in log] == [
        (b"before", None, (pid, epoch)), (None, "ABORT", (pid, epoch)),
        (b"next", None, (pid, epoch + 1)), (None, "COMMIT", (pid, epoch + 1))]


@pytest.mark.parametrize("move", ["coordinator-moved", "injected"])
def test_offsets_in_a_transaction_follow_the_group_coordinator(
        move: str, mock_cluster: MockCluster, topic_name: str) -> None:
    """Found by seeds 8, 27 and 30: TxnOffsetCommit reports errors per partition only, and
    NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE there must make the producer find the
    group coordinator again and retry (as the Java client does), not fail the
    transaction -- and every later one, the old coordinator being remembered."""
    mock_cluster.create_topic(topic_name, 1)
    mock_cluster.coordinator_set("group", GROUP, 1)
    offsets = {TopicPartition(topic_name, 0): 7}

    async def main() -> None:
        async with AsyncProducer(bootstrap_servers=mock_cluster.bootstrap_servers,
                                 transactional_id=f"{topic_name}-tx", **CONFIG) as p:
            p.begin_transaction()
            await p.send(topic_name, b"one", partition=0)
            await p.send_offsets_to_transaction(offsets, GROUP)
            await p.commit_transaction(5)
            if move == "coordinator-moved":
                mock_cluster.coordinator_set("group", GROUP, 2)
            else:
                mock_cluster.push_request_errors(TXN_OFFSET_COMMIT, [16, 15])
            for value in (b"two", b"three"):
                p.begin_transaction()
                await p.send(topic_name, value, partition=0)
                await p.send_offsets_to_transaction(offsets, GroupMeta(GROUP))
                await p.commit_transaction(5)

    asyncio.run(main())
    log = asyncio.run(_partition_log(mock_cluster, topic_name, 0))
    assert [(e.value, e.marker) for e in log] == [
        (b"one", None), (None, "COMMIT"), (b"two", None), (None, "COMMIT"),
        (b"three", None), (None, "COMMIT")]


def test_a_failed_transaction_does_not_hold_its_records_until_they_expire(
        mock_cluster: MockCluster, topic_name: str) -> None:
    """Found by seed 0 (a commit that took delivery.timeout.ms): when AddPartitionsToTxn
    fails (TOPIC_AUTHORIZATION_FAILED), the transaction is abortable and its records for
    that partition can never be sent; they must fail then (the Java client aborts the
    undrained batches), not hold commit_transaction() until delivery.timeout.ms."""
    mock_cluster.create_topic(topic_name, 2)

    async def main() -> None:
        config = {**CONFIG, "delivery_timeout_ms": 60000}
        async with AsyncProducer(bootstrap_servers=mock_cluster.bootstrap_servers,
                                 transactional_id=f"{topic_name}-tx", **config) as p:
            p.begin_transaction()
            await (await p.send(topic_name, b"in", partition=0))
            mock_cluster.push_request_errors(ADD_PARTITIONS, [29])
            held = await p.send(topic_name, b"held", partition=1)
            started = time.monotonic()
            with pytest.raises(TransactionAbortableError):
                await p.commit_transaction()
            assert time.monotonic() - started < 3
            with pytest.raises(TransactionAbortableError):
                await held
            await p.abort_transaction(5)
            p.begin_transaction()
            await p.send(topic_name, b"next", partition=1)
            await p.commit_transaction(5)

    asyncio.run(main())
    logs = [asyncio.run(_partition_log(mock_cluster, topic_name, part)) for part in (0, 1)]
    assert [[(e.value, e.marker) for e in log] for log in logs] == [
        [(b"in", None), (None, "ABORT")], [(b"next", None), (None, "COMMIT")]]


def _coordinated(mock_cluster: MockCluster, topic_name: str) -> str:
    """A topic of one partition led by broker 1, and a transactional id whose coordinator
    is broker 2 (so the coordinator can fail alone); returns the transactional id."""
    tid = f"{topic_name}-tx"
    mock_cluster.create_topic(topic_name, 1)
    mock_cluster.set_partition_leader(topic_name, 0, 1)
    mock_cluster.coordinator_set("transaction", tid, 2)
    return tid


async def _one_record_sent(p: AsyncProducer, topic_name: str) -> None:
    """Begin a transaction and write one record of it to partition 0."""
    p.begin_transaction()
    await p.send(topic_name, b"r", partition=0)
    await p.flush()


def _assert_aborted_then_committed(mock_cluster: MockCluster, topic_name: str) -> None:
    """Partition 0 holds "r" under an ABORT marker, then "next" under a COMMIT (every broker
    is brought back up to read it)."""
    try:
        log = asyncio.run(_partition_log(mock_cluster, topic_name, 0))
    finally:
        mock_cluster.broker_up(-1)
    assert [(e.value, e.marker) for e in log] == [
        (b"r", None), (None, "ABORT"), (b"next", None), (None, "COMMIT")]


def test_a_commit_whose_answer_is_lost_is_not_reported_abortable(
        mock_cluster: MockCluster, topic_name: str) -> None:
    """The coordinator commits, its answer is lost (a response delayed by RTT, then the
    broker goes down for longer than request.timeout.ms): the outcome is unknown, so the
    producer must not say the transaction "must be aborted" and let the abort through (at
    the mock it returns, at Kafka INVALID_TXN_STATE) while the log holds a COMMIT. As in
    the Java client, the commit raises KafkaTimeoutError, an abort is refused, and a
    retried commit completes it."""
    tid = _coordinated(mock_cluster, topic_name)
    timers: list[threading.Timer] = []

    async def main() -> None:
        async with AsyncProducer(bootstrap_servers=mock_cluster.bootstrap_servers,
                                 transactional_id=tid, **CONFIG) as p:
            await _one_record_sent(p, topic_name)
            # EndTxn is done, then answered 0.5 s late; the broker is down from 0.2 s.
            mock_cluster.broker_push_request_error_rtts(2, END_TXN, [(0, 500)])
            timers.extend((threading.Timer(0.2, lambda: mock_cluster.broker_down(2)),
                           threading.Timer(REQUEST_TIMEOUT_MS / 1000 + 0.9,
                                           lambda: mock_cluster.broker_up(2))))
            for timer in timers:
                timer.start()
            with pytest.raises(KafkaTimeoutError):
                await p.commit_transaction(5)
            with pytest.raises(IllegalStateError):
                await p.abort_transaction(5)
            with pytest.raises(IllegalStateError):
                await p.send(topic_name, b"late", partition=0)
            await asyncio.sleep(REQUEST_TIMEOUT_MS / 1000)  # the broker is back
            await p.commit_transaction(5)
            p.begin_transaction()
            await p.send(topic_name, b"next", partition=0)
            await p.commit_transaction(5)

    try:
        asyncio.run(main())
    finally:
        for timer in timers:
            timer.cancel()
        mock_cluster.broker_up(-1)
    log = asyncio.run(_partition_log(mock_cluster, topic_name, 0))
    assert [(e.value, e.marker) for e in log] == [
        (b"r", None), (None, "COMMIT"), (b"next", None), (None, "COMMIT")]


@pytest.mark.parametrize("sync", [False, True])
def test_a_commit_blocks_abort_that_times_out_still_says_abort(
        mock_cluster: MockCluster, topic_name: str, sync: bool) -> None:
    """A transaction() block whose commit fails (a record refused: abortable) aborts; when
    that abort times out (the coordinator down), the block raises the commit's
    TransactionAbortableError, not a KafkaTimeoutError that would read as the commit's to
    retry (found by seed 3027 of the schedule, whose application retried the commit). The
    abort goes on; abort_transaction() completes it, and the next transaction commits."""
    tid = _coordinated(mock_cluster, topic_name)
    config = {**CONFIG, "transactional_id": tid}
    refused = pytest.raises(IllegalStateError, match="retry abort_transaction")

    def fail_the_next_record() -> None:
        mock_cluster.push_request_errors(PRODUCE, [45])  # OUT_OF_ORDER_SEQUENCE_NUMBER
        mock_cluster.broker_down(2)  # the abort's EndTxn gets no answer

    if sync:
        with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **config) as sp:
            with pytest.raises(TransactionAbortableError) as caught, sp.transaction():
                sp.send(topic_name, b"r", partition=0).result(5)
                fail_the_next_record()
                sp.send(topic_name, b"refused", partition=0)
            assert root_code(caught.value) == 45
            with refused:
                sp.begin_transaction()
            mock_cluster.broker_up(2)
            sp.abort_transaction(5)
            with sp.transaction():
                sp.send(topic_name, b"next", partition=0)
    else:
        async def main() -> None:
            async with AsyncProducer(bootstrap_servers=mock_cluster.bootstrap_servers,
                                     **config) as p:
                with pytest.raises(TransactionAbortableError) as caught:
                    async with p.transaction():
                        await (await p.send(topic_name, b"r", partition=0))
                        fail_the_next_record()
                        await p.send(topic_name, b"refused", partition=0)
                assert root_code(caught.value) == 45
                with refused:
                    p.begin_transaction()
                mock_cluster.broker_up(2)
                await p.abort_transaction(5)
                async with p.transaction():
                    await p.send(topic_name, b"next", partition=0)
        asyncio.run(main())
    _assert_aborted_then_committed(mock_cluster, topic_name)


@pytest.mark.parametrize("sync", [False, True])
def test_a_timed_out_abort_is_completed_by_its_retry(mock_cluster: MockCluster,
                                                     topic_name: str, sync: bool) -> None:
    """The coordinator is down when the transaction is aborted: as the Java client's
    abortTransaction(), abort_transaction(timeout) raises KafkaTimeoutError within its
    timeout (not TransactionAbortableError after request.timeout.ms), refuses everything
    but a retried abort meanwhile (also once the abort left going is done), and the retry,
    once the coordinator is back, completes the abort: one ABORT marker, and the next
    transaction commits."""
    tid = _coordinated(mock_cluster, topic_name)
    config = {**CONFIG, "transactional_id": tid}

    def timed_out_abort(abort: Callable[[], Any]) -> None:
        mock_cluster.broker_down(2)
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="retry abort_transaction"):
            abort()
        assert time.monotonic() - started < REQUEST_TIMEOUT_MS / 1000

    refused = pytest.raises(IllegalStateError, match="retry abort_transaction")
    if sync:
        with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **config) as sp:
            sp.begin_transaction()
            sp.send(topic_name, b"r", partition=0)
            sp.flush()
            timed_out_abort(lambda: sp.abort_transaction(0.5))
            with refused:
                sp.begin_transaction()
            with refused:
                sp.send(topic_name, b"late", partition=0)
            with refused:
                sp.commit_transaction(5)
            mock_cluster.broker_up(2)
            sp.abort_transaction(5)
            sp.begin_transaction()
            sp.send(topic_name, b"next", partition=0)
            sp.commit_transaction(5)
    else:
        async def main() -> None:
            async with AsyncProducer(bootstrap_servers=mock_cluster.bootstrap_servers,
                                     **config) as p:
                await _one_record_sent(p, topic_name)
                mock_cluster.broker_down(2)
                started = time.monotonic()
                with pytest.raises(KafkaTimeoutError, match="retry abort_transaction"):
                    await p.abort_transaction(0.5)
                assert time.monotonic() - started < REQUEST_TIMEOUT_MS / 1000
                with refused:
                    p.begin_transaction()
                with refused:
                    await p.send(topic_name, b"late", partition=0)
                with refused:
                    await p.commit_transaction(5)
                mock_cluster.broker_up(2)
                # The abort left going completes meanwhile; until the application's
                # retry returns, it is still refused (the Java client's pending
                # transition).
                assert p._txn is not None and p._txn.abort_task is not None
                await asyncio.wait_for(asyncio.shield(p._txn.abort_task), 5)
                with refused:
                    p.begin_transaction()
                await p.abort_transaction(5)
                p.begin_transaction()
                await p.send(topic_name, b"next", partition=0)
                await p.commit_transaction(5)
        asyncio.run(main())
    _assert_aborted_then_committed(mock_cluster, topic_name)


def test_a_retried_abort_awaits_the_endtxn_on_its_way(mock_cluster: MockCluster,
                                                      topic_name: str) -> None:
    """An abort_transaction() that times out while its EndTxn is answered late leaves
    that EndTxn going; the retry awaits its answer, as the Java client's does, instead of
    sending a second one."""
    tid = _coordinated(mock_cluster, topic_name)

    async def main() -> None:
        async with AsyncProducer(bootstrap_servers=mock_cluster.bootstrap_servers,
                                 transactional_id=tid, **CONFIG) as p:
            await _one_record_sent(p, topic_name)
            mock_cluster.start_request_tracking()
            # answered 1.2 s late: within request.timeout.ms, after the call's timeout
            mock_cluster.broker_push_request_error_rtts(2, END_TXN, [(0, 1200)])
            with pytest.raises(KafkaTimeoutError):
                await p.abort_transaction(0.3)
            await p.abort_transaction(5)
            ends = [r for r in mock_cluster.get_requests() if r.api_key == END_TXN]
            mock_cluster.stop_request_tracking()
            assert len(ends) == 1
            p.begin_transaction()

    asyncio.run(main())


async def _fail_a_transaction(p: AsyncProducer, mock_cluster: MockCluster,
                              topic_name: str) -> None:
    """A transaction whose second record is refused (OUT_OF_ORDER_SEQUENCE_NUMBER): its
    commit raises TransactionAbortableError, and the producer wants a new epoch after the
    abort."""
    p.begin_transaction()
    await (await p.send(topic_name, b"before", partition=0))
    mock_cluster.push_request_errors(PRODUCE, [45])
    await p.send(topic_name, b"refused", partition=0)
    with pytest.raises(TransactionAbortableError):
        await p.commit_transaction(5)


def test_a_fenced_epoch_bump_makes_the_producer_fatal(mock_cluster: MockCluster,
                                                      topic_name: str) -> None:
    """Found by seeds 5 and 39 (with InitProducerId faults during the schedule): after an
    aborted transaction the producer bumps its epoch; PRODUCER_FENCED there (a newer
    instance took over) must make it fatal -- TransactionFatalError from then on, as the
    Java client raises ProducerFencedException -- not leave a dead sender behind a
    producer that says "abort and go on"."""
    mock_cluster.create_topic(topic_name, 1)

    async def main() -> None:
        async with AsyncProducer(bootstrap_servers=mock_cluster.bootstrap_servers,
                                 transactional_id=f"{topic_name}-tx", **CONFIG) as p:
            await _fail_a_transaction(p, mock_cluster, topic_name)
            mock_cluster.push_request_errors(INIT_PID, [PRODUCER_FENCED])
            await p.abort_transaction(5)
            await asyncio.sleep(0.5)  # the bump is refused meanwhile
            with pytest.raises(TransactionFatalError):
                p.begin_transaction()
            with pytest.raises(TransactionFatalError):
                await p.send(topic_name, b"after", partition=0)

    asyncio.run(main())


def test_offsets_waiting_for_the_epoch_bump_see_it_fail(mock_cluster: MockCluster,
                                                        topic_name: str) -> None:
    """send_offsets_to_transaction() right after an abort waits for the epoch bump; when
    the bump is fenced, it must raise TransactionFatalError naming that at once, not wait
    out request.timeout.ms and report a timeout."""
    mock_cluster.create_topic(topic_name, 1)

    async def main() -> None:
        async with AsyncProducer(bootstrap_servers=mock_cluster.bootstrap_servers,
                                 transactional_id=f"{topic_name}-tx", **CONFIG) as p:
            await _fail_a_transaction(p, mock_cluster, topic_name)
            # The bump is retried a few times (CONCURRENT_TRANSACTIONS), then fenced.
            mock_cluster.push_request_errors(INIT_PID, [51, 51, 51, PRODUCER_FENCED])
            await p.abort_transaction(5)
            p.begin_transaction()
            started = time.monotonic()
            with pytest.raises(TransactionFatalError, match="PRODUCER_FENCED"):
                await p.send_offsets_to_transaction({TopicPartition(topic_name, 0): 1},
                                                    GROUP)
            assert time.monotonic() - started < REQUEST_TIMEOUT_MS / 2000

    asyncio.run(main())


def test_a_fenced_commit_retry_is_fatal_from_then_on(mock_cluster: MockCluster,
                                                     topic_name: str) -> None:
    """A commit whose answer was lost, retried and then fenced: the producer is fatal,
    and later calls say so (TransactionFatalError), not that a commit is to be retried."""
    tid = _coordinated(mock_cluster, topic_name)

    async def main() -> None:
        async with AsyncProducer(bootstrap_servers=mock_cluster.bootstrap_servers,
                                 transactional_id=tid, **CONFIG) as p:
            await _one_record_sent(p, topic_name)
            mock_cluster.broker_down(2)
            with pytest.raises(KafkaTimeoutError):
                await p.commit_transaction(5)
            mock_cluster.broker_up(2)
            mock_cluster.push_request_errors(END_TXN, [PRODUCER_FENCED])
            with pytest.raises(TransactionFatalError):
                await p.commit_transaction(5)
            with pytest.raises(TransactionFatalError):
                p.begin_transaction()
            with pytest.raises(TransactionFatalError):
                await p.send(topic_name, b"after", partition=0)
            with pytest.raises(TransactionFatalError):
                await p.abort_transaction(5)

    try:
        asyncio.run(main())
    finally:
        mock_cluster.broker_up(-1)
