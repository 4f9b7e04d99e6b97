"""list_groups against Tansu 0.6.0, which answers ListGroups v5 with each group's type.

Measured: Tansu ignores the states and types filters (it lists every group whatever is
asked) and reports a group's state as empty (UNKNOWN here) and a group that only committed
offsets with protocol type "consumer". So this checks a real v5 answer's decoding (the
type); the filters, merging over brokers, errors and retries are tested against crafted
brokers in tests/unit/admin/test_admin_list_groups.py.
"""

from __future__ import annotations

import pytest

from kontrakt._types import TopicPartition as TP
from kontrakt.clients.admin import AdminClient, ConsumerGroupType, NewTopic
from kontrakt.testing import TansuBroker

pytestmark = pytest.mark.integration


def test_a_committed_group_is_listed_as_classic_until_deleted(tansu_broker: TansuBroker,
                                                              topic_name: str) -> None:
    # Broken variant tried: GroupListing built with the protocol type as its type
    # (ConsumerGroupType.parse(g.protocol_type)) lists it as CONSUMER.
    group = topic_name + "-g"
    with AdminClient(bootstrap_servers=tansu_broker.bootstrap_servers,
                     retry_backoff_ms=20, default_api_timeout_ms=10000) as admin:
        admin.create_topics([NewTopic(topic_name, 1)])
        admin.alter_consumer_group_offsets(group, {TP(topic_name, 0): 3})
        listed = {g.group_id: g for g in admin.list_groups()}
        assert listed[group].type is ConsumerGroupType.CLASSIC
        assert admin.delete_consumer_groups([group]) == {group: None}
        assert group not in {g.group_id for g in admin.list_groups(timeout=5)}
