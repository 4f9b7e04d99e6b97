"""Share groups (KIP-932, "queues for Kafka"): :class:`AsyncShareConsumer` and its blocking
form :class:`ShareConsumer`."""

from __future__ import annotations

from kontrakt.clients.share._acks import AcknowledgeType
from kontrakt.clients.share._consumer import AcknowledgementCommitCallback, AsyncShareConsumer
from kontrakt.clients.share._sync import ShareConsumer

__all__ = ["AcknowledgeType", "AcknowledgementCommitCallback", "AsyncShareConsumer",
           "ShareConsumer"]
