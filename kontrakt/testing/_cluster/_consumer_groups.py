"""The KIP-848 consumer group protocol: ConsumerGroupHeartbeat and ConsumerGroupDescribe.

The coordinator computes each group's target assignment with a server-side assignor
("uniform" or "range") whenever the group epoch moves (a member joins, leaves, expires or
changes its subscription), and reconciles every member towards it on its heartbeats, by
Kafka's rules: a member must first give up the partitions it loses (it is sent its
assignment without them and keeps its epoch until it reports that it no longer owns them);
it then moves to the assignment epoch and receives the partitions of its target that no
other member still holds. Partitions still held elsewhere arrive on a later heartbeat.
"""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Final

from kontrakt.protocol import errors as E
from kontrakt.protocol.messages import (
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatResponse,
)
from kontrakt.protocol.spec import Response
from kontrakt.testing._cluster._state import ClusterState, RequestContext

__all__ = ["ConsumerGroupCoordinator", "ConsumerGroupState"]

_JOIN, _LEAVE, _STATIC_LEAVE = 0, -1, -2
_ASSIGNORS: Final = ("uniform", "range")
_TP = ConsumerGroupHeartbeatResponse.Assignment.TopicPartitions
TopicPartitions = frozenset[tuple[str, int]]


@dataclass(slots=True)
class _Member:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    topics: list[str] = field(default_factory=list)
    regex: str | None = None
    assignor: str | None = None
    rack: str | None = None
    epoch: int = 0
    assigned: set[tuple[str, int]] = field(default_factory=set)
    # asked to give these up, not yet confirmed: nobody else may have them meanwhile
    revoking: set[tuple[str, int]] = field(default_factory=set)
    owned: set[tuple[str, int]] | None = None  # as last reported
    last_sent: TopicPartitions | None = None
    last_seen: float = field(default_factory=time.monotonic)


@dataclass(slots=True)
class ConsumerGroupState:
    """A KIP-848 group's members, epochs and target assignment."""

    members: dict[str, _Member] = field(default_factory=dict)
    group_epoch: int = 0
    assignment_epoch: int = 0
    target: dict[str, set[tuple[str, int]]] = field(default_factory=dict)
    assignor: str = "uniform"

    def state(self) -> str:
        """Kafka's name for the group's state."""
        if not self.members:
            return "Empty"
        if self.assignment_epoch < self.group_epoch:
            return "Assigning"
        if any(m.epoch != self.assignment_epoch or m.assigned != self.target.get(m.member_id)
               for m in self.members.values()):
            return "Reconciling"
        return "Stable"


