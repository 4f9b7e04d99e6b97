"""The deserializing consumers: :class:`DeserializingConsumer` and
:class:`AsyncDeserializingConsumer` are consumers (subclasses of
:class:`~kontrakt.clients.consumer.Consumer` and
:class:`~kontrakt.clients.consumer.AsyncConsumer`) whose reading methods (``poll``,
``getmany``, ``consume``, iteration) deserialize keys and values record by record.

A record that cannot be deserialized raises
:class:`~kontrakt.errors.KeyDeserializationError` /
:class:`~kontrakt.errors.ValueDeserializationError` carrying the raw record; a batch read
returns the records before it and rewinds the consumer to it (see the package docstring).
"""

from __future__ import annotations

from collections.abc import Mapping
from inspect import isawaitable
from typing import Any, overload

from kontrakt._types import ConsumerRecord, TopicPartition
from kontrakt.clients.consumer import AsyncConsumer, Consumer
from kontrakt.clients.consumer._compat import split_config
from kontrakt.clients.serializing._common import (
    CONSUMER_KEYS,
    AsyncDeserializerFn,
    DeserializerFn,
    K,
    V,
    split_serdes,
)
from kontrakt.errors import (
    KeyDeserializationError,
    SerializationError,
    ValueDeserializationError,
)
from kontrakt.serde import _context as _contexts
from kontrakt.serde._context import (
    ContextShell,
    MessageField,
    SerializationContext,
    new_context,
)
from kontrakt.serde._primitives import ignores_context
from kontrakt.serde._shells import SyncDeserializer, bare_deserializer_core

__all__ = ["AsyncDeserializingConsumer", "DeserializingConsumer"]


def _deserialization_error(field: MessageField, raw: ConsumerRecord[Any, Any],
                           exc: BaseException) -> SerializationError:
    cls = KeyDeserializationError if field is MessageField.KEY else ValueDeserializationError
    err = cls(f"cannot deserialize the {field.value} of topic {raw.topic!r} partition "
              f"{raw.partition} offset {raw.offset}: {exc}", record=raw)
    err.__cause__ = exc
    return err


_KEY = MessageField.KEY
_VALUE = MessageField.VALUE
_new_tuple = tuple.__new__
_new_object = object.__new__


def _decoded(raw: ConsumerRecord[Any, Any], key: Any, value: Any) -> ConsumerRecord[Any, Any]:
    """``raw`` with its key and value replaced.

    One ``tuple.__new__`` (0.6 us): a ConsumerRecord is a tuple of its fields in
    ``_fields`` order (see ``kontrakt._types._TupleRecord``), and building it by keywords
    costs 3 us, a share of every deserialized record.
    """
    topic, partition, offset, ts, ts_type, _, _, headers, epoch = raw
    return _new_tuple(ConsumerRecord, (topic, partition, offset, ts, ts_type, key, value,
                                       headers, epoch))


def _never_awaitable(de: Any) -> bool:
    """Whether ``de`` is one of kontrakt's sync deserializers (its own ``__call__``): one
    that never returns an awaitable."""
    return type(de).__call__ is SyncDeserializer.__call__ or ignores_context(de)


def _rewind_points(records: list[ConsumerRecord[Any, Any]]) -> dict[TopicPartition, int]:
    """The first offset per partition among ``records`` (where to seek back to)."""
    first: dict[TopicPartition, int] = {}
    for r in records:
        first.setdefault(TopicPartition(r.topic, r.partition), r.offset)
    return first


def _stop_before(consumer: Any, raws: list[ConsumerRecord[Any, Any]], bad: int,
                 decoded: bool) -> bool:
    """A batch read met a bad record at ``raws[bad]``: rewind ``consumer`` so the next read
    starts at it (``decoded``: records before it were decoded) or just past it (it is the
    first, and its error is raised now). Returns whether records before it are to be
    returned."""
    rest = raws[bad:] if decoded else raws[bad + 1:]
    for tp, offset in _rewind_points(rest).items():
        consumer.seek(tp, offset)
    return decoded


def _decode_batches(consumer: Any,
                    batches: Mapping[TopicPartition, list[ConsumerRecord[Any, Any]]],
                    decode: Any) -> dict[TopicPartition, list[ConsumerRecord[Any, Any]]]:
    """``batches`` decoded partition by partition with the sync ``decode`` (no flattening
    and regrouping a record); at a bad record, what :func:`_stop_before` does over the
    records in the order a flattened batch has them."""
    out: dict[TopicPartition, list[ConsumerRecord[Any, Any]]] = {}
    parts = list(batches.items())
    for n, (tp, raws) in enumerate(parts):
        decoded: list[ConsumerRecord[Any, Any]] = []
        append = decoded.append
        try:
            for raw in raws:
                append(decode(raw))
        except SerializationError:
            if decoded:
                out[tp] = decoded
            rest = raws[len(decoded):] + [r for _, later in parts[n + 1:] for r in later]
            if _stop_before(consumer, rest, 0, bool(out)):
                return out
            raise
        if decoded:
            out[tp] = decoded
    return out


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


