"""confluent-kafka's shapes over Kontrakt: replace ``from confluent_kafka import ...`` with
``from kontrakt.compat.confluent_kafka import ...``.

Kontrakt's own records and errors are read by attribute (``record.value``,
``error.retriable``); confluent-kafka's by method (``msg.value()``, ``err.retriable()``).
This module gives confluent-kafka's forms: :class:`Consumer` whose ``poll()`` / ``consume()``
return :class:`Message` objects and whose methods raise :class:`KafkaException` carrying a
:class:`KafkaError` value; :class:`Producer` whose delivery callbacks get ``(KafkaError or
None, Message)``; confluent-kafka's ``commit`` / ``store_offsets`` / ``seek`` /
``send_offsets_to_transaction`` signatures. Everything else is Kontrakt's
:class:`~kontrakt.clients.consumer.Consumer` / :class:`~kontrakt.clients.producer.Producer`.
The wrapping costs about a microsecond per record; code moved over to the native API does
not pay it.
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Callable, Iterable
from typing import Any, TypeVar, cast

from kontrakt import errors as _errors
from kontrakt._types import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    OFFSET_STORED,
    ConsumerRecord,
    RecordMetadata,
    TimestampType,
    TopicPartition,
)
from kontrakt.clients.consumer import Consumer as _Consumer
from kontrakt.clients.consumer._offsets import offsets_after
from kontrakt.clients.producer import Producer as _Producer
from kontrakt.protocol.errors import ERRORS_BY_CODE

__all__ = [
    "OFFSET_BEGINNING",
    "OFFSET_END",
    "OFFSET_INVALID",
    "OFFSET_STORED",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_NOT_AVAILABLE",
    "Consumer",
    "KafkaError",
    "KafkaException",
    "Message",
    "Producer",
    "TopicPartition",
]

_F = TypeVar("_F", bound=Callable[..., Any])

TIMESTAMP_NOT_AVAILABLE, TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME = 0, 1, 2
_TS_TYPES = {TimestampType.NO_TIMESTAMP: 0, TimestampType.CREATE_TIME: 1,
             TimestampType.LOG_APPEND_TIME: 2}


class KafkaError:
    """confluent-kafka's error value: ``code()``, ``name()``, ``str()``, ``retriable()``,
    ``fatal()``, ``txn_requires_abort()``; equal to its code. Broker codes are class
    attributes by Kafka's name (``KafkaError.UNKNOWN_TOPIC_OR_PARTITION``), with
    librdkafka's local codes (``_TIMED_OUT``, ``_TRANSPORT``, ...).

    Attributes:
        exception: the Kontrakt exception it stands for (None when built by hand).
    """

    _FATAL, _STATE, _INVALID_ARG, _TIMED_OUT = -150, -172, -186, -185
    _ALL_BROKERS_DOWN, _MSG_TIMED_OUT, _PARTITION_EOF = -187, -192, -191
    _TRANSPORT, _FAIL, _UNKNOWN_TOPIC, _UNKNOWN_PARTITION = -195, -196, -188, -190
    UNKNOWN_TOPIC_OR_PART = NOT_LEADER_FOR_PARTITION = 0  # set below from the broker table
    #: librdkafka's name for broker code 10 (MESSAGE_TOO_LARGE), also its local refusal
    MSG_SIZE_TOO_LARGE = 10
    NO_ERROR = 0

    def __init__(self, error: int, reason: str | None = None, fatal: bool = False,
                 retriable: bool = False, txn_requires_abort: bool = False) -> None:
        self._code = int(error)
        self._reason = reason
        self._fatal = fatal
        self._retriable = retriable
        self._abort = txn_requires_abort
        self.exception: BaseException | None = None

    @classmethod
    def of(cls, exc: BaseException) -> KafkaError:
        """The value for a Kontrakt exception (its broker code, else librdkafka's local
        code for the same condition)."""
        if isinstance(exc, _errors.BrokerResponseError):
            code = exc.code
        elif isinstance(exc, _errors.RecordTooLargeError):
            code = cls.MSG_SIZE_TOO_LARGE
        elif isinstance(exc, _errors.DeliveryTimeoutError):
            code = cls._MSG_TIMED_OUT
        elif isinstance(exc, _errors.KafkaTimeoutError):
            code = cls._TIMED_OUT
        elif isinstance(exc, _errors.NoBrokersAvailableError):
            code = cls._ALL_BROKERS_DOWN
        elif isinstance(exc, _errors.KafkaConnectionError):
            code = cls._TRANSPORT
        elif isinstance(exc, _errors.IllegalStateError):
            code = cls._STATE
        elif isinstance(exc, (_errors.ConfigError, _errors.InvalidArgumentError)):
            code = cls._INVALID_ARG
        else:
            code = cls._FAIL
        err = cls(code, str(exc), fatal=isinstance(exc, _errors.TransactionFatalError),
                  retriable=bool(getattr(exc, "retriable", False)),
                  txn_requires_abort=isinstance(exc, _errors.TransactionAbortableError))
        err.exception = exc
        return err

    def code(self) -> int:
        """The error code."""
        return self._code

    def name(self) -> str:
        """The code's name (``UNKNOWN_TOPIC_OR_PARTITION``, ``_TIMED_OUT``)."""
        return _NAMES.get(self._code, f"ERR_{self._code}")

    def str(self) -> str:
        """What happened."""
        return self._reason or self.name()

    def retriable(self) -> bool:
        """True when the same call may succeed later."""
        return self._retriable

    def fatal(self) -> bool:
        """True when the client cannot go on (a fenced transactional producer)."""
        return self._fatal

    def txn_requires_abort(self) -> bool:
        """True when the current transaction must be aborted."""
        return self._abort

    def __eq__(self, other: object) -> bool:
        if isinstance(other, KafkaError):
            return self._code == other._code
        if isinstance(other, int):
            return self._code == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._code)

    def __str__(self) -> builtins.str:
        return self.str()

    def __repr__(self) -> builtins.str:
        return f"KafkaError{{code={self.name()},val={self._code},str=\"{self.str()}\"}}"


