"""The sticky assignment algorithm and the sticky assignors' user data (sans-I/O).

Goals, in order (KIP-54 / KIP-341 / KIP-429):

1. *Balanced*: when every member subscribes to the same topics, partition counts differ by at
   most one. With different subscriptions, no partition can move from a member to an eligible
   member that has at least two fewer partitions.
2. *Sticky*: as many partitions as possible stay with the member that owned them.

Ownership claims come from each member's subscription. When two members claim one partition,
the claim with the higher generation wins (a member that missed a rebalance still reports what
it owned before); equal generations are settled by the member order so the result is
deterministic.

Two paths, as in Kafka's ``AbstractStickyAssignor``:

* all subscriptions equal: compute the min/max quota, let every member keep up to its quota of
  what it owns, then deal the rest out (members below the minimum first, then up to the number
  of members allowed one extra partition). O(partitions + members).
* different subscriptions: keep every valid claim, place the unowned partitions (most
  constrained first) on the least-loaded eligible member, then move single partitions from a
  member to an eligible member with at least two fewer partitions until no such move exists.
  Every move lowers the sum of squared counts, so the loop ends.

User data (``StickyAssignorUserData``, no version header): v0 is
``[]{Topic string, Partitions []int32}`` with the previous assignment; v1 appends the int32
generation. Java's ``StickyAssignor`` and librdkafka's sticky and cooperative-sticky assignors
write v1. Java's ``CooperativeStickyAssignor`` writes a bare int32 generation instead (and takes
owned partitions from the subscription's ``owned_partitions``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kontrakt._types import TopicPartition
from kontrakt.errors import CorruptMessageError
from kontrakt.protocol.primitives import INT16, INT32

from ._protocol import decode_topic_partitions, encode_topic_partitions

__all__ = [
    "MemberData",
    "decode_cooperative_user_data",
    "decode_sticky_user_data",
    "encode_cooperative_user_data",
    "encode_sticky_user_data",
    "sticky_assign",
]


@dataclass(frozen=True, slots=True)
class MemberData:
    """What the sticky algorithm knows about one member.

    Attributes:
        topics: the topics the member subscribes to.
        owned: the partitions the member says it owns (from user data or owned_partitions).
        generation: the generation of ``owned``, -1 when unknown.
    """

    topics: frozenset[str]
    owned: tuple[TopicPartition, ...] = ()
    generation: int = -1


# ---------------------------------------------------------------------------------------------
# User data


def encode_sticky_user_data(previous: Sequence[TopicPartition], generation: int) -> bytes:
    """Encode ``StickyAssignorUserData`` v1 (what Java's StickyAssignor and librdkafka write).

    Args:
        previous: the member's current assignment.
        generation: the generation of that assignment.

    Returns:
        The bytes (no version header: the format has none).
    """
    buf = bytearray()
    encode_topic_partitions(buf, previous)
    buf += INT32.pack(generation)
    return bytes(buf)


def decode_sticky_user_data(data: bytes) -> tuple[list[TopicPartition], int]:
    """Decode ``StickyAssignorUserData`` v1, or v0 when there is no generation.

    Java tries v1 first and falls back to v0; the only difference is the trailing generation, so
    a blob that ends right after the partition array is v0 (generation -1). The same data
    behind an int16 version header (what kafka-python writes) is accepted too.

    Args:
        data: the user data.

    Returns:
        (previous assignment, generation or -1).

    Raises:
        CorruptMessageError: the bytes are neither version.
    """
    try:
        partitions, pos = decode_topic_partitions(data, 0)
    except CorruptMessageError:
        # kafka-python (2.1+) prefixes its StickyAssignorUserData with an int16 version, unlike
        # Java and librdkafka; accept that form too so its members' history is not lost.
        if len(data) < 2 or INT16.unpack_from(data, 0)[0] not in (0, 1):
            raise
        partitions, pos = decode_topic_partitions(data, 2)
    if pos == len(data):
        return partitions, -1
    if pos + 4 > len(data):
        raise CorruptMessageError("truncated generation in sticky assignor user data")
    return partitions, INT32.unpack_from(data, pos)[0]


def encode_cooperative_user_data(generation: int) -> bytes:
    """Encode Java's ``CooperativeStickyAssignor`` user data: a bare int32 generation."""
    return INT32.pack(generation)


def decode_cooperative_user_data(data: bytes | None) -> int:
    """Read a generation from cooperative-sticky user data of either known format.

    Java's CooperativeStickyAssignor writes 4 bytes (the generation); librdkafka writes
    StickyAssignorUserData v1 (whose generation is its last 4 bytes).

    Args:
        data: the user data, or None.

    Returns:
        The generation, -1 when absent or unreadable (what Java falls back to).
    """
    if not data:
        return -1
    if len(data) == 4:
        return int(INT32.unpack(data)[0])
    try:
        return decode_sticky_user_data(data)[1]
    except CorruptMessageError:
        return -1


# ---------------------------------------------------------------------------------------------
# Algorithm


def _resolve_owners(
    order: Sequence[str],
    members: Mapping[str, MemberData],
    valid: Mapping[str, int],
) -> dict[TopicPartition, str]:
    """Pick one owner per claimed partition: highest generation, then member order."""
    best: dict[TopicPartition, tuple[int, int, str]] = {}
    for idx, member_id in enumerate(order):
        data = members[member_id]
        for tp in data.owned:
            n = valid.get(tp.topic)
            if n is None or not 0 <= tp.partition < n or tp.topic not in data.topics:
                continue  # gone, shrunk, or no longer subscribed: not a claim any more
            key = (-data.generation, idx, member_id)
            cur = best.get(tp)
            if cur is None or key < cur:
                best[tp] = key
    return {tp: key[2] for tp, key in best.items()}


def sticky_assign(
    partitions_per_topic: Mapping[str, int],
    members: Mapping[str, MemberData],
    order: Sequence[str],
) -> dict[str, list[TopicPartition]]:
    """Compute a balanced assignment that keeps as many owned partitions as possible.

    Args:
        partitions_per_topic: partition count of every known topic (others are ignored).
        members: the members, keyed by member id.
        order: every member id once, in tie-breaking order (Kafka's member order).

    Returns:
        ``{member_id: sorted partitions}`` for every member.
    """
    valid = {
        t: n
        for t, n in partitions_per_topic.items()
        if any(t in m.topics for m in members.values())
    }
    owner = _resolve_owners(order, members, valid)
    current: dict[str, list[TopicPartition]] = {m: [] for m in order}
    for tp in sorted(owner):
        current[owner[tp]].append(tp)
    eligible_topics = {m: frozenset(t for t in members[m].topics if t in valid) for m in order}
    all_partitions = [TopicPartition(t, p) for t in sorted(valid) for p in range(valid[t])]
    if not order:
        return {}
    if len(set(eligible_topics.values())) == 1:
        return _assign_equal(all_partitions, current, order)
    return _assign_general(all_partitions, current, order, eligible_topics)


def _assign_equal(
    all_partitions: list[TopicPartition],
    current: dict[str, list[TopicPartition]],
    order: Sequence[str],
) -> dict[str, list[TopicPartition]]:
    n_members = len(order)
    total = len(all_partitions)
    min_quota, extra = divmod(total, n_members)
    max_quota = min_quota + (1 if extra else 0)
    # Members that already own more than the minimum get to keep one extra first, so fewer
    # partitions move; the rest are trimmed to the minimum.
    result: dict[str, list[TopicPartition]] = {}
    slots_for_max = extra
    by_owned = sorted(order, key=lambda m: -len(current[m]))
    for member_id in by_owned:
        owned = current[member_id]
        if len(owned) > min_quota and slots_for_max > 0:
            keep = max_quota
            slots_for_max -= 1
        else:
            keep = min_quota
        result[member_id] = owned[:keep]
    assigned = {tp for parts in result.values() for tp in parts}
    unassigned = [tp for tp in all_partitions if tp not in assigned]
    it = iter(unassigned)
    # Fill everyone up to the minimum, round-robin over members in order so a fresh assignment
    # interleaves like Kafka's does.
    pending = [m for m in order if len(result[m]) < min_quota]
    while pending:
        still: list[str] = []
        for member_id in pending:
            result[member_id].append(next(it))
            if len(result[member_id]) < min_quota:
                still.append(member_id)
        pending = still
    # Then hand the remaining partitions one each to members at the minimum.
    for member_id in order:
        if slots_for_max == 0:
            break
        if len(result[member_id]) == min_quota:
            nxt = next(it, None)
            if nxt is None:
                break
            result[member_id].append(nxt)
            slots_for_max -= 1
    return {m: sorted(result[m]) for m in order}


def _assign_general(
    all_partitions: list[TopicPartition],
    current: dict[str, list[TopicPartition]],
    order: Sequence[str],
    eligible_topics: Mapping[str, frozenset[str]],
) -> dict[str, list[TopicPartition]]:
    state = _Balancer(current, order, eligible_topics)
    assigned = {tp for parts in current.values() for tp in parts}
    unassigned = [tp for tp in all_partitions if tp not in assigned]
    # Most constrained partitions first, each to its least-loaded eligible member.
    unassigned.sort(key=lambda tp: (len(state.subscribers[tp.topic]), tp))
    for tp in unassigned:
        state.place(tp, state.least_loaded(tp.topic))
    # Balance: move one partition from a member to an eligible member with at least two fewer
    # partitions, until none can move. Each move lowers sum(count**2) by at least 2, so the loop
    # ends. Single moves are chosen globally (most loaded member first, partitions it did not
    # own before first); a member far above all others sheds partitions in bulk first, which
    # keeps one member owning everything from costing a full search per partition.
    bound = sum(len(v) ** 2 for v in state.owned.values()) + 1
    moves = 0
    while moves < bound:
        bulk = state.bulk_moves()
        if bulk:
            moves += bulk
            continue
        move = state.find_move()
        if move is None:
            break
        state.move(*move)
        moves += 1
    return {m: sorted(state.owned[m]) for m in order}


class _Balancer:
    """Assignment state of the general path.

    ``load[m]`` is ``count(m) * scale + rank(m)``: one int per member whose order is "fewest
    partitions, then Kafka's member order", so finding the least-loaded subscriber of a topic
    is a ``min`` with a C-level key.
    """

    def __init__(
        self,
        current: Mapping[str, list[TopicPartition]],
        order: Sequence[str],
        eligible_topics: Mapping[str, frozenset[str]],
    ) -> None:
        self.order = order
        self.rank = {m: i for i, m in enumerate(order)}
        self.scale = len(order) + 1
        self.subscribers: dict[str, list[str]] = {}
        for member_id in order:
            for topic in eligible_topics[member_id]:
                self.subscribers.setdefault(topic, []).append(member_id)
        self.owned = {m: set(current[m]) for m in order}
        # What each member kept from its claims: moving those costs stickiness, so balancing
        # moves partitions placed in this round first.
        self.kept = {m: frozenset(current[m]) for m in order}
        self.load = {m: len(self.owned[m]) * self.scale + self.rank[m] for m in order}

    def count(self, member_id: str) -> int:
        return len(self.owned[member_id])

    def least_loaded(self, topic: str) -> str:
        return min(self.subscribers[topic], key=self.load.__getitem__)

    def place(self, tp: TopicPartition, dst: str) -> None:
        self.owned[dst].add(tp)
        self.load[dst] += self.scale

    def move(self, tp: TopicPartition, src: str, dst: str) -> None:
        self.owned[src].discard(tp)
        self.load[src] -= self.scale
        self.place(tp, dst)

    def _ranked(self) -> list[str]:
        return sorted(self.order, key=lambda m: (-self.count(m), self.rank[m]))

    def bulk_moves(self) -> int:
        """Let the most loaded member, while at least two above every other member, give
        partitions (those it did not own before first) to least-loaded eligible members.

        Returns:
            How many partitions moved.
        """
        if len(self.order) < 2:
            return 0
        top, second = self._ranked()[:2]
        ceiling = self.count(second) + 1
        if self.count(top) <= ceiling:
            return 0
        moved = 0
        # A topic that cannot move now cannot move later in this scan: only ``top`` shrinks and
        # destinations grow.
        blocked: set[str] = set()
        for tp in sorted(self.owned[top], key=lambda tp: (tp in self.kept[top], tp)):
            if self.count(top) <= ceiling:
                break
            if tp.topic in blocked:
                continue
            dst = self.least_loaded(tp.topic)
            if self.count(dst) <= self.count(top) - 2:
                self.move(tp, top, dst)
                moved += 1
                # A destination may now be the runner-up; never take ``top`` below it.
                ceiling = max(ceiling, self.count(dst) + 1)
            else:
                blocked.add(tp.topic)
        return moved

    def find_move(self) -> tuple[TopicPartition, str, str] | None:
        """Find one balancing move from the most loaded member that has one, or None."""
        for src in self._ranked():
            src_count = self.count(src)
            if src_count < 2:
                return None
            by_topic: dict[str, list[TopicPartition]] = {}
            for tp in self.owned[src]:
                by_topic.setdefault(tp.topic, []).append(tp)
            best: tuple[int, int, str, TopicPartition] | None = None
            for topic in sorted(by_topic):
                dst = self.least_loaded(topic)
                if self.count(dst) > src_count - 2:
                    continue
                fresh = [tp for tp in by_topic[topic] if tp not in self.kept[src]]
                # Prefer a partition the member did not own before this round, then the
                # emptiest destination.
                tp = max(fresh) if fresh else max(by_topic[topic])
                key = (0 if fresh else 1, self.load[dst], dst, tp)
                if best is None or key[:2] < best[:2]:
                    best = key
            if best is not None:
                return best[3], src, best[2]
        return None
