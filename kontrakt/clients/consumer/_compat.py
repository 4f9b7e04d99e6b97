"""The calls users of confluent-kafka, aiokafka and kafka-python make, with their meaning,
on both consumers: incremental assignment, watermarks, group metadata for KIP-447,
``stop`` / ``seek_to_committed``, ``metrics``, ``topics``, ``last_poll_timestamp``,
``memberid``, ``cluster_id``, ``bootstrap_connected``, ``set_sasl_credentials``; and the
argument forms they pass
(lists of partitions, ``^regex`` topics, partitions carrying offsets, topics as positional
arguments).

The methods live in two mixins, :class:`AsyncConsumerCompat` and :class:`ConsumerCompat`,
so that the consumers' own modules stay about consuming; the helpers are shared by both.
aiokafka's ``getone`` hands out records, typed by the consumer's type parameters, so it is
the consumers' own.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from kontrakt._types import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    OFFSET_STORED,
    TopicPartition,
)
from kontrakt.clients._peer_calls import bootstrap_connected, cluster_id, set_sasl_credentials
from kontrakt.clients.consumer._metrics import consumer_metrics
from kontrakt.clients.consumer._stats import consumer_statistics
from kontrakt.errors import (
    ConfigError,
    IllegalStateError,
    InvalidArgumentError,
    KafkaTimeoutError,
)

if TYPE_CHECKING:
    from kontrakt.clients.consumer._consumer import AsyncConsumer
    from kontrakt.clients.consumer._sync import Consumer

__all__ = [
    "GETONE_PARTITIONS",
    "AsyncConsumerCompat",
    "ConsumerCompat",
    "ConsumerGroupMetadata",
    "batch_timeout",
    "flat_partitions",
    "split_config",
    "subscription_of",
]


#: Why ``getone(*partitions)`` (aiokafka's per-partition form) is refused, and what to do.
GETONE_PARTITIONS = ("getone(*partitions) is not supported: pause() the other partitions, or "
                     "use getmany(timeout) and take the partition's records")


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadata:
    """A consumer's group membership, for
    :meth:`~kontrakt.clients.producer.Producer.send_offsets_to_transaction`: with it the
    group coordinator fences a zombie member's offsets (KIP-447).

    Attributes:
        group_id: the group.
        generation_id: the generation (classic protocol) or member epoch (KIP-848); -1
            when not a member.
        member_id: the member id ("" when not a member).
        group_instance_id: the static member id (``group.instance.id``) or None.
    """

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


def split_config(config: Mapping[str, Any] | str | None, topics: tuple[str, ...]
                 ) -> tuple[Mapping[str, Any] | None, tuple[str, ...]]:
    """kafka-python's ``KafkaConsumer("t1", "t2", bootstrap_servers=...)``: topics given
    positionally, the first perhaps in the config's place.

    Raises:
        TypeError: a positional argument after the first that is not a topic name.
    """
    if isinstance(config, str):
        return None, split_config(None, (config, *topics))[1]
    for t in topics:
        if not isinstance(t, str):
            raise TypeError(f"positional arguments after the config are topic names, got {t!r}")
    return config, topics


def flat_partitions(args: tuple[Any, ...]) -> list[TopicPartition]:
    """``pause(tp1, tp2)`` and confluent-kafka's ``pause([tp1, tp2])`` alike (partitions
    without their offsets).

    Raises:
        TypeError: anything but partitions or lists of them.
    """
    out: list[TopicPartition] = []
    for a in args:
        items = (a,) if isinstance(a, TopicPartition) else a
        if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
            raise TypeError(f"expected TopicPartition or a list of them, got {a!r}")
        for tp in items:
            if not isinstance(tp, TopicPartition):
                raise TypeError(f"expected TopicPartition, got {tp!r}")
            out.append(TopicPartition(tp.topic, tp.partition))
    return out


def subscription_of(topics: Iterable[str] | str | None, pattern: str | re.Pattern[str] | None
                    ) -> tuple[list[str] | None, str | re.Pattern[str] | None]:
    """confluent-kafka's ``subscribe(["^orders-.*", "audit"])``: a name starting with ``^``
    is a regular expression (matched from the start of a topic name, as librdkafka does).
    Names and expressions together become one pattern.

    Returns:
        ``(topics, pattern)`` for :meth:`SubscriptionState.subscribe`.

    Raises:
        InvalidArgumentError: an expression that does not compile.
    """
    if topics is None:
        return None, pattern
    names = [topics] if isinstance(topics, str) else list(topics)
    if not any(isinstance(t, str) and t.startswith("^") for t in names) or pattern is not None:
        return names, pattern
    parts = []
    for t in names:
        if t.startswith("^"):
            try:
                re.compile(t)
            except re.error as exc:
                raise InvalidArgumentError(f"subscribe(): {t!r} is not a valid regular "
                                           f"expression: {exc}") from None
            # The pattern is matched fully; librdkafka's expression only from the start.
            parts.append(f"(?:{t})(?s:.*)")
        else:
            parts.append(re.escape(t))
    return None, "|".join(parts)


def batch_timeout(timeout: Any, timeout_ms: int | None) -> float:
    """getmany()'s wait in seconds, from ``timeout`` (seconds) or aiokafka's ``timeout_ms``.

    Raises:
        InvalidArgumentError: a partition where the timeout goes (aiokafka's
            ``getmany(*partitions)``).
    """
    if isinstance(timeout, TopicPartition):
        raise InvalidArgumentError(
            "getmany(*partitions) is not supported: its first argument is the timeout in "
            "seconds; to read some partitions only, pause() the others")
    return timeout_ms / 1000 if timeout_ms is not None else timeout


def _assigned_offsets(partitions: list[TopicPartition]) -> list[tuple[TopicPartition, int]]:
    """The (partition, offset) pairs of partitions given with an offset to start from."""
    return [(TopicPartition(tp.topic, tp.partition), tp.offset) for tp in partitions
            if tp.offset not in (OFFSET_INVALID, OFFSET_STORED)]


def _async_self(obj: object) -> AsyncConsumer:
    return cast("AsyncConsumer", obj)


def _sync_self(obj: object) -> Consumer:
    return cast("Consumer", obj)


def _partition_list(partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
    parts = list(partitions)
    for tp in parts:
        if not isinstance(tp, TopicPartition):
            raise TypeError(f"expected TopicPartition, got {tp!r}")
    return parts


class AsyncConsumerCompat:
    """Other clients' calls on :class:`AsyncConsumer`."""

    def _start_at(self, partitions: list[TopicPartition]) -> None:
        c = _async_self(self)
        for tp, offset in _assigned_offsets(partitions):
            if offset == OFFSET_BEGINNING:
                c.seek_to_beginning(tp)
            elif offset == OFFSET_END:
                c.seek_to_end(tp)
            elif offset >= 0:
                c.seek(tp, offset)
            else:
                raise InvalidArgumentError(f"{tp}: offset {offset} is neither >= 0 nor "
                                           f"OFFSET_BEGINNING/END/STORED/INVALID")

    def incremental_assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Add partitions to the manual assignment (confluent-kafka's), each starting at its
        ``offset`` when given, else at the committed offset or ``auto.offset.reset``.

        Raises:
            IllegalStateError: subscribed (the group assigns partitions: no need to call
                this from a rebalance listener).
        """
        c = _async_self(self)
        parts = _partition_list(partitions)
        if c._subs.subscribed:
            raise IllegalStateError(
                "incremental_assign() while subscribed: the group's assignment is applied "
                "by the consumer itself (listeners need not assign)")
        c.assign([*c._subs.assignment, *parts])

    def incremental_unassign(self, partitions: Iterable[TopicPartition]
                             ) -> None:
        """Remove partitions from the manual assignment (confluent-kafka's).

        Raises:
            IllegalStateError: subscribed (see :meth:`incremental_assign`).
        """
        c = _async_self(self)
        gone = {TopicPartition(tp.topic, tp.partition) for tp in _partition_list(partitions)}
        if c._subs.subscribed:
            raise IllegalStateError(
                "incremental_unassign() while subscribed: the group's assignment is applied "
                "by the consumer itself; unsubscribe() leaves the group")
        c.assign([tp for tp in c._subs.assignment if tp not in gone])

    def unassign(self) -> None:
        """Drop the manual assignment (confluent-kafka's); fetching stops.

        Raises:
            IllegalStateError: subscribed: use unsubscribe() to leave the group.
        """
        c = _async_self(self)
        if c._subs.subscribed:
            raise IllegalStateError("unassign() while subscribed: use unsubscribe()")
        c.assign([])

    async def get_watermark_offsets(self, partition: TopicPartition,
                                    timeout: float | None = None, cached: bool = False
                                    ) -> tuple[int, int]:
        """The partition's low and high watermarks (confluent-kafka's): the earliest offset
        and the offset after the last record (the high watermark, whatever
        ``isolation.level``).

        Args:
            cached: answer from the last fetch of an assigned partition, without a request:
                the low watermark is :data:`OFFSET_INVALID` (not kept), so is the high one
                before a fetch.

        Raises:
            KafkaTimeoutError: not answered within ``timeout`` (default request timeout).
            IllegalStateError: ``cached`` for a partition not assigned.
        """
        c = _async_self(self)
        tp = TopicPartition(partition.topic, partition.partition)
        if cached:
            return c._cached_watermarks(tp)
        from kontrakt.clients.consumer._offsets import EARLIEST, LATEST, list_offsets

        await c.start()
        low = await list_offsets(c._client, {tp: EARLIEST}, timeout=timeout)
        high = await list_offsets(c._client, {tp: LATEST}, timeout=timeout)
        lo, hi = low.get(tp), high.get(tp)
        return (OFFSET_INVALID if lo is None else lo.offset,
                OFFSET_INVALID if hi is None else hi.offset)

    def _cached_watermarks(self, tp: TopicPartition) -> tuple[int, int]:
        c = _async_self(self)
        hw = c._subs.state(TopicPartition(tp.topic, tp.partition)).highwater
        return OFFSET_INVALID, (OFFSET_INVALID if hw is None else hw)

    def consumer_group_metadata(self) -> ConsumerGroupMetadata:
        """This consumer's group membership now, for ``send_offsets_to_transaction``
        (KIP-447 fencing of zombie members).

        Raises:
            ConfigError: no ``group.id``.
        """
        c = _async_self(self)
        coord = c._coordinator
        if coord is None or not c._group_id:
            raise ConfigError("consumer_group_metadata() needs group.id")
        # KIP-848's member epoch stands for the classic protocol's generation.
        generation: int = getattr(coord, "generation", getattr(coord, "member_epoch", -1))
        return ConsumerGroupMetadata(c._group_id, generation, coord.member_id or "",
                                     getattr(coord, "instance_id", None))

    async def stop(self) -> None:
        """aiokafka's name for :meth:`close` (commits when auto commit is on, leaves the
        group)."""
        c = _async_self(self)
        await c.close()

    async def seek_to_committed(self, *partitions: TopicPartition
                                ) -> dict[TopicPartition, int | None]:
        """Move these (default: all assigned) partitions to their committed offsets
        (aiokafka's); one without a commit starts over from ``auto.offset.reset``.

        Returns:
            Partition -> the committed offset, or None where nothing is committed.

        Raises:
            ConfigError: no ``group.id``.
            KafkaTimeoutError: the committed offsets were not fetched in time.
        """
        c = _async_self(self)
        parts = flat_partitions(partitions) or list(c._subs.assignment)
        found = await c.committed(parts)
        out: dict[TopicPartition, int | None] = {}
        for tp in parts:
            om = found.get(tp)
            if om is not None:
                c.seek(tp, om)
                out[tp] = om.offset
            else:
                c._reset([tp], c._subs.default_reset)
                out[tp] = None
        return out

    def metrics(self) -> dict[str, Any]:
        """Counters, rates and lag, in the Java consumer's metric names (kafka-python's and
        aiokafka's ``metrics()``). Totals count since the consumer was created; ``*-rate``
        values are per second over the last minute; latencies are in milliseconds.

        Returns:
            ``records-consumed-total`` / ``-rate`` (records handed to the application),
            ``bytes-consumed-total`` / ``-rate`` (fetched bytes of the batches they came
            in), ``fetch-total`` / ``-rate``, ``fetch-latency-avg`` / ``-max`` (request to
            response, the broker's wait included), ``fetch-size-avg`` / ``-max`` (record
            bytes per response), ``records-lag-max`` (None until a lag is known),
            ``assigned-partitions``, ``rebalance-total`` (assignments received),
            ``commit-total`` / ``-rate``, ``commit-latency-avg`` / ``-max`` (successful
            commits, retries included), and under ``partitions``
            (``"topic-partition"`` -> values) each partition's ``records-lag``,
            ``highwater`` and ``position``.
        """
        return consumer_metrics(_async_self(self))

    async def topics(self) -> set[str]:
        """Names of the topics this consumer may read (kafka-python's and aiokafka's
        ``topics()``): fresh metadata of every topic the brokers let it describe, asked each
        call. Internal topics (``__consumer_offsets``, ...) are left out unless
        ``exclude.internal.topics`` is False. :meth:`list_topics` gives partitions too.

        Raises:
            NoBrokersAvailableError / KafkaTimeoutError: no broker answered in time.
        """
        c = _async_self(self)
        found = await c._all_topics()
        skip_internal = bool(c.config["exclude.internal.topics"])
        return {name for name, t in found.items() if not (skip_internal and t.is_internal)}

    def last_poll_timestamp(self, partition: TopicPartition) -> int | None:
        """When a fetch response last told this consumer the partition's high watermark
        and last stable offset (aiokafka's): milliseconds since the epoch, None before the
        first. A response need not have carried records; with a fetch session (KIP-227)
        a partition the broker leaves out of an answer, because nothing changed, counts as
        told too.

        Raises:
            IllegalStateError: ``partition`` is not assigned to this consumer.
        """
        return _async_self(self)._subs.state(partition).fetched_at_ms

    def memberid(self) -> str | None:
        """This consumer's member id in its group (confluent-kafka's), None while it is
        not a member (no ``group.id``, not subscribed, not joined yet, or left).

        Raises:
            IllegalStateError: the consumer is closed.
        """
        c = _async_self(self)
        if c._closed:
            raise IllegalStateError("consumer is closed")
        coord = c._coordinator
        if coord is None or not coord._is_member():
            return None
        return coord.member_id or None

    def bootstrap_connected(self) -> bool:
        """True when the consumer has loaded cluster metadata and has a broker connection
        open now (kafka-python's); False before it has connected, and after close."""
        return bootstrap_connected(_async_self(self)._client)

    async def cluster_id(self, timeout: float | None = None) -> str | None:
        """The cluster's id from metadata (confluent-kafka's), starting the consumer first
        when it has no metadata yet.

        Args:
            timeout: seconds to wait for the start (None or negative, confluent-kafka's
                -1: as long as it takes, which ``request.timeout.ms`` bounds); the start
                goes on after a timeout.

        Returns:
            The id; None when the brokers report none (Metadata before v2, KIP-78).

        Raises:
            KafkaTimeoutError: no metadata within ``timeout``.
            NoBrokersAvailableError: the start found no broker.
            IllegalStateError: the consumer is closed.
        """
        c = _async_self(self)
        if c._closed:
            raise IllegalStateError("consumer is closed")
        return await cluster_id(c._client, timeout, c.start)

    def set_sasl_credentials(self, username: str, password: str) -> None:
        """Log in with this user and password from now on (confluent-kafka's): new
        connections and re-authentications (KIP-368) of open ones use them; open
        connections stay (a broker refuses a re-authentication as another user, ending
        that connection). Safe from any thread.

        Raises:
            TypeError: not two ``str``.
            ConfigError: the consumer does not use SASL PLAIN or SCRAM.
            IllegalStateError: closed.
        """
        set_sasl_credentials(_async_self(self)._client, username, password)

    def _statistics(self) -> dict[str, Any]:
        """stats_cb's consumer fields, in librdkafka's names."""
        return consumer_statistics(_async_self(self))


class ConsumerCompat:
    """Other clients' calls on the blocking :class:`Consumer` (see
    :class:`AsyncConsumerCompat` for each)."""

    def incremental_assign(self, partitions: Iterable[TopicPartition]) -> None:
        """See :meth:`AsyncConsumer.incremental_assign`."""
        c = _sync_self(self)
        parts = list(partitions)
        c._on_loop(lambda: c._async.incremental_assign(parts))

    def incremental_unassign(self, partitions: Iterable[TopicPartition]) -> None:
        """See :meth:`AsyncConsumer.incremental_unassign`."""
        c = _sync_self(self)
        parts = list(partitions)
        c._on_loop(lambda: c._async.incremental_unassign(parts))

    def unassign(self) -> None:
        """See :meth:`AsyncConsumer.unassign`."""
        c = _sync_self(self)
        c._on_loop(c._async.unassign)

    def get_watermark_offsets(self, partition: TopicPartition,
                              timeout: float | None = None, cached: bool = False
                              ) -> tuple[int, int]:
        """See :meth:`AsyncConsumer.get_watermark_offsets`."""
        c = _sync_self(self)
        if cached:
            return c._on_loop(lambda: c._async._cached_watermarks(partition))
        c._ensure_started()
        return c._call(c._async.get_watermark_offsets(partition, timeout))

    def consumer_group_metadata(self) -> ConsumerGroupMetadata:
        """See :meth:`AsyncConsumer.consumer_group_metadata`."""
        c = _sync_self(self)
        return c._on_loop(c._async.consumer_group_metadata)

    def stop(self) -> None:
        """aiokafka's name for :meth:`close`."""
        c = _sync_self(self)
        c.close()

    def seek_to_committed(self, *partitions: TopicPartition
                          ) -> dict[TopicPartition, int | None]:
        """See :meth:`AsyncConsumer.seek_to_committed`."""
        c = _sync_self(self)
        c._ensure_started()
        return c._call(c._async.seek_to_committed(*partitions))

    def metrics(self) -> dict[str, Any]:
        """See :meth:`AsyncConsumer.metrics`."""
        c = _sync_self(self)
        return c._on_loop(c._async.metrics)

    def topics(self) -> set[str]:
        """See :meth:`AsyncConsumer.topics`."""
        c = _sync_self(self)
        return c._call(c._async.topics())

    def last_poll_timestamp(self, partition: TopicPartition) -> int | None:
        """See :meth:`AsyncConsumer.last_poll_timestamp`."""
        c = _sync_self(self)
        return c._on_loop(lambda: c._async.last_poll_timestamp(partition))

    def memberid(self) -> str | None:
        """See :meth:`AsyncConsumer.memberid`."""
        c = _sync_self(self)
        return c._on_loop(c._async.memberid)

    def bootstrap_connected(self) -> bool:
        """See :meth:`AsyncConsumer.bootstrap_connected`."""
        c = _sync_self(self)
        if c._closed:
            return False
        # On the loop: the connections change there.
        return c._on_loop(c._async.bootstrap_connected)

    def cluster_id(self, timeout: float | None = None) -> str | None:
        """See :meth:`AsyncConsumer.cluster_id`."""
        c = _sync_self(self)
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        if not c._ensure_started(deadline):
            raise KafkaTimeoutError(f"cluster_id(): no cluster metadata within {timeout}s")
        return c._call(c._async.cluster_id(timeout))

    def set_sasl_credentials(self, username: str, password: str) -> None:
        """See :meth:`AsyncConsumer.set_sasl_credentials`; safe from any thread."""
        c = _sync_self(self)
        set_sasl_credentials(c._async._client, username, password)