_NAMES: dict[int, str] = {v: k for k, v in vars(KafkaError).items()
                          if k.startswith("_") and not k.startswith("__") and isinstance(v, int)}
for _code, _cls in ERRORS_BY_CODE.items():
    setattr(KafkaError, _cls.error_name, _code)
    _NAMES[_code] = _cls.error_name
KafkaError.UNKNOWN_TOPIC_OR_PART = 3
KafkaError.NOT_LEADER_FOR_PARTITION = 6


class KafkaException(Exception):
    """What this module's clients raise: ``args[0]`` is the :class:`KafkaError`; the
    Kontrakt exception is its ``__cause__``."""

    def __init__(self, error: KafkaError | int | str, *args: Any) -> None:
        if not isinstance(error, KafkaError):
            error = KafkaError(error if isinstance(error, int) else KafkaError._FAIL,
                               None if isinstance(error, int) else error)
        super().__init__(error, *args)


def _raising(fn: _F) -> _F:
    """Raise Kontrakt's Kafka errors as KafkaException(KafkaError)."""
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (_errors.KafkaError, _errors.IllegalStateError) as exc:
            raise KafkaException(KafkaError.of(exc)) from exc
    return cast(_F, call)


class Message:
    """confluent-kafka's message: a record read by method (``msg.value()``), or a produced
    record's delivery report."""

    __slots__ = (
        "_error",
        "_headers",
        "_key",
        "_leader_epoch",
        "_offset",
        "_partition",
        "_timestamp",
        "_topic",
        "_ts_type",
        "_value",
    )

    def __init__(self, topic: str, partition: int, offset: int, key: Any, value: Any,
                 timestamp: int = -1, timestamp_type: int = TIMESTAMP_NOT_AVAILABLE,
                 headers: list[tuple[str, bytes | None]] | None = None,
                 leader_epoch: int | None = None, error: KafkaError | None = None) -> None:
        self._topic, self._partition, self._offset = topic, partition, offset
        self._key, self._value, self._headers = key, value, headers
        self._timestamp, self._ts_type = timestamp, timestamp_type
        self._leader_epoch, self._error = leader_epoch, error

    @classmethod
    def of(cls, r: ConsumerRecord[Any, Any]) -> Message:
        """The message for a Kontrakt record."""
        return cls(r.topic, r.partition, r.offset, r.key, r.value, r.timestamp,
                   _TS_TYPES.get(r.timestamp_type, 0), r.headers or None,
                   r.leader_epoch if r.leader_epoch >= 0 else None)

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> Any:
        return self._key

    def value(self) -> Any:
        return self._value

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return self._headers

    def timestamp(self) -> tuple[int, int]:
        """``(timestamp type, milliseconds)``."""
        return self._ts_type, self._timestamp

    def leader_epoch(self) -> int | None:
        return self._leader_epoch

    def error(self) -> KafkaError | None:
        """None for a record (Kontrakt raises errors instead of returning them)."""
        return self._error

    def __len__(self) -> int:
        return 0 if self._value is None else len(self._value)

    def __repr__(self) -> str:
        return f"Message({self._topic}-{self._partition}@{self._offset})"

    def record(self) -> ConsumerRecord[Any, Any]:
        """The Kontrakt record (for Kontrakt calls such as ``store_offsets``)."""
        ts_type = {v: k for k, v in _TS_TYPES.items()}.get(self._ts_type,
                                                            TimestampType.NO_TIMESTAMP)
        return ConsumerRecord(self._topic, self._partition, self._offset, self._timestamp,
                              ts_type, self._key, self._value, self._headers or [],
                              -1 if self._leader_epoch is None else self._leader_epoch)


