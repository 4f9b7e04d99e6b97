"""The classic consumer group protocol, client side.

:class:`GroupCoordinator` keeps the consumer a member of its group while it is subscribed:
JoinGroup, SyncGroup (computing the assignment when it is the leader), Heartbeat every
``heartbeat.interval.ms``, auto commit every ``auto.commit.interval.ms``, and leaving the
group when the application stops polling for ``max.poll.interval.ms``. Offsets, listener
calls and revocation are shared with KIP-848 (:mod:`._membership`, :mod:`._offsets`). A
member that leaves (close(), unsubscribe()) keeps heartbeating while it hands its partitions
back (commit, ``on_partitions_revoked``) and sends LeaveGroup only after.

Rebalancing is eager (revoke everything, then rejoin) or cooperative (KIP-429: only the
partitions that move are revoked; the others keep being consumed), depending on the
assignors configured.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from kontrakt.clients._wait import wait_event
from kontrakt.clients.client import AsyncKafkaClient, Backoff
from kontrakt.clients.group._assignors import (
    RebalanceProtocol,
    cooperative_adjust,
    owned_partitions,
)
from kontrakt.clients.group._membership import GroupMembership
from kontrakt.clients.group._protocol import (
    CONSUMER_PROTOCOL_TYPE,
    Assignment,
    MemberSubscription,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kontrakt.clients.group._settings import GroupSettings
from kontrakt.clients.group._types import GroupBuffer, GroupSubscription, ListenerRunner
from kontrakt.errors import (
    ConfigError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    UnsupportedVersionError,
)
from kontrakt.protocol.errors import (
    FencedInstanceIdError,
    IllegalGenerationError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    for_code,
)
from kontrakt.protocol.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    SyncGroupRequest,
)

__all__ = ["GroupCoordinator"]

log = logging.getLogger("kontrakt.consumer.group")

_REBALANCE_IN_PROGRESS = RebalanceInProgressError.code
_FENCED_INSTANCE_ID = FencedInstanceIdError.code
_UNKNOWN_MEMBER_ID = UnknownMemberIdError.code
#: The coordinator does not know this member (or its generation): rejoin.
_STALE = frozenset((_UNKNOWN_MEMBER_ID, IllegalGenerationError.code))


class GroupCoordinator(GroupMembership):
    """Offsets and classic group membership for one consumer.

    Args:
        client: the consumer's network core.
        subscription: the consumer's subscription state.
        settings: the consumer's group settings.
        buffer: the consumer's fetch buffer (its lock guards positions).
        wake: called to make the fetcher re-plan after the assignment changes.
        listener_runner: runs listener callbacks.
    """

    def __init__(self, client: AsyncKafkaClient, subscription: GroupSubscription,
                 settings: GroupSettings, *, buffer: GroupBuffer, wake: Callable[[], None],
                 listener_runner: ListenerRunner) -> None:
        super().__init__(client, subscription, settings, buffer=buffer, wake=wake,
                         listener_runner=listener_runner)
        self.protocol_name: str | None = None
        self.leader = False
        self.joined_topics: frozenset[str] = frozenset()
        self._partition_counts: dict[str, int] = {}

    def _is_member(self) -> bool:
        return self.generation >= 0

    def _leaves_group(self) -> bool:
        # A static member never sends LeaveGroup (as the Java client): the coordinator keeps
        # its partitions until session.timeout.ms, so a restart costs no rebalance.
        return bool(self.member_id) and self.instance_id is None

    async def _turn(self) -> None:
        """One turn of a subscribed member's loop: join when needed, else heartbeat."""
        if self._rejoin:
            await self._join()
        else:
            await self._heartbeat_step()

    def _forget_membership(self) -> None:
        self.generation = -1
        if self.instance_id is None:
            self.member_id = ""

    async def _leave_group(self, reason: str) -> None:
        version = await self._conn_version(LeaveGroupRequest)
        if version >= 3:
            req = LeaveGroupRequest(group_id=self.group_id, members=[
                LeaveGroupRequest.MemberIdentity(member_id=self.member_id,
                                                 group_instance_id=self.instance_id,
                                                 reason=reason)])
        else:
            req = LeaveGroupRequest(group_id=self.group_id, member_id=self.member_id)
        log.info("leaving group %s (%s)", self.group_id, reason)
        resp = await self._send(req)
        codes = [resp.error_code, *(m.error_code for m in resp.members)]
        refused = next((c for c in codes if c), 0)
        if refused:
            log.info("group %s: the leave was answered %s", self.group_id,
                     for_code(refused).__name__)
        self.generation = -1
        if self.instance_id is None:
            self.member_id = ""

    # --- joining ------------------------------------------------------------------------

    async def _join(self) -> None:
        assert self._changed is not None
        backoff = Backoff(*self._retry)
        self._changed.clear()
        self._rejoin = False
        if self.subs.pattern is not None:
            await self.client.refresh_metadata()
        else:
            await self.client.refresh_metadata(self.subs.topics)
        if (self.protocol is RebalanceProtocol.EAGER and self.subs.assignment
                and not self.subs.manual):
            # Its hand-back drops exactly the states it revoked: not a partition assign()ed
            # anew by an unsubscribe() meanwhile (in the listener, say).
            await self._revoke(set(self.subs.assignment), commit=True)
        while True:
            try:
                done = await self._join_once()
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                log.debug("join failed: %s", exc)
                self.client.forget_coordinator(self.group_id)
                done = False
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                log.debug("join failed (retriable): %s", exc)
                done = False
            if done:
                return
            if self._closing:
                return
            await asyncio.sleep(backoff.next())

    async def _join_once(self) -> bool:
        topics = self._topics_to_join()
        self.joined_topics = topics
        owned = sorted(self.subs.assignment)
        protocols = []
        for a in self.assignors:
            user_data = a.subscription_user_data(set(topics), owned, self.generation)
            sub = Subscription(sorted(topics), user_data, owned, self.generation, self.rack)
            protocols.append(JoinGroupRequest.JoinGroupRequestProtocol(
                name=a.name, metadata=encode_subscription(sub)))
        version = await self._conn_version(JoinGroupRequest)
        if self.instance_id is not None and version < 5:
            raise UnsupportedVersionError(
                f"group.instance.id needs JoinGroup v5 or later (KIP-345); the coordinator "
                f"offers v{version}: remove group.instance.id or upgrade the broker")
        req = JoinGroupRequest(
            group_id=self.group_id, session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=self.member_id,
            group_instance_id=self.instance_id if version >= 5 else None,
            protocol_type=CONSUMER_PROTOCOL_TYPE, protocols=protocols)
        resp = await self._send(req, timeout=self.rebalance_timeout_ms / 1000 + 5)
        code = resp.error_code
        if code == MemberIdRequiredError.code:
            # KIP-394: not a failure; rejoin at once with the id (no retry backoff).
            self.member_id = resp.member_id
            return await self._join_once() if resp.member_id else False
        if code in _STALE:
            await self._lost_all()
            self.member_id = ""
            return False
        if code == _REBALANCE_IN_PROGRESS or self._coordinator_error(code):
            return False
        if code == _FENCED_INSTANCE_ID:
            await self._fenced("JoinGroup")
        if code:
            raise for_code(code)(f"JoinGroup {self.group_id!r}")
        self.member_id = resp.member_id
        generation = resp.generation_id
        self.protocol_name = resp.protocol_name
        self.leader = resp.leader == resp.member_id
        assignments: list[Any] = []
        if self.leader:
            assignments = await self._assign(resp.members, skip=resp.skip_assignment)
        sversion = await self._conn_version(SyncGroupRequest)
        sync = SyncGroupRequest(
            group_id=self.group_id, generation_id=generation, member_id=self.member_id,
            group_instance_id=self.instance_id if sversion >= 3 else None,
            protocol_type=CONSUMER_PROTOCOL_TYPE if sversion >= 5 else None,
            protocol_name=self.protocol_name if sversion >= 5 else None,
            assignments=assignments)
        sresp = await self._send(sync, timeout=self.rebalance_timeout_ms / 1000 + 5)
        code = sresp.error_code
        if code in _STALE:
            await self._lost_all()
            self.member_id = "" if code == _UNKNOWN_MEMBER_ID else self.member_id
            return False
        if code == _REBALANCE_IN_PROGRESS or self._coordinator_error(code):
            return False
        if code == _FENCED_INSTANCE_ID:
            await self._fenced("SyncGroup")
        if code:
            raise for_code(code)(f"SyncGroup {self.group_id!r}")
        self.generation = generation
        assignment = (decode_assignment(sresp.assignment) if sresp.assignment
                      else Assignment([]))
        await self._apply(assignment)
        self.rebalances += 1
        return True

    async def _fenced(self, what: str) -> None:
        """FENCED_INSTANCE_ID: another consumer runs with our group.instance.id. Fatal (as
        in the Java client): the partitions are lost and the error reaches the application.

        Raises:
            FencedInstanceIdError: always.
        """
        await self._lost_all()
        raise FencedInstanceIdError(
            f"{what} {self.group_id!r}: another consumer joined with group.instance.id "
            f"{self.instance_id!r}; this one is fenced and stops consuming")

    async def _assign(self, members: list[Any], *, skip: bool = False) -> list[Any]:
        """The leader's assignments for SyncGroup. With ``skip`` (KIP-814: a static leader
        that rejoined a stable group) none: the coordinator keeps the current assignment,
        and the leader only notes the partition counts it must watch for changes."""
        assignor = next((a for a in self.assignors if a.name == self.protocol_name), None)
        if assignor is None:
            raise ConfigError(f"group chose assignor {self.protocol_name!r}, "
                              "which this consumer does not have")
        subs: dict[str, MemberSubscription] = {}
        all_topics: set[str] = set()
        for m in members:
            sub = decode_subscription(m.metadata)
            subs[m.member_id] = MemberSubscription(m.member_id, m.group_instance_id, sub)
            all_topics.update(sub.topics)
        meta = await self.client.refresh_metadata(all_topics)
        counts = {t: len(meta.topics[t].partitions) for t in all_topics if t in meta.topics}
        self._partition_counts = counts
        if skip:
            log.info("group %s: a returning static leader keeps the current assignment",
                     self.group_id)
            return []
        result = assignor.assign(counts, subs)
        if self.protocol is RebalanceProtocol.COOPERATIVE:
            result = cooperative_adjust(owned_partitions(subs), result)
        log.debug("leader of %s assigned %s", self.group_id, result)
        return [SyncGroupRequest.SyncGroupRequestAssignment(
            member_id=mid, assignment=encode_assignment(result.get(mid, Assignment([]))))
            for mid in subs]

    async def _apply(self, assignment: Assignment) -> None:
        assignor = next((a for a in self.assignors if a.name == self.protocol_name), None)
        if assignor is not None:
            assignor.on_assignment(assignment, self.generation)
        if self._assigned_by_hand():
            return
        new = set(assignment.partitions)
        old = set(self.subs.assignment)
        self.client.add_topics({tp.topic for tp in new})
        if self.protocol is RebalanceProtocol.COOPERATIVE:
            revoked = old - new
            added = new - old
            if revoked:
                # Its hand-back drops exactly the states it revoked (see _join).
                await self._revoke(revoked, commit=True)
                # Revoked partitions go to their new owner in a follow-up rebalance.
                self._request_rejoin()
                if self._assigned_by_hand():
                    return
            with self.buffer.lock:
                self.subs.add_partitions(added)
            await self._call_listener("on_partitions_assigned", added)
        else:
            with self.buffer.lock:
                self.subs.set_assignment(sorted(new))
                for st in self.subs.assignment.values():
                    st.paused = False
            await self._call_listener("on_partitions_assigned", new)
        log.info("group %s generation %s: assigned %s", self.group_id, self.generation,
                 sorted(map(str, new)))
        self._last_poll = max(self._last_poll, time.monotonic() - self.max_poll_interval / 2)
        self.wake()

    # --- stable member ------------------------------------------------------------------

    async def _heartbeat_step(self) -> None:
        assert self._changed is not None
        now = time.monotonic()
        poll_deadline = self._last_poll + self.max_poll_interval
        if await self._poll_timeout(now, poll_deadline):
            return
        if await self._auto_commit_if_due(now) and self._rejoin:
            return
        if self._metadata_changed():
            self._request_rejoin()
            return
        await self._heartbeat()
        if self._rejoin:
            return
        wait = min(self.heartbeat_interval, max(0.0, poll_deadline - time.monotonic()))
        if self.auto_commit:
            wait = min(wait, max(0.0, self._next_auto_commit - time.monotonic()))
        await wait_event(self._changed, wait)

    def _metadata_changed(self) -> bool:
        if self._topics_to_join() != self.joined_topics:
            return True
        if self.leader and self._partition_counts:
            topics = self.client.cluster.topics
            for t, n in self._partition_counts.items():
                info = topics.get(t)
                if info is not None and len(info.partitions) != n:
                    return True
        return False

    async def _heartbeat(self) -> None:
        code = await self._send_heartbeat()
        if not code:
            return
        if code == _REBALANCE_IN_PROGRESS:
            log.info("group %s is rebalancing", self.group_id)
            self._request_rejoin()
        elif code in _STALE:
            log.info("group %s: %s; rejoining", self.group_id, for_code(code).__name__)
            await self._lost_all()
            if code == _UNKNOWN_MEMBER_ID:
                self.member_id = ""
            self._request_rejoin()
        elif code == _FENCED_INSTANCE_ID:
            await self._fenced("Heartbeat")
        else:
            raise for_code(code)(f"Heartbeat {self.group_id!r}")

    async def _leaving_heartbeat(self) -> bool:
        code = await self._send_heartbeat()
        if code is None:
            return False
        if code in _STALE or code == _FENCED_INSTANCE_ID:
            # The coordinator dropped the member (or another consumer took its
            # group.instance.id): no longer a member, so no leave follows (as the Java
            # client); the hand-back under way finishes.
            log.info("group %s: %s while handing partitions back before leaving",
                     self.group_id, for_code(code).__name__)
            self._forget_membership()
        elif code and code != _REBALANCE_IN_PROGRESS:
            error = for_code(code)
            if error.retriable:
                return False
            raise error(f"Heartbeat {self.group_id!r}")
        # REBALANCE_IN_PROGRESS: the member is leaving, not rejoining; its heartbeats keep
        # it in the group until the leave, and commits with its generation are still
        # taken meanwhile (as the Java client, whose member stays STABLE).
        return True

    async def _send_heartbeat(self) -> int | None:
        """One Heartbeat with the current generation and member id.

        Returns:
            Its error code (0: none); None when it did not get through: a connection
            failure, a timeout, a retriable error or a coordinator move.

        Raises:
            KafkaError: a non-retriable error sending it.
        """
        try:
            version = await self._conn_version(HeartbeatRequest)
            req = HeartbeatRequest(group_id=self.group_id, generation_id=self.generation,
                                   member_id=self.member_id,
                                   group_instance_id=self.instance_id if version >= 3 else None)
            resp = await self._send(req)
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            log.debug("heartbeat failed: %s", exc)
            return None
        except KafkaError as exc:
            if exc.retriable:
                return None
            raise
        code: int = resp.error_code
        if code and self._coordinator_error(code):
            return None
        self._next_heartbeat = time.monotonic() + self.heartbeat_interval
        return code
