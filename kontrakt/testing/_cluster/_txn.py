"""Idempotent and transactional producers: InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, TxnOffsetCommit and EndTxn (control markers, fencing by epoch, timeouts).

The coordinator completes each transaction synchronously: EndTxn writes the markers into every
partition of the transaction before answering, so PrepareCommit / PrepareAbort are never
observable and CONCURRENT_TRANSACTIONS is never returned.

Of transaction version 2 (KIP-890 part 2) it has what Kafka keys on the EndTxn version: an
EndTxn v5+ bumps the producer epoch (a new producer id past the last epoch) and answers it;
its retry with the epoch before the bump is answered NONE (not after a new producer id).
A transactional Produce v12+ does not add its partition, nor a TxnOffsetCommit v5+ its group:
those are refused as from a client of transaction version 1 that skipped the adding.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from kontrakt.protocol import errors as E
from kontrakt.protocol.messages import (
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnResponse,
    DescribeTransactionsResponse,
    EndTxnResponse,
    InitProducerIdResponse,
    ListTransactionsResponse,
    TxnOffsetCommitResponse,
)
from kontrakt.protocol.spec import Response
from kontrakt.testing._cluster._state import ClusterState, RequestContext

__all__ = ["TransactionCoordinator"]

_EPOCH_MAX = 32767
_TXN_KEY = 1
_STATES = frozenset({"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
                     "CompleteAbort", "Dead", "PrepareEpochFence"})


@dataclass(slots=True)
class _Txn:
    """A transactional id's state."""

    producer_id: int
    epoch: int
    timeout_ms: int
    partitions: set[tuple[str, int]] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    started: float = 0.0  # monotonic time of the first partition added
    started_ms: int = -1  # the same in wall-clock ms, for DescribeTransactions
    last_state: str = "Empty"  # CompleteCommit / CompleteAbort once one ended

    @property
    def ongoing(self) -> bool:
        return bool(self.partitions or self.groups)

    @property
    def state(self) -> str:
        """Kafka's name for the transaction's state."""
        return "Ongoing" if self.ongoing else self.last_state

    def begin(self, now_ms: int) -> None:
        if not self.ongoing:
            self.started = time.monotonic()
            self.started_ms = now_ms


