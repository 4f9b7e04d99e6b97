"""Produce requests: writing them to their brokers and taking their answers (the sender's
middle layer; see :mod:`._sender`).

:class:`ProduceRequests` writes the batches a send pass took as one Produce request per
broker, connecting first where needed, with its response handled in a done-callback of the
connection (no task and no timeout wrapper per request), and hands each answer to
:class:`~._outcomes.BatchOutcomes`. It counts the requests in flight per broker, which the
pass keeps within ``max.in.flight.requests.per.connection``.

:class:`_InFlight` is one request awaiting its response, due at the earlier of
``request.timeout.ms`` and its batches' delivery deadlines. One timer of the sender's serves
every request in flight (:meth:`ProduceRequests._check_in_flight`): it runs at the earliest
due of those, fails the batches whose deadline came first (the request itself is then left to
its own timeout: its late answer finds those batches done), closes the connection of a request
that timed out, and is set again for the next. A request that is answered leaves the timer as
it is (no timer handle is made and cancelled per request: an awaited single send would pay
for both on each round trip); a timer that finds nothing due sets itself for what is left.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import defaultdict
from functools import partial
from typing import Any

from kontrakt.clients._hooks import report_error
from kontrakt.clients._net.connection import BrokerConnection
from kontrakt.clients._wait import wait_within
from kontrakt.clients.client import AsyncKafkaClient
from kontrakt.clients.producer._accumulator import RecordAccumulator
from kontrakt.clients.producer._batch import ProducerBatch, expired_error
from kontrakt.clients.producer._config import ProducerSettings
from kontrakt.clients.producer._handover import HandOver
from kontrakt.clients.producer._idempotence import IdempotenceState
from kontrakt.clients.producer._metrics import ProducerMetrics
from kontrakt.clients.producer._outcomes import BatchOutcomes
from kontrakt.clients.producer._transactions import PRODUCE_MAX_VERSION
from kontrakt.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProduceError,
)
from kontrakt.protocol.messages import ProduceRequest
from kontrakt.protocol.produce import ProduceTopics, ProduceWire

__all__ = ["ProduceRequests"]

_INF = float("inf")

log = logging.getLogger("kontrakt.producer")

_PRODUCE = ProduceRequest.API_KEY


class ProduceRequests(BatchOutcomes):
    """Produce requests in flight and their answers; the base of :class:`~._sender.Sender`."""

    def __init__(self, client: AsyncKafkaClient, acc: RecordAccumulator,
                 settings: ProducerSettings, idempotence: IdempotenceState | None,
                 metrics: ProducerMetrics) -> None:
        super().__init__(client, acc, settings, idempotence, metrics)
        self.loop = asyncio.get_running_loop()
        #: broker id -> requests written to it and not answered (or being connected for)
        self._in_flight: dict[int, int] = defaultdict(int)
        self._conns: dict[int, BrokerConnection] = {}
        self._outstanding: set[_InFlight] = set()
        self._connecting: set[asyncio.Task[None]] = set()
        #: broker id -> the last request still waiting for its connection: requests to a
        #: broker are written in the order the passes took their batches (see _dispatch)
        self._waiting: dict[int, asyncio.Task[None]] = {}
        #: a sync producer's caller-thread machinery (its waker, see _handover.py)
        self.handover: HandOver | None = None
        #: the last drain left a batch that only a response can release (in-flight limit,
        #: sequence or transaction order): a response then wakes the sender
        self._held = False
        #: requests the current round of the pass has still to write
        self._writes_left = 0
        #: the timer of the requests in flight (see _check_in_flight) and when it runs
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = _INF
        #: broker id -> (its connection, the Produce writer and reader made for it)
        self._wires: dict[int, tuple[BrokerConnection, ProduceWire]] = {}

    # --- requests -------------------------------------------------------------------------

    def _dispatch(self, node: int, batches: list[ProducerBatch]) -> None:
        """Write one Produce request to ``node`` (connecting first if needed).

        Requests to a broker are written in the order the passes took their batches, also
        while its connection is being made: a later pass's request waits behind the ones
        already waiting. Written out of order, an idempotent producer's later sequences
        reach the broker first, which a broker holding no state of the producer accepts;
        the earlier batch is then refused (OUT_OF_ORDER_SEQUENCE_NUMBER) and could only be
        written after records sent behind it.
        """
        self._in_flight[node] += 1
        before = self._waiting.get(node)
        if before is None:
            conn = self._conns.get(node)
            if conn is not None and conn.connected:
                self._write(conn, node, batches)
                return
        task = self.loop.create_task(self._connect_and_write(node, batches, before))
        self._waiting[node] = task
        self._connecting.add(task)
        task.add_done_callback(self._connecting.discard)

    async def _connect_and_write(self, node: int, batches: list[ProducerBatch],
                                 before: asyncio.Task[None] | None) -> None:
        started = time.monotonic()
        try:
            while True:
                # Waiting (for the request ahead, for a connection: its reconnect backoff,
                # its setup timeout) is cut to the batches' delivery deadlines.
                wait = min(b.deadline for b in batches) - time.monotonic()
                try:
                    if before is not None and not before.done():
                        await asyncio.wait((before,), timeout=max(wait, 0.0))
                        if not before.done():
                            raise asyncio.TimeoutError
                        # What is left of the deadlines after the wait for the request ahead.
                        wait = min(b.deadline for b in batches) - time.monotonic()
                    conn = await wait_within(self.client.connection(node), wait)
                    break
                except (KafkaConnectionError, KafkaTimeoutError) as exc:
                    self._finish(node)
                    self._request_failed(batches, exc)
                    return
                except asyncio.TimeoutError:
                    now = time.monotonic()
                    # A batch that only waited out the reconnect backoff met the failure
                    # that started it.
                    failure = self.client.connect_failure(node)
                    for b in batches:
                        if b.deadline <= now:
                            b.cause = b.cause or failure or KafkaTimeoutError(
                                f"no connection to broker {node} after {now - started:.3f}s")
                            self._fail(b, expired_error(b, now))
                    batches = [b for b in batches if not b.done]
                    if not batches:
                        self._finish(node)
                        return
            self._conns[node] = conn
            self._write(conn, node, batches)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            # Not the network (that is handled above): a bug. Nothing awaits this task, so
            # unless its batches fail here they would never resolve (and close() would wait
            # for them forever); as for a response that fails oddly (_on_response).
            log.error("producing to broker %s failed: %r", node, exc, exc_info=exc)
            self._finish(node)
            for b in batches:
                if not b.done:
                    self._fail(b, ProduceError(
                        f"producing to {b.topic}-{b.partition} failed: {exc!r}", exc))
        finally:
            if self._waiting.get(node) is asyncio.current_task():
                del self._waiting[node]

    def _write(self, conn: BrokerConnection, node: int, batches: list[ProducerBatch]) -> None:
        # The request is written at once and its response handled in a done-callback: no
        # task and no timeout wrapper per request (each costs event-loop turns, i.e.
        # latency). The timeout is a timer that closes the connection, as conn.send() does.
        acks = self.settings.acks
        pending = _InFlight(self, conn, node, batches) if acks != 0 else None
        try:
            known = self._wires.get(node)  # (_wire's lookup, inline)
            wire = known[1] if known is not None and known[0] is conn else \
                self._wire(conn, node)
            topics = self._request(batches, wire.version)
            self._writes_left -= 1
            if not self._writes_left and self.handover is not None:
                self.handover.last_write()  # a sync caller waiting for the pass goes on
            fut = conn.send_encoded_nowait(
                _PRODUCE, wire.frame, topics, wire.answers if pending is not None else None,
                partial(self._on_response, pending) if pending is not None else None)
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
            pending.future = fut
            self._outstanding.add(pending)
            due = pending.due()
            if due < self._timer_at:
                self._set_timer(due, time.monotonic())

    def _wire(self, conn: BrokerConnection, node: int) -> ProduceWire:
        """The Produce requests' writer and reader for ``conn`` (made once per connection:
        its version is the one both sides support, at most v11 in a transaction)."""
        known = self._wires.get(node)
        if known is not None and known[0] is conn:
            return known[1]
        version = conn.negotiate(ProduceRequest)
        txn = self.txn
        if txn is not None:
            # v12+ would tell the broker this producer speaks transaction version 2 (see
            # _transactions' module doc)
            version = min(version, PRODUCE_MAX_VERSION)
        wire = ProduceWire(version, conn.settings.client_id,
                           txn.transactional_id if txn is not None else None,
                           self.settings.acks, int(self.settings.request_timeout * 1000))
        self._wires[node] = (conn, wire)
        return wire

    def _set_timer(self, due: float, now: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = due
        self._timer = self.loop.call_later(max(due - now, 0.0), self._check_in_flight)

    def _check_in_flight(self) -> None:
        """The requests' timer: deal with every request in flight that is due, and set the
        timer for the earliest due of the rest."""
        self._timer = None
        self._timer_at = _INF
        now = time.monotonic()
        due = _INF
        for pending in list(self._outstanding):
            at = pending.check(now)
            if at < due:
                due = at
        if due < _INF:
            self._set_timer(due, now)

    def cancel_timer(self) -> None:
        """Stop the requests' timer (the sender stops)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = _INF

    def _finish(self, node: int) -> None:
        self._in_flight[node] -= 1
        # No pass when nothing waits for this response: an idle pass costs the next waiter
        # (an awaited send) a loop turn, and a sync caller the GIL, before it can go on.
        # Retries wake the sender themselves (_retry); new batches do through the
        # accumulator (sender_wake_at).
        idem = self.idem
        if self._held or (idem is not None and idem.need_bump):
            self._wake.set()

    def _on_response(self, pending: _InFlight, fut: asyncio.Future[Any]) -> None:
        """The connection resolved the request's future ``fut`` (called directly by it)."""
        pending.future = fut
        self._outstanding.discard(pending)
        self._finish(pending.node)
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

    def _request(self, batches: list[ProducerBatch], version: int) -> ProduceTopics:
        """The request's topics and their partitions' record batches."""
        idem = self.idem
        pid, epoch = (idem.producer_id, idem.producer_epoch) if idem is not None else (-1, -1)
        transactional = self.txn is not None
        metrics = self.metrics
        if len(batches) == 1:  # an awaited single send's request
            b = batches[0]
            blob = b.encode(pid, epoch, transactional)
            metrics.bytes_sent += len(blob)
            return [(b.topic if version < 13 else self._topic_key(b.topic, version),
                     [(b.partition, blob)])]
        if self.acc.helped:
            # Batches a caller compresses (RecordAccumulator.claim_closed) are framed last: the
            # others are compressed here meanwhile.
            for b in batches:
                if b.helper is None:
                    b.encode(pid, epoch, transactional)
        by_topic: dict[str, list[tuple[int, bytes]]] = {}
        for b in batches:
            blob = b.encode(pid, epoch, transactional)  # cached when encoded above
            metrics.bytes_sent += len(blob)
            by_topic.setdefault(b.topic, []).append((b.partition, blob))
        return [(self._topic_key(topic, version), parts) for topic, parts in by_topic.items()]

    def _topic_key(self, topic: str, version: int) -> str | uuid.UUID:
        """How a request of ``version`` names ``topic``: by name, or by id from v13."""
        if version < 13:
            return topic
        info = self.client.cluster.topics.get(topic)
        if info is None:
            raise KafkaConnectionError(f"no topic id known for {topic!r}")
        return info.topic_id

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


