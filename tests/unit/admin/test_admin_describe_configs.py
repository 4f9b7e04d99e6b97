"""describe_configs against a crafted broker: an error the broker answers for a resource
is final, as in the Java client, even UNKNOWN_TOPIC_OR_PARTITION (retriable as a class):
asked about a topic that does not exist, the call fails at once instead of asking again
until its timeout."""

from __future__ import annotations

import time

import pytest

from kontrakt.clients.admin import ConfigResource
from kontrakt.errors import PartialFailureError
from kontrakt.protocol.errors import UnknownTopicOrPartitionError
from tests.unit.admin.test_admin_crafted import run
from tests.unit.admin.test_admin_reset_configs import DESCRIBE, Peer

_UNKNOWN_TOPIC = UnknownTopicOrPartitionError.code


def test_a_missing_topic_fails_at_once() -> None:
    peer = Peer(describe_errors={"gone": _UNKNOWN_TOPIC})
    started = time.monotonic()
    with pytest.raises(UnknownTopicOrPartitionError):
        run(peer.broker, lambda a: a.describe_configs([ConfigResource("topic", "gone")],
                                                      timeout=10))
    assert time.monotonic() - started < 5
    assert [k for k, _v, _r in peer.broker.requests].count(DESCRIBE) == 1


def test_the_other_resources_are_described() -> None:
    peer = Peer(describe_errors={"gone": _UNKNOWN_TOPIC})
    with pytest.raises(PartialFailureError) as info:
        run(peer.broker, lambda a: a.describe_configs(
            [ConfigResource("topic", "gone"), ConfigResource("topic", "t")], timeout=10))
    results = info.value.results
    assert isinstance(results[ConfigResource("topic", "gone")], UnknownTopicOrPartitionError)
    assert "retention.ms" in results[ConfigResource("topic", "t")]
    assert [k for k, _v, _r in peer.broker.requests].count(DESCRIBE) == 1
