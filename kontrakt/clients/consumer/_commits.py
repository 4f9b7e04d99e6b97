"""An :class:`~kontrakt.clients.consumer.AsyncConsumer`'s offsets commits:
``store_offsets`` (marking records processed), ``commit``, ``commit_async`` and
``committed``, all through the group membership (``group.id``).

The methods live in the mixin :class:`AsyncConsumerCommits`, which the consumer inherits
(its attributes are the consumer's, declared in :mod:`._parts`). The auto commit
itself (timed, on revocation, on close) is the group membership's
(:mod:`kontrakt.clients.group`).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, overload

from kontrakt._types import ConsumerRecord, OffsetAndMetadata, TopicPartition
from kontrakt.clients.consumer._offsets import OffsetsLike, given_offsets, offsets_after
from kontrakt.clients.consumer._parts import AsyncConsumerParts
from kontrakt.errors import ConfigError, InvalidArgumentError

if TYPE_CHECKING:
    from kontrakt.clients.group._membership import GroupMembership

__all__ = ["AsyncConsumerCommits"]


class AsyncConsumerCommits(AsyncConsumerParts):
    """Offset storing and commits of :class:`AsyncConsumer`."""

    def _group(self) -> GroupMembership:
        if self._coordinator is None:
            raise ConfigError("commits need group.id")
        return self._coordinator

    def _offsets_to_commit(self, offsets: OffsetsLike | None
                           ) -> dict[TopicPartition, OffsetAndMetadata]:
        if offsets is None:
            with self._buffer.lock:
                out = self._subs.consumed_offsets(stored_only=not self._auto_store)
                if self._auto_store:
                    self._subs.acknowledge(out)
                return out
        return given_offsets(offsets)

    def store_offsets(self, records: ConsumerRecord[Any, Any]
                      | Iterable[ConsumerRecord[Any, Any]] | None = None, *,
                      offsets: OffsetsLike | None = None) -> None:
        """Mark records as processed (confluent-kafka's ``store_offsets``): auto commit
        then covers them without waiting for the next poll. With
        ``enable.auto.offset.store=false``, auto commit (timed, on revocation and on close)
        and :meth:`commit` without offsets commit only what was stored here.

        Args:
            records: a record or records: each partition's offset becomes the one after its
                highest record.
            offsets: or partition -> the next offset to read (an int or
                :class:`OffsetAndMetadata`).

        Raises:
            IllegalStateError: a partition is not assigned to this consumer.
            InvalidArgumentError: neither or both of records and offsets, or a negative
                offset.
            TypeError: records that are not ConsumerRecord, offsets of another type.
        """
        self._check()
        if (records is None) == (offsets is None):
            raise InvalidArgumentError("store_offsets() takes records or offsets")
        wanted = offsets_after(records) if records is not None else given_offsets(
            offsets or {})
        with self._buffer.lock:
            states = [(self._subs.state(tp), om) for tp, om in wanted.items()]
            for st, om in states:
                st.stored = om

    async def commit(self, offsets: OffsetsLike | None = None,
                     timeout: float | None = None) -> None:
        """Commit offsets (default: the positions of every assigned partition; with
        ``enable.auto.offset.store=false``, the offsets given to :meth:`store_offsets`).

        An offset is the next record to read (last processed + 1).

        Raises:
            CommitFailedError: the group rebalanced; this member's generation is stale.
            ConfigError: no ``group.id``.
            KafkaTimeoutError: not done within ``timeout`` (default request timeout);
                retriable coordinator errors are retried until then.
        """
        self._check()
        group = self._group()
        await self.start()
        await group.commit(self._offsets_to_commit(offsets), timeout=timeout)

    def commit_async(self, offsets: OffsetsLike | None = None,
                     callback: Callable[[dict[TopicPartition, OffsetAndMetadata],
                                         BaseException | None], Any] | None = None
                     ) -> asyncio.Task[None]:
        """Start a commit and return its task; ``callback(offsets, error)`` runs when done.

        The offsets are taken now (default: the current positions).

        Raises:
            ConfigError: no ``group.id``.
        """
        self._check()
        group = self._group()
        snapshot = self._offsets_to_commit(offsets)

        async def run() -> None:
            await self.start()
            err: BaseException | None = None
            try:
                await group.commit(snapshot)
            except Exception as exc:
                err = exc
            if callback is not None:
                res = callback(snapshot, err)
                if inspect.isawaitable(res):
                    await res
            elif err is not None:
                raise err
        task = asyncio.get_running_loop().create_task(run())
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        return task

    @overload
    async def committed(self, partitions: Iterable[TopicPartition],
                        timeout: float | None = None
                        ) -> dict[TopicPartition, OffsetAndMetadata | None]: ...
    @overload
    async def committed(self, partitions: TopicPartition, timeout: float | None = None
                        ) -> int | None: ...

    async def committed(self, partitions: Iterable[TopicPartition] | TopicPartition,
                        timeout: float | None = None
                        ) -> dict[TopicPartition, OffsetAndMetadata | None] | int | None:
        """The group's committed offsets (None where nothing is committed). Given one
        partition (kafka-python's and aiokafka's form), its committed offset or None.

        Raises:
            ConfigError: no ``group.id``.
            KafkaTimeoutError: not answered within ``timeout``.
        """
        self._check()
        group = self._group()
        await self.start()
        if isinstance(partitions, TopicPartition):
            tp = TopicPartition(partitions.topic, partitions.partition)
            om = (await group.fetch_committed([tp], timeout=timeout)).get(tp)
            return None if om is None else om.offset
        return dict(await group.fetch_committed(list(partitions), timeout=timeout))