def _records(message: Message | ConsumerRecord[Any, Any]) -> ConsumerRecord[Any, Any]:
    return message.record() if isinstance(message, Message) else message


class _Callbacks:
    """confluent-kafka's ``on_assign`` / ``on_revoke`` / ``on_lost`` as a Kontrakt
    rebalance listener: each gets ``(consumer, [TopicPartition, ...])``."""

    def __init__(self, consumer: Consumer, on_assign: Callable[..., Any] | None,
                 on_revoke: Callable[..., Any] | None, on_lost: Callable[..., Any] | None
                 ) -> None:
        self._consumer = consumer
        self._assign, self._revoke, self._lost = on_assign, on_revoke, on_lost

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        if self._assign is not None:
            self._consumer._in_assign = True
            try:
                self._assign(self._consumer, sorted(partitions))
            finally:
                self._consumer._in_assign = False

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        if self._revoke is not None:
            self._revoke(self._consumer, sorted(partitions))

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
        # confluent-kafka calls on_revoke when no on_lost is given.
        cb = self._lost or self._revoke
        if cb is not None:
            cb(self._consumer, sorted(partitions))


class Consumer(_Consumer):
    """Kontrakt's blocking Consumer with confluent-kafka's records, errors and signatures.

    In ``on_assign``, ``consumer.assign(partitions)`` / ``incremental_assign(partitions)``
    (confluent-kafka's way to choose where the assigned partitions start) seek each
    partition given with an offset; the group has already assigned them.
    """

    _in_assign = False

    @_raising
    def subscribe(self, topics: Any = None,
                  on_assign: Callable[..., Any] | None = None,
                  on_revoke: Callable[..., Any] | None = None,
                  on_lost: Callable[..., Any] | None = None, *,
                  pattern: Any = None, listener: Any = None) -> None:
        """confluent-kafka's subscribe: ``on_assign(consumer, partitions)``, ``on_revoke``,
        ``on_lost``; names starting with ``^`` are regular expressions."""
        if on_assign is not None or on_revoke is not None or on_lost is not None:
            if listener is not None:
                raise _errors.InvalidArgumentError(
                    "subscribe() takes on_assign/on_revoke/on_lost or listener, not both")
            listener = _Callbacks(self, on_assign, on_revoke, on_lost)
        super().subscribe(topics, pattern=pattern, listener=listener)

    @_raising
    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Assign partitions; inside ``on_assign``, start them at their offsets instead."""
        if self._in_assign:
            for tp in partitions:
                if tp.offset not in (OFFSET_INVALID, OFFSET_STORED):
                    super().seek(tp)
            return
        super().assign(partitions)

    @_raising
    def incremental_assign(self, partitions: Iterable[TopicPartition]) -> None:
        """See :meth:`assign`."""
        if self._in_assign:
            self.assign(partitions)
            return
        super().incremental_assign(partitions)

    @_raising
    def poll(self, timeout: float | None = None) -> Message | None:  # type: ignore[override]
        """The next message, or None after ``timeout`` seconds (None or -1: no limit)."""
        rec = super().poll(None if timeout is None or timeout < 0 else timeout)
        return None if rec is None else Message.of(rec)

    @_raising
    def consume(self, num_messages: int = 1,  # type: ignore[override]
                timeout: float | None = -1) -> list[Message]:
        """Up to ``num_messages`` messages within ``timeout`` seconds (-1: no limit)."""
        recs = super().consume(num_messages, None if timeout is None or timeout < 0
                               else timeout)
        return [Message.of(r) for r in recs]

    @_raising
    def commit(self, message: Message | None = None,  # type: ignore[override]
               offsets: list[TopicPartition] | None = None, asynchronous: bool = True
               ) -> list[TopicPartition] | None:
        """Commit a message's offset + 1, given offsets, or the current positions;
        ``asynchronous=False`` waits and returns the committed partitions."""
        if message is not None and offsets is not None:
            raise _errors.InvalidArgumentError("commit() takes message or offsets, not both")
        wanted: Any = offsets_after(_records(message)) if message is not None else offsets
        if asynchronous:
            super().commit_async(wanted)
            return None
        super().commit(wanted)
        if wanted is None:
            return [TopicPartition(tp.topic, tp.partition) for tp in self.assignment()]
        if isinstance(wanted, dict):
            return [TopicPartition(tp.topic, tp.partition, om.offset)
                    for tp, om in wanted.items()]
        return list(wanted)

    @_raising
    def store_offsets(self, message: Message | None = None,  # type: ignore[override]
                      offsets: list[TopicPartition] | None = None) -> None:
        """Store a message's offset + 1, or given offsets, for the next auto commit."""
        if message is not None:
            super().store_offsets(_records(message))
        else:
            super().store_offsets(offsets=offsets)

    @_raising
    def seek(self, partition: TopicPartition,  # type: ignore[override]
             offset: int | None = None) -> None:
        """Read ``partition`` from its ``offset`` next."""
        super().seek(partition, offset)

    @_raising
    def committed(self, partitions: Iterable[TopicPartition],  # type: ignore[override]
                  timeout: float | None = None) -> list[TopicPartition]:
        """The committed offsets as partitions with ``offset`` (OFFSET_INVALID: none)."""
        found = super().committed(partitions, timeout)
        return [TopicPartition(tp.topic, tp.partition,
                               OFFSET_INVALID if om is None else om.offset)
                for tp, om in found.items()]


