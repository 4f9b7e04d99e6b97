"""Producers and consumers that (de)serialize keys and values: confluent-kafka's
``SerializingProducer`` / ``DeserializingConsumer`` shape over Kontrakt's clients.

Serializers are called as ``serializer(obj, ctx) -> bytes | None`` and deserializers as
``deserializer(data, ctx) -> obj`` (see :mod:`kontrakt.serde`); in the ``Async`` classes they
may also return awaitables (``AsyncAvroSerializer`` and friends). Give them in the config as
``"key.serializer"`` / ``"value.serializer"`` (``"key.deserializer"`` / ``"value.deserializer"``)
or as keywords; without one, keys or values must already be bytes.

Failures are typed and lose nothing:

- a key or value that cannot be serialized raises :class:`~kontrakt.errors.KeySerializationError`
  / :class:`~kontrakt.errors.ValueSerializationError` before anything is queued;
- a record that cannot be deserialized raises :class:`~kontrakt.errors.KeyDeserializationError`
  / :class:`~kontrakt.errors.ValueDeserializationError` whose ``.record`` is the raw
  :class:`~kontrakt.ConsumerRecord`. The consumer's position is then just past that record
  (as with confluent-kafka), so the caller can dead-letter it and carry on; no other record
  is skipped. Batch reads (``consume`` / ``getmany``) return the records before a bad one and
  rewind to it, so the bad record's error comes at the next call with everything after it
  still to be read.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any, Generic, overload

from kontrakt._types import (
    ConsumerRecord,
    DefaultTypeVar,
    RecordMetadata,
    TopicPartition,
    header_list,
)
from kontrakt.clients.cluster import TopicInfo
from kontrakt.clients.consumer import AsyncConsumer, Consumer
from kontrakt.clients.consumer._compat import split_config
from kontrakt.clients.producer import AsyncProducer, Producer, RecordFuture
from kontrakt.errors import (
    ConfigError,
    KeyDeserializationError,
    KeySerializationError,
    SerializationError,
    ValueDeserializationError,
    ValueSerializationError,
)
from kontrakt.serde._context import MessageField, SerializationContext

__all__ = [
    "AsyncDeserializingConsumer",
    "AsyncSerializingProducer",
    "DeserializingConsumer",
    "SerializingProducer",
]

#: The key and value types of a client, solved from its (de)serializers; Any when they come
#: in the config mapping.
K = DefaultTypeVar("K", default=Any)
V = DefaultTypeVar("V", default=Any)

#: ``(obj, ctx) -> bytes | None``: what the producers call (AvroSerializer[T], ...).
SerializerFn = Callable[[K, SerializationContext], "bytes | None"]
#: The same, or returning an awaitable of it (AsyncAvroSerializer[T], ...).
AsyncSerializerFn = Callable[[K, SerializationContext], "bytes | Awaitable[bytes | None] | None"]
#: ``(data, ctx) -> obj``: what the consumers call (AvroDeserializer[T], ...).
DeserializerFn = Callable[["bytes | None", SerializationContext], V]
#: The same returning an awaitable (AsyncAvroDeserializer[T], ...).
AsyncDeserializerFn = Callable[["bytes | None", SerializationContext], Awaitable[V]]

_PRODUCER_KEYS = ("key.serializer", "value.serializer")
_CONSUMER_KEYS = ("key.deserializer", "value.deserializer")


def _split(config: Mapping[str, Any] | None, kwargs: dict[str, Any],
           names: tuple[str, str]) -> tuple[dict[str, Any], Any, Any]:
    """Take the (de)serializers out of the config; the rest goes to the client."""
    rest = dict(config or {})
    found: list[Any] = []
    for name in names:
        attr = name.replace(".", "_")
        a, b = rest.pop(name, None), kwargs.pop(attr, None)
        if a is not None and b is not None and a is not b:
            raise ConfigError(f"{name} given twice")
        value = a if a is not None else b
        if value is not None and not callable(value):
            raise ConfigError(f"{name} must be callable as (obj, ctx), got {value!r}")
        found.append(value)
    return rest, found[0], found[1]




def _serialization_error(field: MessageField, topic: str,
                         exc: BaseException) -> SerializationError:
    if isinstance(exc, (KeySerializationError, ValueSerializationError)):
        return exc
    cls = KeySerializationError if field is MessageField.KEY else ValueSerializationError
    err = cls(f"cannot serialize the {field.value} for topic {topic!r}: {exc}")
    err.__cause__ = exc
    return err


def _deserialization_error(field: MessageField, raw: ConsumerRecord[Any, Any],
                           exc: BaseException) -> SerializationError:
    cls = KeyDeserializationError if field is MessageField.KEY else ValueDeserializationError
    err = cls(f"cannot deserialize the {field.value} of topic {raw.topic!r} partition "
              f"{raw.partition} offset {raw.offset}: {exc}", record=raw)
    err.__cause__ = exc
    return err


def _rebuild(raw: ConsumerRecord[Any, Any], key: Any, value: Any) -> ConsumerRecord[Any, Any]:
    return ConsumerRecord(topic=raw.topic, partition=raw.partition, offset=raw.offset,
                          timestamp=raw.timestamp, timestamp_type=raw.timestamp_type,
                          key=key, value=value, headers=raw.headers,
                          leader_epoch=raw.leader_epoch)


def _contexts(raw: ConsumerRecord[Any, Any]) -> tuple[SerializationContext,
                                                      SerializationContext]:
    return (SerializationContext(raw.topic, MessageField.KEY, raw.headers, raw.partition,
                                 raw.offset),
            SerializationContext(raw.topic, MessageField.VALUE, raw.headers, raw.partition,
                                 raw.offset))


def _rewind_points(records: list[ConsumerRecord[Any, Any]]) -> dict[TopicPartition, int]:
    """The first offset per partition among ``records`` (where to seek back to)."""
    first: dict[TopicPartition, int] = {}
    for r in records:
        first.setdefault(TopicPartition(r.topic, r.partition), r.offset)
    return first


def _stop_before(consumer: Any, raws: list[ConsumerRecord[Any, Any]], bad: int,
                 decoded: list[ConsumerRecord[Any, Any]]) -> bool:
    """A batch read met a bad record at ``raws[bad]``: rewind ``consumer`` so the next read
    starts at it (records before it were decoded) or just past it (it is the first, and its
    error is raised now). Returns whether records before it are to be returned."""
    rest = raws[bad:] if decoded else raws[bad + 1:]
    for tp, offset in _rewind_points(rest).items():
        consumer.seek(tp, offset)
    return bool(decoded)


def _flatten(batches: Mapping[TopicPartition, list[ConsumerRecord[Any, Any]]]
             ) -> list[ConsumerRecord[Any, Any]]:
    return [r for records in batches.values() for r in records]


def _by_partition(records: list[ConsumerRecord[Any, Any]]
                  ) -> dict[TopicPartition, list[ConsumerRecord[Any, Any]]]:
    # Keyed by plain tuples, one TopicPartition per partition: this runs once per record.
    groups: dict[tuple[str, int], list[ConsumerRecord[Any, Any]]] = {}
    for r in records:
        groups.setdefault((r.topic, r.partition), []).append(r)
    return {TopicPartition(t, p): recs for (t, p), recs in groups.items()}


# --- producers -------------------------------------------------------------------------


class SerializingProducer(Generic[K, V]):
    """A :class:`~kontrakt.clients.producer.Producer` that serializes keys and values,
    typed by them: ``SerializingProducer[str, Order]`` after ``key_serializer=
    StringSerializer(), value_serializer=AvroSerializer(client, Order)``.

    Args:
        config: producer options plus ``key.serializer`` / ``value.serializer``.
        key_serializer / value_serializer: ``(obj, ctx) -> bytes | None`` callables.
        **kwargs: the other options as snake_case keywords.

    Raises:
        ConfigError: an unknown option, or a serializer that is not callable.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, *,
                 key_serializer: SerializerFn[K] | None = None,
                 value_serializer: SerializerFn[V] | None = None, **kwargs: Any) -> None:
        kwargs.update(key_serializer=key_serializer, value_serializer=value_serializer)
        rest, self._key_ser, self._value_ser = _split(config, kwargs, _PRODUCER_KEYS)
        self._producer = Producer(rest, **kwargs)

    def _serialize(self, topic: str, key: Any, value: Any,
                   headers: Any) -> tuple[Any, Any, list[tuple[str, bytes | None]]]:
        hdrs = header_list(headers)
        if self._key_ser is not None:
            try:
                key = self._key_ser(key, SerializationContext(topic, MessageField.KEY, hdrs))
            except Exception as exc:
                raise _serialization_error(MessageField.KEY, topic, exc) from exc
        if self._value_ser is not None:
            try:
                value = self._value_ser(value,
                                        SerializationContext(topic, MessageField.VALUE, hdrs))
            except Exception as exc:
                raise _serialization_error(MessageField.VALUE, topic, exc) from exc
        return key, value, hdrs

    def produce(self, topic: str, key: K | None = None, value: V | None = None,
                partition: int | None = None, on_delivery: Any = None,
                timestamp: int | None = None, headers: Any = None) -> None:
        """confluent-kafka's ``SerializingProducer.produce`` (note: key before value).

        ``on_delivery(err, metadata)`` runs on the calling thread in :meth:`poll` /
        :meth:`flush`.

        Raises:
            KeySerializationError / ValueSerializationError: nothing was queued.
            Everything :meth:`Producer.produce` raises.
        """
        k, v, hdrs = self._serialize(topic, key, value, headers)
        self._producer.produce(topic, v, k, partition=partition, on_delivery=on_delivery,
                               timestamp=timestamp, headers=hdrs or None)

    def send(self, topic: str, value: V | None = None, key: K | None = None, *,
             partition: int | None = None, timestamp_ms: int | None = None,
             headers: Any = None) -> RecordFuture:
        """Serialize and queue a record; returns its future (``result(timeout)``).

        Raises:
            KeySerializationError / ValueSerializationError: nothing was queued.
        """
        k, v, hdrs = self._serialize(topic, key, value, headers)
        return self._producer.send(topic, v, k, partition=partition, timestamp_ms=timestamp_ms,
                                   headers=hdrs or None)

    def send_and_wait(self, topic: str, value: V | None = None, key: K | None = None, *,
                      partition: int | None = None, timestamp_ms: int | None = None,
                      headers: Any = None, timeout: float | None = None) -> RecordMetadata:
        """Serialize, send and wait for the acknowledgement (the record goes out at once,
        as with :meth:`Producer.send_and_wait`)."""
        k, v, hdrs = self._serialize(topic, key, value, headers)
        return self._producer.send_and_wait(topic, v, k, partition=partition,
                                            timestamp_ms=timestamp_ms, headers=hdrs or None,
                                            timeout=timeout)

    def poll(self, timeout: float | None = 0.0) -> int:
        """Run delivery callbacks; see :meth:`Producer.poll`."""
        return self._producer.poll(timeout)

    def flush(self, timeout: float | None = None) -> int:
        """Send everything queued and wait; see :meth:`Producer.flush`."""
        return self._producer.flush(timeout)

    def close(self, timeout: float | None = None) -> None:
        """Flush and close; see :meth:`Producer.close`."""
        self._producer.close(timeout)

    def stop(self) -> None:
        """aiokafka's name for :meth:`close`."""
        self._producer.close()

    @property
    def producer_id_and_epoch(self) -> tuple[int, int]:
        """See :attr:`Producer.producer_id_and_epoch`."""
        return self._producer.producer_id_and_epoch

    @property
    def producer(self) -> Producer:
        """The underlying byte-level producer."""
        return self._producer

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._producer.closed

    # The producer's own methods, as confluent-kafka's SerializingProducer (a Producer)
    # has them: transactions, purge, metadata, metrics.

    def init_transactions(self, timeout: float | None = None) -> None:
        """See :meth:`Producer.init_transactions`."""
        self._producer.init_transactions(timeout)

    def begin_transaction(self) -> None:
        """See :meth:`Producer.begin_transaction`."""
        self._producer.begin_transaction()

    def send_offsets_to_transaction(self, offsets: Mapping[Any, Any], group_id: Any,
                                    timeout: float | None = None) -> None:
        """See :meth:`Producer.send_offsets_to_transaction`."""
        self._producer.send_offsets_to_transaction(offsets, group_id, timeout)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """See :meth:`Producer.commit_transaction`."""
        self._producer.commit_transaction(timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """See :meth:`Producer.abort_transaction`."""
        self._producer.abort_transaction(timeout)

    def transaction(self) -> AbstractContextManager[None]:
        """See :meth:`Producer.transaction`."""
        return self._producer.transaction()

    def purge(self, in_queue: bool = True, in_flight: bool = True,
              blocking: bool = True) -> None:
        """See :meth:`Producer.purge`."""
        self._producer.purge(in_queue, in_flight, blocking)

    def list_topics(self, topic: str | None = None,
                    timeout: float | None = None) -> dict[str, TopicInfo]:
        """See :meth:`Producer.list_topics`."""
        return self._producer.list_topics(topic, timeout)

    def partitions_for(self, topic: str) -> list[int]:
        """See :meth:`Producer.partitions_for`."""
        return self._producer.partitions_for(topic)

    def metrics(self) -> dict[str, float]:
        """See :meth:`Producer.metrics`."""
        return self._producer.metrics()

    def __enter__(self) -> SerializingProducer[K, V]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return len(self._producer)


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class AsyncSerializingProducer(Generic[K, V]):
    """An :class:`~kontrakt.clients.producer.AsyncProducer` that serializes keys and values,
    typed by them as :class:`SerializingProducer` is.

    Serializers may be sync callables or return awaitables (the ``Async`` serde classes).

    Args:
        config: producer options plus ``key.serializer`` / ``value.serializer``.
        key_serializer / value_serializer: ``(obj, ctx) -> bytes | None`` callables, or
            ``async`` ones.
        **kwargs: the other options as snake_case keywords.

    Raises:
        ConfigError: an unknown option, or a serializer that is not callable.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, *,
                 key_serializer: AsyncSerializerFn[K] | None = None,
                 value_serializer: AsyncSerializerFn[V] | None = None, **kwargs: Any) -> None:
        kwargs.update(key_serializer=key_serializer, value_serializer=value_serializer)
        rest, self._key_ser, self._value_ser = _split(config, kwargs, _PRODUCER_KEYS)
        self._producer = AsyncProducer(rest, **kwargs)

    async def start(self) -> None:
        """Connect; see :meth:`AsyncProducer.start`."""
        await self._producer.start()

    async def _serialize(self, topic: str, key: Any, value: Any,
                         headers: Any) -> tuple[Any, Any, list[tuple[str, bytes | None]]]:
        hdrs = header_list(headers)
        if self._key_ser is not None:
            try:
                key = await _maybe_await(
                    self._key_ser(key, SerializationContext(topic, MessageField.KEY, hdrs)))
            except Exception as exc:
                raise _serialization_error(MessageField.KEY, topic, exc) from exc
        if self._value_ser is not None:
            try:
                value = await _maybe_await(
                    self._value_ser(value, SerializationContext(topic, MessageField.VALUE,
                                                                hdrs)))
            except Exception as exc:
                raise _serialization_error(MessageField.VALUE, topic, exc) from exc
        return key, value, hdrs

    async def send(self, topic: str, value: V | None = None, key: K | None = None, *,
                   partition: int | None = None, timestamp_ms: int | None = None,
                   headers: Any = None) -> RecordFuture:
        """Serialize and queue a record; ``await`` the returned future for its metadata.

        Raises:
            KeySerializationError / ValueSerializationError: nothing was queued.
        """
        k, v, hdrs = await self._serialize(topic, key, value, headers)
        return await self._producer.send(topic, v, k, partition=partition,
                                         timestamp_ms=timestamp_ms, headers=hdrs or None)

    async def send_and_wait(self, topic: str, value: V | None = None, key: K | None = None, *,
                            partition: int | None = None, timestamp_ms: int | None = None,
                            headers: Any = None,
                            timeout: float | None = None) -> RecordMetadata:
        """Serialize, send and wait for the acknowledgement (the record goes out at once,
        as with :meth:`AsyncProducer.send_and_wait`, whose ``timeout`` this is)."""
        k, v, hdrs = await self._serialize(topic, key, value, headers)
        return await self._producer.send_and_wait(topic, v, k, partition=partition,
                                                  timestamp_ms=timestamp_ms,
                                                  headers=hdrs or None, timeout=timeout)

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything queued and wait; see :meth:`AsyncProducer.flush`."""
        await self._producer.flush(timeout)

    async def close(self, timeout: float | None = None) -> None:
        """Flush and close; see :meth:`AsyncProducer.close`."""
        await self._producer.close(timeout)

    async def stop(self) -> None:
        """aiokafka's name for :meth:`close` (delivers what is buffered first)."""
        await self._producer.close()

    @property
    def producer_id_and_epoch(self) -> tuple[int, int]:
        """See :attr:`AsyncProducer.producer_id_and_epoch`."""
        return self._producer.producer_id_and_epoch

    # As SerializingProducer's: the producer's transaction, purge and metadata methods.

    async def init_transactions(self, timeout: float | None = None) -> None:
        """See :meth:`AsyncProducer.init_transactions`."""
        await self._producer.init_transactions(timeout)

    def begin_transaction(self) -> None:
        """See :meth:`AsyncProducer.begin_transaction`."""
        self._producer.begin_transaction()

    async def send_offsets_to_transaction(self, offsets: Mapping[Any, Any], group_id: Any,
                                          timeout: float | None = None) -> None:
        """See :meth:`AsyncProducer.send_offsets_to_transaction`."""
        await self._producer.send_offsets_to_transaction(offsets, group_id, timeout)

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """See :meth:`AsyncProducer.commit_transaction`."""
        await self._producer.commit_transaction(timeout)

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """See :meth:`AsyncProducer.abort_transaction`."""
        await self._producer.abort_transaction(timeout)

    def transaction(self) -> AbstractAsyncContextManager[None]:
        """See :meth:`AsyncProducer.transaction`."""
        return self._producer.transaction()

    def purge(self, in_queue: bool = True, in_flight: bool = True) -> int:
        """See :meth:`AsyncProducer.purge`."""
        return self._producer.purge(in_queue, in_flight)

    async def list_topics(self, topic: str | None = None,
                          timeout: float | None = None) -> dict[str, TopicInfo]:
        """See :meth:`AsyncProducer.list_topics`."""
        return await self._producer.list_topics(topic, timeout)

    async def partitions_for(self, topic: str) -> list[int]:
        """See :meth:`AsyncProducer.partitions_for`."""
        return await self._producer.partitions_for(topic)

    def metrics(self) -> dict[str, float]:
        """See :meth:`AsyncProducer.metrics`."""
        return self._producer.metrics()

    @property
    def producer(self) -> AsyncProducer:
        """The underlying byte-level producer."""
        return self._producer

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._producer.closed

    async def __aenter__(self) -> AsyncSerializingProducer[K, V]:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


# --- consumers -------------------------------------------------------------------------


class _Decoding:
    """The record-by-record deserialization shared by both consumer forms."""

    def __init__(self, key_de: Any, value_de: Any) -> None:
        self.key_de = key_de
        self.value_de = value_de
        #: nothing to deserialize: records pass as they are
        self.idle = key_de is None and value_de is None

    def decode(self, raw: ConsumerRecord[Any, Any]) -> ConsumerRecord[Any, Any]:
        if self.key_de is None and self.value_de is None:
            return raw
        kctx, vctx = _contexts(raw)
        key, value = raw.key, raw.value
        if self.key_de is not None:
            try:
                key = self.key_de(key, kctx)
            except Exception as exc:
                raise _deserialization_error(MessageField.KEY, raw, exc) from exc
        if self.value_de is not None:
            try:
                value = self.value_de(value, vctx)
            except Exception as exc:
                raise _deserialization_error(MessageField.VALUE, raw, exc) from exc
        return _rebuild(raw, key, value)

    async def decode_async(self, raw: ConsumerRecord[Any, Any]) -> ConsumerRecord[Any, Any]:
        if self.key_de is None and self.value_de is None:
            return raw
        kctx, vctx = _contexts(raw)
        key, value = raw.key, raw.value
        if self.key_de is not None:
            try:
                key = await _maybe_await(self.key_de(key, kctx))
            except Exception as exc:
                raise _deserialization_error(MessageField.KEY, raw, exc) from exc
        if self.value_de is not None:
            try:
                value = await _maybe_await(self.value_de(value, vctx))
            except Exception as exc:
                raise _deserialization_error(MessageField.VALUE, raw, exc) from exc
        return _rebuild(raw, key, value)


class DeserializingConsumer(Consumer, Generic[K, V]):
    """A :class:`~kontrakt.clients.consumer.Consumer` that deserializes keys and values
    (as confluent-kafka's, a ``Consumer`` itself).

    Every method of :class:`Consumer` is available (``subscribe``, ``assign``, ``commit``,
    ``seek``, ...); the reading methods (``poll``, ``getmany``, ``consume``, iteration)
    return deserialized records, typed ``ConsumerRecord[K, V]`` after the deserializers
    given as keywords (``Any`` when they come in ``config``).

    Args:
        config: consumer options plus ``key.deserializer`` / ``value.deserializer``.
        key_deserializer / value_deserializer: ``(data, ctx) -> obj`` callables.
        **kwargs: the other options as snake_case keywords.

    Raises:
        ConfigError: an unknown option, or a deserializer that is not callable.
    """

    def __init__(self, config: Mapping[str, Any] | str | None = None, *topics: str,
                 key_deserializer: DeserializerFn[K] | None = None,
                 value_deserializer: DeserializerFn[V] | None = None,
                 **kwargs: Any) -> None:
        config, topics = split_config(config, topics)
        kwargs.update(key_deserializer=key_deserializer, value_deserializer=value_deserializer)
        rest, key_de, value_de = _split(config, kwargs, _CONSUMER_KEYS)
        self._decoding = _Decoding(key_de, value_de)
        super().__init__(rest, *topics, **kwargs)

    @property
    def consumer(self) -> DeserializingConsumer[K, V]:
        """This consumer (kept from when it wrapped one; it is a :class:`Consumer` now)."""
        return self

    def poll(self, timeout: float | None = None) -> ConsumerRecord[K, V] | None:
        """The next deserialized record, or None after ``timeout`` seconds.

        Raises:
            KeyDeserializationError / ValueDeserializationError: ``.record`` is the raw
                record; the position is already past it.
            Everything :meth:`Consumer.poll` raises.
        """
        raw = super().poll(timeout)
        return None if raw is None else self._decoding.decode(raw)

    def _decode_batch(self, raws: list[ConsumerRecord[Any, Any]]
                      ) -> list[ConsumerRecord[Any, Any]]:
        out: list[ConsumerRecord[Any, Any]] = []
        for i, raw in enumerate(raws):
            try:
                out.append(self._decoding.decode(raw))
            except SerializationError:
                if _stop_before(self, raws, i, out):
                    return out
                raise
        return out

    def getmany(self, timeout: float = 0.0, max_records: int | None = None, *,
                timeout_ms: int | None = None
                ) -> dict[TopicPartition, list[ConsumerRecord[K, V]]]:
        """Deserialized records by partition (``consume`` and iteration read through it).

        Raises:
            KeyDeserializationError / ValueDeserializationError: the first record read was
                bad; records before a bad one are returned first, and the consumer is
                rewound to it.
        """
        batches = super().getmany(timeout, max_records, timeout_ms=timeout_ms)
        if self._decoding.idle:
            return batches
        return _by_partition(self._decode_batch(_flatten(batches)))

    def consume(self, num_records: int = 1, timeout: float | None = None
                ) -> list[ConsumerRecord[K, V]]:
        """Up to ``num_records`` deserialized records within ``timeout`` seconds; errors as
        in :meth:`getmany`."""
        return super().consume(num_records, timeout)

    def __iter__(self) -> Iterator[ConsumerRecord[K, V]]:
        return super().__iter__()

    def __enter__(self) -> DeserializingConsumer[K, V]:
        return self


class AsyncDeserializingConsumer(AsyncConsumer, Generic[K, V]):
    """An :class:`~kontrakt.clients.consumer.AsyncConsumer` that deserializes keys and values.

    Deserializers may be sync callables or return awaitables (the ``Async`` serde classes).
    Every method of :class:`AsyncConsumer` is available; the reading methods return
    deserialized records, typed ``ConsumerRecord[K, V]``.

    Args:
        config: consumer options plus ``key.deserializer`` / ``value.deserializer``.
        key_deserializer / value_deserializer: ``(data, ctx) -> obj`` callables, or
            ``async`` ones.
        **kwargs: the other options as snake_case keywords.

    Raises:
        ConfigError: an unknown option, or a deserializer that is not callable.
    """

    # One overload per (key, value) pair of sync / async deserializers: a union of the two
    # callable types leaves the record types unsolved (Any) for the async ones.
    @overload
    def __init__(self, config: Mapping[str, Any] | str | None = None, *topics: str,
                 key_deserializer: AsyncDeserializerFn[K] | None = None,
                 value_deserializer: AsyncDeserializerFn[V] | None = None,
                 **kwargs: Any) -> None: ...
    @overload
    def __init__(self, config: Mapping[str, Any] | str | None = None, *topics: str,
                 key_deserializer: DeserializerFn[K] | None = None,
                 value_deserializer: AsyncDeserializerFn[V] | None = None,
                 **kwargs: Any) -> None: ...
    @overload
    def __init__(self, config: Mapping[str, Any] | str | None = None, *topics: str,
                 key_deserializer: AsyncDeserializerFn[K] | None = None,
                 value_deserializer: DeserializerFn[V] | None = None,
                 **kwargs: Any) -> None: ...
    @overload
    def __init__(self, config: Mapping[str, Any] | str | None = None, *topics: str,
                 key_deserializer: DeserializerFn[K] | None = None,
                 value_deserializer: DeserializerFn[V] | None = None,
                 **kwargs: Any) -> None: ...

    def __init__(self, config: Mapping[str, Any] | str | None = None, *topics: str,
                 key_deserializer: Any = None, value_deserializer: Any = None,
                 **kwargs: Any) -> None:
        config, topics = split_config(config, topics)
        kwargs.update(key_deserializer=key_deserializer, value_deserializer=value_deserializer)
        rest, key_de, value_de = _split(config, kwargs, _CONSUMER_KEYS)
        self._decoding = _Decoding(key_de, value_de)
        super().__init__(rest, *topics, **kwargs)

    @property
    def consumer(self) -> AsyncDeserializingConsumer[K, V]:
        """This consumer (kept from when it wrapped one; it is an :class:`AsyncConsumer`
        now)."""
        return self

    async def poll(self, timeout: float | None = None) -> ConsumerRecord[K, V] | None:
        """The next deserialized record, or None after ``timeout``; errors as in
        :meth:`DeserializingConsumer.poll`."""
        raw = await super().poll(timeout)
        return None if raw is None else await self._decoding.decode_async(raw)

    async def _decode_batch(self, raws: list[ConsumerRecord[Any, Any]]
                            ) -> list[ConsumerRecord[Any, Any]]:
        out: list[ConsumerRecord[Any, Any]] = []
        for i, raw in enumerate(raws):
            try:
                out.append(await self._decoding.decode_async(raw))
            except SerializationError:
                if _stop_before(self, raws, i, out):
                    return out
                raise
        return out

    async def getmany(self, timeout: float = 0.0, max_records: int | None = None, *,
                      timeout_ms: int | None = None
                      ) -> dict[TopicPartition, list[ConsumerRecord[K, V]]]:
        """Deserialized records by partition (``consume`` and iteration read through it);
        see :meth:`DeserializingConsumer.getmany`."""
        batches = await super().getmany(timeout, max_records, timeout_ms=timeout_ms)
        if self._decoding.idle:
            return batches
        return _by_partition(await self._decode_batch(_flatten(batches)))

    async def consume(self, num_records: int = 1, timeout: float | None = None
                      ) -> list[ConsumerRecord[K, V]]:
        """Up to ``num_records`` deserialized records; see
        :meth:`DeserializingConsumer.consume`."""
        return await super().consume(num_records, timeout)

    def __aiter__(self) -> AsyncIterator[ConsumerRecord[K, V]]:
        return super().__aiter__()

    async def __aenter__(self) -> AsyncDeserializingConsumer[K, V]:
        await self.start()
        return self
