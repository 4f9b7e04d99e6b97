"""Transactions for the producer (KIP-98): the transaction coordinator's side of the protocol.

States: ``ready`` (initialised, no transaction), ``in_transaction``, ``abortable`` (a send or
offset commit of the current transaction failed: only abort is allowed), ``fatal`` (fenced by
a newer producer with the same transactional id, or a non-recoverable error). Two flags
refuse everything but a retry of the call that left them: ``committing`` (an EndTxn(commit)
got no answer) and ``aborting`` (an abort_transaction() did not complete).

* The transactional id is bound to a producer id and epoch by InitProducerId at the
  transaction coordinator (which also aborts any transaction an older instance left open).
* A partition must be added to the transaction (AddPartitionsToTxn, v3 and below: the form
  clients use) before a batch goes to it; the sender holds such batches back and asks this
  manager to add their partitions.
* ``send_offsets_to_transaction``: AddOffsetsToTxn at the transaction coordinator, then
  TxnOffsetCommit at the group's coordinator.
* ``commit`` / ``abort``: EndTxn once every batch of the transaction is resolved.

Kontrakt speaks transaction version 1 (the protocol above), whatever the cluster finalizes
as ``transaction.version``. Kafka 4 keys transaction version 2 (KIP-890 part 2) on request
versions, not only on that feature: an EndTxn v5+ makes the coordinator bump the producer
epoch at every commit or abort and answer the new one (which the client must then use), a
transactional Produce v12+ adds its partition to the transaction implicitly, and a
TxnOffsetCommit v5+ stands in for AddOffsetsToTxn. A producer that negotiated those versions
but ran this protocol would be fenced at its next transaction, its epoch being stale. So, as
the Java client does while ``transaction.version`` < 2 (each request's
``LAST_STABLE_VERSION_BEFORE_TRANSACTION_V2``), a transactional producer caps EndTxn and
TxnOffsetCommit at v4 and Produce at v11; idempotent and plain producers are not capped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from kontrakt._types import OffsetAndMetadata, TopicPartition
from kontrakt.clients.client import AsyncKafkaClient, Backoff
from kontrakt.clients.producer._idempotence import IdempotenceState
from kontrakt.errors import (
    BrokerResponseError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
    TransactionAbortableError,
    TransactionFatalError,
)
from kontrakt.protocol.errors import for_code
from kontrakt.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    TxnOffsetCommitRequest,
)

__all__ = ["END_TXN_MAX_VERSION", "PRODUCE_MAX_VERSION", "TXN_OFFSET_COMMIT_MAX_VERSION",
           "TransactionManager"]

log = logging.getLogger("kontrakt.producer")

_COORDINATOR_MOVED = {15, 16}  # COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
_RETRY = {14, 15, 16, 51, 55}  # + LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS, NOT_ATTEMPTED
_FATAL = {47, 48, 49, 53, 90}  # bad epoch, bad state, bad id mapping, id auth, fenced
#: TxnOffsetCommit's per-partition codes the Java client retries: the coordinator moved or
#: timed out (looked up again), loading, unknown partition
_OFFSETS_LOOKUP = {7, 15, 16}
_OFFSETS_RETRY = _OFFSETS_LOOKUP | {3, 14}
_TOPIC = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
#: The highest versions of transaction version 1 (see the module doc): the next version of
#: each is transaction version 2's
END_TXN_MAX_VERSION = 4
TXN_OFFSET_COMMIT_MAX_VERSION = 4
PRODUCE_MAX_VERSION = 11
_COMMITTING = ("a commit_transaction() of this transaction ended without an answer from the "
               "coordinator, which may have committed it: retry commit_transaction()")
_ABORTING = ("an abort_transaction() of this transaction did not complete (it timed out, or "
             "the coordinator did not answer): retry abort_transaction()")


class TransactionManager:
    """Transaction state of one transactional producer (on the event loop)."""

    def __init__(self, client: AsyncKafkaClient, idem: IdempotenceState, *,
                 request_timeout: float, retry_backoff: float, retry_backoff_max: float,
                 wake: Callable[[], None]) -> None:
        assert idem.transactional_id is not None
        self.client = client
        self.idem = idem
        self.transactional_id: str = idem.transactional_id
        self.request_timeout = request_timeout
        self.retry_backoff = retry_backoff
        self.retry_backoff_max = retry_backoff_max
        self.wake = wake
        self.state = "ready"
        self.error: BaseException | None = None
        self.added: set[tuple[str, int]] = set()
        self.pending: set[tuple[str, int]] = set()
        self.offsets_added = False
        #: an EndTxn(commit) got no answer: the coordinator may have committed, so only a
        #: retried commit may follow
        self.committing = False
        #: an abort_transaction() did not complete: only a retried abort may follow (it
        #: awaits ``abort_task`` when that is still running rather than starting another)
        self.aborting = False
        self.abort_task: asyncio.Task[None] | None = None
        self._adding: asyncio.Task[None] | None = None
        #: called when the state leaves ``in_transaction`` on its own (a failure)
        self.on_leave: Callable[[], None] | None = None

    # --- state ----------------------------------------------------------------------------

    def check_send(self) -> None:
        """Raise unless records may be sent now."""
        if self.state == "in_transaction" and not (self.committing or self.aborting):
            return
        if self.state == "fatal":
            raise TransactionFatalError(f"the transactional producer failed: {self.error}")
        if self.committing:
            raise IllegalStateError(_COMMITTING)
        if self.aborting:
            raise IllegalStateError(_ABORTING)
        if self.state == "abortable":
            raise TransactionAbortableError(
                f"the transaction failed and must be aborted: {self.error}")
        raise IllegalStateError("a transactional producer sends only inside a transaction "
                                "(call begin_transaction() first)")

    def begin(self) -> None:
        if self.state != "ready" or self.aborting:
            self.check_send()  # raises the matching error
            raise IllegalStateError("a transaction is already open")
        self.state = "in_transaction"
        self.added.clear()
        self.offsets_added = False

    def batch_failed(self, error: BaseException) -> None:
        """A batch of the current transaction failed for good: only abort can follow."""
        if self.state == "in_transaction":
            self.state = "abortable"
            self.error = error
            if self.on_leave is not None:
                self.on_leave()

    def fatal(self, error: BaseException) -> None:
        self.state = "fatal"
        self.error = error
        if self.on_leave is not None:
            self.on_leave()

    def may_bump(self) -> bool:
        """Whether the producer may take a new epoch now: not while the current transaction
        is known to the coordinator (InitProducerId would abort it there, and its EndTxn
        must go out under the epoch its records carry)."""
        return not (self.added or self.offsets_added or
                    (self._adding is not None and not self._adding.done()))

    # --- partitions (called by the sender) -------------------------------------------------

    def partition_ready(self, tp: tuple[str, int]) -> bool:
        """Whether batches may go to ``tp`` (added to the transaction); otherwise queue the
        partition for AddPartitionsToTxn."""
        if tp in self.added:
            return True
        self.pending.add(tp)
        return False

    def add_pending(self) -> None:
        """Start adding the queued partitions (one request at a time)."""
        if self.pending and (self._adding is None or self._adding.done()) \
                and self.state == "in_transaction" and not self.idem.need_bump:
            self._adding = asyncio.get_running_loop().create_task(self._add_partitions())

    async def _add_partitions(self) -> None:
        while self.pending and self.state == "in_transaction":
            tps = sorted(self.pending)
            by_topic: dict[str, list[int]] = {}
            for topic, part in tps:
                by_topic.setdefault(topic, []).append(part)
            idem = self.idem
            req = AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=self.transactional_id,
                v3_and_below_producer_id=idem.producer_id,
                v3_and_below_producer_epoch=idem.producer_epoch,
                v3_and_below_topics=[_TOPIC(name=t, partitions=p) for t, p in by_topic.items()])
            try:
                resp = await self._coordinator_request(req, max_version=3)
            except BaseException as exc:
                self._failed(exc)
                return
            errors: dict[int, list[tuple[str, int]]] = {}
            for t in resp.results_by_topic_v3_and_below:
                for r in t.results_by_partition:
                    tp = (t.name, r.partition_index)
                    if r.partition_error_code == 0:
                        self.added.add(tp)
                        self.pending.discard(tp)
                    else:
                        errors.setdefault(r.partition_error_code, []).append(tp)
            retriable = {c for c in errors if c in _RETRY}
            for code in set(errors) - retriable:
                err = for_code(code)(f"AddPartitionsToTxn {errors[code]}")
                self._failed(err)
                return
            if retriable:
                if retriable & _COORDINATOR_MOVED:
                    self.client.forget_coordinator(self.transactional_id, "transaction")
                await asyncio.sleep(self.retry_backoff)
            self.wake()

    def _failed(self, exc: BaseException) -> None:
        if isinstance(exc, BrokerResponseError) and exc.code in _FATAL:
            self.fatal(exc)
        else:
            self.batch_failed(exc)
        self.wake()

    # --- coordinator requests --------------------------------------------------------------

    async def _coordinator_request(self, req: Any, *, max_version: int | None = None,
                                   group: str | None = None,
                                   deadline: float | None = None) -> Any:
        """Send ``req`` to the transaction (or ``group``) coordinator, retrying connection
        failures and coordinator moves until request.timeout.ms (or the earlier monotonic
        ``deadline``). Top-level error codes are raised (retriable ones retried);
        per-partition codes are returned."""
        key, key_type = (group, "group") if group is not None else (
            self.transactional_id, "transaction")
        limit = time.monotonic() + self.request_timeout
        deadline = limit if deadline is None else min(deadline, limit)
        backoff = Backoff(self.retry_backoff, self.retry_backoff_max)
        while True:
            try:
                node = await self.client.coordinator(key, key_type)
                conn = await self.client.connection(node)
                version = conn.negotiate(type(req))
                if max_version is not None:
                    version = min(version, max_version)
                resp = await conn.send(req, version=version,
                                       timeout=max(0.001, deadline - time.monotonic()))
                code = getattr(resp, "error_code", 0) or 0
                if code == 0:
                    return resp
                err: BaseException = for_code(code)(f"{type(req).API_NAME} ({key})")
                if code not in _RETRY:
                    raise err
                if code in _COORDINATOR_MOVED:
                    self.client.forget_coordinator(key, key_type)
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                self.client.forget_coordinator(key, key_type)
                err = exc
            except BrokerResponseError as exc:
                if not exc.retriable:
                    raise
                self.client.forget_coordinator(key, key_type)
                err = exc
            delay = backoff.next()
            if time.monotonic() + delay >= deadline:
                bound = "request.timeout.ms" if deadline == limit else "the call's timeout"
                raise KafkaTimeoutError(f"{type(req).API_NAME} did not succeed within "
                                        f"{bound}: {err}")
            await asyncio.sleep(delay)

    async def send_offsets(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
                           group_id: str, *, generation_id: int = -1, member_id: str = "",
                           group_instance_id: str | None = None,
                           timeout: float | None = None) -> None:
        """Add consumed offsets to the transaction (committed with it), both requests
        within ``timeout`` seconds when given."""
        self.check_send()
        idem = self.idem
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            # The epoch bump after an aborted transaction (the sender's) comes first.
            limit = time.monotonic() + self.request_timeout
            while idem.need_bump and self.may_bump():
                self.check_send()  # (the bump failed for good: the producer is fatal)
                if time.monotonic() >= min(limit, deadline or limit):
                    raise KafkaTimeoutError("the producer got no new epoch in time")
                self.wake()
                await asyncio.sleep(self.retry_backoff)
            await self._coordinator_request(AddOffsetsToTxnRequest(
                transactional_id=self.transactional_id, producer_id=idem.producer_id,
                producer_epoch=idem.producer_epoch, group_id=group_id), deadline=deadline)
            self.offsets_added = True
            by_topic: dict[str, list[Any]] = {}
            for tp, om in offsets.items():
                if isinstance(om, int):
                    om = OffsetAndMetadata(om)
                by_topic.setdefault(tp.topic, []).append(
                    TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
                    .TxnOffsetCommitRequestPartition(
                        partition_index=tp.partition, committed_offset=om.offset,
                        committed_leader_epoch=om.leader_epoch,
                        committed_metadata=om.metadata))
            limit = time.monotonic() + self.request_timeout
            end = limit if deadline is None else min(deadline, limit)
            backoff = Backoff(self.retry_backoff, self.retry_backoff_max)
            while by_topic:
                req = TxnOffsetCommitRequest(
                    transactional_id=self.transactional_id, group_id=group_id,
                    producer_id=idem.producer_id, producer_epoch=idem.producer_epoch,
                    generation_id=generation_id, member_id=member_id,
                    group_instance_id=group_instance_id,
                    topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(
                        name=t, partitions=p) for t, p in by_topic.items()])
                resp = await self._coordinator_request(
                    req, max_version=TXN_OFFSET_COMMIT_MAX_VERSION, group=group_id,
                    deadline=end)
                # Its errors are per partition only: the retriable ones are sent again (the
                # partitions that succeeded are not).
                again: dict[str, list[Any]] = {}
                err: BaseException | None = None
                for t in resp.topics:
                    sent = {p.partition_index: p for p in by_topic.get(t.name, [])}
                    for p in t.partitions:
                        if not p.error_code:
                            continue
                        err = for_code(p.error_code)(
                            f"TxnOffsetCommit {t.name}-{p.partition_index} (group {group_id})")
                        if p.error_code not in _OFFSETS_RETRY:
                            raise err
                        if p.error_code in _OFFSETS_LOOKUP:
                            self.client.forget_coordinator(group_id, "group")
                        if p.partition_index in sent:
                            again.setdefault(t.name, []).append(sent[p.partition_index])
                by_topic = again
                if by_topic:
                    delay = backoff.next()
                    if time.monotonic() + delay >= end:
                        raise KafkaTimeoutError(
                            f"TxnOffsetCommit did not succeed in time: {err}")
                    await asyncio.sleep(delay)
        except BaseException as exc:
            self._failed(exc)
            raise self._as_txn_error(exc) from exc

    async def end(self, commit: bool) -> None:
        """EndTxn (commit or abort); the caller has resolved every batch first."""
        idem = self.idem
        if self.state == "fatal":
            raise TransactionFatalError(f"the transactional producer failed: {self.error}")
        if self._adding is not None and not self._adding.done():
            self._adding.cancel()
        self.pending.clear()
        # Nothing reached the coordinator: there is no transaction to end (as the Java
        # client does).
        if self.added or self.offsets_added:
            try:
                await self._coordinator_request(EndTxnRequest(
                    transactional_id=self.transactional_id, producer_id=idem.producer_id,
                    producer_epoch=idem.producer_epoch, committed=commit),
                    max_version=END_TXN_MAX_VERSION)
            except BaseException as exc:
                if isinstance(exc, BrokerResponseError) and exc.code in _FATAL:
                    self.fatal(exc)
                elif commit and isinstance(exc, (KafkaTimeoutError, KafkaConnectionError)):
                    # No answer: the coordinator may have committed. Aborting now would
                    # be refused at Kafka (or, worse, accepted and reported while the
                    # records are committed): the commit is to be retried (as in the Java
                    # client).
                    self.committing = True
                    raise KafkaTimeoutError(
                        f"the commit's outcome is unknown ({exc}): retry "
                        f"commit_transaction()") from exc
                elif isinstance(exc, (KafkaTimeoutError, KafkaConnectionError)):
                    # No answer to the abort: nothing about the transaction failed, it is
                    # only not ended yet; the caller retries the abort (as in the Java
                    # client), which sends EndTxn again.
                    raise KafkaTimeoutError(
                        f"the coordinator did not answer the abort ({exc}): retry "
                        f"abort_transaction()") from exc
                raise self._as_txn_error(exc) from exc
        self.committing = False
        self.state = "ready"
        self.error = None
        self.added.clear()
        self.offsets_added = False
        if idem.need_bump:
            self.wake()  # the sender takes the new epoch now

    def cancel_abort(self) -> None:
        """Stop an abort left running by a timed-out abort_transaction() (at close)."""
        task, self.abort_task = self.abort_task, None
        if task is not None and not task.done():
            task.cancel()

    def _as_txn_error(self, exc: BaseException) -> BaseException:
        if self.state == "fatal":
            return TransactionFatalError(f"the transactional producer failed: {exc}")
        return TransactionAbortableError(f"the transaction failed and must be aborted: {exc}")
