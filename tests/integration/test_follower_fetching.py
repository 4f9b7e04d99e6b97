"""Follower fetching (KIP-392) against librdkafka's mock cluster: a consumer that sends
``client.rack`` with Fetch v11+ is told by the leader which replica to read from, and the
leader answers it no records meanwhile; the consumer must follow.

The mock names the replica ``set_partition_follower`` set, whatever rack the consumer sends
(Kafka names one only when the consumer's rack matches a replica's, with
``replica.selector.class=RackAwareReplicaSelector``). Tansu names none.
"""

from __future__ import annotations

import asyncio

import pytest

from kontrakt._types import TopicPartition
from kontrakt.clients import AsyncKafkaClient
from kontrakt.clients.consumer import AsyncConsumer
from kontrakt.protocol.records import RecordBatchBuilder
from kontrakt.testing import MockCluster
from tests.integration.raw_ops import produce

pytestmark = [pytest.mark.integration]

_FETCH = 1


async def _produce(bootstrap: str, topic: str, count: int) -> None:
    async with AsyncKafkaClient(bootstrap_servers=bootstrap) as client:
        b = RecordBatchBuilder()
        for i in range(count):
            b.append(1_700_000_000_000 + i, None, f"v{i}".encode())
        part = await produce(client, topic, 0, b.build())
        assert part.error_code == 0, part


def test_consumer_fetches_from_the_replica_the_leader_names(mock_cluster: MockCluster,
                                                             topic_name: str) -> None:
    mock_cluster.create_topic(topic_name, 1, 3)
    bs = mock_cluster.bootstrap_servers
    tp = TopicPartition(topic_name, 0)

    async def main() -> None:
        await _produce(bs, topic_name, 10)
        async with AsyncKafkaClient(bootstrap_servers=bs) as client:
            meta = await client.refresh_metadata([topic_name])
            leader = meta.topics[topic_name].partitions[0].leader
            follower = next(b for b in meta.brokers if b != leader)
        mock_cluster.set_partition_follower(topic_name, 0, follower)
        mock_cluster.start_request_tracking()
        try:
            async with AsyncConsumer(bootstrap_servers=bs, client_rack="rack-a",
                                     auto_offset_reset="earliest") as c:
                c.assign([tp])
                got: list[bytes] = []
                loop = asyncio.get_running_loop()
                end = loop.time() + 10
                while len(got) < 10 and loop.time() < end:
                    for recs in (await c.getmany(timeout=0.2)).values():
                        got.extend(r.value for r in recs)
            fetched_from = {r.broker_id for r in mock_cluster.get_requests()
                            if r.api_key == _FETCH}
        finally:
            mock_cluster.stop_request_tracking()
        assert got == [f"v{i}".encode() for i in range(10)]
        assert follower in fetched_from

    asyncio.run(main())
