"""What becomes of a sent batch: the broker's answer for it, and its success, retry or
failure (the sender's lowest layer; see :mod:`._sender`).

:class:`BatchOutcomes` matches a Produce response's answers to their batches, turns error
codes into a retry, a split (MESSAGE_TOO_LARGE, see :mod:`._split`), a new producer id or
epoch, or a failure, and completes each batch exactly once, keeping the idempotence state,
the metrics and the transaction manager in step. It also fails batches whose
``delivery.timeout.ms`` ran out in the queue, and purges.

Retriable failures put the batch back at the front of its partition's queue (in sequence
order) with backoff until ``retries`` or ``delivery.timeout.ms`` run out; invalid-metadata
errors and connection failures also ask for a metadata refresh, so batches follow moved
leaders.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from kontrakt.clients.client import AsyncKafkaClient
from kontrakt.clients.producer._accumulator import RecordAccumulator
from kontrakt.clients.producer._batch import ProducerBatch, expired_error
from kontrakt.clients.producer._config import ProducerSettings
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
    KafkaConnectionError,
    ProduceError,
    RecordTooLargeError,
    TransactionAbortableError,
    TransactionFatalError,
)
from kontrakt.protocol.errors import for_code
from kontrakt.protocol.produce import Answer

__all__ = ["BatchOutcomes"]

log = logging.getLogger("kontrakt.producer")

_MESSAGE_TOO_LARGE = 10
_PRODUCER_FENCED = 90


class BatchOutcomes:
    """A batch's answer and its outcome; the base of :class:`~._sender.Sender`."""

    def __init__(self, client: AsyncKafkaClient, acc: RecordAccumulator,
                 settings: ProducerSettings, idempotence: IdempotenceState | None,
                 metrics: ProducerMetrics) -> None:
        self.client = client
        self.acc = acc
        self.settings = settings
        self.idem = idempotence
        self.metrics = metrics
        #: set for another send pass (a retry, a split, a response a held batch waits for)
        self._wake = asyncio.Event()
        #: partitions with a batch in flight, when order is kept by sending one at a time
        self._muted: set[tuple[str, int]] = set()
        #: the transaction manager of a transactional producer
        self.txn: TransactionManager | None = None
        #: why batches cannot be sent now, when nothing of theirs says it (a failed
        #: InitProducerId): the cause of their delivery timeout
        self._stalled: BaseException | None = None

    # --- answers --------------------------------------------------------------------------

    def _handle(self, answers: list[Answer], batches: list[ProducerBatch]) -> None:
        """Complete, retry or fail ``batches`` by a response's ``answers`` (see
        ``kontrakt.protocol.produce``)."""
        if len(answers) == 1 and len(batches) == 1:  # an awaited single send's, accepted
            name, _id, index, code, base, append_time, _message = answers[0]
            b = batches[0]
            if code == 0 and index == b.partition and name == b.topic:
                self._succeed(b, base, append_time)
                return
        ids: dict[Any, str] | None = None
        by_tp: dict[tuple[str, int], Answer] = {}
        for a in answers:
            name, topic_id, index = a[:3]
            if not name:  # v13+: topics by id
                if ids is None:
                    ids = {info.topic_id: n for n, info in self.client.cluster.topics.items()}
                name = ids.get(topic_id, "")
            by_tp[(name, index)] = a
        for b in batches:
            answer = by_tp.get((b.topic, b.partition))
            if answer is None:
                self._retry(b, KafkaConnectionError(
                    f"produce response had no answer for {b.topic}-{b.partition}"))
                continue
            code, base, append_time, message = answer[3:]
            if code == 0 or code == DUPLICATE_SEQUENCE:
                self._succeed(b, base if code == 0 else -1, append_time)
                continue
            self._on_error(b, code, message)

    def _on_error(self, b: ProducerBatch, code: int, detail: str | None) -> None:
        if b.done:  # its delivery timeout ran out while the request was in flight
            return
        cls = for_code(code)
        err = cls(f"produce to {b.topic}-{b.partition}" + (f": {detail}" if detail else ""))
        self.metrics.errors += 1
        idem = self.idem
        if code == _MESSAGE_TOO_LARGE:
            self._too_large(b, err)
            return
        if self.txn is not None and code == _PRODUCER_FENCED:
            # Another producer with the same transactional id took over.
            self.txn.fatal(err)
            self._fail(b, TransactionFatalError(f"producer fenced: {err}"))
            return
        if self.txn is not None and code in (UNKNOWN_PRODUCER_ID, OUT_OF_ORDER_SEQUENCE,
                                             INVALID_PRODUCER_EPOCH):
            # An idempotent producer recovers with a new epoch and a resend, but a
            # transaction keeps one epoch up to its marker (a new one at the coordinator
            # aborts it): the transaction fails, and the epoch is bumped after the abort
            # (see _fail and the sender), as the Java client does. INVALID_PRODUCER_EPOCH
            # too (KIP-588): the partition saw a newer epoch, most often the one the
            # coordinator took when it aborted this transaction for its timeout; whether
            # the producer is fenced is the coordinator's to say, at the abort's EndTxn
            # (Kafka answers PRODUCER_FENCED there, and the producer is fatal then).
            failed = TransactionAbortableError(
                f"producing to {b.topic}-{b.partition} failed, the transaction must be "
                f"aborted: {err}")
            failed.__cause__ = err
            self._fail(b, failed)
            return
        if idem is not None and (code in (UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_EPOCH) or (
                code == _PRODUCER_FENCED and idem.transactional_id is None)):
            idem.need_bump = True
            self._retry(b, err, force=True)
            return
        if idem is not None and code == OUT_OF_ORDER_SEQUENCE:
            if idem.current(b):
                if idem.is_overtaken(b):
                    # Records sent after it are in the log already: a resend is refused
                    # the same way forever, and would land after them if it were not.
                    # It fails (the producer then takes a new epoch, see _fail).
                    self._fail(b, ProduceError(
                        f"producing to {b.topic}-{b.partition} failed: the broker wrote "
                        f"records sent after these first, so they cannot be written in "
                        f"order: {err}", err))
                    return
                if idem.is_next_expected(b):
                    # The broker refuses the very next sequence: its state and ours
                    # disagree.
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
        count = b.count if b.builder is None else b.builder.record_count  # (record_count)
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
            if b.base_sequence >= 0 and idem.current(b):
                # It may or may not be in the log: sequences after it cannot be trusted.
                idem.need_bump = True
        self._muted.discard((b.topic, b.partition))
        if self.txn is not None:
            self.txn.batch_failed(error)
            self._wake.set()  # its queued batches fail in the next pass (_fail_unsent)
        if b.complete(-1, -1, error):
            self.metrics.records_failed += count
            self.metrics.batches_failed += 1
            log.warning("%s record(s) for %s-%s failed: %s", count, b.topic, b.partition,
                        error)

    def _expire(self, now: float) -> None:
        for batch in self.acc.expire(now):
            self._fail(batch, expired_error(batch, now, self._stalled))


    # --- purging -------------------------------------------------------------------------

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

