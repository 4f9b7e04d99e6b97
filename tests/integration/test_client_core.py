"""The protocol and network core against real brokers, through ``request()`` only.

Tansu: ApiVersions, Metadata, CreateTopics, Produce of a v2 batch per codec, Fetch,
ListOffsets earliest. librdkafka mock cluster: the same on three brokers, plus ListOffsets
latest (Tansu's LATEST is off for multi-record batches, see TEST-BROKERS.md) and version
negotiation against a capped API.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from kontrakt.clients import AsyncKafkaClient, KafkaClient
from kontrakt.errors import KafkaConnectionError
from kontrakt.protocol.messages import (
    ApiVersionsRequest,
    MetadataRequest,
    ProduceRequest,
)
from kontrakt.protocol.records import CompressionType, RecordBatchBuilder
from kontrakt.testing import MockCluster, TansuBroker
from tests.integration.raw_ops import create_topic, fetch, list_offset, produce

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _batch(codec: str, n: int = 20, tag: str = "") -> tuple[bytes, list[tuple[bytes, bytes]]]:
    b = RecordBatchBuilder(compression=codec)
    now = int(time.time() * 1000)
    sent = []
    for i in range(n):
        key, value = f"k{i}".encode(), f"{tag}value-{i}-{codec}".encode() * 3
        b.append(now + i, key, value, [("h", str(i).encode()), ("codec", codec.encode())])
        sent.append((key, value))
    return b.build(), sent


async def _round_trip_all_codecs(client: AsyncKafkaClient, topic: str) -> None:
    expected: list[tuple[bytes, bytes]] = []
    for codec in CODECS:
        batch, sent = _batch(codec)
        part = await produce(client, topic, 0, batch)
        assert part.error_code == 0, part
        assert part.base_offset == len(expected)
        expected.extend(sent)
    got: list[tuple[bytes | None, bytes | None]] = []
    offset = 0
    for _ in range(20):
        part, records = await fetch(client, topic, 0, offset)
        assert part.error_code == 0
        for r in records:
            got.append((r.key, r.value))
            assert r.headers[0] == ("h", r.key[1:] if r.key else b"")
        if records:
            offset = records[-1].offset + 1
        if len(got) >= len(expected):
            break
    assert got == expected
    assert [r.offset for r in records][-1] == len(expected) - 1


@pytest.mark.integration
def test_tansu_requests(tansu_broker: TansuBroker, topic_name: str) -> None:
    async def main() -> None:
        async with AsyncKafkaClient(bootstrap_servers=tansu_broker.bootstrap_servers) as client:
            versions = await client.request(ApiVersionsRequest(
                client_software_name="kontrakt", client_software_version="test"))
            assert versions.error_code == 0
            keys = {k.api_key for k in versions.api_keys}
            assert {0, 1, 2, 3, 18, 19} <= keys

            meta = await client.request(MetadataRequest(topics=None))
            assert meta.brokers and meta.brokers[0].port == tansu_broker.port

            assert await create_topic(client, topic_name, 1) == 0
            assert await create_topic(client, topic_name, 1) == 36  # TOPIC_ALREADY_EXISTS
            await _round_trip_all_codecs(client, topic_name)

            earliest = await list_offset(client, topic_name, 0, -2)
            assert earliest.error_code == 0 and earliest.offset == 0

    asyncio.run(main())


@pytest.mark.integration
def test_mock_cluster_requests(mock_cluster: MockCluster, topic_name: str) -> None:
    mock_cluster.create_topic(topic_name, partitions=3, replication_factor=3)

    async def main() -> None:
        async with AsyncKafkaClient(bootstrap_servers=mock_cluster.bootstrap_servers) as client:
            meta = await client.refresh_metadata([topic_name])
            assert len(meta.brokers) == 3
            assert sorted(meta.topics[topic_name].partitions) == [0, 1, 2]
            await _round_trip_all_codecs(client, topic_name)
            latest = await list_offset(client, topic_name, 0, -1)
            assert latest.error_code == 0 and latest.offset == 20 * len(CODECS)
            earliest = await list_offset(client, topic_name, 0, -2)
            assert earliest.offset == 0

    asyncio.run(main())


@pytest.mark.integration
def test_mock_cluster_version_cap_is_negotiated(mock_cluster: MockCluster,
                                                topic_name: str) -> None:
    mock_cluster.create_topic(topic_name, partitions=1, replication_factor=1)
    mock_cluster.set_apiversion(ProduceRequest.API_KEY, 3, 7)

    async def main() -> None:
        async with AsyncKafkaClient(bootstrap_servers=mock_cluster.bootstrap_servers) as client:
            node, _ = (await client.refresh_metadata([topic_name])).topics[topic_name] \
                .partitions[0].leader, None
            conn = await client.connection(node)
            assert conn.negotiate(ProduceRequest) == 7
            batch, _sent = _batch("lz4", 3)
            part = await produce(client, topic_name, 0, batch)
            assert part.error_code == 0

    asyncio.run(main())


@pytest.mark.integration
def test_acks_zero_produce_returns_without_response(tansu_broker: TansuBroker,
                                                   topic_name: str) -> None:
    async def main() -> None:
        async with AsyncKafkaClient(bootstrap_servers=tansu_broker.bootstrap_servers) as client:
            assert await create_topic(client, topic_name) == 0
            batch, sent = _batch("none", 5)
            assert await produce(client, topic_name, 0, batch, acks=0) is None
            # The broker still appends the batch: wait for it to become visible.
            deadline = time.monotonic() + 5
            records: list[object] = []
            while time.monotonic() < deadline and len(records) < len(sent):
                _part, records = await fetch(client, topic_name, 0, 0)  # type: ignore[assignment]
            assert len(records) == len(sent)

    asyncio.run(main())


@pytest.mark.integration
def test_sync_client_and_broker_failover(mock_cluster: MockCluster, topic_name: str) -> None:
    mock_cluster.create_topic(topic_name, partitions=1, replication_factor=3)
    with KafkaClient(bootstrap_servers=mock_cluster.bootstrap_servers,
                     request_timeout_ms=3000, reconnect_backoff_ms=10) as client:
        meta = client.refresh_metadata([topic_name])
        first = meta.topics[topic_name].partitions[0].leader
        other = next(b for b in meta.brokers if b != first)
        mock_cluster.set_partition_leader(topic_name, 0, other)
        # A refresh sees the leader move.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if client.refresh_metadata().topics[topic_name].partitions[0].leader == other:
                break
        assert client.cluster.leader_for(topic_name, 0) == other
        # Requests still get answered while one broker is down.
        mock_cluster.broker_down(first)
        try:
            resp = client.request(MetadataRequest(topics=None), node=other)
            assert len(resp.brokers) >= 2
        finally:
            mock_cluster.broker_up(first)


_ = CompressionType


def test_callers_waiting_out_one_reconnect_backoff_share_one_connection(
        mock_cluster: MockCluster) -> None:
    """Two callers (say the metadata loop and a producer's sender) that both wait out a
    broker's reconnect backoff get one connection: a second one replaced the first in the
    pool, and the first was never closed (a ResourceWarning when collected)."""
    async def main() -> None:
        async with AsyncKafkaClient(bootstrap_servers=mock_cluster.bootstrap_servers,
                                    reconnect_backoff_ms=200,
                                    reconnect_backoff_max_ms=200) as client:
            mock_cluster.broker_down(1)
            with pytest.raises(KafkaConnectionError):
                await client.connection(1)  # refused: the next attempt waits 200 ms
            mock_cluster.broker_up(1)
            first, second = await asyncio.gather(client.connection(1), client.connection(1))
            assert first is second

    asyncio.run(main())
