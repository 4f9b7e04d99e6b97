"""The producers' shared core: configuration, accumulator, partitioning and the record path.

:class:`AsyncProducer` is this core with its asyncio lifecycle (``_producer.py``); the sync
:class:`~kontrakt.Producer` (``_sync.py``) runs an AsyncProducer on a loop thread and reaches
its core only through :class:`CallerThreads` (``AsyncProducer.callers``): the record path
as its caller threads use it, beside the loop thread.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from time import time_ns as _time_ns
from typing import TYPE_CHECKING, Any

from kontrakt.clients._hooks import ClientHooks
from kontrakt.clients._settings import ClientSettings
from kontrakt.clients.client import AsyncKafkaClient
from kontrakt.clients.producer._accumulator import ABORTED, RecordAccumulator
from kontrakt.clients.producer._batch import DeliveryCallback, ProducerBatch
from kontrakt.clients.producer._config import parse_producer_config
from kontrakt.clients.producer._future import new_future
from kontrakt.clients.producer._handover import HandOver
from kontrakt.clients.producer._idempotence import IdempotenceState
from kontrakt.clients.producer._metrics import ProducerMetrics
from kontrakt.clients.producer._partitioner import (
    PARTITION_HASH_BY_LENGTH as _HASHERS,
)
from kontrakt.clients.producer._partitioner import (
    DefaultPartitioner,
    _hash,
    key_hash,
)
from kontrakt.clients.producer._records import RECORD_OVERHEAD, append_record
from kontrakt.clients.producer._sender import Sender
from kontrakt.clients.producer._stage import KeyedStage, Offer
from kontrakt.clients.producer._transactions import TransactionManager
from kontrakt.errors import (
    ConfigError,
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    RecordTooLargeError,
)
from kontrakt.protocol.records import BATCH_HEADER_SIZE, RecordBatchBuilder
from kontrakt.protocol.records._model import SMALL_LIMIT, VARINT_BYTES, encode_varint

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from kontrakt.clients.producer._producer import AsyncProducer

__all__ = ["NEED_METADATA", "CallerThreads", "HeadersLike"]

HeadersLike = Sequence[tuple[str, bytes | None]] | Mapping[str, bytes | None] | None

#: ``_append`` could not go on without metadata for the topic
NEED_METADATA: Any = object()
_SMALL = SMALL_LIMIT
_SMALL_VARINTS = VARINT_BYTES


class _TopicParts:
    __slots__ = ("all", "available", "count", "queues", "rr", "stage", "version")

    def __init__(self, all_: list[int], available: list[int], version: int,
                 queues: list[deque[ProducerBatch]], stage: KeyedStage) -> None:
        self.all = all_
        self.queues = queues
        self.stage = stage
        self.available = available
        self.count = len(all_)
        self.version = version
        self.rr = 0

    @classmethod
    def of(cls, acc: RecordAccumulator, topic: str, all_: list[int], available: list[int],
           version: int) -> _TopicParts:
        """The partitions of ``topic`` (ids 0..n-1) with their queues and stage in ``acc``."""
        queues = acc.queues_for(topic, len(all_))
        return cls(all_, available, version, queues, acc.stage_for(topic, queues))


def _bytes_or_none(data: Any, what: str) -> bytes | None:
    if data is None or type(data) is bytes:
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"record {what} must be bytes or None, not {type(data).__name__} "
                    "(serialize it first, or use a SerializingProducer)")


def _exact_size(key: bytes | None, value: bytes | None,
                headers: Sequence[tuple[str, bytes | None]] | None) -> int:
    """A one-record batch's exact uncompressed size."""
    b = RecordBatchBuilder(max_batch_size=1 << 62)
    b.append(0, key, value, headers)
    return b.size_in_bytes


