"""Produce, fetch and list offsets through ``AsyncKafkaClient.request()`` only.

These helpers exercise the protocol and network core directly, without the producer or
consumer, so their tests prove the lower layers on their own.
"""

from __future__ import annotations

import uuid
from typing import Any

from kontrakt.clients import AsyncKafkaClient
from kontrakt.protocol.messages import (
    CreateTopicsRequest,
    FetchRequest,
    ListOffsetsRequest,
    ProduceRequest,
)
from kontrakt.protocol.records import Record, iter_batches


async def create_topic(client: AsyncKafkaClient, name: str, partitions: int = 1) -> int:
    """Create a topic; returns the error code (0 on success)."""
    req = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1)], timeout_ms=10000)
    resp = await client.request(req)
    return int(resp.topics[0].error_code)


async def leader(client: AsyncKafkaClient, topic: str, partition: int) -> tuple[int, uuid.UUID]:
    meta = await client.refresh_metadata([topic])
    info = meta.topics[topic]
    return info.partitions[partition].leader, info.topic_id


async def produce(client: AsyncKafkaClient, topic: str, partition: int, batch: bytes,
                  acks: int = -1) -> Any:
    """Send one batch to the partition's leader; returns the partition response."""
    node, topic_id = await leader(client, topic, partition)
    req = ProduceRequest(acks=acks, timeout_ms=10000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, topic_id=topic_id, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=partition,
                                                                 records=batch)])])
    resp = await client.request(req, node=node)
    if resp is None:
        return None
    return resp.responses[0].partition_responses[0]


async def fetch(client: AsyncKafkaClient, topic: str, partition: int, offset: int,
                max_bytes: int = 1 << 20) -> tuple[Any, list[Record]]:
    """Fetch from ``offset``; returns the partition data and its decoded records."""
    node, topic_id = await leader(client, topic, partition)
    req = FetchRequest(max_wait_ms=500, min_bytes=1, max_bytes=max_bytes, topics=[
        FetchRequest.FetchTopic(topic=topic, topic_id=topic_id, partitions=[
            FetchRequest.FetchTopic.FetchPartition(partition=partition, fetch_offset=offset,
                                                   partition_max_bytes=max_bytes)])])
    resp = await client.request(req, node=node)
    part = resp.responses[0].partitions[0]
    records: list[Record] = []
    for batch in iter_batches(part.records or b"", topic=topic, partition=partition):
        if not batch.is_control:
            records.extend(r for r in batch.records() if r.offset >= offset)
    return part, records


async def list_offset(client: AsyncKafkaClient, topic: str, partition: int,
                      timestamp: int) -> Any:
    """ListOffsets for one partition (-2 earliest, -1 latest); returns its response."""
    node, _ = await leader(client, topic, partition)
    req = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name=topic, partitions=[ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=partition, timestamp=timestamp)])])
    resp = await client.request(req, node=node)
    return resp.topics[0].partitions[0]
