"""What the consumer reads and where it stands: subscription, assignment and positions.

Sans-I/O. Owned by the consumer's event loop; the few fields the record buffer updates
from a sync caller's thread (positions) are written under the buffer's lock, or move with a
lease taken under it (``PartitionState.cursor``), see
:class:`~kontrakt.clients.consumer._buffer.FetchBuffer`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from kontrakt._types import ConsumerRecord, OffsetAndMetadata, TopicPartition
from kontrakt.errors import IllegalStateError

__all__ = ["FetchPosition", "PartitionState", "SubscriptionState"]


class FetchPosition(NamedTuple):
    """Where consumption of a partition stands (immutable).

    A named tuple rather than a dataclass: a new one is made for every ``poll()``, and a
    tuple is several times cheaper to build than a frozen dataclass.

    Attributes:
        offset: the offset of the next record to hand to the application.
        leader_epoch: leader epoch of the last record handed over (-1 unknown); used to
            detect log truncation after a leader change (KIP-320).
    """

    offset: int
    leader_epoch: int = -1


class PartitionState:
    """Mutable per-partition consumption state.

    Attributes:
        position: next record to hand to the application, None until resolved. While
            ``cursor`` is set, it is derived from the last record handed out of it.
        cursor: the lease (``FetchBuffer``'s ``Lease``) a per-record ``poll()`` reads this
            partition's records from: a record handed out then costs a deque pop, and the
            position follows the lease. Cleared by any assignment to ``position``; a change
            of ``position``, ``gen`` or ``paused`` ends it (no record is handed out of it
            after that), from any thread.
        fetch_offset: next offset to fetch (runs ahead of ``position`` by the prefetch).
        refetch: bumped when a decoding stops to fetch the rest of its response again
            (paused with the buffer full); responses received before are then dropped.
        gen: bumped on every seek/reset; fetched data from an older gen is dropped.
        reset: a pending reset strategy ("earliest"/"latest"), or None.
        paused: no fetching and no records returned while True.
        highwater, last_stable_offset, log_start_offset: from the last fetch response.
        fetched_at_ms: when a fetch response last told them (wall clock, ms since the
            epoch: aiokafka's ``last_poll_timestamp``), None before the first.
        buffered_bytes: fetched bytes of this partition not yet consumed.
        seen_leader_epoch: the leader epoch seen in metadata when the position was last
            validated; a different one triggers OffsetForLeaderEpoch.
        failed: fetching stopped on a non-retriable error until the next seek.
        out_of_range_at: a fetch at this offset got OFFSET_OUT_OF_RANGE while records before
            it were still buffered; fetching waits until the position gets there, then
            fetches again (and only a repeated answer resets the position).
        first_unacked, poll_seq: the first record handed to the application during the
            poll numbered ``poll_seq`` (``FetchBuffer.poll_seq``); while that is the latest
            poll, the application may still be processing it, and auto commit stops there.
        stored: the offset the application gave ``store_offsets()``, None before.
        read_replica: (the replica the leader named to fetch from, until when), KIP-392;
            kept here so that it goes with the partition when it leaves the assignment,
            as in the Java client (assigned again, it asks its leader again).
        replica_lookup: until when fetching waits for metadata to show that replica.
        replica_errors: fetch errors in a row at a read replica; sets how long the
            partition waits after the next one (``retry.backoff.ms`` doubling up to
            ``retry.backoff.max.ms``). Reset by an error-free answer from a replica.
        fetch_after: no fetch for this partition before this ``time.monotonic()`` (a
            backoff after an error at a read replica), or None.
    """

    __slots__ = ("_gen", "_paused", "_position", "buffered_bytes", "cursor", "failed",
                 "fetch_after", "fetch_offset", "fetched_at_ms", "first_unacked", "highwater",
                 "last_fetched_epoch", "last_stable_offset", "log_start_offset",
                 "out_of_range_at", "poll_seq", "read_replica", "refetch", "replica_errors",
                 "replica_lookup", "reset", "seen_leader_epoch", "stored", "validating")

    def __init__(self) -> None:
        self._position: FetchPosition | None = None
        self.cursor: Any = None
        self.fetch_offset = -1
        self.refetch = 0
        self.last_fetched_epoch = -1
        self._gen = 0
        self.reset: str | None = None
        self._paused = False
        self.highwater: int | None = None
        self.last_stable_offset: int | None = None
        self.log_start_offset: int | None = None
        self.fetched_at_ms: int | None = None
        self.buffered_bytes = 0
        self.seen_leader_epoch = -1
        self.validating = False
        self.failed = False
        self.out_of_range_at: int | None = None
        self.first_unacked: ConsumerRecord[Any, Any] | None = None
        self.poll_seq = -1
        self.stored: OffsetAndMetadata | None = None
        self.read_replica: tuple[int, float] | None = None
        self.replica_lookup: float | None = None
        self.replica_errors = 0
        self.fetch_after: float | None = None

    @property
    def position(self) -> FetchPosition | None:
        """Next record to hand to the application, None until resolved."""
        lease = self.cursor
        if lease is not None:
            pos: FetchPosition | None = lease.position()
            return pos
        return self._position

    @position.setter
    def position(self, value: FetchPosition | None) -> None:
        lease = self.cursor
        if lease is not None:
            lease.stop()
        self._position = value
        self.cursor = None

    # gen and paused end the lease after they change, and the buffer looks at them again
    # after it makes one (FetchBuffer.drain_one): whichever comes second sees the other, so
    # that no record is handed out of a lease once either has changed, under the buffer's
    # lock or not (pause() takes none).

    @property
    def gen(self) -> int:
        """Bumped on every seek/reset; fetched data from an older gen is dropped."""
        return self._gen

    @gen.setter
    def gen(self, value: int) -> None:
        self._gen = value
        lease = self.cursor
        if lease is not None:
            lease.stop()

    @property
    def paused(self) -> bool:
        """No fetching and no records returned while True."""
        return self._paused

    @paused.setter
    def paused(self, value: bool) -> None:
        self._paused = value
        lease = self.cursor
        if lease is not None and value:
            lease.stop()

    def seek(self, offset: int, leader_epoch: int = -1) -> None:
        """Move to ``offset``; drops prefetched data and any pending reset."""
        self.position = FetchPosition(offset, leader_epoch)
        self.fetch_offset = offset
        self.last_fetched_epoch = leader_epoch
        self.reset = None
        self.failed = False
        self.out_of_range_at = None
        self.gen += 1

    def request_reset(self, strategy: str) -> None:
        """Forget the position; the fetcher looks one up with ``strategy`` (earliest/latest)
        and drops prefetched data."""
        self.position = None
        self.reset = strategy
        self.failed = False
        self.out_of_range_at = None
        self.gen += 1

    @property
    def fetchable(self) -> bool:
        """True when a fetch may be sent for this partition now."""
        return (self.position is not None and not self.paused and not self.validating
                and not self.failed and (self.out_of_range_at is None
                                         or self.position.offset == self.out_of_range_at))


class SubscriptionState:
    """The subscription (topics, a pattern, or a manual assignment) and per-partition state.

    Args:
        default_reset: ``auto.offset.reset`` (earliest / latest / none).
    """

    def __init__(self, default_reset: str = "latest") -> None:
        self.default_reset = default_reset
        self.topics: frozenset[str] = frozenset()
        self.pattern: re.Pattern[str] | None = None
        self.manual = False
        self.assignment: dict[TopicPartition, PartitionState] = {}
        #: Partitions of a group assignment given up by unsubscribe() whose hand-back (auto
        #: commit, revoke listener) the group task has not finished: nothing of them is
        #: fetched or handed out, but the listener may still ask for their positions and
        #: commit them, as inside the Java client's unsubscribe().
        self.retiring: dict[TopicPartition, PartitionState] = {}
        self.version = 0

    # --- subscription ------------------------------------------------------------------

    @property
    def subscribed(self) -> bool:
        """True when subscribed by topics or pattern (group-managed assignment)."""
        return bool(self.topics) or self.pattern is not None

    def subscribe(self, topics: Iterable[str] | None, pattern: str | re.Pattern[str] | None
                  ) -> None:
        """Subscribe to ``topics`` or ``pattern`` (exactly one).

        Raises:
            IllegalStateError: partitions are manually assigned.
            ValueError: neither or both given, or an empty topic name.
        """
        if self.manual and self.assignment:
            raise IllegalStateError("subscribe() after assign(): call unsubscribe() first")
        if (topics is None) == (pattern is None):
            raise ValueError("give either topics or pattern")
        if topics is not None:
            if isinstance(topics, str):
                topics = [topics]
            names = frozenset(topics)
            if any(not isinstance(t, str) or not t for t in names):
                raise ValueError(f"topic names must be non-empty strings: {sorted(names)!r}")
            if not names:
                raise ValueError("subscribe() needs at least one topic (use unsubscribe())")
            self.topics, self.pattern = names, None
        else:
            self.pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
            self.topics = frozenset()
        self.manual = False
        self.version += 1

    def match_pattern(self, all_topics: Iterable[str], *, exclude_internal: bool = True,
                      internal: Iterable[str] = ()) -> frozenset[str]:
        """Topics of ``all_topics`` the pattern matches (all of them fully)."""
        if self.pattern is None:
            return self.topics
        skip = set(internal) if exclude_internal else set()
        return frozenset(t for t in all_topics if t not in skip and self.pattern.fullmatch(t))

    def retire(self) -> set[TopicPartition]:
        """Move the assignment to :attr:`retiring` (nothing more of it is fetched or handed
        out) and return its partitions; a partition already retiring keeps its state."""
        for tp, st in self.assignment.items():
            st.paused = True
            st.gen += 1
            self.retiring.setdefault(tp, st)
        parts = set(self.assignment)
        self.assignment = {}
        self.version += 1
        return parts

    def release(self, states: Mapping[TopicPartition, PartitionState]) -> None:
        """Drop these very states (handed back to the group) from the assignment and from
        :attr:`retiring`; a partition assigned again since, with a new state, stays."""
        for tp, st in states.items():
            if self.retiring.get(tp) is st:
                del self.retiring[tp]
        gone = {tp for tp, st in states.items() if self.assignment.get(tp) is st}
        if gone:
            self.set_assignment([tp for tp in self.assignment if tp not in gone])

    def unsubscribe(self) -> None:
        """Drop the subscription and every assigned partition."""
        self.topics = frozenset()
        self.pattern = None
        self.manual = False
        self.set_assignment(())
        self.version += 1

    # --- assignment --------------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Manual assignment: replaces the assignment, keeping state of kept partitions.

        Raises:
            IllegalStateError: subscribed by topics or pattern.
        """
        if self.subscribed:
            raise IllegalStateError("assign() while subscribed: call unsubscribe() first")
        self.manual = True
        self.set_assignment(partitions)

    def set_assignment(self, partitions: Iterable[TopicPartition]) -> None:
        """Replace the assignment; kept partitions keep their position."""
        new: dict[TopicPartition, PartitionState] = {}
        for tp in partitions:
            if not isinstance(tp, TopicPartition):
                raise TypeError(f"expected TopicPartition, got {tp!r}")
            new[tp] = self.assignment.get(tp) or PartitionState()
        for tp, st in self.assignment.items():
            if tp not in new:
                st.gen += 1  # invalidate in-flight fetches
        self.assignment = new
        self.version += 1

    def add_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        """Add partitions (incremental assignment)."""
        self.set_assignment([*self.assignment, *(tp for tp in partitions
                                                 if tp not in self.assignment)])

    def state(self, tp: TopicPartition) -> PartitionState:
        """The state of an assigned partition.

        Raises:
            IllegalStateError: ``tp`` is not assigned to this consumer.
        """
        st = self.state_of(tp)
        if st is None:
            raise IllegalStateError(f"partition {tp} is not assigned to this consumer")
        return st

    def state_of(self, tp: TopicPartition) -> PartitionState | None:
        """The state of an assigned (or still retiring) partition, None for another."""
        return self.assignment.get(tp) or self.retiring.get(tp)

    # --- positions ---------------------------------------------------------------------

    def seek(self, tp: TopicPartition, offset: int, leader_epoch: int = -1) -> None:
        """Set the next offset to read of an assigned partition."""
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        self.state(tp).seek(offset, leader_epoch)

    def request_reset(self, tp: TopicPartition, strategy: str | None = None) -> None:
        """Reset ``tp`` to earliest/latest at the next opportunity."""
        self.state(tp).request_reset(strategy or self.default_reset)

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching and returning records of these assigned partitions."""
        for tp in partitions:
            self.state(tp).paused = True

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        """Undo :meth:`pause`."""
        for tp in partitions:
            self.state(tp).paused = False

    def paused(self) -> set[TopicPartition]:
        """The paused partitions."""
        return {tp for tp, st in self.assignment.items() if st.paused}

    def missing_positions(self) -> list[TopicPartition]:
        """Assigned partitions with neither a position nor a pending reset."""
        return [tp for tp, st in self.assignment.items()
                if st.position is None and st.reset is None and not st.failed]

    def pending_resets(self) -> dict[TopicPartition, str]:
        """Partitions waiting for a reset and their strategy."""
        return {tp: st.reset for tp, st in self.assignment.items()
                if st.reset is not None and st.position is None}

    def consumed_offsets(self, poll_seq: int | None = None, *, stored_only: bool = False
                         ) -> dict[TopicPartition, OffsetAndMetadata]:
        """What to commit: every assigned partition's position, or the offset stored for it
        when that is further.

        Args:
            poll_seq: the application's latest poll (``FetchBuffer.poll_seq``): a partition
                that handed it records is committed up to the first of them, not past
                records the application may still be processing. None: positions.
            stored_only: only the stored offsets (``enable.auto.offset.store=false``).
        """
        out: dict[TopicPartition, OffsetAndMetadata] = {}
        # A retiring partition assign()ed again at once: its hand-back commits the old
        # position (the new one has none yet, or starts from that commit).
        owned = {**self.assignment, **self.retiring} if self.retiring else self.assignment
        for tp, st in owned.items():
            stored = st.stored
            if stored_only:
                if stored is not None:
                    out[tp] = stored
                continue
            # The position is read once (a sync caller's poll() may move it meanwhile) and
            # before the mark: poll() marks a record (first_unacked, then poll_seq) before it
            # takes it off its lease without the lock, so a position past the record comes
            # with its mark. A later poll's mark counts: the application polled again since.
            pos = st.position
            first = (st.first_unacked if poll_seq is not None and st.poll_seq >= poll_seq
                     else None)
            if first is not None:
                om: OffsetAndMetadata | None = OffsetAndMetadata(first.offset, "",
                                                                 first.leader_epoch)
            else:
                om = None if pos is None else OffsetAndMetadata(pos.offset, "",
                                                                pos.leader_epoch)
            if stored is not None and (om is None or stored.offset > om.offset):
                om = stored
            if om is not None:
                out[tp] = om
        return out

    def acknowledge(self, committed: dict[TopicPartition, OffsetAndMetadata]) -> None:
        """The application commits ``committed`` (what :meth:`consumed_offsets` gave, the
        positions): it is done with the records handed out before them, so a later auto
        commit before its next poll must not stop at the first record of that poll again
        (which would move the committed offset back). A partition whose mark is past the
        committed offset (a record handed out meanwhile) keeps it."""
        for tp, om in committed.items():
            st = self.state_of(tp)
            if st is None:
                continue
            first = st.first_unacked
            if first is not None and first.offset < om.offset:
                st.poll_seq = -1
