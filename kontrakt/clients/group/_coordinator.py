"""The classic consumer group protocol, client side.

:class:`GroupCoordinator` finds the group's coordinator broker, commits and fetches offsets
(OffsetCommit / OffsetFetch), and — while the consumer is subscribed — keeps it a member of
the group in a background task: JoinGroup, SyncGroup (computing the assignment when it is
the leader), Heartbeat every ``heartbeat.interval.ms``, auto commit every
``auto.commit.interval.ms``, and leaving the group when the application stops polling for
``max.poll.interval.ms``.

Rebalancing is eager (revoke everything, then rejoin) or cooperative (KIP-429: only the
partitions that move are revoked; the others keep being consumed), depending on the
assignors configured. Listener callbacks run through a runner the consumer supplies (the
sync consumer runs them on the application's thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

from kontrakt._types import OffsetAndMetadata, TopicPartition
from kontrakt.clients._net.connection import BrokerConnection
from kontrakt.clients._wait import wait_event
from kontrakt.clients.client import AsyncKafkaClient, Backoff
from kontrakt.clients.group._assignors import (
    Assignor,
    RebalanceProtocol,
    assignor_for,
    cooperative_adjust,
    owned_partitions,
)
from kontrakt.clients.group._protocol import (
    CONSUMER_PROTOCOL_TYPE,
    Assignment,
    MemberSubscription,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kontrakt.errors import (
    CommitFailedError,
    ConfigError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    UnsupportedVersionError,
)
from kontrakt.protocol.errors import for_code
from kontrakt.protocol.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)

__all__ = ["GroupCoordinator", "make_coordinator", "parse_strategies"]

T = TypeVar("T")

log = logging.getLogger("kontrakt.consumer.group")

# Error codes the group protocol reacts to.
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79
FENCED_INSTANCE_ID = 82
UNSTABLE_OFFSET_COMMIT = 88
STALE_MEMBER_EPOCH = 113
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
_COORDINATOR_ERRORS = {COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR}
_STALE = {ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, STALE_MEMBER_EPOCH}
# Partition errors of OffsetCommit that the commit loop handles itself.
_REFUSED = {*_STALE, REBALANCE_IN_PROGRESS, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH}

ListenerRunner = Callable[[Callable[..., Any], "set[TopicPartition]"], Awaitable[None]]


def parse_strategies(value: Any) -> list[Assignor]:
    """``partition.assignment.strategy`` as assignors: a name, a comma-separated string,
    or a list of names, classes and :class:`Assignor` objects.

    Raises:
        ConfigError: unknown names, duplicates, or an empty list.
    """
    items: list[Any]
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",") if v.strip()]
    elif isinstance(value, Iterable):
        items = list(value)
    else:
        items = [value]
    assignors = [assignor_for(x) for x in items]
    if not assignors:
        raise ConfigError("partition.assignment.strategy is empty")
    names = [a.name for a in assignors]
    if len(set(names)) != len(names):
        raise ConfigError(f"partition.assignment.strategy names an assignor twice: {names}")
    return assignors


def _first_group_error(refused: Mapping[TopicPartition, int]) -> int | None:
    """The stale-generation (or rebalance) code among a commit's refusals, if any."""
    return next((c for c in refused.values() if c in _STALE or c == REBALANCE_IN_PROGRESS),
                None)


def _rebalance_protocol(assignors: list[Assignor]) -> RebalanceProtocol:
    # Cooperative only when every configured assignor can run it (as the Java client does).
    if all(RebalanceProtocol.COOPERATIVE in a.supported_protocols for a in assignors):
        return RebalanceProtocol.COOPERATIVE
    return RebalanceProtocol.EAGER


