"""An AsyncProducer that drives its record path without a broker (for unit tests)."""

from __future__ import annotations

from typing import Any

from kontrakt.clients.producer import AsyncProducer, Producer
from kontrakt.clients.producer._producer import _TopicParts
from kontrakt.clients.producer._sync import _DeliveryQueue


class RecordingSender:
    """Stands in for the sender: nothing is sent; wake-ups are recorded."""

    error = None

    def __init__(self) -> None:
        self.wakes: list[bool] = []

    def wake(self, urgent: bool = True) -> None:
        self.wakes.append(urgent)

    def hand_over(self, timeout: float) -> None:
        # A sync producer's caller filled a batch: an urgent wake-up, as far as tests see.
        self.wakes.append(True)


def offline_producer(partitions: int, **kwargs: Any) -> AsyncProducer:
    """A started-looking producer whose topic "t" has ``partitions`` partitions: records
    accumulate in its batches and stages, and no sender drains them."""
    p = AsyncProducer(bootstrap_servers="127.0.0.1:9", **kwargs)
    p._topics["t"] = _TopicParts.of(p._acc, "t", list(range(partitions)),
                                    list(range(partitions)), p._cluster.version)
    p._sender = RecordingSender()  # type: ignore[assignment]
    p._ok = True
    return p


def sync_over(core: AsyncProducer) -> Producer:
    """A sync Producer over an offline threaded core (``offline_producer(...,
    _threaded=True)``; no loop thread: nothing here needs one), its produce() callbacks
    delivered to its poll()."""
    p = object.__new__(Producer)
    p._async = core
    p._started = True
    p._on_delivery = None
    p._deliveries = _DeliveryQueue()
    core._acc.deliver = p._deliveries.put
    return p
