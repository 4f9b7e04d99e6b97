"""Share group membership (KIP-932), client side: one ShareGroupHeartbeat (API 76) every
``heartbeat_interval_ms`` the coordinator chooses.

As in the KIP-848 consumer protocol (:mod:`kontrakt.clients.group._consumer_protocol`, whose
member id generator this shares) the member id is a UUID made here and kept for life, the
member epoch comes from the coordinator (0 joins, -1 leaves) and the coordinator computes
the assignment, sent as topic ids and partitions. Unlike a consumer group nothing is revoked
or committed when the assignment changes: partitions are shared, and records a member stops
fetching are released by the broker. So the member takes each assignment as it comes.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from kontrakt._types import TopicPartition
from kontrakt.clients._wait import cancel_and_wait, wait_event
from kontrakt.clients.client import AsyncKafkaClient, Backoff
from kontrakt.clients.group._consumer_protocol import LEAVE_EPOCH, new_member_id
from kontrakt.clients.group._offsets import COORDINATOR_ERRORS
from kontrakt.errors import (
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    UnsupportedVersionError,
)
from kontrakt.protocol.errors import (
    CoordinatorLoadInProgressError,
    FencedMemberEpochError,
    UnknownMemberIdError,
    for_code,
)
from kontrakt.protocol.messages import ShareGroupHeartbeatRequest

__all__ = ["ShareGroupMembership"]

log = logging.getLogger("kontrakt.share.group")

#: The coordinator dropped the member: it rejoins with epoch 0.
_DROPPED = frozenset((FencedMemberEpochError.code, UnknownMemberIdError.code))


class ShareGroupMembership:
    """Keeps a share consumer a member of its share group and tracks its assignment.

    Args:
        client: the consumer's network core.
        group_id: the share group.
        rack: the consumer's rack (``client.rack``), or None.
        retry_backoff, retry_backoff_max: seconds between failed heartbeats.

    Failures of the background task (a broker without share groups, authorization, an
    invalid request) are kept and raised by :meth:`check`, which the consumer calls on every
    call.
    """

    def __init__(self, client: AsyncKafkaClient, group_id: str, *, rack: str | None,
                 retry_backoff: float, retry_backoff_max: float) -> None:
        self.client = client
        self.group_id = group_id
        self.rack = rack
        self.member_id = new_member_id()
        self.member_epoch = 0
        #: Seconds between heartbeats, as the coordinator last said.
        self.heartbeat_interval = 5.0
        #: The partitions the coordinator assigned this member (names resolved).
        self.assignment: frozenset[TopicPartition] = frozenset()
        #: Set whenever :attr:`assignment` changes (the consumer clears it).
        self.assignment_changed = asyncio.Event()
        self._topics: list[str] = []
        self._sent_topics: list[str] | None = None
        self._target: frozenset[tuple[uuid.UUID, int]] = frozenset()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._error: BaseException | None = None
        self._backoff = Backoff(retry_backoff, retry_backoff_max)
        #: Told of each answered heartbeat (its latency in seconds) and assignment change.
        self.on_heartbeat: Callable[[float], None] = lambda latency: None
        self.on_assignment: Callable[[], None] = lambda: None

    # --- control ---------------------------------------------------------------------

    @property
    def topics(self) -> list[str]:
        """The subscribed topic names, sorted."""
        return list(self._topics)

    def subscribe(self, topics: list[str]) -> None:
        """Subscribe to ``topics`` (replacing the subscription) and heartbeat at once; an
        empty list leaves the group."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise IllegalStateError("an AsyncShareConsumer must be used on a running event "
                                    "loop (use ShareConsumer in blocking code)") from None
        self._topics = sorted(set(topics))
        self._wake.set()
        if self._topics and (self._task is None or self._task.done()):
            self._task = loop.create_task(self._run(), name="kontrakt-share-heartbeat")

    def check(self) -> None:
        """Raise the error that stopped the heartbeat loop, if one did."""
        if self._error is not None:
            raise self._error

    async def leave(self) -> None:
        """Stop heartbeating and leave the group (epoch -1) if a member; errors are logged,
        not raised: the coordinator drops a silent member after its session timeout."""
        task, self._task = self._task, None
        if task is not None:
            await cancel_and_wait([task])
        await self._send_leave()

    async def _send_leave(self) -> None:
        if self.member_epoch > 0:
            try:
                resp = await self._send(self._request(LEAVE_EPOCH, None))
                if resp.error_code:
                    log.info("share group %s: the leave was answered %s", self.group_id,
                             for_code(resp.error_code).__name__)
            except KafkaError as exc:
                log.info("share group %s: leaving failed: %s", self.group_id, exc)
        self._forget()

    # --- the loop ----------------------------------------------------------------------

    async def _run(self) -> None:
        try:
            while self._topics:
                self._wake.clear()
                delay = self.heartbeat_interval if await self._heartbeat() else (
                    self._backoff.next())
                await wait_event(self._wake, delay)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # kept for the consumer's next call
            log.warning("share group %s: heartbeat loop stopped: %r", self.group_id, exc)
            self._error = exc
        if not self._topics:
            await self._send_leave()

    def _request(self, epoch: int, topics: list[str] | None) -> Any:
        return ShareGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=epoch,
            rack_id=self.rack, subscribed_topic_names=topics)

    async def _send(self, request: Any) -> Any:
        try:
            await self.client.start()  # idempotent; subscribe() may come before any call
            conn = await self.client.coordinator_connection(self.group_id)
            try:
                version = conn.negotiate(ShareGroupHeartbeatRequest)
            except UnsupportedVersionError as exc:
                raise UnsupportedVersionError(
                    "share groups need a broker with KIP-932 (ShareGroupHeartbeat, API 76, "
                    f"version 1): {exc}") from exc
            return await conn.send(request, version=version,
                                   timeout=self.client.settings.request_timeout)
        except (KafkaConnectionError, KafkaTimeoutError):
            self.client.forget_coordinator(self.group_id)
            raise

    async def _heartbeat(self) -> bool:
        """One heartbeat. Returns False when it failed in a way that calls for a backoff.

        Raises:
            KafkaError: a fatal error (not retriable).
        """
        joining = self.member_epoch == 0
        topics = self._topics
        send_topics = topics if joining or topics != self._sent_topics else None
        sent_at = time.monotonic()
        try:
            resp = await self._send(self._request(self.member_epoch, send_topics))
            self.on_heartbeat(time.monotonic() - sent_at)
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            log.debug("share heartbeat failed: %s", exc)
            self._sent_topics = None
            return False
        except KafkaError as exc:
            if exc.retriable and not isinstance(exc, UnsupportedVersionError):
                return False
            raise
        code = resp.error_code
        if code == 0:
            self._backoff.reset()
            if resp.member_id:
                self.member_id = resp.member_id
            self.member_epoch = resp.member_epoch
            if resp.heartbeat_interval_ms > 0:
                self.heartbeat_interval = resp.heartbeat_interval_ms / 1000
            if send_topics is not None:
                self._sent_topics = send_topics
            if resp.assignment is not None:
                self._target = frozenset((t.topic_id, p) for t in resp.assignment.topic_partitions
                                         for p in t.partitions)
            await self._resolve()
            return True
        if code in _DROPPED:
            log.info("share group %s: %s; rejoining with epoch 0", self.group_id,
                     for_code(code).__name__)
            self._forget()
            self._wake.set()
            return True
        if code in COORDINATOR_ERRORS:
            if code != CoordinatorLoadInProgressError.code:
                self.client.forget_coordinator(self.group_id)
            return False
        error = for_code(code)(
            f"ShareGroupHeartbeat {self.group_id!r}: {resp.error_message or ''}")
        if error.retriable:
            return False
        raise error

    async def _resolve(self) -> None:
        """Turn the target (topic ids) into the assignment (names), refreshing metadata for
        ids not known yet; ids still unknown are resolved at a later heartbeat."""
        names = {info.topic_id: name for name, info in self.client.cluster.topics.items()}
        if not {tid for tid, _ in self._target} <= names.keys():
            meta = await self.client.refresh_metadata(self._topics)
            names = {info.topic_id: name for name, info in meta.topics.items()}
        assignment = frozenset(TopicPartition(names[tid], p) for tid, p in self._target
                               if tid in names)
        if assignment != self.assignment:
            log.info("share group %s epoch %s: assigned %s", self.group_id, self.member_epoch,
                     sorted(map(str, assignment)))
            self.assignment = assignment
            self.client.add_topics({tp.topic for tp in assignment})
            self.assignment_changed.set()
            self.on_assignment()

    def _forget(self) -> None:
        self.member_epoch = 0
        self._sent_topics = None
        self._target = frozenset()
        if self.assignment:
            self.assignment = frozenset()
            self.assignment_changed.set()