class _ProducerCore:
    """What both producers share: config, accumulator, partitioning, the record path."""

    def __init__(self, config: Mapping[str, Any] | None, kwargs: dict[str, Any],
                 threaded: bool) -> None:
        self.config, self._settings = parse_producer_config(config, kwargs)
        s = self._settings
        on_delivery = self.config["on_delivery"]
        if on_delivery is not None and (not threaded or not callable(on_delivery)):
            raise ConfigError(
                "on_delivery must be callable" if threaded else
                "on_delivery is the blocking Producer's (for produce()); with AsyncProducer, "
                "await send()'s future or add a done callback to it")
        self._hooks = ClientHooks(self.config, "producer", self._statistics)
        self._client = AsyncKafkaClient(_settings=ClientSettings.of(self.config))
        self._acc = RecordAccumulator(
            # A batch must fit a produce request's limit too.
            batch_size=min(s.batch_size, s.message_max_bytes), linger=s.linger,
            buffer_memory=s.buffer_memory,
            compression=s.compression, compression_level=s.compression_level,
            delivery_timeout=s.delivery_timeout, threaded=threaded, wakeup=self._wakeup)
        self._metrics = ProducerMetrics()
        self._idem = IdempotenceState(
            s.transactional_id, transaction_timeout_ms=self.config["transaction.timeout.ms"]) \
            if s.idempotent else None
        self._txn: TransactionManager | None = None
        self._sender: Sender | None = None
        self._topics: dict[str, _TopicParts] = {}
        # The send fast paths' view of _topics: current entries only (emptied whenever the
        # metadata changes or _ok turns False, refilled by _append while _ok), so they need
        # no version check, and a sync caller none of _ok; only with the default
        # partitioner. Each topic's entry is its stage's offer (KeyedStage.offer), bound
        # once.
        self._fast_topics: dict[str, Offer] = {}
        part = s.partitioner
        self._default = DefaultPartitioner()
        self._sticky = part == "default"
        self._acc.sticky = self._sticky_partition
        self._round_robin = part == "round_robin"
        self._user_partitioner: Callable[..., int] | None = part if callable(part) else None
        self._simple_keys = not callable(part) and part != "round_robin"
        self._cluster = self._client.cluster
        self._cluster.on_update.append(self._fast_topics.clear)
        # Smallest estimated record size that needs the exact size check.
        self._size_limit = min(s.message_max_bytes - BATCH_HEADER_SIZE, s.buffer_memory)
        # Largest key + value length the send fast path (staging) takes: every varint of the
        # record is then in the table and no size check beyond the batch's is needed.
        self._fast_limit = min(_SMALL - 32, self._size_limit - RECORD_OVERHEAD - 8)
        self._acc.stage_limit = self._fast_limit + RECORD_OVERHEAD
        self._started = False
        self._closed = False
        self._ok = False
        #: a sync producer's caller-thread machinery (given by CallerThreads.bind)
        self._handover: HandOver | None = None

    def _stop_fast_paths(self) -> None:
        """Sends take the checked path (_append) until _ok is set again: the producer
        closes or failed, or a transaction ends."""
        self._ok = False
        self._fast_topics.clear()

    def _wakeup(self, urgent: bool, filled: bool = False) -> None:
        sender = self._sender
        if sender is not None:
            handover = self._handover
            if filled and handover is not None:
                # A sync producer's caller filled a batch: let the sender's pass run now.
                handover.hand_over()
            else:
                sender.wake(urgent)

    def _check(self, sending: bool = True) -> None:
        if self._closed:
            raise IllegalStateError("the producer is closed")
        if sending and self._txn is not None:
            self._txn.check_send()
        sender = self._sender
        if sender is None:
            raise IllegalStateError("the producer is not started (use start() or 'with')")
        if sender.error is not None:
            raise KafkaError(f"the producer failed and must be closed: {sender.error!r}")

    def _topic_parts(self, topic: str) -> _TopicParts | None:
        cluster = self._client.cluster
        info = self._topics.get(topic)
        if info is not None and info.version == cluster.version:
            return info
        parts = cluster.partitions_for(topic)
        if not parts:
            return None
        # Partition ids are 0..n-1; queues[p] is the accumulator's queue of partition p.
        info = _TopicParts.of(self._acc, topic, parts, cluster.available_partitions_for(topic),
                              cluster.version)
        old = self._topics.get(topic)
        if old is not None:
            info.rr = old.rr
        self._topics[topic] = info
        return info

    def _append(self, topic: str, value: Any, key: Any, partition: int | None,
                timestamp_ms: int | None, headers: HeadersLike,
                delivery: DeliveryCallback | None, urgent: bool = False) -> Any:
        """Put one record into the accumulator (the hot path: keep it lean).

        ``urgent``: the caller waits for the record next (send_and_wait): its batch goes out
        at once.

        Returns:
            A RecordFuture; None when the buffer is full; NEED_METADATA when the topic (or
            the partition) is not known yet.
        """
        if not self._ok:
            self._check()
        if key is None and partition is None and timestamp_ms is None and headers is None \
                and not urgent and type(value) is bytes and self._sticky:
            # Unkeyed (confluent's produce(topic, value), a SerializingProducer's records):
            # staged, into the sticky partition's batches when the stage settles. What the
            # stage does not take (keyed records staged before it, a long value, a full
            # buffer) takes the general path.
            info = self._topics.get(topic)
            if info is not None and topic in self._fast_topics:
                fut = info.stage.offer_keyless(value, delivery)
                if fut is not None:
                    return fut
        if key is not None and type(key) is not bytes:
            key = _bytes_or_none(key, "key")
        if value is not None and type(value) is not bytes:
            value = _bytes_or_none(value, "value")
        info = self._topics.get(topic)
        if info is None or info.version != self._cluster.version:
            if type(topic) is not str or not topic:
                raise TypeError(f"topic must be a non-empty str, not {topic!r}")
            info = self._topic_parts(topic)
            if info is None:
                return NEED_METADATA
        if topic not in self._fast_topics and self._simple_keys and self._ok:
            fast = self._fast_topics
            fast[topic] = info.stage.offer
            if info.version != self._cluster.version or not self._ok:
                # The metadata changed or the fast paths stopped meanwhile (a sync
                # producer's caller runs beside the loop thread, which empties the dict
                # after the version moves on or _ok turns False).
                fast.pop(topic, None)
        if partition is None and key is not None and value is not None and \
                timestamp_ms is None and headers is None and not urgent and self._simple_keys:
            # Keyed (e.g. a sync produce() with a delivery callback): staged like send()'s.
            fut = info.stage.offer(key, value, delivery)
            if fut is not None:
                return fut
        if info.stage.keys:
            # Records of the topic sent before this one go into their batches first.
            self._acc.settle(info.stage)
        abort = False
        if partition is None:
            if self._simple_keys and key is not None:
                n = len(key)
                partition = info.all[(_HASHERS[n](key) if n < 64 else _hash(key) & 0x7FFFFFFF)
                                     % info.count]
            else:
                partition, abort = self._choose(topic, key, info)
        elif type(partition) is not int or partition < 0:
            raise TypeError(f"partition must be a non-negative int, not {partition!r}")
        elif partition >= info.count:
            self._client.request_metadata_refresh()
            return NEED_METADATA
        if timestamp_ms is None:
            timestamp_ms = _time_ns() // 1_000_000
        if headers is None and delivery is None and not urgent:
            # Fast path: the record goes into the partition's open batch (what
            # RecordAccumulator.append does, without its headers, hooks and wake-ups).
            if key is None:
                kb = b"\x01"
                kk = b""
                klen = 0
                ksize = -1
            else:
                ksize = klen = len(key)
                kb = _SMALL_VARINTS[klen] if klen < _SMALL else encode_varint(klen)
                kk = key
            if value is None:
                vb = b"\x01"
                vv = b""
                vlen = 0
                vsize = -1
            else:
                vsize = vlen = len(value)
                vb = _SMALL_VARINTS[vlen] if vlen < _SMALL else encode_varint(vlen)
                vv = value
            # The record's bytes but its length and deltas; its headers count included.
            rest = 1 + len(kb) + klen + len(vb) + vlen
            dq = info.queues[partition]
            if dq and rest + RECORD_OVERHEAD < self._size_limit - 1:
                acc = self._acc
                with acc.lock:
                    if dq and acc.used + rest < acc.buffer_memory - 1:
                        batch = dq[-1]
                        if not batch.sealed:
                            count = batch.count
                            added = append_record(batch, timestamp_ms, kb, kk, vb, vv, b"\x00",
                                                  rest, acc.batch_size)
                            if added:
                                acc.used += added
                                return new_future(batch, count, timestamp_ms, ksize, vsize)
        size = RECORD_OVERHEAD + (len(key) if key is not None else 0) + (
            len(value) if value is not None else 0)
        if headers is not None:
            if isinstance(headers, Mapping):
                headers = list(headers.items())
            for name, hv in headers:
                if type(name) is not str:
                    raise TypeError(f"header name must be str, not {type(name).__name__}")
                size += 10 + len(name) * 4 + (len(hv) if hv is not None else 0)
        if size > self._size_limit:
            self._check_size(topic, partition, key, value, headers)
        res = self._acc.append(topic, partition, timestamp_ms, key, value, headers, size, abort,
                               delivery, urgent)
        if res is ABORTED:
            # KIP-480: the sticky partition's batch is full; move on, then append there.
            partition = self._default.new_sticky(topic, partition, info.all, info.available)
            res = self._acc.append(topic, partition, timestamp_ms, key, value, headers, size,
                                   False, delivery, urgent)
        return res

    def _sticky_partition(self, topic: str, previous: int, count: int) -> int:
        """RecordAccumulator.sticky: ``topic``'s sticky partition (``previous`` -1), or the
        next one when a batch would have to open in ``previous``; below ``count``, the
        partition count the settling stage places records by (called under the
        accumulator's lock while a stage of the topic settles)."""
        if previous < 0:
            part = self._default.current.get(topic)
            if part is not None and part < count:
                return part
        info = self._topics[topic]
        if info.count != count:
            # The stage places what it holds by the partition count they were sent under
            # (it settles before it takes another; a topic made again may have fewer).
            return self._default.new_sticky(topic, previous, range(count),
                                            [p for p in info.available if p < count])
        return self._default.new_sticky(topic, previous, info.all, info.available)

    def _choose(self, topic: str, key: bytes | None, info: _TopicParts) -> tuple[int, bool]:
        """The partition for a record without an explicit one: (partition, sticky)."""
        if self._user_partitioner is not None:
            partition = self._user_partitioner(key, info.all, info.available)
            if partition not in info.all:
                raise KafkaError(f"the partitioner returned partition {partition!r}, not "
                                 f"one of {topic!r}'s partitions {info.all}")
            return partition, False
        if self._round_robin:
            choices = info.available or info.all
            info.rr += 1
            return choices[(info.rr - 1) % len(choices)], False
        if key is not None:
            return info.all[(key_hash(key) & 0x7FFFFFFF) % info.count], False
        if self._sticky:
            return self._default.sticky_partition(topic, info.all, info.available), True
        return self._default(None, info.all, info.available), False

    def _check_size(self, topic: str, partition: int, key: bytes | None, value: bytes | None,
                    headers: Sequence[tuple[str, bytes | None]] | None) -> None:
        exact = _exact_size(key, value, headers)
        limit = self._settings.message_max_bytes
        if exact > limit:
            raise RecordTooLargeError(
                f"a record for {topic}-{partition} is {exact} bytes as a batch, more than "
                f"message.max.bytes ({limit}); key {len(key or b'')} bytes, value "
                f"{len(value or b'')} bytes")
        if exact > self._settings.buffer_memory:
            raise RecordTooLargeError(
                f"a record for {topic}-{partition} is {exact} bytes, more than buffer.memory "
                f"({self._settings.buffer_memory})")

    def _check_batch(self, topic: str, partition: int, builder: RecordBatchBuilder) -> None:
        size = builder.size_in_bytes
        if size > self._settings.message_max_bytes:
            raise RecordTooLargeError(
                f"a batch for {topic}-{partition} is {size} bytes, more than "
                f"message.max.bytes ({self._settings.message_max_bytes})")
        if builder.record_count == 0:
            raise ValueError("the batch is empty")

    def _statistics(self) -> dict[str, Any]:
        """stats_cb's producer fields, in librdkafka's names."""
        m = self.metrics()
        return {"msg_cnt": int(m["queued-batches"]), "msg_size": int(m["buffer-used-bytes"]),
                "txmsgs": int(m["record-send-total"]), "txmsg_bytes": int(m["byte-total"]),
                "tx": int(m["request-total"]), "rx": int(m["response-total"]),
                "txerrs": int(m["error-total"]), "txretries": int(m["retry-total"])}

    def metrics(self) -> dict[str, float]:
        """Counts and rates: records, batches, bytes, requests, retries, errors, request
        latency, buffer use. Totals count since the producer was created; ``*-rate`` values
        are per second over the last minute (``RATE_WINDOW``), like the Java client's sampled
        rates."""
        acc = self._acc
        with acc.lock:
            queued = sum(len(dq) for dq in acc.queues.values())
            used = acc.used
        return self._metrics.snapshot(used, queued)



