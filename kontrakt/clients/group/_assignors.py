"""Partition assignors for the classic consumer group protocol (sans-I/O).

The group leader decodes every member's subscription, asks the assignor chosen by the group for
an assignment and sends each member its share in SyncGroup. Assignors here follow the rules of
Kafka's Java clients so that kontrakt members can lead, or be led by, Java and librdkafka members
in one group:

* ``range``: per topic, partitions in order are split into contiguous ranges over the members
  subscribed to it (sorted: static members by ``group.instance.id`` first, then dynamic members
  by member id); the first ``partitions % members`` members get one extra.
* ``roundrobin``: all subscribed topics' partitions, sorted by (topic, partition), are dealt out
  in a circle over the sorted members, skipping members not subscribed to the partition's topic.
* ``sticky`` (eager) and ``cooperative-sticky`` (incremental): see :mod:`._sticky`.

Rack-aware assignment (KIP-881) needs partition replica racks, which :meth:`Assignor.assign`
does not receive; every assignor here is rack-unaware, which is what Kafka does when racks are
unknown.

Cooperative rebalancing (KIP-429): a partition moving from member A to member B must first be
revoked by A, so in the round where it moves it is assigned to nobody; A revokes it, rejoins,
and the next round gives it to B. Java does this inside ``CooperativeStickyAssignor`` and the
leader's ``ConsumerCoordinator`` only validates it; here :class:`CooperativeStickyAssignor`
applies :func:`cooperative_adjust` itself, and the group coordinator should apply it again to
the output of any assignor when the group's protocol is COOPERATIVE (it is idempotent), so a
custom cooperative assignor cannot hand out a partition that is still owned elsewhere.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from kontrakt._types import TopicPartition
from kontrakt.errors import ConfigError, CorruptMessageError

from ._protocol import Assignment, MemberSubscription
from ._sticky import (
    MemberData,
    decode_cooperative_user_data,
    decode_sticky_user_data,
    encode_cooperative_user_data,
    encode_sticky_user_data,
    sticky_assign,
)

__all__ = [
    "ASSIGNORS",
    "Assignor",
    "CooperativeStickyAssignor",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "assignor_for",
    "cooperative_adjust",
    "member_sort_key",
    "owned_partitions",
    "select_rebalance_protocol",
]


class RebalanceProtocol(enum.Enum):
    """How members give up partitions during a rebalance.

    EAGER: every member revokes everything before joining (stop the world).
    COOPERATIVE: members keep what they own; only partitions that move are revoked, and they are
    reassigned in a second round (KIP-429).
    """

    EAGER = 0
    COOPERATIVE = 1


@runtime_checkable
class Assignor(Protocol):
    """A partition assignor (``partition.assignment.strategy``).

    Attributes:
        name: the protocol name sent in JoinGroup ("range", "roundrobin", "sticky",
            "cooperative-sticky" or a custom name shared by the group's members).
        supported_protocols: the rebalance protocols the assignor can run, preferred first.
    """

    name: str
    supported_protocols: tuple[RebalanceProtocol, ...]

    def subscription_user_data(
        self, topics: set[str], owned: list[TopicPartition], generation_id: int
    ) -> bytes | None:
        """Return the user data this member sends in its subscription.

        Args:
            topics: the member's subscribed topics.
            owned: the partitions the member owns now.
            generation_id: the generation those were assigned in (-1 if none).

        Returns:
            The bytes, or None for no user data.
        """
        ...

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        members: Mapping[str, MemberSubscription],
    ) -> dict[str, Assignment]:
        """Assign partitions to members (called on the group leader only).

        Args:
            partitions_per_topic: partition count of each subscribed topic whose metadata is
                known; subscribed topics missing here are skipped.
            members: every member of the group, keyed by member id.

        Returns:
            An assignment for every member id of ``members`` (possibly empty).
        """
        ...

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:
        """Learn this member's assignment after SyncGroup (for user data of the next round).

        Args:
            assignment: what this member received.
            generation_id: the generation it belongs to.
        """
        ...


# ---------------------------------------------------------------------------------------------
# Helpers shared by the assignors and the coordinator


def _java_order(s: str) -> bytes:
    # Java compares strings by UTF-16 code units, Python by code points; they differ for
    # characters above U+FFFF versus U+E000..U+FFFF. Big-endian UTF-16 bytes sort like Java.
    return s.encode("utf-16-be", "surrogatepass")


def member_sort_key(member: MemberSubscription) -> tuple[int, bytes, bytes]:
    """Kafka's member order: static members by group.instance.id, then the rest by member id.

    Strings compare as Java compares them (UTF-16 code units), so every client leading the
    group orders members the same way.

    Args:
        member: the member.

    Returns:
        A key for ``sorted``.
    """
    if member.group_instance_id is not None:
        return (0, _java_order(member.group_instance_id), _java_order(member.member_id))
    return (1, _java_order(member.member_id), b"")


def _sorted_member_ids(members: Mapping[str, MemberSubscription]) -> list[str]:
    return [m.member_id for m in sorted(members.values(), key=member_sort_key)]


def _check_inputs(
    partitions_per_topic: Mapping[str, int], members: Mapping[str, MemberSubscription]
) -> None:
    for topic, n in partitions_per_topic.items():
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(f"partition count of {topic!r} must be an int >= 0, got {n!r}")
    for key, member in members.items():
        if key != member.member_id:
            raise ValueError(f"members key {key!r} differs from member_id {member.member_id!r}")


def owned_partitions(
    members: Mapping[str, MemberSubscription],
) -> dict[str, list[TopicPartition]]:
    """The partitions each member reports owning (``owned_partitions``, subscription v1+).

    Args:
        members: the group's members.

    Returns:
        ``{member_id: owned partitions}``, the input :func:`cooperative_adjust` expects.
    """
    return {m: list(s.subscription.owned_partitions) for m, s in members.items()}


def cooperative_adjust(
    previous_owned: Mapping[str, list[TopicPartition]],
    assignment: dict[str, Assignment],
) -> dict[str, Assignment]:
    """Withhold partitions that are still owned by a different member (KIP-429).

    A partition assigned to member B while member A (A != B) still owns it is removed from B's
    assignment for this round: A will find it missing from its own assignment, revoke it and
    rejoin, and the next round can give it to B. Partitions stay with a member that already
    owns them. The function is idempotent.

    Args:
        previous_owned: ``{member_id: partitions it owns}`` from the members' subscriptions
            (see :func:`owned_partitions`).
        assignment: the assignor's output.

    Returns:
        A new ``{member_id: Assignment}`` (user data kept); the input is not modified.
    """
    owners: dict[TopicPartition, set[str]] = {}
    for member_id, parts in previous_owned.items():
        for tp in parts:
            owners.setdefault(tp, set()).add(member_id)
    out: dict[str, Assignment] = {}
    for member_id, a in assignment.items():
        kept = [
            tp for tp in a.partitions if not (owners.get(tp, set()) - {member_id})
        ]
        out[member_id] = a if len(kept) == len(a.partitions) else Assignment(kept, a.user_data)
    return out


def _subscribed(member: MemberSubscription) -> set[str]:
    return set(member.subscription.topics)


# ---------------------------------------------------------------------------------------------
# Range and round robin


class _BuiltinAssignor:
    """What the built-in assignors share: input checks, Kafka's member order, and (unless
    overridden) no user data, nothing remembered, eager rebalancing only."""

    name: str
    supported_protocols: tuple[RebalanceProtocol, ...] = (RebalanceProtocol.EAGER,)

    def subscription_user_data(
        self, topics: set[str], owned: list[TopicPartition], generation_id: int
    ) -> bytes | None:
        """No user data (see :meth:`Assignor.subscription_user_data`)."""
        return None

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        members: Mapping[str, MemberSubscription],
    ) -> dict[str, Assignment]:
        """See :meth:`Assignor.assign`.

        Raises:
            ValueError: a negative partition count, or a key that differs from its member id.
        """
        _check_inputs(partitions_per_topic, members)
        order = _sorted_member_ids(members)
        result = self._assign(partitions_per_topic, members, order)
        return {m: Assignment(result[m]) for m in order}

    def _assign(self, partitions_per_topic: Mapping[str, int],
                members: Mapping[str, MemberSubscription],
                order: list[str]) -> dict[str, list[TopicPartition]]:
        """Member id -> partitions, for members in Kafka's ``order``."""
        raise NotImplementedError

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:
        """Nothing to remember (see :meth:`Assignor.on_assignment`)."""