for _name in ("unsubscribe", "close", "position", "pause", "resume",
              "get_watermark_offsets", "offsets_for_times", "list_topics",
              "incremental_unassign", "unassign", "consumer_group_metadata"):
    setattr(Consumer, _name, _raising(getattr(_Consumer, _name)))


def _with_delivery(m: Any, cb: Callable[..., Any] | None) -> Any:
    """A copy of message ``m`` whose callback (its own, else ``cb``) reports as
    confluent-kafka's; ``m`` itself when it has none (or is not a dict: produce_batch
    refuses it)."""
    if not isinstance(m, dict):
        return m
    report: Callable[..., Any] | None = m.get("callback") or cb
    if report is None:
        return m
    return {**m, "callback": _delivery(report, m.get("key"), m.get("value"))}


def _delivery(cb: Callable[[KafkaError | None, Message], Any], key: Any, value: Any
              ) -> Callable[[BaseException | None, RecordMetadata], None]:
    def report(err: BaseException | None, md: RecordMetadata) -> None:
        ts_type = TIMESTAMP_CREATE_TIME if md.timestamp >= 0 else TIMESTAMP_NOT_AVAILABLE
        cb(None if err is None else KafkaError.of(err),
           Message(md.topic, md.partition, md.offset, key, value, md.timestamp, ts_type,
                   error=None if err is None else KafkaError.of(err)))
    return report


