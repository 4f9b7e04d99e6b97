"""A share consumer's share sessions (KIP-932): the ShareFetch and ShareAcknowledge
exchanges with each partition leader.

Requests to one leader form a *share session*: epoch 0 opens it with the partitions to
fetch (and no acknowledgements: a session-opening request carrying some is INVALID_REQUEST),
each next request carries the next epoch and only what changed (new partitions, partitions
to forget, acknowledgements), and epoch -1 closes it. One lock per leader keeps the epochs
of a poll's fetch and a commit's acknowledgement in order. The session belongs to the
member, not to the connection: a request lost with its connection is sent again with the
same epoch, and only the broker's SHARE_SESSION_NOT_FOUND / INVALID_SHARE_SESSION_EPOCH end
it (the mock broker ends a member's session with its connection).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kontrakt._types import TopicPartition
from kontrakt.clients._wait import wait_event
from kontrakt.clients.client import AsyncKafkaClient
from kontrakt.clients.consumer._decoding import parse_partition
from kontrakt.clients.share._acks import AckBatch, PartitionAcks
from kontrakt.clients.share._membership import ShareGroupMembership
from kontrakt.clients.share._metrics import ShareConsumerMetrics
from kontrakt.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from kontrakt.protocol.errors import (
    InvalidShareSessionEpochError,
    ShareSessionNotFoundError,
    for_code,
)
from kontrakt.protocol.messages import ShareAcknowledgeRequest, ShareFetchRequest

__all__ = ["AcknowledgedHook", "ShareSessions"]

log = logging.getLogger("kontrakt.share")

#: Top-level errors after which the broker has no session for this member: open a new one.
_SESSION_LOST = frozenset((ShareSessionNotFoundError.code, InvalidShareSessionEpochError.code))
_INT32_MAX = 2**31 - 1

#: ``hook(offsets, error)``: the broker answered the acknowledgements of ``offsets`` (one
#: partition's), with ``error`` or None.
AcknowledgedHook = Callable[[dict[TopicPartition, set[int]], "KafkaError | None"], None]

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


class ShareSessions:
    """The share sessions of one share consumer, and the acknowledgement outcomes.

    Args:
        client: the consumer's network core.
        membership: the consumer's group membership (its ids and assignment).
        book: the consumer's records and acknowledgements by partition (shared: fetches
            fill it, the consumer hands records out of it and settles them in it).
        max_records, fetch_min_bytes, fetch_max_bytes, check_crcs, request_timeout: the
            consumer's fetch settings (``request_timeout`` in seconds).
    """

    def __init__(self, client: AsyncKafkaClient, membership: ShareGroupMembership,
                 book: dict[TopicPartition, PartitionAcks], *, max_records: int,
                 fetch_min_bytes: int, fetch_max_bytes: int, check_crcs: bool,
                 request_timeout: float, metrics: ShareConsumerMetrics) -> None:
        self.client = client
        self.membership = membership
        self.book = book
        self.max_records = max_records
        self.fetch_min_bytes = fetch_min_bytes
        self.fetch_max_bytes = fetch_max_bytes
        self.check_crcs = check_crcs
        self.request_timeout = request_timeout
        self.metrics = metrics
        self.sessions: dict[int, _Session] = {}
        #: Per-partition outcome of the acknowledgements sent since the consumer last took
        #: them (commit_sync): None, or the error.
        self.ack_results: dict[TopicPartition, KafkaError | None] = {}
        #: Told of each partition's acknowledgements once their outcome is final.
        self.on_acknowledged: AcknowledgedHook | None = None

    async def fetch_round(self, wait: float) -> None:
        """One ShareFetch to each leader of an assigned partition (at once), carrying the
        pending acknowledgements; waits for the assignment when there is none."""
        membership = self.membership
        assigned = membership.assignment
        if not assigned:
            await self._send_orphan_acks()
            membership.assignment_changed.clear()
            if not membership.assignment:
                await wait_event(membership.assignment_changed, wait)
            return
        by_node: dict[int, list[TopicPartition]] = {}
        cluster = self.client.cluster
        for tp in assigned:
            leader = cluster.leader_for(tp.topic, tp.partition)
            if leader < 0:
                self.client.request_metadata_refresh()
                continue
            by_node.setdefault(leader, []).append(tp)
        await self._send_orphan_acks(exclude=assigned)
        if not by_node:
            await asyncio.sleep(min(wait, 0.05))
            return
        await asyncio.gather(*(self._share_fetch(node, sorted(tps), wait)
                               for node, tps in by_node.items()))

    def _topic_ids(self) -> dict[str, Any]:
        return {name: info.topic_id for name, info in self.client.cluster.topics.items()}

    def _session(self, node: int) -> _Session:
        session = self.sessions.get(node)
        if session is None:
            session = self.sessions[node] = _Session()
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
                acks = self.book.setdefault(tp, PartitionAcks())
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
                group_id=self.membership.group_id, member_id=self.membership.member_id,
                share_session_epoch=session.epoch, max_wait_ms=int(wait * 1000),
                min_bytes=self.fetch_min_bytes, max_bytes=self.fetch_max_bytes,
                max_records=self.max_records, batch_size=self.max_records,
                topics=[_FetchTopic(topic_id=ids[t], partitions=ps)
                        for t, ps in topics.items()],
                forgotten_topics_data=[_ForgottenTopic(topic_id=ids[t], partitions=ps)
                                       for t, ps in forgotten.items()])
            self.metrics.acknowledgements_sent(sum(len(a) for a in taken.values()))
            sent_at = time.monotonic()
            try:
                resp = await self.client.request(
                    req, node=node, timeout=wait + self.request_timeout)
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
                    self.client.request_metadata_refresh()
                    return
                raise error
            session.advance()
            session.partitions = wanted
            self._take_response(resp, taken, time.monotonic() - sent_at)

    def _lose_session(self, node: int, session: _Session, code: int) -> None:
        """The broker has no session for this member any more (the mock, for one, drops a
        member's share session with its connection): it released the records acquired in
        it, so their acknowledgements cannot be sent (reported as ``code``'s error
        instead); the next fetch opens a new session."""
        error = for_code(code)
        log.info("share session with node %s lost (%s): opening a new one", node,
                 error.__name__)
        for tp in session.partitions:
            acks = self.book.get(tp)
            if acks is None:
                continue
            # Records fetched in the lost session and not handed out yet are the group's
            # again: another member may be getting them now.
            acks.buffered.clear()
            if acks.pending:
                offsets = set(acks.pending)
                acks.pending.clear()
                self._record_ack_result(tp, offsets, error(
                    f"acknowledging records of {tp}: the share session was lost"))
        session.reset()

    def _restore(self, taken: Mapping[TopicPartition, Mapping[int, int]]) -> None:
        """Put back acknowledgements a failed request carried, to send again."""
        for tp, acks in taken.items():
            book = self.book.setdefault(tp, PartitionAcks())
            book.pending = {**acks, **book.pending}

    def _take_response(self, resp: Any, sent: Mapping[TopicPartition, Any],
                       latency: float) -> None:
        names = {tid: name for name, tid in self._topic_ids().items()}
        size = acquired = 0
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
                    self._record_ack_result(tp, sent[tp], self._ack_error(
                        tp, part.acknowledge_error_code, part.acknowledge_error_message))
                if part.error_code:
                    err = for_code(part.error_code)
                    log.debug("share fetch %s: %s", tp, err.__name__)
                    if err.invalid_metadata or err.retriable:
                        self.client.request_metadata_refresh()
                    elif fatal is None:
                        fatal = err(f"ShareFetch {tp}: {part.error_message or ''}")
                if not part.acquired_records:
                    continue
                ranges = [(a.first_offset, a.last_offset, a.delivery_count)
                          for a in part.acquired_records]
                records, _, _ = parse_partition(
                    name, part.partition_index, part.records, min(r[0] for r in ranges),
                    read_committed=False, aborted=None, check_crcs=self.check_crcs)
                acks = self.book.setdefault(tp, PartitionAcks())
                before = len(acks.buffered)
                acks.acquire(records, ranges)
                acquired += len(acks.buffered) - before
                size += len(part.records or b"")
        self.metrics.fetch_done(latency, size, acquired, resp.throttle_time_ms)
        if fatal is not None:
            raise fatal

    @staticmethod
    def _ack_error(tp: TopicPartition, code: int, message: str | None) -> KafkaError | None:
        if not code:
            return None
        return for_code(code)(f"acknowledging records of {tp}: {message or ''}")

    def _record_ack_result(self, tp: TopicPartition, offsets: Any,
                           error: KafkaError | None) -> None:
        """The acknowledgements of ``offsets`` of ``tp`` are settled with ``error`` (None:
        taken by the broker): kept for commit_sync() and told to :attr:`on_acknowledged`."""
        if error is not None:
            self.ack_results[tp] = error
            self.metrics.acknowledgements_failed(len(offsets))
        else:
            self.ack_results.setdefault(tp, None)
        if self.on_acknowledged is not None:
            self.on_acknowledged({tp: set(offsets)}, error)

    async def _send_orphan_acks(self, exclude: frozenset[TopicPartition] = frozenset()
                                ) -> None:
        """Acknowledgements of partitions no longer assigned go out with ShareAcknowledge."""
        if any(acks.pending for tp, acks in self.book.items() if tp not in exclude):
            await self.acknowledge_all(exclude=exclude)

    async def acknowledge_all(self, *, closing: bool = False,
                               exclude: frozenset[TopicPartition] = frozenset()) -> None:
        """ShareAcknowledge of every pending acknowledgement, to each partition's leader at
        once; ``closing`` closes every share session too (epoch -1)."""
        by_node: dict[int, list[TopicPartition]] = {}
        cluster = self.client.cluster
        for tp, acks in self.book.items():
            if acks.pending and tp not in exclude:
                leader = cluster.leader_for(tp.topic, tp.partition)
                if leader >= 0:
                    by_node.setdefault(leader, []).append(tp)
        nodes = set(by_node)
        if closing:
            nodes |= {n for n, s in self.sessions.items() if s.epoch > 0}
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
                        acks = self.book[tp]
                        if acks.pending:
                            offsets = set(acks.pending)
                            acks.pending.clear()
                            self._record_ack_result(tp, offsets, ShareSessionNotFoundError(
                                f"acknowledging records of {tp}: no share session with its "
                                "leader to send them in (the member is leaving)"))
                return
            # A fetch may have carried some of them meanwhile.
            tps = [tp for tp in tps if self.book[tp].pending]
            if not tps and not closing:
                return
            ids = self._topic_ids()
            taken: dict[TopicPartition, dict[int, int]] = {}
            topics: dict[str, list[Any]] = {}
            for tp in tps:
                acks = self.book[tp]
                taken[tp] = dict(acks.pending)
                topics.setdefault(tp.topic, []).append(_AckPartition(
                    partition_index=tp.partition,
                    acknowledgement_batches=[_AckBatch(first_offset=b.first,
                                                       last_offset=b.last,
                                                       acknowledge_types=list(b.types))
                                             for b in acks.take_pending()]))
            self.metrics.acknowledgements_sent(sum(len(a) for a in taken.values()))
            req = ShareAcknowledgeRequest(
                group_id=self.membership.group_id, member_id=self.membership.member_id,
                share_session_epoch=-1 if closing else session.epoch,
                topics=[_AckTopic(topic_id=ids[t], partitions=ps) for t, ps in topics.items()])
            try:
                resp = await self.client.request(req, node=node)
            except (KafkaConnectionError, KafkaTimeoutError, asyncio.CancelledError) as exc:
                # Sent again with the same epoch (see _share_fetch), and reported.
                self._restore(taken)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                for tp in tps:
                    self.ack_results[tp] = exc
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
                    self._record_ack_result(tp, taken[tp], error)
                return
            names = {tid: name for name, tid in ids.items()}
            for topic in resp.responses:
                name = names.get(topic.topic_id)
                if name is not None:
                    for part in topic.partitions:
                        tp = TopicPartition(name, part.partition_index)
                        if tp in taken:
                            self._record_ack_result(tp, taken[tp], self._ack_error(
                                tp, part.error_code, part.error_message))
