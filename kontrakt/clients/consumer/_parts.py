"""The parts of an :class:`~kontrakt.clients.consumer.AsyncConsumer` that its mixins
(:mod:`._positions`, :mod:`._commits`) use, declared once for the type checker.

:class:`AsyncConsumerParts` holds no code and sets nothing: the consumer's constructor sets
these attributes, and defines the calls declared here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kontrakt._types import DefaultTypeVar

if TYPE_CHECKING:
    from kontrakt.clients.client import AsyncKafkaClient
    from kontrakt.clients.consumer._buffer import FetchBuffer
    from kontrakt.clients.consumer._config import ConsumerSettings
    from kontrakt.clients.consumer._fetcher import Fetcher
    from kontrakt.clients.consumer._subscription import SubscriptionState
    from kontrakt.clients.group._membership import GroupMembership

__all__ = ["AsyncConsumerParts", "KeyT", "ValueT"]

#: The key and value types of the records a consumer hands out: the bytes as read (None
#: for a null key or value) by default, so that ``Consumer(...)`` is a
#: ``Consumer[bytes | None, bytes | None]``; the deserializing consumers pass on what their
#: deserializers return. For type checkers only: at run time the records are the same
#: objects whatever the parameters (see DefaultTypeVar).
KeyT = DefaultTypeVar("KeyT", default=bytes | None)
ValueT = DefaultTypeVar("ValueT", default=bytes | None)


class AsyncConsumerParts:
    """The consumer's attributes and calls its mixins rely on."""

    _client: AsyncKafkaClient
    _settings: ConsumerSettings
    _subs: SubscriptionState
    _buffer: FetchBuffer
    _fetcher: Fetcher
    _coordinator: GroupMembership | None
    _auto_store: bool

    if TYPE_CHECKING:
        async def start(self) -> None: ...
        def _check(self) -> None: ...
