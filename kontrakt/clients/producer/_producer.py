"""AsyncProducer: the asyncio producer; the sync :class:`Producer` runs the same core."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from kontrakt._types import RecordMetadata
from kontrakt.clients._peer_calls import bootstrap_connected, cluster_id, set_sasl_credentials
from kontrakt.clients._wait import wait_event, wait_within
from kontrakt.clients.cluster import TopicInfo
from kontrakt.clients.producer._batch import DeliveryCallback, ProducerBatch
from kontrakt.clients.producer._batch_api import produce_batch_async
from kontrakt.clients.producer._core import NEED_METADATA, CallerThreads, HeadersLike
from kontrakt.clients.producer._core import _TopicParts as _TopicParts  # tests build topics
from kontrakt.clients.producer._future import RecordFuture, new_future
from kontrakt.clients.producer._sender import Sender
from kontrakt.clients.producer._transactions import TransactionManager
from kontrakt.clients.producer._txn_api import TransactionalCore
from kontrakt.errors import (
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
)
from kontrakt.protocol.records import RecordBatchBuilder

__all__ = ["NEED_METADATA", "AsyncProducer", "HeadersLike"]

log = logging.getLogger("kontrakt.producer")

_T = TypeVar("_T")


async def _wait_for(fut: RecordFuture) -> RecordMetadata:
    return await fut


async def _bounded(coro: Coroutine[Any, Any, _T], timeout: float, what: str) -> _T:
    """``coro``'s result within ``timeout`` seconds, or KafkaTimeoutError saying ``what``.

    A KafkaTimeoutError of ``coro``'s own goes out as it is: on Python >= 3.11 it is also
    the builtin TimeoutError that asyncio's timeouts raise, and must not be mistaken for
    this wait's.
    """
    try:
        return await wait_within(coro, timeout)
    except KafkaTimeoutError:
        raise
    except asyncio.TimeoutError:
        raise KafkaTimeoutError(f"{what} (timeout {timeout}s)") from None


class AsyncProducer(TransactionalCore):
    """The asyncio Kafka producer.

    Records are appended to per-partition batches (``batch.size``, ``linger.ms``) and sent by
    a background task, one Produce request per broker, up to
    ``max.in.flight.requests.per.connection`` at a time. Keyed records for the default
    partitioner are partitioned in bulk: they wait briefly in their topic's stage (up to
    ~128 KiB of records, at most ``linger.ms``) and are hashed together, in send order;
    awaiting a record's future, flushing, or sending any other record to the topic places
    them at once. Idempotence is on by default (Java
    client rules); failed sends are retried until ``delivery.timeout.ms``.

    Args:
        config: Kafka property names to values (``{"bootstrap.servers": ..., "acks": "all"}``).
        **kwargs: the same options in snake_case (``linger_ms=5``).

    Options (besides the network options of :class:`~kontrakt.AsyncKafkaClient`):
    ``acks`` (0, 1, all/-1; default all), ``batch.size`` (131072), ``linger.ms`` (5),
    ``buffer.memory`` (32 MiB), ``max.block.ms`` (60000), ``retries``,
    ``delivery.timeout.ms`` (120000), ``compression.type`` (none/gzip/snappy/lz4/zstd),
    ``compression.level``, ``message.max.bytes`` (1048576), ``enable.idempotence``
    (default on unless acks or max.in.flight rule it out; explicitly on with those is a
    ConfigError), ``partitioner`` ('default', 'murmur2_random', 'round_robin' or a callable
    ``(key, all_partitions, available_partitions) -> partition``), ``transactional.id``
    (makes it transactional: :meth:`begin_transaction`, :meth:`commit_transaction`,
    :meth:`abort_transaction`, :meth:`send_offsets_to_transaction`), ``transaction.timeout.ms``.

    Futures: :meth:`send` returns a :class:`RecordFuture` per record (a small handle onto its
    batch's outcome, resolved exactly once, including when the producer closes); batches
    someone waits on are sent at once instead of lingering. :meth:`produce_batch` queues a
    list of records at once (confluent-kafka's), with no future a record: the fastest way in
    when records come in lists. Logging goes to ``kontrakt.producer``.

    Raises:
        ConfigError: unknown option, bad value, or conflicting options.

    Example::

        async with AsyncProducer(bootstrap_servers="127.0.0.1:9092") as producer:
            fut = await producer.send("events", b"value", key=b"key")
            metadata = await fut
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        threaded = bool(kwargs.pop("_threaded", False))
        super().__init__(config, kwargs, threaded)
        self._client.owner = "Producer" if threaded else "AsyncProducer"
        #: a sync Producer's one way into this core (None for an AsyncProducer's own use)
        self.callers = CallerThreads(self) if threaded else None
        self._memory_event: asyncio.Event | None = None

    # --- lifecycle ----------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    @property
    def producer_id_and_epoch(self) -> tuple[int, int]:
        """The (producer id, epoch) the broker gave this idempotent or transactional
        producer; (-1, -1) before it started or without idempotence. A transaction left
        open by a producer that is gone can be ended with them (EndTxn), as a sink that
        commits its tasks' transactions elsewhere does."""
        idem = self._idem
        return (-1, -1) if idem is None else (idem.producer_id, idem.producer_epoch)

    @property
    def start_budget(self) -> float:
        """Seconds :meth:`start` may take: ``max.block.ms`` (``request.timeout.ms`` when
        that is 0)."""
        s = self._settings
        return s.max_block or s.request_timeout

    async def start(self) -> None:
        """Connect, load metadata, get a producer id (idempotence) and start sending, all
        within ``max.block.ms``. A failed start may be retried.

        Raises:
            NoBrokersAvailableError: no broker reachable within ``max.block.ms``; the
                message names each broker tried and why it failed.
            KafkaTimeoutError / BrokerResponseError: InitProducerId failed.
            IllegalStateError: the producer is closed.
        """
        if self._closed:
            raise IllegalStateError("the producer is closed")
        if self._started:
            return
        self._started = True
        try:
            await self._start()
        except BaseException:
            self._started = False
            raise

    async def _start(self) -> None:
        s = self._settings
        budget = self.start_budget
        deadline = time.monotonic() + budget
        with self._hooks.bound():  # the client's tasks report to this producer's callbacks
            await self._client.start(timeout=budget, budget_name=(
                f"max.block.ms={budget * 1000:.0f}" if s.max_block else None))
        if self._idem is not None:
            await self._idem.init(self._client, bump=False,
                                  timeout=max(deadline - time.monotonic(), 0.001),
                                  retry_backoff=s.retry_backoff,
                                  retry_backoff_max=s.retry_backoff_max)
        if self._closed:  # closed while starting (the sync producer's background start)
            raise IllegalStateError("the producer is closed")
        self._sender = Sender(self._client, self._acc, s, self._idem, self._metrics)
        self._sender.on_error = self._sender_failed
        if self._idem is not None and s.transactional_id is not None:
            sender = self._sender
            self._txn = sender.txn = TransactionManager(
                self._client, self._idem, request_timeout=s.request_timeout,
                retry_backoff=s.retry_backoff, retry_backoff_max=s.retry_backoff_max,
                wake=sender.wake)
            self._txn.on_leave = self._sender_failed  # sends take the checked path again
        with self._hooks.bound():
            self._sender.start()
        if self._handover is not None:
            self._handover.attach(self._sender)
        # A transactional producer takes the checked path until a transaction begins.
        self._ok = self._txn is None

    def _sender_failed(self) -> None:
        self._stop_fast_paths()

    async def __aenter__(self) -> AsyncProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def stop(self) -> None:
        """aiokafka's name for :meth:`close` (delivers what is buffered first)."""
        await self.close()

    async def close(self, timeout: float | None = None) -> None:
        """Send what is buffered (waiting up to ``timeout`` seconds, None = until every
        record is resolved, which ``delivery.timeout.ms`` bounds), then fail what is left
        with IllegalStateError and close the connections. Idempotent; every future and
        callback is resolved exactly once by the time it returns.

        With a ``timeout``, the whole close takes about that long at most, even with every
        broker gone. Records failed by the close are never dropped silently: a warning on
        the ``kontrakt.producer`` logger says how many."""
        if self._closed:
            return
        self._closed = True
        self._stop_fast_paths()
        if self._txn is not None:
            self._txn.cancel_abort()
        deadline = None if timeout is None else time.monotonic() + timeout
        sender = self._sender
        acc = self._acc
        with acc.lock:
            acc.close_locked()
        try:
            if sender is not None and sender.error is None and timeout != 0:
                sender.closing = True
                sender.wake()
                with contextlib.suppress(KafkaTimeoutError):
                    await self._wait_batches(list(acc.incomplete), timeout)
        finally:
            with acc.lock:
                left = [b for b in acc.incomplete if not b.done]
            if sender is not None:
                await sender.stop()
            if left:
                log.warning(
                    "closing the producer: %d record(s) in %d batch(es) not delivered%s; "
                    "they fail with IllegalStateError",
                    sum(b.record_count for b in left), len(left),
                    "" if timeout is None else f" within close(timeout={timeout})")
            await self._client.close(
                None if deadline is None else max(deadline - time.monotonic(), 0.0))
            await self._hooks.close()

    # --- sending ------------------------------------------------------------------------

    async def send(self, topic: str, value: bytes | None = None, key: bytes | None = None, *,
                   partition: int | None = None, timestamp_ms: int | None = None,
                   headers: HeadersLike = None) -> RecordFuture:
        """Queue a record for sending and return its future.

        Args:
            topic: the topic.
            value, key: bytes or None.
            partition: a partition, or None to let the partitioner pick one.
            timestamp_ms: the record's timestamp (default: now).
            headers: ``[(name, bytes or None), ...]`` or a ``{name: bytes}`` dict.

        Returns:
            A :class:`RecordFuture`; ``await`` it for the :class:`~kontrakt.RecordMetadata`.

        Raises:
            TypeError: key, value or a header is not bytes (or None).
            RecordTooLargeError: the record cannot fit ``message.max.bytes`` (the message
                names the topic, partition and size) or ``buffer.memory``.
            KafkaTimeoutError: no metadata for the topic, or no room in the buffer, within
                ``max.block.ms`` (the call blocks until then: backpressure).
            IllegalStateError: the producer is closed or not started.
        """
        # The fast path, for the common record (bytes key and value, default partitioner, no
        # explicit partition, timestamp or headers): the record joins its topic's stage, and
        # is hashed and encoded with the rest of the stage's chunk (see KeyedStage).
        # No lock: an AsyncProducer's accumulator is only touched on its loop's thread (see
        # KeyedStage.offer).
        # _fast_topics holds topics only while _ok (see _ProducerCore._stop_fast_paths).
        if type(key) is bytes and type(value) is bytes and partition is None \
                and timestamp_ms is None and headers is None:
            # The topic's stage's offer, bound once (a bound method from a dict is called
            # with fewer steps than looking the stage and its method up per record).
            offer = self._fast_topics.get(topic)
            if offer is not None:
                fut = offer(key, value, None)
                if fut is not None:
                    if self._acc.filled:
                        # Its stage settled and batches filled up (and were handed to the
                        # sender): give responses and connections a loop turn, or a tight
                        # send loop would starve them.
                        self._acc.filled = False
                        await asyncio.sleep(0)
                    return fut
        res = self._append(topic, value, key, partition, timestamp_ms, headers, None)
        if type(res) is RecordFuture:
            acc = self._acc
            if acc.filled:
                # A batch filled up (and was handed to the sender): give responses and
                # connections a loop turn, once per batch, or a tight send loop would
                # starve them.
                acc.filled = False
                await asyncio.sleep(0)
            return res
        return await self._send_slow(topic, value, key, partition, timestamp_ms, headers, res)

    async def produce_batch(self, topic: str, messages: list[dict[str, Any]],
                            partition: int = -1,
                            on_delivery: DeliveryCallback | None = None) -> int:
        """Queue a list of records at once (confluent-kafka's ``produce_batch``): a
        :meth:`send` of each message, in order, with the common message (only ``'value'``
        and/or ``'key'``, bytes) staged a chunk at a time instead of one by one.

        Args:
            messages: a list of dicts with the optional fields ``'value'``, ``'key'``
                (bytes or None), ``'partition'`` (-1: any), ``'timestamp'`` (milliseconds;
                0: now), ``'callback'`` and ``'headers'`` (as :meth:`send`'s).
            partition: every message's partition when it names none (-1: the
                partitioner's choice).
            on_delivery: ``cb(err, metadata)`` for messages without a ``'callback'``, run
                on the loop once the record is resolved (``err`` None on success).

        Returns:
            How many messages were queued; see :meth:`Producer.produce_batch` for the
            ``'_error'`` field of those that were not, and for waiting (up to
            ``max.block.ms`` for buffer room, as :meth:`send`).

        Raises:
            InvalidMessageError: a malformed list or message (see
                :meth:`Producer.produce_batch`); nothing is queued then.
            IllegalStateError / KafkaError / TransactionError: the producer's state, as
                :meth:`send` raises them; nothing is queued then.
        """
        return await produce_batch_async(
            self, topic, messages,
            partition if partition is not None and partition >= 0 else None, on_delivery)

    async def _send_slow(self, topic: str, value: Any, key: Any, partition: int | None,
                         timestamp_ms: int | None, headers: HeadersLike,
                         res: Any) -> RecordFuture:
        deadline = time.monotonic() + self._settings.max_block
        while True:
            if type(res) is RecordFuture:
                return res
            remaining = deadline - time.monotonic()
            if res is NEED_METADATA:
                await self._wait_metadata(topic, partition, remaining)
            else:
                await self._wait_memory(remaining)
            self._check()
            res = self._append(topic, value, key, partition, timestamp_ms, headers, None)

    async def _wait_metadata(self, topic: str, partition: int | None, remaining: float) -> None:
        client = self._client
        client.add_topics([topic])
        deadline = time.monotonic() + remaining
        while True:
            info = self._topic_parts(topic)
            if info is not None and (partition is None or partition < info.count):
                return
            left = deadline - time.monotonic()
            if left <= 0:
                if info is not None:
                    raise KafkaTimeoutError(
                        f"partition {partition} of topic {topic!r} (with {info.count} "
                        f"partitions) is not in the metadata after max.block.ms")
                err = client.cluster.topic_error(topic)
                raise KafkaTimeoutError(
                    f"topic {topic!r} not found in the metadata within max.block.ms"
                    + (f" (last error: {err})" if err else ""))
            try:
                await asyncio.wait_for(client.refresh_metadata([topic]), left)
            except (asyncio.TimeoutError, TimeoutError):
                continue
            except KafkaError as exc:
                log.debug("metadata refresh for %r failed: %s", topic, exc)
            if self._topic_parts(topic) is None:
                await asyncio.sleep(min(self._settings.retry_backoff,
                                        max(0.0, deadline - time.monotonic())))

    def _memory_freed(self) -> None:
        ev = self._memory_event
        if ev is not None:
            ev.set()

    async def _wait_memory(self, remaining: float) -> None:
        if remaining <= 0:
            raise KafkaTimeoutError(
                f"the producer's buffer (buffer.memory={self._settings.buffer_memory} bytes) "
                "stayed full for max.block.ms")
        if self._memory_event is None:
            self._memory_event = asyncio.Event()
            # Told of freed memory from now on (not before: a call per completed batch).
            self._acc.on_memory = self._memory_freed
        ev = self._memory_event
        ev.clear()
        self._wakeup(True)
        if not await wait_event(ev, remaining):
            raise KafkaTimeoutError(
                f"the producer's buffer (buffer.memory={self._settings.buffer_memory} bytes) "
                "stayed full for max.block.ms")

    async def send_and_wait(self, topic: str, value: bytes | None = None,
                            key: bytes | None = None, *, partition: int | None = None,
                            timestamp_ms: int | None = None,
                            headers: HeadersLike = None,
                            timeout: float | None = None) -> RecordMetadata:
        """Send a record and wait for its acknowledgement (the batch goes out at once rather
        than after ``linger.ms``).

        Args:
            timeout: seconds to wait for the acknowledgement (None: as long as delivery
                takes, bounded by ``delivery.timeout.ms``). The record stays queued when
                the wait ends: it may still be delivered.

        Returns:
            The record's metadata.

        Raises:
            Everything :meth:`send` raises, and the delivery error (ProduceError,
            RecordTooLargeError, DeliveryTimeoutError once delivery.timeout.ms ran out).
            KafkaTimeoutError: not acknowledged within ``timeout``.
        """
        # Appended as urgent: the sender is woken (and, on this loop, the request written)
        # by the append itself, with no lingering.
        res = self._append(topic, value, key, partition, timestamp_ms, headers, None, True)
        if type(res) is not RecordFuture:
            res = await self._send_slow(topic, value, key, partition, timestamp_ms, headers,
                                        res)
        fut: RecordFuture = res
        if timeout is None:
            b = fut._head
            sender = self._sender
            if type(b) is ProducerBatch and (b.urgent or b.sealed) and not b.acc.threaded \
                    and sender is not None:
                # RecordFuture.__await__ without its frames: ProducerBatch.wait_async for a
                # batch the urgent append made urgent (not one _send_slow appended to: that
                # wait makes it urgent), on the sender's loop, which is this one (no
                # asyncio.get_running_loop(): a getpid call each).
                if not b.done:
                    await b.waiter(sender.loop)
                return fut.result()
            return await fut
        return await _bounded(_wait_for(fut), timeout,
                              f"the record to {topic!r} was not acknowledged; it may still be "
                              "delivered")

    # --- direct batch control ------------------------------------------------------------

    def create_batch(self) -> RecordBatchBuilder:
        """A batch to fill yourself (aiokafka's ``create_batch``) and hand to
        :meth:`send_batch`. ``append(timestamp, key, value, headers)`` returns None when the
        batch is full (``batch.size``); the codec is the producer's."""
        return self._acc.new_builder()

    async def send_batch(self, batch: RecordBatchBuilder, topic: str, *,
                         partition: int) -> RecordFuture:
        """Send a batch from :meth:`create_batch` to ``topic``/``partition`` as it is.

        Returns:
            A future of the first record's metadata (its offset is the batch's base offset).

        Raises:
            RecordTooLargeError: the batch exceeds ``message.max.bytes``.
            KafkaTimeoutError: no metadata or no buffer room within ``max.block.ms``.
        """
        self._check()
        self._check_batch(topic, partition, batch)
        deadline = time.monotonic() + self._settings.max_block
        while True:
            info = self._topic_parts(topic)
            if info is None or partition >= info.count:
                await self._wait_metadata(topic, partition, deadline - time.monotonic())
                continue
            if info.stage.keys:
                # Records of the topic sent before this batch go into their batches first.
                self._acc.settle(info.stage)
            queued = self._acc.append_batch(topic, partition, batch, batch.size_in_bytes)
            if queued is not None:
                return new_future(queued, 0, max(batch.max_timestamp, -1))
            await self._wait_memory(deadline - time.monotonic())

    async def list_topics(self, topic: str | None = None,
                          timeout: float | None = None) -> dict[str, TopicInfo]:
        """Fresh metadata of the cluster's topics (confluent-kafka's ``list_topics``): each
        topic's :class:`~kontrakt.clients.TopicInfo`, its partitions with their leader,
        replicas and in-sync replicas.

        Args:
            topic: only this topic (an empty dict when the cluster does not have it; a
                broker with ``auto.create.topics.enable`` creates it, as for any client).
            timeout: seconds to wait (None: the client's request timeout bounds it).

        Raises:
            IllegalStateError: the producer is not started or closed.
            NoBrokersAvailableError / KafkaTimeoutError: no broker answered in time.
        """
        self._check(sending=False)
        if timeout is not None:
            return await _bounded(self._list_topics(topic), timeout, "list_topics")
        return await self._list_topics(topic)

    async def cluster_id(self, timeout: float | None = None) -> str | None:
        """The cluster's id from metadata (confluent-kafka's): a started producer has
        metadata, so this answers at once.

        Args:
            timeout: accepted for confluent-kafka's signature; nothing here waits.

        Returns:
            The id; None when the brokers report none (Metadata before v2, KIP-78).

        Raises:
            IllegalStateError: the producer is not started, or closed.
        """
        self._check(sending=False)
        return await cluster_id(self._client, timeout)

    def bootstrap_connected(self) -> bool:
        """True when the producer has loaded cluster metadata and has a broker connection
        open now (kafka-python's); False before it has started, and after close."""
        return bootstrap_connected(self._client)

    def set_sasl_credentials(self, username: str, password: str) -> None:
        """Log in with this user and password from now on (confluent-kafka's): new
        connections and re-authentications (KIP-368) of open ones use them; open
        connections stay (a broker refuses a re-authentication as another user, ending
        that connection). Safe from any thread.

        Raises:
            TypeError: not two ``str``.
            ConfigError: the producer does not use SASL PLAIN or SCRAM.
            IllegalStateError: closed.
        """
        set_sasl_credentials(self._client, username, password)

    async def _list_topics(self, topic: str | None) -> dict[str, TopicInfo]:
        client = self._client
        if topic is None:
            client.track_all_topics(True)
            try:
                meta = await client.refresh_metadata()
            finally:
                client.track_all_topics(False)
        else:
            meta = await client.refresh_metadata([topic])
        # Each update replaces the dict and its frozen entries: this copy stays as it is.
        topics = dict(meta.topics)
        if topic is None:
            return topics
        return {topic: topics[topic]} if topic in topics else {}

    async def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition ids (sorted), waiting up to ``max.block.ms`` for metadata.

        Raises:
            KafkaTimeoutError: the topic is not known within max.block.ms.
        """
        self._check(sending=False)
        info = self._topic_parts(topic)
        if info is None:
            await self._wait_metadata(topic, None, self._settings.max_block)
            info = self._topic_parts(topic)
            assert info is not None
        return list(info.all)

