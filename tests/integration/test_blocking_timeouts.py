"""A blocking call that times out inside keeps the operation's own error and message.

Since Python 3.11 ``concurrent.futures.TimeoutError`` is the builtin ``TimeoutError``, which
``KafkaTimeoutError`` subclasses: a bridge that caught it around ``future.result(timeout)``
replaced every inner timeout with ``operation did not finish within Nones``. One test per
blocking client, on the interpreter running the suite; ``test_other_pythons.py`` runs this file
again under 3.10, 3.12 and 3.13 (each where an interpreter is found), in the same suite.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest

from kontrakt import AdminClient, Consumer, KafkaClient, Producer, TopicPartition
from kontrakt.errors import KafkaTimeoutError
from kontrakt.protocol.messages import MetadataRequest
from kontrakt.testing import MockCluster, TansuBroker

pytestmark = pytest.mark.integration

LOST = "operation did not finish within"


def test_producer_send_to_a_missing_topic_names_the_topic(tansu_broker: TansuBroker) -> None:
    with Producer(bootstrap_servers=tansu_broker.bootstrap_servers, max_block_ms=300) as p:
        began = time.monotonic()
        with pytest.raises(KafkaTimeoutError) as info:
            p.send("no-such-topic", b"v")
        assert time.monotonic() - began < 5.0
    message = str(info.value)
    assert LOST not in message
    assert "'no-such-topic' not found in the metadata within max.block.ms" in message
    assert "UNKNOWN_TOPIC_OR_PARTITION" in message


def test_consumer_offset_lookup_names_the_partition(tansu_broker: TansuBroker) -> None:
    with Consumer(bootstrap_servers=tansu_broker.bootstrap_servers) as c, \
            pytest.raises(KafkaTimeoutError) as info:
        c.end_offsets([TopicPartition("no-such-topic", 0)], timeout=0.5)
    assert LOST not in str(info.value)
    assert "no-such-topic-0" in str(info.value)


def _slow_cluster(mock_cluster_factory: Callable[..., MockCluster]) -> MockCluster:
    mc = mock_cluster_factory(1)
    mc.create_topic("t", 1)
    return mc


def test_kafka_client_request_timeout_names_the_request(
        mock_cluster_factory: Callable[..., MockCluster]) -> None:
    mc = _slow_cluster(mock_cluster_factory)
    with KafkaClient(bootstrap_servers=mc.bootstrap_servers) as client:
        client.refresh_metadata()  # connected before the broker slows down
        mc.set_rtt(1, 3000)
        with pytest.raises(KafkaTimeoutError) as info:
            client.request(MetadataRequest(topics=None), node=1, timeout=0.3)
        mc.set_rtt(1, 0)
    message = str(info.value)
    assert LOST not in message
    unanswered = rf"Metadata v\d+ to {mc.bootstrap_servers} got no response within 0.3s"
    assert re.search(unanswered, message), message


def test_admin_call_timeout_keeps_its_message(
        mock_cluster_factory: Callable[..., MockCluster]) -> None:
    mc = _slow_cluster(mock_cluster_factory)
    with AdminClient(bootstrap_servers=mc.bootstrap_servers) as admin:
        admin.describe_cluster()
        mc.set_rtt(1, 3000)
        with pytest.raises(KafkaTimeoutError) as info:
            admin.describe_cluster(timeout=0.3)
        mc.set_rtt(1, 0)
    message = str(info.value)
    assert LOST not in message
    # The request that went unanswered, and where it went.
    unanswered = rf"Metadata v\d+ to {mc.bootstrap_servers} got no response within"
    assert re.search(unanswered, message), message
