"""The deserializing share consumers: :class:`DeserializingShareConsumer` and
:class:`AsyncDeserializingShareConsumer` are share consumers (subclasses of
:class:`~kontrakt.clients.share.ShareConsumer` and
:class:`~kontrakt.clients.share.AsyncShareConsumer`) whose ``poll()`` deserializes keys
and values record by record, with the deserializing consumers' decoding (:mod:`._consumers`).

A record that cannot be deserialized follows the deserializing consumers' rule for batch
reads: ``poll()`` returns the records before it, and the next ``poll()`` raises its
:class:`~kontrakt.errors.KeyDeserializationError` /
:class:`~kontrakt.errors.ValueDeserializationError` (``.record``: the raw record), with the
records after it still to come. The records not returned stay held by this member
unsettled, so an implicit-mode poll never accepts one the application did not get. The bad
record itself is released in implicit mode (delivered again, as the Java share consumer
does, until the broker's delivery attempt limit archives it), and left held undecided in
explicit mode, for ``acknowledge(err.record, AcknowledgeType.REJECT)`` (or RELEASE).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, overload

from kontrakt._types import ConsumerRecord
from kontrakt.clients.serializing._common import (
    CONSUMER_KEYS,
    AsyncDeserializerFn,
    DeserializerFn,
    K,
    V,
    split_serdes,
)
from kontrakt.clients.serializing._consumers import _Decoding
from kontrakt.clients.share import AsyncShareConsumer, ShareConsumer
from kontrakt.errors import SerializationError

__all__ = ["AsyncDeserializingShareConsumer", "DeserializingShareConsumer"]

Raw = ConsumerRecord[Any, Any]


def _stop_at(raws: list[Raw], decoded: list[Raw], error: SerializationError,
             take_back: Callable[[list[Raw]], None],
             undeserializable: Callable[[Raw], None]) -> list[Raw]:
    """A poll's record ``raws[len(decoded)]`` could not be deserialized. With records
    decoded before it, they are returned and it (and what follows) goes back to the
    consumer, to come first from the next poll; as the first, what follows goes back, the
    consumer is told (it settles the record by its mode) and ``error`` is raised."""
    bad = len(decoded)
    if decoded:
        take_back(raws[bad:])
        return decoded
    take_back(raws[1:])
    undeserializable(raws[0])
    raise error


def _decode_all(raws: list[Raw], decode: Callable[[Raw], Raw]
                ) -> tuple[list[Raw], SerializationError | None]:
    out: list[Raw] = []
    append = out.append
    try:
        for raw in raws:
            append(decode(raw))
    except SerializationError as exc:
        return out, exc
    return out, None


class DeserializingShareConsumer(ShareConsumer[K, V]):
    """A :class:`~kontrakt.clients.share.ShareConsumer` that deserializes keys and values
    (confluent-kafka's ``DeserializingShareConsumer``).

    Every method of :class:`ShareConsumer` is available; ``poll()`` returns deserialized
    records, typed ``ConsumerRecord[K, V]`` after the deserializers given as keywords
    (``Any`` when they come in ``config``). Deserializing runs on the caller's thread.

    A record that cannot be deserialized: ``poll()`` returns the records before it, and
    the next ``poll()`` raises :class:`~kontrakt.errors.KeyDeserializationError` /
    :class:`~kontrakt.errors.ValueDeserializationError` whose ``.record`` is the raw
    record. Implicit mode releases that record (it is never accepted); explicit mode
    leaves it for ``acknowledge(err.record, ...)``. (confluent-kafka returns it in the
    list with ``msg.error()`` set instead, where implicit mode accepts it.)

    Args:
        config: share consumer options plus ``key.deserializer`` / ``value.deserializer``.
        key_deserializer / value_deserializer: ``(data, ctx) -> obj`` callables.
        **kwargs: the other options as snake_case keywords.

    Raises:
        ConfigError: an unknown option, or a deserializer that is not callable.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, *,
                 key_deserializer: DeserializerFn[K] | None = None,
                 value_deserializer: DeserializerFn[V] | None = None,
                 **kwargs: Any) -> None:
        kwargs.update(key_deserializer=key_deserializer, value_deserializer=value_deserializer)
        rest, key_de, value_de = split_serdes(config, kwargs, CONSUMER_KEYS)
        self._decoding = _Decoding(key_de, value_de)
        super().__init__(rest, **kwargs)

    def poll(self, timeout: float | None = None) -> list[ConsumerRecord[K, V]]:
        """Deserialized records acquired for this member; see
        :meth:`AsyncShareConsumer.poll`.

        Raises:
            KeyDeserializationError / ValueDeserializationError: the first record of this
                poll could not be deserialized (see the class docstring).
        """
        raws: list[Raw] = super().poll(timeout)
        decoding = self._decoding
        if decoding.idle or not raws:
            return raws
        decoded, error = _decode_all(raws, decoding.decode)
        if error is None:
            return decoded
        inner = self._async
        return _stop_at(raws, decoded, error,
                        lambda rest: self._on_loop(lambda: inner._take_back(rest)),
                        lambda bad: self._on_loop(lambda: inner._undeserializable(bad)))

    def __enter__(self) -> DeserializingShareConsumer[K, V]:
        return self


