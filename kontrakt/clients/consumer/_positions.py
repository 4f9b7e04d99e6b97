"""Where an :class:`~kontrakt.clients.consumer.AsyncConsumer` reads from, and what the
brokers say of the logs: ``position``, ``seek`` / ``seek_to_beginning`` / ``seek_to_end``,
``pause`` / ``resume``, the watermarks and lag of the last fetch, and the lookups
``beginning_offsets``, ``end_offsets``, ``offsets_for_times``, ``list_topics`` and
``partitions_for_topic``.

The methods live in the mixin :class:`AsyncConsumerPositions`, which the consumer inherits
(its attributes are the consumer's, declared in :mod:`._parts`); positions move
under the fetch buffer's lock, and the fetcher is woken to act on them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, overload

from kontrakt._types import OFFSET_BEGINNING, OffsetAndMetadata, TopicPartition
from kontrakt.clients.cluster import TopicInfo
from kontrakt.clients.consumer._compat import flat_partitions
from kontrakt.clients.consumer._offsets import (
    EARLIEST,
    LATEST,
    OffsetAndTimestamp,
    list_offsets,
)
from kontrakt.clients.consumer._parts import AsyncConsumerParts
from kontrakt.clients.consumer._subscription import PartitionState
from kontrakt.errors import KafkaTimeoutError, OffsetOutOfRangeResetError

__all__ = ["AsyncConsumerPositions"]


class AsyncConsumerPositions(AsyncConsumerParts):
    """Positions, seeks, pausing and offset lookups of :class:`AsyncConsumer`."""

    if TYPE_CHECKING:
        def _start_at(self, partitions: list[TopicPartition]) -> None: ...

    # --- positions -----------------------------------------------------------------------

    async def _until(self, ready: Callable[[], bool], timeout: float | None, what: str) -> None:
        deadline = time.monotonic() + (timeout if timeout is not None else
                                       self._settings.request_timeout)
        self._fetcher.wake()
        while not ready():
            self._check()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise KafkaTimeoutError(f"{what} did not complete within the timeout")
            await self._fetcher.wait_progress(remaining)

    @overload
    async def position(self, partition: TopicPartition, timeout: float | None = None
                       ) -> int: ...
    @overload
    async def position(self, partition: list[TopicPartition], timeout: float | None = None
                       ) -> list[TopicPartition]: ...

    async def position(self, partition: TopicPartition | list[TopicPartition],
                       timeout: float | None = None) -> int | list[TopicPartition]:
        """The offset of the next record :meth:`poll` will return for ``partition``.

        Resolves it first (committed offset or ``auto.offset.reset``) when needed, also for
        a partition :meth:`unsubscribe` is handing back (inside its
        ``on_partitions_revoked``), as the Java client does. Given a list
        (confluent-kafka's form), returns the partitions with their ``offset`` set.

        Raises:
            IllegalStateError: the partition is not assigned.
            KafkaTimeoutError: not resolved within ``timeout`` (default request timeout).
            OffsetOutOfRangeResetError: no position and ``auto.offset.reset`` is none.
        """
        if isinstance(partition, list):
            return [TopicPartition(tp.topic, tp.partition, await self.position(tp, timeout))
                    for tp in flat_partitions((partition,))]
        await self.start()
        st = self._subs.state(partition)
        if st.position is None and self._subs.assignment.get(partition) is not st:
            await self._look_up_retired(partition, st, timeout)

        def ready() -> bool:
            if st.failed:
                self._buffer.drain(0)  # raises the partition's error
            return st.position is not None
        await self._until(ready, timeout, f"position({partition})")
        assert st.position is not None
        return st.position.offset

    async def _look_up_retired(self, tp: TopicPartition, st: PartitionState,
                               timeout: float | None) -> None:
        """Position a partition unsubscribe() retired that had none: its hand-back's
        revoke listener may ask. The fetcher no longer looks after it, but it is still this
        consumer's until the listener returns, and the Java client's position() looks it up
        then (its unsubscribe() calls the listener while the partitions are assigned): the
        committed offset, else ``auto.offset.reset`` (``none``: an error)."""
        deadline = time.monotonic() + (timeout if timeout is not None else
                                       self._settings.request_timeout)
        gen, strategy = st.gen, st.reset
        if strategy is None and self._coordinator is not None:
            committed = (await self._coordinator.fetch_committed(
                [tp], _left(deadline))).get(tp)
            if committed is not None and committed.offset >= 0:
                self._seek_retired(st, gen, committed.offset, committed.leader_epoch)
                return
        strategy = strategy or self._subs.default_reset
        if strategy == "none":
            raise OffsetOutOfRangeResetError(
                f"partition {tp} has no committed offset and auto.offset.reset is 'none'")
        found = (await list_offsets(
            self._client, {tp: EARLIEST if strategy == "earliest" else LATEST},
            isolation_level=1 if self._fetcher.read_committed else 0,
            timeout=_left(deadline))).get(tp)
        if found is not None:
            self._seek_retired(st, gen, found.offset,
                               found.leader_epoch if found.leader_epoch >= 0 else -1)

    def _seek_retired(self, st: PartitionState, gen: int, offset: int, epoch: int) -> None:
        with self._buffer.lock:
            if st.gen == gen and st.position is None:  # (unless a seek() came meanwhile)
                st.seek(offset, epoch)

    def seek(self, partition: TopicPartition, offset: int | OffsetAndMetadata | None = None
             ) -> None:
        """Read ``partition`` from ``offset`` next (None: the partition's own ``offset``,
        confluent-kafka's ``seek(TopicPartition(t, p, offset))``).

        Raises:
            IllegalStateError: the partition is not assigned.
            ValueError: a negative offset.
        """
        self._check()
        if offset is None:
            self._start_at([partition] if partition.offset >= OFFSET_BEGINNING else
                           [TopicPartition(partition.topic, partition.partition, -3)])
            self._fetcher.wake()
            return
        partition = TopicPartition(partition.topic, partition.partition)
        if isinstance(offset, OffsetAndMetadata):
            with self._buffer.lock:
                self._subs.seek(partition, offset.offset, offset.leader_epoch)
        else:
            with self._buffer.lock:
                self._subs.seek(partition, int(offset))
        self._fetcher.wake()

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Read these (default: all assigned) partitions from their earliest offset."""
        self._reset(partitions, "earliest")

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Read only records written after now on these (default: all assigned) partitions."""
        self._reset(partitions, "latest")

    def _reset(self, partitions: Iterable[TopicPartition], strategy: str) -> None:
        self._check()
        parts = list(partitions) or list(self._subs.assignment)
        with self._buffer.lock:
            for tp in parts:
                self._subs.request_reset(tp, strategy)
        self._fetcher.wake()

    def pause(self, *partitions: TopicPartition | Iterable[TopicPartition]) -> None:
        """Stop fetching and returning records of these assigned partitions (given one by
        one, or as a list: confluent-kafka's form)."""
        self._subs.pause(flat_partitions(partitions))
        self._fetcher.wake()  # a decoding waiting for buffer room stops for them

    def resume(self, *partitions: TopicPartition | Iterable[TopicPartition]) -> None:
        """Resume paused partitions (one by one, or as a list)."""
        self._subs.resume(flat_partitions(partitions))
        self._fetcher.wake()

    def paused(self) -> set[TopicPartition]:
        """The paused partitions."""
        return self._subs.paused()

    def highwater(self, partition: TopicPartition) -> int | None:
        """The partition's high watermark from the last fetch (None before one)."""
        return self._subs.state(partition).highwater

    def last_stable_offset(self, partition: TopicPartition) -> int | None:
        """The partition's last stable offset from the last fetch (None before one)."""
        return self._subs.state(partition).last_stable_offset

    def lag(self, partition: TopicPartition) -> int | None:
        """Records between the position and the end (the last stable offset for
        read_committed); None until both are known."""
        st = self._subs.state(partition)
        end = (st.last_stable_offset if self._fetcher.read_committed
               and st.last_stable_offset is not None else st.highwater)
        if end is None or st.position is None:
            return None
        return max(0, end - st.position.offset)

    # --- offsets lookups ------------------------------------------------------------------

    async def beginning_offsets(self, partitions: Iterable[TopicPartition],
                                timeout: float | None = None) -> dict[TopicPartition, int]:
        """The earliest offset of each partition.

        Raises:
            KafkaTimeoutError: not answered within ``timeout`` (default request timeout).
        """
        return await self._edge(partitions, EARLIEST, timeout)

    async def end_offsets(self, partitions: Iterable[TopicPartition],
                          timeout: float | None = None) -> dict[TopicPartition, int]:
        """The end offset of each partition: the high watermark, or the last stable offset
        with ``isolation.level=read_committed``.

        Raises:
            KafkaTimeoutError: not answered within ``timeout`` (default request timeout).
        """
        return await self._edge(partitions, LATEST, timeout)

    async def _edge(self, partitions: Iterable[TopicPartition], ts: int,
                    timeout: float | None) -> dict[TopicPartition, int]:
        await self.start()
        found = await list_offsets(self._client, {tp: ts for tp in partitions},
                                   isolation_level=1 if self._fetcher.read_committed else 0,
                                   timeout=timeout)
        return {tp: (r.offset if r is not None else -1) for tp, r in found.items()}

    async def offsets_for_times(self, timestamps: Mapping[TopicPartition, int],
                                timeout: float | None = None
                                ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition, the earliest offset whose timestamp is >= the given one (ms).

        Returns:
            Partition -> :class:`OffsetAndTimestamp`, or None when no such record exists.

        Raises:
            ValueError: a negative timestamp.
            KafkaTimeoutError: not answered within ``timeout``.
        """
        for tp, ts in timestamps.items():
            if ts < 0:
                raise ValueError(f"timestamp for {tp} must be >= 0, got {ts}")
        await self.start()
        return await list_offsets(self._client, dict(timestamps),
                                  isolation_level=1 if self._fetcher.read_committed else 0,
                                  timeout=timeout)

    # --- topics ---------------------------------------------------------------------------

    async def list_topics(self) -> dict[str, list[int]]:
        """Every topic in the cluster with its partition ids."""
        topics = await self._all_topics()
        return {name: sorted(t.partitions) for name, t in topics.items()}

    async def _all_topics(self) -> dict[str, TopicInfo]:
        """Fresh metadata of every topic in the cluster (that this client may describe)."""
        await self.start()
        self._client.track_all_topics(True)
        try:
            meta = await self._client.refresh_metadata()
        finally:
            self._client.track_all_topics(bool(self._subs.pattern))
        # Each update replaces the dict: this one stays as it is.
        return meta.topics

    async def partitions_for_topic(self, topic: str) -> set[int] | None:
        """Partition ids of ``topic``, None when it does not exist."""
        await self.start()
        meta = await self._client.refresh_metadata([topic])
        parts = meta.partitions_for(topic)
        return None if parts is None else set(parts)


def _left(deadline: float) -> float:
    """Seconds until ``deadline`` (time.monotonic()).

    Raises:
        KafkaTimeoutError: it has passed.
    """
    left = deadline - time.monotonic()
    if left <= 0:
        raise KafkaTimeoutError("position() did not complete within the timeout")
    return left
