"""Fetching: one fetch in flight per broker, planned from the assignment, with fetch
sessions and pipelining.

How data flows: the :class:`Fetcher` (event loop) sends a Fetch to each leader that has
fetchable partitions. When the response arrives, the next Fetch goes out at once (its
offsets come from the batch headers), then each partition's record set is decoded in
chunks of whole batches into lists of :class:`~kontrakt.ConsumerRecord`, each appended to
the :class:`FetchBuffer` as one :class:`CompletedFetch`; the loop runs between chunks, so
the next response streams in meanwhile. Responses are decoded in arrival order. The
application drains the buffer — from the loop (async consumer) or from its own thread
(sync consumer) — taking many records per lock acquisition; no record crosses threads on
its own.

Positions: ``PartitionState.fetch_offset`` runs ahead (prefetch), ``position`` only moves
when records are handed to the application, so commits never cover unseen records. Every
seek bumps the partition's ``gen``; fetched data of an older gen is dropped, never returned.

This room holds the fetcher's lifecycle and wake-ups, the planning of fetches per broker
and the Fetch round trip (request, pipelining, per-partition errors). The fetcher inherits
the rest: decoding into the buffer under the memory cap from :mod:`._fetch_intake`,
position lookups (committed offsets, resets, KIP-320 validation) from
:mod:`._fetch_positions`. The buffer lives in :mod:`._buffer`, fetch sessions in
:mod:`._session` (both re-exported here).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Generator
from typing import Any

from kontrakt._types import TopicPartition
from kontrakt.clients._hooks import report_error
from kontrakt.clients._wait import cancel_and_wait, wait_event
from kontrakt.clients.client import AsyncKafkaClient, Backoff
from kontrakt.clients.consumer._buffer import CompletedFetch, FetchBuffer
from kontrakt.clients.consumer._config import ConsumerSettings
from kontrakt.clients.consumer._decoding import (
    HEADER_COST,
    RECORD_COST,
    iter_partition_batches,
    iter_partition_chunks,
    parse_partition,
)
from kontrakt.clients.consumer._fetch_intake import (
    CHUNK_BYTES,
    MAX_CHUNK_COST,
    MIN_CHUNK_COST,
    BufferIntake,
)
from kontrakt.clients.consumer._fetch_positions import CommittedLookup, PositionUpkeep
from kontrakt.clients.consumer._metrics import ConsumerMetrics
from kontrakt.clients.consumer._session import FetchSession
from kontrakt.clients.consumer._subscription import (
    PartitionState,
    SubscriptionState,
)
from kontrakt.errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
)
from kontrakt.protocol.errors import (
    FetchSessionIdNotFoundError,
    InvalidFetchSessionEpochError,
    OffsetOutOfRangeError,
    for_code,
)
from kontrakt.protocol.messages import FetchRequest
from kontrakt.protocol.records import iter_batches

__all__ = ["HEADER_COST", "RECORD_COST", "CommittedLookup", "CompletedFetch", "FetchBuffer",
           "FetchSession", "Fetcher", "iter_partition_chunks", "parse_partition"]

log = logging.getLogger("kontrakt.consumer.fetcher")

_MAX_FETCH_VERSION = 12  # v13+ names topics by id only; 12 has sessions and epochs
_OFFSET_OUT_OF_RANGE = OffsetOutOfRangeError.code
#: The broker lost or refused the fetch session: start a new one.
_SESSION_ERRORS = frozenset((FetchSessionIdNotFoundError.code, InvalidFetchSessionEpochError.code))


class Fetcher(BufferIntake, PositionUpkeep):
    """Background fetching for a :class:`SubscriptionState` into a :class:`FetchBuffer`.

    Args:
        client: the started network core.
        subscription: the partitions and their positions.
        buffer: where decoded records go.
        settings: the consumer's settings.
        committed_lookup: resolves partitions without a position from committed offsets
            (None without a group: the reset strategy applies at once).
        raw_batches: buffer :class:`~kontrakt.clients.consumer._decoding.RawBatch`es
            (checked, decompressed, read_committed applied) instead of decoded records
            (:func:`iter_partition_batches` in place of :func:`iter_partition_chunks`).
    """

    def __init__(self, client: AsyncKafkaClient, subscription: SubscriptionState,
                 buffer: FetchBuffer, settings: ConsumerSettings, *,
                 committed_lookup: CommittedLookup | None = None,
                 raw_batches: bool = False) -> None:
        self._chunks: Callable[..., Generator[tuple[list[Any], int, int, int, int], None, None]] \
            = iter_partition_batches if raw_batches else iter_partition_chunks
        self.client = client
        self.subs = subscription
        self.buffer = buffer
        self.committed_lookup = committed_lookup
        self.max_wait_ms = settings.fetch_max_wait_ms
        self.min_bytes = settings.fetch_min_bytes
        self.max_bytes = settings.fetch_max_bytes
        self.partition_max_bytes = settings.max_partition_fetch_bytes
        #: the most bytes one fetched batch may decompress to
        self.max_batch_bytes = settings.max_batch_bytes
        self.read_committed = settings.read_committed
        self.check_crcs = settings.check_crcs
        self.rack = settings.rack or ""
        self.sessions_enabled = settings.fetch_sessions
        self.request_timeout = settings.request_timeout
        self._retry = (settings.retry_backoff, settings.retry_backoff_max)
        self._sessions: dict[int, FetchSession] = {}
        self._inflight: dict[int, asyncio.Task[None]] = {}
        self._inflight_tps: set[TopicPartition] = set()
        self._node_backoff: dict[int, tuple[float, Backoff]] = {}
        self._resolving: asyncio.Task[None] | None = None
        self._resetting: asyncio.Task[None] | None = None
        self._validating: asyncio.Task[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._timer: asyncio.TimerHandle | None = None
        self.error: BaseException | None = None
        self.fetches = 0
        self.metrics = ConsumerMetrics()
        self._progress: asyncio.Event | None = None
        #: the decoding of the last response received (see _fetch_inner)
        self._decode_tail: asyncio.Future[None] | None = None
        self._decoding: set[asyncio.Task[None]] = set()
        #: records are handed to the buffer (and the loop runs) after about this much
        self.chunk_bytes = CHUNK_BYTES
        #: records are materialized at most about this much memory at a time, and only
        #: while the buffer is below its cap: it holds at most the cap plus this
        self.chunk_cost = min(MAX_CHUNK_COST, max(MIN_CHUNK_COST, buffer.max_bytes // 8))
        #: set by wake() (buffer space freed, seek, assignment change): a decoding waiting
        #: for buffer space checks again
        self._space: asyncio.Event | None = None

    # --- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        """Start the background task (on the running loop)."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._wake = asyncio.Event()
        self._space = asyncio.Event()
        self._progress = asyncio.Event()
        self.buffer.on_space = self.wake
        self._task = self._loop.create_task(self._run(), name="kontrakt-fetcher")

    async def close(self) -> None:
        """Stop fetching; in-flight fetches are cancelled."""
        await cancel_and_wait(
            t for t in (self._task, self._resolving, self._resetting, self._validating,
                        *self._inflight.values(), *self._decoding) if t is not None)
        if self._timer is not None:
            self._timer.cancel()

    def wake(self) -> None:
        """Re-plan fetches soon, and have a decoding that waits for buffer space check
        again; callable from any thread."""
        loop = self._loop
        if loop is None or self._wake is None or loop.is_closed():
            return
        if threading.get_ident() == self._loop_thread:
            self._woken()
        else:
            loop.call_soon_threadsafe(self._woken)

    def _woken(self) -> None:
        for ev in (self._wake, self._space):
            if ev is not None:
                ev.set()

    def _wake_later(self, delay: float) -> None:
        if self._loop is None:
            return
        now = self._loop.time()
        timer = self._timer
        # Keep a pending timer that fires soon enough. A timer whose time has passed has
        # fired (or is about to): it must not stop a new one being set, or a fetch backoff
        # after the first would never end and fetching would stall.
        if timer is not None and not timer.cancelled() and now < timer.when() <= now + delay:
            return
        if timer is not None:
            timer.cancel()
        self._timer = self._loop.call_later(delay, self.wake)

    def reset_sessions(self) -> None:
        """Forget every fetch session (after a rebalance or seek storm)."""
        for s in self._sessions.values():
            s.reset()

    async def _run(self) -> None:
        assert self._wake is not None
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                self._plan()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # supervised: surfaced by the consumer's next call
            log.exception("fetcher died")
            self.error = exc
            self.buffer.on_data()

    # --- planning ----------------------------------------------------------------------

    def _plan(self) -> None:
        subs = self.subs
        cluster = self.client.cluster
        if subs.missing_positions() and (self._resolving is None or self._resolving.done()):
            self._resolving = self._spawn(self._resolve_missing())
        if subs.pending_resets() and (self._resetting is None or self._resetting.done()):
            self._resetting = self._spawn(self._reset_positions())
        self._check_leader_epochs()
        if self.buffer.full():
            return
        now = time.monotonic()
        by_node: dict[int, list[TopicPartition]] = {}
        held: set[int] = set()  # nodes with partitions waiting for buffer space
        need_metadata = False
        pmax = self.partition_max_bytes
        for tp, st in subs.assignment.items():
            if not st.fetchable or tp in self._inflight_tps:
                continue
            after = st.fetch_after
            if after is not None:
                if now < after:  # backing off after an error at a read replica
                    self._wake_later(after - now)
                    continue
                st.fetch_after = None
            node = cluster.leader_for(tp.topic, tp.partition)
            if node < 0:
                need_metadata = True
                continue
            if st.read_replica is not None:  # (client.rack set, and a leader named one)
                node = self._read_replica(st, node, now)
                if node < 0:
                    continue  # waiting for a lookup of the replica (a wake-up is set)
            if st.buffered_bytes >= pmax:
                held.add(node)
                continue
            if node in self._inflight:
                continue
            nb = self._node_backoff.get(node)
            if nb is not None and nb[0] > now:
                self._wake_later(nb[0] - now)
                continue
            by_node.setdefault(node, []).append(tp)
        if need_metadata:
            self.client.add_topics({tp.topic for tp in subs.assignment})
            self.client.request_metadata_refresh()
            self._wake_later(self._retry[0] * 2)
        for node, tps in by_node.items():
            if node in held and all(self._caught_up(subs.assignment[tp]) for tp in tps):
                # Only partitions with nothing new would go: the broker would hold that
                # fetch for fetch.max.wait.ms, and the node's partitions whose buffered
                # records are being consumed could not be fetched meanwhile. Wait for the
                # buffer to make room instead (it wakes the planner).
                continue
            self._inflight_tps.update(tps)
            self._inflight[node] = self._spawn(self._fetch(node, tps))

    def _read_replica(self, st: PartitionState, leader: int, now: float) -> int:
        """The node to fetch a partition (its state ``st``) from: the replica its leader
        named (Fetch v11+, with ``client.rack``: KIP-392) until that expires
        (``metadata.max.age.ms``, as the Java client) or is still missing from the
        metadata after a lookup, else the leader; -1 while that lookup runs."""
        named = st.read_replica
        if named is None:
            return leader
        replica, until = named
        if until <= now:
            st.read_replica = st.replica_lookup = None
            return leader
        if replica in self.client.cluster.brokers:
            st.replica_lookup = None
            return replica
        # Our metadata may be what is stale (the replica was down at the last refresh and
        # is back): look again, as the Java client does. The leader would only name the
        # replica again, at once and with no records (measured against the mock cluster:
        # 10,000 fetches a second), so the partition waits retry.backoff.ms for the
        # lookup instead; if the replica is still missing then, it asks the leader again
        # (which names another, or none, once that replica has left its ISR).
        wait = st.replica_lookup
        if wait is None:
            st.replica_lookup = wait = now + self._retry[0]
            self.client.request_metadata_refresh()
        if now < wait:
            self._wake_later(wait - now)
            return -1
        st.read_replica = st.replica_lookup = None
        return leader

    def _caught_up(self, st: PartitionState) -> bool:
        """True when the last fetch response said there is nothing past the fetch offset."""
        end = st.highwater
        if self.read_committed and st.last_stable_offset is not None:
            end = st.last_stable_offset
        return end is not None and st.fetch_offset >= end

    def _spawn(self, coro: Awaitable[None]) -> asyncio.Task[None]:
        assert self._loop is not None
        task: asyncio.Task[None] = self._loop.create_task(coro)  # type: ignore[arg-type]
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            log.error("fetcher task failed: %r", exc)
            self.error = exc
            self.buffer.on_data()
        if self._progress is not None:
            self._progress.set()
        self.wake()

    async def wait_progress(self, timeout: float) -> None:
        """Wait until a background step (fetch, reset, lookup) finishes, or ``timeout``."""
        assert self._progress is not None
        self._progress.clear()
        await wait_event(self._progress, timeout)

    def _backoff_node(self, node: int) -> None:
        entry = self._node_backoff.get(node)
        b = entry[1] if entry else Backoff(*self._retry)
        delay = b.next()
        self._node_backoff[node] = (time.monotonic() + delay, b)
        self._wake_later(delay)

    def _replica_backoff(self, st: PartitionState) -> None:
        """Hold a partition's next fetch after an error at its read replica.

        The leader may name the same replica again at once (it still counts it in sync,
        or its view is stale), and both answer at once: without a wait the partition
        would go leader, replica, leader, ... as fast as the network allows. As librdkafka
        backs a partition off after a fetch error, it waits ``retry.backoff.ms``, doubled
        for each further error in a row at a replica up to ``retry.backoff.max.ms``.
        """
        b = Backoff(*self._retry)
        b.attempts = st.replica_errors
        delay = b.next()
        st.replica_errors += 1
        st.fetch_after = time.monotonic() + delay
        self._wake_later(delay)

    # --- fetching ----------------------------------------------------------------------

    async def _fetch(self, node: int, tps: list[TopicPartition]) -> None:
        released = [False]
        try:
            await self._fetch_inner(node, tps, released)
        finally:
            self._release_node(node, tps, released)

    def _release_node(self, node: int, tps: list[TopicPartition], released: list[bool]) -> None:
        if released[0]:
            return
        released[0] = True
        if self._inflight.get(node) is asyncio.current_task():
            del self._inflight[node]
        self._inflight_tps.difference_update(tps)

    async def _fetch_inner(self, node: int, tps: list[TopicPartition],
                           released: list[bool]) -> None:
        subs = self.subs
        cluster = self.client.cluster
        session = self._sessions.get(node)
        if session is None:
            session = self._sessions[node] = FetchSession(self.sessions_enabled)
        wanted: dict[TopicPartition, tuple[int, int, int]] = {}
        gens: dict[TopicPartition, tuple[PartitionState, int, int]] = {}
        for tp in tps:
            maybe = subs.assignment.get(tp)
            if maybe is None or not maybe.fetchable:
                continue
            st = maybe
            info = cluster.topics.get(tp.topic)
            p = info.partitions.get(tp.partition) if info else None
            wanted[tp] = (st.fetch_offset, p.leader_epoch if p else -1, st.last_fetched_epoch)
            gens[tp] = (st, st.gen, st.fetch_offset)
        if not wanted:
            return
        try:
            conn = await self.client.connection(node)
            version = min(conn.negotiate(FetchRequest), _MAX_FETCH_VERSION)
            if version < 7:
                session.enabled = False
            session_id, epoch, send, forget, full = session.build(wanted)
            req = self._request(version, session_id, epoch, send, forget)
            sent = time.monotonic()
            resp = await conn.send(req, version=version,
                                   timeout=self.request_timeout + self.max_wait_ms / 1000)
            self.metrics.fetch_done(time.monotonic() - sent, resp)
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            log.debug("fetch from node %s failed: %s", node, exc)
            report_error(exc)
            session.reset()
            # Its partitions go back to their leaders.
            for st in subs.assignment.values():
                if st.read_replica is not None and st.read_replica[0] == node:
                    st.read_replica = st.replica_lookup = None
            self.client.request_metadata_refresh()
            self._backoff_node(node)
            return
        self.fetches += 1
        if resp.error_code:
            # The session is gone or out of step: start a new one with a full fetch.
            log.debug("fetch session error %s on node %s", resp.error_code, node)
            session.reset()
            if resp.error_code not in _SESSION_ERRORS:
                self._backoff_node(node)
            return
        self._node_backoff.pop(node, None)
        session.on_response(full, resp.session_id, wanted)
        todo: list[tuple[TopicPartition, PartitionState, int, int, Any]] = []
        refetch: dict[TopicPartition, int] = {}
        stale = False
        now_ms = int(time.time() * 1000)  # last_poll_timestamp's wall clock, as aiokafka's
        # An incremental answer leaves out the partitions whose watermarks did not change:
        # those are told (unchanged) as much as the listed ones.
        unlisted = None if full else dict(gens)
        for t in resp.responses:
            for pd in t.partitions:
                tp = TopicPartition(t.topic, pd.partition_index)
                entry = gens.get(tp)
                if entry is None:
                    continue
                if unlisted is not None:
                    del unlisted[tp]
                st, gen, offset = entry
                if st.gen != gen or st.fetch_offset != offset:
                    stale = True  # sought or reassigned meanwhile: stale data
                    continue
                if pd.error_code == 0:
                    st.fetched_at_ms = now_ms
                named = st.read_replica
                if named is not None and named[0] == node and pd.error_code == 0:
                    st.replica_errors = 0  # the replica serves it again
                if pd.preferred_read_replica >= 0 and pd.error_code == 0:
                    # A leader that names another replica answers no records: the
                    # partition's next fetches go there (KIP-392). Only an answer without
                    # error counts, as in the Java client: an error names no replica to
                    # follow (an offset out of range at the leader, after one at the
                    # replica, would otherwise be sent back and forth, never reset).
                    st.read_replica = (
                        pd.preferred_read_replica,
                        time.monotonic() + self.client.settings.metadata_max_age)
                    st.replica_lookup = None
                todo.append((tp, st, gen, offset, pd))
                refetch[tp] = st.refetch
                if pd.error_code == 0 and pd.records and (
                        pd.diverging_epoch is None or pd.diverging_epoch.epoch < 0):
                    # Pipelining: learn where the next fetch starts from the batch headers
                    # alone, send that fetch, and only then decode this one.
                    nxt = offset
                    for batch in iter_batches(pd.records, check_crcs=False,
                                              require_progress=False):
                        nxt = max(nxt, batch.next_offset)
                    st.fetch_offset = nxt
        if unlisted:
            for st, gen, offset in unlisted.values():
                if st.gen == gen and st.fetch_offset == offset:
                    st.fetched_at_ms = now_ms
        if stale:
            # The broker's session counts what it answered as seen, and an incremental fetch
            # lists a partition only once it changes: the high watermark of a partition at
            # its end, dropped here, would never come again (after a seek to the offset the
            # fetch was from). A full fetch answers every partition.
            session.reset()
        # Decoding yields to the loop between chunks, so responses are decoded one after
        # another in arrival order (a ticket chain): records of a partition are buffered in
        # offset order even when the next response arrives while this one is decoded.
        loop = asyncio.get_running_loop()
        prev = self._decode_tail
        mine: asyncio.Future[None] = loop.create_future()
        self._decode_tail = mine
        task = asyncio.current_task()
        if task is not None:
            self._decoding.add(task)
        try:
            refresh = False
            decode: list[tuple[TopicPartition, PartitionState, int, int, Any]] = []
            for item in todo:
                tp, st, gen, offset, pd = item
                if pd.error_code:
                    if self._partition_error(tp, st, offset, pd.error_code, node):
                        refresh = True
                        session.parts.pop(tp, None)
                elif self._partition_ok(tp, st, offset, pd):
                    decode.append(item)
            if refresh:
                self.client.request_metadata_refresh()
                self._backoff_node(node)
            if prev is not None and not prev.done():
                # The response before this one is still being decoded. The node stays busy
                # meanwhile (no further fetch to it), so at most one response per node
                # waits here besides the one decoded and the prefetch stays bounded.
                await asyncio.shield(prev)
            self._release_node(node, tps, released)
            self._plan()
            await asyncio.sleep(0)  # let the next fetch go out before decoding
            for tp, st, gen, offset, pd in decode:
                # A decoding before this one may have stopped to fetch its rest again
                # (paused with the buffer full): this response follows that rest, which
                # is not buffered, so it is dropped and fetched again too.
                if st.gen == gen and st.refetch == refetch[tp]:
                    await self._decode_partition(tp, st, gen, offset, pd)
        finally:
            if task is not None:
                self._decoding.discard(task)
            if not mine.done():
                mine.set_result(None)
            if self._decode_tail is mine:
                self._decode_tail = None

    def _request(self, version: int, session_id: int, epoch: int,
                 send: dict[TopicPartition, tuple[int, int, int]],
                 forget: list[TopicPartition]) -> Any:
        FT = FetchRequest.FetchTopic
        FP = FT.FetchPartition
        by_topic: dict[str, list[Any]] = {}
        pmax = self.partition_max_bytes
        for tp, (offset, leader_epoch, last_epoch) in send.items():
            by_topic.setdefault(tp.topic, []).append(FP(
                partition=tp.partition, fetch_offset=offset,
                current_leader_epoch=leader_epoch if version >= 9 else -1,
                last_fetched_epoch=last_epoch if version >= 12 else -1,
                partition_max_bytes=pmax))
        forgotten: dict[str, list[int]] = {}
        for tp in forget:
            forgotten.setdefault(tp.topic, []).append(tp.partition)
        kwargs: dict[str, Any] = {}
        if version >= 7:
            kwargs.update(session_id=session_id, session_epoch=epoch, forgotten_topics_data=[
                FetchRequest.ForgottenTopic(topic=t, partitions=ps)
                for t, ps in forgotten.items()])
        if version >= 11 and self.rack:
            kwargs["rack_id"] = self.rack
        return FetchRequest(
            replica_id=-1, max_wait_ms=self.max_wait_ms, min_bytes=self.min_bytes,
            max_bytes=self.max_bytes, isolation_level=1 if self.read_committed else 0,
            topics=[FT(topic=t, partitions=ps) for t, ps in by_topic.items()], **kwargs)

    def _partition_ok(self, tp: TopicPartition, st: PartitionState, offset: int,
                      pd: Any) -> bool:
        """Apply an error-free partition's metadata; True when its records need decoding."""
        st.out_of_range_at = None
        st.highwater = pd.high_watermark
        if pd.last_stable_offset >= 0:
            st.last_stable_offset = pd.last_stable_offset
        if pd.log_start_offset >= 0:
            st.log_start_offset = pd.log_start_offset
        div = pd.diverging_epoch
        if div is not None and div.epoch >= 0 and div.end_offset >= 0:
            # KIP-320 via Fetch v12: our last fetched epoch ended earlier on this leader.
            target = min(div.end_offset, offset)
            log.warning("log truncation detected on %s at offset %s; resuming at %s",
                        tp, offset, target)
            self._seek(st, target, div.epoch)
            return False
        return bool(pd.records)

    def _partition_error(self, tp: TopicPartition, st: PartitionState, offset: int,
                         code: int, node: int) -> bool:
        """Apply a partition's fetch error (answered by ``node``); True when metadata
        should be refreshed."""
        err = for_code(code)
        # As the Java client: any error forgets the replica the leader named, and an offset
        # out of range there (a follower behind the leader) is fetched from the leader again
        # rather than reset.
        named = st.read_replica
        if named is not None and named[0] == node:
            self._replica_backoff(st)
        st.read_replica = st.replica_lookup = None
        if named is not None and code == _OFFSET_OUT_OF_RANGE:
            log.debug("offset %s out of range on %s at a follower; fetching from the leader",
                      offset, tp)
            return False
        if code == _OFFSET_OUT_OF_RANGE:
            # As the Java client: reset only when the position (what the application has
            # been handed) is still the offset that was fetched. When records before it
            # are still buffered, hand them out first, then fetch that offset again.
            pos = st.position
            if pos is None or pos.offset != offset:
                log.debug("offset %s out of range on %s with position %s; refetching once "
                          "the buffered records are consumed", offset, tp,
                          pos.offset if pos else None)
                st.out_of_range_at = offset
                return False
            strategy = self.subs.default_reset
            log.info("offset %s out of range on %s; reset %s", offset, tp, strategy)
            with self.buffer.lock:
                st.request_reset(strategy)
            return False
        if err.retriable or err.invalid_metadata:
            log.debug("fetch %s: %s", tp, err.__name__)
            return True
        # Fetching stops and the error is raised until the application seeks.
        st.failed = True
        self.buffer.add_error(tp, st, err(f"fetch {tp}"))
        return False
