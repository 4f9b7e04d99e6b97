"""The exactly-once sink's Kafka side: one transaction per (query, Spark partition), ended
by the driver-side commit, and a per-task marker that says which batch it last committed.

How a micro-batch is written (``exactlyOnce=true``):

1. Each task opens a transactional producer with the id
   ``<transactionalIdPrefix>-<query id>-<partition id>``. Its InitProducerId bumps the id's
   epoch: an earlier attempt of the same task (retried, speculative, or left over from a
   crashed run) is fenced, and a transaction it left open is aborted.
2. The task reads its marker: the offset committed by the consumer group of the same name
   for partition 0 of the marker topic (the ``topic`` option's topic), read with
   ``require_stable``. It holds the id of the next batch to write. When the marker is past
   this batch, the task's share is already committed (the batch is a replay): it writes
   nothing.
3. Otherwise it writes its rows in one transaction, adds the marker ``batch id + 1`` to the
   same transaction (TxnOffsetCommit), flushes, checks every record, and leaves the
   transaction open; its commit message carries the transactional id, producer id and
   epoch.
4. The driver-side ``commit`` ends every task's transaction (EndTxn commit, from another
   process: the coordinator needs only the id, producer id and epoch). ``abort`` ends them
   with abort, so that their records do not hold back read_committed consumers until
   ``transaction.timeout.ms``.

Records and marker commit or abort together, so a share is either visible with its marker
or not at all; a replayed batch writes exactly the shares that are not.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kontrakt._types import TopicPartition
from kontrakt.clients.producer._transactions import END_TXN_MAX_VERSION
from kontrakt.errors import KafkaConnectionError, KafkaTimeoutError
from kontrakt.protocol.errors import for_code
from kontrakt.protocol.messages import EndTxnRequest

__all__ = ["TaskShare", "TransactionHandle", "client_config", "committed_batch",
           "end_transactions", "marker_partition"]

log = logging.getLogger("kontrakt.spark")

# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
# CONCURRENT_TRANSACTIONS: the coordinator is busy or moved; asked again.
_RETRY = {14, 15, 16, 51}
_MOVED = {15, 16}


@dataclass(frozen=True)
class TaskShare:
    """Which share of which batch a task writes: the key of its transaction and marker."""

    query_id: str
    batch_id: int
    partition_id: int

    def transactional_id(self, prefix: str) -> str:
        """``<prefix>-<query id>-<partition id>``: the same for every attempt and every
        batch of this task slot, so each attempt fences the ones before it."""
        return f"{prefix}-{self.query_id}-{self.partition_id}"


@dataclass(frozen=True)
class TransactionHandle:
    """An open transaction a task left for the driver-side commit to end."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


def marker_partition(topic: str) -> TopicPartition:
    """Where the markers are committed: partition 0 of the sink's topic (brokers refuse
    offsets of partitions that do not exist)."""
    return TopicPartition(topic, 0)


def client_config(kafka: Mapping[str, str]) -> dict[str, str]:
    """The sink's Kafka options that a plain client or admin client takes (connection,
    security), without the producer's own (``linger.ms``, ``transaction.timeout.ms``...)."""
    from kontrakt.clients.client import CLIENT_OPTIONS

    return {k: v for k, v in kafka.items() if k in CLIENT_OPTIONS}


def committed_batch(kafka: Mapping[str, str], group: str, topic: str,
                    timeout: float) -> int:
    """The id of the next batch the task slot ``group`` has to write (0: none committed).

    Raises:
        KafkaError: the offsets could not be read within ``timeout`` seconds.
    """
    from kontrakt.clients.admin import AdminClient

    tp = marker_partition(topic)
    with AdminClient(client_config(kafka)) as admin:
        found = admin.list_consumer_group_offsets(group, [tp], require_stable=True,
                                                  timeout=timeout)
    marker = found.get(tp)
    return 0 if marker is None or marker.offset < 0 else marker.offset


def end_transactions(kafka: Mapping[str, str], handles: list[TransactionHandle],
                     commit: bool, timeout: float) -> None:
    """Commit (or abort) each open transaction at its coordinator, one after the other.

    Each EndTxn is retried while the coordinator is loading, moving or still completing
    an earlier transaction of the id, for at most ``timeout`` seconds in all.

    Raises:
        BrokerResponseError: a coordinator refused, e.g. ``ProducerFencedError`` /
            ``InvalidProducerEpochError`` when a newer attempt fenced the task, or the
            coordinator aborted the transaction after ``transaction.timeout.ms``.
        KafkaTimeoutError: not done within ``timeout``.
    """
    if handles:
        asyncio.run(_end_all(client_config(kafka), handles, commit,
                             time.monotonic() + timeout))


async def _end_all(config: dict[str, str], handles: list[TransactionHandle], commit: bool,
                   deadline: float) -> None:
    from kontrakt.clients import AsyncKafkaClient

    async with AsyncKafkaClient(config) as client:
        for handle in handles:
            await _end_one(client, handle, commit, deadline)


async def _end_one(client: Any, handle: TransactionHandle, commit: bool,
                   deadline: float) -> None:
    txn_id = handle.transactional_id
    delay = 0.05
    while True:
        try:
            node = await client.coordinator(txn_id, "transaction")
            # The task's producer ran transaction version 1: ending its transaction with
            # version 2's EndTxn would mix the two (see the producer's _transactions).
            version = min((await client.connection(node)).negotiate(EndTxnRequest),
                          END_TXN_MAX_VERSION)
            resp = await client.request(EndTxnRequest(
                transactional_id=txn_id, producer_id=handle.producer_id,
                producer_epoch=handle.producer_epoch, committed=commit), node=node,
                version=version, timeout=max(0.001, deadline - time.monotonic()))
            code = int(resp.error_code)
            if code == 0:
                return
            error: BaseException = for_code(code)(
                f"EndTxn({'commit' if commit else 'abort'}) of transactional id {txn_id!r} "
                f"(producer id {handle.producer_id}, epoch {handle.producer_epoch})")
            if code not in _RETRY:
                raise error
            if code in _MOVED:
                client.forget_coordinator(txn_id, "transaction")
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            client.forget_coordinator(txn_id, "transaction")
            error = exc
        if time.monotonic() + delay > deadline:
            raise KafkaTimeoutError(f"ending the transaction of {txn_id!r} did not succeed "
                                    f"in time: {error}")
        log.debug("EndTxn of %s: %s; again in %.2f s", txn_id, error, delay)
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)
