"""Admin operations on transactions — a base class of
:class:`~kontrakt.clients.admin.AsyncAdminClient`: DescribeTransactions goes to each
transactional id's coordinator (see :meth:`Router.per_coordinator`); ListTransactions goes
to every broker and is merged; an abort (WriteTxnMarkers, KIP-664) goes to the partition's
leader; fencing (InitProducerId, KIP-618) goes to each transactional id's coordinator.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from kontrakt._types import TopicPartition
from kontrakt.clients.admin import _validate as v
from kontrakt.clients.admin._routing import Fatal, Router, error_for, finish
from kontrakt.clients.admin._types import TransactionDescription, TransactionListing
from kontrakt.clients.client import AsyncKafkaClient
from kontrakt.clients.group._protocol import group_by_topic
from kontrakt.errors import (
    InvalidArgumentError,
    KafkaError,
    ProtocolError,
    UnsupportedVersionError,
)
from kontrakt.protocol.errors import (
    BrokerNotAvailableError,
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    NotCoordinatorError,
    NotLeaderOrFollowerError,
    ReplicaNotAvailableError,
    TransactionalIdNotFoundError,
    UnknownTopicOrPartitionError,
)
from kontrakt.protocol.messages import (
    DescribeTransactionsRequest,
    InitProducerIdRequest,
    ListTransactionsRequest,
    WriteTxnMarkersRequest,
)
from kontrakt.protocol.spec import Request

if TYPE_CHECKING:
    from kontrakt.clients.admin._admin import AsyncAdminClient

__all__ = ["AbortTransactionSpec", "HangingTransaction", "ProducerIdAndEpoch",
           "TransactionOperations"]

TP = TopicPartition

# WriteTxnMarkers errors that a fresh look at the partition's leader may cure.
_LEADER_MOVED = (NotLeaderOrFollowerError, ReplicaNotAvailableError, BrokerNotAvailableError,
                 UnknownTopicOrPartitionError)
# InitProducerId errors worth asking again (the coordinator is looked up again after the
# first two); Java's fenceProducers retries exactly these.
_FENCE_RETRIED = (NotCoordinatorError, CoordinatorNotAvailableError,
                  CoordinatorLoadInProgressError, ConcurrentTransactionsError)


@dataclass(frozen=True, slots=True)
class HangingTransaction:
    """An open transaction on a partition that its coordinator does not know about (or no
    longer lists the partition of), found by
    :meth:`~TransactionOperations.find_hanging_transactions`.

    Attributes:
        topic_partition: the partition whose last stable offset it holds back.
        producer_id, producer_epoch, coordinator_epoch: the partition leader's producer
            state (what :meth:`abort_spec` needs).
        current_transaction_start_offset: the offset of the transaction's first record.
        last_timestamp: broker wall-clock ms of the producer's last write there.
    """

    topic_partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    current_transaction_start_offset: int
    last_timestamp: int

    def abort_spec(self) -> AbortTransactionSpec:
        """What :meth:`~TransactionOperations.abort_transaction` takes to abort it."""
        return AbortTransactionSpec(self.topic_partition, self.producer_id,
                                    self.producer_epoch, self.coordinator_epoch)


@dataclass(frozen=True, slots=True)
class ProducerIdAndEpoch:
    """The producer id and epoch a transactional id was fenced with: producers of that id
    with an older epoch can no longer write or end transactions."""

    producer_id: int
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class AbortTransactionSpec:
    """What :meth:`~TransactionOperations.abort_transaction` aborts: the open transaction of
    one producer on one partition, as ``describe_producers`` reports it (its
    ``producer_id``, ``producer_epoch`` and ``coordinator_epoch``).

    Attributes:
        topic_partition: the partition with the hanging transaction.
        producer_id: the producer whose transaction to abort.
        producer_epoch: that producer's epoch (0..32767).
        coordinator_epoch: the epoch of the coordinator that began the transaction; the
            leader refuses a marker with an older one (TRANSACTION_COORDINATOR_FENCED).
    """

    topic_partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int


class TransactionOperations:
    """Transaction operations (see the module doc)."""

    _client: AsyncKafkaClient
    _router: Router

    async def describe_transactions(self, transactional_ids: Iterable[str], *,
                                    timeout: float | None = None,
                                    return_exceptions: bool = False
                                    ) -> dict[str, TransactionDescription]:
        """Describe transactions, asking each transactional id's coordinator.

        Raises:
            InvalidArgumentError: an empty transactional id.
            PartialFailureError: some ids failed (e.g. ``TransactionalIdNotFoundError``).
        """
        ids = v.unique((_check_txn_id(t) for t in transactional_ids), "transactional id")
        deadline = self._router.deadline(timeout)
        await self._client.start()
        req = DescribeTransactionsRequest

        async def send(node: int, batch: list[str]) -> dict[str, Any]:
            resp = await self._router.exchange(node, req, lambda ver: req(
                transactional_ids=batch), deadline)
            return {s.transactional_id: error_for(
                s.error_code, None, f"transactional id {s.transactional_id!r}")
                if s.error_code else TransactionDescription(
                    s.transactional_id, node, s.transaction_state, s.producer_id,
                    s.producer_epoch, s.transaction_timeout_ms, s.transaction_start_time_ms,
                    tuple(TP(t.topic, p) for t in s.topics for p in t.partitions))
                for s in resp.transaction_states}

        results = await self._router.per_coordinator(ids, "transaction", deadline, send)
        return finish(results, "describe_transactions", return_exceptions)

    async def list_transactions(self, *, states: Iterable[str] | None = None,
                                producer_ids: Iterable[int] | None = None,
                                duration_filter_ms: int | None = None,
                                timeout: float | None = None) -> list[TransactionListing]:
        """Transactions known to every broker's transaction coordinator, merged.

        Args:
            states: only these states (e.g. ``Ongoing``).
            producer_ids: only these producers.
            duration_filter_ms: only transactions open longer than this (ListTransactions
                v1+).

        Raises:
            PartialFailureError: a broker failed; ``.results`` maps broker id to its list
                or its error.
        """
        await self._client.start()
        deadline = self._router.deadline(timeout)
        req = ListTransactionsRequest

        def build(version: int) -> Request:
            if duration_filter_ms is not None and version < 1:
                raise UnsupportedVersionError("ListTransactions v0 cannot filter by duration")
            return req(state_filters=list(states or ()), producer_id_filters=list(
                producer_ids or ()), duration_filter=(
                -1 if duration_filter_ms is None else duration_filter_ms))

        async def send(node: int, _b: list[int]) -> dict[int, Any]:
            resp = await self._router.exchange(node, req, build, deadline)
            if resp.error_code:
                return {node: error_for(resp.error_code, None, f"broker {node}")}
            return {node: [TransactionListing(s.transactional_id, s.producer_id,
                                              s.transaction_state)
                           for s in resp.transaction_states]}

        results = await self._router.per_entity(
            self._router.brokers(),
            lambda batch: self._router.fan_out({b: [b] for b in batch}, send), deadline)
        finish(results, "list_transactions", False)
        merged = {t.transactional_id: t for listing in results.values() for t in listing}
        return [merged[k] for k in sorted(merged)]

    async def abort_transaction(self, spec: AbortTransactionSpec, *,
                                timeout: float | None = None) -> None:
        """Abort a hanging transaction on one partition by writing an abort marker there
        (Java's ``Admin.abortTransaction``, KIP-664): for a transaction whose coordinator
        no longer knows it, which keeps the partition's last stable offset from moving.

        Sent as WriteTxnMarkers to the partition's leader. The leader checks the producer
        epoch and the coordinator epoch against the partition's producer state; find both
        with ``describe_producers``. Needs CLUSTER_ACTION permission on the cluster.

        Args:
            spec: the partition, producer id and epochs.
            timeout: seconds for the whole call, retries included (default
                ``default.api.timeout.ms``).

        Raises:
            InvalidArgumentError: a bad partition, id or epoch (nothing is sent).
            InvalidProducerEpochError: the producer epoch is not the partition's current one.
            TransactionCoordinatorFencedError: the coordinator epoch is older than the one
                the leader knows.
            ClusterAuthorizationFailedError: no CLUSTER_ACTION permission.
            UnknownTopicOrPartitionError: the partition does not exist.
            UnsupportedVersionError: the leader offers no WriteTxnMarkers v1+.
            ProtocolError: the leader answered about another producer or partition.
            NotLeaderOrFollowerError / ReplicaNotAvailableError / KafkaTimeoutError: a
                leader change or an unavailable replica (retried on fresh metadata) lasted
                until ``timeout``. Other errors the leader answers are not retried.
        """
        tp = _check_abort_spec(spec)
        where = f"{tp.topic}-{tp.partition}"
        deadline = self._router.deadline(timeout)
        await self._client.start()
        req = WriteTxnMarkersRequest
        marker = req.WritableTxnMarker

        async def send(node: int, batch: list[TopicPartition]) -> dict[TopicPartition, Any]:
            resp = await self._router.exchange(node, req, lambda ver: req(markers=[marker(
                producer_id=spec.producer_id, producer_epoch=spec.producer_epoch,
                transaction_result=False, coordinator_epoch=spec.coordinator_epoch,
                topics=[marker.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                        for t, ps in group_by_topic(batch).items()])]), deadline)
            answered = [(m.producer_id, TP(t.name, p.partition_index), p.error_code)
                        for m in resp.markers for t in m.topics for p in t.partitions]
            if [(pid, at) for pid, at, _c in answered] != [(spec.producer_id, tp)]:
                raise ProtocolError(
                    "WriteTxnMarkers answered about " + ", ".join(
                        f"producer {p} on {a.topic}-{a.partition}" for p, a, _ in answered)
                    + f", not only producer {spec.producer_id} on {where}")
            code = answered[0][2]
            if not code:
                return {tp: None}
            err = error_for(code, None, f"abort of producer {spec.producer_id} on {where}")
            # As Java's: only a moved or unavailable leader is worth asking again (after a
            # metadata refresh); an epoch the leader refuses will not change by retrying.
            return {tp: err if isinstance(err, _LEADER_MOVED) else Fatal(err)}

        results = await self._router.per_leader([tp], deadline, send)
        finish(results, "abort_transaction", False)

    async def fence_producers(self, transactional_ids: Iterable[str], *,
                              timeout: float | None = None,
                              return_exceptions: bool = False
                              ) -> dict[str, ProducerIdAndEpoch]:
        """Fence the producers of transactional ids (Java's ``Admin.fenceProducers``,
        KIP-618): each id's coordinator bumps its producer epoch, aborting any open
        transaction, so that a producer still using the id fails with
        ``ProducerFencedError`` (or ``InvalidProducerEpochError``) on its next write.

        Sends InitProducerId for each id, without a producer id or epoch, to the id's
        transaction coordinator. The coordinator is given ``timeout`` (default
        ``request.timeout.ms``) as the transaction timeout, as Java does. Needs WRITE on
        each transactional id.

        Args:
            transactional_ids: the ids to fence.
            timeout: seconds for the whole call, retries included (default
                ``default.api.timeout.ms``).
            return_exceptions: return failures in the dict instead of raising.

        Returns:
            transactional id -> the :class:`ProducerIdAndEpoch` it now has.

        Raises:
            InvalidArgumentError: an empty or repeated id (nothing is sent).
            TransactionalIdAuthorizationFailedError / ClusterAuthorizationFailedError:
                not allowed (raised as is for a single id).
            PartialFailureError: some ids failed.
            Retried until ``timeout``: NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE (after
            looking the coordinator up again), COORDINATOR_LOAD_IN_PROGRESS and
            CONCURRENT_TRANSACTIONS (the coordinator is still ending a transaction of the
            id); any other error the coordinator answers is final.
        """
        ids = v.unique((_check_txn_id(t) for t in transactional_ids), "transactional id")
        deadline = self._router.deadline(timeout)
        await self._client.start()
        txn_timeout_ms = min(2**31 - 1, int(1000 * timeout)) if timeout is not None else \
            self._client.config["request.timeout.ms"]
        req = InitProducerIdRequest

        async def one(node: int, tid: str) -> Any:
            try:
                resp = await self._router.exchange(node, req, lambda ver: req(
                    transactional_id=tid, transaction_timeout_ms=txn_timeout_ms,
                    producer_id=-1, producer_epoch=-1), deadline)
            except KafkaError as exc:
                return exc
            if not resp.error_code:
                return ProducerIdAndEpoch(resp.producer_id, resp.producer_epoch)
            err = error_for(resp.error_code, None, f"transactional id {tid!r}")
            return err if isinstance(err, _FENCE_RETRIED) else Fatal(err)

        async def send(node: int, batch: list[str]) -> dict[str, Any]:
            # InitProducerId names one id: one request per id, all at once.
            return dict(zip(batch, await asyncio.gather(*(one(node, t) for t in batch)),
                            strict=True))

        results = await self._router.per_coordinator(ids, "transaction", deadline, send)
        return finish(results, "fence_producers", return_exceptions)

    async def force_terminate_transaction(self, transactional_id: str, *,
                                          timeout: float | None = None) -> None:
        """Abort the ongoing transaction of a transactional id, whatever its producer does
        (Java's ``Admin.forceTerminateTransaction``, KIP-939): for long-running
        transactions the coordinator knows, e.g. a two-phase-commit participant that
        never finished. It is :meth:`fence_producers` for that one id: the coordinator
        bumps the epoch, aborting the transaction and fencing its producer. (A
        transaction its coordinator does not know is "hanging": see
        :meth:`find_hanging_transactions` and :meth:`abort_transaction`.)

        Raises:
            what :meth:`fence_producers` raises for one id, e.g.
            TransactionalIdAuthorizationFailedError.
        """
        await self.fence_producers([transactional_id], timeout=timeout)

    async def find_hanging_transactions(
            self, partitions: Iterable[TopicPartition] | None = None, *,
            broker_ids: Iterable[int] | None = None,
            max_transaction_timeout_ms: int = 900000,
            timeout: float | None = None) -> list[HangingTransaction]:
        """Find hanging transactions: open on a partition for longer than any transaction
        may run, yet unknown to their coordinator, so nothing will ever end them and the
        partition's last stable offset is stuck (KIP-664; what ``kafka-transactions.sh
        find-hanging`` does). Abort each with
        ``abort_transaction(hanging.abort_spec())``.

        Steps: ``describe_producers`` on the partitions (their leaders' producer states)
        gives the open transactions whose producer last wrote more than
        ``max_transaction_timeout_ms`` ago; ``list_transactions`` maps their producer ids
        to transactional ids and ``describe_transactions`` asks the coordinators. One is
        hanging when no coordinator lists its producer id, its transactional id is not
        found, or the coordinator's transaction does not include the partition.

        Args:
            partitions: where to look (default: every partition of every topic but the
                internal ones).
            broker_ids: look only at partitions with a replica on one of these brokers
                (not with ``partitions``).
            max_transaction_timeout_ms: the brokers' ``transaction.max.timeout.ms``
                (Kafka's default 900000): a transaction this old should have been ended
                by its coordinator. Ages use this machine's clock against the brokers'
                timestamps.
            timeout: seconds for each of the admin calls it makes.

        Returns:
            the hanging transactions, sorted by partition and producer id.

        Raises:
            InvalidArgumentError: bad partitions, or both ``partitions`` and
                ``broker_ids``.
            PartialFailureError (or one partition's, transactional id's or broker's own
                error): a step failed; a transactional id not found is not a failure.
        """
        # The steps are other families' calls, all on the one AsyncAdminClient this is a
        # base class of.
        admin = cast("AsyncAdminClient", self)
        if partitions is not None and broker_ids is not None:
            raise InvalidArgumentError("give partitions or broker_ids, not both")
        if isinstance(max_transaction_timeout_ms, bool) or not isinstance(
                max_transaction_timeout_ms, int) or max_transaction_timeout_ms < 0:
            raise InvalidArgumentError("max_transaction_timeout_ms must be an int >= 0, got "
                                       f"{max_transaction_timeout_ms!r}")
        if partitions is not None:
            tps = v.check_partitions(partitions, "partitions")
        else:
            brokers = None if broker_ids is None else set(broker_ids)
            topics = await admin.list_topics(timeout=timeout)
            described = await admin.describe_topics(topics, timeout=timeout) if topics else {}
            tps = [TP(name, p.partition) for name, d in described.items()
                   for p in d.partitions if brokers is None or brokers & set(p.replicas)]
        if not tps:
            return []
        states = await admin.describe_producers(tps, timeout=timeout)
        now_ms = int(time.time() * 1000)
        candidates = [(tp, s) for tp, ss in states.items() for s in ss
                      if s.current_transaction_start_offset >= 0
                      and now_ms - s.last_timestamp > max_transaction_timeout_ms]
        if not candidates:
            return []
        pids = {s.producer_id for _tp, s in candidates}
        listed = await admin.list_transactions(producer_ids=sorted(pids), timeout=timeout)
        tid_of = {t.producer_id: t.transactional_id for t in listed if t.producer_id in pids}
        found = await admin.describe_transactions(
            sorted(set(tid_of.values())), timeout=timeout, return_exceptions=True) \
            if tid_of else {}
        partitions_of: dict[str, set[TopicPartition] | None] = {}
        for tid, d in found.items():
            if isinstance(d, TransactionalIdNotFoundError):
                partitions_of[tid] = None  # the coordinator forgot the id: hanging
            elif isinstance(d, BaseException):
                raise d
            else:
                partitions_of[tid] = set(d.topic_partitions)
        hanging = []
        for tp, s in candidates:
            txn_id = tid_of.get(s.producer_id)
            known = partitions_of.get(txn_id) if txn_id is not None else None
            if known is None or tp not in known:
                hanging.append(HangingTransaction(
                    tp, s.producer_id, s.producer_epoch, s.coordinator_epoch,
                    s.current_transaction_start_offset, s.last_timestamp))
        return sorted(hanging, key=lambda h: (h.topic_partition.topic,
                                              h.topic_partition.partition, h.producer_id))


def _check_abort_spec(spec: object) -> TopicPartition:
    if not isinstance(spec, AbortTransactionSpec):
        raise InvalidArgumentError(f"expected AbortTransactionSpec, got {spec!r}")
    [tp] = v.check_partitions([spec.topic_partition], "topic_partition")
    for what, value, lo, hi in (("producer_id", spec.producer_id, 0, 2**63 - 1),
                                ("producer_epoch", spec.producer_epoch, 0, 2**15 - 1),
                                ("coordinator_epoch", spec.coordinator_epoch, -1, 2**31 - 1)):
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise InvalidArgumentError(f"{what} must be an int in {lo}..{hi}, got {value!r}")
    return tp


def _check_txn_id(tid: object) -> str:
    if not isinstance(tid, str) or not tid:
        raise InvalidArgumentError(f"transactional id must be a non-empty str, got {tid!r}")
    return tid
