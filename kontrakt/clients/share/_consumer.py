"""The asyncio share consumer (KIP-932, "queues for Kafka").

A share group delivers each record to one member at a time, whatever the partition: members
share partitions instead of owning them. Each leader broker *acquires* records for a member
(locking them to it for the group's record lock duration) and hands them out in ShareFetch
responses; the member settles each one with an acknowledgement: accept, release (delivered
again, to any member, with a higher delivery count) or reject. Acknowledgements travel with
the next ShareFetch to the partition's leader, or alone in a ShareAcknowledge (commits,
close).

Requests to one leader form a *share session*: epoch 0 opens it with the partitions to
fetch, each next request carries the next epoch and only what changed (new partitions,
partitions to forget, acknowledgements), and epoch -1 closes it. One lock per leader keeps
the epochs of a poll's fetch and a commit's acknowledgement in order.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kontrakt._config import ClientConfig
from kontrakt._types import ConsumerRecord, TopicPartition
from kontrakt.clients._settings import ClientSettings
from kontrakt.clients._wait import wait_event
from kontrakt.clients.client import AsyncKafkaClient
from kontrakt.clients.consumer._decoding import parse_partition
from kontrakt.clients.share._acks import AckBatch, AcknowledgeType, PartitionAcks
from kontrakt.clients.share._config import SHARE_CONSUMER_OPTIONS
from kontrakt.clients.share._membership import ShareGroupMembership
from kontrakt.errors import (
    IllegalStateError,
    InvalidArgumentError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
)
from kontrakt.protocol.errors import (
    InvalidShareSessionEpochError,
    ShareSessionNotFoundError,
    for_code,
)
from kontrakt.protocol.messages import ShareAcknowledgeRequest, ShareFetchRequest

__all__ = ["AsyncShareConsumer"]

log = logging.getLogger("kontrakt.share")

Record = ConsumerRecord[bytes | None, bytes | None]

#: Top-level errors after which the broker has no session for this member: open a new one.
_SESSION_LOST = frozenset((ShareSessionNotFoundError.code, InvalidShareSessionEpochError.code))
_INT32_MAX = 2**31 - 1
#: Seconds close() waits for the brokers by default.
_CLOSE_TIMEOUT = 30.0

_FetchTopic = ShareFetchRequest.FetchTopic
_FetchPartition = _FetchTopic.FetchPartition
_FetchAck = _FetchPartition.AcknowledgementBatch
_ForgottenTopic = ShareFetchRequest.ForgottenTopic
_AckTopic = ShareAcknowledgeRequest.AcknowledgeTopic
_AckPartition = _AckTopic.AcknowledgePartition
_AckBatch = _AckPartition.AcknowledgementBatch


@dataclass(slots=True)
class _Session:
    """The share session with one leader."""

    epoch: int = 0
    partitions: set[TopicPartition] = field(default_factory=set)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def advance(self) -> None:
        self.epoch = 1 if self.epoch >= _INT32_MAX else self.epoch + 1

    def reset(self) -> None:
        self.epoch = 0
        self.partitions.clear()


class AsyncShareConsumer:
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
        self._fetch_min_bytes = int(cfg["fetch.min.bytes"])
        self._fetch_max_wait = cfg["fetch.max.wait.ms"] / 1000
        self._fetch_max_bytes = int(cfg["fetch.max.bytes"])
        self._check_crcs = bool(cfg["check.crcs"])
        self._request_timeout = settings.request_timeout
        self._membership = ShareGroupMembership(
            self._client, group_id, rack=cfg.get("client.rack"),
            retry_backoff=settings.retry_backoff, retry_backoff_max=settings.retry_backoff_max)
        self._book: dict[TopicPartition, PartitionAcks] = {}
        self._sessions: dict[int, _Session] = {}
        # Per-partition outcome of the acknowledgements sent since the last commit_sync().
        self._ack_results: dict[TopicPartition, KafkaError | None] = {}
        self._commits: set[asyncio.Task[Any]] = set()
        self._commit_error: BaseException | None = None
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

    async def __aenter__(self) -> AsyncShareConsumer:
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
                await self._acknowledge_all()
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

    async def poll(self, timeout: float | None = None) -> list[Record]:
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
        if not self._explicit:
            self._settle_delivered(AcknowledgeType.ACCEPT)
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        while True:
            records = self._hand_out()
            if records:
                return records
            remaining = None if deadline is None else deadline - time.monotonic()
            wait = self._fetch_max_wait if remaining is None else min(
                self._fetch_max_wait, max(0.0, remaining))
            await self._fetch_round(wait)
            self._check()
            records = self._hand_out()
            if records:
                return records
            if deadline is not None and time.monotonic() >= deadline:
                return []

    def _hand_out(self) -> list[Record]:
        out: list[Record] = []
        for acks in self._book.values():
            if len(out) >= self._max_records:
                break
            if acks.buffered:
                out.extend(acks.hand_out(self._max_records - len(out)))
        return out

    def _settle_delivered(self, ack_type: int, *, buffered: bool = False) -> None:
        for acks in self._book.values():
            acks.settle_all(ack_type, buffered=buffered)

    async def _fetch_round(self, wait: float) -> None:
        """One ShareFetch to each leader of an assigned partition (at once), carrying the
        pending acknowledgements; waits for the assignment when there is none."""
        membership = self._membership
        assigned = membership.assignment
        if not assigned:
            await self._send_orphan_acks()
            membership.assignment_changed.clear()
            if not membership.assignment:
                await wait_event(membership.assignment_changed, wait)
            return
        by_node: dict[int, list[TopicPartition]] = {}
        cluster = self._client.cluster
        for tp in assigned:
            leader = cluster.leader_for(tp.topic, tp.partition)
            if leader < 0:
                self._client.request_metadata_refresh()
                continue
            by_node.setdefault(leader, []).append(tp)
        await self._send_orphan_acks(exclude=assigned)
        if not by_node:
            await asyncio.sleep(min(wait, 0.05))
            return
        await asyncio.gather(*(self._share_fetch(node, sorted(tps), wait)
                               for node, tps in by_node.items()))

    def _topic_ids(self) -> dict[str, Any]:
        return {name: info.topic_id for name, info in self._client.cluster.topics.items()}

    def _session(self, node: int) -> _Session:
        session = self._sessions.get(node)
        if session is None:
            session = self._sessions[node] = _Session()
        return session

    async def _share_fetch(self, node: int, tps: list[TopicPartition], wait: float) -> None:
        session = self._session(node)
        async with session.lock:
            ids = self._topic_ids()
            tps = [tp for tp in tps if tp.topic in ids]
            wanted = set(tps)
            taken: dict[TopicPartition, dict[int, int]] = {}
            topics: dict[str, list[Any]] = {}
            for tp in tps:
                acks = self._book.setdefault(tp, PartitionAcks())
                batches: list[AckBatch] = []
                # A request opening a session may not carry acknowledgements (the broker
                # answers INVALID_REQUEST): they go with the next one.
                if acks.pending and session.epoch != 0:
                    taken[tp] = dict(acks.pending)
                    batches = acks.take_pending()
                if session.epoch == 0 or tp not in session.partitions or batches:
                    topics.setdefault(tp.topic, []).append(_FetchPartition(
                        partition_index=tp.partition,
                        acknowledgement_batches=[_FetchAck(first_offset=b.first,
                                                           last_offset=b.last,
                                                           acknowledge_types=list(b.types))
                                                 for b in batches]))
            forgotten: dict[str, list[int]] = {}
            if session.epoch != 0:
                for tp in session.partitions - wanted:
                    if tp.topic in ids:
                        forgotten.setdefault(tp.topic, []).append(tp.partition)
            req = ShareFetchRequest(
                group_id=self.group_id, member_id=self.member_id,
                share_session_epoch=session.epoch, max_wait_ms=int(wait * 1000),
                min_bytes=self._fetch_min_bytes, max_bytes=self._fetch_max_bytes,
                max_records=self._max_records, batch_size=self._max_records,
                topics=[_FetchTopic(topic_id=ids[t], partitions=ps)
                        for t, ps in topics.items()],
                forgotten_topics_data=[_ForgottenTopic(topic_id=ids[t], partitions=ps)
                                       for t, ps in forgotten.items()])
            try:
                resp = await self._client.request(
                    req, node=node, timeout=wait + self._request_timeout)
            except (KafkaConnectionError, KafkaTimeoutError, asyncio.CancelledError) as exc:
                # The session is the member's, not the connection's: the same epoch goes
                # again with these acknowledgements. Had the broker taken this request, it
                # answers INVALID_SHARE_SESSION_EPOCH and the session starts over.
                log.debug("share fetch to node %s failed: %r", node, exc)
                self._restore(taken)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                return
            if resp.error_code:
                self._restore(taken)
                if resp.error_code in _SESSION_LOST:
                    self._lose_session(node, session, resp.error_code)
                    return
                error = for_code(resp.error_code)(
                    f"ShareFetch to node {node}: {resp.error_message or ''}")
                if error.retriable:
                    self._client.request_metadata_refresh()
                    return
                raise error
            session.advance()
            session.partitions = wanted
            self._take_response(resp, taken)

    def _lose_session(self, node: int, session: _Session, code: int) -> None:
        """The broker has no session for this member any more (the mock, for one, drops a
        member's share session with its connection): it released the records acquired in
        it, so their acknowledgements cannot be sent (reported as ``code``'s error
        instead); the next fetch opens a new session."""
        error = for_code(code)
        log.info("share session with node %s lost (%s): opening a new one", node,
                 error.__name__)
        for tp in session.partitions:
            acks = self._book.get(tp)
            if acks is None:
                continue
            # Records fetched in the lost session and not handed out yet are the group's
            # again: another member may be getting them now.
            acks.buffered.clear()
            if acks.pending:
                acks.pending.clear()
                self._ack_results[tp] = error(f"acknowledging records of {tp}: the share "
                                              "session was lost")
        session.reset()

    def _restore(self, taken: Mapping[TopicPartition, Mapping[int, int]]) -> None:
        """Put back acknowledgements a failed request carried, to send again."""
        for tp, acks in taken.items():
            book = self._book.setdefault(tp, PartitionAcks())
            book.pending = {**acks, **book.pending}

    def _take_response(self, resp: Any, sent: Mapping[TopicPartition, Any]) -> None:
        names = {tid: name for name, tid in self._topic_ids().items()}
        # A partition's fatal error is raised after every other partition's records are
        # taken: records acquired for this member must not be dropped with it.
        fatal: KafkaError | None = None
        for topic in resp.responses:
            name = names.get(topic.topic_id)
            if name is None:
                continue
            for part in topic.partitions:
                tp = TopicPartition(name, part.partition_index)
                if tp in sent:
                    self._record_ack_result(tp, part.acknowledge_error_code,
                                            part.acknowledge_error_message)
                if part.error_code:
                    err = for_code(part.error_code)
                    log.debug("share fetch %s: %s", tp, err.__name__)
                    if err.invalid_metadata or err.retriable:
                        self._client.request_metadata_refresh()
                    elif fatal is None:
                        fatal = err(f"ShareFetch {tp}: {part.error_message or ''}")
                if not part.acquired_records:
                    continue
                ranges = [(a.first_offset, a.last_offset, a.delivery_count)
                          for a in part.acquired_records]
                records, _, _ = parse_partition(
                    name, part.partition_index, part.records, min(r[0] for r in ranges),
                    read_committed=False, aborted=None, check_crcs=self._check_crcs)
                self._book.setdefault(tp, PartitionAcks()).acquire(records, ranges)
        if fatal is not None:
            raise fatal

    def _record_ack_result(self, tp: TopicPartition, code: int, message: str | None) -> None:
        if code:
            self._ack_results[tp] = for_code(code)(
                f"acknowledging records of {tp}: {message or ''}")
        else:
            self._ack_results.setdefault(tp, None)

    async def _send_orphan_acks(self, exclude: frozenset[TopicPartition] = frozenset()
                                ) -> None:
        """Acknowledgements of partitions no longer assigned go out with ShareAcknowledge."""
        if any(acks.pending for tp, acks in self._book.items() if tp not in exclude):
            await self._acknowledge_all(exclude=exclude)

    # --- acknowledging -------------------------------------------------------------------

    def acknowledge(self, record: Record, ack_type: AcknowledgeType = AcknowledgeType.ACCEPT
                    ) -> None:
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

    def delivery_count(self, record: Record) -> int | None:
        """How many times the group has delivered ``record`` (1 the first time), while it
        is held undecided by this consumer; None otherwise."""
        acks = self._book.get(TopicPartition(record.topic, record.partition))
        return None if acks is None else acks.delivered.get(record.offset)

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
            await asyncio.wait_for(self._acknowledge_all(), limit)
        except asyncio.TimeoutError:
            raise KafkaTimeoutError(f"commit_sync() did not finish within {limit}s; the "
                                    "acknowledgements are sent again later") from None
        results, self._ack_results = self._ack_results, {}
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
        await self._acknowledge_all()

    async def _acknowledge_all(self, *, closing: bool = False,
                               exclude: frozenset[TopicPartition] = frozenset()) -> None:
        """ShareAcknowledge of every pending acknowledgement, to each partition's leader at
        once; ``closing`` closes every share session too (epoch -1)."""
        by_node: dict[int, list[TopicPartition]] = {}
        cluster = self._client.cluster
        for tp, acks in self._book.items():
            if acks.pending and tp not in exclude:
                leader = cluster.leader_for(tp.topic, tp.partition)
                if leader >= 0:
                    by_node.setdefault(leader, []).append(tp)
        nodes = set(by_node)
        if closing:
            nodes |= {n for n, s in self._sessions.items() if s.epoch > 0}
        await asyncio.gather(*(self._share_acknowledge(n, by_node.get(n, []), closing)
                               for n in nodes))

    async def _share_acknowledge(self, node: int, tps: list[TopicPartition],
                                 closing: bool) -> None:
        session = self._session(node)
        async with session.lock:
            if session.epoch == 0:
                # No session with this broker (it was lost): the next fetch opens one and
                # the one after carries these. Closing, there is no next fetch: the records
                # they settle are freed when the member leaves (or their locks time out).
                if closing:
                    for tp in tps:
                        self._book[tp].pending.clear()
                return
            # A fetch may have carried some of them meanwhile.
            tps = [tp for tp in tps if self._book[tp].pending]
            if not tps and not closing:
                return
            ids = self._topic_ids()
            taken: dict[TopicPartition, dict[int, int]] = {}
            topics: dict[str, list[Any]] = {}
            for tp in tps:
                acks = self._book[tp]
                taken[tp] = dict(acks.pending)
                topics.setdefault(tp.topic, []).append(_AckPartition(
                    partition_index=tp.partition,
                    acknowledgement_batches=[_AckBatch(first_offset=b.first,
                                                       last_offset=b.last,
                                                       acknowledge_types=list(b.types))
                                             for b in acks.take_pending()]))
            req = ShareAcknowledgeRequest(
                group_id=self.group_id, member_id=self.member_id,
                share_session_epoch=-1 if closing else session.epoch,
                topics=[_AckTopic(topic_id=ids[t], partitions=ps) for t, ps in topics.items()])
            try:
                resp = await self._client.request(req, node=node)
            except (KafkaConnectionError, KafkaTimeoutError, asyncio.CancelledError) as exc:
                # Sent again with the same epoch (see _share_fetch), and reported.
                self._restore(taken)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                for tp in tps:
                    self._ack_results[tp] = exc
                return
            if resp.error_code in _SESSION_LOST:
                self._restore(taken)
                self._lose_session(node, session, resp.error_code)
                return
            if closing:
                session.reset()
            else:
                session.advance()
            if resp.error_code:
                error = for_code(resp.error_code)(
                    f"ShareAcknowledge to node {node}: {resp.error_message or ''}")
                for tp in tps:
                    self._ack_results[tp] = error
                return
            names = {tid: name for name, tid in ids.items()}
            for topic in resp.responses:
                name = names.get(topic.topic_id)
                if name is not None:
                    for part in topic.partitions:
                        self._record_ack_result(TopicPartition(name, part.partition_index),
                                                part.error_code, part.error_message)

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
                    await asyncio.wait_for(self._acknowledge_all(closing=True),
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
