"""The classic group coordinator: JoinGroup, SyncGroup, Heartbeat, LeaveGroup (any protocol
type, several members, static membership, rebalance and session timeouts) and the group
admin APIs; committed offsets live in :mod:`._offsets`.

States and transitions follow Kafka's GroupCoordinator: Empty -> PreparingRebalance (a
member joins, leaves or expires) -> CompletingRebalance (every member rejoined, or the
rebalance timeout removed the ones that did not) -> Stable (the leader's SyncGroup).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from kontrakt.protocol import errors as E
from kontrakt.protocol.messages import (
    DeleteGroupsResponse,
    DescribeGroupsResponse,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    ListGroupsResponse,
    SyncGroupResponse,
)
from kontrakt.protocol.spec import Response
from kontrakt.testing._cluster._offsets import Committed, OffsetStore
from kontrakt.testing._cluster._state import ClusterState, RequestContext

__all__ = ["Group", "GroupCoordinator"]

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (
    "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")
_GROUP_KEY = 0


@dataclass(frozen=True, slots=True)
class _JoinResult:
    error: int
    generation: int = -1
    protocol: str | None = None
    leader: str = ""
    member_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass(slots=True)
class Member:
    """A member of a classic group."""

    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    joining: asyncio.Future[_JoinResult] | None = None
    syncing: asyncio.Future[tuple[int, bytes]] | None = None
    last_seen: float = field(default_factory=time.monotonic)

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""


@dataclass(slots=True)
class Group:
    """A classic group with its committed offsets."""

    group_id: str
    state: str = EMPTY
    protocol_type: str | None = None
    protocol: str | None = None
    generation: int = 0
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending: dict[str, float] = field(default_factory=dict)  # member id -> expiry
    join_deadline: float = 0.0
    delay_until: float = 0.0
    offsets: dict[tuple[str, int], Committed] = field(default_factory=dict)
    kip848: Any = None  # a ConsumerGroupState once a KIP-848 member joined


class GroupCoordinator(OffsetStore):
    """Every classic group of the cluster (each answered only by its coordinator broker)."""

    def __init__(self, state: ClusterState) -> None:
        super().__init__(state)

    # --- helpers ----------------------------------------------------------------------------
    def _coordinator_error(self, ctx: RequestContext, group_id: str) -> int:
        if not group_id:
            return E.InvalidGroupIdError.code
        if self.state.coordinator_for(_GROUP_KEY, group_id) != ctx.node_id:
            return E.NotCoordinatorError.code
        return 0

    def _member_error(self, group: Group | None, member_id: str, instance_id: str | None,
                      generation: int | None) -> int:
        """UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID / ILLEGAL_GENERATION, else 0."""
        if group is None:
            return E.UnknownMemberIdError.code
        if instance_id is not None and instance_id in group.static \
                and group.static[instance_id] != member_id:
            return E.FencedInstanceIdError.code
        if member_id not in group.members:
            return E.UnknownMemberIdError.code
        if generation is not None and generation != group.generation:
            return E.IllegalGenerationError.code
        return 0

    def _prepare_rebalance(self, group: Group) -> None:
        now = time.monotonic()
        if group.state == COMPLETING:
            for m in group.members.values():
                if m.syncing is not None and not m.syncing.done():
                    m.syncing.set_result((E.RebalanceInProgressError.code, b""))
                m.syncing = None
        if group.state != PREPARING:
            was_empty = group.state == EMPTY
            group.state = PREPARING
            timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
            group.join_deadline = now + timeout / 1000
            delay = self.state.settings.group_initial_rebalance_delay_ms if was_empty else 0
            group.delay_until = now + min(delay, timeout) / 1000

    def _maybe_complete_join(self, group: Group) -> None:
        if group.state != PREPARING or time.monotonic() < group.delay_until:
            return
        if all(m.joining is not None and not m.joining.done() for m in group.members.values()):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        for m in [m for m in group.members.values()
                  if m.joining is None or m.joining.done()]:
            self._remove(group, m, E.UnknownMemberIdError.code)
        group.generation += 1
        if not group.members:
            group.state, group.protocol, group.leader = EMPTY, None, None
            group.protocol_type = None
            return
        group.protocol = _select_protocol(list(group.members.values()))
        if group.leader not in group.members:
            group.leader = next(iter(group.members))
        group.state = COMPLETING
        now = time.monotonic()
        everyone = _member_list(group)
        for m in group.members.values():
            m.assignment = b""
            m.last_seen = now
            assert m.joining is not None
            m.joining.set_result(_JoinResult(
                0, group.generation, group.protocol, group.leader, m.member_id,
                everyone if m.member_id == group.leader else []))
            m.joining = None

    def _remove(self, group: Group, member: Member, error: int) -> None:
        group.members.pop(member.member_id, None)
        if member.instance_id is not None and \
                group.static.get(member.instance_id) == member.member_id:
            del group.static[member.instance_id]
        if member.joining is not None and not member.joining.done():
            member.joining.set_result(_JoinResult(error, member_id=member.member_id))
        if member.syncing is not None and not member.syncing.done():
            member.syncing.set_result((error, b""))
        if group.leader == member.member_id:
            group.leader = None

    def _member_gone(self, group: Group, member: Member, error: int) -> None:
        """A member left or expired: rebalance the rest (or empty the group)."""
        self._remove(group, member, error)
        if group.state in (STABLE, COMPLETING, EMPTY):
            self._prepare_rebalance(group)
        self._maybe_complete_join(group)

    def tick(self) -> None:
        """Expire sessions and pending member ids; end rebalances that timed out."""
        now = time.monotonic()
        for group in list(self.groups.values()):
            for mid, expiry in list(group.pending.items()):
                if now > expiry:
                    del group.pending[mid]
            if group.state == PREPARING and now >= group.join_deadline:
                self._complete_join(group)
                continue
            for m in list(group.members.values()):
                waiting = m.joining is not None and not m.joining.done()
                if not waiting and now > m.last_seen + m.session_timeout_ms / 1000:
                    self._member_gone(group, m, E.UnknownMemberIdError.code)
            self._maybe_complete_join(group)

    # --- JoinGroup --------------------------------------------------------------------------
    async def join_group(self, ctx: RequestContext, version: int, req: Any) -> Response:
        result = await self._join(ctx, version, req)
        return JoinGroupResponse(
            error_code=result.error, generation_id=result.generation,
            protocol_type=self.groups[req.group_id].protocol_type
            if version >= 7 and req.group_id in self.groups and not result.error else None,
            protocol_name=result.protocol if result.protocol is not None or version >= 7
            else "",
            leader=result.leader, member_id=result.member_id,
            skip_assignment=result.skip_assignment,
            members=[JoinGroupResponse.JoinGroupResponseMember(
                member_id=mid, group_instance_id=iid if version >= 5 else None, metadata=meta)
                for mid, iid, meta in result.members])

    async def _join(self, ctx: RequestContext, version: int, req: Any) -> _JoinResult:
        settings = self.state.settings
        error = self._coordinator_error(ctx, req.group_id)
        if error:
            return _JoinResult(error, member_id=req.member_id)
        if not settings.group_min_session_timeout_ms <= req.session_timeout_ms \
                <= settings.group_max_session_timeout_ms:
            return _JoinResult(E.InvalidSessionTimeoutError.code, member_id=req.member_id)
        group = self.groups.setdefault(req.group_id, Group(req.group_id))
        protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]
        if not protocols or not _compatible(group, req.protocol_type, protocols):
            return _JoinResult(E.InconsistentGroupProtocolError.code, member_id=req.member_id)
        iid = req.group_instance_id
        member_id = req.member_id
        if not member_id:
            member_id = f"{ctx.client_id or 'client'}-{uuid.uuid4()}"
            if iid is not None and iid in group.static:
                return await self._replace_static(group, group.static[iid], member_id, req,
                                                  protocols)
            if iid is None and version >= 4:
                timeout = req.session_timeout_ms / 1000
                group.pending[member_id] = time.monotonic() + timeout
                return _JoinResult(E.MemberIdRequiredError.code, member_id=member_id)
        elif member_id in group.pending:
            del group.pending[member_id]
        else:
            error = self._member_error(group, member_id, iid, None)
            if error:
                return _JoinResult(error, member_id=member_id)
        member = group.members.get(member_id)
        rebalance_timeout = req.rebalance_timeout_ms if version >= 1 \
            and req.rebalance_timeout_ms > 0 else req.session_timeout_ms
        if member is None:
            member = Member(member_id, iid, ctx.client_id or "", ctx.client_host,
                            req.session_timeout_ms, rebalance_timeout, req.protocol_type,
                            protocols)
            group.members[member_id] = member
            if iid is not None:
                group.static[iid] = member_id
        else:
            unchanged = member.protocols == protocols
            member.protocols = protocols
            member.session_timeout_ms = req.session_timeout_ms
            member.rebalance_timeout_ms = rebalance_timeout
            if unchanged and member_id != group.leader and group.state in (STABLE, COMPLETING):
                member.last_seen = time.monotonic()
                return _JoinResult(0, group.generation, group.protocol, group.leader or "",
                                   member_id)
        return await self._await_join(group, member)

    async def _await_join(self, group: Group, member: Member) -> _JoinResult:
        group.protocol_type = member.protocol_type
        loop = asyncio.get_running_loop()
        if member.joining is not None and not member.joining.done():
            member.joining.set_result(_JoinResult(E.UnknownMemberIdError.code,
                                                  member_id=member.member_id))
        fut: asyncio.Future[_JoinResult] = loop.create_future()
        member.joining = fut
        self._prepare_rebalance(group)
        self._maybe_complete_join(group)
        return await fut

    async def _replace_static(self, group: Group, old_id: str, new_id: str, req: Any,
                              protocols: list[tuple[str, bytes]]) -> _JoinResult:
        """A static member came back with a new member id: fence the old id, keep its
        assignment, and rebalance only when its protocols changed (Kafka's rules)."""
        old = group.members.pop(old_id)
        if old.joining is not None and not old.joining.done():
            old.joining.set_result(_JoinResult(E.FencedInstanceIdError.code, member_id=old_id))
        if old.syncing is not None and not old.syncing.done():
            old.syncing.set_result((E.FencedInstanceIdError.code, b""))
        old.joining = old.syncing = None
        old.member_id = new_id
        group.members[new_id] = old
        group.static[old.instance_id or ""] = new_id
        if group.leader == old_id:
            group.leader = new_id
        old.session_timeout_ms = req.session_timeout_ms
        old.last_seen = time.monotonic()
        old.protocols = protocols
        # The subscription bytes of a restarted member differ (its owned partitions and
        # generation start over); like Kafka, only a change of the group's protocol forces
        # a rebalance. A returning leader gets the members but must keep the assignment
        # (KIP-814's skip_assignment; SyncGroup of a stable group answers the stored one).
        if group.state == STABLE and \
                _select_protocol(list(group.members.values())) == group.protocol:
            leads = group.leader == new_id
            everyone = _member_list(group) if leads else []
            return _JoinResult(0, group.generation, group.protocol, group.leader or "",
                               new_id, everyone, skip_assignment=leads)
        return await self._await_join(group, old)

    # --- SyncGroup / Heartbeat / LeaveGroup -------------------------------------------------
    async def sync_group(self, ctx: RequestContext, version: int, req: Any) -> Response:
        error, assignment = await self._sync(ctx, version, req)
        group = self.groups.get(req.group_id)
        named = version >= 5 and group is not None and not error
        return SyncGroupResponse(
            error_code=error, assignment=assignment,
            protocol_type=group.protocol_type if named and group else None,
            protocol_name=group.protocol if named and group else None)

    async def _sync(self, ctx: RequestContext, version: int, req: Any) -> tuple[int, bytes]:
        error = self._coordinator_error(ctx, req.group_id)
        group = self.groups.get(req.group_id)
        if not error:
            error = self._member_error(group, req.member_id, req.group_instance_id,
                                       req.generation_id)
        if error or group is None:
            return error, b""
        if version >= 5 and ((req.protocol_type is not None
                              and req.protocol_type != group.protocol_type)
                             or (req.protocol_name is not None
                                 and req.protocol_name != group.protocol)):
            return E.InconsistentGroupProtocolError.code, b""
        member = group.members[req.member_id]
        member.last_seen = time.monotonic()
        if group.state == PREPARING:
            return E.RebalanceInProgressError.code, b""
        if group.state == STABLE:
            return 0, member.assignment
        fut: asyncio.Future[tuple[int, bytes]] = asyncio.get_running_loop().create_future()
        member.syncing = fut
        if req.member_id == group.leader:
            given = {a.member_id: bytes(a.assignment) for a in req.assignments}
            group.state = STABLE
            for m in group.members.values():
                m.assignment = given.get(m.member_id, b"")
                if m.syncing is not None and not m.syncing.done():
                    m.syncing.set_result((0, m.assignment))
                m.syncing = None
        return await fut

    def heartbeat(self, ctx: RequestContext, version: int, req: Any) -> Response:
        error = self._coordinator_error(ctx, req.group_id)
        group = self.groups.get(req.group_id)
        if not error:
            error = self._member_error(group, req.member_id, req.group_instance_id,
                                       req.generation_id)
        if not error and group is not None:
            group.members[req.member_id].last_seen = time.monotonic()
            if group.state == PREPARING:
                error = E.RebalanceInProgressError.code
        return HeartbeatResponse(error_code=error)

    def leave_group(self, ctx: RequestContext, version: int, req: Any) -> Response:
        lr = LeaveGroupResponse
        error = self._coordinator_error(ctx, req.group_id)
        group = self.groups.get(req.group_id)
        leaving = ([(m.member_id, m.group_instance_id) for m in req.members] if version >= 3
                   else [(req.member_id, None)])
        results = []
        for member_id, iid in leaving:
            code = error
            if not code and group is not None and group.kip848 is not None \
                    and not group.members:
                # A consumer-protocol group: Kafka 4's coordinator removes any member it
                # names (KAFKA-18188), as an admin's removeMembersFromConsumerGroup needs.
                code = self.kip848.leave(group.kip848, member_id, iid)
            elif not code:
                known = member_id
                if group is not None and not member_id and iid is not None:
                    known = group.static.get(iid, "")
                code = self._member_error(group, known, iid, None)
                if not code and group is not None:
                    self._member_gone(group, group.members[known],
                                      E.UnknownMemberIdError.code)
            # As Kafka: the member id the request gave (empty for a removal by instance id).
            results.append(lr.MemberResponse(member_id=member_id, group_instance_id=iid,
                                              error_code=code))
        if version >= 3:
            return lr(error_code=error, members=results)
        return lr(error_code=results[0].error_code)

    # --- group admin ------------------------------------------------------------------------
    def list_groups(self, ctx: RequestContext, version: int, req: Any) -> Response:
        lr = ListGroupsResponse
        states = {s.lower() for s in req.states_filter} if version >= 4 else set()
        types = {t.lower() for t in req.types_filter} if version >= 5 else set()
        out = []
        for gid, group in sorted(self.groups.items()):
            if self.state.coordinator_for(_GROUP_KEY, gid) != ctx.node_id:
                continue
            kind = "consumer" if group.kip848 is not None else "classic"
            state = group.kip848.state() if group.kip848 is not None else group.state
            if (states and state.lower() not in states) or (types and kind not in types):
                continue
            out.append(lr.ListedGroup(group_id=gid, protocol_type=group.protocol_type or "",
                                      group_state=state, group_type=kind))
        return lr(error_code=0, groups=out)

    def describe_groups(self, ctx: RequestContext, version: int, req: Any) -> Response:
        dr = DescribeGroupsResponse
        out = []
        for gid in req.groups:
            error = self._coordinator_error(ctx, gid)
            group = self.groups.get(gid)
            if group is not None and group.kip848 is not None:
                group = None  # as Kafka 4: a consumer-protocol group is not a classic one
            if error or group is None:
                if not error and version >= 6:
                    error = E.GroupIdNotFoundError.code
                out.append(dr.DescribedGroup(error_code=error, group_id=gid,
                                             group_state=DEAD, protocol_type="",
                                             protocol_data=""))
                continue
            settled = group.state in (STABLE, COMPLETING)
            out.append(dr.DescribedGroup(
                error_code=0, group_id=gid, group_state=group.state,
                protocol_type=group.protocol_type or "",
                protocol_data=group.protocol or "" if settled else "",
                members=[dr.DescribedGroup.DescribedGroupMember(
                    member_id=m.member_id,
                    group_instance_id=m.instance_id if version >= 4 else None,
                    client_id=m.client_id, client_host="/" + m.client_host,
                    member_metadata=m.metadata(group.protocol) if settled else b"",
                    member_assignment=m.assignment if group.state == STABLE else b"")
                    for m in group.members.values()]))
        return dr(groups=out)

    def delete_groups(self, ctx: RequestContext, version: int, req: Any) -> Response:
        dr = DeleteGroupsResponse
        out = []
        for gid in req.groups_names:
            error = self._coordinator_error(ctx, gid)
            group = self.groups.get(gid)
            if not error:
                if group is None:
                    error = E.GroupIdNotFoundError.code
                elif group.members or (group.kip848 is not None and group.kip848.members):
                    error = E.NonEmptyGroupError.code
                else:
                    del self.groups[gid]
                    if self.state.persist is not None:
                        self.state.persist.group_deleted(gid)
            out.append(dr.DeletableGroupResult(group_id=gid, error_code=error))
        return dr(results=out)


def _compatible(group: Group, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
    """A joining member fits the group: same protocol type, one protocol in common."""
    if group.kip848 is not None and group.kip848.members:
        return False  # a KIP-848 group with members
    if not group.members:
        return True
    if protocol_type != group.protocol_type:
        return False
    common = set.intersection(*({n for n, _ in m.protocols} for m in group.members.values()))
    return bool(common & {n for n, _ in protocols})


def _member_list(group: Group) -> list[tuple[str, str | None, bytes]]:
    """What the leader's JoinGroup answer lists: each member's id, instance id and
    subscription for the chosen protocol."""
    return [(m.member_id, m.instance_id, m.metadata(group.protocol))
            for m in group.members.values()]


def _select_protocol(members: list[Member]) -> str:
    """Kafka's vote: every member votes for its first protocol that all members support."""
    common = set.intersection(*({n for n, _ in m.protocols} for m in members))
    votes: dict[str, int] = {}
    for m in members:
        choice = next(n for n, _ in m.protocols if n in common)
        votes[choice] = votes.get(choice, 0) + 1
    return max(votes, key=lambda n: votes[n])
