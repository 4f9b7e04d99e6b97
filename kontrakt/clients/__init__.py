"""Kafka clients: the asyncio core and its blocking forms.

- :class:`AsyncKafkaClient` / :class:`KafkaClient`: connections, metadata, raw ``request()``.
- :class:`AsyncProducer` / :class:`Producer`, :class:`AsyncConsumer` / :class:`Consumer`,
  :class:`AsyncAdminClient` / :class:`AdminClient`.
- :class:`SerializingProducer` / :class:`DeserializingConsumer` and their ``Async`` forms,
  which run keys and values through :mod:`kontrakt.serde` serializers.
- :class:`AsyncShareConsumer` / :class:`ShareConsumer`: share groups (KIP-932), with
  :class:`AcknowledgeType`; :class:`DeserializingShareConsumer` and its ``Async`` form
  deserialize what they poll.
"""

from __future__ import annotations

from kontrakt.clients.admin import AdminClient, AsyncAdminClient
from kontrakt.clients.client import AsyncKafkaClient, KafkaClient
from kontrakt.clients.cluster import BrokerInfo, ClusterMetadata, PartitionInfo, TopicInfo
from kontrakt.clients.consumer import AsyncConsumer, Consumer
from kontrakt.clients.producer import AsyncProducer, Producer
from kontrakt.clients.serializing import (
    AsyncDeserializingConsumer,
    AsyncDeserializingShareConsumer,
    AsyncSerializingProducer,
    DeserializingConsumer,
    DeserializingShareConsumer,
    SerializingProducer,
)
from kontrakt.clients.share import AcknowledgeType, AsyncShareConsumer, ShareConsumer

__all__ = [
    "AcknowledgeType",
    "AdminClient",
    "AsyncAdminClient",
    "AsyncConsumer",
    "AsyncDeserializingConsumer",
    "AsyncDeserializingShareConsumer",
    "AsyncKafkaClient",
    "AsyncProducer",
    "AsyncSerializingProducer",
    "AsyncShareConsumer",
    "BrokerInfo",
    "ClusterMetadata",
    "Consumer",
    "DeserializingConsumer",
    "DeserializingShareConsumer",
    "KafkaClient",
    "PartitionInfo",
    "Producer",
    "SerializingProducer",
    "ShareConsumer",
    "TopicInfo",
]