class ConsumerGroupCoordinator:
    """ConsumerGroupHeartbeat and ConsumerGroupDescribe over the group coordinator's groups."""

    def __init__(self, state: ClusterState, groups: Any) -> None:
        self.state = state
        self.groups = groups  # the classic GroupCoordinator: shared groups and offsets

    def heartbeat(self, ctx: RequestContext, version: int, req: Any) -> Response:
        hr = ConsumerGroupHeartbeatResponse
        interval = self.state.settings.group_consumer_heartbeat_interval_ms

        def fail(code: int, message: str | None = None) -> Response:
            return hr(error_code=code, error_message=message, member_id=req.member_id,
                      member_epoch=-1, heartbeat_interval_ms=interval)

        error = self.groups._coordinator_error(ctx, req.group_id)
        if error:
            return fail(error)
        group = self.groups.groups.get(req.group_id)
        if group is not None and group.members:
            return fail(E.GroupIdNotFoundError.code,
                        f"Group {req.group_id} is a classic group with members")
        if req.server_assignor is not None and req.server_assignor not in _ASSIGNORS:
            return fail(E.UnsupportedAssignorError.code,
                        f"Assignor {req.server_assignor} is not one of {_ASSIGNORS}")
        if group is None:
            group = self.groups._new_group(req.group_id)
        cg: ConsumerGroupState = group.kip848 or ConsumerGroupState()
        group.kip848 = cg
        group.protocol_type = "consumer"
        member_id = req.member_id
        member = cg.members.get(member_id)
        joined = False
        if req.member_epoch in (_LEAVE, _STATIC_LEAVE):
            if member is None:
                return fail(E.UnknownMemberIdError.code)
            self._remove(cg, member)
            return hr(error_code=0, member_id=member_id, member_epoch=req.member_epoch,
                      heartbeat_interval_ms=interval)
        if req.member_epoch == _JOIN:
            if not member_id:
                if version >= 1:
                    return fail(E.InvalidRequestError.code, "MemberId can't be empty.")
                member_id = str(uuid.uuid4())
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None \
                    and member is None:
                return fail(E.InvalidRequestError.code,
                            "SubscribedTopicNames must be set in first request.")
            if member is None:
                member = _Member(member_id, req.instance_id, ctx.client_id or "",
                                 ctx.client_host, req.rebalance_timeout_ms)
                cg.members[member_id] = member
                joined = True
            else:  # a member rejoining from scratch lost what it held
                member.assigned.clear()
                member.revoking.clear()
                member.last_sent = None
        elif member is None:
            return fail(E.UnknownMemberIdError.code)
        elif req.member_epoch != member.epoch:
            return fail(E.FencedMemberEpochError.code,
                        f"The consumer group member has a smaller member epoch "
                        f"({req.member_epoch}) than the one known by the group coordinator "
                        f"({member.epoch}).")
        member.last_seen = time.monotonic()
        if self._update_subscription(cg, member, req) or joined:
            cg.group_epoch += 1  # once per heartbeat, however much changed
        if req.topic_partitions is not None:
            member.owned = {(self._topic_name(tp.topic_id), p) for tp in req.topic_partitions
                            for p in tp.partitions}
        if cg.assignment_epoch < cg.group_epoch:
            self._assign(cg)
        self._reconcile(cg, member)
        assignment = None
        current = frozenset(member.assigned)
        if current != member.last_sent:
            member.last_sent = current
            assignment = hr.Assignment(topic_partitions=self._wire(current))
        return hr(error_code=0, member_id=member_id, member_epoch=member.epoch,
                  heartbeat_interval_ms=interval, assignment=assignment)

    def _update_subscription(self, cg: ConsumerGroupState, member: _Member, req: Any) -> bool:
        """Take the member's subscription; True when it changed."""
        changed = False
        if req.subscribed_topic_names is not None \
                and sorted(req.subscribed_topic_names) != member.topics:
            member.topics = sorted(req.subscribed_topic_names)
            changed = True
        regex = getattr(req, "subscribed_topic_regex", None)
        if regex is not None and regex != member.regex:
            member.regex = regex or None
            changed = True
        if req.server_assignor is not None:
            cg.assignor = req.server_assignor
        if req.rack_id is not None:
            member.rack = req.rack_id
        return changed

    def _subscribed(self, member: _Member) -> list[str]:
        names = set(member.topics)
        if member.regex:
            try:
                pattern = re.compile(member.regex)
            except re.error:
                pattern = None
            if pattern is not None:
                names.update(t for t in self.state.topics if pattern.fullmatch(t))
        return sorted(n for n in names if n in self.state.topics)

    def _assign(self, cg: ConsumerGroupState) -> None:
        """Compute the target assignment for the current members and subscriptions."""
        target: dict[str, set[tuple[str, int]]] = {m: set() for m in cg.members}
        by_topic: dict[str, list[str]] = {}
        for member in cg.members.values():
            for topic in self._subscribed(member):
                by_topic.setdefault(topic, []).append(member.member_id)
        if cg.assignor == "range":
            for topic, members in sorted(by_topic.items()):
                members.sort()
                n = len(self.state.topics[topic].partitions)
                per, extra = divmod(n, len(members))
                start = 0
                for i, mid in enumerate(members):
                    count = per + (1 if i < extra else 0)
                    target[mid].update((topic, p) for p in range(start, start + count))
                    start += count
        else:
            # Uniform: every partition to the least loaded member subscribed to its topic,
            # keeping a partition where it is while that keeps the load even.
            load = dict.fromkeys(cg.members, 0)
            pairs = [(t, p) for t, ms in sorted(by_topic.items())
                     for p in range(len(self.state.topics[t].partitions))]
            quota = -(-len(pairs) // max(len(cg.members), 1))
            later = []
            for tp in pairs:
                holder = next((mid for mid, tps in cg.target.items()
                               if tp in tps and mid in target), None)
                if holder is not None and holder in by_topic[tp[0]] and load[holder] < quota:
                    target[holder].add(tp)
                    load[holder] += 1
                else:
                    later.append(tp)
            for tp in later:
                mid = min(sorted(by_topic[tp[0]]), key=lambda m: load[m])
                target[mid].add(tp)
                load[mid] += 1
        cg.target = target
        cg.assignment_epoch = cg.group_epoch

    def _reconcile(self, cg: ConsumerGroupState, member: _Member) -> None:
        target = cg.target.get(member.member_id, set())
        member.revoking |= member.assigned - target
        member.assigned &= target
        if member.revoking:
            if member.owned is None or member.owned & member.revoking:
                return  # it was told (or is told now) to let them go; its epoch stays
            member.revoking.clear()  # it reported that it let them go
        held = {tp for mid, m in cg.members.items() if mid != member.member_id
                for tp in m.assigned | m.revoking}
        member.assigned |= {tp for tp in target - member.assigned if tp not in held}
        member.epoch = cg.assignment_epoch

    def leave(self, cg: ConsumerGroupState, member_id: str, instance_id: str | None) -> int:
        """LeaveGroup naming a member of this KIP-848 group (an admin removing it): as Kafka
        4's coordinator, a member named by member id alone, or by instance id (with a member
        id that must then be that instance's), is removed, whatever protocol it uses.

        Returns:
            0 (removed), UNKNOWN_MEMBER_ID (no such member or instance) or
            FENCED_INSTANCE_ID (the instance belongs to another member id).
        """
        if instance_id is None:
            member = cg.members.get(member_id)
        else:
            member = next((m for m in cg.members.values() if m.instance_id == instance_id),
                          None)
            if member is not None and member_id and member.member_id != member_id:
                return E.FencedInstanceIdError.code
        if member is None:
            return E.UnknownMemberIdError.code
        self._remove(cg, member)
        return 0

    def _remove(self, cg: ConsumerGroupState, member: _Member) -> None:
        cg.members.pop(member.member_id, None)
        cg.target.pop(member.member_id, None)
        cg.group_epoch += 1

    def tick(self) -> None:
        """Expire members whose session lapsed (group.consumer.session.timeout.ms)."""
        timeout = self.state.settings.group_consumer_session_timeout_ms / 1000
        now = time.monotonic()
        for group in self.groups.groups.values():
            cg = group.kip848
            if cg is None:
                continue
            for member in [m for m in cg.members.values() if now > m.last_seen + timeout]:
                self._remove(cg, member)

    def member_epoch_error(self, group: Any, member_id: str, epoch: int) -> int:
        """OffsetCommit / OffsetFetch checks of a KIP-848 member (0 when fine)."""
        member = group.kip848.members.get(member_id)
        if member is None:
            return E.UnknownMemberIdError.code
        if epoch != member.epoch:
            return E.StaleMemberEpochError.code
        return 0

    def _topic_name(self, topic_id: uuid.UUID) -> str:
        topic = self.state.topics_by_id.get(topic_id)
        return topic.name if topic is not None else str(topic_id)

    def _wire(self, tps: TopicPartitions) -> list[Any]:
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(tps):
            by_topic.setdefault(t, []).append(p)
        return [_TP(topic_id=self.state.topics[t].topic_id, partitions=ps)
                for t, ps in by_topic.items() if t in self.state.topics]

    def describe(self, ctx: RequestContext, version: int, req: Any) -> Response:
        dr = ConsumerGroupDescribeResponse
        dg = dr.DescribedGroup
        out = []
        for gid in req.group_ids:
            error = self.groups._coordinator_error(ctx, gid)
            group = self.groups.groups.get(gid)
            if not error and (group is None or group.kip848 is None):
                error = E.GroupIdNotFoundError.code
            if error or group is None or group.kip848 is None:
                out.append(dg(error_code=error, group_id=gid, group_state="",
                              assignor_name=""))
                continue
            cg = group.kip848

            def described(tps: set[tuple[str, int]]) -> Any:
                by_topic: dict[str, list[int]] = {}
                for t, p in sorted(tps):
                    by_topic.setdefault(t, []).append(p)
                acls = dg.Member.ConsumerGroupDescribeAssignment
                return acls(topic_partitions=[
                    acls.ConsumerGroupDescribeTopicPartitions(
                        topic_id=self.state.topics[t].topic_id, topic_name=t, partitions=ps)
                    for t, ps in by_topic.items() if t in self.state.topics])

            out.append(dg(
                error_code=0, group_id=gid, group_state=cg.state(),
                group_epoch=cg.group_epoch, assignment_epoch=cg.assignment_epoch,
                assignor_name=cg.assignor, members=[dg.Member(
                    member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack,
                    member_epoch=m.epoch, client_id=m.client_id, client_host="/" + m.client_host,
                    subscribed_topic_names=m.topics, subscribed_topic_regex=m.regex,
                    assignment=described(m.assigned),
                    target_assignment=described(cg.target.get(m.member_id, set())),
                    member_type=1) for m in cg.members.values()]))
        return dr(groups=out)