class CallerThreads:
    """The record path of a sync Producer's caller threads: its one way into its core.

    The sync Producer's callers run beside the core's loop thread: they append under the
    accumulator's lock, block on buffer memory by its condition, and run everything else
    (metadata, start, flush) on the loop thread. The Producer binds its threaded machinery
    (:class:`~kontrakt.clients.producer._handover.HandOver`) and its delivery queue here,
    and reads nothing else of the core.
    """

    __slots__ = ("_core", "append", "fast_topics")

    def __init__(self, core: AsyncProducer) -> None:
        self._core = core
        #: ``append(topic, value, key, partition, timestamp_ms, headers, delivery,
        #: urgent=False)``: append a record (the core's own general path, called directly:
        #: produce() runs it per record). Returns a RecordFuture, None when the buffer is
        #: full (:meth:`wait_memory`), or NEED_METADATA (:meth:`wait_metadata`); raises
        #: IllegalStateError when not started (:attr:`started`) or closed, KafkaError when
        #: the producer failed.
        self.append: Callable[..., Any] = core._append
        #: the topics whose keyed records may be staged at once, while the core is ok
        #: (emptied otherwise): topic -> its stage's bound ``offer(key, value, delivery)``,
        #: which stages a record (see KeyedStage.offer)
        self.fast_topics = core._fast_topics

    def bind(self, handover: HandOver, deliver: Callable[[ProducerBatch], None]) -> None:
        """Use ``handover`` to wake the sender and hand passes over (attached to the sender
        when it starts), and ``deliver`` for batches whose produce() callbacks are due
        (called on the loop thread)."""
        core = self._core
        core._handover = handover
        core._acc.deliver = deliver

    @property
    def started(self) -> bool:
        """Whether the core's sender runs (its start finished)."""
        return self._core._sender is not None

    def check(self) -> None:
        """Raise what keeps records from being sent (see _ProducerCore._check)."""
        self._core._check()

    @property
    def max_block(self) -> float:
        """``max.block.ms``, in seconds."""
        return self._core._settings.max_block

    def wait_metadata(self, topic: str, partition: int | None, remaining: float
                      ) -> Coroutine[Any, Any, None]:
        """A coroutine (for the loop thread) that waits for ``topic``'s metadata.

        Raises:
            KafkaTimeoutError: not known within ``remaining`` seconds.
        """
        return self._core._wait_metadata(topic, partition, remaining)

    def wait_memory(self, deadline: float) -> None:
        """Block the calling thread until records free buffer memory.

        Raises:
            KafkaTimeoutError: the buffer stayed full until ``deadline`` (monotonic).
        """
        acc = self._core._acc
        self._core._wakeup(True)
        with acc.memory_freed:
            remaining = deadline - time.monotonic()
            # Memory freed between the refused append and now notified no one: append
            # again rather than wait for a release that may never come (none will when
            # nothing is buffered any more).
            freed = acc.releases != acc.refused_at or not acc.used
            if not freed and remaining > 0:
                acc.memory_waiters += 1
                try:
                    freed = acc.memory_freed.wait(remaining)
                finally:
                    acc.memory_waiters -= 1
            if not freed:
                raise KafkaTimeoutError(
                    f"the producer's buffer (buffer.memory={acc.buffer_memory} bytes) stayed "
                    "full for max.block.ms")

    def pending(self) -> int:
        """Records buffered (staged too) or in flight."""
        acc = self._core._acc
        with acc.lock:
            return sum(b.record_count for b in acc.incomplete) + \
                sum(len(stage.keys) for stage in acc.stages.values())

    def transaction(self) -> TransactionManager:
        """The transaction manager (see AsyncProducer._transaction).

        Raises:
            IllegalStateError: closed, or no ``transactional.id``.
        """
        return self._core._transaction()
