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

``delivery.timeout.ms`` bounds every batch from its creation, wherever the batch is when it
runs out, and fails it with DeliveryTimeoutError (its cause the last error it met) at its
deadline, not sooner: a queued batch (backing off, or held) by a pass the sender is woken
for at the earliest queued deadline; an in-flight one by its request's timer, which runs to
the earlier of ``request.timeout.ms`` and its batches' deadlines (the request itself is
then left to its own timeout: its late answer finds the batch done); one waiting for a
connection, or for a new producer id, by waits cut to the deadline. The check is per
batch and per request, never per record.

The sender is built in three layers, each calling only the ones below it:
:class:`Sender` (here: waking, the pass and its drain of the accumulator, new producer
ids, stopping) extends :class:`~._requests.ProduceRequests` (writing requests, their
answers, their timers), which extends :class:`~._outcomes.BatchOutcomes` (what becomes of
each batch: success, retry, split, failure, purge).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable

from kontrakt.clients._wait import wait_event, wait_within
from kontrakt.clients.client import AsyncKafkaClient
from kontrakt.clients.producer._accumulator import RecordAccumulator
from kontrakt.clients.producer._batch import ProducerBatch
from kontrakt.clients.producer._config import ProducerSettings
from kontrakt.clients.producer._idempotence import IdempotenceState
from kontrakt.clients.producer._metrics import ProducerMetrics
from kontrakt.clients.producer._requests import ProduceRequests
from kontrakt.clients.producer._transactions import TransactionManager
from kontrakt.errors import (
    BrokerResponseError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
    ProduceError,
    TransactionAbortableError,
    TransactionFatalError,
)

__all__ = ["Sender"]

log = logging.getLogger("kontrakt.producer")

_INF = float("inf")
#: transaction states in which queued batches can no longer be sent
_TXN_FAILED = ("abortable", "fatal")

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


class Sender(ProduceRequests):
    """Drains the accumulator and sends Produce requests; see the module docstring."""

    def __init__(self, client: AsyncKafkaClient, acc: RecordAccumulator,
                 settings: ProducerSettings, idempotence: IdempotenceState | None,
                 metrics: ProducerMetrics) -> None:
        super().__init__(client, acc, settings, idempotence, metrics)
        self._loop_thread = threading.get_ident()
        self._in_pass = False
        self._sleep_until = _INF
        self.closing = False
        self.error: BaseException | None = None
        self.on_error: Callable[[], None] | None = None
        self.task: asyncio.Task[None] | None = None

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
            if now >= self.acc.expire_at:  # (see RecordAccumulator.expire)
                self._expire(now)
            txn = self.txn
            if txn is not None and txn.state in _TXN_FAILED:
                self._fail_unsent(txn)
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

    def _fail_unsent(self, txn: TransactionManager) -> None:
        """A failed transaction's queued batches can never go out (only an abort may
        follow): they fail now, as the Java client's do, not at their delivery timeout
        (which a commit_transaction() would wait for)."""
        batches = self.acc.abort_all()
        if not batches:
            return
        fatal = txn.state == "fatal"
        for b in batches:
            self._fail(b, (TransactionFatalError if fatal else TransactionAbortableError)(
                f"the transaction failed before this batch could be sent: {txn.error}"))

    async def _run(self) -> None:
        bump_at = 0.0
        try:
            while True:
                self._wake.clear()
                idem = self.idem
                if idem is not None and (idem.need_bump or idem.producer_id < 0) \
                        and self._nothing_in_flight() and bump_at <= time.monotonic() \
                        and (self.txn is None or self.txn.may_bump()):
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
                        and self._nothing_in_flight() \
                        and (self.txn is None or self.txn.may_bump()):
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
        if self.txn is not None:
            # Nothing can be sent any more: the transaction calls say so with their fatal
            # error (e.g. PRODUCER_FENCED on the epoch bump after an abort), not "abort".
            self.txn.fatal(exc)
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
            queued = acc.queued
            emptied: list[tuple[str, int]] = []
            for tp, dq in queued.items():
                if not dq:
                    emptied.append(tp)
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
                builder = head.builder  # (size_in_bytes and record_count, inline)
                size = head.size if builder is None else builder.size_in_bytes
                used = sizes.get(leader, 0)
                if used and used + size > max_bytes:
                    more = True  # for the next request
                    continue
                dq.popleft()
                wake_at = unexpired  # its request keeps its deadline (_InFlight)
                if dq:
                    more = True  # the partition's next batch may go in the next round
                    if dq[0].deadline < acc.expire_at:  # (see RecordAccumulator.expire)
                        acc.expire_at = dq[0].deadline
                else:
                    emptied.append(tp)
                head.sealed = True
                sizes[leader] = used + size
                if idem is not None:
                    idem.assign(head, head.count if builder is None else builder.record_count)
                if order_by_mute:
                    self._muted.add(tp)
                by_node.setdefault(leader, []).append(head)
            for tp in emptied:
                # Unlisted until a batch is queued there again (which lists it).
                del queued[tp]
            # Appenders read this under the lock: a new batch that must go out sooner than
            # the sender's next wake-up wakes it.
            acc.sender_wake_at = now if more else wake_at
        self._held = held
        if txn is not None and txn.pending:
            txn.add_pending()
        return by_node, wake_at, missing, more

    def _nothing_in_flight(self) -> bool:
        """No request is written and unanswered, nor waiting for its connection (whose
        batches hold sequences of the current producer id: a new id must wait for them,
        or they would go out under it with the old id's sequences)."""
        return not any(self._in_flight.values())  # (counts the written ones too)

    # --- producer ids --------------------------------------------------------------------

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
                      max(self.acc.first_deadline() - time.monotonic(), 0.001))
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
        overtaken: list[ProducerBatch] = []
        with self.acc.lock:
            for dq in self.acc.queues.values():
                for b in list(dq):
                    if idem.is_overtaken(b):
                        # Sent under the old id, and a later sequence of its partition is
                        # in the log already: renumbered, it would be written behind
                        # records sent after it. It fails instead (as when the broker
                        # refuses it out of order, see _on_error).
                        dq.remove(b)
                        b.sealed = True
                        overtaken.append(b)
                        continue
                    b.base_sequence = -1
                    b.blob = None
            idem.reset_sequences()
        for b in overtaken:
            fate = "" if _refused(b.cause) else " (the last send's answer was lost: they " \
                "may be in the log)"
            self._fail(b, ProduceError(
                f"producing to {b.topic}-{b.partition} failed: the broker wrote records "
                f"sent after these first, so they cannot be written in order{fate}: "
                f"{b.cause}", b.cause))

    # --- shutdown ------------------------------------------------------------------------

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
        self.cancel_timer()
        self._outstanding.clear()
        self.fail_everything(error or IllegalStateError(
            "the producer was closed before the record was delivered"))


#: NOT_ENOUGH_REPLICAS_AFTER_APPEND: refused, but written by the leader
_WRITTEN_THEN_REFUSED = 20


def _refused(cause: BaseException | None) -> bool:
    """Whether the broker answered a batch's last send, and did not write it."""
    return isinstance(cause, BrokerResponseError) and cause.code != _WRITTEN_THEN_REFUSED
