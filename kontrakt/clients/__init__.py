"""Kafka clients: the asyncio core and its blocking forms."""

from __future__ import annotations

from kontrakt.clients.client import AsyncKafkaClient, KafkaClient
from kontrakt.clients.cluster import BrokerInfo, ClusterMetadata, PartitionInfo, TopicInfo

__all__ = [
    "AsyncKafkaClient",
    "BrokerInfo",
    "ClusterMetadata",
    "KafkaClient",
    "PartitionInfo",
    "TopicInfo",
]
