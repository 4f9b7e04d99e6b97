"""Committed offsets of a consumer group, client side: the coordinator connection,
OffsetFetch and OffsetCommit with their retries.

:class:`GroupOffsets` is the base of both membership protocols
(:mod:`._membership`): a commit carries the member's generation (classic) or member epoch
(KIP-848), and how a commit refused for a stale one is handled is theirs to say
(:meth:`GroupOffsets._retry_stale_commit`, :meth:`GroupOffsets._request_rejoin`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

from kontrakt._types import OffsetAndMetadata, TopicPartition
from kontrakt.clients._net.connection import BrokerConnection
from kontrakt.clients.client import AsyncKafkaClient, Backoff
from kontrakt.clients.group._settings import GroupSettings
from kontrakt.clients.group._types import GroupBuffer, GroupSubscription
from kontrakt.errors import (
    CommitFailedError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
)
from kontrakt.protocol.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    FencedLeaderEpochError,
    IllegalGenerationError,
    NotCoordinatorError,
    RebalanceInProgressError,
    StaleMemberEpochError,
    UnknownLeaderEpochError,
    UnknownMemberIdError,
    for_code,
)
from kontrakt.protocol.messages import OffsetCommitRequest, OffsetFetchRequest

__all__ = ["COORDINATOR_ERRORS", "GroupOffsets"]

T = TypeVar("T")

log = logging.getLogger("kontrakt.consumer.group")

#: The coordinator moved, is loading or is unavailable: find it again and retry.
COORDINATOR_ERRORS = frozenset(e.code for e in (
    CoordinatorLoadInProgressError, CoordinatorNotAvailableError, NotCoordinatorError))
#: The member's generation (classic) or member epoch (KIP-848) is not the group's.
STALE_MEMBER = frozenset(e.code for e in (
    IllegalGenerationError, UnknownMemberIdError, FencedInstanceIdError,
    StaleMemberEpochError))
_REBALANCE_IN_PROGRESS = RebalanceInProgressError.code
#: Partition errors of OffsetCommit that the commit loop handles itself.
_REFUSED = STALE_MEMBER | {_REBALANCE_IN_PROGRESS, FencedLeaderEpochError.code,
                           UnknownLeaderEpochError.code}


def _first_group_error(refused: Mapping[TopicPartition, int]) -> int | None:
    """The stale-generation (or rebalance) code among a commit's refusals, if any."""
    return next((c for c in refused.values()
                 if c in STALE_MEMBER or c == _REBALANCE_IN_PROGRESS), None)


