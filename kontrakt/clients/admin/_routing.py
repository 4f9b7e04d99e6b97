"""How admin requests find their broker and retry: the controller, partition leaders, group
and transaction coordinators, every broker; one entity's failure kept apart from the rest.

Everything goes through :meth:`AsyncKafkaClient.request` (connections, version negotiation,
metadata) — this module only decides *where* and *whether again*.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from kontrakt._types import TopicPartition
from kontrakt.clients.admin._metrics import AdminMetrics
from kontrakt.clients.client import AsyncKafkaClient, Backoff
from kontrakt.errors import KafkaError, KafkaTimeoutError, PartialFailureError
from kontrakt.protocol.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    LeaderNotAvailableError,
    NotControllerError,
    NotCoordinatorError,
    UnknownTopicOrPartitionError,
    for_code,
)
from kontrakt.protocol.spec import Request

__all__ = ["Fatal", "Router", "finish"]

log = logging.getLogger("kontrakt.admin")

E = TypeVar("E", bound=Hashable)
T = TypeVar("T")

_MISSING = object()

# Errors after which a cached coordinator must be looked up again.
_COORDINATOR_MOVED = (NotCoordinatorError, CoordinatorNotAvailableError)


class Fatal:
    """Wraps an error that must not be retried even though its class is retriable (e.g. a
    topic that fresh metadata says does not exist)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


def error_for(code: int, message: str | None, what: str) -> BaseException:
    """The exception for a non-zero error code, naming the entity."""
    text = f"{what}: {message}" if message else what
    return for_code(code)(text)


def finish(results: Mapping[E, Any], what: str, return_exceptions: bool) -> dict[E, Any]:
    """Return ``results``, or, when an entity failed and ``return_exceptions`` is False,
    raise: the entity's own error when it is the only entity (so that ``except
    TopicAlreadyExistsError`` works for one topic), else :class:`PartialFailureError` (the
    first failure becomes its ``__cause__``)."""
    out = dict(results)
    if return_exceptions:
        return out
    errors = [v for v in out.values() if isinstance(v, BaseException)]
    if errors and len(out) == 1:
        raise errors[0]
    if errors:
        raise PartialFailureError(what, out) from errors[0]
    return out


