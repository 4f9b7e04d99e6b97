"""describe_topic_partitions against Tansu 0.6.0, which answers DescribeTopicPartitions v0.

Measured: Tansu ignores response_partition_limit (one page, no cursor) and answers an
empty topic list with no topics, so this checks a real answer's partitions and an unknown
topic's error; paging is tested against a crafted broker in
tests/unit/admin/test_admin_describe_topic_partitions.py.
"""

from __future__ import annotations

import pytest

from kontrakt.clients.admin import AdminClient, NewTopic
from kontrakt.protocol.errors import UnknownTopicOrPartitionError
from kontrakt.testing import TansuBroker

pytestmark = pytest.mark.integration


def test_a_real_answer_matches_metadata(tansu_broker: TansuBroker, topic_name: str) -> None:
    # Broken variant tried: the single page's results without Fatal unwrapped give a
    # Fatal, not the UnknownTopicOrPartitionError, for the missing topic.
    with AdminClient(bootstrap_servers=tansu_broker.bootstrap_servers,
                     retry_backoff_ms=20, default_api_timeout_ms=10000) as admin:
        created = admin.create_topics([NewTopic(topic_name, 3)])[topic_name]
        page = admin.describe_topic_partitions([topic_name, topic_name + "-none"],
                                               return_exceptions=True)
        assert page.next_cursor is None
        assert isinstance(page.topics[topic_name + "-none"], UnknownTopicOrPartitionError)
        desc = page.topics[topic_name]
        assert [p.partition for p in desc.partitions] == [0, 1, 2]
        for p in desc.partitions:
            assert p.leader >= 0
            assert p.replicas == p.isr == (p.leader,)
        assert desc.topic_id == created.topic_id