class TransactionCoordinator:
    """Producer ids, epochs and ongoing transactions of the cluster."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.txns: dict[str, _Txn] = {}

    # --- queries used by other handlers -----------------------------------------------------
    def verify(self, topic: str, partition: int, producer_id: int, epoch: int) -> int:
        """The error for a transactional batch of ``producer_id`` at ``epoch`` written to the
        partition: INVALID_PRODUCER_EPOCH for a fenced epoch, INVALID_TXN_STATE when its
        ongoing transaction does not hold the partition, else 0."""
        for txn in self.txns.values():
            if txn.producer_id == producer_id:
                if epoch < txn.epoch:
                    return E.InvalidProducerEpochError.code
                if epoch == txn.epoch and (topic, partition) in txn.partitions:
                    return 0
                break
        return E.InvalidTxnStateError.code

    def _fenced(self, version: int, first_new_version: int) -> int:
        """PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH for versions that predate it."""
        if version < first_new_version:
            return E.InvalidProducerEpochError.code
        return E.ProducerFencedError.code

    def _check(self, ctx: RequestContext, tid: str, pid: int, epoch: int, version: int,
               first_new_version: int = 2) -> tuple[int, _Txn | None]:
        if self.state.coordinator_for(_TXN_KEY, tid) != ctx.node_id:
            return E.NotCoordinatorError.code, None
        txn = self.txns.get(tid)
        if txn is None or txn.producer_id != pid:
            return E.InvalidProducerIdMappingError.code, None
        if epoch != txn.epoch:
            return self._fenced(version, first_new_version), None
        return 0, txn

    # --- handlers ---------------------------------------------------------------------------
    def init_producer_id(self, ctx: RequestContext, version: int, req: Any) -> Response:
        st = self.state
        ir = InitProducerIdResponse
        tid = req.transactional_id
        if tid is None:
            return ir(error_code=0, producer_id=st.new_producer_id(), producer_epoch=0)
        if st.coordinator_for(_TXN_KEY, tid) != ctx.node_id:
            return ir(error_code=E.NotCoordinatorError.code, producer_epoch=-1)
        if not 0 < req.transaction_timeout_ms <= st.settings.transaction_max_timeout_ms:
            return ir(error_code=E.InvalidTransactionTimeoutError.code, producer_epoch=-1)
        txn = self.txns.get(tid)
        if txn is None:
            txn = self.txns[tid] = _Txn(st.new_producer_id(), 0, req.transaction_timeout_ms)
            self._save(txn)
            return ir(error_code=0, producer_id=txn.producer_id, producer_epoch=0)
        if version >= 3 and req.producer_id >= 0 and (
                req.producer_id != txn.producer_id or req.producer_epoch != txn.epoch):
            # KIP-360: a producer bumping its own epoch must still hold the current one.
            return ir(error_code=self._fenced(version, 4), producer_epoch=-1)
        if txn.ongoing:
            self._complete(txn, commit=False, bump=True)
        txn.epoch += 1
        if txn.epoch > _EPOCH_MAX - 1:
            txn.producer_id, txn.epoch = st.new_producer_id(), 0
        txn.timeout_ms = req.transaction_timeout_ms
        self._fence_everywhere(txn)
        self._save(txn)
        return ir(error_code=0, producer_id=txn.producer_id, producer_epoch=txn.epoch)

    def add_partitions(self, ctx: RequestContext, version: int, req: Any) -> Response:
        ar = AddPartitionsToTxnResponse
        if version >= 4:
            results = []
            for t in req.transactions:
                topics = self._add(ctx, version, t.transactional_id, t.producer_id,
                                   t.producer_epoch, t.topics, t.verify_only)
                results.append(ar.AddPartitionsToTxnResult(transactional_id=t.transactional_id,
                                                           topic_results=topics))
            return ar(results_by_transaction=results)
        return ar(results_by_topic_v3_and_below=self._add(
            ctx, version, req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
            req.v3_and_below_producer_epoch, req.v3_and_below_topics, False))

    def _add(self, ctx: RequestContext, version: int, tid: str, pid: int, epoch: int,
             topics: Any, verify_only: bool) -> list[Any]:
        st = self.state
        rcls = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
        pcls = rcls.AddPartitionsToTxnPartitionResult
        error, txn = self._check(ctx, tid, pid, epoch, version)
        unknown = {(t.name, p) for t in topics for p in t.partitions
                   if st.partition(t.name, p) is None}
        if not error and unknown:
            error = -2  # per partition below
        out = []
        for t in topics:
            parts = []
            for p in t.partitions:
                code = error
                if error == -2:
                    code = (E.UnknownTopicOrPartitionError.code if (t.name, p) in unknown
                            else E.OperationNotAttemptedError.code)
                elif verify_only and txn is not None and (t.name, p) not in txn.partitions:
                    code = E.InvalidTxnStateError.code
                parts.append(pcls(partition_index=p, partition_error_code=code))
            out.append(rcls(name=t.name, results_by_partition=parts))
        if not error and txn is not None and not verify_only:
            txn.begin(st.now_ms())
            txn.partitions.update((t.name, p) for t in topics for p in t.partitions)
        return out

    def add_offsets(self, ctx: RequestContext, version: int, req: Any) -> Response:
        error, txn = self._check(ctx, req.transactional_id, req.producer_id,
                                 req.producer_epoch, version)
        if not error and txn is not None:
            txn.begin(self.state.now_ms())
            txn.groups.add(req.group_id)
        return AddOffsetsToTxnResponse(error_code=error)

    def txn_offset_commit(self, ctx: RequestContext, version: int, req: Any) -> Response:
        tr = TxnOffsetCommitResponse
        pcls = tr.TxnOffsetCommitResponseTopic.TxnOffsetCommitResponsePartition
        txn = self.txns.get(req.transactional_id)
        error = 0
        if self.state.coordinator_for(0, req.group_id) != ctx.node_id:
            error = E.NotCoordinatorError.code
        elif txn is None or txn.producer_id != req.producer_id:
            error = E.InvalidProducerIdMappingError.code
        elif req.producer_epoch != txn.epoch:
            error = self._fenced(version, 2)
        elif req.group_id not in txn.groups:
            error = E.InvalidTxnStateError.code
        else:
            error = self.state.groups.check_txn_member(req, version)
        if not error:
            self.state.groups.stage_txn_offsets(req.producer_id, req.group_id, req.topics)
        return tr(topics=[tr.TxnOffsetCommitResponseTopic(name=t.name, partitions=[
            pcls(partition_index=p.partition_index, error_code=error) for p in t.partitions])
            for t in req.topics])

    def end_txn(self, ctx: RequestContext, version: int, req: Any) -> Response:
        # As Kafka's TransactionVersion.transactionVersionForEndTxn: v5+ is a client of
        # transaction version 2 (KIP-890 part 2) whatever the cluster finalized, and ending
        # its transaction bumps the epoch, which the response carries.
        tv2 = version >= 5
        done = "CompleteCommit" if req.committed else "CompleteAbort"
        txn = self.txns.get(req.transactional_id)
        if (tv2 and txn is not None and txn.producer_id == req.producer_id
                and txn.epoch == req.producer_epoch + 1 and not txn.ongoing
                and txn.last_state == done
                and self.state.coordinator_for(_TXN_KEY, req.transactional_id) == ctx.node_id):
            # The retry of the EndTxn that ended it and bumped the epoch (its answer lost).
            return EndTxnResponse(error_code=0, producer_id=txn.producer_id,
                                  producer_epoch=txn.epoch)
        error, txn = self._check(ctx, req.transactional_id, req.producer_id,
                                 req.producer_epoch, version)
        if not error and txn is not None:
            # (At transaction version 2 an abort with nothing to abort is allowed: it
            # bumps the epoch.)
            if txn.ongoing or (tv2 and not req.committed):
                self._complete(txn, commit=req.committed, bump=tv2)
                if tv2 and txn.epoch >= _EPOCH_MAX:
                    txn.producer_id, txn.epoch = self.state.new_producer_id(), 0
                    self._save(txn)
            else:
                # As Kafka: a retry of the EndTxn that completed it (its answer lost) gets
                # NONE; the other outcome, or no transaction ended yet, does not. (At
                # version 2 that retry carries the epoch before the bump: answered above.)
                error = 0 if txn.last_state == done and not tv2 else \
                    E.InvalidTxnStateError.code
        if tv2 and not error and txn is not None:
            return EndTxnResponse(error_code=0, producer_id=txn.producer_id,
                                  producer_epoch=txn.epoch)
        return EndTxnResponse(error_code=error, producer_id=req.producer_id,
                              producer_epoch=req.producer_epoch)

    # --- completion -------------------------------------------------------------------------
    def _complete(self, txn: _Txn, *, commit: bool, bump: bool) -> None:
        """Write the markers and publish or drop the transaction's offsets.

        Args:
            bump: the coordinator aborts on its own (timeout, a new InitProducerId), or an
                EndTxn of transaction version 2 ends it: the markers carry the next epoch,
                which fences the producer's late writes.
        """
        st = self.state
        if bump:
            txn.epoch += 1
            self._save(txn)
        now = st.now_ms()
        for topic, index in sorted(txn.partitions):
            found = st.partition(topic, index)
            if found is not None:
                found[1].write_marker(txn.producer_id, txn.epoch, commit=commit, now_ms=now)
        for group in txn.groups:
            st.groups.end_txn_offsets(txn.producer_id, group, commit)
        txn.partitions.clear()
        txn.groups.clear()
        txn.started_ms = -1
        txn.last_state = "CompleteCommit" if commit else "CompleteAbort"
        st.notify()

    # --- transactions admin -------------------------------------------------------------------
    def describe_transactions(self, ctx: RequestContext, version: int, req: Any) -> Response:
        dr = DescribeTransactionsResponse
        out = []
        for tid in req.transactional_ids:
            txn = self.txns.get(tid)
            error = 0
            if self.state.coordinator_for(_TXN_KEY, tid) != ctx.node_id:
                error = E.NotCoordinatorError.code
            elif txn is None:
                error = E.TransactionalIdNotFoundError.code
            if error or txn is None:
                out.append(dr.TransactionState(error_code=error, transactional_id=tid,
                                               transaction_state="", producer_id=-1,
                                               producer_epoch=-1, transaction_start_time_ms=-1))
                continue
            by_topic: dict[str, list[int]] = {}
            for topic, index in sorted(txn.partitions):
                by_topic.setdefault(topic, []).append(index)
            out.append(dr.TransactionState(
                error_code=0, transactional_id=tid, transaction_state=txn.state,
                transaction_timeout_ms=txn.timeout_ms,
                transaction_start_time_ms=txn.started_ms, producer_id=txn.producer_id,
                producer_epoch=txn.epoch, topics=[dr.TransactionState.TopicData(
                    topic=t, partitions=ps) for t, ps in by_topic.items()]))
        return dr(transaction_states=out)

    def list_transactions(self, ctx: RequestContext, version: int, req: Any) -> Response:
        lr = ListTransactionsResponse
        states = set(req.state_filters)
        unknown = sorted(states - _STATES)
        pids = set(req.producer_id_filters)
        min_ms = req.duration_filter if version >= 1 else -1
        pattern = None
        if version >= 2 and req.transactional_id_pattern is not None:
            try:
                pattern = re.compile(req.transactional_id_pattern)
            except re.error:
                return lr(error_code=E.InvalidRegularExpressionError.code)
        now = self.state.now_ms()
        out = []
        for tid, txn in sorted(self.txns.items()):
            if self.state.coordinator_for(_TXN_KEY, tid) != ctx.node_id:
                continue
            if (states and txn.state not in states) or (pids and txn.producer_id not in pids):
                continue
            if min_ms >= 0 and (txn.started_ms < 0 or now - txn.started_ms < min_ms):
                continue
            if pattern is not None and not pattern.fullmatch(tid):
                continue
            out.append(lr.TransactionState(transactional_id=tid, producer_id=txn.producer_id,
                                           transaction_state=txn.state))
        return lr(error_code=0, unknown_state_filters=unknown, transaction_states=out)

    def _fence_everywhere(self, txn: _Txn) -> None:
        for topic in self.state.topics.values():
            for log in topic.partitions:
                if log.producer_epoch(txn.producer_id) >= 0:
                    log.fence(txn.producer_id, txn.epoch)

    def expire(self) -> None:
        """Abort (and fence) transactions open longer than their timeout, as Kafka does."""
        now = time.monotonic()
        for txn in self.txns.values():
            if txn.ongoing and (now - txn.started) * 1000 > txn.timeout_ms:
                self._complete(txn, commit=False, bump=True)

    # --- persistence (see _persist) -----------------------------------------------------------
    def _save(self, txn: _Txn) -> None:
        """Record a transactional id's producer id and epoch in the storage folder, if any."""
        if self.state.persist is None:
            return
        for tid, t in self.txns.items():
            if t is txn:
                self.state.persist.txn(tid, t.producer_id, t.epoch, t.timeout_ms)
                return

    def snapshot(self) -> dict[str, tuple[int, int, int]]:
        """Transactional id -> (producer id, epoch, timeout ms)."""
        return {tid: (t.producer_id, t.epoch, t.timeout_ms) for tid, t in self.txns.items()}

    def restore(self, tid: str, producer_id: int, epoch: int, timeout_ms: int) -> None:
        """Bring back a transactional id read from storage (its logs are loaded)."""
        txn = self.txns[tid] = _Txn(producer_id, epoch, timeout_ms)
        self._fence_everywhere(txn)

    def abort_recovered(self) -> None:
        """Abort the transactions the logs show open after a restart, bumping the epoch
        (as when Kafka's coordinator times such a transaction out)."""
        st = self.state
        by_pid = {t.producer_id: t for t in self.txns.values()}
        open_in: dict[int, list[tuple[str, int]]] = {}
        for topic in st.topics.values():
            for index, log in enumerate(topic.partitions):
                for pid in log.open_txns:
                    open_in.setdefault(pid, []).append((topic.name, index))
        for pid, partitions in sorted(open_in.items()):
            txn = by_pid.get(pid)
            if txn is not None:
                txn.partitions.update(partitions)
                self._complete(txn, commit=False, bump=True)
                continue
            # No transactional id known for it (its journal line was lost): end it anyway.
            for topic_name, index in partitions:
                log = st.topics[topic_name].partitions[index]
                log.write_marker(pid, log.producer_epoch(pid) + 1, commit=False,
                                 now_ms=st.now_ms())
