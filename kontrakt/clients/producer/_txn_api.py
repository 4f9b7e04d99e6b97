"""The producers' transaction API and flush, over the shared core (see ``_core.py``).

:class:`TransactionalCore` is the part of :class:`~kontrakt.AsyncProducer` that waits for
batches: ``flush`` and the transaction calls (begin, commit, abort, offsets, the
``transaction()`` block); the sync Producer runs them on its loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from kontrakt._types import OffsetAndMetadata, TopicPartition
from kontrakt.clients.producer._batch import ProducerBatch
from kontrakt.clients.producer._core import _ProducerCore
from kontrakt.clients.producer._transactions import TransactionManager
from kontrakt.errors import IllegalStateError, KafkaTimeoutError, TransactionAbortableError

__all__ = ["TransactionalCore"]


class TransactionalCore(_ProducerCore):
    """Flush and transactions (see the module docstring)."""

    async def flush(self, timeout: float | None = None) -> None:
        """Send every buffered record now and wait until all are resolved.

        Args:
            timeout: seconds; None waits as long as delivery takes.

        Raises:
            KafkaTimeoutError: records still unresolved after ``timeout``.
        """
        self._check(sending=False)
        acc = self._acc
        with acc.lock:
            acc.settle_all_locked()
            acc.flushing += 1
            pending = list(acc.incomplete)
        try:
            self._wakeup(True)
            await self._wait_batches(pending, timeout)
        finally:
            with acc.lock:
                acc.flushing -= 1

    async def _wait_batches(self, batches: list[ProducerBatch], timeout: float | None) -> None:
        # Runs on the producer's own loop, the one its batches complete on.
        deadline = None if timeout is None else time.monotonic() + timeout
        for b in batches:
            if b.done:
                continue
            if deadline is None:
                await b.wait_async(on_own_loop=True)
                continue
            left = deadline - time.monotonic()
            try:
                await asyncio.wait_for(b.wait_async(on_own_loop=True), max(left, 0.0))
            except (asyncio.TimeoutError, TimeoutError):
                remaining = sum(1 for x in batches if not x.done)
                raise KafkaTimeoutError(
                    f"{remaining} batch(es) still undelivered after {timeout}s") from None

    # --- transactions -------------------------------------------------------------------

    def _transaction(self) -> TransactionManager:
        if self._closed:
            raise IllegalStateError("the producer is closed")
        if self._txn is None:
            raise IllegalStateError("transactions need the transactional.id option "
                                    "(and a started producer)")
        return self._txn

    async def init_transactions(self, timeout: float | None = None) -> None:
        """Nothing to do: :meth:`start` registers the transactional id (InitProducerId at
        its coordinator, which also ends a transaction an older instance left open). Kept
        for symmetry with the Java and confluent-kafka clients (``timeout`` too: there is
        nothing to wait for).

        Raises:
            IllegalStateError: no ``transactional.id``.
        """
        self._transaction()

    def begin_transaction(self) -> None:
        """Start a transaction: records sent until commit/abort belong to it.

        Raises:
            IllegalStateError: no ``transactional.id``, or a transaction is already open.
            TransactionAbortableError / TransactionFatalError: the producer is in an error
                state (abort first / close it).
        """
        self._transaction().begin()
        self._ok = self._sender is not None and self._sender.error is None

    async def send_offsets_to_transaction(
            self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
            group_id: str | Any, timeout: float | None = None) -> None:
        """Commit consumed offsets as part of the transaction (consume-transform-produce).

        Args:
            offsets: the next offsets to read, per partition.
            group_id: the consumer group id, or its group metadata (anything with
                ``group_id``, ``generation_id``, ``member_id``, ``group_instance_id``).
            timeout: seconds for both coordinator requests (AddOffsetsToTxn, then
                TxnOffsetCommit) with their retries; None or more than request.timeout.ms
                means request.timeout.ms.

        Raises:
            TransactionAbortableError: the offsets could not be added (abort next), also
                when ``timeout`` ran out (its cause is a KafkaTimeoutError).
            TransactionFatalError: fenced.
        """
        txn = self._transaction()
        if isinstance(group_id, str):
            await txn.send_offsets(offsets, group_id, timeout=timeout)
        else:
            await txn.send_offsets(
                offsets, group_id.group_id, generation_id=getattr(group_id, "generation_id", -1),
                member_id=getattr(group_id, "member_id", ""),
                group_instance_id=getattr(group_id, "group_instance_id", None),
                timeout=timeout)

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """Send everything of the transaction, then commit it (EndTxn).

        Args:
            timeout: seconds to wait for the records (None: as long as delivery takes).

        Raises:
            TransactionAbortableError: a record or the commit failed: call
                :meth:`abort_transaction`.
            TransactionFatalError: fenced by a newer producer with the same id: close.
            KafkaTimeoutError: the records were not resolved within ``timeout``, or the
                coordinator did not answer the commit, which it may have done: call
                commit_transaction() again (abort_transaction() and sends are refused
                with IllegalStateError until it succeeds).
        """
        txn = self._transaction()
        if not txn.committing:  # (a retried commit whose EndTxn got no answer goes on)
            txn.check_send()
            await self.flush(timeout)
            txn.check_send()  # a record of the transaction failed: abort instead
            self._stop_fast_paths()
        try:
            await txn.end(True)
        except BaseException:
            if txn.state == "in_transaction" and not txn.committing:
                txn.state = "abortable"
            raise

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the transaction: records not sent yet fail with TransactionAbortableError,
        records in flight are awaited, then the coordinator aborts (EndTxn).

        Args:
            timeout: seconds for the whole abort (the records in flight, then EndTxn with
                its retries); None waits until it is done or request.timeout.ms passes
                without an answer to EndTxn.

        Raises:
            IllegalStateError: no transaction is open, or a commit of it got no answer
                (retry the commit instead).
            KafkaTimeoutError: the abort did not complete within ``timeout``, or the
                coordinator did not answer EndTxn. The abort goes on: call
                abort_transaction() again, which completes this same abort (awaiting the
                EndTxn still on its way rather than sending another). Until one returns,
                begin_transaction(), sends and commit_transaction() raise
                IllegalStateError (as in the Java client).
            TransactionFatalError: fenced: close the producer.
        """
        txn = self._transaction()
        if not txn.aborting:
            if txn.state not in ("in_transaction", "abortable") or txn.committing:
                txn.check_send()
            self._stop_fast_paths()
            sender = self._sender
            assert sender is not None
            for b in self._acc.abort_all():
                sender._fail(b, TransactionAbortableError("the transaction was aborted"))
            txn.aborting = True
        elif txn.state == "fatal":
            txn.aborting = False
            txn.check_send()  # raises TransactionFatalError
        task = txn.abort_task
        if task is None:
            task = txn.abort_task = asyncio.get_running_loop().create_task(
                self._finish_abort(txn))
            # (its error is raised by the call awaiting it; none may be, e.g. at a close)
            task.add_done_callback(_retrieve)
        try:
            # Shielded: a call that times out (or is cancelled) leaves the abort running
            # for the retry to await.
            await asyncio.wait_for(asyncio.shield(task), timeout)
        except BaseException as exc:
            if not task.done():
                if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
                    raise KafkaTimeoutError(
                        f"the transaction was not aborted within {timeout}s; the abort "
                        f"goes on: retry abort_transaction()") from None
                raise
            if task.cancelled() or task.exception() is not None:
                # It ended with an error of its own: the next call starts it again (fatal
                # errors excepted: check_send() raises them from now on).
                txn.abort_task = None
                if txn.state == "fatal":
                    txn.aborting = False
                raise
        txn.abort_task = None
        txn.aborting = False

    async def _finish_abort(self, txn: TransactionManager) -> None:
        """The part of an abort that waits: the records in flight, then EndTxn."""
        with self._acc.lock:
            pending = list(self._acc.incomplete)
        await self._wait_batches(pending, None)
        await txn.end(False)

    def purge(self, in_queue: bool = True, in_flight: bool = True) -> int:
        """Fail buffered records at once instead of delivering them (confluent-kafka's
        ``purge``): their futures and callbacks get a ProduceError saying they were purged.

        Args:
            in_queue: records not sent yet (still in batches or staged).
            in_flight: records of requests on their way; the broker may still write them,
                so only for records whose loss or duplication is acceptable. An idempotent
                producer takes a new epoch before its next records.

        Returns:
            How many records were purged.

        In a transaction, a purge makes the transaction abortable (abort it next).
        """
        if self._sender is None:
            return 0
        return self._sender.purge(in_queue, in_flight)

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        """A transaction as an ``async with`` block (aiokafka's ``transaction()``)::

            async with producer.transaction():
                await producer.send("orders", b"...")
                await producer.send_offsets_to_transaction(offsets, group_id)

        Begins the transaction on entry and commits it when the block ends. When the block
        raises, the transaction is aborted and the exception goes on (unless the producer
        is fenced, when there is nothing to abort). When the commit fails with
        TransactionAbortableError (a record of it failed), the transaction is aborted
        before that error is raised, so the producer is ready for the next one; if that
        abort does not complete in time, the error is raised all the same and the abort
        goes on: :meth:`abort_transaction` completes it (begin_transaction() refuses until
        then).

        Raises:
            IllegalStateError: no ``transactional.id``, or a transaction is already open.
            TransactionAbortableError / TransactionFatalError: as
                :meth:`commit_transaction` and :meth:`abort_transaction` raise them.
            KafkaTimeoutError: the commit's outcome is unknown (call
                :meth:`commit_transaction` again), or the abort after the block's own
                exception did not complete in time (call :meth:`abort_transaction`).
        """
        txn = self._transaction()
        self.begin_transaction()
        try:
            yield
        except BaseException:
            if txn.state != "fatal":
                await self.abort_transaction()
            raise
        try:
            await self.commit_transaction()
        except TransactionAbortableError as failed:
            try:
                await self.abort_transaction()
            except KafkaTimeoutError:
                # The abort goes on. The commit's error still says what to do next (abort:
                # abort_transaction() completes this abort), where a KafkaTimeoutError
                # from the block would read as the commit's, to be retried. Its cause
                # stays the broker's error; the timeout is its context.
                raise failed  # noqa: B904
            raise


def _retrieve(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()