class RangeAssignor(_BuiltinAssignor):
    """Kafka's ``range`` assignor: contiguous ranges of each topic's partitions per member.

    For each topic, with ``n`` partitions and ``c`` subscribed members in Kafka's member order
    (:func:`member_sort_key`), member ``i`` gets ``n // c`` partitions starting at
    ``i * (n // c) + min(i, n % c)``, plus one more when ``i < n % c``.
    """

    name = "range"

    def _assign(self, partitions_per_topic: Mapping[str, int],
                members: Mapping[str, MemberSubscription],
                order: list[str]) -> dict[str, list[TopicPartition]]:
        result: dict[str, list[TopicPartition]] = {m: [] for m in order}
        topics = sorted({t for m in members.values() for t in m.subscription.topics})
        for topic in topics:
            n = partitions_per_topic.get(topic)
            if n is None:
                continue
            consumers = [m for m in order if topic in _subscribed(members[m])]
            per, extra = divmod(n, len(consumers))
            for i, member_id in enumerate(consumers):
                start = i * per + min(i, extra)
                length = per + (1 if i < extra else 0)
                result[member_id].extend(
                    TopicPartition(topic, p) for p in range(start, start + length)
                )
        return result


class RoundRobinAssignor(_BuiltinAssignor):
    """Kafka's ``roundrobin`` assignor.

    Partitions of all subscribed topics, sorted by (topic, partition), are dealt one at a time
    to the members in Kafka's member order, in a circle; a member not subscribed to the
    partition's topic is skipped (and keeps its place in the circle).
    """

    name = "roundrobin"

    def _assign(self, partitions_per_topic: Mapping[str, int],
                members: Mapping[str, MemberSubscription],
                order: list[str]) -> dict[str, list[TopicPartition]]:
        result: dict[str, list[TopicPartition]] = {m: [] for m in order}
        subs = {m: _subscribed(members[m]) for m in order}
        topics = sorted(t for t in set().union(*subs.values()) if t in partitions_per_topic)
        pos = 0
        for topic in topics:
            for p in range(partitions_per_topic[topic]):
                # At least one member subscribes to ``topic``, so this finds one within a lap.
                while topic not in subs[order[pos % len(order)]]:
                    pos += 1
                result[order[pos % len(order)]].append(TopicPartition(topic, p))
                pos += 1
        return result