class Router:
    """Routing and retry helpers over one :class:`AsyncKafkaClient`."""

    def __init__(self, client: AsyncKafkaClient, default_timeout: float) -> None:
        self.client = client
        self.default_timeout = default_timeout
        self.metrics = AdminMetrics()

    # --- time --------------------------------------------------------------------------

    def deadline(self, timeout: float | None) -> float:
        """Monotonic deadline for a call given its ``timeout`` in seconds (None: default)."""
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        return time.monotonic() + (self.default_timeout if timeout is None else timeout)

    def backoff(self) -> Backoff:
        cfg = self.client.config
        return Backoff(cfg["retry.backoff.ms"] / 1000, cfg["retry.backoff.max.ms"] / 1000)

    @staticmethod
    def remaining(deadline: float) -> float:
        return max(0.001, deadline - time.monotonic())

    # --- one exchange ------------------------------------------------------------------

    async def exchange(self, node: int, request_type: type[Request],
                       build: Callable[[int], Request], deadline: float) -> Any:
        """Negotiate ``request_type``'s version with ``node``, build the request for that
        version and send it through :meth:`AsyncKafkaClient.request`.

        Raises:
            KafkaConnectionError / KafkaTimeoutError: transport failures (retriable).
            UnsupportedVersionError: the broker does not offer the API.
        """
        if time.monotonic() >= deadline:
            raise _timeout(request_type.API_NAME)
        conn = await asyncio.wait_for(self.client.connection(node), self.remaining(deadline))
        version = conn.negotiate(request_type)
        request = build(version)
        self.metrics.request_sent(request_type.API_NAME)
        sent = time.monotonic()
        try:
            response = await self.client.request(request, node=node, version=version,
                                                 timeout=self.remaining(deadline))
        except BaseException:
            self.metrics.failed()
            raise
        self.metrics.response(time.monotonic() - sent, response)
        return response

    async def call(self, attempt: Callable[[], Awaitable[T]], deadline: float) -> T:
        """Run ``attempt`` until it succeeds, retrying retriable :class:`KafkaError` with
        backoff (refreshing metadata on invalid-metadata errors) until ``deadline``; then the
        last error is raised (the one retried, when the deadline cut the last attempt
        short)."""
        backoff = self.backoff()
        retried: KafkaError | None = None
        while True:
            try:
                return await attempt()
            except KafkaError as exc:
                outcome = _why(exc, retried, deadline)
                if outcome is not exc:
                    raise outcome from None
                retried = exc
                delay = backoff.next()
                if not exc.retriable or time.monotonic() + delay >= deadline:
                    raise
                log.debug("admin call retried after %r", exc)
                if exc.invalid_metadata:
                    self.client.request_metadata_refresh()
                await asyncio.sleep(delay)

    # --- many entities -----------------------------------------------------------------

    async def per_entity(self, entities: Sequence[E],
                         round_: Callable[[list[E]], Awaitable[Mapping[E, Any]]],
                         deadline: float) -> dict[E, Any]:
        """Drive a multi-entity operation: each round sends the still-pending entities;
        outcomes that are retriable errors are sent again (after backoff) until the
        deadline; everything else is final. An exception raised by ``round_`` itself counts
        as every pending entity's outcome.

        Returns:
            entity -> result value or exception, in the order of ``entities``.
        """
        results: dict[E, Any] = {}
        pending = list(entities)
        backoff = self.backoff()
        while pending:
            try:
                outcome = await round_(pending)
            except KafkaError as exc:
                outcome = {e: exc for e in pending}
            retry: list[E] = []
            refresh = False
            for e in pending:
                r = outcome.get(e, _MISSING)
                if r is _MISSING:
                    r = KafkaError(f"the broker's response did not mention {e!r}")
                if isinstance(r, Fatal):
                    r = r.error
                elif isinstance(r, KafkaError) and r.retriable:
                    before = results.get(e)
                    r = _why(r, before if isinstance(before, KafkaError) else None, deadline)
                    retry.append(e)
                    refresh |= r.invalid_metadata
                results[e] = r
            if not retry:
                break
            delay = backoff.next()
            if time.monotonic() + delay >= deadline:
                break  # the last retriable error stays as the outcome
            log.debug("retrying %d admin entities", len(retry))
            if refresh:
                self.client.request_metadata_refresh()
            await asyncio.sleep(delay)
            pending = retry
        return {e: results[e] for e in entities}

    @staticmethod
    async def fan_out(groups: Mapping[int, list[E]],
                      send: Callable[[int, list[E]], Awaitable[Mapping[E, Any]]]
                      ) -> dict[E, Any]:
        """Send each node's share concurrently; a failed exchange becomes the outcome of
        that node's entities only."""
        async def one(node: int, ents: list[E]) -> Mapping[E, Any]:
            try:
                return await send(node, ents)
            except KafkaError as exc:
                return {e: exc for e in ents}

        out: dict[E, Any] = {}
        for part in await asyncio.gather(*(one(n, es) for n, es in groups.items())):
            out.update(part)
        return out

    async def per_coordinator(self, keys: Sequence[str], key_type: str, deadline: float,
                              send: Callable[[int, list[str]], Awaitable[Mapping[str, Any]]]
                              ) -> dict[str, Any]:
        """:meth:`per_entity` over group or transactional ids (``key_type`` ``"group"`` or
        ``"transaction"``), each round sending every coordinator its keys; a coordinator
        that failed a key is looked up again before the retry."""
        async def round_(batch: list[str]) -> dict[str, Any]:
            groups, errors = await self.coordinators(batch, key_type)
            out = dict(errors)
            out.update(await self.fan_out(groups, send))
            for key, outcome in out.items():
                if isinstance(outcome, BaseException):
                    self.coordinator_error(key, key_type, outcome)
            return out

        return await self.per_entity(keys, round_, deadline)

    async def per_leader(self, tps: Sequence[TopicPartition], deadline: float,
                         send: Callable[[int, list[TopicPartition]],
                                        Awaitable[Mapping[TopicPartition, Any]]]
                         ) -> dict[TopicPartition, Any]:
        """:meth:`per_entity` over partitions, each round sending every leader its
        partitions; leaders are looked up on fresh metadata from the second round on."""
        first = [True]

        async def round_(batch: list[TopicPartition]) -> dict[TopicPartition, Any]:
            groups, errors = await self.leaders(
                [(tp.topic, tp.partition) for tp in batch], refresh=not first[0])
            first[0] = False
            out: dict[TopicPartition, Any] = {TopicPartition(*k): e for k, e in errors.items()}
            out.update(await self.fan_out(
                {n: [TopicPartition(*k) for k in ks] for n, ks in groups.items()}, send))
            return out

        return await self.per_entity(tps, round_, deadline)

    # --- where ------------------------------------------------------------------------

    def controller(self) -> int:
        """The controller from the last metadata (as the Java admin client routes topic
        changes), else the least loaded broker."""
        cid = self.client.cluster.controller_id
        if cid >= 0 and cid in self.client.cluster.brokers:
            return cid
        return self.client.least_loaded_node()

    async def to_controller(self, request_type: type[Request], build: Callable[[int], Request],
                            deadline: float) -> Any:
        """Send to the controller; NOT_CONTROLLER in a response is for the caller, but a
        transport failure refreshes metadata so the next round finds the new controller."""
        try:
            return await self.exchange(self.controller(), request_type, build, deadline)
        except KafkaError as exc:
            if exc.retriable:
                self.client.request_metadata_refresh()
            raise

    def controller_moved(self, error: BaseException) -> None:
        """Refresh metadata after NOT_CONTROLLER."""
        if isinstance(error, NotControllerError):
            self.client.request_metadata_refresh()

    async def leaders(self, partitions: Iterable[tuple[str, int]], *, refresh: bool
                      ) -> tuple[dict[int, list[tuple[str, int]]], dict[tuple[str, int], Any]]:
        """Group partitions by leader. Returns ``(node -> partitions, partition -> error)``
        for partitions without a usable leader (unknown topic or partition: final;
        no leader now: retriable)."""
        parts = list(partitions)
        topics = sorted({t for t, _ in parts})
        cluster = self.client.cluster
        if refresh or any(t not in cluster.topics for t in topics):
            await self.client.refresh_metadata(topics)
        groups: dict[int, list[tuple[str, int]]] = {}
        errors: dict[tuple[str, int], Any] = {}
        for tp in parts:
            topic, partition = tp
            info = cluster.topics.get(topic)
            if info is None:
                code = cluster.topic_errors.get(topic, 0)
                err = (for_code(code)(f"topic {topic!r}") if code
                       else UnknownTopicOrPartitionError(f"topic {topic!r}"))
                errors[tp] = err if err.retriable and code not in (0, 3) else Fatal(err)
                continue
            pinfo = info.partitions.get(partition)
            if pinfo is None:
                errors[tp] = Fatal(UnknownTopicOrPartitionError(
                    f"{topic!r} has no partition {partition}"))
            elif pinfo.leader < 0:
                errors[tp] = LeaderNotAvailableError(f"{topic}-{partition}")
            else:
                groups.setdefault(pinfo.leader, []).append(tp)
        return groups, errors

    async def coordinators(self, keys: Iterable[str], key_type: str
                           ) -> tuple[dict[int, list[str]], dict[str, Any]]:
        """Group keys by coordinator (FindCoordinator, cached by the client); a lookup that
        fails becomes that key's outcome."""
        keys = list(keys)

        async def find(key: str) -> int | BaseException:
            try:
                return await self.client.coordinator(key, key_type)
            except KafkaError as exc:
                return exc

        found = await asyncio.gather(*(find(k) for k in keys))
        groups: dict[int, list[str]] = {}
        errors: dict[str, Any] = {}
        for key, node in zip(keys, found, strict=True):
            if isinstance(node, BaseException):
                errors[key] = node
            else:
                groups.setdefault(node, []).append(key)
        return groups, errors

    def coordinator_error(self, key: str, key_type: str, error: BaseException) -> BaseException:
        """Forget a cached coordinator after an error that says it moved or is down."""
        if isinstance(error, (*_COORDINATOR_MOVED, CoordinatorLoadInProgressError)) or (
                isinstance(error, KafkaError) and error.invalid_metadata):
            self.client.forget_coordinator(key, key_type)
        return error

    def brokers(self) -> list[int]:
        """Every known broker id."""
        return sorted(self.client.cluster.brokers)


def _why(error: KafkaError, retried: KafkaError | None, deadline: float) -> KafkaError:
    """The outcome of a retry that failed with ``error``: the error it ``retried`` when the
    call's deadline cut it short (a timeout at or past the deadline) -- that one says why
    the call failed, the timeout only when (a Java TimeoutException carries it as its
    cause); else ``error``."""
    if retried is not None and isinstance(error, KafkaTimeoutError) and \
            time.monotonic() >= deadline:
        return retried
    return error


def _timeout(what: str) -> KafkaError:
    return KafkaTimeoutError(f"{what}: the call's timeout expired")
