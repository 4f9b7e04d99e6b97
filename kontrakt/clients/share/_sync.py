"""The blocking :class:`ShareConsumer`: the asyncio share consumer on a private loop thread.

Every method runs on the loop (the consumer's state lives there) and blocks until done;
a share consumer hands records out a poll at a time, so one loop round trip per call is
the whole cost.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar

from kontrakt._types import ConsumerRecord, TopicPartition
from kontrakt.clients._sync import LoopThread, close_sync
from kontrakt.clients.consumer._parts import KeyT, ValueT
from kontrakt.clients.share._acks import AcknowledgeType
from kontrakt.clients.share._consumer import AcknowledgementCommitCallback, AsyncShareConsumer
from kontrakt.errors import IllegalStateError, InvalidArgumentError, KafkaError

__all__ = ["ShareConsumer"]

T = TypeVar("T")


class ShareConsumer(Generic[KeyT, ValueT]):
    """Blocking form of :class:`AsyncShareConsumer`, run on a private event-loop thread:
    the same options and methods, each blocking until done.

    A share consumer dropped without :meth:`close` is closed when garbage-collected.

    Example::

        with ShareConsumer({"bootstrap.servers": "127.0.0.1:9092",
                            "group.id": "workers"}) as consumer:
            consumer.subscribe(["jobs"])
            while True:
                for record in consumer.poll(1.0):
                    handle(record)
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self._thread = LoopThread("kontrakt-share-consumer")
        self._ack_callback: AcknowledgementCommitCallback | None = None
        # Answers the loop saw, for the callback on the caller's thread (deque: appended on
        # the loop thread, drained on the caller's, both atomic).
        self._answered: deque[tuple[dict[TopicPartition, set[int]], KafkaError | None]] = (
            deque())
        try:
            self._async: AsyncShareConsumer[Any, Any] = self._thread.run(
                _build(config, kwargs))
        except BaseException:
            self._thread.stop()
            raise
        self._async._client.owner = "ShareConsumer"
        self._thread.attach(self, self._async.close)

    @property
    def config(self) -> Mapping[str, Any]:
        """The validated configuration."""
        return self._async.config

    @property
    def group_id(self) -> str:
        """The share group."""
        return self._async.group_id

    @property
    def member_id(self) -> str:
        """This member's id (a UUID made by the client, kept for its life)."""
        return self._async.member_id

    def _on_loop(self, fn: Callable[[], T]) -> T:
        if not self._thread.running:
            raise IllegalStateError("share consumer is closed")

        async def run() -> T:
            return fn()
        return self._thread.run(run())

    def start(self) -> None:
        """Connect now (the first call of any other method does it too); see
        :meth:`AsyncShareConsumer.start`."""
        if not self._thread.running:
            raise IllegalStateError("share consumer is closed")
        self._thread.run(self._async.start())

    def subscribe(self, topics: Iterable[str] | str) -> None:
        """Join the share group for ``topics``; see :meth:`AsyncShareConsumer.subscribe`."""
        names = [topics] if isinstance(topics, str) else list(topics)
        self._on_loop(lambda: self._async.subscribe(names))

    def unsubscribe(self) -> None:
        """Leave the share group; see :meth:`AsyncShareConsumer.unsubscribe`."""
        self._on_loop(self._async.unsubscribe)

    def subscription(self) -> list[str]:
        """The subscribed topic names, sorted."""
        return self._on_loop(self._async.subscription)

    def assignment(self) -> set[TopicPartition]:
        """The partitions the coordinator assigned this member now."""
        return self._on_loop(self._async.assignment)

    def poll(self, timeout: float | None = None) -> list[ConsumerRecord[KeyT, ValueT]]:
        """Fetch the next records acquired for this member; see
        :meth:`AsyncShareConsumer.poll`. The acknowledgement commit callback runs here
        first, for the answers that arrived before this call (not after the fetch: an
        exception of the callback must not lose the records fetched)."""
        if not self._thread.running:
            raise IllegalStateError("share consumer is closed")
        self._run_ack_callbacks()
        records: list[ConsumerRecord[KeyT, ValueT]] = self._thread.run(
            self._async.poll(timeout))
        return records

    def set_acknowledgement_commit_callback(
            self, callback: AcknowledgementCommitCallback | None) -> None:
        """Call ``callback(offsets, error)`` for each partition's acknowledgements a broker
        answered; see :meth:`AsyncShareConsumer.set_acknowledgement_commit_callback`.
        Here it runs on the caller's thread, inside :meth:`poll`, :meth:`commit_sync` and
        :meth:`close` (as the producer's delivery callbacks), and its exceptions propagate
        from them."""
        if callback is not None and not callable(callback):
            raise InvalidArgumentError(f"callback must be callable, got {callback!r}")
        self._ack_callback = callback
        # The loop is handed the queue, not this object: a bound method would keep it
        # alive from the loop thread, and a dropped consumer would never be collected.
        answered = self._answered

        def sink(offsets: dict[TopicPartition, set[int]], error: KafkaError | None) -> None:
            answered.append((offsets, error))

        self._on_loop(lambda: self._async.set_acknowledgement_commit_callback(
            None if callback is None else sink))

    def _run_ack_callbacks(self) -> None:
        answered = self._answered
        while answered:
            offsets, error = answered.popleft()
            callback = self._ack_callback
            if callback is not None:
                callback(offsets, error)

    def metrics(self) -> dict[str, Any]:
        """Counters, rates and latencies; see :meth:`AsyncShareConsumer.metrics`."""
        return self._on_loop(self._async.metrics)

    def acknowledge(self, record: ConsumerRecord[Any, Any],
                    ack_type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        """Settle a polled record (explicit mode); see
        :meth:`AsyncShareConsumer.acknowledge`."""
        self._on_loop(lambda: self._async.acknowledge(record, ack_type))

    def acknowledge_offset(self, topic: str, partition: int, offset: int,
                           ack_type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        """Settle the record at ``topic``/``partition``/``offset``; see
        :meth:`AsyncShareConsumer.acknowledge`."""
        self._on_loop(lambda: self._async.acknowledge_offset(topic, partition, offset,
                                                             ack_type))

    def delivery_count(self, record: ConsumerRecord[Any, Any]) -> int | None:
        """How many times the group has delivered ``record``; see
        :meth:`AsyncShareConsumer.delivery_count`."""
        return self._on_loop(lambda: self._async.delivery_count(record))

    def commit_sync(self, timeout: float | None = None
                    ) -> dict[TopicPartition, KafkaError | None]:
        """Send the pending acknowledgements and wait; see
        :meth:`AsyncShareConsumer.commit_sync`."""
        if not self._thread.running:
            raise IllegalStateError("share consumer is closed")
        self._run_ack_callbacks()
        try:
            return self._thread.run(self._async.commit_sync(timeout))
        finally:
            self._run_ack_callbacks()

    def commit_async(self) -> None:
        """Send the pending acknowledgements in the background; see
        :meth:`AsyncShareConsumer.commit_async`."""
        self._on_loop(self._async.commit_async)

    def close(self, timeout: float | None = None) -> None:
        """Settle, close the share sessions, leave the group and stop the loop thread;
        see :meth:`AsyncShareConsumer.close`. Idempotent."""
        close_sync(self._thread, self._async.close, timeout)
        self._run_ack_callbacks()

    def __enter__(self) -> ShareConsumer[KeyT, ValueT]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


async def _build(config: Mapping[str, Any] | None, kwargs: dict[str, Any]
                 ) -> AsyncShareConsumer[Any, Any]:
    return AsyncShareConsumer(config, **kwargs)
