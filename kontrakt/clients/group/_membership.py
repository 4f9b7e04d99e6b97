"""Consumer group membership, what both protocols share: the background task, listener
calls, revocation (with its commit), losing partitions, the poll timeout and closing.

:class:`GroupMembership` extends :class:`~._offsets.GroupOffsets`; the classic protocol
(:class:`~._classic.GroupCoordinator`: JoinGroup, SyncGroup, Heartbeat) and KIP-848
(:class:`~._consumer_protocol.ConsumerGroupMembership`: ConsumerGroupHeartbeat) extend it
with how to join, stay and leave. The task is idle until the consumer subscribes; each turn
of its loop (:meth:`GroupMembership._turn`) is the protocol's. Listener callbacks run through
a runner the consumer supplies (the sync consumer runs them on the application's thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable

from kontrakt._types import OffsetAndMetadata, TopicPartition
from kontrakt.clients._wait import wait_event
from kontrakt.clients.client import AsyncKafkaClient, Backoff
from kontrakt.clients.group._offsets import GroupOffsets
from kontrakt.clients.group._settings import GroupSettings
from kontrakt.clients.group._types import GroupBuffer, GroupSubscription, ListenerRunner
from kontrakt.errors import KafkaError

__all__ = ["GroupMembership"]

log = logging.getLogger("kontrakt.consumer.group")


class GroupMembership(GroupOffsets):
    """Offsets and group membership for one consumer; a protocol subclass says how to take
    a turn (:meth:`_turn`), leave (:meth:`_leave_group`) and what being a member means.

    Args:
        client: the consumer's network core.
        subscription: the consumer's subscription state.
        settings: the consumer's group settings.
        buffer: the consumer's fetch buffer (its lock guards positions).
        wake: called to make the fetcher re-plan after the assignment changes.
        listener_runner: runs listener callbacks.
    """

    def __init__(self, client: AsyncKafkaClient, subscription: GroupSubscription,
                 settings: GroupSettings, *, buffer: GroupBuffer, wake: Callable[[], None],
                 listener_runner: ListenerRunner) -> None:
        super().__init__(client, subscription, settings, buffer=buffer)
        self.wake = wake
        self.run_listener = listener_runner
        self.session_timeout_ms = settings.session_timeout_ms
        #: Seconds between heartbeats (KIP-848: the coordinator's choice, once it answers).
        self.heartbeat_interval = settings.heartbeat_interval
        self.max_poll_interval = settings.max_poll_interval
        self.rebalance_timeout_ms = settings.rebalance_timeout_ms
        self.auto_commit = settings.auto_commit
        self.auto_commit_interval = settings.auto_commit_interval
        self.exclude_internal = settings.exclude_internal_topics
        self.rack = settings.rack
        self.assignors = list(settings.assignors)
        self.protocol = settings.rebalance_protocol
        #: The application's rebalance listener (methods looked up by name), or None.
        self.listener: object | None = None
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed: asyncio.Event | None = None
        self._rejoin = True
        self._error: BaseException | None = None
        self._last_poll = time.monotonic()
        self._poll_timed_out = False
        self._next_auto_commit = time.monotonic() + self.auto_commit_interval
        self._leaving = False
        #: When the next heartbeat is due (a leaving member's keep-alive goes on from it).
        self._next_heartbeat = 0.0
        #: Set by a revocation waiting for the application to poll (see _await_poll).
        self._poll_waiter: asyncio.Future[None] | None = None
        #: Set by wait_retired(), settled once nothing unsubscribe() retired is left.
        self._retired_waiter: asyncio.Future[None] | None = None
        self.rebalances = 0

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
            member = self._is_member()
            async with self._kept_alive(member):
                await self._hand_back_on_close(member, autocommit, processed)
        finally:
            if self._leaves_group():
                with contextlib.suppress(KafkaError):
                    await self._within(self._leave_group("consumer closed"),
                                       min(deadline, time.monotonic() + 5), "LeaveGroup")
            self.subs.set_assignment(())

    async def _hand_back_on_close(self, member: bool, autocommit: bool,
                                  processed: bool) -> None:
        """close()'s hand-back: commit (auto commit) and revoke what the member holds."""
        with self.buffer.lock:
            retiring = set(self.subs.retiring)
        if retiring:
            # unsubscribe() just before: its hand-back had not run (or was cut short
            # before the listener call, which _hand_back would have recorded).
            if member:
                if autocommit and self.auto_commit:
                    await self._commit_quietly(retiring, processed=True)
                await self._hand_back(self._leave_listener(), retiring)
            else:
                await self._hand_back("on_partitions_lost", retiring)
        # A manual assignment (assign()) is committed too, without a listener call: no
        # group gave it (as the Java client).
        if self.subs.assignment and (member or not self.subs.subscribed):
            with self.buffer.lock:
                parts = set(self.subs.assignment)
                for st in self.subs.assignment.values():
                    st.paused = True  # what the commit covers is all that is handed out
            if autocommit and self.auto_commit:
                await self._commit_quietly(parts, processed=processed)
            if member and self.subs.subscribed:
                await self._call_listener(self._leave_listener(), parts)

    def _leave_listener(self) -> str:
        """The listener a leaving member's partitions go to, asked after its commit: a
        member the coordinator dropped meanwhile (its keep-alive heartbeat was refused)
        lost them, as the Java client's onLeavePrepare decides."""
        return "on_partitions_revoked" if self._is_member() else "on_partitions_lost"

    def _background_tasks(self) -> list[asyncio.Task[None]]:
        return [] if self._task is None else [self._task]

    @contextlib.asynccontextmanager
    async def _kept_alive(self, member: bool) -> AsyncIterator[None]:
        """Around a leaving member's hand-back (``member``: the group still counts it):
        heartbeats, until the hand-back is done or the member is no longer one.

        The commit and the revoke listener may take longer than session.timeout.ms;
        without heartbeats the coordinator would drop the member meanwhile, give its
        partitions to another member while the listener still runs, and refuse the
        listener's commits (its records read again by the next owner) and the leave.
        """
        task = None
        if member and self._is_member() and self._loop is not None:
            task = self._loop.create_task(self._heartbeat_while_leaving(),
                                          name="kontrakt-group-leaving")
        try:
            yield
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    async def _heartbeat_while_leaving(self) -> None:
        """Heartbeat at the interval until cancelled (the hand-back is done) or the member
        is no longer one; a heartbeat that did not get through goes again after a
        backoff. A non-retriable error stops it (the leave is still tried)."""
        backoff = Backoff(*self._retry)
        when = self._next_heartbeat
        while self._is_member():
            delay = when - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            try:
                answered = await self._leaving_heartbeat()
            except KafkaError as exc:
                log.warning("group %s: heartbeat while leaving failed: %r", self.group_id,
                            exc)
                return
            if answered:
                backoff.reset()
                when = self._next_heartbeat
            else:
                when = time.monotonic() + backoff.next()

    async def _leaving_heartbeat(self) -> bool:
        """One heartbeat of :meth:`_heartbeat_while_leaving`; sets ``_next_heartbeat``
        when answered. A member dropped by the coordinator is forgotten (no leave follows).

        Returns:
            False: it did not get through (retry after a backoff).

        Raises:
            KafkaError: a non-retriable error.
        """
        raise NotImplementedError

    def _is_member(self) -> bool:
        """Whether the group counts this consumer as a member now."""
        raise NotImplementedError

    def _leaves_group(self) -> bool:
        """Whether closing or giving up the membership tells the coordinator."""
        raise NotImplementedError

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
        call = asyncio.ensure_future(self._run_listener_logged(method, fn, set(partitions)))
        try:
            await asyncio.shield(call)
        except asyncio.CancelledError:
            # close() cancels this task, or unsubscribe() (or a fence) drops the KIP-848
            # reconciliation making this call: the application's call runs to its end (a
            # revoke listener's final commit too; a close deadline bounds its commits), so
            # that the partitions it was given count as handed over, once; whoever
            # cancelled hands back the rest only after it. Cancelling it instead would
            # leave them half revoked (an async listener stopped at its first await) or
            # not revoked at all (a call not started yet), yet handed back.
            with contextlib.suppress(asyncio.CancelledError):
                await call
            raise

    async def _run_listener_logged(self, method: str, fn: Callable[..., object],
                                   partitions: set[TopicPartition]) -> None:
        try:
            await self.run_listener(fn, partitions)
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
                    if self.auto_commit and not self.subs.subscribed:
                        await self._auto_commit_assigned()
                    else:
                        await self._changed.wait()
                    continue
                await self._turn()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # supervised: raised by the consumer's next call
            log.error("group membership failed: %r", exc)
            self._error = exc

    async def _auto_commit_if_due(self, now: float) -> bool:
        """The timed auto commit (enable.auto.commit): once auto.commit.interval.ms is up,
        commit the assignment (what the application moved past by polling again).

        Returns:
            Whether it was due (and committed).
        """
        if not self.auto_commit or now < self._next_auto_commit:
            return False
        self._next_auto_commit = now + self.auto_commit_interval
        with self.buffer.lock:  # (assign() changes the assignment on the caller's thread)
            parts = set(self.subs.assignment)
        await self._commit_quietly(parts)
        return True

    async def _auto_commit_assigned(self) -> None:
        """Not subscribed, auto commit on: commit the partitions given by ``assign()`` once
        the interval is up, else wait for it (or for a subscription). The Java client and
        librdkafka auto-commit a manual assignment too; without it a consumer restarted
        with auto.offset.reset=latest would skip what came in while it was down."""
        assert self._changed is not None
        if not await self._auto_commit_if_due(time.monotonic()):
            await wait_event(self._changed, self._next_auto_commit - time.monotonic())

    async def _turn(self) -> None:
        """One turn of a subscribed member's loop (join, heartbeat, auto commit)."""
        raise NotImplementedError

    async def _give_up_membership(self, reason: str, *, lost: bool) -> None:
        """Hand every partition back (lost, or committed and revoked), leave the group and
        rejoin from scratch when subscribed again.

        What unsubscribe() retired is handed back, and the assignment unless it is a later
        assign()'s (then not the group's to take); without one it can still hold what a
        join finishing after unsubscribe() applied. A member the group no longer counts
        loses its partitions (the Java client's onLeavePrepare: no generation, lost).
        """
        await self._stop_side_work()
        group_given = not self.subs.manual
        with self.buffer.lock:
            retiring = set(self.subs.retiring)
            current = set(self.subs.assignment) if group_given else set()
        parts = retiring | current
        if parts:
            self._stop_handing_out(current)
            if lost or not self._is_member():
                await self._hand_back("on_partitions_lost", parts)
            else:
                async with self._kept_alive(True):
                    if self.auto_commit:
                        # Only unsubscribe() gives up a live membership: the application
                        # asked between polls, done with what it was handed (as on
                        # close()), and nothing was handed out since.
                        await self._commit_quietly(parts, processed=True)
                    await self._hand_back("on_partitions_revoked", parts)
        if group_given and not self.subs.manual:
            with self.buffer.lock:
                self.subs.set_assignment(())
        if self._leaves_group():
            with contextlib.suppress(KafkaError):
                await self._leave_group(reason)
        self._forget_membership()
        self._rejoin = True
        self._retired_changed()

    async def _stop_side_work(self) -> None:
        """Stop membership work running beside the main task (none by default)."""

    def _forget_membership(self) -> None:
        """Back to a non-member (a new one joins next)."""
        raise NotImplementedError

    async def _leave_group(self, reason: str) -> None:
        """Tell the coordinator this member leaves (``reason`` where the protocol has one)."""
        raise NotImplementedError

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
        self._stop_handing_out(partitions)
        if commit and self.auto_commit:
            await self._await_poll(partitions)
            await self._commit_quietly(partitions)
        await self._hand_back("on_partitions_revoked", partitions)

    def _stop_handing_out(self, partitions: set[TopicPartition]) -> None:
        """No record of ``partitions`` is handed out from here on (nor fetched)."""
        with self.buffer.lock:
            for tp in partitions:
                st = self.subs.assignment.get(tp)
                if st is not None:
                    st.paused = True
                    st.gen += 1

    async def _hand_back(self, method: str, partitions: set[TopicPartition]) -> None:
        """Call the listener's ``method`` (revoked or lost) for ``partitions``, then drop
        them from the assignment (or from what unsubscribe() retired), also when the call is
        interrupted: close() cancels this task while a sync consumer's listener call waits
        for the application's next call (close() itself runs it), and must not commit or
        revoke them a second time. Only the states handed back are dropped: a partition
        assign()ed again meanwhile stays."""
        with self.buffer.lock:
            # Retired ones first: after unsubscribe(); assign([tp]) the assignment's tp is
            # the new one, to be left alone.
            states = {tp: st for tp in partitions
                      if (st := self.subs.retiring.get(tp) or self.subs.assignment.get(tp))
                      is not None}
        try:
            await self._call_listener(method, partitions)
        finally:
            with self.buffer.lock:
                self.subs.release(states)
            self._retired_changed()

    async def committed_for_positions(self, partitions: list[TopicPartition]
                                      ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """:meth:`fetch_committed` for the fetcher's start positions: a partition still
        being handed back after unsubscribe() (assign()ed again at once) is looked up only
        once its hand-back committed, else it would start at an older commit and hand out
        records again. Not for the listener: its committed() must not wait for itself."""
        if not self.subs.retiring.keys().isdisjoint(partitions):
            await self.wait_retired(self.request_timeout)
        return await self.fetch_committed(partitions)

    def _retired_changed(self) -> None:
        waiter = self._retired_waiter
        if waiter is not None and not self.subs.retiring:
            self._retired_waiter = None
            _settle(waiter)

    async def wait_retired(self, timeout: float) -> None:
        """Wait until what unsubscribe() retired is handed back (at most ``timeout``
        seconds; not at all when the membership task is not running)."""
        if not self.subs.retiring or self._task is None or self._task.done():
            return
        assert self._loop is not None
        waiter = self._retired_waiter
        if waiter is None:
            waiter = self._retired_waiter = self._loop.create_future()
        await asyncio.wait([waiter, self._task], timeout=timeout,
                           return_when=asyncio.FIRST_COMPLETED)

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

    def _assigned_by_hand(self) -> bool:
        """unsubscribe(); assign() came while the group task was busy (joining, revoking):
        the assignment is the application's now, not the group's to change or revoke; the
        group task gives up the membership next (what unsubscribe() retired included)."""
        if self.subs.manual:
            log.debug("group %s: partitions assigned by hand meanwhile; the group's "
                      "assignment is not applied", self.group_id)
            return True
        return False

    async def _lost_all(self) -> None:
        self.generation = -1
        if self._assigned_by_hand():
            return  # (what unsubscribe() retired is lost when the membership is given up)
        parts = set(self.subs.assignment)
        if parts:
            self._stop_handing_out(parts)
            await self._hand_back("on_partitions_lost", parts)

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


def _settle(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


async def _wait_future(fut: asyncio.Future[None], timeout: float) -> None:
    """Wait for ``fut`` at most ``timeout`` seconds (without cancelling it)."""
    with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
        await asyncio.wait_for(asyncio.shield(fut), timeout)
