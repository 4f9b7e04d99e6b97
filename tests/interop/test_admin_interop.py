"""Admin interop on Tansu with confluent-kafka (test-only peer) as the oracle.

- Topics and configs created by kontrakt are seen identically by confluent-kafka's AdminClient.
- Groups formed by confluent-kafka consumers are described correctly by kontrakt: members,
  decoded assignments, committed offsets and lag.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kontrakt._types import TopicPartition as TP
from kontrakt.clients.admin import (
    AdminClient,
    AlterConfigOp,
    ConfigResource,
    ConsumerGroupState,
    NewTopic,
    OffsetSpec,
)
from kontrakt.testing import TansuBroker

ck = pytest.importorskip("confluent_kafka")
ck_admin = pytest.importorskip("confluent_kafka.admin")

pytestmark = [pytest.mark.interop, pytest.mark.integration]


@pytest.fixture
def admin(tansu_broker: TansuBroker) -> Iterator[AdminClient]:
    with AdminClient(bootstrap_servers=tansu_broker.bootstrap_servers,
                     retry_backoff_ms=20) as client:
        yield client


def test_confluent_sees_topics_and_configs_created_by_kontrakt(
        admin: AdminClient, tansu_broker: TansuBroker, topic_name: str) -> None:
    created = admin.create_topics([NewTopic(topic_name, 3, 1, config={
        "cleanup.policy": "compact", "retention.ms": "86400000"})])
    res = ConfigResource(ConfigResource.Type.TOPIC, topic_name)
    admin.incremental_alter_configs({res: [AlterConfigOp("max.message.bytes", "65536")]})

    peer = ck_admin.AdminClient({"bootstrap.servers": tansu_broker.bootstrap_servers})
    md = peer.list_topics(topic=topic_name, timeout=10)
    theirs = md.topics[topic_name]
    assert theirs.error is None
    ours = admin.describe_topics([topic_name])[topic_name]
    assert sorted(theirs.partitions) == [p.partition for p in ours.partitions]
    for p in ours.partitions:
        tp = theirs.partitions[p.partition]
        assert (tp.leader, tuple(tp.replicas), tuple(tp.isrs)) == (p.leader, p.replicas, p.isr)

    described = peer.describe_topics(
        ck.TopicCollection([topic_name]), request_timeout=10)[topic_name].result()
    tid = described.topic_id
    mask = (1 << 64) - 1
    their_id = uuid.UUID(int=((tid.get_most_significant_bits() & mask) << 64)
                         | (tid.get_least_significant_bits() & mask))
    assert their_id == created[topic_name].topic_id

    cres = ck_admin.ConfigResource(ck_admin.ResourceType.TOPIC, topic_name)
    their_cfg = peer.describe_configs([cres])[cres].result(timeout=10)
    our_cfg = admin.describe_configs([res])[res]
    assert {k: e.value for k, e in their_cfg.items()} == {k: e.value for k, e in our_cfg.items()}
    assert their_cfg["max.message.bytes"].value == "65536"
    assert their_cfg["cleanup.policy"].value == "compact"


def _consumer(bootstrap: str, group: str, topic: str) -> Any:
    c = ck.Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "client.id": "peer-" + group,
        "session.timeout.ms": 2000, "heartbeat.interval.ms": 300,
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "partition.assignment.strategy": "range",
    })
    c.subscribe([topic])
    return c


def test_kontrakt_describes_a_group_formed_by_confluent_consumers(
        admin: AdminClient, tansu_broker: TansuBroker, topic_name: str) -> None:
    bootstrap = tansu_broker.bootstrap_servers
    admin.create_topics([NewTopic(topic_name, 2, 1)])
    producer = ck.Producer({"bootstrap.servers": bootstrap})
    for i in range(6):  # three records per partition, one per batch
        producer.produce(topic_name, value=b"v%d" % i, partition=i % 2)
        producer.flush(10)
    group = topic_name + "-grp"
    consumer = _consumer(bootstrap, group, topic_name)
    try:
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < 4 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg)
        assert len(got) >= 4
        # commit the position after the first record read from each partition
        first: dict[int, int] = {}
        for m in got:
            first.setdefault(m.partition(), m.offset())
        consumer.commit(offsets=[ck.TopicPartition(topic_name, p, o + 1)
                                 for p, o in first.items()], asynchronous=False)

        desc = admin.describe_consumer_groups([group])[group]
        assert desc.state is ConsumerGroupState.STABLE
        (member,) = desc.members
        assert member.member_id == consumer.memberid()
        # Tansu's DescribeGroups leaves client id, host, protocol name and the members'
        # metadata/assignment blobs empty (measured), so decoding of those blobs from a real
        # peer cannot be checked here; tests/unit/admin/test_admin_crafted.py decodes blobs
        # written by the group codec (itself checked against kafka-python's assignors).
        if member.raw_assignment:
            assert sorted(member.assignment.topic_partitions) == [TP(topic_name, 0),
                                                                  TP(topic_name, 1)]
            assert member.subscription == (topic_name,)
            assert member.client_id == "peer-" + group

        listed = {g.group_id: g for g in admin.list_consumer_groups()}
        assert listed[group].protocol_type == "consumer"

        committed = admin.list_consumer_group_offsets(group)
        expected = {TP(topic_name, p): o + 1 for p, o in first.items()}
        assert {tp: om.offset for tp, om in committed.items() if om} == expected
        ends = admin.list_offsets({tp: OffsetSpec.latest() for tp in expected})
        lag = {tp: ends[tp].offset - off for tp, off in expected.items()}
        assert lag == {tp: 3 - off for tp, off in expected.items()}
        # confluent-kafka agrees on the committed offsets
        theirs = consumer.committed([ck.TopicPartition(topic_name, p) for p in (0, 1)],
                                    timeout=10)
        assert {TP(t.topic, t.partition): t.offset for t in theirs} == expected
    finally:
        consumer.close()