# ---------------------------------------------------------------------------------------------
# Sticky


class _StickyBase(_BuiltinAssignor):
    """The sticky algorithm over each member's view of what it owned."""

    def _member_data(self, member: MemberSubscription) -> MemberData:
        raise NotImplementedError

    def _assign(self, partitions_per_topic: Mapping[str, int],
                members: Mapping[str, MemberSubscription],
                order: list[str]) -> dict[str, list[TopicPartition]]:
        data = {m: self._member_data(members[m]) for m in order}
        return sticky_assign(partitions_per_topic, data, order)


class StickyAssignor(_StickyBase):
    """Kafka's ``sticky`` assignor (KIP-54, eager): balanced and as sticky as possible.

    The previous assignment and its generation travel in the subscription's user data as
    ``StickyAssignorUserData`` v1, the format Java's StickyAssignor and librdkafka read and
    write. A member without user data falls back to its ``owned_partitions``.

    Interop note for the coordinator: a librdkafka leader takes ownership from the
    subscription's ``owned_partitions`` and ``generation_id`` (v1+/v2+) rather than from user
    data, while a Java leader running ``sticky`` reads only the user data. Filling both (user
    data from :meth:`subscription_user_data`; owned partitions and generation in the
    subscription) keeps stickiness whichever client leads.
    """

    name = "sticky"

    def __init__(self) -> None:
        self._assignment: list[TopicPartition] | None = None
        self._generation = -1

    def subscription_user_data(
        self, topics: set[str], owned: list[TopicPartition], generation_id: int
    ) -> bytes | None:
        """The previous assignment + generation, or None before the first assignment.

        Eager members have revoked everything before they join, so what they last received
        (remembered by :meth:`on_assignment`) is what the leader needs. Before any
        :meth:`on_assignment`, ``owned`` and ``generation_id`` are used if ``owned`` is not
        empty.
        """
        if self._assignment is None:
            if not owned:
                return None
            return encode_sticky_user_data(owned, generation_id)
        return encode_sticky_user_data(self._assignment, self._generation)

    def _member_data(self, member: MemberSubscription) -> MemberData:
        sub = member.subscription
        topics = frozenset(sub.topics)
        if sub.user_data:
            try:
                prev, generation = decode_sticky_user_data(sub.user_data)
            except CorruptMessageError:
                # Java ignores user data it cannot read: the member counts as owning nothing.
                return MemberData(topics)
            return MemberData(topics, tuple(prev), generation)
        return MemberData(topics, tuple(sub.owned_partitions), sub.generation_id)


    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:
        """Remember the assignment and generation for the next subscription's user data."""
        self._assignment = list(assignment.partitions)
        self._generation = generation_id