class _InFlight:
    """One Produce request awaiting its response (its timeout: see the module docstring)."""

    __slots__ = ("batches", "closing", "conn", "future", "node", "sender", "started")

    def __init__(self, sender: ProduceRequests, conn: BrokerConnection, node: int,
                 batches: list[ProducerBatch]) -> None:
        self.sender = sender
        self.conn = conn
        self.node = node
        self.batches = batches
        self.future: asyncio.Future[Any] | None = None
        self.started = time.monotonic()
        #: the request timed out and its connection is being closed
        self.closing = False

    def due(self) -> float:
        """When the request times out, or the first of its pending batches' deadlines."""
        due = self.started + self.sender.settings.request_timeout
        for b in self.batches:
            if b.deadline < due and not b.done:
                due = b.deadline
        return due

    def check(self, now: float) -> float:
        """Run by the requests' timer: fail the batches whose deadline came, or close the
        connection when the request timed out; returns when this is due next (inf: never)."""
        if self.future is None or self.future.done() or self.closing:
            return _INF
        if now < self.started + self.sender.settings.request_timeout:
            # A batch's delivery deadline came first (or nothing yet: the timer runs a
            # little early by the loop's clock resolution).
            self.sender.expire_in_flight(self, now)
            return self.due()
        self.closing = True
        err = KafkaTimeoutError(
            f"Produce to {self.conn.address} got no response within "
            f"{self.sender.settings.request_timeout}s")
        # Closing fails every request pending on the connection (this one included): a late
        # response could no longer be matched.
        task = self.sender.loop.create_task(self.conn.close(err))
        self.sender._connecting.add(task)
        task.add_done_callback(self.sender._connecting.discard)
        return _INF
