"""Producer: the blocking producer over the AsyncProducer core.

The record path does not cross threads: :meth:`Producer.send` and :meth:`Producer.produce`
append straight into the shared accumulator on the caller's thread (under its lock) and wake
the event-loop thread at most once per batch. Only rare slow paths (first use of a topic,
flush, close) hop to the loop thread.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any

from kontrakt._types import RecordMetadata
from kontrakt.clients._sync import BackgroundStart, LoopThread, wait_done
from kontrakt.clients.cluster import TopicInfo
from kontrakt.clients.producer._accumulator import WAITER
from kontrakt.clients.producer._batch import DeliveryCallback, ProducerBatch, StagedRun
from kontrakt.clients.producer._batch_api import produce_batch_sync
from kontrakt.clients.producer._core import NEED_METADATA, CallerThreads, HeadersLike
from kontrakt.clients.producer._future import RecordFuture, millis
from kontrakt.clients.producer._handover import HandOver
from kontrakt.clients.producer._producer import AsyncProducer
from kontrakt.errors import IllegalStateError, KafkaTimeoutError, TransactionAbortableError
from kontrakt.protocol.records import RecordBatchBuilder

_new_tuple = tuple.__new__
#: what closing may take beyond its timeout: stopping the I/O thread
_CLOSE_SLACK = 1.0

__all__ = ["Producer"]


class Producer:
    """The blocking Kafka producer; same options and behaviour as :class:`AsyncProducer`.

    Two styles:

    * ``send()`` returns a :class:`RecordFuture` (``result(timeout)``, ``done()``,
      ``add_done_callback`` -- the callbacks run on the producer's I/O thread);
    * confluent-style ``produce(..., on_delivery=cb)``: ``cb(err, metadata)`` runs on the
      caller's thread inside :meth:`poll` or :meth:`flush` (``err`` is None on success;
      ``metadata`` is a :class:`~kontrakt.RecordMetadata`, offset -1 on failure);
      :meth:`produce_batch` takes a list of such records at once.

    Args:
        config: Kafka property names to values.
        **kwargs: the same options in snake_case.

    The constructor returns at once: connecting, loading metadata and (idempotence) getting
    a producer id run in the background. The first call that needs them waits up to
    ``max.block.ms`` and raises what kept the producer from starting (e.g.
    NoBrokersAvailableError naming each broker tried and why); the next call tries again.

    A producer dropped without :meth:`close` is closed when it is garbage-collected (its
    buffered records get :data:`~kontrakt.clients._sync.UNCLOSED_CLOSE_TIMEOUT` seconds to
    be delivered), and a producer still open at interpreter exit is closed then, so that
    its records are delivered or, when they cannot be in that time, logged as lost (a
    warning naming how many) rather than silently dropped.

    Raises:
        ConfigError: bad options.

    Do not call it from inside a ``add_done_callback`` callback (that runs on the I/O
    thread): blocking calls there raise IllegalStateError.
    """

    #: The ``on_delivery`` option: produce()'s callback when it is given none.
    _on_delivery: DeliveryCallback | None = None

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self._thread = LoopThread("kontrakt-producer")
        # Not bound to self: the loop thread keeps the accumulator's callback alive, and
        # must not keep this object alive (see kontrakt.clients._sync).
        self._deliveries = _DeliveryQueue()
        #: the waker and hand-over between this producer's callers and its I/O thread
        self._handover = HandOver()
        try:
            self._async: AsyncProducer = self._thread.run(_build(config, kwargs))
        except BaseException:
            self._thread.stop()
            raise
        self._callers().bind(self._handover, self._deliveries.put)
        self.config = self._async.config
        self._on_delivery = self.config["on_delivery"]
        self._started = False
        self._starting = BackgroundStart(self._thread, self._async)
        self._thread.attach(self, self._async.close)
        self._starting.attempt()

    def _ensure_started(self) -> None:
        """Wait for the background start (see the class docstring).

        Raises:
            NoBrokersAvailableError: no broker reachable within ``max.block.ms``.
            KafkaTimeoutError: the start did not finish within ``max.block.ms``.
            IllegalStateError: closed, or called from the producer's I/O thread.
        """
        if self._started:
            return
        if self._thread.in_loop_thread():
            raise IllegalStateError(
                "a blocking Producer call was made from the producer's own I/O thread "
                "(e.g. inside a callback); use AsyncProducer there instead")
        if self._async.closed:
            raise IllegalStateError("the producer is closed")
        fut = self._starting.attempt()
        budget = self._async.start_budget
        # The start bounds itself by max.block.ms from when it began; this wait is only a
        # backstop. Its own errors (a KafkaTimeoutError too) propagate with their message.
        if not wait_done(fut, budget + 0.5):
            raise KafkaTimeoutError(
                f"the producer did not start within max.block.ms={budget * 1000:.0f}")
        try:
            fut.result()
        except concurrent.futures.CancelledError:
            raise IllegalStateError("the producer is closed") from None
        if self._async.closed:
            raise IllegalStateError("the producer is closed")
        self._started = True

    # --- sending ------------------------------------------------------------------------

    def _callers(self) -> CallerThreads:
        """The core's record path for this producer's threads (AsyncProducer.callers)."""
        callers = self._async.callers
        assert callers is not None  # built with _threaded
        return callers

    def _append(self, topic: str, value: Any, key: Any, partition: int | None,
                timestamp_ms: int | None, headers: HeadersLike,
                delivery: DeliveryCallback | None, urgent: bool = False) -> RecordFuture:
        side = self._async.callers
        assert side is not None
        try:
            res = side.append(topic, value, key, partition, timestamp_ms, headers, delivery,
                              urgent)
        except IllegalStateError:
            if side.started or self._async.closed:
                raise
            # Not started yet: wait for the background start (or raise what stops it).
            self._ensure_started()
            res = side.append(topic, value, key, partition, timestamp_ms, headers, delivery,
                              urgent)
        if type(res) is RecordFuture:
            return res
        deadline = time.monotonic() + side.max_block
        while type(res) is not RecordFuture:
            remaining = deadline - time.monotonic()
            if res is NEED_METADATA:
                self._thread.run(side.wait_metadata(topic, partition, max(remaining, 0.0)))
            else:
                side.wait_memory(deadline)
            side.check()
            res = side.append(topic, value, key, partition, timestamp_ms, headers, delivery,
                              urgent)
        return res

    def send(self, topic: str, value: bytes | None = None, key: bytes | None = None, *,
             partition: int | None = None, timestamp_ms: int | None = None,
             headers: HeadersLike = None) -> RecordFuture:
        """Queue a record; see :meth:`AsyncProducer.send` for arguments and errors.

        Returns:
            A :class:`RecordFuture`: ``result(timeout)`` blocks for the
            :class:`~kontrakt.RecordMetadata`.
        """
        # The fast path (see AsyncProducer.send): the record joins its topic's stage, under
        # the accumulator's lock since the I/O thread settles stages.
        if type(key) is bytes and type(value) is bytes and partition is None \
                and timestamp_ms is None and headers is None:
            offer = self._async.callers.fast_topics.get(topic)  # type: ignore[union-attr]
            if offer is not None:
                fut = offer(key, value, None)
                if fut is not None:
                    return fut
        return self._append(topic, value, key, partition, timestamp_ms, headers, None)

    def send_and_wait(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                      *, partition: int | None = None, timestamp_ms: int | None = None,
                      headers: HeadersLike = None,
                      timeout: float | None = None) -> RecordMetadata:
        """Send a record and block until it is acknowledged.

        Raises:
            Everything :meth:`send` raises, and the delivery error.
            KafkaTimeoutError: not resolved within ``timeout`` seconds.
        """
        fut = self._append(topic, value, key, partition, timestamp_ms, headers, None, WAITER)
        fut._head.wait(timeout, wake=True)
        return fut.result()

    def produce(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                partition: int | None = None, on_delivery: DeliveryCallback | None = None,
                timestamp: int | None = None, headers: HeadersLike = None, *,
                callback: DeliveryCallback | None = None) -> None:
        """confluent-kafka style send.

        Args:
            partition: a partition, or None (confluent's -1 also means "any").
            on_delivery: ``cb(err, metadata)``, run on this thread by :meth:`poll` /
                :meth:`flush` / :meth:`close`. ``callback`` is an alias. Default: the
                ``on_delivery`` option.
            timestamp: milliseconds since the epoch (0 or None: now).

        Raises:
            Like :meth:`send`. Unlike confluent-kafka (which raises BufferError at once), a
            full buffer blocks up to ``max.block.ms`` and then raises KafkaTimeoutError.
        """
        delivery = on_delivery or callback or self._on_delivery
        if partition is not None and partition < 0:
            partition = None
        if partition is None and type(key) is bytes and type(value) is bytes and \
                not timestamp and headers is None:
            # The fast path of send(): the record joins its topic's stage.
            offer = self._async.callers.fast_topics.get(topic)  # type: ignore[union-attr]
            if offer is not None and offer(key, value, delivery) is not None:
                return
        # Straight into the core's append (a frame less a record than through _append);
        # what it cannot take now (not started, a full buffer, metadata to wait for) goes
        # through _append, which waits for it and appends again.
        try:
            res = self._async.callers.append(  # type: ignore[union-attr]
                topic, value, key, partition, timestamp or None, headers, delivery)
        except IllegalStateError:
            res = None
        if type(res) is not RecordFuture:
            self._append(topic, value, key, partition, timestamp or None, headers, delivery)

    def produce_batch(self, topic: str, messages: list[dict[str, Any]], partition: int = -1,
                      on_delivery: DeliveryCallback | None = None) -> int:
        """confluent-kafka style batch send: :meth:`produce` of each message, in order, with
        the common message (only ``'value'`` and/or ``'key'``, bytes) staged a chunk at a
        time instead of one by one.

        Args:
            messages: a list of dicts with the optional fields ``'value'``, ``'key'``
                (bytes or None), ``'partition'`` (-1: any), ``'timestamp'`` (milliseconds;
                0: now), ``'callback'`` (this message's delivery callback) and -- unlike
                confluent-kafka, which drops them -- ``'headers'`` (as :meth:`produce`).
            partition: every message's partition when it names none (-1: the
                partitioner's choice).
            on_delivery: ``cb(err, metadata)`` for messages without a ``'callback'``, run
                by :meth:`poll` / :meth:`flush` as :meth:`produce`'s. Default: the
                ``on_delivery`` option.

        Returns:
            How many messages were queued. Each one that was not gets an ``'_error'`` field
            (the exception; removed from a message queued on a later call): a record too
            large for ``message.max.bytes``/``buffer.memory`` alone, or, from the first
            message that met it on, the buffer staying full for ``max.block.ms`` (as
            :meth:`produce` waits, this call blocks up to ``max.block.ms`` for room), no
            metadata for the topic within ``max.block.ms``, or the producer closing.

        Raises:
            InvalidMessageError: ``messages`` is not a list, or a message is not a dict,
                has an unknown field, or a field of the wrong type (str values too, as
                for :meth:`produce`); raised before any message is queued. It is also a
                TypeError, as confluent-kafka's.
            IllegalStateError / KafkaError / TransactionError: what :meth:`produce` raises
                for the producer's state (closed, failed, no transaction begun), before
                any message is queued.
        """
        return produce_batch_sync(self, topic, messages,
                                  partition if partition is not None and partition >= 0
                                  else None,
                                  on_delivery or self._on_delivery)

    def poll(self, timeout: float | None = 0.0) -> int:
        """Run the delivery callbacks of records resolved so far (on this thread).

        Args:
            timeout: seconds to wait for at least one resolved ``produce()`` record when
                none is ready (0: do not wait; None: wait until one is).

        Returns:
            How many callbacks ran.

        Raises:
            Whatever a callback raises; the callbacks after it run on the next call.
        """
        dq = self._deliveries
        if not dq.batches and timeout != 0:
            dq.ready.wait(timeout)
        dq.ready.clear()
        ran = 0
        q = dq.batches
        while q:
            batch = q.popleft()
            deliveries, batch.deliveries = batch.deliveries, None
            if not deliveries:
                continue
            err = batch.error
            # Each record's metadata made here rather than by fut.metadata(): this runs
            # once per produced record.
            topic, partition = batch.topic, batch.partition
            base = batch.base_offset if err is None else -1
            append_time = batch.log_append_time if err is None else -1
            done = 0
            try:
                for entry in deliveries:
                    done += 1
                    if type(entry) is StagedRun:
                        # Staged records: their callbacks, a run of the batch at a time.
                        ran += entry.deliver(err, topic, partition, base, append_time)
                        continue
                    cb, fut = entry  # type: ignore[misc]
                    ran += 1
                    # A record appended alone (or moved to a split batch's part).
                    cb(err, _new_tuple(RecordMetadata, (
                        topic, partition, base + fut._at if base >= 0 else -1,
                        append_time if append_time >= 0 else millis(fut._timestamp),
                        fut._ksize, fut._vsize)))
            except BaseException:
                # The callback's error goes to the caller; the batch's other records are
                # still delivered, by the next poll() (a run that raised, from its next
                # record on).
                entry = deliveries[done - 1]
                if type(entry) is StagedRun and entry.start < entry.end:
                    done -= 1
                if done < len(deliveries):
                    batch.deliveries = deliveries[done:]
                    q.appendleft(batch)
                raise
        return ran

    def flush(self, timeout: float | None = None) -> int:
        """Send everything buffered, wait until it is resolved, and run delivery callbacks.

        Returns:
            0 (nothing left), for confluent-kafka compatibility.

        Raises:
            KafkaTimeoutError: records still unresolved after ``timeout`` seconds.
        """
        self._ensure_started()
        try:
            self._thread.run(self._async.flush(timeout))
        finally:
            self.poll(0)
        return 0

    def stop(self) -> None:
        """aiokafka's name for :meth:`close`."""
        self.close()

    def close(self, timeout: float | None = None) -> None:
        """Flush (up to ``timeout``), fail what is left, run every pending delivery
        callback, and stop the I/O thread. Idempotent.

        Args:
            timeout: seconds the whole close may take, even with every broker gone (None:
                until every record is resolved, which ``delivery.timeout.ms`` bounds).
                Records still undelivered then fail, and a warning says how many.
        """
        if not self._thread.running:
            return
        self._starting.cancel()
        try:
            self._thread.run(self._async.close(timeout),
                             None if timeout is None else timeout + _CLOSE_SLACK)
        finally:
            self._thread.stop(_CLOSE_SLACK if timeout is not None else 5.0)
            self.poll(0)

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        """Records buffered or in flight (confluent-kafka's ``len(producer)``)."""
        return self._callers().pending()

    # --- transactions -------------------------------------------------------------------

    def init_transactions(self, timeout: float | None = None) -> None:
        """See :meth:`AsyncProducer.init_transactions` (the background start does it)."""
        self._ensure_started()
        self._thread.run(self._async.init_transactions(), timeout)

    def begin_transaction(self) -> None:
        """See :meth:`AsyncProducer.begin_transaction`."""
        self._ensure_started()
        self._thread.run(_call(self._async.begin_transaction))

    def send_offsets_to_transaction(self, offsets: Mapping[Any, Any], group_id: Any,
                                    timeout: float | None = None) -> None:
        """See :meth:`AsyncProducer.send_offsets_to_transaction`."""
        self._ensure_started()
        self._thread.run(self._async.send_offsets_to_transaction(offsets, group_id, timeout))

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush, commit, and run pending delivery callbacks; see
        :meth:`AsyncProducer.commit_transaction`."""
        self._ensure_started()
        try:
            self._thread.run(self._async.commit_transaction(timeout))
        finally:
            self.poll(0)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """See :meth:`AsyncProducer.abort_transaction` (a KafkaTimeoutError means: call it
        again, which completes the same abort); delivery callbacks of the aborted records
        run before it returns."""
        self._ensure_started()
        try:
            self._thread.run(self._async.abort_transaction(timeout))
        finally:
            self.poll(0)

    def purge(self, in_queue: bool = True, in_flight: bool = True,
              blocking: bool = True) -> None:
        """Fail buffered records at once (confluent-kafka's ``purge``); see
        :meth:`AsyncProducer.purge`. Their ``produce()`` callbacks run at the next
        :meth:`poll` or :meth:`flush`, as confluent-kafka's do.

        Args:
            blocking: False returns at once, the purge then runs on the I/O thread next.
        """
        if blocking:
            self._thread.run(_call(lambda: self._async.purge(in_queue, in_flight)))
        else:
            self._thread.loop.call_soon_threadsafe(self._async.purge, in_queue, in_flight)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """A transaction as a ``with`` block: begins it, commits when the block ends, aborts
        when it raises; see :meth:`AsyncProducer.transaction`. Delivery callbacks of its
        ``produce()`` records run before the block's commit or abort returns."""
        self._ensure_started()
        txn = self._callers().transaction()
        self.begin_transaction()
        try:
            yield
        except BaseException:
            if txn.state != "fatal":
                self.abort_transaction()
            raise
        try:
            self.commit_transaction()
        except TransactionAbortableError as failed:
            try:
                self.abort_transaction()
            except KafkaTimeoutError:
                raise failed  # noqa: B904 (keeps its own cause; see AsyncProducer.transaction)
            raise

    # --- the rest -----------------------------------------------------------------------

    def metrics(self) -> dict[str, float]:
        """See :meth:`AsyncProducer.metrics`."""
        return self._async.metrics()

    def list_topics(self, topic: str | None = None,
                    timeout: float | None = None) -> dict[str, TopicInfo]:
        """See :meth:`AsyncProducer.list_topics`; ``timeout`` bounds the wait (None: the
        client's request timeout does)."""
        self._ensure_started()
        return self._thread.run(self._async.list_topics(topic), timeout)

    def cluster_id(self, timeout: float | None = None) -> str | None:
        """The cluster's id from metadata (confluent-kafka's), waiting for the producer's
        start first.

        Args:
            timeout: seconds to wait for the start (None or negative, confluent-kafka's
                -1: ``max.block.ms`` bounds it); the start goes on after a timeout.

        Returns:
            The id; None when the brokers report none (Metadata before v2, KIP-78).

        Raises:
            KafkaTimeoutError: not started within ``timeout``.
            NoBrokersAvailableError: the start found no broker.
            IllegalStateError: the producer is closed.
        """
        # A bounded wait for the background start; _ensure_started reports its outcome
        # (and the errors of a closed producer or of a call from the I/O thread).
        if not (timeout is None or timeout < 0 or self._started or self._async.closed
                or self._thread.in_loop_thread()
                or wait_done(self._starting.attempt(), timeout)):
            raise KafkaTimeoutError(
                f"cluster_id(): the producer did not start within {timeout}s")
        self._ensure_started()
        return self._thread.run(self._async.cluster_id(timeout))

    def bootstrap_connected(self) -> bool:
        """See :meth:`AsyncProducer.bootstrap_connected`."""
        if self._async.closed or not self._thread.running:
            return False

        async def on_loop() -> bool:  # the connections change on the loop
            return self._async.bootstrap_connected()
        return self._thread.run(on_loop())

    def set_sasl_credentials(self, username: str, password: str) -> None:
        """See :meth:`AsyncProducer.set_sasl_credentials`; safe from any thread."""
        self._async.set_sasl_credentials(username, password)

    def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition ids; see :meth:`AsyncProducer.partitions_for`."""
        self._ensure_started()
        return self._thread.run(self._async.partitions_for(topic))

    def create_batch(self) -> RecordBatchBuilder:
        """See :meth:`AsyncProducer.create_batch`."""
        return self._async.create_batch()

    def send_batch(self, batch: RecordBatchBuilder, topic: str, *,
                   partition: int) -> RecordFuture:
        """See :meth:`AsyncProducer.send_batch`."""
        self._ensure_started()
        return self._thread.run(self._async.send_batch(batch, topic, partition=partition))

    @property
    def closed(self) -> bool:
        return self._async.closed

    @property
    def producer_id_and_epoch(self) -> tuple[int, int]:
        """See :attr:`AsyncProducer.producer_id_and_epoch`."""
        return self._async.producer_id_and_epoch


class _DeliveryQueue:
    """Batches whose ``produce()`` callbacks are due, handed from the I/O thread to
    :meth:`Producer.poll`."""

    __slots__ = ("batches", "ready")

    def __init__(self) -> None:
        self.batches: deque[ProducerBatch] = deque()
        self.ready = threading.Event()

    def put(self, batch: ProducerBatch) -> None:
        # Called on the loop thread when a batch with on_delivery callbacks completes.
        self.batches.append(batch)
        self.ready.set()


async def _build(config: Mapping[str, Any] | None, kwargs: dict[str, Any]) -> AsyncProducer:
    if "_threaded" in kwargs:
        raise IllegalStateError("_threaded is internal")
    return AsyncProducer(config, _threaded=True, **kwargs)


async def _call(fn: Any) -> Any:
    # Run a plain method on the loop thread (the producer's state lives there).
    return fn()
