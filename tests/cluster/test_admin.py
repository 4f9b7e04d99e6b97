"""Kontrakt's AdminClient against the cluster: topic admin, partitions, configs with sources,
DeleteRecords and ListOffsets, including what Tansu cannot serve (CreatePartitions,
DeleteRecords, DescribeConfigs of default keys, legacy AlterConfigs, timestamp lookups)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kontrakt import Producer
from kontrakt._types import TopicPartition as TP
from kontrakt.clients.admin import (
    AdminClient,
    AlterConfigOp,
    AlterConfigOpType,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)
from kontrakt.clients.admin._types import ConfigSource
from kontrakt.errors import PartialFailureError
from kontrakt.protocol.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from kontrakt.testing import Cluster


@pytest.fixture
def admin(cluster: Cluster) -> Iterator[AdminClient]:
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers, retry_backoff_ms=20,
                     default_api_timeout_ms=10000) as client:
        yield client


def _error(result: object) -> type[BaseException]:
    assert isinstance(result, BaseException), result
    return type(result)


def test_create_describe_grow_and_delete_topics(admin: AdminClient, cluster: Cluster,
                                                topic: str) -> None:
    created = admin.create_topics([NewTopic(topic, 2, 3, config={"retention.ms": "1000"})])
    assert created[topic].num_partitions == 2
    again = admin.create_topics([NewTopic(topic, 1, 1), NewTopic(topic + "-rf", 1, 4),
                                 NewTopic(topic + "-cfg", 1, 1,
                                          config={"message.timestamp.type": "Whenever"})],
                                return_exceptions=True)
    assert _error(again[topic]) is TopicAlreadyExistsError
    assert _error(again[topic + "-rf"]) is InvalidReplicationFactorError
    assert _error(again[topic + "-cfg"]) is InvalidConfigError

    admin.create_partitions([NewPartitions(topic, 5)])
    described = admin.describe_topics([topic])[topic]
    assert [p.partition for p in described.partitions] == [0, 1, 2, 3, 4]
    assert cluster.end_offsets(topic) == [0] * 5
    shrink = admin.create_partitions([NewPartitions(topic, 3)], return_exceptions=True)
    assert _error(shrink[topic]) is InvalidPartitionsError

    admin.delete_topics([topic])
    assert topic not in admin.list_topics()
    gone = admin.delete_topics([topic], return_exceptions=True)
    assert _error(gone[topic]) is UnknownTopicOrPartitionError


def test_configs_report_sources_and_alter_both_ways(admin: AdminClient, topic: str) -> None:
    admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})])
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([res])[res]
    assert configs["cleanup.policy"].value == "compact"
    assert configs["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    # Tansu returns only explicitly set keys; Kafka every key, defaults marked as such.
    assert configs["retention.ms"].value == "604800000"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG

    admin.incremental_alter_configs({res: [
        AlterConfigOp("retention.ms", "5000"),
        AlterConfigOp("cleanup.policy", "delete", AlterConfigOpType.APPEND)]})
    configs = admin.describe_configs([res])[res]
    assert configs["retention.ms"].value == "5000"
    assert configs["cleanup.policy"].value == "compact,delete"

    # Legacy AlterConfigs replaces the whole set: keys left out go back to their defaults.
    admin.alter_configs({res: {"max.message.bytes": "2000"}})
    configs = admin.describe_configs([res])[res]
    assert configs["max.message.bytes"].value == "2000"
    assert configs["cleanup.policy"].value == "delete"
    assert configs["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG

    with pytest.raises((PartialFailureError, InvalidConfigError)):
        admin.incremental_alter_configs({res: [AlterConfigOp("retention.ms", "soon")]})


def test_delete_records_and_list_offsets_by_every_spec(admin: AdminClient, cluster: Cluster,
                                                       topic: str) -> None:
    admin.create_topics([NewTopic(topic, 1, 1)])
    with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=50) as p:
        futures = [p.send(topic, b"v%d" % i, partition=0, timestamp_ms=10_000 + i * 10)
                   for i in range(10)]
        p.flush(10)
    assert [f.result().offset for f in futures] == list(range(10))
    tp = TP(topic, 0)
    out = admin.list_offsets({tp: OffsetSpec.latest()})
    assert out[tp].offset == 10
    assert admin.list_offsets({tp: OffsetSpec.for_timestamp(10_045)})[tp].offset == 5
    top = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp]
    assert (top.offset, top.timestamp) == (9, 10_090)

    assert admin.delete_records({tp: 4})[tp].low_watermark == 4
    assert admin.list_offsets({tp: OffsetSpec.earliest()})[tp].offset == 4


def test_log_dirs_producers_and_transactions(admin: AdminClient, cluster: Cluster,
                                             topic: str) -> None:
    """Admin calls neither Tansu nor the mock cluster answers: DescribeLogDirs,
    DescribeProducers, DescribeTransactions and ListTransactions."""
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    tp = TP(topic, 0)
    with Producer(bootstrap_servers=cluster.bootstrap_servers, transactional_id="adm-tx") as p:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"a", partition=0)
        p.send(topic, b"b", partition=0)
        p.flush(10)
        ongoing = admin.describe_transactions(["adm-tx"])["adm-tx"]
        assert ongoing.state == "Ongoing"
        assert set(ongoing.topic_partitions) == {tp}
        assert ongoing.transaction_start_time_ms > 0
        listed = admin.list_transactions(states=["Ongoing"])
        assert [(t.transactional_id, t.producer_id) for t in listed] == [
            ("adm-tx", ongoing.producer_id)]
        producers = admin.describe_producers([tp])[tp]
        assert [(s.producer_id, s.last_sequence, s.current_transaction_start_offset)
                for s in producers] == [(ongoing.producer_id, 1, 0)]
        p.commit_transaction()
    done = admin.describe_transactions(["adm-tx"])["adm-tx"]
    assert done.state == "CompleteCommit" and not done.topic_partitions
    assert admin.list_transactions(states=["Ongoing"]) == []
    assert admin.describe_producers([tp])[tp][0].current_transaction_start_offset == -1

    dirs = admin.describe_log_dirs()
    assert sorted(dirs) == [1, 2, 3]
    for broker, by_path in dirs.items():
        (path, described), = by_path.items()
        assert path == f"/kontrakt-cluster/broker-{broker}"
        assert described.replicas[tp].size > 0  # two records and the commit marker


def test_every_topic_config_kontrakt_knows_is_accepted(admin: AdminClient, topic: str) -> None:
    """The cluster knows every topic config key Kontrakt's admin client validates against,
    and DescribeConfigs reports each one."""
    from kontrakt.clients.admin import TOPIC_CONFIG_NAMES

    admin.create_topics([NewTopic(topic, 1, 1, config={"compression.zstd.level": "5"})])
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([res])[res]
    assert set(TOPIC_CONFIG_NAMES) <= set(configs)
    assert configs["compression.zstd.level"].value == "5"
