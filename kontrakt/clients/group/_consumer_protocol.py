"""The KIP-848 consumer group protocol (``group.protocol=consumer``), client side.

:class:`ConsumerGroupMembership` keeps the consumer a member of its group with one request,
ConsumerGroupHeartbeat (API 68), sent every ``heartbeat_interval_ms`` the coordinator
chooses. The coordinator runs the assignor (``group.remote.assignor``) and sends each member
its *target* assignment as topic ids and partitions; the member reconciles towards it —
first revoking what it must give up (commit, ``on_partitions_revoked``), then taking what is
new (``on_partitions_assigned``) — and acknowledges by reporting the partitions it owns in
its next heartbeat. There is no JoinGroup/SyncGroup and no group-wide stop: partitions that
do not move keep being consumed.

The member id is generated here (a random UUID, kept for the consumer's life) and the member
epoch comes from the coordinator: 0 joins, -1 leaves, -2 leaves as a static member that will
come back. FENCED_MEMBER_EPOCH and UNKNOWN_MEMBER_ID mean the coordinator dropped the member:
its partitions are lost (``on_partitions_lost``) and it rejoins with epoch 0. Commits carry
the member epoch in place of the generation (OffsetCommit v9 or later). A member that leaves
(close(), unsubscribe()) keeps heartbeating while it hands its partitions back (commit,
``on_partitions_revoked``), and sends the leave only after, as the Java client does.

A pattern subscription is matched here, against the cluster's topic names, and sent as topic
names (as the Java client does for a ``java.util.regex.Pattern``): Python regular expressions
are not the RE2 dialect the broker would use.

Offset fetching and committing, listener calls and revocation are shared with the classic
:class:`~kontrakt.clients.group.GroupCoordinator` (:mod:`._membership`, :mod:`._offsets`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from kontrakt._types import OffsetAndMetadata, TopicPartition
from kontrakt.clients._wait import wait_event
from kontrakt.clients.client import AsyncKafkaClient, Backoff
from kontrakt.clients.group._membership import GroupMembership
from kontrakt.clients.group._offsets import COORDINATOR_ERRORS
from kontrakt.clients.group._settings import GroupSettings
from kontrakt.clients.group._types import GroupBuffer, GroupSubscription, ListenerRunner
from kontrakt.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    UnsupportedVersionError,
)
from kontrakt.protocol.errors import (
    FencedMemberEpochError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    for_code,
)
from kontrakt.protocol.messages import ConsumerGroupHeartbeatRequest, OffsetCommitRequest

__all__ = ["LEAVE_EPOCH", "STATIC_LEAVE_EPOCH", "ConsumerGroupMembership"]

log = logging.getLogger("kontrakt.consumer.group")

#: Member epoch of a heartbeat that leaves the group.
LEAVE_EPOCH = -1
#: Member epoch of a static member's leave: the coordinator keeps its assignment for
#: ``session.timeout.ms`` so that the same ``group.instance.id`` can come back to it.
STATIC_LEAVE_EPOCH = -2

#: The coordinator dropped the member: its partitions are lost, it rejoins with epoch 0.
_DROPPED = frozenset((FencedMemberEpochError.code, UnknownMemberIdError.code))

_TP = ConsumerGroupHeartbeatRequest.TopicPartitions


def new_member_id() -> str:
    """A random member id in Kafka's UUID text form (22 url-safe base64 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class ConsumerGroupMembership(GroupMembership):
    """Offsets and KIP-848 group membership for one consumer.

    Args:
        client: the consumer's network core.
        subscription: the consumer's :class:`SubscriptionState`.
        settings: the consumer's group settings (``group.remote.assignor`` picks the
            coordinator's assignor, e.g. ``uniform`` or ``range``; None: the broker's
            default).
        buffer: the consumer's fetch buffer (its lock guards positions).
        wake: called to make the fetcher re-plan after the assignment changes.
        listener_runner: runs listener callbacks.

    Failures of the background task (a broker without ConsumerGroupHeartbeat, a fenced
    static instance, an unknown assignor, authorization) are raised by the consumer's next
    call, as :class:`~kontrakt.errors.UnsupportedVersionError` or the broker's error class.
    """

    def __init__(self, client: AsyncKafkaClient, subscription: GroupSubscription,
                 settings: GroupSettings, *, buffer: GroupBuffer, wake: Callable[[], None],
                 listener_runner: ListenerRunner) -> None:
        super().__init__(client, subscription, settings, buffer=buffer, wake=wake,
                         listener_runner=listener_runner)
        self.server_assignor = settings.remote_assignor
        self.member_id = new_member_id()
        self.member_epoch = 0
        self.heartbeat_interval = 0.0  # until the coordinator says otherwise
        # The target assignment last received, as (topic id, partition).
        self._target: frozenset[tuple[uuid.UUID, int]] = frozenset()
        self._reconciled: frozenset[tuple[uuid.UUID, int]] | None = frozenset()
        self._reconciling: asyncio.Task[None] | None = None
        self._ids: dict[str, uuid.UUID] = {}
        # What the coordinator has been told (None: tell it again in full).
        self._sent_topics: list[str] | None = None
        self._sent_owned: frozenset[tuple[uuid.UUID, int]] | None = None
        # Set (and replaced) on every successful heartbeat: commits refused for a stale
        # member epoch wait on it for the epoch the coordinator moved the member to.
        self._heartbeat_answered: asyncio.Event | None = None
        self._backoff = Backoff(*self._retry)  # between failed heartbeats

    # --- lifecycle -----------------------------------------------------------------------

    def _background_tasks(self) -> list[asyncio.Task[None]]:
        return [t for t in (self._task, self._reconciling) if t is not None]

    def _is_member(self) -> bool:
        return self.member_epoch > 0

    def _leaves_group(self) -> bool:
        # Static members leave too, with epoch -2 (the coordinator keeps their partitions).
        return self.member_epoch > 0

    # --- membership loop ---------------------------------------------------------------

    async def _turn(self) -> None:
        if await self._step():
            self._backoff.reset()
            return
        # A failed heartbeat: the coordinator is told everything again next time.
        self._sent_topics = self._sent_owned = None
        self._next_heartbeat = time.monotonic() + self._backoff.next()
        await self._sleep_until(self._next_heartbeat)

    async def _sleep_until(self, when: float) -> None:
        assert self._changed is not None
        delay = when - time.monotonic()
        if delay > 0:
            await wait_event(self._changed, delay)
        self._changed.clear()

    async def _step(self) -> bool:
        """One turn of the loop: poll timeout, auto commit, reconciliation, heartbeat.

        Returns:
            False when a heartbeat failed in a way that calls for a retry backoff.
        """
        now = time.monotonic()
        poll_deadline = self._last_poll + self.max_poll_interval
        if await self._poll_timeout(now, poll_deadline):
            return True
        if self.member_epoch > 0:
            await self._auto_commit_if_due(now)
        if self.member_epoch == 0 and self._sent_topics is None:
            # Joining: know the topics (and their ids) first.
            await self._refresh_subscribed_metadata()
        if self._leaving:
            # unsubscribe() came during an await above (the auto commit, say): the
            # subscription read next is already emptied, or another subscribe()'s. The
            # leave (epoch -1/-2) is the next heartbeat, as in the Java client, which keeps
            # its subscription until the leave: a heartbeat now would make the coordinator
            # compute the group's assignment again for nothing.
            return True
        self._maybe_reconcile()
        topics = sorted(self._topics_to_join())
        owned = self._owned()
        if (self._rejoin or now >= self._next_heartbeat or topics != self._sent_topics
                or (owned != self._sent_owned and self._reconciling is None)):
            self._rejoin = False
            ok = await self._heartbeat_once(topics, owned)
            if not ok:
                return False
            self._maybe_reconcile()
        wait_until = min(self._next_heartbeat, poll_deadline)
        if self.auto_commit and self.member_epoch > 0:
            wait_until = min(wait_until, self._next_auto_commit)
        await self._sleep_until(wait_until)
        return True

    async def _refresh_subscribed_metadata(self) -> None:
        if self.subs.pattern is not None:
            await self.client.refresh_metadata()
        else:
            await self.client.refresh_metadata(self.subs.topics)

    def _owned(self) -> frozenset[tuple[uuid.UUID, int]]:
        """The partitions the group gave this member that it still holds: the group's
        assignment, and what unsubscribe() retired until it is handed back. Not a manual
        assignment: after ``unsubscribe(); assign(...)`` the member holds, until its leave,
        what the group gave it, not the assign()ed partitions (the Java client reports its
        membership's own assignment, not the consumer's). No heartbeat goes out in between
        (see _step), but the answer to one already on its way is compared with this."""
        held = [*self.subs.retiring]
        if not self.subs.manual:
            held.extend(self.subs.assignment)
        out = set()
        for tp in held:
            tid = self._ids.get(tp.topic)
            if tid is not None:
                out.add((tid, tp.partition))
        return frozenset(out)

    # --- the heartbeat -------------------------------------------------------------------

    def _request(self, version: int, epoch: int, topics: list[str] | None,
                 owned: frozenset[tuple[uuid.UUID, int]] | None) -> Any:
        by_topic: dict[uuid.UUID, list[int]] = {}
        for tid, p in sorted(owned or ()):
            by_topic.setdefault(tid, []).append(p)
        return ConsumerGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=epoch,
            instance_id=self.instance_id, rack_id=self.rack,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            subscribed_topic_names=topics, server_assignor=self.server_assignor,
            # v1+: an empty regex next to the names says "no regex subscription" (what
            # librdkafka sends; its mock broker insists on both or neither).
            subscribed_topic_regex="" if topics is not None and version >= 1 else None,
            topic_partitions=None if owned is None else [
                _TP(topic_id=t, partitions=ps) for t, ps in by_topic.items()])

    async def _version(self) -> int:
        try:
            return await self._conn_version(ConsumerGroupHeartbeatRequest)
        except UnsupportedVersionError as exc:
            raise UnsupportedVersionError(
                "group.protocol=consumer needs a broker with the KIP-848 consumer group "
                f"protocol (ConsumerGroupHeartbeat, API 68): {exc}; set "
                "group.protocol=classic") from exc

    async def _heartbeat_once(self, topics: list[str],
                              owned: frozenset[tuple[uuid.UUID, int]]) -> bool:
        joining = self.member_epoch == 0
        send_topics = topics if joining or topics != self._sent_topics else None
        # The coordinator requires an empty owned list on join.
        send_owned: frozenset[tuple[uuid.UUID, int]] | None = (
            frozenset() if joining else owned if owned != self._sent_owned else None)
        try:
            req = self._request(await self._version(), self.member_epoch, send_topics,
                                send_owned)
            resp = await self._send(req)
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            log.debug("heartbeat failed: %s", exc)
            return False
        except UnsupportedVersionError:
            raise
        except KafkaError as exc:
            if exc.retriable:
                log.debug("heartbeat failed (retriable): %s", exc)
                return False
            raise
        code = resp.error_code
        if code == 0:
            if resp.member_id:
                self.member_id = resp.member_id
            if resp.member_epoch != self.member_epoch:
                log.debug("group %s: member epoch %s -> %s", self.group_id, self.member_epoch,
                          resp.member_epoch)
            self._answered(resp)
            if send_topics is not None:
                self._sent_topics = send_topics
            if send_owned is not None:
                self._sent_owned = send_owned
            if resp.assignment is not None:
                self._target = frozenset(
                    (t.topic_id, p) for t in resp.assignment.topic_partitions
                    for p in t.partitions)
                self._reconciled = None if self._target != self._owned() else self._target
            return True
        message = f"ConsumerGroupHeartbeat {self.group_id!r}: {resp.error_message or ''}"
        if code in _DROPPED:
            log.info("group %s: %s; rejoining with epoch 0", self.group_id,
                     for_code(code).__name__)
            await self._fenced_member()
            self._rejoin = True
            return True
        if code in COORDINATOR_ERRORS:
            self._coordinator_error(code)
            return False
        error = for_code(code)(message)
        if error.retriable:
            return False
        # Fatal (as in the Java client): FENCED_INSTANCE_ID, UNRELEASED_INSTANCE_ID,
        # UNSUPPORTED_ASSIGNOR, GROUP_MAX_SIZE_REACHED, authorization, invalid request.
        await self._drop_reconciliation()
        await self._lost_all()
        raise error

    async def _fenced_member(self) -> None:
        """The coordinator dropped this member: lose everything, rejoin with epoch 0."""
        await self._drop_reconciliation()
        await self._lost_all()
        self._forget_membership()

    def _forget_membership(self) -> None:
        """Back to a non-member: epoch 0 (join) next, nothing targeted, everything to tell."""
        self.member_epoch = 0
        self.generation = -1
        self._target = frozenset()
        self._reconciled = frozenset()
        self._sent_topics = self._sent_owned = None
        self._next_heartbeat = 0.0

    async def _drop_reconciliation(self) -> None:
        task, self._reconciling = self._reconciling, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    # --- reconciliation ------------------------------------------------------------------

    def _maybe_reconcile(self) -> None:
        if self._reconciling is not None or self._reconciled == self._target:
            return
        assert self._loop is not None
        self._reconciling = self._loop.create_task(self._reconcile(self._target),
                                                   name="kontrakt-group-reconcile")

    async def _resolve(self, ids: set[uuid.UUID]) -> dict[uuid.UUID, str]:
        names = {info.topic_id: name for name, info in self.client.cluster.topics.items()}
        if not ids <= names.keys():
            meta = await self.client.refresh_metadata(
                None if self.subs.pattern is not None else self.subs.topics)
            names = {info.topic_id: name for name, info in meta.topics.items()}
        return {i: names[i] for i in ids if i in names}

    async def _reconcile(self, target: frozenset[tuple[uuid.UUID, int]]) -> None:
        try:
            names = await self._resolve({tid for tid, _ in target})
            for tid, name in names.items():
                self._ids[name] = tid
            wanted = {TopicPartition(names[tid], p) for tid, p in target if tid in names}
            if self._assigned_by_hand():
                return
            owned = set(self.subs.assignment)
            revoked, added = owned - wanted, wanted - owned
            # Revoke first: commit and tell the listener before anything new is taken. Its
            # hand-back drops exactly the states it revoked: not a partition assign()ed
            # anew by an unsubscribe() meanwhile (in the listener, say).
            if revoked:
                await self._revoke(revoked, commit=True)
                if self._assigned_by_hand():
                    return
            if added:
                self.client.add_topics({tp.topic for tp in added})
                with self.buffer.lock:
                    self.subs.add_partitions(added)
            if added or revoked:
                await self._call_listener("on_partitions_assigned", added)
                self.rebalances += 1
                log.info("group %s epoch %s: assigned %s", self.group_id, self.member_epoch,
                         sorted(map(str, wanted)))
                self._last_poll = max(self._last_poll,
                                      time.monotonic() - self.max_poll_interval / 2)
                self.wake()
            unresolved = len(names) < len({tid for tid, _ in target})
            # Unknown topic ids (metadata lagging behind the coordinator) are retried on
            # the next turn; otherwise this target is done.
            self._reconciled = None if unresolved else target
            if (added or revoked) and self._changed is not None:
                self._changed.set()  # acknowledge at once in the next heartbeat
        finally:
            self._reconciling = None

    # --- leaving -------------------------------------------------------------------------

    async def _leave_group(self, reason: str) -> None:
        """Leave with a heartbeat: epoch -1, or -2 for a static member."""
        epoch = STATIC_LEAVE_EPOCH if self.instance_id is not None else LEAVE_EPOCH
        log.info("leaving group %s (%s)", self.group_id, reason)
        try:
            resp = await self._send(self._request(await self._version(), epoch, None, None))
            if resp.error_code:
                log.info("group %s: the leave was answered %s", self.group_id,
                         for_code(resp.error_code).__name__)
        finally:
            self._forget_membership()

    async def _stop_side_work(self) -> None:
        await self._drop_reconciliation()

    def _answered(self, resp: Any) -> None:
        """Take a heartbeat's error-free answer: the member epoch (the commits'
        generation), the interval to the next heartbeat, and wake the commits waiting for
        a new epoch."""
        self.member_epoch = self.generation = resp.member_epoch
        answered, self._heartbeat_answered = self._heartbeat_answered, asyncio.Event()
        if answered is not None:
            answered.set()
        if resp.heartbeat_interval_ms > 0:
            self.heartbeat_interval = resp.heartbeat_interval_ms / 1000
        self._next_heartbeat = time.monotonic() + self.heartbeat_interval

    async def _leaving_heartbeat(self) -> bool:
        # As the Java client (PREPARE_LEAVING): nothing changes meanwhile: no
        # subscription, no owned partitions and no new assignment (the member is leaving);
        # a new member epoch is taken, for the hand-back's commits.
        try:
            resp = await self._send(self._request(await self._version(), self.member_epoch,
                                                  None, None))
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            log.debug("heartbeat while leaving failed: %s", exc)
            return False
        except KafkaError as exc:
            if exc.retriable:
                log.debug("heartbeat while leaving failed (retriable): %s", exc)
                return False
            log.warning("group %s: heartbeat while leaving failed: %r", self.group_id, exc)
            self._forget_membership()
            return True
        code = resp.error_code
        if code == 0:
            self._answered(resp)
            return True
        if code in COORDINATOR_ERRORS:
            self._coordinator_error(code)
            return False
        error = for_code(code)
        if error.retriable:
            return False
        # Dropped (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID) or fatal: no longer a member,
        # so no leave follows (as the Java client); the hand-back under way finishes.
        log.info("group %s: %s while handing partitions back before leaving",
                 self.group_id, error.__name__)
        self._forget_membership()
        return True

    # --- commits -------------------------------------------------------------------------

    async def _commit_once(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                           deadline: float) -> tuple[dict[TopicPartition, int], int]:
        # Members of a consumer-protocol group commit with their epoch: OffsetCommit v9+.
        if self.member_epoch > 0:
            version = await self._conn_version(OffsetCommitRequest)
            if version < 9:
                raise UnsupportedVersionError(
                    f"group.protocol=consumer commits need OffsetCommit v9 or later; the "
                    f"coordinator offers v{version}")
        return await super()._commit_once(offsets, deadline)

    async def _retry_stale_commit(self, code: int, generation: int,
                                  partitions: set[TopicPartition], deadline: float) -> bool:
        """STALE_MEMBER_EPOCH: the coordinator moved the member to a newer epoch that this
        member has not heard of yet. As the Java client, the commit goes again with the
        epoch the next heartbeat brings, while the member still owns the partitions.

        The heartbeat is sent at once; waits for its answer until ``deadline``. Not retried
        from the membership task itself (its auto commit: the next one follows) nor while
        closing (no heartbeat would come).
        """
        if code != StaleMemberEpochError.code:
            return False
        task = self._task
        if (self._closing or task is None or task.done()
                or asyncio.current_task() is task):
            return False
        if self.member_epoch == generation:
            if self._heartbeat_answered is None:
                self._heartbeat_answered = asyncio.Event()
            answered = self._heartbeat_answered
            self._request_rejoin()  # a heartbeat now (KIP-848 has no rejoin)
            await wait_event(answered, max(0.0, deadline - time.monotonic()))
        # Still a member, still owning them (a commit on revocation runs before the
        # partitions are given up).
        if self.member_epoch > 0 and partitions <= set(self.subs.assignment):
            return True
        log.info("group %s: commit refused (%s) and the member no longer owns %s",
                 self.group_id, for_code(code).__name__, sorted(map(str, partitions)))
        return False
