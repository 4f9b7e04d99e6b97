"""The asyncio share consumer (KIP-932, "queues for Kafka").

A share group delivers each record to one member at a time, whatever the partition: members
share partitions instead of owning them. Each leader broker *acquires* records for a member
(locking them to it for the group's record lock duration) and hands them out in ShareFetch
responses; the member settles each one with an acknowledgement: accept, release (delivered
again, to any member, with a higher delivery count) or reject. Acknowledgements travel with
the next ShareFetch to the partition's leader, or alone in a ShareAcknowledge (commits,
close).

:mod:`._sessions` makes the requests to the leaders (in share sessions), :mod:`._membership`
keeps the member in its group, and :mod:`._acks` tracks which record is held and how it was
settled. This class hands records out, takes the application's acknowledgements, and closes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Generic, cast

from kontrakt._config import ClientConfig
from kontrakt._types import ConsumerRecord, TopicPartition
from kontrakt.clients._settings import ClientSettings
from kontrakt.clients.client import AsyncKafkaClient
from kontrakt.clients.consumer._parts import KeyT, ValueT
from kontrakt.clients.share._acks import AcknowledgeType, PartitionAcks
from kontrakt.clients.share._config import SHARE_CONSUMER_OPTIONS
from kontrakt.clients.share._membership import ShareGroupMembership
from kontrakt.clients.share._metrics import ShareConsumerMetrics
from kontrakt.clients.share._sessions import AcknowledgedHook, ShareSessions
from kontrakt.errors import (
    IllegalStateError,
    InvalidArgumentError,
    KafkaError,
    KafkaTimeoutError,
)

__all__ = ["AcknowledgementCommitCallback", "AsyncShareConsumer"]

log = logging.getLogger("kontrakt.share")

Record = ConsumerRecord[bytes | None, bytes | None]

#: ``callback(offsets, error)``: the broker answered the acknowledgements of ``offsets``
#: (``{TopicPartition: {offset, ...}}``, one partition a call) with ``error``, or None when
#: it took them (confluent-kafka's and the Java client's AcknowledgementCommitCallback).
AcknowledgementCommitCallback = AcknowledgedHook

#: Seconds close() waits for the brokers by default.
_CLOSE_TIMEOUT = 30.0


class AsyncShareConsumer(Generic[KeyT, ValueT]):
    """Consume records through a share group (KIP-932): the group's members share the
    partitions of the topics they subscribe to, and each record is delivered to one member
    at a time until it is accepted or rejected.

    Args:
        config: Kafka property names to values; ``bootstrap.servers`` and ``group.id`` are
            required.
        **kwargs: the same options with snake_case names (``group_id=``).

    Options: the network options of :class:`~kontrakt.AsyncKafkaClient`, and
    ``group.id``, ``share.acknowledgement.mode`` (``implicit``, the default, or
    ``explicit``), ``max.poll.records`` (500), ``fetch.min.bytes``, ``fetch.max.wait.ms``
    (500), ``fetch.max.bytes``, ``check.crcs``, ``client.rack``.

    Acknowledgement: in implicit mode every record a :meth:`poll` returned is accepted by the
    next :meth:`poll`, :meth:`commit_sync`, :meth:`commit_async` or :meth:`close`. In
    explicit mode the application calls :meth:`acknowledge` for each record; records it did
    not settle stay locked to this member until the broker's lock times out, or until
    :meth:`close` releases them. Acknowledgements are sent with the next fetch to the
    partition's leader, or at once by :meth:`commit_sync`.

    Its records are typed ``ConsumerRecord[bytes | None, bytes | None]``; the type
    parameters are for :class:`~kontrakt.clients.serializing.AsyncDeserializingShareConsumer`.

    Raises:
        ConfigError: unknown option, bad value, or no ``group.id``.

    Example::

        async with AsyncShareConsumer(bootstrap_servers="127.0.0.1:9092",
                                      group_id="workers") as consumer:
            consumer.subscribe(["jobs"])
            while True:
                for record in await consumer.poll(1.0):
                    handle(record)
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self.config = cfg = ClientConfig(SHARE_CONSUMER_OPTIONS, config, **kwargs)
        group_id: str = cfg.require("group.id")
        settings = ClientSettings.of(cfg)
        self._client = AsyncKafkaClient(_settings=settings)
        self._client.owner = "AsyncShareConsumer"
        self._explicit = cfg["share.acknowledgement.mode"] == "explicit"
        self._max_records = int(cfg["max.poll.records"])
        self._fetch_max_wait = cfg["fetch.max.wait.ms"] / 1000
        self._request_timeout = settings.request_timeout
        self._membership = ShareGroupMembership(
            self._client, group_id, rack=cfg.get("client.rack"),
            retry_backoff=settings.retry_backoff, retry_backoff_max=settings.retry_backoff_max)
        self._book: dict[TopicPartition, PartitionAcks] = {}
        self._metrics = metrics = ShareConsumerMetrics()
        self._membership.on_heartbeat = metrics.heartbeat_done
        self._membership.on_assignment = metrics.rebalanced
        self._sessions = ShareSessions(
            self._client, self._membership, self._book, max_records=self._max_records,
            fetch_min_bytes=int(cfg["fetch.min.bytes"]),
            fetch_max_bytes=int(cfg["fetch.max.bytes"]), check_crcs=bool(cfg["check.crcs"]),
            request_timeout=settings.request_timeout, metrics=metrics)
        self._commits: set[asyncio.Task[Any]] = set()
        self._commit_error: BaseException | None = None
        self._ack_callback: AcknowledgementCommitCallback | None = None
        self._sessions.on_acknowledged = self._acknowledged
        self._started = False
        self._closed = False

    # --- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Connect (bootstrap metadata). Idempotent; the first call of any other method
        starts the consumer too.

        Raises:
            NoBrokersAvailableError: no broker reachable within ``request.timeout.ms``.
        """
        self._check_open()
        if not self._started:
            await self._client.start()
            self._started = True

    async def __aenter__(self) -> AsyncShareConsumer[KeyT, ValueT]:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def group_id(self) -> str:
        """The share group."""
        return self._membership.group_id

    @property
    def member_id(self) -> str:
        """This member's id (a UUID made by the client, kept for its life)."""
        return self._membership.member_id

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("share consumer is closed")

    def _check(self) -> None:
        self._check_open()
        self._membership.check()
        err, self._commit_error = self._commit_error, None
        if err is not None:
            raise err

    # --- subscription --------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str] | str) -> None:
        """Join the share group for ``topics`` (replacing any previous subscription).
        Returns at once; the membership is kept in the background.

        Raises:
            IllegalStateError: closed, or not called on the consumer's event loop.
            InvalidArgumentError: no topics, or a topic name that is not a string.
        """
        self._check()
        names = [topics] if isinstance(topics, str) else list(topics)
        if not names or not all(isinstance(t, str) and t for t in names):
            raise InvalidArgumentError(f"subscribe() needs topic names, got {topics!r}")
        self._membership.subscribe(names)

    def unsubscribe(self) -> None:
        """Leave the share group, in the background: first the records held are settled
        as by :meth:`close` (accepted in implicit mode, released otherwise) and the
        acknowledgements sent, then the member leaves.

        Raises:
            IllegalStateError: closed, or not called on the consumer's event loop.
        """
        self._check()
        self._settle_delivered(AcknowledgeType.RELEASE if self._explicit
                               else AcknowledgeType.ACCEPT)
        self._settle_delivered(AcknowledgeType.RELEASE, buffered=True)
        self._background(self._leave_after_acknowledging())

    async def _leave_after_acknowledging(self) -> None:
        try:
            if self._started:
                await self._sessions.acknowledge_all()
        finally:
            self._membership.subscribe([])

    def _background(self, coro: Any) -> None:
        """Run ``coro`` as a task close() waits for; its error is raised by the next call."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            coro.close()
            raise IllegalStateError("an AsyncShareConsumer must be used on a running event "
                                    "loop (use ShareConsumer in blocking code)") from None
        task = loop.create_task(self._supervised(coro))
        self._commits.add(task)
        task.add_done_callback(self._commits.discard)

    async def _supervised(self, coro: Any) -> None:
        try:
            await coro
        except Exception as exc:
            self._commit_error = exc

    def subscription(self) -> list[str]:
        """The subscribed topic names, sorted."""
        return self._membership.topics

    def assignment(self) -> set[TopicPartition]:
        """The partitions the group's coordinator assigned this member now."""
        return set(self._membership.assignment)

    # --- consuming -----------------------------------------------------------------------

    async def poll(self, timeout: float | None = None) -> list[ConsumerRecord[KeyT, ValueT]]:
        """Fetch the next records acquired for this member.

        In implicit mode, the records the previous poll returned are accepted first.

        Args:
            timeout: seconds to wait for records (None: until some arrive; 0: what one
                round of fetches brings).

        Returns:
            Up to ``max.poll.records`` records (an empty list when the timeout passed).

        Raises:
            IllegalStateError: closed, or not subscribed.
            KafkaError: the share group's coordinator refused the member (raised from the
                background heartbeat), or a broker refused the share fetch.
            CorruptRecordError: a fetched batch is malformed (CRC mismatch with
                ``check.crcs``).
        """
        self._check()
        if not self._membership.topics:
            raise IllegalStateError("poll() needs a subscription: call subscribe() first")
        await self.start()
        self._metrics.polled()
        if not self._explicit:
            self._settle_delivered(AcknowledgeType.ACCEPT)
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        while True:
            records = self._hand_out()
            if records:
                return cast("list[ConsumerRecord[KeyT, ValueT]]", records)
            remaining = None if deadline is None else deadline - time.monotonic()
            wait = self._fetch_max_wait if remaining is None else min(
                self._fetch_max_wait, max(0.0, remaining))
            await self._sessions.fetch_round(wait)
            self._check()
            records = self._hand_out()
            if records:
                return cast("list[ConsumerRecord[KeyT, ValueT]]", records)
            if deadline is not None and time.monotonic() >= deadline:
                return []

    def _hand_out(self) -> list[Record]:
        out: list[Record] = []
        for acks in self._book.values():
            if len(out) >= self._max_records:
                break
            if acks.buffered:
                out.extend(acks.hand_out(self._max_records - len(out)))
        self._metrics.handed_out(len(out))
        return out

    def _settle_delivered(self, ack_type: int, *, buffered: bool = False) -> None:
        for acks in self._book.values():
            acks.settle_all(ack_type, buffered=buffered)

    def _take_back(self, records: Sequence[ConsumerRecord[Any, Any]]) -> None:
        """Records a poll returned that the application never got (a deserializing
        consumer stopped before them): the next poll hands them out again, first, and
        nothing settles them meanwhile (close() releases them)."""
        by_tp: dict[TopicPartition, list[ConsumerRecord[Any, Any]]] = {}
        for rec in records:
            by_tp.setdefault(TopicPartition(rec.topic, rec.partition), []).append(rec)
        for tp, recs in by_tp.items():
            acks = self._book.get(tp)
            if acks is not None:
                acks.give_back(recs)

    def _undeserializable(self, record: ConsumerRecord[Any, Any]) -> None:
        """A record handed out whose key or value could not be deserialized. Implicit
        mode releases it now (never accepted: the group delivers it again, with a higher
        delivery count, until its delivery attempt limit archives it); explicit mode
        leaves it held undecided for the application's :meth:`acknowledge`."""
        if not self._explicit:
            acks = self._book.get(TopicPartition(record.topic, record.partition))
            if acks is not None:
                acks.acknowledge(record.offset, int(AcknowledgeType.RELEASE))

    def metrics(self) -> dict[str, Any]:
        """Counters, rates and latencies, in the Java share consumer's metric names.
        Totals count since the consumer was created; ``*-rate`` values are per second over
        the last minute; latencies and poll gaps are in milliseconds.

        Returns:
            ``records-consumed-total`` / ``-rate`` (records handed to the application,
            counted again if taken back and handed out anew), ``bytes-consumed-total`` /
            ``-rate`` (record bytes of the ShareFetch responses), ``records-per-request-avg``
            / ``-max`` (records a ShareFetch acquired for this member), ``fetch-total`` /
            ``-rate``, ``fetch-latency-avg`` / ``-max`` (the broker's wait included),
            ``fetch-size-avg`` / ``-max``, ``fetch-throttle-time-avg`` / ``-max``,
            ``acknowledgements-send-total`` / ``-rate`` (record acknowledgements sent, gaps
            included, resent ones counted again), ``acknowledgements-error-total`` /
            ``-rate`` (of those, answered with an error or dropped with a lost share
            session), ``heartbeat-total`` / ``-rate``, ``heartbeat-response-time-max``,
            ``last-heartbeat-seconds-ago`` (None before the first), ``rebalance-total``
            (assignment changes), ``assigned-partitions``, ``time-between-poll-avg`` /
            ``-max`` and ``last-poll-seconds-ago`` (None before the first poll).
        """
        return self._metrics.snapshot(len(self._membership.assignment))

    # --- acknowledging -------------------------------------------------------------------

    def acknowledge(self, record: ConsumerRecord[Any, Any],
                    ack_type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        """Settle a record the last polls returned (explicit mode). The acknowledgement
        goes out with the next fetch from the record's leader, or with
        :meth:`commit_sync` / :meth:`commit_async`.

        Args:
            record: a record :meth:`poll` returned and not settled yet.
            ack_type: ACCEPT (done), RELEASE (deliver again) or REJECT (never again).

        Raises:
            IllegalStateError: implicit acknowledgement mode, or a record that is not held
                undecided by this consumer (never delivered, or settled already).
        """
        self.acknowledge_offset(record.topic, record.partition, record.offset, ack_type)

    def acknowledge_offset(self, topic: str, partition: int, offset: int,
                           ack_type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        """Settle the record at ``topic``/``partition``/``offset``; see :meth:`acknowledge`."""
        self._check()
        if not self._explicit:
            raise IllegalStateError("acknowledge() needs share.acknowledgement.mode=explicit")
        kind = AcknowledgeType(ack_type)
        acks = self._book.get(TopicPartition(topic, partition))
        if acks is None or not acks.acknowledge(offset, int(kind)):
            raise IllegalStateError(f"record {topic}[{partition}]@{offset} is not held "
                                    "undecided by this share consumer")

    def delivery_count(self, record: ConsumerRecord[Any, Any]) -> int | None:
        """How many times the group has delivered ``record`` (1 the first time), while it
        is held undecided by this consumer; None otherwise."""
        acks = self._book.get(TopicPartition(record.topic, record.partition))
        return None if acks is None else acks.delivered.get(record.offset)

    def set_acknowledgement_commit_callback(
            self, callback: AcknowledgementCommitCallback | None) -> None:
        """Call ``callback(offsets, error)`` each time a broker has answered a partition's
        acknowledgements (sent with a fetch, :meth:`commit_sync`, :meth:`commit_async` or
        :meth:`close`): ``offsets`` is ``{TopicPartition: {offset, ...}}`` for that one
        partition, ``error`` the broker's (or a lost share session's) error or None. It
        runs on the consumer's event loop as the answer arrives; acknowledgements that
        a lost connection took are sent again, and reported once answered. An exception
        it raises is raised by the next call of this consumer. None removes it.

        Args:
            callback: ``(offsets, error) -> None``, or None.
        """
        self._check_open()
        if callback is not None and not callable(callback):
            raise InvalidArgumentError(f"callback must be callable, got {callback!r}")
        self._ack_callback = callback

    def _acknowledged(self, offsets: dict[TopicPartition, set[int]],
                      error: KafkaError | None) -> None:
        callback = self._ack_callback
        if callback is None:
            return
        try:
            callback(offsets, error)
        except Exception as exc:
            log.warning("acknowledgement commit callback raised %r", exc)
            if self._commit_error is None:
                self._commit_error = exc

    async def commit_sync(self, timeout: float | None = None
                          ) -> dict[TopicPartition, KafkaError | None]:
        """Send every pending acknowledgement now (in implicit mode, accepting the records
        the last poll returned first) and wait for the brokers' answers.

        Args:
            timeout: seconds to wait (None: ``request.timeout.ms``).

        Returns:
            Each partition acknowledged since the last commit_sync() (also by fetches and
            commit_async()) and its error, or None where the broker took them. A
            connection lost on the way is reported here too (as KafkaConnectionError), and
            those acknowledgements are sent again with the next fetch or commit.

        Raises:
            KafkaTimeoutError: the brokers did not answer within the timeout.
        """
        self._check()
        await self.start()
        if not self._explicit:
            self._settle_delivered(AcknowledgeType.ACCEPT)
        limit = self._request_timeout if timeout is None else timeout
        try:
            await asyncio.wait_for(self._sessions.acknowledge_all(), limit)
        except asyncio.TimeoutError:
            raise KafkaTimeoutError(f"commit_sync() did not finish within {limit}s; the "
                                    "acknowledgements are sent again later") from None
        results, self._sessions.ack_results = self._sessions.ack_results, {}
        return results

    def commit_async(self) -> None:
        """Like :meth:`commit_sync`, in the background; an error is raised by the next call
        of this consumer, and the per-partition results go to the next commit_sync()."""
        self._check()
        if not self._explicit:
            self._settle_delivered(AcknowledgeType.ACCEPT)
        self._background(self._commit_in_background())

    async def _commit_in_background(self) -> None:
        await self.start()
        await self._sessions.acknowledge_all()

    # --- closing -------------------------------------------------------------------------

    async def close(self, timeout: float | None = None) -> None:
        """Settle what this member holds, close its share sessions, leave the group and
        disconnect. Idempotent.

        Implicit mode accepts the records the last poll returned; explicit mode releases
        the records not acknowledged. Records fetched but never returned are released.

        Args:
            timeout: seconds the brokers get (default 30); past it the consumer closes
                anyway, and the brokers release its records when their locks time out.
        """
        if self._closed:
            return
        self._closed = True
        budget = _CLOSE_TIMEOUT if timeout is None else max(0.0, timeout)
        deadline = time.monotonic() + budget
        try:
            if self._started:
                self._settle_delivered(AcknowledgeType.RELEASE if self._explicit
                                       else AcknowledgeType.ACCEPT)
                self._settle_delivered(AcknowledgeType.RELEASE, buffered=True)
                if self._commits:
                    await asyncio.wait(list(self._commits), timeout=budget)
                try:
                    await asyncio.wait_for(self._sessions.acknowledge_all(closing=True),
                                           max(0.001, deadline - time.monotonic()))
                except (KafkaError, asyncio.TimeoutError) as exc:
                    log.info("share consumer close: acknowledging failed: %s", exc)
            # Also when no call started the consumer: subscribe() alone joins the group.
            try:
                await asyncio.wait_for(self._membership.leave(),
                                       max(0.001, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                log.info("share consumer close: leaving the group timed out")
        finally:
            await self._client.close(max(0.001, deadline - time.monotonic()))