# --- consumers -------------------------------------------------------------------------


class _Decoding:
    """The record-by-record deserialization shared by both consumer forms."""

    def __init__(self, key_de: Any, value_de: Any) -> None:
        self.key_de = key_de
        self.value_de = value_de
        #: nothing to deserialize: records pass as they are
        self.idle = key_de is None and value_de is None
        #: build contexts by the constructor (see ContextShell)
        self.slow_contexts = not _contexts.SHELL_FITS
        #: the value deserializer's core when its warm path may be taken here, without a
        #: context (see bare_deserializer_core)
        self.value_core = bare_deserializer_core(value_de)
        #: no deserializer returns an awaitable: the async consumers decode with decode(),
        #: no coroutine a record
        self.sync = all(de is None or _never_awaitable(de) for de in (key_de, value_de))
        #: the key deserializer is called without a context first (see ignores_context)
        self.plain_keys = ignores_context(key_de)

    def decode(self, raw: ConsumerRecord[Any, Any]) -> ConsumerRecord[Any, Any]:
        key_de, value_de = self.key_de, self.value_de
        if key_de is None and value_de is None:
            return raw
        # Per record: only the contexts of the deserializers there are, and none where the
        # deserializer does not need it (a primitive for the key, the warm path of one of
        # kontrakt's own for the value); fields read by unpacking once. The value's context
        # is built as a shell (see ContextShell) inline, as new_context() would, whose frame
        # costs a fifth of the saving; a key's takes new_context().
        topic, partition, offset, ts, ts_type, key, value, headers, epoch = raw
        slow = self.slow_contexts
        ctx: Any
        if key_de is not None:
            key_done = False
            if self.plain_keys:
                # A primitive's first try has no context: it reads one only to word an
                # error, which the try with the context below raises.
                try:
                    key = key_de(key, None)
                    key_done = True
                except Exception:
                    pass
            if not key_done:
                try:
                    key = key_de(key, new_context(topic, _KEY, headers, partition, offset))
                except Exception as exc:
                    raise _deserialization_error(_KEY, raw, exc) from exc
        if value_de is not None:
            # The deserializer's warm path, taken here for a record with no headers (none
            # can carry a schema id): its parse of the payload after the framing head, no
            # context, no call of the deserializer (see bare_deserializer_core).
            core = self.value_core
            done = False
            if core is not None and not headers:
                if value is None:
                    done = True
                else:
                    head = core.head_size
                    parse = core.bare.get(value[:head])
                    if parse is not None:
                        try:
                            value = parse(value[head:])
                            done = True
                        except Exception:  # the deserializer raises the record's error below
                            pass
            if not done:
                if slow:
                    ctx = SerializationContext(topic, _VALUE, headers, partition, offset)
                else:
                    ctx = _new_object(ContextShell)
                    ctx.topic = topic
                    ctx.field = _VALUE
                    ctx.headers = headers
                    ctx.partition = partition
                    ctx.offset = offset
                    ctx.__class__ = SerializationContext
                try:
                    value = value_de(value, ctx)
                except Exception as exc:
                    raise _deserialization_error(_VALUE, raw, exc) from exc
        # _decoded(), inlined: the fields are unpacked already.
        return _new_tuple(ConsumerRecord, (topic, partition, offset, ts, ts_type, key, value,
                                           headers, epoch))

    async def decode_async(self, raw: ConsumerRecord[Any, Any]) -> ConsumerRecord[Any, Any]:
        key_de, value_de = self.key_de, self.value_de
        if key_de is None and value_de is None:
            return raw
        topic, partition, offset, ts, ts_type, key, value, headers, epoch = raw
        # A result is awaited only if it is awaitable: no coroutine of its own a record.
        if key_de is not None:
            try:
                key = key_de(key, new_context(topic, _KEY, headers, partition, offset))
                if isawaitable(key):
                    key = await key
            except Exception as exc:
                raise _deserialization_error(_KEY, raw, exc) from exc
        if value_de is not None:
            try:
                value = value_de(value, new_context(topic, _VALUE, headers, partition, offset))
                if isawaitable(value):
                    value = await value
            except Exception as exc:
                raise _deserialization_error(_VALUE, raw, exc) from exc
        return _new_tuple(ConsumerRecord, (topic, partition, offset, ts, ts_type, key, value,
                                           headers, epoch))


