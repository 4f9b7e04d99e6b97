"""Admin routing on the librdkafka mock cluster (3 brokers): requests split per partition
leader, retried after NOT_LEADER_OR_FOLLOWER, and group offset calls sent to the coordinator.
The mock has no admin APIs but is faithful for ListOffsets, leaders and coordinators."""

from __future__ import annotations

import asyncio

import pytest

from kontrakt._types import TopicPartition as TP
from kontrakt.clients.admin import AsyncAdminClient, OffsetSpec
from kontrakt.testing import MockCluster

pytestmark = pytest.mark.integration


def test_list_offsets_is_split_per_leader_and_retried(mock_cluster: MockCluster,
                                                      topic_name: str) -> None:
    mock_cluster.create_topic(topic_name, 3, 1)
    for p, broker in enumerate((1, 2, 3)):
        mock_cluster.set_partition_leader(topic_name, p, broker)

    async def main() -> None:
        async with AsyncAdminClient(bootstrap_servers=mock_cluster.bootstrap_servers,
                                    retry_backoff_ms=10) as a:
            mock_cluster.start_request_tracking()
            specs = {TP(topic_name, p): OffsetSpec.latest() for p in range(3)}
            out = await a.list_offsets(specs)
            assert {tp: r.offset for tp, r in out.items()} == dict.fromkeys(specs, 0)
            brokers = sorted(r.broker_id for r in mock_cluster.get_requests()
                             if r.api_key == 2)
            assert brokers == [1, 2, 3]

            mock_cluster.clear_requests()
            mock_cluster.push_request_errors(2, [6])  # NOT_LEADER_OR_FOLLOWER, once
            out = await a.list_offsets({TP(topic_name, 0): OffsetSpec.earliest()})
            assert out[TP(topic_name, 0)].offset == 0
            assert len([r for r in mock_cluster.get_requests() if r.api_key == 2]) == 2

    asyncio.run(main())


def test_group_offsets_go_to_the_coordinator(mock_cluster: MockCluster,
                                             topic_name: str) -> None:
    mock_cluster.create_topic(topic_name, 1, 1)
    group = topic_name + "-g"
    mock_cluster.coordinator_set("group", group, 3)

    async def main() -> None:
        async with AsyncAdminClient(bootstrap_servers=mock_cluster.bootstrap_servers,
                                    retry_backoff_ms=10) as a:
            mock_cluster.start_request_tracking()
            mock_cluster.push_request_errors(9, [16])  # NOT_COORDINATOR, once
            out = await a.list_consumer_group_offsets(group, [TP(topic_name, 0)])
            assert out == {TP(topic_name, 0): None}
            fetches = [r.broker_id for r in mock_cluster.get_requests() if r.api_key == 9]
            assert fetches == [3, 3]

    asyncio.run(main())
