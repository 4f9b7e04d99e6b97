"""The Kafka consumer: :class:`AsyncConsumer` (asyncio) and :class:`Consumer` (blocking).

Both take Kafka property names (``{"group.id": "g"}``) and/or snake_case keywords
(``group_id="g"``). See :class:`AsyncConsumer` for the options and methods.
"""

from __future__ import annotations

from kontrakt._types import OFFSET_BEGINNING, OFFSET_END, OFFSET_INVALID, OFFSET_STORED
from kontrakt.clients.consumer._buffer import FetchBuffer
from kontrakt.clients.consumer._compat import ConsumerGroupMetadata
from kontrakt.clients.consumer._config import CONSUMER_OPTIONS
from kontrakt.clients.consumer._consumer import DEFAULT_CLOSE_TIMEOUT, AsyncConsumer
from kontrakt.clients.consumer._fetcher import Fetcher
from kontrakt.clients.consumer._offsets import OffsetAndTimestamp
from kontrakt.clients.consumer._session import FetchSession
from kontrakt.clients.consumer._subscription import FetchPosition, SubscriptionState
from kontrakt.clients.consumer._sync import Consumer

__all__ = [
    "CONSUMER_OPTIONS",
    "DEFAULT_CLOSE_TIMEOUT",
    "OFFSET_BEGINNING",
    "OFFSET_END",
    "OFFSET_INVALID",
    "OFFSET_STORED",
    "AsyncConsumer",
    "Consumer",
    "ConsumerGroupMetadata",
    "FetchBuffer",
    "FetchPosition",
    "FetchSession",
    "Fetcher",
    "OffsetAndTimestamp",
    "SubscriptionState",
]