class AsyncDeserializingShareConsumer(AsyncShareConsumer[K, V]):
    """An :class:`~kontrakt.clients.share.AsyncShareConsumer` that deserializes keys and
    values; deserializers may be sync callables or return awaitables (the ``Async`` serde
    classes). Errors and the fate of a record that cannot be deserialized as in
    :class:`DeserializingShareConsumer`.

    Args:
        config: share consumer options plus ``key.deserializer`` / ``value.deserializer``.
        key_deserializer / value_deserializer: ``(data, ctx) -> obj`` callables, or
            ``async`` ones.
        **kwargs: the other options as snake_case keywords.

    Raises:
        ConfigError: an unknown option, or a deserializer that is not callable.
    """

    # One overload per (key, value) pair of sync / async deserializers, as
    # AsyncDeserializingConsumer's: a union leaves the record types unsolved.
    @overload
    def __init__(self, config: Mapping[str, Any] | None = None, *,
                 key_deserializer: AsyncDeserializerFn[K] | None = None,
                 value_deserializer: AsyncDeserializerFn[V] | None = None,
                 **kwargs: Any) -> None: ...
    @overload
    def __init__(self, config: Mapping[str, Any] | None = None, *,
                 key_deserializer: DeserializerFn[K] | None = None,
                 value_deserializer: AsyncDeserializerFn[V] | None = None,
                 **kwargs: Any) -> None: ...
    @overload
    def __init__(self, config: Mapping[str, Any] | None = None, *,
                 key_deserializer: AsyncDeserializerFn[K] | None = None,
                 value_deserializer: DeserializerFn[V] | None = None,
                 **kwargs: Any) -> None: ...
    @overload
    def __init__(self, config: Mapping[str, Any] | None = None, *,
                 key_deserializer: DeserializerFn[K] | None = None,
                 value_deserializer: DeserializerFn[V] | None = None,
                 **kwargs: Any) -> None: ...

    def __init__(self, config: Mapping[str, Any] | None = None, *,
                 key_deserializer: Any = None, value_deserializer: Any = None,
                 **kwargs: Any) -> None:
        kwargs.update(key_deserializer=key_deserializer, value_deserializer=value_deserializer)
        rest, key_de, value_de = split_serdes(config, kwargs, CONSUMER_KEYS)
        self._decoding = _Decoding(key_de, value_de)
        super().__init__(rest, **kwargs)

    async def poll(self, timeout: float | None = None) -> list[ConsumerRecord[K, V]]:
        """Deserialized records acquired for this member; see
        :meth:`DeserializingShareConsumer.poll`."""
        raws: list[Raw] = await super().poll(timeout)
        decoding = self._decoding
        if decoding.idle or not raws:
            return raws
        if decoding.sync:
            decoded, error = _decode_all(raws, decoding.decode)
        else:
            decoded, error = [], None
            for raw in raws:
                try:
                    decoded.append(await decoding.decode_async(raw))
                except SerializationError as exc:
                    error = exc
                    break
        if error is None:
            return decoded
        return _stop_at(raws, decoded, error, self._take_back, self._undeserializable)

    async def __aenter__(self) -> AsyncDeserializingShareConsumer[K, V]:
        await self.start()
        return self
