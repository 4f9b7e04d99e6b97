"""The serializing producers: :class:`SerializingProducer` (blocking, confluent-kafka's
shape) and :class:`AsyncSerializingProducer`, each over a byte-level producer it owns.

Keys and values run through the serializers before anything is queued: a failure raises
:class:`~kontrakt.errors.KeySerializationError` /
:class:`~kontrakt.errors.ValueSerializationError` and queues nothing. The producer's other
methods (transactions, purge, metadata, metrics) are passed through.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from inspect import isawaitable
from typing import Any, Generic

from kontrakt._types import RecordMetadata, header_list
from kontrakt.clients.cluster import TopicInfo
from kontrakt.clients.producer import AsyncProducer, Producer, RecordFuture
from kontrakt.clients.serializing._common import (
    PRODUCER_KEYS,
    AsyncSerializerFn,
    K,
    SerializerFn,
    V,
    split_serdes,
)
from kontrakt.errors import (
    KeySerializationError,
    SerializationError,
    ValueSerializationError,
)
from kontrakt.serde._context import MessageField, new_context
from kontrakt.serde._primitives import ignores_context
from kontrakt.serde._shells import bare_serializer_core

__all__ = ["AsyncSerializingProducer", "SerializingProducer"]

_KEY = MessageField.KEY
_VALUE = MessageField.VALUE


def _serialization_error(field: MessageField, topic: str,
                         exc: BaseException) -> SerializationError:
    if isinstance(exc, (KeySerializationError, ValueSerializationError)):
        return exc
    cls = KeySerializationError if field is MessageField.KEY else ValueSerializationError
    err = cls(f"cannot serialize the {field.value} for topic {topic!r}: {exc}")
    err.__cause__ = exc
    return err


def _serialize_key(key_ser: Any, topic: str, key: Any,
                   hdrs: list[tuple[str, bytes | None]]) -> Any:
    try:
        return key_ser(key, new_context(topic, _KEY, hdrs))
    except Exception as exc:
        raise _serialization_error(_KEY, topic, exc) from exc


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
        rest, self._key_ser, self._value_ser = split_serdes(config, kwargs, PRODUCER_KEYS)
        self._producer = Producer(rest, **kwargs)
        self._produce = self._producer.produce
        #: the value serializer's core when the warm path may skip its context
        self._value_core = bare_serializer_core(self._value_ser)
        #: no key serializer, or one called without a context first (see ignores_context)
        self._plain_keys = self._key_ser is None or ignores_context(self._key_ser)

    def _serialize(self, topic: str, key: Any, value: Any,
                   headers: Any) -> tuple[Any, Any, list[tuple[str, bytes | None]]]:
        # Once per record: locals, and no call to copy headers that are not there.
        hdrs = [] if headers is None else header_list(headers)
        key_ser, value_ser = self._key_ser, self._value_ser
        if key_ser is not None:
            key = _serialize_key(key_ser, topic, key, hdrs)
        if value_ser is not None:
            core = self._value_core
            if core is not None and value is not None and not hdrs:
                write = core.value_writes.get(topic)
                if write is not None:
                    try:
                        return key, write(value, None), hdrs
                    except Exception:  # the serializer itself raises the record's error
                        pass
            try:
                value = value_ser(value, new_context(topic, _VALUE, hdrs))
            except Exception as exc:
                raise _serialization_error(_VALUE, topic, exc) from exc
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
        # The warm path of _serialize() inlined for the common record (no headers, a key
        # as it is or through a primitive serializer): the writer bare_serializer_core
        # allows, no context, no frame.
        core = self._value_core
        if core is not None and headers is None and value is not None and self._plain_keys:
            write = core.value_writes.get(topic)
            if write is not None:
                key_ser = self._key_ser
                try:
                    v = write(value, None)
                    k: Any = key if key_ser is None else key_ser(key, None)
                except Exception:  # the serializers themselves raise the record's error below
                    pass
                else:
                    self._produce(topic, v, k, partition, on_delivery, timestamp, None)
                    return
        k, v, hdrs = self._serialize(topic, key, value, headers)
        self._produce(topic, v, k, partition, on_delivery, timestamp, hdrs or None)

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

    def cluster_id(self, timeout: float | None = None) -> str | None:
        """See :meth:`Producer.cluster_id`."""
        return self._producer.cluster_id(timeout)

    def bootstrap_connected(self) -> bool:
        """See :meth:`Producer.bootstrap_connected`."""
        return self._producer.bootstrap_connected()

    def set_sasl_credentials(self, username: str, password: str) -> None:
        """See :meth:`Producer.set_sasl_credentials`."""
        self._producer.set_sasl_credentials(username, password)

    def metrics(self) -> dict[str, float]:
        """See :meth:`Producer.metrics`."""
        return self._producer.metrics()

    def __enter__(self) -> SerializingProducer[K, V]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return len(self._producer)

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
        rest, self._key_ser, self._value_ser = split_serdes(config, kwargs, PRODUCER_KEYS)
        self._producer = AsyncProducer(rest, **kwargs)
        #: as SerializingProducer's: the value serializer's core when its warm path may
        #: skip the context (and, for an async serializer, the awaiting)
        self._value_core = bare_serializer_core(self._value_ser)

    async def start(self) -> None:
        """Connect; see :meth:`AsyncProducer.start`."""
        await self._producer.start()

    async def _serialize(self, topic: str, key: Any, value: Any,
                         headers: Any) -> tuple[Any, Any, list[tuple[str, bytes | None]]]:
        hdrs = header_list(headers)
        # A sync serializer's result is awaited only if it is awaitable: a coroutine less.
        if self._key_ser is not None:
            try:
                key = self._key_ser(key, new_context(topic, _KEY, hdrs))
                if isawaitable(key):
                    key = await key
            except Exception as exc:
                raise _serialization_error(MessageField.KEY, topic, exc) from exc
        if self._value_ser is not None:
            try:
                value = self._value_ser(value, new_context(topic, _VALUE, hdrs))
                if isawaitable(value):
                    value = await value
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
        # The warm path with no coroutine of its own: a record without headers or a key
        # serializer whose value has a writer bare_serializer_core allows.
        core = self._value_core
        if core is not None and headers is None and value is not None and self._key_ser is None:
            write = core.value_writes.get(topic)
            if write is not None:
                try:
                    v = write(value, None)
                except Exception:  # the serializer itself raises the record's error below
                    pass
                else:
                    raw_key: Any = key  # no key serializer: the key is bytes already
                    return await self._producer.send(topic, v, raw_key, partition=partition,
                                                     timestamp_ms=timestamp_ms)
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

    async def cluster_id(self, timeout: float | None = None) -> str | None:
        """See :meth:`AsyncProducer.cluster_id`."""
        return await self._producer.cluster_id(timeout)

    def bootstrap_connected(self) -> bool:
        """See :meth:`AsyncProducer.bootstrap_connected`."""
        return self._producer.bootstrap_connected()

    def set_sasl_credentials(self, username: str, password: str) -> None:
        """See :meth:`AsyncProducer.set_sasl_credentials`."""
        self._producer.set_sasl_credentials(username, password)

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
