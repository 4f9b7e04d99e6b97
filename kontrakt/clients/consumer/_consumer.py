"""The asyncio consumer's core: construction, start and close, subscription and
assignment, and handing out records (``poll``, ``getmany``, ``consume``, iteration).

:class:`AsyncConsumer` inherits the rest from mixins in their own rooms: positions, seeks,
pausing and offset lookups (:mod:`._positions`), offset storing and commits
(:mod:`._commits`), and other clients' calls (:mod:`._compat`); :mod:`._parts` declares
what the first two use of it. Fetching is the
:class:`~kontrakt.clients.consumer._fetcher.Fetcher`'s, group membership
:mod:`kontrakt.clients.group`'s.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any, Generic

from kontrakt._config import ClientConfig
from kontrakt._types import ConsumerRecord, TopicPartition
from kontrakt.clients._hooks import ClientHooks
from kontrakt.clients._settings import ClientSettings
from kontrakt.clients._wait import wait_event
from kontrakt.clients.client import AsyncKafkaClient
from kontrakt.clients.consumer._buffer import FetchBuffer
from kontrakt.clients.consumer._commits import AsyncConsumerCommits
from kontrakt.clients.consumer._compat import (
    GETONE_PARTITIONS,
    AsyncConsumerCompat,
    batch_timeout,
    flat_partitions,
    split_config,
    subscription_of,
)
from kontrakt.clients.consumer._config import CONSUMER_OPTIONS, consumer_settings
from kontrakt.clients.consumer._fetcher import Fetcher
from kontrakt.clients.consumer._metrics import attach as attach_metrics
from kontrakt.clients.consumer._parts import KeyT, ValueT
from kontrakt.clients.consumer._positions import AsyncConsumerPositions
from kontrakt.clients.consumer._subscription import SubscriptionState
from kontrakt.clients.group._coordinator import make_coordinator
from kontrakt.clients.group._membership import GroupMembership
from kontrakt.clients.group._settings import GroupSettings
from kontrakt.errors import (
    ConfigError,
    IllegalStateError,
    InvalidArgumentError,
)

__all__ = ["DEFAULT_CLOSE_TIMEOUT", "AsyncConsumer", "ListenerRunner"]

#: Seconds :meth:`AsyncConsumer.close` waits for the brokers by default (the Java client's
#: default too): for the final commit, commits made by the revoke listener, leaving the group.
DEFAULT_CLOSE_TIMEOUT = 30.0


def close_deadline(timeout: float | None) -> float:
    """When a close with ``timeout`` seconds (None: the default) stops waiting.

    Raises:
        InvalidArgumentError: a negative (or NaN) timeout.
    """
    if timeout is not None and not timeout >= 0:
        raise InvalidArgumentError(f"close timeout must be >= 0 seconds, got {timeout!r}")
    return time.monotonic() + (DEFAULT_CLOSE_TIMEOUT if timeout is None else timeout)

#: How listener callbacks are run: ``await runner(callback, partitions)``.
ListenerRunner = Callable[[Callable[..., Any], "set[TopicPartition]"], Awaitable[None]]


async def run_listener_inline(callback: Callable[..., Any], partitions: set[TopicPartition]
                              ) -> None:
    """Call a listener callback on the loop, awaiting it when it is a coroutine function."""
    result = callback(partitions)
    if inspect.isawaitable(result):
        await result


class AsyncConsumer(AsyncConsumerCompat, AsyncConsumerPositions, AsyncConsumerCommits,
                    Generic[KeyT, ValueT]):
    """Asyncio Kafka consumer.

    Its records are typed ``ConsumerRecord[bytes | None, bytes | None]`` (the bytes as
    read; None for a null key or value); the type parameters are for the deserializing
    consumers, which hand out what their deserializers return.

    Args:
        config: Kafka property names to values (``{"group.id": "g", ...}``).
        *topics: topics to subscribe to at once (kafka-python's and aiokafka's
            ``AIOKafkaConsumer("orders", ...)``; needs ``group.id``); the first may stand
            in the config's place.
        **kwargs: the same options with snake_case names (``group_id="g"``).

    Options: those of :class:`~kontrakt.clients.AsyncKafkaClient` plus ``group.id``,
    ``group.instance.id``, ``group.protocol`` (classic | consumer), ``session.timeout.ms``,
    ``heartbeat.interval.ms``, ``max.poll.interval.ms``, ``partition.assignment.strategy``,
    ``enable.auto.commit``, ``auto.commit.interval.ms``, ``enable.auto.offset.store``,
    ``auto.offset.reset``, ``fetch.min.bytes``, ``fetch.max.wait.ms``, ``fetch.max.bytes``,
    ``max.partition.fetch.bytes``, ``max.decompressed.batch.multiple`` (decompression bound),
    ``queued.max.messages.kbytes`` (prefetch memory cap), ``max.poll.records``,
    ``check.crcs``, ``isolation.level``, ``client.rack``; the callbacks ``error_cb``,
    ``logger``, ``stats_cb`` with ``statistics.interval.ms`` (see
    :mod:`kontrakt.clients._hooks`); and librdkafka's, the Java client's and
    kafka-python's names for these (:mod:`kontrakt._aliases`).

    Delivery guarantee with ``enable.auto.commit`` (the default): at least once for an
    application that is done with the records a poll returned when it polls again — auto
    commit (timed, on revocation) covers only records handed out by earlier polls (as the
    Java client's) or passed to :meth:`store_offsets`, and :meth:`close` commits every
    record handed out (leaving ``async with`` on an exception: only what earlier polls
    returned).

    ``_raw_batches=True`` (keyword, for :mod:`kontrakt.spark`'s columnar reads): the
    consumer hands out each fetched batch undecoded as a
    :class:`~kontrakt.clients.consumer._decoding.RawBatch` wherever it would hand out
    records (``getmany`` lists, ``poll``), checked and filtered as records are (CRCs,
    decompression bound, ``isolation.level``); ``max_records`` then counts batches, and the
    position moves past a batch once it is handed out. Not with ``group.id`` (a commit
    would take a batch for its last record).

    Raises:
        ConfigError: unknown option or bad value (or topics without ``group.id``);
            ``_raw_batches`` with ``group.id``.

    Example::

        async with AsyncConsumer(bootstrap_servers="127.0.0.1:9092", group_id="g",
                                 auto_offset_reset="earliest") as consumer:
            consumer.subscribe(["orders"])
            async for record in consumer:
                print(record.offset, record.value)
    """

    def __init__(self, config: Mapping[str, Any] | str | None = None, *topics: str,
                 _listener_runner: ListenerRunner | None = None, _raw_batches: bool = False,
                 **kwargs: Any) -> None:
        config, topics = split_config(config, topics)
        self.config = cfg = ClientConfig(CONSUMER_OPTIONS, config, **kwargs)
        self._hooks = ClientHooks(cfg, "consumer", self._statistics)
        self._client = AsyncKafkaClient(_settings=ClientSettings.of(cfg))
        self._client.owner = "AsyncConsumer"
        self._group_id: str | None = cfg["group.id"]
        if self._group_id and _raw_batches:
            raise ConfigError("_raw_batches is for consumers without group.id: a commit "
                              "would take a handed-out batch for its last record")
        self._settings = settings = consumer_settings(cfg)
        self._subs = SubscriptionState(settings.auto_offset_reset)
        self._buffer = FetchBuffer(settings.queued_max_bytes)
        self._listener_runner = _listener_runner or run_listener_inline
        self._max_poll_records = settings.max_poll_records
        self._auto_store = settings.auto_offset_store
        self._coordinator: GroupMembership | None = None
        if settings.group is not None:
            self._coordinator = _make_coordinator(self, settings.group)
        self._fetcher = Fetcher(
            self._client, self._subs, self._buffer, settings,
            committed_lookup=(self._coordinator.committed_for_positions
                              if self._coordinator else None),
            raw_batches=_raw_batches)
        attach_metrics(self)
        self._data: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        #: applied to each record poll() returns, its result awaited when _decode_awaits
        #: (AsyncDeserializingConsumer's decode, set after this __init__): inside poll(), so
        #: that a subclass adds no coroutine of its own a record
        self._decode: Callable[[ConsumerRecord[Any, Any]], Any] | None = None
        self._decode_awaits = False
        self._started = False
        self._closed = False
        self._closing = False
        self._start_lock: asyncio.Lock | None = None
        if topics:
            if not self._group_id:
                raise ConfigError(
                    "topics given to the constructor are subscribed to, which needs group.id; "
                    "without a group, assign() the partitions "
                    "(partitions_for_topic() lists them)")
            self.subscribe(topics)

    # --- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Connect and start the background fetcher (and group membership, if subscribed).

        Called implicitly by the first method that needs the network.

        Raises:
            NoBrokersAvailableError: no bootstrap server answered.
        """
        if self._closed:
            raise IllegalStateError("consumer is closed")
        if self._started:
            return
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self._started:
                return
            self._loop = asyncio.get_running_loop()
            self._data = asyncio.Event()
            self._buffer.on_data = self._on_data
            # The tasks started here report to this consumer's callbacks.
            with self._hooks.bound():
                await self._client.start()
                self._fetcher.start()
                if self._coordinator is not None:
                    self._coordinator.start()
            self._started = True
            if self._subs.assignment:
                self._fetcher.wake()

    def _on_data(self) -> None:
        if self._fetcher.error is not None:
            # The fetcher died (it reports here): a sync poll() that pops the lease itself
            # (Consumer.poll) raises the error next, not after the lease's records.
            self._buffer.stop_lease()
        loop, ev = self._loop, self._data
        if loop is None or ev is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            ev.set()
        else:
            loop.call_soon_threadsafe(ev.set)

    async def close(self, autocommit: bool = True, timeout: float | None = None) -> None:
        """Commit (when ``enable.auto.commit`` and ``autocommit``), call the listener's
        ``on_partitions_revoked``, leave the group, stop fetching and close connections.
        Idempotent.

        The consumer keeps working until the listener returns, so the listener can commit
        its final offsets. Waiting for the brokers — the auto commit, the listener's commits
        (which raise KafkaTimeoutError to it when out of time), leaving the group — stops
        after ``timeout``; the consumer is closed then regardless. A failed commit here is
        logged, not raised.

        Args:
            autocommit: commit every record handed out first, when auto commit is enabled.
            timeout: seconds to wait for the brokers (default 30, DEFAULT_CLOSE_TIMEOUT).

        Raises:
            InvalidArgumentError: a negative timeout.
        """
        await self._close(autocommit, timeout, processed=True)

    async def _close(self, autocommit: bool, timeout: float | None, *, processed: bool
                     ) -> None:
        deadline = close_deadline(timeout)
        if self._closed or self._closing:
            return
        self._closing = True
        try:
            if self._started and self._coordinator is not None:
                await self._coordinator.close(autocommit=autocommit, deadline=deadline,
                                              processed=processed)
        finally:
            self._closed = True
            # Closed from now on: a sync poll() popping the lease itself (Consumer.poll)
            # goes back to the checks that raise.
            self._buffer.stop_lease()
            await self._fetcher.close()
            await self._client.close()
            await self._hooks.close()
            self._buffer.clear()
            if self._data is not None:
                self._data.set()

    async def __aenter__(self) -> AsyncConsumer[KeyT, ValueT]:
        await self.start()
        return self

    async def __aexit__(self, exc_type: object, *exc: object) -> None:
        # Leaving on an error, perhaps in the middle of a batch: commit only what the
        # application moved past by polling again.
        await self._close(True, None, processed=exc_type is None)

    def _check(self) -> None:
        if self._closed:
            raise IllegalStateError("consumer is closed")
        err = self._fetcher.error
        if err is not None:
            self._fetcher.error = None
            raise err
        if self._coordinator is not None:
            self._coordinator.raise_if_failed()

    # --- subscription --------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str] | str | None = None, *,
                  pattern: str | re.Pattern[str] | None = None, listener: Any = None) -> None:
        """Join the group (``group.id``) and consume what it assigns.

        Args:
            topics: topic names; a name starting with ``^`` is a regular expression
                matched from the start of topic names (confluent-kafka's form); or
            pattern: a regular expression matched (fully) against every topic name,
                re-evaluated on each metadata refresh.
            listener: an object with ``on_partitions_revoked(partitions)``,
                ``on_partitions_assigned(partitions)`` and optionally
                ``on_partitions_lost(partitions)``; each may be a plain or ``async`` method.
                They run before fetching resumes, so committing in
                ``on_partitions_revoked`` is safe.

        Raises:
            ConfigError: no ``group.id`` is configured.
            IllegalStateError: partitions are manually assigned.
            ValueError: neither or both of topics and pattern.
        """
        self._check()
        if not self._group_id or self._coordinator is None:
            raise ConfigError("subscribe() needs group.id; use assign() without a group")
        names, pattern = subscription_of(topics, pattern)
        self._subs.subscribe(names, pattern)
        self._coordinator.listener = listener
        self._coordinator.subscription_changed()

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly these partitions, without group management.

        Positions start from each partition's ``offset`` when given
        (``TopicPartition(t, p, offset)``, confluent-kafka's form; also
        ``OFFSET_BEGINNING`` / ``OFFSET_END``), else from the committed offsets (with
        ``group.id``) or ``auto.offset.reset``.

        Raises:
            IllegalStateError: subscribed by topics or pattern.
            InvalidArgumentError: an offset below 0 that is no OFFSET_* constant.
        """
        self._check()
        given = list(partitions)
        parts = flat_partitions((given,))
        self._subs.assign(parts)
        self._client.add_topics({tp.topic for tp in parts})
        self._start_at(given)
        self._fetcher.wake()

    def assignment(self) -> set[TopicPartition]:
        """The partitions currently assigned to this consumer."""
        return set(self._subs.assignment)

    def subscription(self) -> set[str]:
        """The subscribed topic names (empty with a pattern or manual assignment)."""
        return set(self._subs.topics)

    def unsubscribe(self) -> None:
        """Leave the group (revoking partitions) or drop the manual assignment.

        No record of the group's assignment is handed out after this call. The hand-back
        runs in the background, as on a rebalance: with ``enable.auto.commit`` every record
        handed out is committed (as :meth:`close` does), then the listener's
        ``on_partitions_revoked`` is called for the old partitions (``on_partitions_lost``
        when the group no longer counted this member) — :meth:`position`,
        :meth:`commit` and :meth:`committed` work for them inside it — and the consumer
        leaves the group. A following :meth:`assign`, :meth:`subscribe` or :meth:`close`
        does not disturb it (close() completes it first).
        """
        self._check()
        if self._coordinator is not None and self._subs.subscribed:
            with self._buffer.lock:
                self._subs.retire()
            self._coordinator.unsubscribe()
        self._subs.unsubscribe()
        self._buffer.clear()

    # --- consuming -----------------------------------------------------------------------

    async def _wait(self, deadline: float | None) -> bool:
        """Wait until data arrives (the event was cleared before the last drain) or until
        ``deadline``; False on timeout."""
        assert self._data is not None
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            return False
        return await wait_event(self._data, remaining)

    def _polled(self) -> None:
        # A poll: the records handed out before count as processed (auto commit may cover
        # them). Bumped before the coordinator hears of it: see GroupCoordinator._await_poll.
        self._buffer.poll_seq += 1
        if self._coordinator is not None:
            self._coordinator.polled()

    async def getmany(self, timeout: float = 0.0, max_records: int | None = None, *,
                      timeout_ms: int | None = None
                      ) -> dict[TopicPartition, list[ConsumerRecord[KeyT, ValueT]]]:
        """Records of several partitions at once.

        Args:
            timeout: seconds to wait for the first record (0: return what is buffered).
            max_records: at most this many records (default ``max.poll.records``).
            timeout_ms: or the wait in milliseconds (aiokafka's keyword).

        Returns:
            Partition -> records in offset order; empty when none arrived in time.

        Raises:
            OffsetOutOfRangeResetError: a position is invalid and ``auto.offset.reset`` is
                ``none`` (raised until you seek).
            BrokerResponseError / CorruptRecordError: a partition failed for good.
            IllegalStateError: the consumer is closed.
            InvalidArgumentError: partitions given first (aiokafka's
                ``getmany(*partitions)``), which is not supported.
        """
        timeout = batch_timeout(timeout, timeout_ms)
        await self.start()
        limit = max_records or self._max_poll_records
        deadline = time.monotonic() + timeout if timeout is not None else None
        while True:
            self._check()
            self._polled()
            assert self._data is not None
            self._data.clear()
            got = self._buffer.drain(limit)
            if got or self._closed:
                return got
            if not await self._wait(deadline):
                self._check()
                return self._buffer.drain(limit)

    async def poll(self, timeout: float | None = None
                   ) -> ConsumerRecord[KeyT, ValueT] | None:
        """The next record.

        Args:
            timeout: seconds to wait (None or negative, librdkafka's -1: until a record
                arrives).

        Returns:
            A record, or None when none arrived in time.

        Raises:
            See :meth:`getmany`.
        """
        if (self._started and self._coordinator is None and not self._closed
                and self._fetcher.error is None):
            # Fast path (a record is buffered): nothing else to check without a group.
            rec = self._buffer.drain_one()
            if rec is not None:
                decode = self._decode
                if decode is None:
                    return rec
                out: ConsumerRecord[KeyT, ValueT] = (
                    await decode(rec) if self._decode_awaits else decode(rec))
                return out
        if not self._started:
            await self.start()
        deadline: float | None = None
        while True:
            self._check()
            self._polled()
            assert self._data is not None
            self._data.clear()
            rec = self._buffer.drain_one()
            if rec is not None or self._closed:
                return await self._decoded(rec)
            if deadline is None and timeout is not None and timeout >= 0:
                # Only now: a record already buffered needs no clock reading.
                deadline = time.monotonic() + timeout
            if not await self._wait(deadline):
                self._check()
                return await self._decoded(self._buffer.drain_one())

    async def _decoded(self, rec: ConsumerRecord[Any, Any] | None
                       ) -> ConsumerRecord[Any, Any] | None:
        """``rec`` through ``_decode`` (poll()'s slower paths)."""
        decode = self._decode
        if rec is None or decode is None:
            return rec
        out: ConsumerRecord[Any, Any] = (
            await decode(rec) if self._decode_awaits else decode(rec))
        return out

    async def consume(self, num_records: int = 1, timeout: float | None = None
                      ) -> list[ConsumerRecord[KeyT, ValueT]]:
        """Up to ``num_records`` records as one list (confluent-kafka's ``consume``).

        Waits until at least one record is available (or ``timeout`` seconds pass; None or
        negative: no limit), then returns what is buffered, at most ``num_records``.

        Raises:
            See :meth:`getmany`.
        """
        if num_records < 1:
            raise ValueError("num_records must be >= 1")
        got = await self.getmany(timeout=timeout if timeout is not None and timeout >= 0
                                 else 1e9,
                                 max_records=num_records)
        out: list[ConsumerRecord[KeyT, ValueT]] = []
        for recs in got.values():
            out.extend(recs)
        return out

    async def getone(self, *partitions: TopicPartition) -> ConsumerRecord[KeyT, ValueT]:
        """The next record, waiting as long as it takes (aiokafka's).

        Raises:
            InvalidArgumentError: partitions given: read some partitions only by pausing
                the others (pause()), or take a partition's records from getmany().
            IllegalStateError: the consumer was closed while waiting.
            See :meth:`getmany` for the rest.
        """
        if partitions:
            raise InvalidArgumentError(GETONE_PARTITIONS)
        while True:
            rec = await self.poll(None)
            if rec is not None:
                return rec
            self._check()

    def __aiter__(self) -> AsyncIterator[ConsumerRecord[KeyT, ValueT]]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[ConsumerRecord[KeyT, ValueT]]:
        while not self._closed:
            got = await self.getmany(timeout=1.0)
            for recs in got.values():
                for rec in recs:
                    yield rec

    @property
    def client(self) -> AsyncKafkaClient:
        """The network core this consumer uses."""
        return self._client


def _make_coordinator(consumer: AsyncConsumer[Any, Any], settings: GroupSettings
                      ) -> GroupMembership:
    return make_coordinator(consumer._client, consumer._subs, settings,
                            buffer=consumer._buffer, wake=lambda: consumer._fetcher.wake(),
                            listener_runner=consumer._listener_runner)
