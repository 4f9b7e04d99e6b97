"""Partition and feature administration against the cluster: leader elections, partition
reassignments, DescribeTopicPartitions (KIP-966) and finalized features, with Kontrakt's
AdminClient, confluent-kafka's (elect_leaders, describe_topics) and kafka-python's (all of
them, including raw DescribeTopicPartitions pages with a small partition limit).

Neither Tansu nor librdkafka's mock cluster serves these APIs, so the in-process Cluster is
the broker here; its rules (preferred leader = first replica, reassignments complete once the
new replicas' brokers are up, metadata.version never downgrades) are in its _admin_apis
module.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from kontrakt._types import TopicPartition as TP
from kontrakt.clients.admin import (
    AdminClient,
    ElectionType,
    FeatureUpdate,
    FeatureUpgradeType,
    PartitionReassignment,
)
from kontrakt.protocol.errors import (
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidUpdateVersionError,
    NoReassignmentInProgressError,
    PreferredLeaderNotAvailableError,
    UnknownTopicOrPartitionError,
)
from kontrakt.testing import Cluster

_REQUEST_COUNT_API = 75


@pytest.fixture
def admin(cluster: Cluster) -> Iterator[AdminClient]:
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers, retry_backoff_ms=20,
                     default_api_timeout_ms=10000) as client:
        yield client


@pytest.fixture
def kp_admin(cluster: Cluster) -> Iterator[Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.admin import KafkaAdminClient
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers,
                              request_timeout_ms=10000)
    try:
        yield client
    finally:
        client.close()


def _error(result: object) -> type[BaseException]:
    assert isinstance(result, BaseException), result
    return type(result)


def _partition(admin: AdminClient, topic: str, index: int) -> Any:
    return admin.describe_topics([topic])[topic].partitions[index]


# --- leader elections -----------------------------------------------------------------------


def test_preferred_election_moves_leadership_back(admin: AdminClient, cluster: Cluster,
                                                  topic: str) -> None:
    cluster.create_topic(topic, partitions=2, replication_factor=3)
    p0 = _partition(admin, topic, 0)
    cluster.set_partition_leader(topic, 0, p0.replicas[1])
    assert _partition(admin, topic, 0).leader == p0.replicas[1]

    out = admin.elect_leaders(ElectionType.PREFERRED, [TP(topic, 0), TP(topic, 1),
                                                       TP(topic, 7)], return_exceptions=True)
    assert out[TP(topic, 0)] is None
    assert _error(out[TP(topic, 1)]) is ElectionNotNeededError
    assert _error(out[TP(topic, 7)]) is UnknownTopicOrPartitionError
    after = _partition(admin, topic, 0)
    assert after.leader == p0.replicas[0]
    assert after.leader_epoch > p0.leader_epoch

    # The preferred replica's broker is down: it cannot lead.
    cluster.set_partition_leader(topic, 0, p0.replicas[1])
    cluster.broker_down(p0.replicas[0])
    with pytest.raises(PreferredLeaderNotAvailableError):
        admin.elect_leaders(ElectionType.PREFERRED, [TP(topic, 0)])


def test_unclean_election_and_all_partitions(admin: AdminClient, cluster: Cluster,
                                             topic: str) -> None:
    cluster.create_topic(topic, partitions=1, replication_factor=2)
    cluster.create_topic(topic + "-1", partitions=1, replication_factor=1)
    p = _partition(admin, topic, 0)
    lone = _partition(admin, topic + "-1", 0)
    with pytest.raises(ElectionNotNeededError):  # the leader is alive
        admin.elect_leaders(ElectionType.UNCLEAN, [TP(topic, 0)])
    cluster.broker_down(p.leader)
    if lone.leader == p.leader:
        # every replica of the single-replica topic is down: nobody can lead it
        with pytest.raises(EligibleLeadersNotAvailableError):
            admin.elect_leaders(ElectionType.UNCLEAN, [TP(topic + "-1", 0)])
    # None: every partition; those needing no election are left out of the answer.
    out = admin.elect_leaders(ElectionType.UNCLEAN, None, return_exceptions=True)
    assert out[TP(topic, 0)] is None
    assert TP(topic + "-1", 0) not in out or lone.leader == p.leader
    assert _partition(admin, topic, 0).leader == p.replicas[1]


def test_confluent_kafka_and_kafka_python_elect_leaders(admin: AdminClient, cluster: Cluster,
                                                        kp_admin: Any, topic: str) -> None:
    from confluent_kafka import ElectionType as CkElectionType
    from confluent_kafka import KafkaError
    from confluent_kafka import TopicPartition as CkTP
    from confluent_kafka.admin import AdminClient as CkAdmin
    cluster.create_topic(topic, partitions=2, replication_factor=2)
    p0, p1 = (_partition(admin, topic, i) for i in (0, 1))
    cluster.set_partition_leader(topic, 0, p0.replicas[1])
    ck = CkAdmin({"bootstrap.servers": cluster.bootstrap_servers})
    fut = ck.elect_leaders(CkElectionType.PREFERRED, [CkTP(topic, 0), CkTP(topic, 1)])
    results = fut.result(timeout=10)
    assert results[CkTP(topic, 0)] is None
    err = results[CkTP(topic, 1)]
    assert isinstance(err, KafkaError)
    assert err.code() == ElectionNotNeededError.code
    assert _partition(admin, topic, 0).leader == p0.replicas[0]

    cluster.set_partition_leader(topic, 1, p1.replicas[1])
    kp_admin.elect_leaders(0, {topic: [1]})
    assert _partition(admin, topic, 1).leader == p1.replicas[0]


# --- reassignments --------------------------------------------------------------------------


def test_reassignment_to_live_brokers_completes_at_once(admin: AdminClient, cluster: Cluster,
                                                        topic: str) -> None:
    cluster.create_topic(topic, partitions=1, replication_factor=1)
    before = _partition(admin, topic, 0)
    others = [b for b in (1, 2, 3) if b != before.leader]
    assert admin.alter_partition_reassignments({TP(topic, 0): others}) == {TP(topic, 0): None}
    assert admin.list_partition_reassignments() == {}
    after = _partition(admin, topic, 0)
    assert after.replicas == tuple(others)
    assert after.leader == others[0]  # the old leader left the replica set
    with pytest.raises(NoReassignmentInProgressError):
        admin.alter_partition_reassignments({TP(topic, 0): None})


def test_reassignment_to_a_down_broker_stays_ongoing(admin: AdminClient, cluster: Cluster,
                                                     topic: str) -> None:
    cluster.create_topic(topic, partitions=2, replication_factor=1)
    p0 = _partition(admin, topic, 0)
    down = next(b for b in (1, 2, 3) if b != p0.leader)
    cluster.broker_down(down)
    admin.alter_partition_reassignments({TP(topic, 0): [down]})
    ongoing = admin.list_partition_reassignments([TP(topic, 0), TP(topic, 1)])
    assert ongoing == {TP(topic, 0): PartitionReassignment(
        (down, p0.leader), adding_replicas=(down,), removing_replicas=(p0.leader,))}
    assert _partition(admin, topic, 0).replicas == (down, p0.leader)

    # Cancelling restores the original replicas.
    admin.alter_partition_reassignments({TP(topic, 0): None})
    assert admin.list_partition_reassignments() == {}
    assert _partition(admin, topic, 0).replicas == (p0.leader,)

    # Moved again, it completes once the broker is back.
    admin.alter_partition_reassignments({TP(topic, 0): [down]})
    assert TP(topic, 0) in admin.list_partition_reassignments()
    cluster.broker_up(down)
    assert admin.list_partition_reassignments() == {}
    done = _partition(admin, topic, 0)
    assert (done.replicas, done.leader) == ((down,), down)


def test_bad_reassignments_are_refused(admin: AdminClient, cluster: Cluster,
                                       topic: str) -> None:
    cluster.create_topic(topic, partitions=1, replication_factor=2)
    out = admin.alter_partition_reassignments(
        {TP(topic, 0): [1, 9], TP(topic + "-x", 0): [1]}, return_exceptions=True)
    assert _error(out[TP(topic, 0)]) is InvalidReplicaAssignmentError
    assert _error(out[TP(topic + "-x", 0)]) is UnknownTopicOrPartitionError
    with pytest.raises(InvalidReplicationFactorError):
        admin.alter_partition_reassignments({TP(topic, 0): [1, 2, 3]},
                                            allow_replication_factor_change=False)
    assert admin.alter_partition_reassignments({TP(topic, 0): [3, 2]},
                                               allow_replication_factor_change=False)
    assert _partition(admin, topic, 0).replicas == (3, 2)


def test_kafka_python_reassignments(admin: AdminClient, cluster: Cluster,
                                    topic: str) -> None:
    cluster.create_topic(topic, partitions=1, replication_factor=1)
    leader = _partition(admin, topic, 0).leader
    down = next(b for b in (1, 2, 3) if b != leader)
    cluster.broker_down(down)
    host, port = cluster.broker_address(leader)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.admin import KafkaAdminClient
    kp_admin = KafkaAdminClient(bootstrap_servers=f"{host}:{port}", request_timeout_ms=10000)
    try:
        _kafka_python_reassign(kp_admin, admin, topic, leader, down)
    finally:
        kp_admin.close()


def _kafka_python_reassign(kp_admin: Any, admin: AdminClient, topic: str, leader: int,
                           down: int) -> None:
    from kafka import TopicPartition as KpTP
    assert kp_admin.alter_partition_reassignments({KpTP(topic, 0): [down, leader]}) == {
        KpTP(topic, 0): None}
    listed = kp_admin.list_partition_reassignments()
    assert listed[KpTP(topic, 0)]["adding_replicas"] == [down]
    assert admin.list_partition_reassignments()[TP(topic, 0)].adding_replicas == (down,)


# --- DescribeTopicPartitions ----------------------------------------------------------------


def test_describe_topics_pages_through_describe_topic_partitions(
        admin: AdminClient, cluster: Cluster, topic: str) -> None:
    # Over the default limit of 2000 partitions a page: two requests.
    cluster.create_topic(topic, partitions=2003, replication_factor=2)
    cluster.create_topic(topic + "-b", partitions=2)
    before = cluster.request_counts().get(_REQUEST_COUNT_API, 0)
    out = admin.describe_topics([topic + "-b", topic])
    assert cluster.request_counts()[_REQUEST_COUNT_API] - before == 2
    parts = out[topic].partitions
    assert [p.partition for p in parts] == list(range(2003))
    assert all(len(p.replicas) == 2 and p.isr == p.replicas for p in parts)
    assert parts[5].eligible_leader_replicas == ()
    assert len(out[topic + "-b"].partitions) == 2
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.describe_topics([topic + "-none"])


def test_describe_topic_partitions_cursor_with_kafka_python(
        cluster: Cluster, kp_admin: Any, topic: str) -> None:
    cluster.create_topic(topic + "-a", partitions=3)
    cluster.create_topic(topic + "-b", partitions=2)
    names = [topic + "-b", topic + "-a"]
    seen: list[tuple[str, int]] = []
    cursor = None
    pages = 0
    while pages < 10:
        pages += 1
        page = kp_admin.describe_topic_partitions(names, response_partition_limit=2,
                                                  cursor=cursor)
        seen += [(t["name"], p["partition_index"]) for t in page["topics"]
                 for p in t["partitions"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 3
    assert seen == [(topic + "-a", 0), (topic + "-a", 1), (topic + "-a", 2),
                    (topic + "-b", 0), (topic + "-b", 1)]


# --- features -------------------------------------------------------------------------------


def test_features_upgrade_downgrade_rules(admin: AdminClient, kp_admin: Any) -> None:
    features = admin.describe_features()
    assert features.finalized_features["metadata.version"].max_version_level == 25
    assert features.supported_features["group.version"].max_version == 1
    epoch = features.finalized_features_epoch
    assert epoch is not None

    down = {"group.version": FeatureUpdate(0, FeatureUpgradeType.SAFE_DOWNGRADE)}
    assert admin.update_features(down, validate_only=True) == {"group.version": None}
    assert "group.version" in admin.describe_features().finalized_features
    admin.update_features(down)
    after = admin.describe_features()
    assert "group.version" not in after.finalized_features
    assert after.finalized_features_epoch == epoch + 1

    with pytest.raises(InvalidUpdateVersionError, match="downgrade type"):
        admin.update_features({"group.version": FeatureUpdate(
            1, FeatureUpgradeType.SAFE_DOWNGRADE)})
    with pytest.raises(InvalidUpdateVersionError, match="supported range"):
        admin.update_features({"group.version": FeatureUpdate(2)})
    with pytest.raises(InvalidUpdateVersionError, match="metadata"):
        admin.update_features({"metadata.version": FeatureUpdate(
            20, FeatureUpgradeType.UNSAFE_DOWNGRADE)})
    with pytest.raises(InvalidUpdateVersionError, match="without a downgrade"):
        admin.update_features({"transaction.version": FeatureUpdate(1)})
    # All or nothing: one bad update keeps the good one from being applied.
    out = admin.update_features({"group.version": FeatureUpdate(1),
                                 "no.such.feature": FeatureUpdate(1)},
                                return_exceptions=True)
    assert all(isinstance(e, InvalidUpdateVersionError) for e in out.values())
    assert "group.version" not in admin.describe_features().finalized_features
    admin.update_features({"group.version": FeatureUpdate(1)})

    # kafka-python reads the same features (name -> supported / finalized ranges) and its
    # UpdateFeatures (v0 flag allow_downgrade, v1+ upgrade type) is held to the same rules.
    seen = kp_admin.describe_features()
    assert seen["group.version"]["finalized"] == (1, 1)
    assert seen["metadata.version"]["supported"] == (7, 25)
    assert seen["metadata.version"]["finalized_epoch"] == epoch + 2
    kp_admin.update_features({"transaction.version": ("SAFE_DOWNGRADE", 1)})
    assert admin.describe_features().finalized_features["transaction.version"] \
        .max_version_level == 1


def test_not_controller_is_retried(admin: AdminClient, cluster: Cluster, topic: str) -> None:
    from kontrakt.protocol.errors import NotControllerError
    cluster.create_topic(topic, partitions=1, replication_factor=1)
    leader = _partition(admin, topic, 0).leader
    other = next(b for b in (1, 2, 3) if b != leader)
    cluster.push_request_errors(45, [NotControllerError.code])
    cluster.push_request_errors(43, [NotControllerError.code])
    before = cluster.request_counts()
    assert admin.alter_partition_reassignments({TP(topic, 0): [other, leader]}) == {
        TP(topic, 0): None}
    assert admin.elect_leaders(ElectionType.PREFERRED, [TP(topic, 0)]) == {TP(topic, 0): None}
    after = cluster.request_counts()
    assert (after[45] - before.get(45, 0), after[43] - before.get(43, 0)) == (2, 2)
    assert _partition(admin, topic, 0).leader == other


def test_confluent_kafka_describe_topics_agrees(admin: AdminClient, cluster: Cluster,
                                                topic: str) -> None:
    """librdkafka describes topics with Metadata; Kontrakt with DescribeTopicPartitions: the
    cluster must tell both the same after an election moved a leader."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient as CkAdmin
    cluster.create_topic(topic, partitions=3, replication_factor=2)
    p1 = _partition(admin, topic, 1)
    cluster.set_partition_leader(topic, 1, p1.replicas[1])
    ours = admin.describe_topics([topic])[topic]
    ck = CkAdmin({"bootstrap.servers": cluster.bootstrap_servers})
    theirs = ck.describe_topics(TopicCollection([topic]))[topic].result(timeout=10)
    assert theirs.topic_id is not None and str(theirs.topic_id) != ""
    assert [(p.id, p.leader.id, [r.id for r in p.replicas], [r.id for r in p.isr])
            for p in theirs.partitions] == [
        (p.partition, p.leader, list(p.replicas), list(p.isr)) for p in ours.partitions]
    assert ours.partitions[1].leader == p1.replicas[1]


def test_describe_topics_retries_a_retriable_topic_error(admin: AdminClient, cluster: Cluster,
                                                         topic: str) -> None:
    from kontrakt.protocol.errors import LeaderNotAvailableError
    cluster.create_topic(topic, partitions=2)
    cluster.push_request_errors(_REQUEST_COUNT_API, [LeaderNotAvailableError.code])
    before = cluster.request_counts().get(_REQUEST_COUNT_API, 0)
    assert len(admin.describe_topics([topic])[topic].partitions) == 2
    assert cluster.request_counts()[_REQUEST_COUNT_API] - before == 2
