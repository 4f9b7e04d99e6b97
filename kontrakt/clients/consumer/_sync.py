"""The blocking :class:`Consumer`: the asyncio consumer on a private loop thread.

Records are drained straight from the shared, thread-safe fetch buffer on the caller's
thread (many per lock acquisition; no loop round trip per ``poll()``). Everything else runs
on the loop. Rebalance listener callbacks run on the caller's thread, inside whichever
blocking call (``poll``, ``commit``, ``close``, ...) is in progress when the rebalance
happens — as in the Java client — so a listener may call ``commit()``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar, overload

from kontrakt._types import ConsumerRecord, OffsetAndMetadata, TopicPartition
from kontrakt.clients._sync import BackgroundStart, LoopThread, wait_done, weak_method
from kontrakt.clients.consumer._buffer import STOP
from kontrakt.clients.consumer._compat import (
    GETONE_PARTITIONS,
    ConsumerCompat,
    batch_timeout,
    split_config,
)
from kontrakt.clients.consumer._consumer import AsyncConsumer, close_deadline, run_listener_inline
from kontrakt.clients.consumer._offsets import OffsetAndTimestamp, OffsetsLike
from kontrakt.clients.consumer._parts import KeyT, ValueT
from kontrakt.errors import IllegalStateError, InvalidArgumentError, KafkaTimeoutError

__all__ = ["Consumer"]

T = TypeVar("T")


class Consumer(ConsumerCompat, Generic[KeyT, ValueT]):
    """Blocking Kafka consumer; same options and methods as :class:`AsyncConsumer`.

    Its records are typed ``ConsumerRecord[bytes | None, bytes | None]``, as
    :class:`AsyncConsumer`'s.

    Takes the arguments of :class:`AsyncConsumer` (``Consumer("orders", group_id="g", ...)``
    subscribes at once, kafka-python's form). ``error_cb``, ``logger`` and ``stats_cb`` run
    on the consumer's I/O thread (they must not call blocking consumer methods).

    Rebalance listener callbacks are plain functions run on the thread that is calling the
    consumer. Must not be used from several threads at once.

    The constructor returns at once, and so do :meth:`subscribe` and :meth:`assign`:
    connecting and loading metadata run in the background. :meth:`poll`, :meth:`getmany`
    and :meth:`consume` wait for that start at most their own timeout (returning nothing,
    as with no records, while it goes on); a start that fails (no broker reachable within
    ``request.timeout.ms``) raises NoBrokersAvailableError, naming each broker tried and
    why, from the call that waits for it, and the next call starts again. Other calls that
    need the brokers wait for the start.

    Delivery guarantee with ``enable.auto.commit`` (the default): at least once for an
    application that is done with the records a poll returned when it polls again (see
    :class:`AsyncConsumer`).

    Raises:
        ConfigError: unknown option or bad value.

    Example::

        with Consumer(bootstrap_servers="127.0.0.1:9092", group_id="g") as consumer:
            consumer.subscribe(["orders"])
            for record in consumer:
                print(record.value)
    """

    def __init__(self, config: Mapping[str, Any] | str | None = None, *topics: str,
                 **kwargs: Any) -> None:
        config, topics = split_config(config, topics)
        self._thread = LoopThread("kontrakt-consumer")
        self._callbacks: deque[tuple[Callable[..., Any], set[TopicPartition],
                                     asyncio.Future[None]]] = deque()
        #: a listener call is running (on the caller's thread): the next waits for it
        self._in_callback = False
        self._closed = False
        try:
            self._async: AsyncConsumer[Any, Any] = self._thread.run(
                self._build(config, topics, kwargs))
        except BaseException:
            self._thread.stop()
            raise
        self._buffer = self._async._buffer
        self._drain_one = self._buffer.drain_one
        #: the live lease's records, popped by poll() itself (see _lease_taken)
        self._recs: deque[ConsumerRecord[Any, Any]] | None = None
        #: applied to each record poll() returns (DeserializingConsumer's decode, set after
        #: this __init__): inside poll(), so that a subclass adds no frame of its own
        self._decode: Callable[[ConsumerRecord[Any, Any]], ConsumerRecord[Any, Any]] | None
        self._decode = None
        self._started = False
        self._starting = BackgroundStart(self._thread, self._async)
        self._starting.attempt()
        # Dropped without close(): the finalizer's close commits (auto commit) and leaves
        # the group, so that the partitions move on at once (see kontrakt.clients._sync).
        self._thread.attach(self, _closer(self._async))

    async def _build(self, config: Mapping[str, Any] | None, topics: tuple[str, ...],
                     kwargs: dict[str, Any]) -> AsyncConsumer[Any, Any]:
        # Weakly: the loop thread keeps the runner alive, and must not keep self alive.
        # Once self is gone (its finalizer's close), listeners run on the loop thread.
        return AsyncConsumer(config, *topics, _listener_runner=weak_method(
            self._run_on_caller, run_listener_inline), **kwargs)

    async def _run_on_caller(self, fn: Callable[..., Any], partitions: set[TopicPartition]
                             ) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        with self._buffer.cond:
            self._callbacks.append((fn, partitions, fut))
            self._buffer.cond.notify_all()
        self._wake_caller()
        await fut

    def _wake_caller(self) -> None:
        with self._buffer.cond:
            self._buffer.cond.notify_all()

    def _runnable_callbacks(self) -> bool:
        """Listener calls are waiting, and none is running (a listener's own blocking
        call must not run the next one inside it: close() queues the revocation while
        the pending assignment's call runs)."""
        return bool(self._callbacks) and not self._in_callback

    def _service_callbacks(self) -> None:
        if self._in_callback:
            return
        while self._callbacks:
            fn, partitions, fut = self._callbacks.popleft()
            err: BaseException | None = None
            self._in_callback = True
            try:
                fn(partitions)
            except Exception as exc:  # reported on the loop like an async listener's error
                err = exc
            finally:
                self._in_callback = False
            loop = self._thread.loop
            if err is None:
                loop.call_soon_threadsafe(_settle, fut, None)
            else:
                loop.call_soon_threadsafe(_settle, fut, err)

    def _call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop, running listener callbacks here while waiting."""
        if self._thread.in_loop_thread():
            coro.close()
            raise IllegalStateError("a blocking Consumer method was called from the "
                                    "consumer's own loop thread; use AsyncConsumer there")
        if not self._thread.running:
            coro.close()
            raise IllegalStateError("consumer is closed")
        fut = asyncio.run_coroutine_threadsafe(coro, self._thread.loop)
        fut.add_done_callback(lambda _f: self._wake_caller())
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self._service_callbacks()
            with self._buffer.cond:
                if not fut.done() and not self._runnable_callbacks():
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        fut.cancel()
                        raise KafkaTimeoutError(f"operation did not finish within {timeout}s")
                    self._buffer.cond.wait(remaining if remaining is not None else 1.0)
            if fut.done() and not self._runnable_callbacks():
                return fut.result()

    def _ensure_started(self, deadline: float | None = None) -> bool:
        """Wait for the background start (see the class docstring) until ``deadline``
        (time.monotonic(); None: as long as the start takes, which ``request.timeout.ms``
        bounds).

        Returns:
            False when ``deadline`` came first (the start goes on).

        Raises:
            NoBrokersAvailableError: no broker reachable; the message names each broker
                tried and why it failed. The next call starts again.
            IllegalStateError: closed, or called from the consumer's loop thread.
        """
        if self._started:
            return True
        if self._thread.in_loop_thread():
            raise IllegalStateError("a blocking Consumer method was called from the "
                                    "consumer's own loop thread; use AsyncConsumer there")
        if self._closed:
            raise IllegalStateError("consumer is closed")
        fut = self._starting.attempt()
        if not wait_done(fut, None if deadline is None else max(0.0, deadline - time.monotonic())):
            return False
        try:
            fut.result()
        except concurrent.futures.CancelledError:
            raise IllegalStateError("consumer is closed") from None
        self._started = True
        return True

    def _on_loop(self, fn: Callable[[], T]) -> T:
        async def run() -> T:
            return fn()
        return self._call(run())

    # --- lifecycle -----------------------------------------------------------------------

    def close(self, autocommit: bool = True, timeout: float | None = None) -> None:
        """Commit (auto commit), call the revoke listener (here, on this thread: it may
        commit), leave the group and stop. Idempotent.

        Args:
            autocommit: commit every record handed out first, when auto commit is enabled.
            timeout: seconds to wait for the brokers (default 30); see
                :meth:`AsyncConsumer.close`. Listener code itself is not interrupted.

        Raises:
            InvalidArgumentError: a negative timeout.
        """
        self._close(autocommit, timeout, processed=True)

    def _close(self, autocommit: bool, timeout: float | None, *, processed: bool) -> None:
        close_deadline(timeout)  # a bad timeout raises before anything closes
        if self._closed:
            return
        self._closed = True
        self._starting.cancel()
        try:
            if self._thread.running:
                self._call(self._async._close(autocommit, timeout, processed=processed))
        finally:
            self._thread.stop()

    def __enter__(self) -> Consumer[KeyT, ValueT]:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        # Leaving on an error, perhaps in the middle of a batch: commit only what the
        # application moved past by polling again.
        self._close(True, None, processed=exc_type is None)

    # --- subscription --------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str] | str | None = None, *,
                  pattern: str | re.Pattern[str] | None = None, listener: Any = None) -> None:
        """See :meth:`AsyncConsumer.subscribe`; listener methods must be plain functions."""
        self._on_loop(lambda: self._async.subscribe(topics, pattern=pattern,
                                                    listener=listener))

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """See :meth:`AsyncConsumer.assign`."""
        parts = list(partitions)
        self._on_loop(lambda: self._async.assign(parts))

    def assignment(self) -> set[TopicPartition]:
        """See :meth:`AsyncConsumer.assignment`."""
        return self._on_loop(self._async.assignment)

    def subscription(self) -> set[str]:
        """See :meth:`AsyncConsumer.subscription`."""
        return self._async.subscription()

    def unsubscribe(self, timeout: float | None = None) -> None:
        """See :meth:`AsyncConsumer.unsubscribe`; here the hand-back is waited for (as the
        Java client's): the auto commit, then the revoke listener, called on this thread,
        for at most ``timeout`` seconds (default 30, DEFAULT_CLOSE_TIMEOUT). If it takes
        longer (or when called from a listener), it goes on in the background and the
        listener runs inside a later call.

        Raises:
            InvalidArgumentError: a negative timeout.
        """
        wait = close_deadline(timeout) - time.monotonic()
        self._on_loop(self._async.unsubscribe)
        group = self._async._coordinator
        # Called from a listener: the revoke call can only run after it returns.
        if group is not None and not self._in_callback:
            self._call(group.wait_retired(wait))

    # --- consuming -----------------------------------------------------------------------

    def _prepare(self, deadline: float | None) -> bool:
        """Before draining: False when the start did not finish by ``deadline``."""
        if not self._ensure_started(deadline):
            return False
        self._service_callbacks()
        self._async._check()
        self._async._polled()
        return True

    def _wait_data(self, seen: int, deadline: float | None) -> bool:
        buf = self._buffer
        with buf.cond:
            while buf.version == seen and not self._runnable_callbacks() \
                    and not self._async._closed:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                buf.cond.wait(min(remaining, 1.0) if remaining is not None else 1.0)
                if self._async._fetcher.error is not None:
                    return True
                if buf.version == seen and remaining is None:
                    self._async._polled()
        return True

    def poll(self, timeout: float | None = None) -> ConsumerRecord[KeyT, ValueT] | None:
        """The next record, or None after ``timeout`` seconds (None or negative: wait
        forever).

        Raises:
            See :meth:`AsyncConsumer.getmany`.
        """
        rec: ConsumerRecord[Any, Any] | None
        recs = self._recs
        if recs is not None:
            # Fastest path (no group, a lease live): its next record, popped here as
            # FetchBuffer.drain_one would, with nothing to mark. What must stop it (seek,
            # pause, error, close, a dead fetcher, ...) ends the lease, so the pop finds
            # the marker instead (see FetchBuffer.live_records).
            try:
                rec = recs.popleft()
            except IndexError:  # used up
                rec = STOP
            if rec is not STOP:
                decode = self._decode
                return rec if decode is None else decode(rec)
            if recs:
                recs.appendleft(rec)  # for drain_one, which gives the rest back
            self._recs = None
        elif self._started and not self._callbacks:
            # Fast path (a record is buffered): what _prepare() does, without its calls
            # when there is nothing to check (no group, no fetcher error, not closed).
            a = self._async
            if a._coordinator is not None or a._closed or a._fetcher.error is not None:
                a._check()
                a._polled()
                rec = self._drain_one()
            else:
                rec = self._drain_one()
                if rec is not None:
                    self._lease_taken()
            if rec is not None:
                decode = self._decode
                return rec if decode is None else decode(rec)
        buf = self._buffer
        # A negative timeout waits as long as None does (librdkafka's -1).
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        while True:
            if not self._prepare(deadline):
                return None
            seen = buf.version
            rec = buf.drain_one()
            if rec is None and not self._wait_data(seen, deadline):
                self._async._check()
                rec = buf.drain_one()
                if rec is None:
                    return None
            if rec is not None:
                self._lease_taken()
                decode = self._decode
                return rec if decode is None else decode(rec)

    def _lease_taken(self) -> None:
        """After poll() took a record with drain_one(): pop the next ones of a live lease
        in poll() itself while nothing else must be checked a call (no group: nothing to
        mark, no listener; not closed; the fetcher alive). Whatever changes that later ends
        the lease (AsyncConsumer.close, AsyncConsumer._on_data), after a change read here or
        before the lease was published, so neither slips through."""
        a = self._async
        if a._coordinator is None and not a._closed and a._fetcher.error is None:
            self._recs = self._buffer.live_records()

    def getmany(self, timeout: float = 0.0, max_records: int | None = None, *,
                timeout_ms: int | None = None
                ) -> dict[TopicPartition, list[ConsumerRecord[KeyT, ValueT]]]:
        """See :meth:`AsyncConsumer.getmany`."""
        deadline = time.monotonic() + batch_timeout(timeout, timeout_ms)
        limit = max_records or self._async._max_poll_records
        buf = self._buffer
        while True:
            if not self._prepare(deadline):
                return {}
            seen = buf.version
            got = buf.drain(limit)
            if got:
                return got
            if not self._wait_data(seen, deadline):
                self._async._check()
                return buf.drain(limit)

    def consume(self, num_records: int = 1, timeout: float | None = None
                ) -> list[ConsumerRecord[KeyT, ValueT]]:
        """See :meth:`AsyncConsumer.consume`."""
        if num_records < 1:
            raise ValueError("num_records must be >= 1")
        got = self.getmany(timeout if timeout is not None and timeout >= 0 else 1e9,
                           num_records)
        return [r for recs in got.values() for r in recs]

    def getone(self, *partitions: TopicPartition) -> ConsumerRecord[KeyT, ValueT]:
        """See :meth:`AsyncConsumer.getone`."""
        if partitions:
            raise InvalidArgumentError(GETONE_PARTITIONS)
        while True:
            rec = self.poll(None)
            if rec is not None:
                return rec
            self._async._check()

    def __iter__(self) -> Iterator[ConsumerRecord[KeyT, ValueT]]:
        while not self._closed:
            rec = self.poll(1.0)
            if rec is not None:
                yield rec

    # --- positions and offsets -------------------------------------------------------------

    @overload
    def position(self, partition: TopicPartition, timeout: float | None = None) -> int: ...
    @overload
    def position(self, partition: list[TopicPartition], timeout: float | None = None
                 ) -> list[TopicPartition]: ...

    def position(self, partition: TopicPartition | list[TopicPartition],
                 timeout: float | None = None) -> int | list[TopicPartition]:
        """See :meth:`AsyncConsumer.position`."""
        self._ensure_started()
        if isinstance(partition, list):
            return self._call(self._async.position(partition, timeout))
        return self._call(self._async.position(partition, timeout))

    def seek(self, partition: TopicPartition, offset: int | OffsetAndMetadata | None = None
             ) -> None:
        """See :meth:`AsyncConsumer.seek`."""
        self._on_loop(lambda: self._async.seek(partition, offset))

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """See :meth:`AsyncConsumer.seek_to_beginning`."""
        self._on_loop(lambda: self._async.seek_to_beginning(*partitions))

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """See :meth:`AsyncConsumer.seek_to_end`."""
        self._on_loop(lambda: self._async.seek_to_end(*partitions))

    def pause(self, *partitions: TopicPartition | Iterable[TopicPartition]) -> None:
        """See :meth:`AsyncConsumer.pause`."""
        self._on_loop(lambda: self._async.pause(*partitions))

    def resume(self, *partitions: TopicPartition | Iterable[TopicPartition]) -> None:
        """See :meth:`AsyncConsumer.resume`."""
        self._on_loop(lambda: self._async.resume(*partitions))

    def paused(self) -> set[TopicPartition]:
        """See :meth:`AsyncConsumer.paused`."""
        return self._on_loop(self._async.paused)

    def highwater(self, partition: TopicPartition) -> int | None:
        """See :meth:`AsyncConsumer.highwater`."""
        return self._on_loop(lambda: self._async.highwater(partition))

    def last_stable_offset(self, partition: TopicPartition) -> int | None:
        """See :meth:`AsyncConsumer.last_stable_offset`."""
        return self._on_loop(lambda: self._async.last_stable_offset(partition))

    def lag(self, partition: TopicPartition) -> int | None:
        """See :meth:`AsyncConsumer.lag`."""
        return self._on_loop(lambda: self._async.lag(partition))

    def beginning_offsets(self, partitions: Iterable[TopicPartition],
                          timeout: float | None = None) -> dict[TopicPartition, int]:
        """See :meth:`AsyncConsumer.beginning_offsets`."""
        return self._call(self._async.beginning_offsets(list(partitions), timeout))

    def end_offsets(self, partitions: Iterable[TopicPartition],
                    timeout: float | None = None) -> dict[TopicPartition, int]:
        """See :meth:`AsyncConsumer.end_offsets`."""
        return self._call(self._async.end_offsets(list(partitions), timeout))

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int],
                          timeout: float | None = None
                          ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """See :meth:`AsyncConsumer.offsets_for_times`."""
        return self._call(self._async.offsets_for_times(dict(timestamps), timeout))

    def store_offsets(self, records: ConsumerRecord[Any, Any]
                      | Iterable[ConsumerRecord[Any, Any]] | None = None, *,
                      offsets: OffsetsLike | None = None) -> None:
        """See :meth:`AsyncConsumer.store_offsets` (runs on this thread: no loop round
        trip)."""
        self._async.store_offsets(records, offsets=offsets)

    def commit(self, offsets: OffsetsLike | None = None,
               timeout: float | None = None) -> None:
        """See :meth:`AsyncConsumer.commit`."""
        self._ensure_started()
        self._call(self._async.commit(offsets, timeout))

    def commit_async(self, offsets: OffsetsLike | None = None,
                     callback: Callable[[dict[TopicPartition, OffsetAndMetadata],
                                         BaseException | None], Any] | None = None
                     ) -> concurrent.futures.Future[None]:
        """Start a commit; returns a future. ``callback(offsets, error)`` runs on the loop
        thread (it must not call blocking consumer methods).

        Raises:
            ConfigError: no ``group.id``.
        """
        self._ensure_started()

        async def start() -> asyncio.Task[None]:
            return self._async.commit_async(offsets, callback)

        task = self._call(start())
        out: concurrent.futures.Future[None] = concurrent.futures.Future()

        def done(t: asyncio.Task[None]) -> None:
            if t.cancelled():
                out.cancel()
            elif t.exception() is not None:
                out.set_exception(t.exception())
            else:
                out.set_result(None)
        self._thread.loop.call_soon_threadsafe(task.add_done_callback, done)
        return out

    @overload
    def committed(self, partitions: Iterable[TopicPartition], timeout: float | None = None
                  ) -> dict[TopicPartition, OffsetAndMetadata | None]: ...
    @overload
    def committed(self, partitions: TopicPartition, timeout: float | None = None
                  ) -> int | None: ...

    def committed(self, partitions: Iterable[TopicPartition] | TopicPartition,
                  timeout: float | None = None
                  ) -> dict[TopicPartition, OffsetAndMetadata | None] | int | None:
        """See :meth:`AsyncConsumer.committed`."""
        self._ensure_started()
        if isinstance(partitions, TopicPartition):
            return self._call(self._async.committed(partitions, timeout))
        return self._call(self._async.committed(list(partitions), timeout))

    def list_topics(self) -> dict[str, list[int]]:
        """See :meth:`AsyncConsumer.list_topics`."""
        return self._call(self._async.list_topics())

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        """See :meth:`AsyncConsumer.partitions_for_topic`."""
        return self._call(self._async.partitions_for_topic(topic))

    @property
    def config(self) -> Any:
        """The validated options."""
        return self._async.config


def _closer(consumer: AsyncConsumer[Any, Any]) -> Callable[[float], Coroutine[Any, Any, None]]:
    """``close(timeout)`` for the finalizer of a Consumer nobody closed."""
    async def close(timeout: float) -> None:
        await consumer.close(timeout=timeout)
    return close


def _settle(fut: asyncio.Future[None], err: BaseException | None) -> None:
    if fut.done():
        return
    if err is None:
        fut.set_result(None)
    else:
        fut.set_exception(err)


_ = threading
