"""The sender: one task on the event loop that turns ready batches into Produce requests.

Each pass (woken by the accumulator once per batch, by responses, or by the earliest linger
or retry deadline) takes at most one batch per partition whose leader has a free in-flight
slot and groups them by leader into one request per broker, written at once with its
response handled in a done-callback, so that up to ``max.in.flight.requests.per.connection``
are pipelined per broker in the order they were made. A batch is ready when it is full, its
linger ran out, someone waits on it, or the producer flushes; a full batch whose broker
already has a request in flight waits for that response (at most until its linger deadline),
so that the batches filling meanwhile share one request instead of one request each.
Staged keyed records (see ``KeyedStage``) are placed into their batches by the first pass
after their stage's linger runs out, or at once when the producer flushes or closes.

Retriable failures put the batch back at the front of its partition's queue (in sequence
order) with backoff until ``retries`` or ``delivery.timeout.ms`` run out; invalid-metadata
errors and connection failures also ask for a metadata refresh, so batches follow moved
leaders.

``delivery.timeout.ms`` bounds every batch from its creation, wherever the batch is when it
runs out, and fails it with DeliveryTimeoutError (its cause the last error it met) at its
deadline, not sooner: a queued batch (backing off, or held) by a pass the sender is woken
for at the earliest queued deadline; an in-flight one by its request's timer, which runs to
the earlier of ``request.timeout.ms`` and its batches' deadlines (the request itself is
then left to its own timeout: its late answer finds the batch done); one waiting for a
connection, or for a new producer id, by waits cut to the deadline. The check is per
batch and per request, never per record.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from kontrakt.clients._hooks import report_error
from kontrakt.clients._net.connection import BrokerConnection
from kontrakt.clients._wait import wait_event, wait_within
from kontrakt.clients.client import AsyncKafkaClient
from kontrakt.clients.producer._accumulator import RecordAccumulator
from kontrakt.clients.producer._batch import ProducerBatch, expired_error
from kontrakt.clients.producer._config import ProducerSettings
from kontrakt.clients.producer._handover import HandOver
from kontrakt.clients.producer._idempotence import (
    DUPLICATE_SEQUENCE,
    INVALID_PRODUCER_EPOCH,
    OUT_OF_ORDER_SEQUENCE,
    UNKNOWN_PRODUCER_ID,
    IdempotenceState,
)
from kontrakt.clients.producer._metrics import ProducerMetrics
from kontrakt.clients.producer._transactions import TransactionManager
from kontrakt.errors import (
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProduceError,
    RecordTooLargeError,
    TransactionFatalError,
)
from kontrakt.protocol.errors import for_code
from kontrakt.protocol.messages import ProduceRequest

__all__ = ["Sender"]

log = logging.getLogger("kontrakt.producer")

_INF = float("inf")
_MESSAGE_TOO_LARGE = 10
_PRODUCER_FENCED = 90
_TopicData = ProduceRequest.TopicProduceData
_PartitionData = ProduceRequest.TopicProduceData.PartitionProduceData

_taught = False


def _teach_allocator() -> None:
    """Free one 4 MiB block, once per process.

    glibc's malloc gives freed memory at the top of a heap back to the kernel once it
    exceeds a threshold: twice the largest mmapped block the process has freed (from 128
    KiB). A sender's request cycle frees ~1.5 MiB of batches and request frames at a time,
    more than the request frames alone teach it; each cycle then gave its memory back and
    faulted it in again: ~350 page faults a request on a sync producer's I/O thread, 71,000
    per million records (~15% of its throughput), against ~2,000 with this. (bytes(n) is
    calloc'd: the block's pages are never touched. Other allocators take it as a plain
    allocation.)
    """
    global _taught
    if not _taught:
        _taught = True
        block = bytes(4 << 20)
        del block


class Sender:
    """Drains the accumulator and sends Produce requests; see the module docstring."""

    def __init__(self, client: AsyncKafkaClient, acc: RecordAccumulator,
                 settings: ProducerSettings, idempotence: IdempotenceState | None,
                 metrics: ProducerMetrics) -> None:
        self.client = client
        self.acc = acc
        self.settings = settings
        self.idem = idempotence
        self.metrics = metrics
        self.loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._wake = asyncio.Event()
        self._in_flight: dict[int, int] = defaultdict(int)
        self._conns: dict[int, BrokerConnection] = {}
        self._outstanding: set[_InFlight] = set()
        self._connecting: set[asyncio.Task[None]] = set()
        self._in_pass = False
        self._sleep_until = _INF
        #: a sync producer's caller-thread machinery (its waker, see _handover.py)
        self.handover: HandOver | None = None
        self._muted: set[tuple[str, int]] = set()
        #: the last drain left a batch that only a response can release (in-flight limit,
        #: sequence or transaction order): a response then wakes the sender
        self._held = False
        self.closing = False
        self.error: BaseException | None = None
        self.on_error: Callable[[], None] | None = None
        #: the transaction manager of a transactional producer
        self.txn: TransactionManager | None = None
        self.task: asyncio.Task[None] | None = None
        #: requests the current round of the pass has still to write
        self._writes_left = 0
        #: why batches cannot be sent now, when nothing of theirs says it (a failed
        #: InitProducerId): the cause of their delivery timeout
        self._stalled: BaseException | None = None

    # --- waking ------------------------------------------------------------------------

    def on_loop_thread(self) -> bool:
        """Whether the calling thread is the sender's loop's."""
        return threading.get_ident() == self._loop_thread

    def wake(self, urgent: bool = True) -> None:
        """Wake the sender; callable from any thread.

        ``urgent`` (a batch filled up, or someone waits on one): on the loop thread, run a
        send pass right here rather than one loop iteration later.
        """
        if threading.get_ident() == self._loop_thread:
            if urgent:
                self.kick()
            else:
                self._wake.set()
        elif urgent and self.handover is not None and self.handover.wake():
            pass
        else:
            try:
                self.loop.call_soon_threadsafe(self.kick if urgent else self._wake.set)
            except RuntimeError:  # the loop is closed: nothing left to wake
                pass

    def kick(self) -> None:
        """Run one send pass now (on the loop thread), unless one is running."""
        if self._in_pass:
            self._wake.set()  # called from inside a pass (a callback): run another after it
            return
        if self.task is None or self.task.done() or self.error is not None:
            return
        idem = self.idem
        if idem is not None and (idem.need_bump or idem.producer_id < 0):
            # Only the sender task gets a new producer id/epoch; nothing can go out before.
            self._wake.set()
            return
        try:
            wake_at = self._pass()
        except BaseException as exc:
            self._died(exc)
            return
        if wake_at < self._sleep_until:
            self._wake.set()

    def start(self) -> None:
        _teach_allocator()
        self.task = self.loop.create_task(self._run(), name="kontrakt-producer-sender")

    # --- the loop ------------------------------------------------------------------------

    def _pass(self) -> float:
        """Send everything that is ready (one request per broker per round, while brokers
        have free in-flight slots); returns when the next pass is due."""
        self._in_pass = True
        try:
            now = time.monotonic()
            self._expire(now)
            while True:
                by_node, wake_at, missing, more = self._drain(now)
                if missing:
                    self.client.request_metadata_refresh()
                    wake_at = min(wake_at, now + self.settings.retry_backoff)
                if not by_node:
                    return wake_at
                self._writes_left = len(by_node)
                for node, batches in by_node.items():
                    self._dispatch(node, batches)
                if not more:
                    # This round took every batch ready: no other round to look for.
                    return wake_at
        finally:
            self._in_pass = False

    async def _run(self) -> None:
        bump_at = 0.0
        try:
            while True:
                self._wake.clear()
                idem = self.idem
                if idem is not None and (idem.need_bump or idem.producer_id < 0) \
                        and not self._outstanding and bump_at <= time.monotonic():
                    try:
                        await self._bump()
                    except (KafkaConnectionError, KafkaTimeoutError) as exc:
                        # No producer id yet: the queued batches wait (their deadlines
                        # still run, see _bump) and the bump is tried again after backoff.
                        log.info("could not get a producer id: %s", exc)
                        self._stalled = exc
                        bump_at = time.monotonic() + self.settings.retry_backoff
                wake_at = self._pass()
                if idem is not None and (idem.need_bump or idem.producer_id < 0) \
                        and not self._outstanding:
                    # The next try (the last response, if any are out, wakes the sender).
                    wake_at = min(wake_at, bump_at)
                timeout = wake_at - time.monotonic()
                if timeout <= 0:
                    await asyncio.sleep(0)
                    continue
                self._sleep_until = wake_at
                try:
                    await wait_event(self._wake, None if timeout == _INF else timeout)
                finally:
                    self._sleep_until = _INF
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # supervised: surfaced by the producer's next call
            self._died(exc)

    def _died(self, exc: BaseException) -> None:
        log.error("producer sender died: %r", exc, exc_info=exc)
        self.error = exc
        if self.on_error is not None:
            self.on_error()
        self.fail_everything(ProduceError(f"the producer's sender failed: {exc!r}", exc))

    def _drain(self, now: float) -> tuple[dict[int, list[ProducerBatch]], float, bool, bool]:
        """The batches to send now, by broker; when the next pass is due; whether a leader
        is missing; whether batches are left that another round may send."""
        acc = self.acc
        cluster = self.client.cluster
        brokers = cluster.brokers
        linger = acc.linger
        force = self.closing or acc.flushing > 0
        max_in_flight = self.settings.max_in_flight
        max_bytes = self.settings.message_max_bytes
        idem = self.idem
        txn = self.txn
        order_by_mute = idem is None and max_in_flight == 1
        in_flight = self._in_flight
        by_node: dict[int, list[ProducerBatch]] = {}
        sizes: dict[int, int] = {}
        wake_at = _INF
        missing = False
        held = False
        more = False
        with acc.lock:
            for stage in acc.stages.values():
                if stage.keys:
                    ready_at = stage.created + linger
                    if force or ready_at <= now:
                        acc.settle_locked(stage)
                    else:
                        wake_at = min(wake_at, ready_at)
            for tp, dq in acc.queues.items():
                if not dq:
                    continue
                head = dq[0]
                # A batch left queued is expired by the pass at its deadline (_expire),
                # whatever holds it. (Only the branches that leave it queued change wake_at
                # from here on: one that sends it puts this back.)
                unexpired = wake_at
                if head.deadline < wake_at:
                    wake_at = head.deadline
                if head.retry_at > now:
                    wake_at = min(wake_at, head.retry_at)
                    continue
                urgent = force or head.urgent
                if not urgent and len(dq) == 1:
                    ready_at = head.created + linger
                    if ready_at > now:
                        wake_at = min(wake_at, ready_at)
                        continue
                leader = cluster.leader_for(tp[0], tp[1])
                if leader < 0 or leader not in brokers:
                    missing = True
                    continue
                busy = in_flight[leader]
                if busy >= max_in_flight:
                    held = True
                    continue
                if busy and not urgent:
                    # A full batch, but a request to its broker is on its way: hold it until
                    # that response (which wakes the sender) or its linger deadline, so that
                    # the batches filling meanwhile go out together in one request. A
                    # request per batch costs more than the batch itself in pure Python.
                    ready_at = head.created + linger
                    if ready_at > now:
                        wake_at = min(wake_at, ready_at)
                        held = True
                        continue
                if (order_by_mute and tp in self._muted) or \
                        (idem is not None and not idem.can_send(head)) or \
                        (txn is not None and not txn.partition_ready(tp)):
                    held = True
                    continue
                size = head.size_in_bytes
                used = sizes.get(leader, 0)
                if used and used + size > max_bytes:
                    more = True  # for the next request
                    continue
                dq.popleft()
                wake_at = unexpired  # its request keeps its deadline (_InFlight)
                if dq:
                    more = True  # the partition's next batch may go in the next round
                head.sealed = True
                sizes[leader] = used + size
                if idem is not None:
                    idem.assign(head, head.record_count)
                if order_by_mute:
                    self._muted.add(tp)
                by_node.setdefault(leader, []).append(head)
            # Appenders read this under the lock: a new batch that must go out sooner than
            # the sender's next wake-up wakes it.
            acc.sender_wake_at = now if more else wake_at
        self._held = held
        if txn is not None and txn.pending:
            txn.add_pending()
        return by_node, wake_at, missing, more

    def _expire(self, now: float) -> None:
        for batch in self.acc.expire(now):
            self._fail(batch, expired_error(batch, now, self._stalled))

    def expire_in_flight(self, pending: _InFlight, now: float) -> None:
        """Fail the batches of the request ``pending`` whose deadline passed while it was
        unanswered (the request stays: its answer, if any, finds them done)."""
        for b in pending.batches:
            if not b.done and b.deadline <= now:
                b.cause = KafkaTimeoutError(
                    f"Produce to {pending.conn.address} unanswered after "
                    f"{now - pending.started:.3f}s when delivery.timeout.ms ran out (the "
                    f"broker may still write the records)")
                self._fail(b, expired_error(b, now))

    def _first_deadline(self) -> float:
        """The earliest deadline of a queued batch (queues are in creation order)."""
        with self.acc.lock:
            return min((dq[0].deadline for dq in self.acc.queues.values() if dq), default=_INF)

    # --- requests ------------------------------------------------------------------------

    def _dispatch(self, node: int, batches: list[ProducerBatch]) -> None:
        """Write one Produce request to ``node`` (connecting first if needed)."""
        self._in_flight[node] += 1
        conn = self._conns.get(node)
        if conn is not None and conn.connected:
            self._write(conn, node, batches)
            return
        task = self.loop.create_task(self._connect_and_write(node, batches))
        self._connecting.add(task)
        task.add_done_callback(self._connecting.discard)

    async def _connect_and_write(self, node: int, batches: list[ProducerBatch]) -> None:
        started = time.monotonic()
        while True:
            # Waiting for a connection (its reconnect backoff, its setup timeout) is cut to
            # the batches' delivery deadlines.
            wait = min(b.deadline for b in batches) - time.monotonic()
            try:
                conn = await wait_within(self.client.connection(node), wait)
                break
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                self._finish(node)
                self._request_failed(batches, exc)
                return
            except asyncio.TimeoutError:
                now = time.monotonic()
                for b in batches:
                    if b.deadline <= now:
                        b.cause = b.cause or KafkaTimeoutError(
                            f"no connection to broker {node} after {now - started:.3f}s")
                        self._fail(b, expired_error(b, now))
                batches = [b for b in batches if not b.done]
                if not batches:
                    self._finish(node)
                    return
        self._conns[node] = conn
        self._write(conn, node, batches)

    def _write(self, conn: BrokerConnection, node: int, batches: list[ProducerBatch]) -> None:
        # The request is written at once and its response handled in a done-callback: no
        # task and no timeout wrapper per request (each costs event-loop turns, i.e.
        # latency). The timeout is a timer that closes the connection, as conn.send() does.
        acks = self.settings.acks
        pending = _InFlight(self, conn, node, batches) if acks != 0 else None
        try:
            version = conn.negotiate(ProduceRequest)
            request = self._request(batches, version)
            self._writes_left -= 1
            if not self._writes_left and self.handover is not None:
                self.handover.last_write()  # a sync caller waiting for the pass goes on
            fut = conn.send_nowait(request, version=version, expect_response=pending is not None,
                                   callback=pending.done if pending is not None else None)
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            self._finish(node)
            self._request_failed(batches, exc)
            return
        except KafkaError as exc:
            self._finish(node)
            for b in batches:
                self._fail(b, ProduceError(f"cannot produce to {b.topic}-{b.partition}: "
                                           f"{exc}", exc))
            return
        self.metrics.requests += 1
        if fut is None or pending is None:  # acks=0: nothing comes back; the records count as sent
            self._finish(node)
            for b in batches:
                self._succeed(b, -1, -1)
            return
        if not fut.done():  # (a response cannot come back within send_nowait, but still)
            pending.start(fut)
            self._outstanding.add(pending)

    def _finish(self, node: int) -> None:
        self._in_flight[node] -= 1
        # No pass when nothing waits for this response: an idle pass costs the next waiter
        # (an awaited send) a loop turn, and a sync caller the GIL, before it can go on.
        # Retries wake the sender themselves (_retry); new batches do through the
        # accumulator (sender_wake_at).
        idem = self.idem
        if self._held or (idem is not None and idem.need_bump):
            self._wake.set()

    def _on_response(self, pending: _InFlight) -> None:
        self._outstanding.discard(pending)
        self._finish(pending.node)
        fut = pending.future
        assert fut is not None
        if fut.cancelled():
            self._request_failed(pending.batches, KafkaConnectionError("request cancelled"))
            return
        exc = fut.exception()
        if exc is not None:
            if isinstance(exc, (KafkaConnectionError, KafkaTimeoutError)):
                self._request_failed(pending.batches, exc)
            else:
                for b in pending.batches:
                    self._fail(b, ProduceError(
                        f"producing to {b.topic}-{b.partition} failed: {exc}", exc))
            return
        self.metrics.request_done(time.monotonic() - pending.started)
        self._handle(fut.result(), pending.batches)

    def _request_failed(self, batches: list[ProducerBatch], exc: BaseException) -> None:
        log.debug("produce request failed: %s", exc)
        report_error(exc)
        self.client.request_metadata_refresh()
        for b in batches:
            self._retry(b, exc)

    def _request(self, batches: list[ProducerBatch], version: int) -> Any:
        idem = self.idem
        pid, epoch = (idem.producer_id, idem.producer_epoch) if idem is not None else (-1, -1)
        topics = self.client.cluster.topics
        by_topic: dict[str, list[Any]] = {}
        txn = self.txn
        transactional = txn is not None
        if self.acc.helped:
            # Batches a caller compresses (RecordAccumulator.claim_closed) are framed last: the
            # others are compressed here meanwhile.
            for b in batches:
                if b.helper is None:
                    b.encode(pid, epoch, transactional)
        for b in batches:
            blob = b.encode(pid, epoch, transactional)  # cached when encoded above
            self.metrics.bytes_sent += len(blob)
            by_topic.setdefault(b.topic, []).append(
                _PartitionData(index=b.partition, records=blob))
        data = []
        for topic, parts in by_topic.items():
            info = topics.get(topic)
            if version >= 13:
                if info is None:
                    raise KafkaConnectionError(f"no topic id known for {topic!r}")
                data.append(_TopicData(topic_id=info.topic_id, partition_data=parts))
            else:
                data.append(_TopicData(name=topic, partition_data=parts))
        return ProduceRequest(transactional_id=txn.transactional_id if txn else None,
                              acks=self.settings.acks,
                              timeout_ms=int(self.settings.request_timeout * 1000),
                              topic_data=data)

    def _handle(self, resp: Any, batches: list[ProducerBatch]) -> None:
        ids: dict[Any, str] | None = None
        answers: dict[tuple[str, int], Any] = {}
        for t in resp.responses:
            name = t.name
            if not name:  # v13+: topics by id
                if ids is None:
                    ids = {info.topic_id: n for n, info in self.client.cluster.topics.items()}
                name = ids.get(t.topic_id, "")
            for p in t.partition_responses:
                answers[(name, p.index)] = p
        for b in batches:
            p = answers.get((b.topic, b.partition))
            if p is None:
                self._retry(b, KafkaConnectionError(
                    f"produce response had no answer for {b.topic}-{b.partition}"))
                continue
            code = p.error_code
            if code == 0 or code == DUPLICATE_SEQUENCE:
                self._succeed(b, p.base_offset if code == 0 else -1, p.log_append_time_ms)
                continue
            self._on_error(b, code, p)

    def _on_error(self, b: ProducerBatch, code: int, p: Any) -> None:
        if b.done:  # its delivery timeout ran out while the request was in flight
            return
        cls = for_code(code)
        detail = getattr(p, "error_message", None)
        err = cls(f"produce to {b.topic}-{b.partition}" + (f": {detail}" if detail else ""))
        self.metrics.errors += 1
        idem = self.idem
        if code == _MESSAGE_TOO_LARGE:
            self._too_large(b, err)
            return
        if self.txn is not None and code in (INVALID_PRODUCER_EPOCH, _PRODUCER_FENCED):
            # Another producer with the same transactional id took over.
            self.txn.fatal(err)
            self._fail(b, TransactionFatalError(f"producer fenced: {err}"))
            return
        if idem is not None and (code in (UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_EPOCH) or (
                code == _PRODUCER_FENCED and idem.transactional_id is None)):
            idem.need_bump = True
            self._retry(b, err, force=True)
            return
        if idem is not None and code == OUT_OF_ORDER_SEQUENCE:
            if b.producer_epoch == idem.producer_epoch and idem.is_next_expected(b):
                # The broker refuses the very next sequence: its state and ours disagree.
                idem.need_bump = True
            self._retry(b, err, force=True)
            return
        if cls.retriable:
            if cls.invalid_metadata:
                self.client.request_metadata_refresh()
            self._retry(b, err)
            return
        self._fail(b, ProduceError(f"producing to {b.topic}-{b.partition} failed: {err}", err))

    def _too_large(self, b: ProducerBatch, err: BaseException) -> None:
        """The broker refused ``b`` as too large: split it and send its halves (KIP-126, see
        _split.py), or fail it when it holds one record (or the caller built it whole)."""
        count = self._count(b)
        size = len(b.blob or b"")
        if self.idem is not None:
            # Its parts take its sequence range and are sent (in order) as its resends.
            self.idem.done(b, False, count)
        parts = self.acc.split_and_reenqueue(b)
        if parts is None:
            what = ("a record" if count == 1 else
                    f"a batch of {count} records built by the caller (send_batch)")
            error = RecordTooLargeError(
                f"the broker refused {what} of {size} bytes for {b.topic}-{b.partition} as "
                f"too large (MESSAGE_TOO_LARGE): see the broker's message.max.bytes and the "
                f"topic's max.message.bytes")
            error.__cause__ = err
            self._fail(b, error)
            return
        self._muted.discard((b.topic, b.partition))
        log.warning("the broker refused a batch of %s records (%s bytes) for %s-%s as too "
                    "large; sending it in two: %s and %s records", count, size, b.topic,
                    b.partition, parts[0].count, parts[1].count)
        self._wake.set()

    # --- outcomes ------------------------------------------------------------------------

    def _count(self, b: ProducerBatch) -> int:
        return b.record_count

    def _succeed(self, b: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        if b.done:
            return
        count = self._count(b)
        if self.idem is not None:
            self.idem.done(b, True, count)
        self._muted.discard((b.topic, b.partition))
        if b.complete(base_offset, log_append_time):
            self.metrics.records_sent += count
            self.metrics.batches_sent += 1

    def _retry(self, b: ProducerBatch, cause: BaseException, *, force: bool = False) -> None:
        """Put ``b`` back for a resend, or fail it when retries or time ran out.

        ``force``: the resend is part of sequence recovery, not a new attempt of its own.
        """
        if b.done:
            return
        count = self._count(b)
        if self.idem is not None:
            self.idem.done(b, False, count)
        self._muted.discard((b.topic, b.partition))
        now = time.monotonic()
        if not force:
            b.attempts += 1
        b.cause = cause
        delay = min(self.settings.retry_backoff * (2 ** min(b.attempts, 20)),
                    self.settings.retry_backoff_max) if b.attempts else 0.0
        if b.attempts > self.settings.retries:
            self._fail(b, ProduceError(
                f"producing to {b.topic}-{b.partition} failed after {b.attempts} attempts: "
                f"{cause}", cause))
            return
        if now >= b.deadline:
            self._fail(b, expired_error(b, now))
            return
        # A backoff past the deadline is cut short by _expire at the deadline (the pass
        # wakes for it, see _drain), so the batch fails then, not now.
        self.metrics.retries += 1
        log.debug("retrying %s-%s (attempt %s): %s", b.topic, b.partition, b.attempts, cause)
        b.retry_at = now + delay
        # ``sealed`` stays set: a batch sent once takes no more records (a resend must carry
        # exactly the records, and sequence numbers, it had).
        self.acc.reenqueue(b)
        self._wake.set()

    def _fail(self, b: ProducerBatch, error: BaseException) -> None:
        if b.done:
            return
        idem = self.idem
        count = self._count(b)
        if idem is not None:
            idem.done(b, False, count)
            if b.base_sequence >= 0 and b.producer_epoch == idem.producer_epoch:
                # It may or may not be in the log: sequences after it cannot be trusted.
                idem.need_bump = True
        self._muted.discard((b.topic, b.partition))
        if self.txn is not None:
            self.txn.batch_failed(error)
        if b.complete(-1, -1, error):
            self.metrics.records_failed += count
            self.metrics.batches_failed += 1
            log.warning("%s record(s) for %s-%s failed: %s", count, b.topic, b.partition,
                        error)

    async def _bump(self) -> None:
        idem = self.idem
        assert idem is not None
        bump = idem.producer_id >= 0
        # An idempotent producer takes a new producer id (epoch 0, sequences from 0). The
        # Java client bumps the epoch locally instead (KIP-360), which Kafka accepts, but
        # Tansu fences a producer whose epoch it did not hand out (PRODUCER_FENCED) and
        # librdkafka's mock refuses an InitProducerId that carries the old id for a producer
        # without a transactional id (INVALID_PRODUCER_ID_MAPPING); a new id works on all.
        # Transactional producers send their id and epoch to have the epoch bumped.
        # Bounded by the earliest queued deadline: those batches expire meanwhile otherwise
        # (no pass runs during a bump). The whole of it: finding a broker and connecting
        # are not bounded by init's timeout. (Cancelling init changes nothing: it sets the
        # id only once it has one.)
        timeout = min(self.settings.request_timeout,
                      max(self._first_deadline() - time.monotonic(), 0.001))
        try:
            await wait_within(idem.init(
                self.client, bump=bump and idem.transactional_id is not None,
                timeout=timeout, retry_backoff=self.settings.retry_backoff,
                retry_backoff_max=self.settings.retry_backoff_max), timeout)
        except asyncio.TimeoutError as exc:
            if isinstance(exc, KafkaTimeoutError):
                raise
            raise KafkaTimeoutError(
                f"InitProducerId got no usable answer within {timeout:.3f}s") from None
        if bump:
            idem.bumps += 1
        if bump:
            self.metrics.epoch_bumps += 1
        self._stalled = None
        with self.acc.lock:
            for dq in self.acc.queues.values():
                for b in dq:
                    b.base_sequence = -1
                    b.blob = None
            idem.reset_sequences()

    # --- shutdown ------------------------------------------------------------------------

    def purge(self, in_queue: bool, in_flight: bool, error: BaseException | None = None
              ) -> int:
        """Fail records locally without sending them or waiting for their answer
        (confluent-kafka's ``purge``); on the loop thread. Returns how many were failed.

        ``in_queue``: records not handed to a connection yet, staged ones included.
        ``in_flight``: records of batches a drain took out, whose request is written,
        being connected for, or never finished; the broker may still write them. An
        idempotent producer then takes a new epoch before its next records (their sequence
        numbers could no longer be trusted).
        ``error``: what the records fail with (default: a ProduceError saying which purge).
        """
        purged = 0
        if in_queue:
            queued_error = error or ProduceError(
                "purged from the producer's queue (purge(in_queue=True))")
            for b in self.acc.abort_all():
                purged += self._count(b)
                self._fail(b, queued_error)
        if in_flight:
            with self.acc.lock:
                queued = {id(b) for dq in self.acc.queues.values() for b in dq}
                flying = [b for b in self.acc.incomplete if id(b) not in queued]
            flying_error = error or ProduceError(
                "purged while in flight (purge(in_flight=True)); the broker may still have "
                "written it")
            for b in flying:
                if not b.done:
                    purged += self._count(b)
                    self._fail(b, flying_error)
        return purged

    def fail_everything(self, error: BaseException) -> None:
        """Fail every queued and in-flight batch (closing without waiting, or after a fatal
        error)."""
        self.purge(True, True, error)

    async def stop(self, error: BaseException | None = None) -> None:
        """Stop sending: cancel connecting and in-flight requests, fail whatever is left."""
        tasks = list(self._connecting)
        if self.task is not None:
            tasks.append(self.task)
        if self.handover is not None:
            self.handover.detach()
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        for pending in list(self._outstanding):
            if pending.timer is not None:
                pending.timer.cancel()
        self._outstanding.clear()
        self.fail_everything(error or IllegalStateError(
            "the producer was closed before the record was delivered"))


class _InFlight:
    """One Produce request awaiting its response."""

    __slots__ = ("batches", "conn", "future", "node", "sender", "started", "timer")

    def __init__(self, sender: Sender, conn: BrokerConnection, node: int,
                 batches: list[ProducerBatch]) -> None:
        self.sender = sender
        self.conn = conn
        self.node = node
        self.batches = batches
        self.future: asyncio.Future[Any] | None = None
        self.started = time.monotonic()
        self.timer: asyncio.TimerHandle | None = None

    def start(self, future: asyncio.Future[Any]) -> None:
        """The request is written: time it out after ``request.timeout.ms``, and its batches
        at their delivery deadlines if those come first."""
        self.future = future
        self._arm(time.monotonic())

    def _arm(self, now: float) -> None:
        due = self.started + self.sender.settings.request_timeout
        for b in self.batches:
            if b.deadline < due and not b.done:
                due = b.deadline
        self.timer = self.sender.loop.call_later(max(due - now, 0.0), self.expired)

    def done(self, fut: asyncio.Future[Any]) -> None:
        """The connection resolved the request's future (called directly by it)."""
        self.future = fut
        if self.timer is not None:
            self.timer.cancel()
        self.sender._on_response(self)

    def expired(self) -> None:
        if self.future is None or self.future.done():
            return
        now = time.monotonic()
        if now < self.started + self.sender.settings.request_timeout:
            # A batch's delivery deadline came first.
            self.sender.expire_in_flight(self, now)
            self._arm(now)
            return
        err = KafkaTimeoutError(
            f"Produce to {self.conn.address} got no response within "
            f"{self.sender.settings.request_timeout}s")
        # Closing fails every request pending on the connection (this one included): a late
        # response could no longer be matched.
        task = self.sender.loop.create_task(self.conn.close(err))
        self.sender._connecting.add(task)
        task.add_done_callback(self.sender._connecting.discard)