class GroupOffsets:
    """Committed offsets of one consumer's group, through the group's coordinator.

    Args:
        client: the consumer's network core.
        subscription: the consumer's subscription (what it is a member for).
        settings: the consumer's group settings.
        buffer: the consumer's fetch buffer (its lock guards positions).
    """

    def __init__(self, client: AsyncKafkaClient, subscription: GroupSubscription,
                 settings: GroupSettings, *, buffer: GroupBuffer) -> None:
        self.client = client
        self.subs = subscription
        self.buffer = buffer
        self.settings = settings
        self.group_id = settings.group_id
        self.instance_id = settings.instance_id
        self.auto_store = settings.auto_offset_store
        self.request_timeout = settings.request_timeout
        self._retry = (settings.retry_backoff, settings.retry_backoff_max)
        #: The membership the commits carry (-1 / "": none).
        self.member_id = ""
        self.generation = -1
        self._closing = False
        #: While closing: when close() gives up on the network (commits, LeaveGroup).
        self._close_deadline: float | None = None
        #: partition -> the lowest leader epoch the coordinator accepts in a commit
        self._epoch_floors: dict[TopicPartition, int] = {}
        #: called with the seconds each successful commit took (the consumer's metrics)
        self.on_commit: Callable[[float], None] = lambda _latency: None

    def _request_rejoin(self) -> None:
        """A commit found the membership stale: the membership protocol rejoins."""

    async def _within(self, step: Awaitable[T], deadline: float, what: str) -> T:
        """``await step``, given up at ``deadline``.

        Raises:
            KafkaTimeoutError: the deadline passed first.
        """
        try:
            return await asyncio.wait_for(step, max(0.0, deadline - time.monotonic()))
        except KafkaTimeoutError:
            raise
        except (asyncio.TimeoutError, TimeoutError):
            raise KafkaTimeoutError(f"{what} for group {self.group_id!r} did not finish "
                                    "before the consumer's close timeout") from None


    # --- coordinator plumbing -----------------------------------------------------------

    async def _connection(self) -> BrokerConnection:
        # The coordinator's own connection: never queued behind the fetcher's long polls.
        try:
            return await self.client.coordinator_connection(self.group_id, "group")
        except (KafkaConnectionError, KafkaTimeoutError):
            self.client.forget_coordinator(self.group_id)
            raise

    async def _send(self, request: Any, timeout: float | None = None) -> Any:
        conn = await self._connection()
        try:
            return await conn.send(request, version=conn.negotiate(type(request)),
                                   timeout=timeout or self.request_timeout)
        except (KafkaConnectionError, KafkaTimeoutError):
            self.client.forget_coordinator(self.group_id)
            raise

    async def _conn_version(self, request_type: Any) -> int:
        return (await self._connection()).negotiate(request_type)

    def _coordinator_error(self, code: int) -> bool:
        if code in COORDINATOR_ERRORS:
            if code != CoordinatorLoadInProgressError.code:
                self.client.forget_coordinator(self.group_id)
            return True
        return False

    async def fetch_committed(self, partitions: list[TopicPartition],
                              timeout: float | None = None
                              ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The committed offsets of ``partitions`` (None where nothing is committed).

        Retries coordinator moves and loads until ``timeout`` (default request timeout;
        while closing, no later than the close timeout).

        Raises:
            KafkaTimeoutError: not answered in time.
            BrokerResponseError: a non-retriable error (e.g. GROUP_AUTHORIZATION_FAILED).
        """
        deadline = time.monotonic() + (timeout or self.request_timeout)
        if self._close_deadline is not None:
            deadline = min(deadline, self._close_deadline)
            return await self._within(self._fetch_committed(partitions, deadline), deadline,
                                      "OffsetFetch")
        return await self._fetch_committed(partitions, deadline)

    async def _fetch_committed(self, partitions: list[TopicPartition], deadline: float
                               ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        backoff = Backoff(*self._retry)
        while True:
            try:
                return await self._fetch_committed_once(partitions, deadline)
            except KafkaError as exc:
                if not (exc.retriable or isinstance(exc, KafkaConnectionError)):
                    raise
                delay = backoff.next()
                if time.monotonic() + delay >= deadline:
                    raise KafkaTimeoutError(f"OffsetFetch for group {self.group_id!r} "
                                            f"failed until the timeout: {exc}") from exc
                await asyncio.sleep(delay)

    async def _fetch_committed_once(self, partitions: list[TopicPartition], deadline: float
                                    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        version = await self._conn_version(OffsetFetchRequest)
        if version >= 8:
            G = OffsetFetchRequest.OffsetFetchRequestGroup
            req = OffsetFetchRequest(require_stable=True, groups=[G(
                group_id=self.group_id, topics=[
                    G.OffsetFetchRequestTopics(name=t, partition_indexes=ps)
                    for t, ps in by_topic.items()])])
        else:
            req = OffsetFetchRequest(
                group_id=self.group_id, require_stable=version >= 7, topics=[
                    OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                    for t, ps in by_topic.items()])
        resp = await self._send(req, timeout=max(0.001, deadline - time.monotonic()))
        if version >= 8:
            g = resp.groups[0]
            top_error, topics = g.error_code, g.topics
        else:
            top_error, topics = resp.error_code, resp.topics
        if top_error:
            self._coordinator_error(top_error)
            raise for_code(top_error)(f"OffsetFetch for group {self.group_id!r}")
        out: dict[TopicPartition, OffsetAndMetadata | None] = {tp: None for tp in partitions}
        for t in topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if p.error_code:
                    raise for_code(p.error_code)(f"OffsetFetch {tp}")
                if p.committed_offset >= 0:
                    out[tp] = OffsetAndMetadata(p.committed_offset, p.metadata or "",
                                                p.committed_leader_epoch)
        return out

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                     timeout: float | None = None) -> None:
        """Commit ``offsets`` with the current generation (or none when not a member).

        Retries coordinator errors until ``timeout`` (default request timeout). A partition
        refused for its committed leader epoch (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH:
        the epoch of the consumer's position is older than the leader's, e.g. after a leader
        move) is committed again once metadata is refreshed, with the leader's current epoch.

        Raises:
            CommitFailedError: the generation is stale or the group is rebalancing.
            KafkaTimeoutError: not done in time.
            BrokerResponseError: a non-retriable error.
        """
        if not offsets:
            return
        started = time.monotonic()
        deadline = started + (timeout or self.request_timeout)
        if self._close_deadline is not None:
            # While closing (the auto commit, or the revoke listener's own commit): no
            # longer than close(timeout) allows, finding the coordinator included.
            deadline = min(deadline, self._close_deadline)
            await self._within(self._commit(offsets, deadline), deadline, "OffsetCommit")
        else:
            await self._commit(offsets, deadline)
        self.on_commit(time.monotonic() - started)

    async def _commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                      deadline: float) -> None:
        backoff = Backoff(*self._retry)
        pending = dict(offsets)
        while True:
            error: KafkaError
            try:
                refused, generation = await self._commit_once(self._epochs_known(pending),
                                                              deadline)
            except KafkaError as exc:
                if not (exc.retriable or isinstance(exc, KafkaConnectionError)):
                    raise
                error = exc
            else:
                if not refused:
                    return
                # What was committed stays committed; only the refused partitions go again.
                pending = {tp: pending[tp] for tp in refused}
                code = _first_group_error(refused)
                if code is not None:
                    if not await self._retry_stale_commit(code, generation, set(refused),
                                                          deadline):
                        raise self._commit_failed(code, generation)
                    if self.generation != generation:
                        continue  # at once, with the new generation / member epoch
                elif await self._learn_leader_epochs(refused, pending):
                    continue  # at once, with the leaders' current epochs
                error = for_code(code or next(iter(refused.values())))(
                    f"OffsetCommit {sorted(map(str, refused))}")
            delay = backoff.next()
            if time.monotonic() + delay >= deadline:
                raise KafkaTimeoutError(f"OffsetCommit for group {self.group_id!r} "
                                        f"failed until the timeout: {error}") from error
            await asyncio.sleep(delay)

    async def _commit_once(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                           deadline: float) -> tuple[dict[TopicPartition, int], int]:
        """One OffsetCommit.

        Returns:
            The partitions refused for their leader epoch or for a stale generation /
            member epoch (or a rebalance), with their error codes; and the generation (or
            member epoch) the request carried.

        Raises:
            BrokerResponseError: any other partition error (the first).
        """
        # Still a member while handing back what unsubscribe() retired (its auto commit,
        # the revoke listener's commits).
        member = (self.subs.subscribed or bool(self.subs.retiring)) and self.generation >= 0
        generation = self.generation if member else -1
        member_id = self.member_id if member else ""
        version = await self._conn_version(OffsetCommitRequest)
        T = OffsetCommitRequest.OffsetCommitRequestTopic
        by_topic: dict[str, list[Any]] = {}
        for tp, om in offsets.items():
            by_topic.setdefault(tp.topic, []).append(T.OffsetCommitRequestPartition(
                partition_index=tp.partition, committed_offset=om.offset,
                committed_leader_epoch=om.leader_epoch if version >= 6 else -1,
                committed_metadata=om.metadata))
        kwargs: dict[str, Any] = {}
        if version >= 7 and member:
            kwargs["group_instance_id"] = self.instance_id
        req = OffsetCommitRequest(
            group_id=self.group_id, generation_id_or_member_epoch=generation,
            member_id=member_id, topics=[T(name=t, partitions=ps)
                                         for t, ps in by_topic.items()], **kwargs)
        resp = await self._send(req, timeout=max(0.001, deadline - time.monotonic()))
        first: BaseException | None = None
        refused: dict[TopicPartition, int] = {}
        for t in resp.topics:
            for p in t.partitions:
                code = p.error_code
                if not code:
                    continue
                if code in _REFUSED:
                    refused[TopicPartition(t.name, p.partition_index)] = code
                    continue
                self._coordinator_error(code)
                first = first or for_code(code)(f"OffsetCommit {t.name}-{p.partition_index}")
        if first is not None:
            raise first
        return refused, generation

    def _commit_failed(self, code: int, generation: int) -> CommitFailedError:
        if code != _REBALANCE_IN_PROGRESS:
            self._request_rejoin()
        return CommitFailedError(
            f"commit failed for group {self.group_id!r}: {for_code(code).__name__}; the "
            f"group has rebalanced (generation {generation} is stale) and the partitions may "
            "now belong to another member")

    async def _retry_stale_commit(self, code: int, generation: int,
                                  partitions: set[TopicPartition], deadline: float) -> bool:
        """Whether a commit refused with ``code`` (a stale generation or a rebalance) is
        tried again; the classic protocol never does (the application is told)."""
        return False

    def _epochs_known(self, offsets: dict[TopicPartition, OffsetAndMetadata]
                      ) -> dict[TopicPartition, OffsetAndMetadata]:
        """``offsets`` with leader epochs below one the coordinator fenced raised to it."""
        floors = self._epoch_floors
        if not floors:
            return offsets
        out = dict(offsets)
        for tp, om in offsets.items():
            floor = floors.get(tp)
            if floor is not None and 0 <= om.leader_epoch < floor:
                out[tp] = OffsetAndMetadata(om.offset, om.metadata, floor)
        return out

    async def _learn_leader_epochs(self, refused: Mapping[TopicPartition, int],
                                   pending: Mapping[TopicPartition, OffsetAndMetadata]) -> bool:
        """After FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH: refresh metadata and remember
        each refused partition's current leader epoch, which later commits of older
        positions carry (the Java client commits its position's epoch; a broker that
        checks it wants the leader's, and the position's epoch only catches up when
        records written under the new leader are consumed).

        Returns:
            True when a newer epoch was learnt (worth retrying at once).
        """
        self.client.request_metadata_refresh()
        try:
            meta = await self.client.refresh_metadata({tp.topic for tp in refused})
        except KafkaError as exc:
            log.debug("metadata refresh after a leader-epoch refusal failed: %s", exc)
            return False
        learnt = False
        for tp in refused:
            info = meta.topics.get(tp.topic)
            part = info.partitions.get(tp.partition) if info is not None else None
            current = -1 if part is None else part.leader_epoch
            sent = max(pending[tp].leader_epoch, self._epoch_floors.get(tp, -1))
            if current > sent >= 0:
                self._epoch_floors[tp] = current
                learnt = True
        return learnt

    async def _commit_quietly(self, partitions: Iterable[TopicPartition], *,
                              processed: bool = False) -> None:
        """The auto commit of ``partitions``: failures are logged, not raised.

        Args:
            processed: commit every record handed out (on close); by default only those
                the application has moved past by polling again (it may still be processing
                the last ones it got).
        """
        wanted = set(partitions)
        with self.buffer.lock:
            consumed = self.subs.consumed_offsets(None if processed else self.buffer.poll_seq,
                                                  stored_only=not self.auto_store)
        offsets = {tp: om for tp, om in consumed.items() if tp in wanted}
        try:
            await self.commit(offsets)
        except KafkaError as exc:
            log.warning("auto commit of %s failed: %s", sorted(map(str, offsets)), exc)
