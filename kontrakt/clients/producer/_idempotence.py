"""Idempotent producer state: producer id and epoch, per-partition sequence numbers.

The rules follow the Java client (KIP-98, KIP-360):

* ``InitProducerId`` (with no transactional id) gives a producer id and epoch. Brokers from
  Kafka 2.5 (and Tansu) take v3+, where the current id and epoch can be passed back to bump
  the epoch instead of getting a new id.
* Each batch gets the partition's next sequence number when it is first sent and keeps it on
  every resend, so a broker drops a resend it already wrote (up to 5 batches per partition
  in flight are remembered by brokers; hence max.in.flight <= 5).
* A batch that comes back with a retriable error is resent; batches sent after it on the
  same partition come back too (the broker refuses the gap with OUT_OF_ORDER_SEQUENCE_NUMBER)
  and are resent in sequence order once nothing of that partition is in flight.
* A partition's first batch under a producer id and epoch is sent alone: a broker holding
  no state of the producer accepts any first sequence, so a later batch could be written
  while the first is being retried. Should a later sequence be acknowledged first all the
  same, the batch refused as out of order fails: a resend would be refused the same way
  forever, or land behind records sent after it.
* When the sequence state cannot be trusted any more (UNKNOWN_PRODUCER_ID,
  INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER for the very next expected sequence,
  or a batch that failed for good after it was sent), the producer waits until nothing is in
  flight, starts a new epoch, and numbers every unsent batch again from 0. An idempotent
  producer gets a new producer id for that (the Java client bumps the epoch locally, but
  Tansu fences epochs it did not hand out and librdkafka's mock refuses InitProducerId with
  the old id for non-transactional producers); a transactional one has its epoch bumped by
  InitProducerId with its current id and epoch.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from kontrakt.clients.client import Backoff
from kontrakt.errors import KafkaConnectionError, KafkaTimeoutError
from kontrakt.protocol.errors import for_code
from kontrakt.protocol.messages import InitProducerIdRequest

if TYPE_CHECKING:
    from kontrakt.clients.client import AsyncKafkaClient
    from kontrakt.clients.producer._batch import ProducerBatch

__all__ = ["IdempotenceState", "PartitionSequences"]

log = logging.getLogger("kontrakt.producer")

_SEQ_MOD = 1 << 31
#: Codes that mean "the producer's sequence/epoch state is gone or wrong".
UNKNOWN_PRODUCER_ID = 59
INVALID_PRODUCER_EPOCH = 47
OUT_OF_ORDER_SEQUENCE = 45
DUPLICATE_SEQUENCE = 46


class PartitionSequences:
    """Sequence bookkeeping for one partition."""

    __slots__ = ("in_flight", "last_acked", "next_sequence")

    def __init__(self) -> None:
        self.next_sequence = 0
        self.last_acked = -1
        self.in_flight: list[ProducerBatch] = []


class IdempotenceState:
    """Producer id, epoch and per-partition sequences of an idempotent producer.

    Owned by the sender on the event loop (sequence numbers are assigned while the sender
    holds the accumulator lock).

    Args:
        transactional_id: None for idempotence alone; reserved for transactions.
    """

    def __init__(self, transactional_id: str | None = None,
                 transaction_timeout_ms: int = 60000) -> None:
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.producer_id = -1
        self.producer_epoch = -1
        self.partitions: dict[tuple[str, int], PartitionSequences] = {}
        self.need_bump = False
        self.bumps = 0

    def state(self, tp: tuple[str, int]) -> PartitionSequences:
        st = self.partitions.get(tp)
        if st is None:
            st = self.partitions[tp] = PartitionSequences()
        return st

    def can_send(self, batch: ProducerBatch) -> bool:
        """Whether ``batch`` (its partition's queue head) may be sent now."""
        if self.need_bump or self.producer_id < 0:
            return False
        st = self.partitions.get((batch.topic, batch.partition))
        if batch.base_sequence < 0:
            # A partition's first batch under this producer id and epoch goes alone, until
            # it is acknowledged: a broker holding no state of a producer id accepts any
            # first sequence, so a batch sent behind it could be written while it is
            # retried, and it could then only fail (is_overtaken). The cost is one round
            # trip of a partition's pipelining, once per producer id or epoch.
            return st is None or st.last_acked >= 0 or not st.in_flight
        # A resend goes out only when nothing else of its partition is in flight, so the
        # resends leave in sequence order and no gap reaches the broker.
        return st is None or not st.in_flight

    def assign(self, batch: ProducerBatch, count: int) -> None:
        """Give ``batch`` its sequence (first send only) and mark it in flight."""
        tp = (batch.topic, batch.partition)
        st = self.partitions.get(tp) or self.state(tp)
        if batch.base_sequence < 0:
            batch.base_sequence = st.next_sequence
            st.next_sequence = (st.next_sequence + count) % _SEQ_MOD
        flying = st.in_flight
        flying.append(batch)
        if len(flying) > 1 and flying[-2].base_sequence > batch.base_sequence:
            flying.sort(key=_seq)  # (sorted already otherwise: the sort is stable)

    def done(self, batch: ProducerBatch, acked: bool, count: int) -> None:
        """``batch`` came back (acknowledged or not)."""
        st = self.partitions.get((batch.topic, batch.partition))
        if st is None:
            return
        flying = st.in_flight
        if flying and flying[0] is batch:  # answered in order: the usual case
            del flying[0]
        elif batch in flying:
            flying.remove(batch)
        if acked and batch.base_sequence >= 0 and self.current(batch):
            last = (batch.base_sequence + count - 1) % _SEQ_MOD
            if st.last_acked < 0 or _after(last, st.last_acked):
                st.last_acked = last

    def current(self, batch: ProducerBatch) -> bool:
        """True when ``batch`` was last sent under this producer id and epoch (a new id
        starts again at epoch 0: the epoch alone would take an old id's batch for one of
        the current id)."""
        return batch.producer_id == self.producer_id and \
            batch.producer_epoch == self.producer_epoch

    def is_next_expected(self, batch: ProducerBatch) -> bool:
        """True when ``batch`` carries the sequence right after the last acknowledged one."""
        st = self.partitions.get((batch.topic, batch.partition))
        last = -1 if st is None else st.last_acked
        return batch.base_sequence == (last + 1) % _SEQ_MOD

    def is_overtaken(self, batch: ProducerBatch) -> bool:
        """True when a later sequence of ``batch``'s partition was acknowledged already: the
        broker wrote records sent after ``batch`` first, so ``batch`` can no longer be
        written in order in this epoch."""
        st = self.partitions.get((batch.topic, batch.partition))
        if st is None or st.last_acked < 0 or batch.base_sequence < 0:
            return False
        return not _after(batch.base_sequence, st.last_acked)

    def in_flight_count(self) -> int:
        return sum(len(st.in_flight) for st in self.partitions.values())

    def reset_sequences(self) -> None:
        """After an epoch bump: every partition starts again at sequence 0."""
        for st in self.partitions.values():
            st.next_sequence = 0
            st.last_acked = -1
        self.need_bump = False

    async def init(self, client: AsyncKafkaClient, *, bump: bool, timeout: float,
                   retry_backoff: float, retry_backoff_max: float) -> None:
        """Get a producer id (or bump the epoch of the current one).

        Raises:
            KafkaTimeoutError: no usable answer within ``timeout`` seconds.
            BrokerResponseError: a non-retriable error (e.g. authorization).
        """
        deadline = time.monotonic() + timeout
        backoff = Backoff(retry_backoff, retry_backoff_max)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise KafkaTimeoutError(f"InitProducerId got no usable answer within {timeout}s")
            try:
                node = (await client.coordinator(self.transactional_id, "transaction")
                        if self.transactional_id is not None else client.least_loaded_node())
                conn = await client.connection(node)
                version = conn.negotiate(InitProducerIdRequest)
                version = min(version, 5)
                req = InitProducerIdRequest(
                    transactional_id=self.transactional_id,
                    transaction_timeout_ms=self.transaction_timeout_ms)
                if version >= 3 and bump and self.producer_id >= 0:
                    req = InitProducerIdRequest(
                        transactional_id=self.transactional_id,
                        transaction_timeout_ms=self.transaction_timeout_ms,
                        producer_id=self.producer_id, producer_epoch=self.producer_epoch)
                resp = await conn.send(req, version=version, timeout=remaining)
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                delay = backoff.next()
                log.debug("InitProducerId failed (%s); retrying in %.3fs", exc, delay)
                await asyncio.sleep(min(delay, max(0.0, deadline - time.monotonic())))
                continue
            if resp.error_code:
                err = for_code(resp.error_code)(f"InitProducerId (transactional id "
                                                f"{self.transactional_id!r})")
                if not err.retriable:
                    raise err
                if self.transactional_id is not None and (
                        err.invalid_metadata or resp.error_code in (15, 16)):
                    client.forget_coordinator(self.transactional_id, "transaction")
                await asyncio.sleep(min(backoff.next(), max(0.0, deadline - time.monotonic())))
                continue
            old = (self.producer_id, self.producer_epoch)
            self.producer_id = resp.producer_id
            self.producer_epoch = resp.producer_epoch
            log.info("producer id %s epoch %s (was %s)", self.producer_id,
                     self.producer_epoch, old)
            return


def _seq(batch: ProducerBatch) -> int:
    return batch.base_sequence


def _after(a: int, b: int) -> bool:
    """True when sequence ``a`` comes after ``b`` (modulo wrap-around)."""
    return 0 < (a - b) % _SEQ_MOD < _SEQ_MOD // 2
