"""The fetcher's position upkeep: a partition without a position starts from the group's
committed offset or, failing that, ``auto.offset.reset``; requested resets (a seek to the
beginning or end, an offset out of range) are looked up with ListOffsets; and positions are
validated after a leader change (KIP-320, OffsetForLeaderEpoch), seeking back where the log
was truncated.

Each runs as a background task of the :class:`~kontrakt.clients.consumer._fetcher.Fetcher`,
which inherits these methods from :class:`PositionUpkeep`. A position moves only under the
buffer's lock (:meth:`PositionUpkeep._seek`), and a lookup's answer is applied only to a
partition whose ``gen`` is still the one it was asked for.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from kontrakt._types import OffsetAndMetadata, TopicPartition
from kontrakt.clients.client import AsyncKafkaClient
from kontrakt.clients.consumer._buffer import FetchBuffer
from kontrakt.clients.consumer._offsets import EARLIEST, LATEST, list_offsets
from kontrakt.clients.consumer._subscription import PartitionState, SubscriptionState
from kontrakt.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    OffsetOutOfRangeResetError,
    UnsupportedVersionError,
)
from kontrakt.protocol.messages import OffsetForLeaderEpochRequest

__all__ = ["CommittedLookup", "PositionUpkeep"]

log = logging.getLogger("kontrakt.consumer.fetcher")

CommittedLookup = Callable[[list[TopicPartition]],
                           Awaitable[Mapping[TopicPartition, OffsetAndMetadata | None]]]


class PositionUpkeep:
    """The :class:`~kontrakt.clients.consumer._fetcher.Fetcher`'s position lookups (a mixin:
    the fetcher sets the attributes declared here)."""

    client: AsyncKafkaClient
    subs: SubscriptionState
    buffer: FetchBuffer
    committed_lookup: CommittedLookup | None
    read_committed: bool
    _retry: tuple[float, float]
    _validating: asyncio.Task[None] | None

    if TYPE_CHECKING:
        def _spawn(self, coro: Awaitable[None]) -> asyncio.Task[None]: ...

    async def _resolve_missing(self) -> None:
        tps = self.subs.missing_positions()
        if not tps:
            return
        gens = {tp: self.subs.assignment[tp].gen for tp in tps}
        committed: Mapping[TopicPartition, OffsetAndMetadata | None] = {}
        if self.committed_lookup is not None:
            try:
                committed = await self.committed_lookup(tps)
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                log.debug("committed offset lookup failed, retrying: %s", exc)
                await asyncio.sleep(self._retry[0])
                return
        for tp in tps:
            st = self.subs.assignment.get(tp)
            if st is None or st.gen != gens[tp] or st.position is not None:
                continue
            c = committed.get(tp)
            if c is not None and c.offset >= 0:
                self._seek(st, c.offset, c.leader_epoch)
            else:
                st.reset = self.subs.default_reset

    def _seek(self, st: PartitionState, offset: int, leader_epoch: int) -> None:
        # Under the buffer's lock, as the application's seek(): a sync consumer's poll() on
        # another thread moves positions under it, and must not move this one back to the
        # end of a fetch that the seek made stale.
        with self.buffer.lock:
            st.seek(offset, leader_epoch)

    async def _reset_positions(self) -> None:
        pending = self.subs.pending_resets()
        query: dict[TopicPartition, int] = {}
        for tp, strategy in pending.items():
            st = self.subs.assignment[tp]
            if strategy == "none":
                with self.buffer.lock:
                    st.reset = None
                    st.position = None
                    st.failed = True
                    st.gen += 1
                self.buffer.add_error(tp, st, OffsetOutOfRangeResetError(
                    f"partition {tp} has no valid position and auto.offset.reset is 'none'; "
                    "seek() to choose one"))
                continue
            query[tp] = EARLIEST if strategy == "earliest" else LATEST
        if not query:
            return
        gens = {tp: self.subs.assignment[tp].gen for tp in query}
        try:
            found = await list_offsets(self.client, query,
                                       isolation_level=1 if self.read_committed else 0)
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            log.debug("offset reset lookup failed, retrying: %s", exc)
            await asyncio.sleep(self._retry[0])
            return
        for tp, res in found.items():
            cur = self.subs.assignment.get(tp)
            if cur is None or cur.gen != gens[tp] or cur.reset is None or res is None:
                continue
            self._seek(cur, res.offset, res.leader_epoch if res.leader_epoch >= 0 else -1)

    def _check_leader_epochs(self) -> None:
        """Validate positions after a leader change (KIP-320) where the broker allows, and
        forget the replica the old leader named to read from (KIP-392): the new leader
        names its own, as in the Java client."""
        cluster = self.client.cluster
        todo: list[TopicPartition] = []
        for tp, st in self.subs.assignment.items():
            info = cluster.topics.get(tp.topic)
            p = info.partitions.get(tp.partition) if info else None
            if p is None or p.leader_epoch < 0:
                continue
            if st.seen_leader_epoch == p.leader_epoch:
                continue
            first = st.seen_leader_epoch < 0
            st.seen_leader_epoch = p.leader_epoch
            if not first and st.read_replica is not None:
                st.read_replica = st.replica_lookup = None
            if (not first and st.position is not None and st.position.leader_epoch >= 0
                    and not st.validating):
                st.validating = True
                todo.append(tp)
        if todo:
            self._validating = self._spawn(self._validate(todo))

    async def _validate(self, tps: list[TopicPartition]) -> None:
        cluster = self.client.cluster
        try:
            by_node: dict[int, list[TopicPartition]] = {}
            for tp in tps:
                by_node.setdefault(cluster.leader_for(tp.topic, tp.partition), []).append(tp)
            for node, group in by_node.items():
                if node < 0:
                    continue
                try:
                    await self._validate_on(node, group)
                except (KafkaConnectionError, KafkaTimeoutError, UnsupportedVersionError) as e:
                    log.debug("leader epoch validation skipped on node %s: %s", node, e)
        finally:
            for tp in tps:
                st = self.subs.assignment.get(tp)
                if st is not None:
                    st.validating = False

    async def _validate_on(self, node: int, tps: list[TopicPartition]) -> None:
        conn = await self.client.connection(node)
        version = conn.negotiate(OffsetForLeaderEpochRequest)
        gens: dict[TopicPartition, tuple[int, int]] = {}
        by_topic: dict[str, list[Any]] = {}
        P = OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition
        for tp in tps:
            st = self.subs.assignment.get(tp)
            if st is None or st.position is None:
                continue
            gens[tp] = (st.gen, st.position.offset)
            by_topic.setdefault(tp.topic, []).append(P(
                partition=tp.partition, current_leader_epoch=st.seen_leader_epoch,
                leader_epoch=st.position.leader_epoch))
        if not by_topic:
            return
        req = OffsetForLeaderEpochRequest(replica_id=-1, topics=[
            OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=t, partitions=ps)
            for t, ps in by_topic.items()])
        resp = await conn.send(req, version=version)
        for t in resp.topics:
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition)
                st = self.subs.assignment.get(tp)
                if st is None or tp not in gens or st.gen != gens[tp][0] or p.error_code:
                    continue
                if 0 <= p.end_offset < gens[tp][1]:
                    log.warning("log truncation detected on %s: position %s is past the end "
                                "offset %s of epoch; seeking there", tp, gens[tp][1],
                                p.end_offset)
                    self._seek(st, p.end_offset, p.leader_epoch)
