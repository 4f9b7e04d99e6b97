"""Admin operations against Tansu, for what it implements faithfully (see TEST-BROKERS.md):
CreateTopics (incl. TOPIC_ALREADY_EXISTS), DeleteTopics, IncrementalAlterConfigs, ListGroups,
DescribeGroups, DeleteGroups, DescribeCluster, offset commit/fetch. DescribeConfigs is checked
only for explicitly set keys (all Tansu returns). What Tansu lacks (CreatePartitions, legacy
AlterConfigs, DescribeLogDirs, OffsetDelete) is checked to end in a typed error; the logic of
those operations is tested against crafted responses in tests/unit/admin/.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest

import kontrakt.errors
from kontrakt._types import OffsetAndMetadata
from kontrakt._types import TopicPartition as TP
from kontrakt.clients.admin import (
    AdminClient,
    AlterConfigOp,
    AlterConfigOpType,
    AsyncAdminClient,
    ConfigResource,
    ConsumerGroupState,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)
from kontrakt.errors import PartialFailureError, UnsupportedVersionError
from kontrakt.protocol.errors import (
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from kontrakt.protocol.records import RecordBatchBuilder
from kontrakt.testing import TansuBroker
from tests.integration.raw_ops import produce

pytestmark = [pytest.mark.integration, pytest.mark.also_on_cluster]


@pytest.fixture
def admin(tansu_broker: TansuBroker) -> Iterator[AdminClient]:
    with AdminClient(bootstrap_servers=tansu_broker.bootstrap_servers,
                     retry_backoff_ms=20, default_api_timeout_ms=10000) as client:
        yield client


def test_create_describe_list_and_delete_topics(admin: AdminClient, topic_name: str) -> None:
    a, b = topic_name + "-a", topic_name + "-b"
    created = admin.create_topics([NewTopic(a, 3, 1), NewTopic(b, 1, 1)])
    assert created[a].num_partitions == 3
    assert isinstance(created[a].topic_id, uuid.UUID)
    assert {a, b} <= set(admin.list_topics())

    described = admin.describe_topics([a, b])
    assert [p.partition for p in described[a].partitions] == [0, 1, 2]
    assert described[a].topic_id == created[a].topic_id
    broker = admin.describe_cluster().nodes[0].id
    for p in described[a].partitions:
        assert (p.leader, p.replicas, p.isr) == (broker, (broker,), (broker,))

    assert admin.delete_topics([a]) == {a: None}
    assert a not in admin.list_topics()
    assert b in admin.list_topics()


def test_creating_one_existing_topic_raises_the_brokers_error(admin: AdminClient,
                                                             topic_name: str) -> None:
    admin.create_topics([NewTopic(topic_name, 1)])
    # As users write it: the class from kontrakt.errors, for a call about one topic.
    with pytest.raises(kontrakt.errors.TopicAlreadyExistsError) as info:
        admin.create_topics([NewTopic(topic_name, 1)])
    assert "TOPIC_ALREADY_EXISTS" in str(info.value)
    assert topic_name in str(info.value)


def test_one_existing_topic_does_not_hide_the_others(admin: AdminClient,
                                                     topic_name: str) -> None:
    admin.create_topics([NewTopic(topic_name, 1)])
    fresh = topic_name + "-new"
    with pytest.raises(PartialFailureError) as info:
        admin.create_topics([NewTopic(topic_name, 2), NewTopic(fresh, 2)])
    results = info.value.results
    assert isinstance(results[topic_name], TopicAlreadyExistsError)
    assert results[fresh].num_partitions == 2
    assert set(info.value.errors) == {topic_name}
    assert str(info.value).startswith(
        f"create_topics: 1 of 2 failed: {topic_name!r}: TopicAlreadyExistsError: "
        "[TOPIC_ALREADY_EXISTS (36)]")
    # return_exceptions gives the same outcomes without raising
    again = admin.create_topics([NewTopic(fresh, 2)], return_exceptions=True)
    assert isinstance(again[fresh], TopicAlreadyExistsError)


def test_unknown_topics_fail_fast_not_after_the_timeout(admin: AdminClient,
                                                        topic_name: str) -> None:
    start = time.monotonic()
    out = admin.delete_topics([topic_name], return_exceptions=True)
    assert isinstance(out[topic_name], UnknownTopicOrPartitionError)
    out2 = admin.describe_topics([topic_name], return_exceptions=True)
    assert isinstance(out2[topic_name], UnknownTopicOrPartitionError)
    assert time.monotonic() - start < 5  # default_api_timeout_ms is 10 s


@pytest.mark.tansu_only(
    "Kafka's DescribeConfigs lists every topic config, defaults included (source "
    "DEFAULT_CONFIG), as Cluster does; Tansu lists only the keys set, which the last "
    "assertion expects")
def test_incremental_alter_configs_and_describe(admin: AdminClient, topic_name: str) -> None:
    admin.create_topics([NewTopic(topic_name, 1, config={"cleanup.policy": "compact"})])
    res = ConfigResource(ConfigResource.Type.TOPIC, topic_name)
    assert admin.describe_configs([res])[res]["cleanup.policy"].value == "compact"

    admin.incremental_alter_configs({res: [AlterConfigOp("retention.ms", "123456"),
                                           AlterConfigOp("cleanup.policy", "delete")]})
    configs = admin.describe_configs([res])[res]
    assert configs["retention.ms"].value == "123456"
    assert configs["cleanup.policy"].value == "delete"

    admin.incremental_alter_configs(
        {res: [AlterConfigOp("retention.ms", None, AlterConfigOpType.DELETE)]})
    assert "retention.ms" not in admin.describe_configs([res])[res]


def test_describe_cluster(admin: AdminClient, tansu_broker: TansuBroker) -> None:
    desc = admin.describe_cluster()
    assert desc.cluster_id
    (node,) = desc.nodes
    assert f"{node.host}:{node.port}" == tansu_broker.bootstrap_servers
    assert desc.controller == node


def test_group_offsets_list_describe_delete(admin: AdminClient, topic_name: str) -> None:
    admin.create_topics([NewTopic(topic_name, 2)])
    group = topic_name + "-g"
    offsets: dict[TP, OffsetAndMetadata | int] = {
        TP(topic_name, 0): OffsetAndMetadata(5), TP(topic_name, 1): 7}
    assert admin.alter_consumer_group_offsets(group, offsets) == {
        TP(topic_name, 0): None, TP(topic_name, 1): None}

    committed = admin.list_consumer_group_offsets(group)
    assert {tp: om.offset for tp, om in committed.items() if om} == {
        TP(topic_name, 0): 5, TP(topic_name, 1): 7}
    only = admin.list_consumer_group_offsets(group, [TP(topic_name, 1)])
    assert list(only) == [TP(topic_name, 1)]

    assert group in {g.group_id for g in admin.list_consumer_groups()}
    desc = admin.describe_consumer_groups([group])[group]
    assert desc.members == ()
    assert desc.state is ConsumerGroupState.EMPTY

    assert admin.delete_consumer_groups([group]) == {group: None}
    assert group not in {g.group_id for g in admin.list_consumer_groups()}
    # (Tansu answers a second delete with success where Kafka says GROUP_ID_NOT_FOUND, so
    # that case is left to the crafted-response tests.)


def test_list_offsets_earliest_and_latest(tansu_broker: TansuBroker, topic_name: str) -> None:
    async def main() -> None:
        async with AsyncAdminClient(bootstrap_servers=tansu_broker.bootstrap_servers) as a:
            await a.create_topics([NewTopic(topic_name, 2)])
            # one record per batch: Tansu's LATEST is exact only for single-record batches
            for i in range(3):
                builder = RecordBatchBuilder()
                builder.append(None, None, b"v%d" % i)
                batch = builder.build()
                part = await produce(a.client, topic_name, 0, batch)
                assert part.error_code == 0
            tp0, tp1 = TP(topic_name, 0), TP(topic_name, 1)
            out = await a.list_offsets({tp0: OffsetSpec.latest(), tp1: OffsetSpec.latest()})
            assert (out[tp0].offset, out[tp1].offset) == (3, 0)
            early = await a.list_offsets({tp0: OffsetSpec.earliest()})
            assert early[tp0].offset == 0
            missing = await a.list_offsets({TP(topic_name, 9): OffsetSpec.latest()},
                                           return_exceptions=True)
            assert isinstance(missing[TP(topic_name, 9)], UnknownTopicOrPartitionError)

    asyncio.run(main())


@pytest.mark.tansu_only(
    "checks the errors for APIs Tansu lacks; Cluster serves them, as Kafka does (tested "
    "in tests/cluster/test_admin.py)")
def test_operations_tansu_lacks_end_in_typed_errors(admin: AdminClient,
                                                    topic_name: str) -> None:
    admin.create_topics([NewTopic(topic_name, 1)])
    grown = admin.create_partitions([NewPartitions(topic_name, 3)], return_exceptions=True)
    assert isinstance(grown[topic_name], UnsupportedVersionError)
    res = ConfigResource(ConfigResource.Type.TOPIC, topic_name)
    legacy = admin.alter_configs({res: {"retention.ms": "1"}}, return_exceptions=True)
    assert isinstance(legacy[res], UnsupportedVersionError)
    with pytest.raises(UnsupportedVersionError):
        admin.describe_log_dirs()  # one broker: its own error
    with pytest.raises(UnsupportedVersionError):
        admin.delete_consumer_group_offsets("g", [TP(topic_name, 0)])


def test_remove_every_member_of_a_classic_group(admin: AdminClient,
                                                tansu_broker: TansuBroker,
                                                topic_name: str) -> None:
    # members=None lists the group as describe_consumer_groups does: Tansu advertises
    # ConsumerGroupDescribe but answers it with group epoch -1, the Cluster with
    # GROUP_ID_NOT_FOUND for a classic group; DescribeGroups then lists the member. The
    # removed member learns it at its next heartbeat: its partitions are lost and it joins
    # again under a new member id.
    from kontrakt import Consumer

    admin.create_topics([NewTopic(topic_name, 2)])
    group = topic_name + "-g"
    events: list[str] = []

    class Listener:
        def on_partitions_assigned(self, parts: set[TP]) -> None:
            events.append(f"assigned {len(parts)}")

        def on_partitions_revoked(self, parts: set[TP]) -> None:
            events.append(f"revoked {len(parts)}")

        def on_partitions_lost(self, parts: set[TP]) -> None:
            events.append(f"lost {len(parts)}")

    with Consumer(bootstrap_servers=tansu_broker.bootstrap_servers, group_id=group,
                  session_timeout_ms=2000, heartbeat_interval_ms=100) as c:
        c.subscribe([topic_name], listener=Listener())
        deadline = time.monotonic() + 20
        while events != ["assigned 2"]:
            assert time.monotonic() < deadline, events
            c.poll(0.05)
        member = c.consumer_group_metadata().member_id
        assert admin.remove_members_from_consumer_group(group) == {member: None}
        while events[-2:] != ["lost 2", "assigned 2"]:
            assert time.monotonic() < deadline, events
            c.poll(0.05)
        assert c.consumer_group_metadata().member_id not in ("", member)
