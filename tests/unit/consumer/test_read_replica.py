"""The fetcher's choice of replica to read from (KIP-392) as metadata and the assignment
change.

The failovers themselves are tested against librdkafka's mock cluster
(tests/integration/test_follower_fetching.py). A leader change is tested here: the mock's
follower answers a fetch that carries the old leader epoch with FENCED_LEADER_EPOCH, so
there the error path, not the metadata, always sends the consumer back first.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from kontrakt._config import ClientConfig
from kontrakt._types import TopicPartition
from kontrakt.clients.cluster import BrokerInfo, ClusterMetadata, PartitionInfo, TopicInfo
from kontrakt.clients.consumer._config import CONSUMER_OPTIONS, consumer_settings
from kontrakt.clients.consumer._fetcher import FetchBuffer, Fetcher
from kontrakt.clients.consumer._subscription import SubscriptionState
from kontrakt.protocol.messages import FetchResponse

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
    st = f.subs.assignment[TP]
    _set_leader(cluster, 1, 5)
    f._check_leader_epochs()  # the first epoch seen is no change
    named = (2, time.monotonic() + 300)
    st.read_replica = named
    f._check_leader_epochs()
    assert st.read_replica == named
    _set_leader(cluster, 3, 6)
    f._check_leader_epochs()
    assert st.read_replica is None


def test_the_first_leader_epoch_seen_keeps_the_named_replica() -> None:
    f, cluster = _fetcher()
    st = f.subs.assignment[TP]
    named = (2, time.monotonic() + 300)
    st.read_replica = named
    _set_leader(cluster, 1, 5)
    f._check_leader_epochs()
    assert st.read_replica == named


class _Connections:
    """Connections to nodes 1 (the leader, which names replica 2 to read from) and 2 (the
    replica, whose first answer waits for ``release``); records each fetch's (node,
    partitions)."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, list[TopicPartition]]] = []
        self.release = asyncio.Event()

    async def connection(self, node: int) -> Any:
        return _Connection(self, node)


class _Connection:
    def __init__(self, nodes: _Connections, node: int) -> None:
        self.nodes, self.node = nodes, node

    def negotiate(self, message: Any) -> int:
        return 12

    async def send(self, req: Any, *, version: int, timeout: float) -> Any:
        tps = [TopicPartition(t.topic, p.partition) for t in req.topics for p in t.partitions]
        self.nodes.sent.append((self.node, tps))
        if self.node == 2:
            await self.nodes.release.wait()
        else:
            await asyncio.sleep(0.005)
        R = FetchResponse.FetchableTopicResponse
        return FetchResponse(error_code=0, session_id=0, responses=[R(topic=TP.topic, partitions=[
            R.PartitionData(partition_index=TP.partition, error_code=0, high_watermark=10,
                            log_start_offset=0, records=None,
                            preferred_read_replica=2 if self.node == 1 else -1)])])


@pytest.mark.parametrize("leaves", ["unassigned", "retired"])
def test_a_partition_assigned_again_asks_its_leader_again(leaves: str) -> None:
    """The replica a leader named goes with the partition when it leaves the assignment
    (assign(), a revocation, unsubscribe(): ``retire``), as in the Java client, whose
    partition state holds it: assigned again, even before the fetcher plans in between, its
    first fetch goes to its leader, which names a replica anew (or none)."""
    cluster = ClusterMetadata()
    _set_leader(cluster, 1, 5)
    cluster.brokers = {n: BrokerInfo(n, "127.0.0.1", 9000 + n) for n in (1, 2, 3)}
    nodes = _Connections()
    client: Any = SimpleNamespace(
        cluster=cluster, settings=SimpleNamespace(metadata_max_age=300.0),
        connection=nodes.connection, request_metadata_refresh=lambda: None,
        add_topics=lambda topics: None)
    subs = SubscriptionState()
    subs.assign([TP])
    subs.assignment[TP].seek(0)
    cfg = consumer_settings(ClientConfig(CONSUMER_OPTIONS, {"client.rack": "a"}))
    f = Fetcher(client, subs, FetchBuffer(1 << 20), cfg)

    async def until(ok: Any) -> None:
        deadline = time.monotonic() + 5
        while not ok():
            assert time.monotonic() < deadline, nodes.sent
            await asyncio.sleep(0.005)

    first: list[int] = []

    async def main() -> None:
        f.start()
        f.wake()
        try:
            # The leader named replica 2, which is being fetched from (its answer held).
            await until(lambda: any(node == 2 for node, _ in nodes.sent))
            if leaves == "retired":
                subs.retire()
            else:
                subs.assign([])
            subs.assign([TP])
            subs.assignment[TP].seek(0)
            mark = len(nodes.sent)
            nodes.release.set()  # (its answer is for the old state: dropped)
            await until(lambda: any(TP in tps for _, tps in nodes.sent[mark:]))
            first.append(next(node for node, tps in nodes.sent[mark:] if TP in tps))
        finally:
            await f.close()

    asyncio.run(main())
    assert first == [1], nodes.sent

