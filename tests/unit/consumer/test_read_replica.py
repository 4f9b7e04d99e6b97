"""The fetcher's choice of replica to read from (KIP-392) as metadata changes.

The failovers themselves are tested against librdkafka's mock cluster
(tests/integration/test_follower_fetching.py). A leader change is tested here: the mock's
follower answers a fetch that carries the old leader epoch with FENCED_LEADER_EPOCH, so
there the error path, not the metadata, always sends the consumer back first.
"""

from __future__ import annotations

import time
import uuid
from types import SimpleNamespace
from typing import Any

from kontrakt._config import ClientConfig
from kontrakt._types import TopicPartition
from kontrakt.clients.cluster import ClusterMetadata, PartitionInfo, TopicInfo
from kontrakt.clients.consumer._config import CONSUMER_OPTIONS, consumer_settings
from kontrakt.clients.consumer._fetcher import FetchBuffer, Fetcher
from kontrakt.clients.consumer._subscription import SubscriptionState

TP = TopicPartition("t", 0)


def _set_leader(cluster: ClusterMetadata, leader: int, epoch: int) -> None:
    cluster.topics["t"] = TopicInfo("t", uuid.uuid4(), False, {0: PartitionInfo(
        "t", 0, leader=leader, leader_epoch=epoch, replicas=(1, 2, 3), isr=(1, 2, 3))})


def _fetcher() -> tuple[Fetcher, ClusterMetadata]:
    cluster = ClusterMetadata()
    client: Any = SimpleNamespace(cluster=cluster)  # only its metadata is read here
    subs = SubscriptionState()
    subs.assign([TP])
    cfg = consumer_settings(ClientConfig(CONSUMER_OPTIONS, None))
    return Fetcher(client, subs, FetchBuffer(1 << 20), cfg), cluster


def test_a_new_leader_epoch_forgets_the_replica_the_old_leader_named() -> None:
    f, cluster = _fetcher()
    _set_leader(cluster, 1, 5)
    f._check_leader_epochs()  # the first epoch seen is no change
    named = (2, time.monotonic() + 300)
    f._read_replicas[TP] = named
    f._check_leader_epochs()
    assert f._read_replicas == {TP: named}
    _set_leader(cluster, 3, 6)
    f._check_leader_epochs()
    assert TP not in f._read_replicas


def test_the_first_leader_epoch_seen_keeps_the_named_replica() -> None:
    f, cluster = _fetcher()
    named = (2, time.monotonic() + 300)
    f._read_replicas[TP] = named
    _set_leader(cluster, 1, 5)
    f._check_leader_epochs()
    assert f._read_replicas == {TP: named}
