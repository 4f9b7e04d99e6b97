"""The prefetch buffer between the fetcher and the application.

The fetcher (event loop) appends each partition's decoded records as one
:class:`CompletedFetch`; the application drains the :class:`FetchBuffer` from the loop (async
consumer) or from its own thread (sync consumer), many records per lock acquisition, and
draining moves the partitions' positions under the same lock. Buffered records count
against the cap (``queued.max.messages.kbytes``) by what they cost decoded.

A per-record ``poll()`` takes the rest of a fetch at once under the lock as a :class:`Lease`
and then one record a call off it without the lock; see :meth:`FetchBuffer.drain_one`.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from kontrakt._types import ConsumerRecord, TopicPartition
from kontrakt.clients.consumer._subscription import FetchPosition, PartitionState

__all__ = ["STOP", "CompletedFetch", "FetchBuffer", "Lease"]

#: Put in front of a lease's records to end it: the poller's next take finds it.
_STOP: Any = object()
#: The same marker, for a poller that pops a lease's records itself (FetchBuffer.live_records).
STOP: Any = _STOP


class CompletedFetch:
    """One partition's decoded records from one fetch response.

    Attributes:
        records: the records at or after the fetch offset, in order.
        index: how many have been handed to the application.
        next_offset: the fetch offset after the whole response (past control and aborted
            batches too); the position once every record is consumed.
        size: fetched (wire) bytes of the batches this fetch completes; a partition with
            ``max.partition.fetch.bytes`` of them buffered is not fetched.
        cost: memory the records take (estimated, see :data:`RECORD_COST`), held against
            the buffer's cap; ``size`` when not given.
    """

    __slots__ = ("cost", "gen", "index", "last", "next_epoch", "next_offset", "records",
                 "size", "state", "tp")

    def __init__(self, tp: TopicPartition, state: PartitionState, gen: int,
                 records: list[ConsumerRecord[Any, Any]], next_offset: int, next_epoch: int,
                 size: int, cost: int | None = None) -> None:
        self.tp = tp
        self.state = state
        self.gen = gen
        self.records = records
        self.index = 0
        #: the index of the last record (read per record by FetchBuffer.drain_one)
        self.last = len(records) - 1
        self.next_offset = next_offset
        self.next_epoch = next_epoch
        self.size = size
        self.cost = size if cost is None else cost


class Lease:
    """Records ``start`` to ``end`` of a fetch, taken off the buffer for a per-record
    ``poll()`` under one lock acquisition and handed out one a call without the lock.

    The one thread that polls pops records off ``recs`` (:meth:`FetchBuffer.drain_one`);
    the partition's position follows them (:meth:`position`, its ``PartitionState.cursor``).
    :meth:`stop`, from any thread, puts a marker in front of the records left: the poller's
    next pop finds it and goes back to the buffer under its lock, and from then on what was
    handed out, and so the position, stays as it was. A pop and the stop are each one deque
    operation, so no record is handed out after the stop has returned.
    """

    __slots__ = ("before", "cf", "end", "live", "records", "recs", "start", "state")

    def __init__(self, cf: CompletedFetch, before: FetchPosition | None) -> None:
        self.cf = cf
        self.state = cf.state
        self.records = cf.records
        self.start = start = cf.index
        #: the last record of the fetch is left to drain(), which moves the position to the
        #: fetch's end (past control batches)
        self.end = end = cf.last
        self.recs: deque[ConsumerRecord[Any, Any]] = deque(self.records[start:end])
        #: the position before the first record of the lease
        self.before = before
        self.live = True

    def stop(self) -> None:
        """End the lease (any thread; idempotent)."""
        if self.live:
            # The marker first: a stop on another thread that finds ``live`` already
            # cleared returns at once, and the records must be behind a marker by then
            # (two stops at once may put two; a take skips them alike).
            self.recs.appendleft(_STOP)
            self.live = False

    def left(self) -> int:
        """How many records are not handed out: exact once stopped, a value it had lately
        before."""
        # Counted from the right end, which nobody changes: markers are only ever put in
        # front and the poller pops one at a time from the front. recs[-j] is a record only
        # when at least j records are left (and were when recs[-(j + 1)] was not one).
        recs = self.recs
        j = len(recs)
        while j:
            try:
                if recs[-j] is not _STOP:
                    return j
            except IndexError:
                pass
            j -= 1
        return 0

    def position(self) -> FetchPosition | None:
        """The position after the records handed out of the lease."""
        i = self.end - self.left()
        if i == self.start:
            return self.before
        rec = self.records[i - 1]
        return FetchPosition(rec.offset + 1, rec.leader_epoch)


class FetchBuffer:
    """Fetched records waiting for the application; thread-safe.

    The loop adds completed fetches; the application drains them from any thread. Draining
    moves the partitions' positions under the same lock.

    Args:
        max_bytes: the memory cap on buffered records (``total_bytes``, the sum of their
            ``CompletedFetch.cost``); above it the fetcher neither fetches nor decodes, until
            draining frees space (``on_space``).
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self._queue: deque[CompletedFetch] = deque()
        self._errors: dict[TopicPartition,
                           tuple[PartitionState, int, BaseException, bool]] = {}
        self.total_bytes = 0
        self.on_space: Callable[[], None] = lambda: None
        self.on_data: Callable[[], None] = lambda: None
        self.version = 0
        #: the lease a per-record poll() takes records off (of the first fetch queued)
        self.lease: Lease | None = None
        #: Bumped by the consumer when the application polls: the records handed out before
        #: count as processed. A partition's first record handed out since is
        #: ``PartitionState.first_unacked`` (when its ``poll_seq`` equals this).
        self.poll_seq = 0
        # Records and fetched bytes of fetches consumed to their end (counted per fetch,
        # not per record: see consumed_counts).
        self._consumed_records = 0
        self._consumed_bytes = 0

    def consumed_counts(self) -> tuple[int, int]:
        """Records handed to the application so far, and the fetched bytes of the fetches
        consumed to their end (call with ``lock`` held)."""
        partial = sum(cf.index for cf in self._queue)
        if self.lease is not None:
            partial -= self.lease.left()
        return self._consumed_records + partial, self._consumed_bytes

    def add(self, cf: CompletedFetch) -> None:
        """Queue a completed fetch (loop thread)."""
        with self.lock:
            self._queue.append(cf)
            self.total_bytes += cf.cost
            cf.state.buffered_bytes += cf.size
            self.version += 1
            self.cond.notify_all()
        self.on_data()

    def live_records(self) -> deque[ConsumerRecord[Any, Any]] | None:
        """The records of the live lease (None: no lease, or it is stopped), for the thread
        that polls to pop one a call itself: the pops of :meth:`drain_one` for a consumer
        without a group (nothing to mark), without its frame.

        The caller pops with ``popleft()`` and goes back to :meth:`drain_one` on an empty
        deque or on :data:`STOP`, which it first puts back in front (``appendleft``): a
        stopped lease's records are behind it, and only drain_one's take of the marker gives
        them back to their fetch.
        """
        lease = self.lease
        return lease.recs if lease is not None and lease.live else None

    def stop_lease(self) -> None:
        """End the lease (any thread): whatever a poll() must see first, such as a closed
        consumer or a dead fetcher, keeps the records from coming out of it meanwhile."""
        with self.lock:
            if self.lease is not None:
                self.lease.stop()

    def add_error(self, tp: TopicPartition, state: PartitionState, error: BaseException, *,
                  after_records: bool = False) -> None:
        """Make every drain raise ``error`` until ``tp`` is sought (or unassigned).

        Args:
            after_records: raise only once ``tp``'s records buffered before the error are
                drained (they came before it in the partition).
        """
        with self.lock:
            self._errors[tp] = (state, state.gen, error, after_records)
            if self.lease is not None:
                self.lease.stop()  # the next poll() raises it
            self.version += 1
            self.cond.notify_all()
        self.on_data()

    def full(self, state: PartitionState | None = None) -> bool:
        """True when no more records should be fetched (or, for ``state``'s partition,
        decoded): the buffer is at its cap, and not only with records of paused partitions,
        which the application cannot take until it resumes them (they must not hold the
        other partitions back). A paused ``state``'s records wait whenever the cap is
        reached."""
        if self.total_bytes < self.max_bytes:
            return False
        if state is not None and state.paused:
            return True
        with self.lock:
            held = sum(cf.cost for cf in self._queue if cf.state.paused)
        return self.total_bytes - held >= self.max_bytes

    def has_data(self) -> bool:
        """True when records or errors are waiting (may include stale ones)."""
        return bool(self._queue) or bool(self._errors)

    def clear(self) -> None:
        """Drop everything."""
        with self.lock:
            if self.lease is not None:
                self._settle(self.lease)
            for cf in self._queue:
                cf.state.buffered_bytes -= cf.size
                self.total_bytes -= cf.cost
                self._consumed_records += cf.index
            self._queue.clear()
            self._errors.clear()
        self.on_space()

    def _raise_errors(self) -> None:
        for tp, (st, gen, err, after_records) in list(self._errors.items()):
            if st.gen != gen:
                del self._errors[tp]
            elif not after_records or not any(cf.tp == tp and cf.gen == gen
                                              for cf in self._queue):
                raise err

    def _settle(self, lease: Lease) -> None:
        """End ``lease`` and give its records not handed out back to its fetch (with the
        lock held; any thread)."""
        lease.stop()
        lease.cf.index = lease.end - lease.left()
        self.lease = None

    def _release(self, cf: CompletedFetch) -> bool:
        self.total_bytes -= cf.cost
        st = cf.state
        before = st.buffered_bytes
        st.buffered_bytes -= cf.size
        return before > 0 or cf.cost > 0

    def drain(self, max_records: int) -> dict[TopicPartition, list[ConsumerRecord[Any, Any]]]:
        """Take up to ``max_records`` records, moving positions past them.

        Raises:
            OffsetOutOfRangeResetError / KafkaError: a partition's fetch failed for good
                (raised until the partition is sought or unassigned).
        """
        out: dict[TopicPartition, list[ConsumerRecord[Any, Any]]] = {}
        freed = False
        with self.lock:
            if self.lease is not None:
                self._settle(self.lease)
            if self._errors:
                self._raise_errors()
            queue = self._queue
            kept: list[CompletedFetch] = []
            n = 0
            while queue and n < max_records:
                cf = queue[0]
                st = cf.state
                if st.gen != cf.gen:
                    queue.popleft()
                    self._consumed_records += cf.index
                    freed = self._release(cf) or freed
                    continue
                if st.paused:
                    kept.append(queue.popleft())
                    continue
                recs = cf.records
                start = cf.index
                end = min(len(recs), start + max_records - n)
                if end > start:
                    if st.poll_seq != self.poll_seq:
                        st.poll_seq = self.poll_seq
                        st.first_unacked = recs[start]
                    take = recs[start:end] if start or end < len(recs) else recs
                    lst = out.get(cf.tp)
                    if lst is None:
                        out[cf.tp] = take
                    else:
                        lst.extend(take)
                    n += end - start
                    cf.index = end
                    last = recs[end - 1]
                    st.position = FetchPosition(last.offset + 1, last.leader_epoch)
                if cf.index >= len(recs):
                    queue.popleft()
                    self._consumed_records += len(recs)
                    self._consumed_bytes += cf.size
                    st.position = FetchPosition(cf.next_offset, cf.next_epoch)
                    freed = self._release(cf) or freed
            if kept:
                queue.extendleft(reversed(kept))
        if freed:
            self.on_space()
        return out

    def drain_one(self) -> ConsumerRecord[Any, Any] | None:
        """Take one record (the fast path of a per-record ``poll()``; one thread at a time).

        Records come off the lease of the first queued fetch without the lock; a new lease
        is taken under it when that one is used up or stopped (a seek, reset, pause,
        revocation, error or clear() stops it, see :class:`Lease`).

        Raises:
            See :meth:`drain`.
        """
        lease = self.lease
        if lease is not None:
            st = lease.state
            seq = self.poll_seq
            recs = lease.recs
            if st.poll_seq == seq:
                # Marked already (none to mark without a group: poll_seq moves only in
                # polls of a group's consumer); a stopped lease pops its marker.
                try:
                    rec = recs.popleft()
                except IndexError:  # used up: once a lease
                    rec = _STOP
                if rec is not _STOP:
                    return rec
            elif recs:
                rec = recs[0]
                if rec is not _STOP:
                    # Marked before it is taken: a commit that sees the position past it sees
                    # the mark too (SubscriptionState.consumed_offsets reads in that order).
                    old_seq, old_first = st.poll_seq, st.first_unacked
                    st.first_unacked = rec
                    st.poll_seq = seq
                    if recs.popleft() is rec:
                        return rec
                    # Stopped meanwhile: not handed out, so not marked.
                    st.poll_seq = old_seq
                    st.first_unacked = old_first
        return self._drain_one_locked()

    def _drain_one_locked(self) -> ConsumerRecord[Any, Any] | None:
        # acquire/release rather than ``with``: cheaper, and this runs once a fetch.
        lock = self.lock
        lock.acquire()
        try:
            lease = self.lease
            if lease is not None:
                self._settle(lease)
            if self._errors:
                self._raise_errors()
            queue = self._queue
            if queue:
                cf = queue[0]
                st = cf.state
                if cf.index < cf.last and st.gen == cf.gen and not st.paused:
                    self.lease = lease = Lease(cf, st.position)
                    cf.index = cf.last
                    st.cursor = lease
                    # gen and paused change without the lock too (pause()): looked at again
                    # now that the lease is published (see PartitionState.gen).
                    if st.gen != cf.gen or st.paused:
                        self._settle(lease)
        finally:
            lock.release()
        if self.lease is not None:
            return self.drain_one()
        got = self.drain(1)
        for recs in got.values():
            return recs[0]
        return None