class CooperativeStickyAssignor(_StickyBase):
    """Kafka's ``cooperative-sticky`` assignor (KIP-429): sticky, incremental rebalancing.

    Ownership comes from each subscription's ``owned_partitions``; the generation from the
    subscription (v2+) or, for older members, from user data (Java's bare int32 or librdkafka's
    StickyAssignorUserData). The result is passed through :func:`cooperative_adjust`, so a
    partition that moves is assigned to nobody in this round.
    """

    name = "cooperative-sticky"
    supported_protocols: tuple[RebalanceProtocol, ...] = (
        RebalanceProtocol.COOPERATIVE,
        RebalanceProtocol.EAGER,
    )

    def __init__(self) -> None:
        self._generation = -1

    def subscription_user_data(
        self, topics: set[str], owned: list[TopicPartition], generation_id: int
    ) -> bytes | None:
        """The generation as an int32, as Java's CooperativeStickyAssignor sends it."""
        return encode_cooperative_user_data(generation_id)

    def _member_data(self, member: MemberSubscription) -> MemberData:
        sub = member.subscription
        generation = sub.generation_id
        if generation == -1:
            generation = decode_cooperative_user_data(sub.user_data)
        return MemberData(frozenset(sub.topics), tuple(sub.owned_partitions), generation)

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        members: Mapping[str, MemberSubscription],
    ) -> dict[str, Assignment]:
        """See :meth:`Assignor.assign`; partitions still owned by another member are withheld.

        Raises:
            ValueError: a negative partition count, or a key that differs from its member id.
        """
        out = super().assign(partitions_per_topic, members)
        return cooperative_adjust(owned_partitions(members), out)

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:
        """Remember the generation (owned partitions travel in the subscription itself)."""
        self._generation = generation_id


# ---------------------------------------------------------------------------------------------
# Registry

ASSIGNORS: dict[str, type] = {
    RangeAssignor.name: RangeAssignor,
    RoundRobinAssignor.name: RoundRobinAssignor,
    StickyAssignor.name: StickyAssignor,
    CooperativeStickyAssignor.name: CooperativeStickyAssignor,
}

# Java class names are accepted too, since users paste them from Java configs.
_JAVA_NAMES = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.StickyAssignor": "sticky",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}


def assignor_for(name_or_obj: str | Assignor | type) -> Assignor:
    """Resolve one entry of ``partition.assignment.strategy`` to an assignor instance.

    Args:
        name_or_obj: a built-in name ("range", "roundrobin", "sticky", "cooperative-sticky"; the
            Java class names are accepted too), an assignor class, or an assignor instance
            (returned as is).

    Returns:
        A fresh assignor for names and classes; the object itself for instances.

    Raises:
        ConfigError: unknown name, or an object that is not an assignor.
    """
    if isinstance(name_or_obj, str):
        key = _JAVA_NAMES.get(name_or_obj.strip(), name_or_obj.strip().lower())
        cls = ASSIGNORS.get(key)
        if cls is None:
            raise ConfigError(
                f"unknown partition assignor {name_or_obj!r}; "
                f"known: {', '.join(sorted(ASSIGNORS))}"
            )
        obj: object = cls()
    elif isinstance(name_or_obj, type):
        try:
            obj = name_or_obj()
        except TypeError as exc:
            raise ConfigError(f"cannot instantiate assignor {name_or_obj!r}: {exc}") from None
    else:
        obj = name_or_obj
    if not _is_assignor(obj):
        raise ConfigError(
            f"{name_or_obj!r} is not a partition assignor (needs name, supported_protocols, "
            "subscription_user_data, assign, on_assignment)"
        )
    assert isinstance(obj, Assignor)
    return obj


def select_rebalance_protocol(assignors: Sequence[Assignor]) -> RebalanceProtocol:
    """The rebalance protocol a consumer with these assignors runs (as Java's consumer does).

    It is the highest protocol every configured assignor supports: ``["cooperative-sticky"]``
    runs COOPERATIVE, ``["range", "cooperative-sticky"]`` runs EAGER (the usual first step of
    a rolling upgrade to cooperative-sticky).

    Args:
        assignors: the consumer's assignors, in preference order.

    Returns:
        The protocol.

    Raises:
        ConfigError: no assignors, or no protocol that all of them support.
    """
    if not assignors:
        raise ConfigError("partition.assignment.strategy must name at least one assignor")
    common = set(RebalanceProtocol)
    for a in assignors:
        common &= set(a.supported_protocols)
    if not common:
        names = ", ".join(a.name for a in assignors)
        raise ConfigError(f"assignors {names} have no rebalance protocol in common")
    return max(common, key=lambda p: p.value)


def _is_assignor(obj: object) -> bool:
    if not isinstance(obj, Assignor):
        return False
    name = getattr(obj, "name", None)
    protocols = getattr(obj, "supported_protocols", None)
    return (
        isinstance(name, str)
        and bool(name)
        and isinstance(protocols, Iterable)
        and bool(tuple(protocols))
        and all(isinstance(p, RebalanceProtocol) for p in protocols)
    )
