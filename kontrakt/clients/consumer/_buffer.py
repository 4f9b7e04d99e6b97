"""The prefetch buffer between the fetcher and the application.

The fetcher (event loop) appends each partition's decoded records as one
:class:`CompletedFetch`; the application drains the :class:`FetchBuffer` from the loop (async
consumer) or from its own thread (sync consumer), many records per lock acquisition, and
draining moves the partitions' positions under the same lock. Buffered records count
against the cap (``queued.max.messages.kbytes``) by what they cost decoded.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from kontrakt._types import ConsumerRecord, TopicPartition
from kontrakt.clients.consumer._subscription import FetchPosition, PartitionState

__all__ = ["CompletedFetch", "FetchBuffer"]


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

    def add_error(self, tp: TopicPartition, state: PartitionState, error: BaseException, *,
                  after_records: bool = False) -> None:
        """Make every drain raise ``error`` until ``tp`` is sought (or unassigned).

        Args:
            after_records: raise only once ``tp``'s records buffered before the error are
                drained (they came before it in the partition).
        """
        with self.lock:
            self._errors[tp] = (state, state.gen, error, after_records)
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
        """Take one record (the fast path of a per-record ``poll()``)."""
        # acquire/release rather than ``with``: this runs once per record, and a bare
        # ``with lock:`` measured about a third of the old per-record cost.
        lock = self.lock
        lock.acquire()
        try:
            if self._errors:
                self._raise_errors()
            queue = self._queue
            if queue:
                cf = queue[0]
                i = cf.index
                st = cf.state
                if i < cf.last and st.gen == cf.gen and not st.paused:
                    cf.index = i + 1
                    rec = cf.records[i]
                    if st.poll_seq != self.poll_seq:
                        st.poll_seq = self.poll_seq
                        st.first_unacked = rec
                    # The position follows cf.index (see PartitionState.cursor); the last
                    # record of a fetch goes through drain(), which sets it for good.
                    st.cursor = cf
                    return rec
        finally:
            lock.release()
        got = self.drain(1)
        for recs in got.values():
            return recs[0]
        return None
