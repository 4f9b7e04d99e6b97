"""Admin operations on consumer groups — a base class of
:class:`~kontrakt.clients.admin.AsyncAdminClient`: list, describe and delete groups, and
remove members from one.

Routing: each group's operation goes to its coordinator (FindCoordinator, cached; retried
after NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS, see
:meth:`Router.per_coordinator`); ListGroups goes to every broker and is merged. A group's
committed offsets are in :mod:`._offsets`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from kontrakt._types import TopicPartition
from kontrakt.clients.admin import _validate as v
from kontrakt.clients.admin._acls import authorized_operations
from kontrakt.clients.admin._routing import Router, error_for, finish
from kontrakt.clients.admin._types import (
    ConsumerGroupDescription,
    ConsumerGroupListing,
    ConsumerGroupState,
    ConsumerGroupType,
    GroupListing,
    MemberAssignment,
    MemberDescription,
    Node,
    ShareGroupDescription,
    ShareMemberDescription,
)
from kontrakt.clients.client import AsyncKafkaClient
from kontrakt.clients.group._protocol import decode_assignment, decode_subscription
from kontrakt.errors import (
    CorruptMessageError,
    InvalidArgumentError,
    KafkaError,
    PartialFailureError,
    UnsupportedVersionError,
)
from kontrakt.protocol.errors import GroupIdNotFoundError
from kontrakt.protocol.errors import UnsupportedVersionError as UnsupportedVersionResponse
from kontrakt.protocol.messages import (
    ConsumerGroupDescribeRequest,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    ShareGroupDescribeRequest,
)
from kontrakt.protocol.spec import Request

__all__ = ["GroupOperations"]

# ConsumerGroupDescribe's answers for a group it does not describe: a classic group (or
# none), or a coordinator that cannot use the API for it. DescribeGroups is asked next.
_FALL_BACK = frozenset({GroupIdNotFoundError.code, UnsupportedVersionResponse.code})

# The Java admin's LeaveGroup reason when the caller gives none, and the length it cuts a
# reason to (as JoinGroup's, KIP-800).
_ADMIN_LEAVE_REASON = "member was removed by an admin"
_MAX_REASON = 255


class GroupOperations:
    """Consumer group operations (see the module doc)."""

    _client: AsyncKafkaClient
    _router: Router

    async def list_consumer_groups(self, *, states: Iterable[ConsumerGroupState] | None = None,
                                   types: Iterable[ConsumerGroupType] | None = None,
                                   timeout: float | None = None) -> list[ConsumerGroupListing]:
        """Every group of every broker, sorted by id.

        Args:
            states: only groups in these states (brokers with ListGroups v4+).
            types: only groups of these types (brokers with ListGroups v5+).

        Raises:
            PartialFailureError: a broker failed; ``.results`` maps broker id to its list
                or its error.
            UnsupportedVersionError: (in the results) a filter the broker cannot apply.
        """
        state_names = [ConsumerGroupState(s).value for s in states or ()]
        type_names = [ConsumerGroupType(t).value.lower() for t in types or ()]
        return await self._listed_groups(
            state_names, type_names, timeout, "list_consumer_groups",
            lambda g: ConsumerGroupListing(
                g.group_id, not g.protocol_type, ConsumerGroupState.parse(g.group_state),
                ConsumerGroupType.parse(g.group_type), g.protocol_type))

    async def list_groups(self, *, states: Iterable[ConsumerGroupState | str] | None = None,
                          types: Iterable[ConsumerGroupType | str] | None = None,
                          timeout: float | None = None) -> list[GroupListing]:
        """Every group of every type (classic, consumer, share, streams, and other
        protocols' such as Connect's) that any broker coordinates, sorted by id: Java's
        ``Admin.listGroups`` (KIP-1043). Every broker is asked (ListGroups) and the answers
        merged.

        Args:
            states: only groups in these states (members of :class:`ConsumerGroupState` or
                their names, any case); brokers with ListGroups v4+ (Kafka 2.6).
            types: only groups of these types (members of :class:`ConsumerGroupType` or
                their names, any case: ``"classic"``, ``"consumer"``, ``"share"``,
                ``"streams"``); brokers with ListGroups v5+ (Kafka 3.8).
            timeout: seconds for the whole call (default: the client's
                ``default.api.timeout.ms``); a broker's retriable errors (e.g.
                COORDINATOR_LOAD_IN_PROGRESS) are retried until then.

        Returns:
            one :class:`GroupListing` per group. A listing's ``state`` is UNKNOWN when the
            broker predates ListGroups v4, its ``type`` UNKNOWN before v5.

        Raises:
            InvalidArgumentError: an unknown state or type name, before anything is sent.
            UnsupportedVersionError: the only broker cannot apply a filter (below v4 for
                ``states``, v5 for ``types``); nothing is sent to it.
            PartialFailureError: some brokers failed; ``.results`` maps broker id to its
                list of :class:`GroupListing` or its error.
        """
        state_names = [_member(ConsumerGroupState, s, "state").value for s in states or ()]
        type_names = [_member(ConsumerGroupType, t, "type").value.lower() for t in types or ()]
        return await self._listed_groups(
            state_names, type_names, timeout, "list_groups",
            lambda g: GroupListing(g.group_id, ConsumerGroupType.parse(g.group_type),
                                   g.protocol_type, ConsumerGroupState.parse(g.group_state)))

    async def _listed_groups(self, state_names: list[str], type_names: list[str],
                             timeout: float | None, what: str,
                             listing: Callable[[Any], _L]) -> list[_L]:
        """ListGroups (filtered) on every broker; each group answered made a ``listing``,
        merged by id and sorted. A broker that fails fails the call as :func:`finish`
        says (its results: broker id -> listings or error)."""
        deadline = self._router.deadline(timeout)
        await self._client.start()

        def build(version: int) -> Request:
            # As Java's ListGroupsRequest.Builder: a filter the version cannot carry is an
            # error, not silently dropped (that would list groups the caller excluded).
            if (state_names and version < 4) or (type_names and version < 5):
                raise UnsupportedVersionError(
                    f"ListGroups v{version} cannot filter by state/type")
            return ListGroupsRequest(states_filter=state_names if version >= 4 else [],
                                     types_filter=type_names if version >= 5 else [])

        async def send(node: int, _b: list[int]) -> dict[int, Any]:
            resp = await self._router.exchange(node, ListGroupsRequest, build, deadline)
            if resp.error_code:
                return {node: error_for(resp.error_code, None, f"broker {node}")}
            return {node: [listing(g) for g in resp.groups]}

        results = await self._router.per_entity(
            self._router.brokers(),
            lambda batch: self._router.fan_out({b: [b] for b in batch}, send), deadline)
        finish(results, what, False)
        merged = {g.group_id: g for listing in results.values() for g in listing}
        return [merged[k] for k in sorted(merged)]

    async def describe_consumer_groups(self, group_ids: Iterable[str], *,
                                       include_authorized_operations: bool = False,
                                       timeout: float | None = None,
                                       return_exceptions: bool = False
                                       ) -> dict[str, ConsumerGroupDescription]:
        """Describe groups of either protocol, as the Java admin does: each group is asked
        of its coordinator with ConsumerGroupDescribe (KIP-848) first, and with
        DescribeGroups when that answers GROUP_ID_NOT_FOUND (a classic group) or
        UNSUPPORTED_VERSION, or when the coordinator does not offer ConsumerGroupDescribe
        (before Kafka 3.7). A classic group's members' subscriptions and assignments are
        decoded (consumer protocol versions 0-3, with :mod:`kontrakt.clients.group`'s
        codec; other protocols keep the raw bytes only); a KIP-848 group's come decoded
        from the broker, with each member's target assignment and epoch.

        Returns:
            group id -> :class:`ConsumerGroupDescription`, whose ``type`` says which
            protocol the group uses. A group that does not exist is described as a DEAD
            classic group with no members by brokers before Kafka 4 (DescribeGroups v5 and
            below); from Kafka 4 it fails with ``GroupIdNotFoundError``.

        Raises:
            InvalidArgumentError: an empty group id.
            PartialFailureError: some groups failed.
        """
        ids = v.unique((v.check_group_id(g) for g in group_ids), "group")
        deadline = self._router.deadline(timeout)
        await self._client.start()

        # Groups to ask with DescribeGroups from now on (kept across retries, as Java's
        # DescribeConsumerGroupsHandler does), and ConsumerGroupDescribe's GROUP_ID_NOT_FOUND
        # message, which says more than DescribeGroups' if that finds no group either.
        classic: set[str] = set()
        not_found: dict[str, str | None] = {}

        async def send(node: int, batch: list[str]) -> dict[str, Any]:
            broker = self._client.broker(node)
            coordinator = None if broker is None else Node(node, broker.host, broker.port,
                                                           broker.rack)
            out: dict[str, Any] = {}
            new = [g for g in batch if g not in classic]
            if new:
                try:
                    resp = await self._router.exchange(
                        node, ConsumerGroupDescribeRequest, lambda ver: (
                            ConsumerGroupDescribeRequest(
                                group_ids=new,
                                include_authorized_operations=include_authorized_operations)),
                        deadline)
                except UnsupportedVersionError:
                    classic.update(new)  # the coordinator predates KIP-848's API
                else:
                    for g in resp.groups:
                        # A group epoch below 0 is no group Kafka's coordinator keeps (its
                        # epochs start at 0): Tansu advertises ConsumerGroupDescribe but
                        # answers every group id so, without members (measured). Java's
                        # admin would report a member-less KIP-848 group; DescribeGroups
                        # describes what the broker knows instead.
                        if g.error_code in _FALL_BACK or (
                                not g.error_code and g.group_epoch < 0):
                            classic.add(g.group_id)
                            if g.error_code == GroupIdNotFoundError.code:
                                not_found[g.group_id] = g.error_message
                        elif g.error_code:
                            out[g.group_id] = error_for(g.error_code, g.error_message,
                                                        f"group {g.group_id!r}")
                        else:
                            out[g.group_id] = _describe_consumer_group(
                                g, coordinator, include_authorized_operations)
            old = [g for g in batch if g in classic and g not in out]
            if not old:
                return out
            try:
                resp = await self._router.exchange(node, DescribeGroupsRequest, lambda ver: (
                    DescribeGroupsRequest(groups=old, include_authorized_operations=(
                        include_authorized_operations and ver >= 3))), deadline)
            except KafkaError as exc:  # the groups already described stay described
                return {**out, **{g: exc for g in old}}
            for g in resp.groups:
                if g.error_code:
                    message = g.error_message
                    if g.error_code == GroupIdNotFoundError.code:
                        message = not_found.get(g.group_id) or message
                    out[g.group_id] = error_for(g.error_code, message,
                                                f"group {g.group_id!r}")
                    continue
                out[g.group_id] = _describe_group(g, coordinator, include_authorized_operations)
            return out

        results = await self._router.per_coordinator(ids, "group", deadline, send)
        return finish(results, "describe_consumer_groups", return_exceptions)

    async def describe_share_groups(self, group_ids: Iterable[str], *,
                                    include_authorized_operations: bool = False,
                                    timeout: float | None = None,
                                    return_exceptions: bool = False
                                    ) -> dict[str, ShareGroupDescription]:
        """Describe share groups (KIP-932) with ShareGroupDescribe, each asked of its
        coordinator, as Java's ``Admin.describeShareGroups``.

        Returns:
            group id -> :class:`ShareGroupDescription`.

        Raises:
            InvalidArgumentError: an empty group id.
            PartialFailureError: some groups failed (``GroupIdNotFoundError`` for a group
                that does not exist or is not a share group).
            UnsupportedVersionError: (in the results) a coordinator without
                ShareGroupDescribe (before Kafka 4.1, or share groups not enabled).
        """
        ids = v.unique((v.check_group_id(g) for g in group_ids), "group")
        deadline = self._router.deadline(timeout)
        await self._client.start()

        async def send(node: int, batch: list[str]) -> dict[str, Any]:
            broker = self._client.broker(node)
            coordinator = None if broker is None else Node(node, broker.host, broker.port,
                                                           broker.rack)
            resp = await self._router.exchange(node, ShareGroupDescribeRequest, lambda ver: (
                ShareGroupDescribeRequest(
                    group_ids=batch,
                    include_authorized_operations=include_authorized_operations)), deadline)
            out: dict[str, Any] = {}
            for g in resp.groups:
                if g.error_code:
                    out[g.group_id] = error_for(g.error_code, g.error_message,
                                                f"share group {g.group_id!r}")
                else:
                    out[g.group_id] = _describe_share_group(g, coordinator,
                                                            include_authorized_operations)
            return out

        results = await self._router.per_coordinator(ids, "group", deadline, send)
        return finish(results, "describe_share_groups", return_exceptions)

    async def delete_consumer_groups(self, group_ids: Iterable[str], *,
                                     timeout: float | None = None,
                                     return_exceptions: bool = False) -> dict[str, None]:
        """Delete groups (they must be empty).

        Raises:
            InvalidArgumentError: an empty group id.
            PartialFailureError: some groups failed (``NonEmptyGroupError``,
                ``GroupIdNotFoundError``).
        """
        ids = v.unique((v.check_group_id(g) for g in group_ids), "group")
        deadline = self._router.deadline(timeout)
        await self._client.start()

        async def send(node: int, batch: list[str]) -> dict[str, Any]:
            resp = await self._router.exchange(node, DeleteGroupsRequest, lambda ver: (
                DeleteGroupsRequest(groups_names=batch)), deadline)
            return {r.group_id: error_for(r.error_code, None, f"group {r.group_id!r}")
                    if r.error_code else None for r in resp.results}

        results = await self._router.per_coordinator(ids, "group", deadline, send)
        return finish(results, "delete_consumer_groups", return_exceptions)

    async def remove_members_from_consumer_group(
            self, group_id: str, members: Iterable[str] | None = None, *,
            reason: str | None = None, timeout: float | None = None,
            return_exceptions: bool = False) -> dict[str, None]:
        """Remove members from a group (LeaveGroup v3+ on their behalf, KIP-345), as the Java
        admin's ``removeMembersFromConsumerGroup``: the group rebalances without them.

        Works on groups of either protocol. ``members=None`` lists the members as
        :meth:`describe_consumer_groups` does (ConsumerGroupDescribe first, DescribeGroups
        for a classic group) and names each static member by its ``group.instance.id``
        alone and each dynamic one by its member id, as Java's ``removeAll``. A KIP-848
        (consumer protocol) group's coordinator removes any member so named from Kafka 4.0
        on (KAFKA-18188); earlier brokers answer UNKNOWN_MEMBER_ID for its members that use
        the consumer protocol (3.8 and 3.9 remove those that joined with the classic one),
        and that error is reported for each such member.

        Args:
            group_id: the group.
            members: the ``group.instance.id`` of each static member to remove; None removes
                every member the group has now (static and dynamic).
            reason: sent to brokers with LeaveGroup v5+ (KIP-800), shown in their logs;
                by default, as Java's, "member was removed by an admin" (at most 255
                characters are sent).

        Returns:
            member -> None for each removed member, keyed by its instance id (or, for a
            dynamic member removed with ``members=None``, its member id); with
            ``return_exceptions``, a member the broker refused maps to its error.

        Raises:
            InvalidArgumentError: an empty group id or instance id, or ``members`` empty.
            UnsupportedVersionError: the coordinator predates LeaveGroup v3 (Kafka 2.4).
            BrokerResponseError: a group-level error (e.g. ``GroupIdNotFoundError``, also
                from the describe that lists the members).
            PartialFailureError: some members failed (``UnknownMemberIdError``, or
                ``FencedInstanceIdError``); for a single member, its own error.
        """
        gid = v.check_group_id(group_id)
        wanted: list[tuple[str, str | None]] | None = None
        if members is not None:
            ids = v.unique(members, "group.instance.id")
            bad = [m for m in ids if not isinstance(m, str) or not m]
            if bad:
                raise InvalidArgumentError(f"members: a group.instance.id must be a non-empty "
                                           f"str, got {bad[0]!r}")
            if not ids:
                raise InvalidArgumentError("members: name at least one group.instance.id, "
                                           "or pass None to remove every member")
            wanted = [("", iid) for iid in ids]
        why = (reason or _ADMIN_LEAVE_REASON)[:_MAX_REASON]
        deadline = self._router.deadline(timeout)
        await self._client.start()
        if wanted is None:
            described = (await self.describe_consumer_groups(
                [gid], timeout=self._router.remaining(deadline), return_exceptions=True))[gid]
            if isinstance(described, BaseException):
                raise described
            # A static member by its instance id alone (its member id may change under a
            # restart meanwhile), a dynamic one by its member id: Java's MemberIdentity.
            wanted = [("", m.group_instance_id) if m.group_instance_id is not None
                      else (m.member_id, None) for m in described.members]
            if not wanted:
                return {}
        leaving = wanted
        lg = LeaveGroupRequest

        async def send(node: int, _b: list[str]) -> dict[str, Any]:
            def build(version: int) -> Any:
                if version < 3:
                    raise UnsupportedVersionError(
                        "remove_members_from_consumer_group needs LeaveGroup v3 (Kafka 2.4, "
                        f"KIP-345); the broker offers v{version}")
                return lg(group_id=gid, members=[
                    lg.MemberIdentity(member_id=mid, group_instance_id=iid,
                                      reason=why if version >= 5 else None)
                    for mid, iid in leaving])

            resp = await self._router.exchange(node, lg, build, deadline)
            if resp.error_code:
                return {gid: error_for(resp.error_code, None, f"group {gid!r}")}
            return {gid: {(m.group_instance_id or m.member_id): error_for(
                m.error_code, None, f"member {m.group_instance_id or m.member_id!r} of group "
                f"{gid!r}") if m.error_code else None for m in resp.members}}

        outcome = (await self._router.per_coordinator([gid], "group", deadline, send))[gid]
        if isinstance(outcome, BaseException):
            raise outcome
        # Every member asked about has an answer (Java: "was not included in the removal
        # response" for one that has none).
        for mid, iid in leaving:
            key = iid or mid
            if key not in outcome:
                outcome[key] = KafkaError(f"the broker's LeaveGroup response did not mention "
                                          f"member {key!r} of group {gid!r}")
        return finish(outcome, f"remove_members_from_consumer_group({gid!r})",
                      return_exceptions)


def _describe_group(g: Any, coordinator: Node | None,
                    with_ops: bool) -> ConsumerGroupDescription:
    consumer = g.protocol_type in ("consumer", "")
    members = []
    for m in g.members:
        topics: tuple[str, ...] = ()
        owned: tuple[TopicPartition, ...] = ()
        rack = None
        assignment = MemberAssignment()
        if consumer:
            # A malformed blob must not hide the rest of the description.
            try:
                if m.member_metadata:
                    sub = decode_subscription(m.member_metadata)
                    topics, owned = tuple(sub.topics), tuple(sub.owned_partitions)
                    rack = sub.rack_id
                if m.member_assignment:
                    a = decode_assignment(m.member_assignment)
                    assignment = MemberAssignment(tuple(a.partitions), a.user_data)
            except CorruptMessageError:
                pass
        members.append(MemberDescription(
            m.member_id, m.client_id, m.client_host, assignment, m.group_instance_id,
            topics, owned, rack, bytes(m.member_metadata or b""),
            bytes(m.member_assignment or b"")))
    ops = authorized_operations(g.authorized_operations) if with_ops else None
    return ConsumerGroupDescription(
        g.group_id, not g.protocol_type, tuple(members), g.protocol_data,
        ConsumerGroupState.parse(g.group_state), coordinator, g.protocol_type, ops)


def _partitions(assignment: Any) -> tuple[TopicPartition, ...]:
    return tuple(sorted(TopicPartition(t.topic_name, p)
                        for t in assignment.topic_partitions for p in t.partitions))


def _describe_consumer_group(g: Any, coordinator: Node | None,
                             with_ops: bool) -> ConsumerGroupDescription:
    """A ConsumerGroupDescribe (KIP-848) group, mapped as Java's admin maps it, plus the
    subscriptions and racks the response also carries."""
    members = tuple(MemberDescription(
        m.member_id, m.client_id, m.client_host, MemberAssignment(_partitions(m.assignment)),
        m.instance_id, tuple(m.subscribed_topic_names), (), m.rack_id,
        target_assignment=MemberAssignment(_partitions(m.target_assignment)),
        member_epoch=m.member_epoch,
        upgraded=None if m.member_type == -1 else m.member_type == 1) for m in g.members)
    ops = authorized_operations(g.authorized_operations) if with_ops else None
    return ConsumerGroupDescription(
        g.group_id, False, members, g.assignor_name, ConsumerGroupState.parse(g.group_state),
        coordinator, "consumer", ops, ConsumerGroupType.CONSUMER, g.group_epoch,
        g.assignment_epoch)


def _describe_share_group(g: Any, coordinator: Node | None,
                          with_ops: bool) -> ShareGroupDescription:
    members = tuple(ShareMemberDescription(
        m.member_id, m.client_id, m.client_host, m.rack_id, tuple(m.subscribed_topic_names),
        MemberAssignment(_partitions(m.assignment)), m.member_epoch) for m in g.members)
    ops = authorized_operations(g.authorized_operations) if with_ops else None
    return ShareGroupDescription(
        g.group_id, members, g.assignor_name, ConsumerGroupState.parse(g.group_state),
        coordinator, g.group_epoch, g.assignment_epoch, ops)


_ = PartialFailureError


_E = TypeVar("_E", ConsumerGroupState, ConsumerGroupType)
_L = TypeVar("_L", ConsumerGroupListing, GroupListing)


def _member(enum: type[_E], value: object, what: str) -> _E:
    """``value`` as a member of ``enum`` (a member, or its name in any case); UNKNOWN and
    anything else is refused."""
    if isinstance(value, enum) and value is not enum.UNKNOWN:
        return value
    if isinstance(value, str) and not isinstance(value, enum):
        found = enum.parse(value)
        if found is enum.UNKNOWN:  # the member's name, e.g. "PREPARING_REBALANCE"
            found = enum.__members__.get(value.upper(), enum.UNKNOWN)
        if found is not enum.UNKNOWN:
            return found
    names = ", ".join(m.value for m in enum if m is not enum.UNKNOWN)
    raise InvalidArgumentError(f"unknown group {what} {value!r} (one of: {names})")