class DeserializingConsumer(Consumer[K, V]):
    """A :class:`~kontrakt.clients.consumer.Consumer` that deserializes keys and values
    (as confluent-kafka's, a ``Consumer`` itself).

    Every method of :class:`Consumer` is available (``subscribe``, ``assign``, ``commit``,
    ``seek``, ...); the reading methods (``poll``, ``getmany``, ``consume``, iteration)
    return deserialized records, typed ``ConsumerRecord[K, V]`` after the deserializers
    given as keywords (``Any`` when they come in ``config``).

    ``poll()`` (:meth:`Consumer.poll`) returns the next deserialized record, or None; a
    record that cannot be deserialized raises
    :class:`~kontrakt.errors.KeyDeserializationError` /
    :class:`~kontrakt.errors.ValueDeserializationError` whose ``.record`` is the raw
    record (the position is already past it).

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
        rest, key_de, value_de = split_serdes(config, kwargs, CONSUMER_KEYS)
        self._decoding = _Decoding(key_de, value_de)
        super().__init__(rest, *topics, **kwargs)
        # Consumer.poll applies it to the record it returns (no poll() of this class: a
        # frame less a record).
        self._decode = self._decoding.decode

    @property
    def consumer(self) -> DeserializingConsumer[K, V]:
        """This consumer (kept from when it wrapped one; it is a :class:`Consumer` now)."""
        return self

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
        return _decode_batches(self, batches, self._decoding.decode)

    def consume(self, num_records: int = 1, timeout: float | None = None
                ) -> list[ConsumerRecord[K, V]]:
        """Up to ``num_records`` deserialized records within ``timeout`` seconds; errors as
        in :meth:`getmany`."""
        return super().consume(num_records, timeout)

    def __enter__(self) -> DeserializingConsumer[K, V]:
        return self


class AsyncDeserializingConsumer(AsyncConsumer[K, V]):
    """An :class:`~kontrakt.clients.consumer.AsyncConsumer` that deserializes keys and values.

    Deserializers may be sync callables or return awaitables (the ``Async`` serde classes).
    Every method of :class:`AsyncConsumer` is available; the reading methods return
    deserialized records, typed ``ConsumerRecord[K, V]``; errors as in
    :class:`DeserializingConsumer` (``poll()`` is :meth:`AsyncConsumer.poll`).

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
        rest, key_de, value_de = split_serdes(config, kwargs, CONSUMER_KEYS)
        decoding = self._decoding = _Decoding(key_de, value_de)
        super().__init__(rest, *topics, **kwargs)
        # AsyncConsumer.poll applies it to the record it returns (no poll() of this class:
        # a coroutine less a record), awaiting it only for deserializers that may return
        # awaitables.
        self._decode_awaits = not decoding.sync
        self._decode = decoding.decode_async if self._decode_awaits else decoding.decode

    @property
    def consumer(self) -> AsyncDeserializingConsumer[K, V]:
        """This consumer (kept from when it wrapped one; it is an :class:`AsyncConsumer`
        now)."""
        return self

    async def _decode_batch(self, raws: list[ConsumerRecord[Any, Any]]
                            ) -> list[ConsumerRecord[Any, Any]]:
        # Deserializers that may return awaitables (sync ones: _decode_batches).
        out: list[ConsumerRecord[Any, Any]] = []
        decode_async = self._decoding.decode_async
        for i, raw in enumerate(raws):
            try:
                out.append(await decode_async(raw))
            except SerializationError:
                if _stop_before(self, raws, i, bool(out)):
                    return out
                raise
        return out

    async def getmany(self, timeout: float = 0.0, max_records: int | None = None, *,
                      timeout_ms: int | None = None
                      ) -> dict[TopicPartition, list[ConsumerRecord[K, V]]]:
        """Deserialized records by partition (``consume`` and iteration read through it);
        see :meth:`DeserializingConsumer.getmany`."""
        batches = await super().getmany(timeout, max_records, timeout_ms=timeout_ms)
        decoding = self._decoding
        if decoding.idle:
            return batches
        if decoding.sync:
            return _decode_batches(self, batches, decoding.decode)
        return _by_partition(await self._decode_batch(_flatten(batches)))

    async def consume(self, num_records: int = 1, timeout: float | None = None
                      ) -> list[ConsumerRecord[K, V]]:
        """Up to ``num_records`` deserialized records; see
        :meth:`DeserializingConsumer.consume`."""
        return await super().consume(num_records, timeout)

    async def __aenter__(self) -> AsyncDeserializingConsumer[K, V]:
        await self.start()
        return self