class GroupCoordinator:
    """Offsets and classic group membership for one consumer.

    Args:
        client: the consumer's network core.
        subscription: the consumer's :class:`SubscriptionState`.
        config: the consumer's validated options.
        buffer: the consumer's fetch buffer (its lock guards positions).
        wake: called to make the fetcher re-plan after the assignment changes.
        listener_runner: runs listener callbacks.
    """

    def __init__(self, client: AsyncKafkaClient, subscription: Any, config: Mapping[str, Any],
                 *, buffer: Any, wake: Callable[[], None],
                 listener_runner: ListenerRunner) -> None:
        self.client = client
        self.subs = subscription
        self.buffer = buffer
        self.wake = wake
        self.run_listener = listener_runner
        self.group_id: str = config["group.id"]
        self.instance_id: str | None = config["group.instance.id"]
        self.session_timeout_ms = int(config["session.timeout.ms"])
        self.heartbeat_interval = config["heartbeat.interval.ms"] / 1000
        self.max_poll_interval = config["max.poll.interval.ms"] / 1000
        self.rebalance_timeout_ms = int(config["rebalance.timeout.ms"]
                                        or config["max.poll.interval.ms"])
        self.auto_commit = bool(config["enable.auto.commit"])
        self.auto_commit_interval = config["auto.commit.interval.ms"] / 1000
        self.auto_store = bool(config["enable.auto.offset.store"])
        self.exclude_internal = bool(config["exclude.internal.topics"])
        self.rack: str | None = config.get("client.rack")
        self.request_timeout = config["request.timeout.ms"] / 1000
        self._retry = (config["retry.backoff.ms"] / 1000, config["retry.backoff.max.ms"] / 1000)
        self.assignors = parse_strategies(config["partition.assignment.strategy"])
        self.protocol = _rebalance_protocol(self.assignors)
        self.listener: Any = None
        self.member_id = ""
        self.generation = -1
        self.protocol_name: str | None = None
        self.leader = False
        self.joined_topics: frozenset[str] = frozenset()
        self._partition_counts: dict[str, int] = {}
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed: asyncio.Event | None = None
        self._rejoin = True
        self._stable: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._last_poll = time.monotonic()
        self._poll_timed_out = False
        self._next_auto_commit = time.monotonic() + self.auto_commit_interval
        self._closing = False
        #: While closing: when close() gives up on the network (commits, LeaveGroup).
        self._close_deadline: float | None = None
        self._leaving = False
        #: Set by a revocation waiting for the application to poll (see _await_poll).
        self._poll_waiter: asyncio.Future[None] | None = None
        self.rebalances = 0
        #: called with the seconds each successful commit took (the consumer's metrics)
        self.on_commit: Callable[[float], None] = lambda _latency: None
        #: partition -> the lowest leader epoch the coordinator accepts in a commit
        self._epoch_floors: dict[TopicPartition, int] = {}

    # --- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        """Start the membership task (idle until the consumer subscribes)."""
        self._changed = asyncio.Event()
        self._stable = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._run(),
                                                            name="kontrakt-group")

    def raise_if_failed(self) -> None:
        """Raise (once) the error the membership task died with."""
        if self._error is not None:
            err, self._error = self._error, None
            raise err

    def polled(self) -> None:
        """The application polled (any thread): resets the max.poll.interval.ms clock, and
        the records it was handed before count as processed (the consumer has just bumped
        ``buffer.poll_seq``), which a revocation may be waiting for."""
        self._last_poll = time.monotonic()
        waiter = self._poll_waiter
        if waiter is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(_settle, waiter)
        if self._poll_timed_out and self._loop is not None:
            self._loop.call_soon_threadsafe(self._resume_after_poll_timeout)

    def _resume_after_poll_timeout(self) -> None:
        if self._poll_timed_out:
            self._poll_timed_out = False
            self._request_rejoin()

    def subscription_changed(self) -> None:
        """Rejoin soon with the new subscription."""
        if self.subs.pattern is not None:
            self.client.track_all_topics(True)
        else:
            self.client.add_topics(self.subs.topics)
        self._request_rejoin()

    def unsubscribe(self) -> None:
        """Leave the group in the background (after revoking)."""
        self._leaving = True
        if self._changed is not None:
            self._changed.set()

    def _request_rejoin(self) -> None:
        self._rejoin = True
        if self._changed is not None:
            self._changed.set()

    async def close(self, autocommit: bool = True, *, deadline: float,
                    processed: bool = True) -> None:
        """Commit (auto commit), revoke, leave the group and stop.

        Every network step — the auto commit, commits the revoke listener makes, leaving
        the group — gives up at ``deadline`` (time.monotonic()); a commit that does not make
        it is logged (the listener's own commits raise KafkaTimeoutError to it).

        Args:
            autocommit: commit first when ``enable.auto.commit`` is on.
            deadline: when to stop waiting for the brokers.
            processed: the application is done with every record handed out (a plain
                close); False commits only what it moved past by polling again (it is
                closing on an error, possibly in the middle of a batch).

        Classic: dynamic members send LeaveGroup, static ones do not. KIP-848: a heartbeat
        with epoch -1 (static members: -2).
        """
        self._closing = True
        self._close_deadline = deadline
        for task in self._background_tasks():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        try:
            if self.subs.assignment and self._is_member():
                parts = set(self.subs.assignment)
                with self.buffer.lock:
                    for st in self.subs.assignment.values():
                        st.paused = True  # what the commit covers is all that is handed out
                if autocommit and self.auto_commit:
                    await self._commit_quietly(parts, processed=processed)
                await self._call_listener("on_partitions_revoked", parts)
        finally:
            if self._leaves_group():
                with contextlib.suppress(KafkaError):
                    await self._within(self._leave_group("consumer closed"),
                                       min(deadline, time.monotonic() + 5), "LeaveGroup")
            self.subs.set_assignment(())

    async def _within(self, step: Awaitable[T], deadline: float, what: str) -> T:
        """``await step``, given up at ``deadline``.

        Raises:
            KafkaTimeoutError: the deadline passed first.
        """
        try:
            return await asyncio.wait_for(step, max(0.0, deadline - time.monotonic()))
        except KafkaTimeoutError:
            raise
        except (asyncio.TimeoutError, TimeoutError):
            raise KafkaTimeoutError(f"{what} for group {self.group_id!r} did not finish "
                                    "before the consumer's close timeout") from None

    def _background_tasks(self) -> list[asyncio.Task[None]]:
        return [] if self._task is None else [self._task]

    def _is_member(self) -> bool:
        return self.generation >= 0

    def _leaves_group(self) -> bool:
        # A static member never sends LeaveGroup (as the Java client): the coordinator keeps
        # its partitions until session.timeout.ms, so a restart costs no rebalance.
        return bool(self.member_id) and self.instance_id is None

    # --- coordinator plumbing -----------------------------------------------------------

    async def _connection(self) -> BrokerConnection:
        # The coordinator's own connection: never queued behind the fetcher's long polls.
        try:
            return await self.client.coordinator_connection(self.group_id, "group")
        except (KafkaConnectionError, KafkaTimeoutError):
            self.client.forget_coordinator(self.group_id)
            raise

    async def _send(self, request: Any, timeout: float | None = None) -> Any:
        conn = await self._connection()
        try:
            return await conn.send(request, version=conn.negotiate(type(request)),
                                   timeout=timeout or self.request_timeout)
        except (KafkaConnectionError, KafkaTimeoutError):
            self.client.forget_coordinator(self.group_id)
            raise

    async def _conn_version(self, request_type: Any) -> int:
        return (await self._connection()).negotiate(request_type)

    def _coordinator_error(self, code: int) -> bool:
        if code in _COORDINATOR_ERRORS:
            if code != COORDINATOR_LOAD_IN_PROGRESS:
                self.client.forget_coordinator(self.group_id)
            return True
        return False

    # --- offsets ------------------------------------------------------------------------

    async def fetch_committed(self, partitions: list[TopicPartition],
                              timeout: float | None = None
                              ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The committed offsets of ``partitions`` (None where nothing is committed).

        Retries coordinator moves and loads until ``timeout`` (default request timeout;
        while closing, no later than the close timeout).

        Raises:
            KafkaTimeoutError: not answered in time.
            BrokerResponseError: a non-retriable error (e.g. GROUP_AUTHORIZATION_FAILED).
        """
        deadline = time.monotonic() + (timeout or self.request_timeout)
        if self._close_deadline is not None:
            deadline = min(deadline, self._close_deadline)
            return await self._within(self._fetch_committed(partitions, deadline), deadline,
                                      "OffsetFetch")
        return await self._fetch_committed(partitions, deadline)

    async def _fetch_committed(self, partitions: list[TopicPartition], deadline: float
                               ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        backoff = Backoff(*self._retry)
        while True:
            try:
                return await self._fetch_committed_once(partitions, deadline)
            except KafkaError as exc:
                if not (exc.retriable or isinstance(exc, KafkaConnectionError)):
                    raise
                delay = backoff.next()
                if time.monotonic() + delay >= deadline:
                    raise KafkaTimeoutError(f"OffsetFetch for group {self.group_id!r} "
                                            f"failed until the timeout: {exc}") from exc
                await asyncio.sleep(delay)

    async def _fetch_committed_once(self, partitions: list[TopicPartition], deadline: float
                                    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        version = await self._conn_version(OffsetFetchRequest)
        if version >= 8:
            G = OffsetFetchRequest.OffsetFetchRequestGroup
            req = OffsetFetchRequest(require_stable=True, groups=[G(
                group_id=self.group_id, topics=[
                    G.OffsetFetchRequestTopics(name=t, partition_indexes=ps)
                    for t, ps in by_topic.items()])])
        else:
            req = OffsetFetchRequest(
                group_id=self.group_id, require_stable=version >= 7, topics=[
                    OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                    for t, ps in by_topic.items()])
        resp = await self._send(req, timeout=max(0.001, deadline - time.monotonic()))
        if version >= 8:
            g = resp.groups[0]
            top_error, topics = g.error_code, g.topics
        else:
            top_error, topics = resp.error_code, resp.topics
        if top_error:
            self._coordinator_error(top_error)
            raise for_code(top_error)(f"OffsetFetch for group {self.group_id!r}")
        out: dict[TopicPartition, OffsetAndMetadata | None] = {tp: None for tp in partitions}
        for t in topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if p.error_code:
                    if p.error_code == UNSTABLE_OFFSET_COMMIT:
                        raise for_code(p.error_code)(f"OffsetFetch {tp}")
                    raise for_code(p.error_code)(f"OffsetFetch {tp}")
                if p.committed_offset >= 0:
                    out[tp] = OffsetAndMetadata(p.committed_offset, p.metadata or "",
                                                p.committed_leader_epoch)
        return out

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                     timeout: float | None = None) -> None:
        """Commit ``offsets`` with the current generation (or none when not a member).

        Retries coordinator errors until ``timeout`` (default request timeout). A partition
        refused for its committed leader epoch (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH:
        the epoch of the consumer's position is older than the leader's, e.g. after a leader
        move) is committed again once metadata is refreshed, with the leader's current epoch.

        Raises:
            CommitFailedError: the generation is stale or the group is rebalancing.
            KafkaTimeoutError: not done in time.
            BrokerResponseError: a non-retriable error.
        """
        if not offsets:
            return
        started = time.monotonic()
        deadline = started + (timeout or self.request_timeout)
        if self._close_deadline is not None:
            # While closing (the auto commit, or the revoke listener's own commit): no
            # longer than close(timeout) allows, finding the coordinator included.
            deadline = min(deadline, self._close_deadline)
            await self._within(self._commit(offsets, deadline), deadline, "OffsetCommit")
        else:
            await self._commit(offsets, deadline)
        self.on_commit(time.monotonic() - started)

    async def _commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                      deadline: float) -> None:
        backoff = Backoff(*self._retry)
        pending = dict(offsets)
        while True:
            error: KafkaError
            try:
                refused, generation = await self._commit_once(self._epochs_known(pending),
                                                              deadline)
            except KafkaError as exc:
                if not (exc.retriable or isinstance(exc, KafkaConnectionError)):
                    raise
                error = exc
            else:
                if not refused:
                    return
                # What was committed stays committed; only the refused partitions go again.
                pending = {tp: pending[tp] for tp in refused}
                code = _first_group_error(refused)
                if code is not None:
                    if not await self._retry_stale_commit(code, generation, set(refused),
                                                          deadline):
                        raise self._commit_failed(code, generation)
                    if self.generation != generation:
                        continue  # at once, with the new generation / member epoch
                elif await self._learn_leader_epochs(refused, pending):
                    continue  # at once, with the leaders' current epochs
                error = for_code(code or next(iter(refused.values())))(
                    f"OffsetCommit {sorted(map(str, refused))}")
            delay = backoff.next()
            if time.monotonic() + delay >= deadline:
                raise KafkaTimeoutError(f"OffsetCommit for group {self.group_id!r} "
                                        f"failed until the timeout: {error}") from error
            await asyncio.sleep(delay)

    async def _commit_once(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                           deadline: float) -> tuple[dict[TopicPartition, int], int]:
        """One OffsetCommit.

        Returns:
            The partitions refused for their leader epoch or for a stale generation /
            member epoch (or a rebalance), with their error codes; and the generation (or
            member epoch) the request carried.

        Raises:
            BrokerResponseError: any other partition error (the first).
        """
        member = self.subs.subscribed and self.generation >= 0
        generation = self.generation if member else -1
        member_id = self.member_id if member else ""
        version = await self._conn_version(OffsetCommitRequest)
        T = OffsetCommitRequest.OffsetCommitRequestTopic
        by_topic: dict[str, list[Any]] = {}
        for tp, om in offsets.items():
            by_topic.setdefault(tp.topic, []).append(T.OffsetCommitRequestPartition(
                partition_index=tp.partition, committed_offset=om.offset,
                committed_leader_epoch=om.leader_epoch if version >= 6 else -1,
                committed_metadata=om.metadata))
        kwargs: dict[str, Any] = {}
        if version >= 7 and member:
            kwargs["group_instance_id"] = self.instance_id
        req = OffsetCommitRequest(
            group_id=self.group_id, generation_id_or_member_epoch=generation,
            member_id=member_id, topics=[T(name=t, partitions=ps)
                                         for t, ps in by_topic.items()], **kwargs)
        resp = await self._send(req, timeout=max(0.001, deadline - time.monotonic()))
        first: BaseException | None = None
        refused: dict[TopicPartition, int] = {}
        for t in resp.topics:
            for p in t.partitions:
                code = p.error_code
                if not code:
                    continue
                if code in _REFUSED:
                    refused[TopicPartition(t.name, p.partition_index)] = code
                    continue
                self._coordinator_error(code)
                first = first or for_code(code)(f"OffsetCommit {t.name}-{p.partition_index}")
        if first is not None:
            raise first
        return refused, generation

    def _commit_failed(self, code: int, generation: int) -> CommitFailedError:
        if code != REBALANCE_IN_PROGRESS:
            self._request_rejoin()
        return CommitFailedError(
            f"commit failed for group {self.group_id!r}: {for_code(code).__name__}; the "
            f"group has rebalanced (generation {generation} is stale) and the partitions may "
            "now belong to another member")

    async def _retry_stale_commit(self, code: int, generation: int,
                                  partitions: set[TopicPartition], deadline: float) -> bool:
        """Whether a commit refused with ``code`` (a stale generation or a rebalance) is
        tried again; the classic protocol never does (the application is told)."""
        return False

    def _epochs_known(self, offsets: dict[TopicPartition, OffsetAndMetadata]
                      ) -> dict[TopicPartition, OffsetAndMetadata]:
        """``offsets`` with leader epochs below one the coordinator fenced raised to it."""
        floors = self._epoch_floors
        if not floors:
            return offsets
        out = dict(offsets)
        for tp, om in offsets.items():
            floor = floors.get(tp)
            if floor is not None and 0 <= om.leader_epoch < floor:
                out[tp] = OffsetAndMetadata(om.offset, om.metadata, floor)
        return out

    async def _learn_leader_epochs(self, refused: Mapping[TopicPartition, int],
                                   pending: Mapping[TopicPartition, OffsetAndMetadata]) -> bool:
        """After FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH: refresh metadata and remember
        each refused partition's current leader epoch, which later commits of older
        positions carry (the Java client commits its position's epoch; a broker that
        checks it wants the leader's, and the position's epoch only catches up when
        records written under the new leader are consumed).

        Returns:
            True when a newer epoch was learnt (worth retrying at once).
        """
        self.client.request_metadata_refresh()
        try:
            meta = await self.client.refresh_metadata({tp.topic for tp in refused})
        except KafkaError as exc:
            log.debug("metadata refresh after a leader-epoch refusal failed: %s", exc)
            return False
        learnt = False
        for tp in refused:
            info = meta.topics.get(tp.topic)
            part = info.partitions.get(tp.partition) if info is not None else None
            current = -1 if part is None else part.leader_epoch
            sent = max(pending[tp].leader_epoch, self._epoch_floors.get(tp, -1))
            if current > sent >= 0:
                self._epoch_floors[tp] = current
                learnt = True
        return learnt

    async def _commit_quietly(self, partitions: Iterable[TopicPartition], *,
                              processed: bool = False) -> None:
        """The auto commit of ``partitions``: failures are logged, not raised.

        Args:
            processed: commit every record handed out (on close); by default only those
                the application has moved past by polling again (it may still be processing
                the last ones it got).
        """
        wanted = set(partitions)
        with self.buffer.lock:
            consumed = self.subs.consumed_offsets(None if processed else self.buffer.poll_seq,
                                                  stored_only=not self.auto_store)
        offsets = {tp: om for tp, om in consumed.items() if tp in wanted}
        try:
            await self.commit(offsets)
        except KafkaError as exc:
            log.warning("auto commit of %s failed: %s", sorted(map(str, offsets)), exc)

    # --- listener -----------------------------------------------------------------------

    async def _call_listener(self, method: str, partitions: set[TopicPartition]) -> None:
        listener = self.listener
        if listener is None:
            return
        fn = getattr(listener, method, None)
        if fn is None and method == "on_partitions_lost":
            fn = getattr(listener, "on_partitions_revoked", None)
        if fn is None:
            return
        try:
            await self.run_listener(fn, set(partitions))
        except Exception:
            log.exception("rebalance listener %s failed", method)

    # --- membership ---------------------------------------------------------------------

    async def _run(self) -> None:
        assert self._changed is not None
        try:
            # Until closed: asyncio.wait_for (before 3.12) can swallow the cancellation
            # close() sends when the event it waits on is set at the same moment.
            while not self._closing:
                if self._leaving:
                    self._leaving = False
                    await self._give_up_membership("unsubscribed", lost=False)
                if not self.subs.subscribed or self._poll_timed_out:
                    self._changed.clear()
                    await self._changed.wait()
                    continue
                await self._turn()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # supervised: raised by the consumer's next call
            log.error("group membership failed: %r", exc)
            self._error = exc

    async def _turn(self) -> None:
        """One turn of a subscribed member's loop: join when needed, else heartbeat."""
        if self._rejoin:
            await self._join()
        else:
            await self._heartbeat_step()

    async def _give_up_membership(self, reason: str, *, lost: bool) -> None:
        """Hand every partition back (lost, or committed and revoked), leave the group and
        rejoin from scratch when subscribed again."""
        await self._stop_side_work()
        parts = set(self.subs.assignment)
        if parts:
            if lost:
                await self._call_listener("on_partitions_lost", parts)
            else:
                if self.auto_commit:
                    await self._commit_quietly(parts)
                await self._call_listener("on_partitions_revoked", parts)
        with self.buffer.lock:
            self.subs.set_assignment(())
        if self._leaves_group():
            with contextlib.suppress(KafkaError):
                await self._leave_group(reason)
        self._forget_membership()
        self._rejoin = True

    async def _stop_side_work(self) -> None:
        """Stop membership work running beside the main task (none in the classic one)."""

    def _forget_membership(self) -> None:
        self.generation = -1
        if self.instance_id is None:
            self.member_id = ""

    async def _leave_group(self, reason: str) -> None:
        version = await self._conn_version(LeaveGroupRequest)
        if version >= 3:
            req = LeaveGroupRequest(group_id=self.group_id, members=[
                LeaveGroupRequest.MemberIdentity(member_id=self.member_id,
                                                 group_instance_id=self.instance_id,
                                                 reason=reason)])
        else:
            req = LeaveGroupRequest(group_id=self.group_id, member_id=self.member_id)
        log.info("leaving group %s (%s)", self.group_id, reason)
        await self._send(req)
        self.generation = -1
        if self.instance_id is None:
            self.member_id = ""

    def _topics_to_join(self) -> frozenset[str]:
        if self.subs.pattern is None:
            return frozenset(self.subs.topics)
        internal = [t for t, info in self.client.cluster.topics.items() if info.is_internal]
        return frozenset(self.subs.match_pattern(self.client.cluster.topics,
                                                 exclude_internal=self.exclude_internal,
                                                 internal=internal))

    async def _revoke(self, partitions: set[TopicPartition], *, commit: bool) -> None:
        """Stop handing out records of ``partitions``, commit them, call the listener."""
        if not partitions:
            return
        with self.buffer.lock:
            for tp in partitions:
                st = self.subs.assignment.get(tp)
                if st is not None:
                    st.paused = True  # nothing more is handed out from here on
                    st.gen += 1
        if commit and self.auto_commit:
            await self._await_poll(partitions)
            await self._commit_quietly(partitions)
        await self._call_listener("on_partitions_revoked", partitions)

    async def _await_poll(self, partitions: set[TopicPartition]) -> None:
        """Before committing revoked partitions: wait until the application has polled
        again when it may still be processing records of them (as the Java client, whose
        rebalances run inside poll(), commits only what earlier polls returned), at most
        session.timeout.ms / 2 so that the member is not dropped meanwhile. If it does not
        poll in time, the commit covers only what it moved past: its last records of these
        partitions may be consumed again by their next owner, but none is lost.
        """
        waiter = self._loop.create_future() if self._loop is not None else None
        if waiter is None:
            return
        # Published before looking: a poll that bumps ``poll_seq`` after the look below
        # reads the waiter afterwards (the application thread bumps, then reads it).
        self._poll_waiter = waiter
        try:
            with self.buffer.lock:
                seq = self.buffer.poll_seq
                busy = any(st.poll_seq == seq for tp, st in self.subs.assignment.items()
                           if tp in partitions)
            if busy:
                await _wait_future(waiter, self.session_timeout_ms / 2000)
        finally:
            self._poll_waiter = None

    async def _join(self) -> None:
        assert self._changed is not None
        backoff = Backoff(*self._retry)
        self._changed.clear()
        self._rejoin = False
        if self.subs.pattern is not None:
            await self.client.refresh_metadata()
        else:
            await self.client.refresh_metadata(self.subs.topics)
        if self.protocol is RebalanceProtocol.EAGER and self.subs.assignment:
            parts = set(self.subs.assignment)
            await self._revoke(parts, commit=True)
            with self.buffer.lock:
                self.subs.set_assignment(())
        while True:
            try:
                done = await self._join_once()
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                log.debug("join failed: %s", exc)
                self.client.forget_coordinator(self.group_id)
                done = False
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                log.debug("join failed (retriable): %s", exc)
                done = False
            if done:
                return
            if self._closing:
                return
            await asyncio.sleep(backoff.next())

    async def _join_once(self) -> bool:
        topics = self._topics_to_join()
        self.joined_topics = topics
        owned = sorted(self.subs.assignment)
        protocols = []
        for a in self.assignors:
            user_data = a.subscription_user_data(set(topics), owned, self.generation)
            sub = Subscription(sorted(topics), user_data, owned, self.generation, self.rack)
            protocols.append(JoinGroupRequest.JoinGroupRequestProtocol(
                name=a.name, metadata=encode_subscription(sub)))
        version = await self._conn_version(JoinGroupRequest)
        if self.instance_id is not None and version < 5:
            raise UnsupportedVersionError(
                f"group.instance.id needs JoinGroup v5 or later (KIP-345); the coordinator "
                f"offers v{version}: remove group.instance.id or upgrade the broker")
        req = JoinGroupRequest(
            group_id=self.group_id, session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=self.member_id,
            group_instance_id=self.instance_id if version >= 5 else None,
            protocol_type=CONSUMER_PROTOCOL_TYPE, protocols=protocols)
        resp = await self._send(req, timeout=self.rebalance_timeout_ms / 1000 + 5)
        code = resp.error_code
        if code == MEMBER_ID_REQUIRED:
            # KIP-394: not a failure; rejoin at once with the id (no retry backoff).
            self.member_id = resp.member_id
            return await self._join_once() if resp.member_id else False
        if code in (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION):
            await self._lost_all()
            self.member_id = ""
            return False
        if code == REBALANCE_IN_PROGRESS or self._coordinator_error(code):
            return False
        if code == FENCED_INSTANCE_ID:
            await self._fenced("JoinGroup")
        if code:
            raise for_code(code)(f"JoinGroup {self.group_id!r}")
        self.member_id = resp.member_id
        generation = resp.generation_id
        self.protocol_name = resp.protocol_name
        self.leader = resp.leader == resp.member_id
        assignments: list[Any] = []
        # KIP-814: a static leader that rejoined a stable group must not reassign; the
        # coordinator keeps (and answers SyncGroup with) the current assignment.
        if self.leader and not resp.skip_assignment:
            assignments = await self._assign(resp.members)
        sversion = await self._conn_version(SyncGroupRequest)
        sync = SyncGroupRequest(
            group_id=self.group_id, generation_id=generation, member_id=self.member_id,
            group_instance_id=self.instance_id if sversion >= 3 else None,
            protocol_type=CONSUMER_PROTOCOL_TYPE if sversion >= 5 else None,
            protocol_name=self.protocol_name if sversion >= 5 else None,
            assignments=assignments)
        sresp = await self._send(sync, timeout=self.rebalance_timeout_ms / 1000 + 5)
        code = sresp.error_code
        if code in (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION):
            await self._lost_all()
            self.member_id = "" if code == UNKNOWN_MEMBER_ID else self.member_id
            return False
        if code == REBALANCE_IN_PROGRESS or self._coordinator_error(code):
            return False
        if code == FENCED_INSTANCE_ID:
            await self._fenced("SyncGroup")
        if code:
            raise for_code(code)(f"SyncGroup {self.group_id!r}")
        self.generation = generation
        assignment = (decode_assignment(sresp.assignment) if sresp.assignment
                      else Assignment([]))
        await self._apply(assignment)
        self.rebalances += 1
        return True

    async def _lost_all(self) -> None:
        parts = set(self.subs.assignment)
        self.generation = -1
        if parts:
            with self.buffer.lock:
                for tp in parts:
                    st = self.subs.assignment[tp]
                    st.paused = True
                    st.gen += 1
            await self._call_listener("on_partitions_lost", parts)
            with self.buffer.lock:
                self.subs.set_assignment(())

    async def _fenced(self, what: str) -> None:
        """FENCED_INSTANCE_ID: another consumer runs with our group.instance.id. Fatal (as
        in the Java client): the partitions are lost and the error reaches the application.

        Raises:
            FencedInstanceIdError: always.
        """
        await self._lost_all()
        raise for_code(FENCED_INSTANCE_ID)(
            f"{what} {self.group_id!r}: another consumer joined with group.instance.id "
            f"{self.instance_id!r}; this one is fenced and stops consuming")

    async def _assign(self, members: list[Any]) -> list[Any]:
        assignor = next((a for a in self.assignors if a.name == self.protocol_name), None)
        if assignor is None:
            raise ConfigError(f"group chose assignor {self.protocol_name!r}, "
                              "which this consumer does not have")
        subs: dict[str, MemberSubscription] = {}
        all_topics: set[str] = set()
        for m in members:
            sub = decode_subscription(m.metadata)
            subs[m.member_id] = MemberSubscription(m.member_id, m.group_instance_id, sub)
            all_topics.update(sub.topics)
        meta = await self.client.refresh_metadata(all_topics)
        counts = {t: len(meta.topics[t].partitions) for t in all_topics if t in meta.topics}
        self._partition_counts = counts
        result = assignor.assign(counts, subs)
        if self.protocol is RebalanceProtocol.COOPERATIVE:
            result = cooperative_adjust(owned_partitions(subs), result)
        log.debug("leader of %s assigned %s", self.group_id, result)
        return [SyncGroupRequest.SyncGroupRequestAssignment(
            member_id=mid, assignment=encode_assignment(result.get(mid, Assignment([]))))
            for mid in subs]

    async def _apply(self, assignment: Assignment) -> None:
        assignor = next((a for a in self.assignors if a.name == self.protocol_name), None)
        if assignor is not None:
            assignor.on_assignment(assignment, self.generation)
        new = set(assignment.partitions)
        old = set(self.subs.assignment)
        self.client.add_topics({tp.topic for tp in new})
        if self.protocol is RebalanceProtocol.COOPERATIVE:
            revoked = old - new
            added = new - old
            if revoked:
                await self._revoke(revoked, commit=True)
                with self.buffer.lock:
                    self.subs.remove_partitions(revoked)
                # Revoked partitions go to their new owner in a follow-up rebalance.
                self._request_rejoin()
            with self.buffer.lock:
                self.subs.add_partitions(added)
            await self._call_listener("on_partitions_assigned", added)
        else:
            with self.buffer.lock:
                self.subs.set_assignment(sorted(new))
                for st in self.subs.assignment.values():
                    st.paused = False
            await self._call_listener("on_partitions_assigned", new)
        log.info("group %s generation %s: assigned %s", self.group_id, self.generation,
                 sorted(map(str, new)))
        self._last_poll = max(self._last_poll, time.monotonic() - self.max_poll_interval / 2)
        self.wake()

    # --- stable member ------------------------------------------------------------------

    async def _poll_timeout(self, now: float, poll_deadline: float) -> bool:
        """Leave the group (partitions lost) when the application stopped polling for
        max.poll.interval.ms; it rejoins at its next poll."""
        if now < poll_deadline:
            return False
        log.warning("max.poll.interval.ms (%s ms) exceeded without a poll: leaving group %s",
                    int(self.max_poll_interval * 1000), self.group_id)
        self._poll_timed_out = True
        await self._give_up_membership("consumer poll timeout has expired", lost=True)
        return True

    async def _heartbeat_step(self) -> None:
        assert self._changed is not None
        now = time.monotonic()
        poll_deadline = self._last_poll + self.max_poll_interval
        if await self._poll_timeout(now, poll_deadline):
            return
        if self.auto_commit and now >= self._next_auto_commit:
            self._next_auto_commit = now + self.auto_commit_interval
            await self._commit_quietly(set(self.subs.assignment))
            if self._rejoin:
                return
        if self._metadata_changed():
            self._request_rejoin()
            return
        await self._heartbeat()
        if self._rejoin:
            return
        wait = min(self.heartbeat_interval, max(0.0, poll_deadline - time.monotonic()))
        if self.auto_commit:
            wait = min(wait, max(0.0, self._next_auto_commit - time.monotonic()))
        await wait_event(self._changed, wait)

    def _metadata_changed(self) -> bool:
        if self._topics_to_join() != self.joined_topics:
            return True
        if self.leader and self._partition_counts:
            topics = self.client.cluster.topics
            for t, n in self._partition_counts.items():
                info = topics.get(t)
                if info is not None and len(info.partitions) != n:
                    return True
        return False

    async def _heartbeat(self) -> None:
        version = 0
        try:
            version = await self._conn_version(HeartbeatRequest)
            req = HeartbeatRequest(group_id=self.group_id, generation_id=self.generation,
                                   member_id=self.member_id,
                                   group_instance_id=self.instance_id if version >= 3 else None)
            resp = await self._send(req)
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            log.debug("heartbeat failed: %s", exc)
            return
        except KafkaError as exc:
            if exc.retriable:
                return
            raise
        code = resp.error_code
        if not code:
            return
        if code == REBALANCE_IN_PROGRESS:
            log.info("group %s is rebalancing", self.group_id)
            self._request_rejoin()
        elif code in (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID):
            log.info("group %s: %s; rejoining", self.group_id, for_code(code).__name__)
            await self._lost_all()
            if code == UNKNOWN_MEMBER_ID:
                self.member_id = ""
            self._request_rejoin()
        elif self._coordinator_error(code):
            return
        elif code == FENCED_INSTANCE_ID:
            await self._fenced("Heartbeat")
        else:
            raise for_code(code)(f"Heartbeat {self.group_id!r}")


def make_coordinator(client: AsyncKafkaClient, subscription: Any, config: Mapping[str, Any],
                     *, buffer: Any, wake: Callable[[], None],
                     listener_runner: ListenerRunner) -> Any:
    """The coordinator for ``group.protocol``: classic, or consumer (KIP-848)."""
    if config["group.protocol"] == "consumer":
        from kontrakt.clients.group._consumer_protocol import ConsumerGroupMembership

        return ConsumerGroupMembership(client, subscription, config, buffer=buffer, wake=wake,
                                       listener_runner=listener_runner)
    return GroupCoordinator(client, subscription, config, buffer=buffer, wake=wake,
                            listener_runner=listener_runner)


def _settle(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


async def _wait_future(fut: asyncio.Future[None], timeout: float) -> None:
    """Wait for ``fut`` at most ``timeout`` seconds (without cancelling it)."""
    with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
        await asyncio.wait_for(asyncio.shield(fut), timeout)
