"""reset_configs against Tansu 0.6.0, which applies IncrementalAlterConfigs DELETE to a
topic's configs (and describes only the keys set). Tansu reports every config as
DEFAULT_CONFIG, so resetting every config set at a resource (keys None) is tested
against a crafted broker in tests/unit/admin/test_admin_reset_configs.py.
"""

from __future__ import annotations

import pytest

from kontrakt.clients.admin import (
    AdminClient,
    AlterConfigOp,
    ConfigResource,
    NewTopic,
)
from kontrakt.testing import TansuBroker

pytestmark = pytest.mark.integration


def test_named_topic_configs_go_back_to_their_defaults(tansu_broker: TansuBroker,
                                                       topic_name: str) -> None:
    # Broken variant tried: SET to "" instead of DELETE leaves "retention.ms" described.
    with AdminClient(bootstrap_servers=tansu_broker.bootstrap_servers,
                     retry_backoff_ms=20, default_api_timeout_ms=10000) as admin:
        admin.create_topics([NewTopic(topic_name, 1)])
        r = ConfigResource("topic", topic_name)
        admin.incremental_alter_configs({r: [AlterConfigOp("retention.ms", "1000"),
                                             AlterConfigOp("cleanup.policy", "compact")]})
        assert admin.reset_configs({r: ["retention.ms"]}) == {r: ("retention.ms",)}
        described = admin.describe_configs([r])[r]
        assert "retention.ms" not in described
        assert described["cleanup.policy"].value == "compact"