class Producer(_Producer):
    """Kontrakt's blocking Producer with confluent-kafka's delivery reports and errors."""

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        config = dict(config or {})
        default_cb = config.pop("on_delivery", None) or kwargs.pop("on_delivery", None)
        super().__init__(config, **kwargs)
        self._compat_cb: Callable[..., Any] | None = default_cb

    @_raising
    def produce(self, topic: str, value: Any = None, key: Any = None,  # type: ignore[override]
                partition: int = -1, on_delivery: Callable[..., Any] | None = None,
                timestamp: int = 0, headers: Any = None, *,
                callback: Callable[..., Any] | None = None) -> None:
        """confluent-kafka's produce; the callback gets ``(KafkaError or None, Message)``."""
        cb = on_delivery or callback or self._compat_cb
        super().produce(topic, value, key, partition,
                        None if cb is None else _delivery(cb, key, value), timestamp,
                        headers)

    @_raising
    def produce_batch(self, topic: str, messages: list[dict[str, Any]],
                      partition: int = -1,
                      on_delivery: Callable[..., Any] | None = None) -> int:
        """confluent-kafka's produce_batch: callbacks get ``(KafkaError or None, Message)``
        and a message that was not queued gets a KafkaError as its ``'_error'``. With a
        callback each message is produced the per-record way (its Message needs its key
        and value); without, the records are staged in bulk as by
        :meth:`kontrakt.Producer.produce_batch`. Malformed messages raise TypeError
        (:class:`~kontrakt.errors.InvalidMessageError`), as in confluent-kafka."""
        cb = on_delivery or self._compat_cb
        batch = messages
        if isinstance(messages, list) and (cb is not None or any(
                isinstance(m, dict) and "callback" in m for m in messages)):
            # Copies carrying the wrapped callbacks; '_error' goes back onto the originals.
            batch = [_with_delivery(m, cb) for m in messages]
        count = super().produce_batch(topic, batch, partition)
        for m, sent in zip(messages, batch, strict=True):
            err = sent.get("_error")
            if err is None:
                m.pop("_error", None)
            elif not isinstance(err, KafkaError):
                m["_error"] = KafkaError.of(err)
        return count

    @_raising
    def send_offsets_to_transaction(self, positions: Any,
                                    group_metadata: Any, timeout: float | None = None
                                    ) -> None:
        """Commit consumed ``positions`` (partitions with offsets) in the transaction."""
        offsets = positions if isinstance(positions, dict) else {
            TopicPartition(tp.topic, tp.partition): tp.offset for tp in positions}
        super().send_offsets_to_transaction(offsets, group_metadata, timeout)


for _name in ("flush", "poll", "init_transactions", "begin_transaction",
              "commit_transaction", "abort_transaction", "list_topics"):
    setattr(Producer, _name, _raising(getattr(_Producer, _name)))
