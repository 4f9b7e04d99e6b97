"""wait_for_topics against Tansu 0.6.0: a created topic is usable at once there; a topic
never created times out naming it. The waiting through partitions without a leader is
tested against a crafted broker in tests/unit/admin/test_admin_wait_for_topics.py.
"""

from __future__ import annotations

import time

import pytest

from kontrakt.clients.admin import AdminClient, NewTopic
from kontrakt.errors import KafkaTimeoutError
from kontrakt.testing import TansuBroker

pytestmark = pytest.mark.integration


def test_created_topics_are_waited_for_missing_ones_time_out(tansu_broker: TansuBroker,
                                                              topic_name: str) -> None:
    # Broken variant tried: Metadata with allow_auto_topic_creation=True makes Tansu create
    # the missing topic, and the call returns.
    with AdminClient(bootstrap_servers=tansu_broker.bootstrap_servers,
                     retry_backoff_ms=20, default_api_timeout_ms=10000) as admin:
        admin.create_topics([NewTopic(topic_name, 3)])
        admin.wait_for_topics([topic_name], timeout=5)
        missing = topic_name + "-missing"
        start = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match=f"'{missing}': UNKNOWN_TOPIC_OR_PARTITION"):
            admin.wait_for_topics([topic_name, missing], timeout=1)
        assert time.monotonic() - start < 5
        assert missing not in admin.list_topics()
