"""kafka-python 3.0.12 (test-only peer) as an oracle for the requests of
describe_metadata_quorum, abort_transaction, alter_replica_log_dirs,
list_config_resources, list_groups, describe_topic_partitions and reset_configs, and
for the offsets reset_group_offsets commits: both clients call
the same crafted peer (``tests/_crafted_broker.py``; no test broker offers these APIs),
and the requests each sent must be the same message at the same version. For the quorum,
kafka-python's decoded answer (a dict) must also agree with Kontrakt's QuorumInfo, and so
must the config resources each lists.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from kontrakt._types import TopicPartition as TP
from kontrakt.clients.admin import AbortTransactionSpec, AdminClient, TopicPartitionReplica
from tests._crafted_broker import CraftedBroker
from tests.unit.admin.test_admin_abort_transaction import Markers
from tests.unit.admin.test_admin_config_resources import Lister
from tests.unit.admin.test_admin_crafted import FAST
from tests.unit.admin.test_admin_quorum import Quorum
from tests.unit.admin.test_admin_replica_log_dirs import Dirs

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    kafka = pytest.importorskip("kafka")
    kafka_admin = pytest.importorskip("kafka.admin")

pytestmark = [pytest.mark.interop]

WRITE_TXN_MARKERS, ALTER_REPLICA_LOG_DIRS, DESCRIBE_QUORUM = 27, 34, 55
LIST_CONFIG_RESOURCES = 74


def _both(handlers: dict[int, Any], topics: dict[str, int],
          theirs: Callable[[Any], Any], ours: Callable[[AdminClient], Any]) -> tuple[Any, Any]:
    """Run ``theirs(kafka-python admin)`` then ``ours(Kontrakt admin)`` against one crafted
    peer; return both results."""
    async def main() -> tuple[Any, Any]:
        async with CraftedBroker(handlers, topics=topics) as broker:
            def blocking() -> tuple[Any, Any]:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)
                    kp = kafka_admin.KafkaAdminClient(bootstrap_servers=broker.bootstrap,
                                                      request_timeout_ms=5000)
                try:
                    a = theirs(kp)
                finally:
                    kp.close()
                with AdminClient({"bootstrap.servers": broker.bootstrap, **FAST}) as admin:
                    return a, ours(admin)
            return await asyncio.to_thread(blocking)

    return asyncio.run(main())


def test_abort_transaction_sends_kafka_pythons_marker() -> None:
    markers = Markers()
    _both({WRITE_TXN_MARKERS: markers}, {"t": 2},
          lambda kp: kp.abort_transaction(kafka_admin.AbortTransactionSpec(
              kafka.TopicPartition("t", 1), 4000, 5, 12)),
          lambda a: a.abort_transaction(AbortTransactionSpec(TP("t", 1), 4000, 5, 12)))
    (v_theirs, theirs), (v_ours, ours) = markers.asked
    assert (v_ours, ours) == (v_theirs, theirs)


def test_describe_metadata_quorum_sends_and_reads_what_kafka_python_does() -> None:
    quorum = Quorum({})
    theirs, ours = _both({DESCRIBE_QUORUM: quorum}, {},
                         lambda kp: kp.describe_metadata_quorum(),
                         lambda a: a.describe_metadata_quorum(timeout=10))
    (v_theirs, req_theirs), (v_ours, req_ours) = quorum.asked
    assert (v_ours, req_ours) == (v_theirs, req_theirs)
    [p] = theirs["topics"][0]["partitions"]
    assert (ours.leader_id, ours.leader_epoch, ours.high_watermark) == (
        p["leader_id"], p["leader_epoch"], p["high_watermark"])
    for mine, theirs_ in ((ours.voters, p["current_voters"]), (ours.observers, p["observers"])):
        assert [(r.replica_id, r.log_end_offset, _ms(r.last_fetch_timestamp),
                 _ms(r.last_caught_up_timestamp)) for r in mine] == [
            (r["replica_id"], r["log_end_offset"], r["last_fetch_timestamp"],
             r["last_caught_up_timestamp"]) for r in theirs_]
    assert {n: [(e.name, e.host, e.port) for e in node.endpoints]
            for n, node in ours.nodes.items()} == {
        n["node_id"]: [(e["name"], e["host"], e["port"]) for e in n["listeners"]]
        for n in theirs["nodes"]}


def _ms(value: int | None) -> int:
    return -1 if value is None else value


def test_alter_replica_log_dirs_sends_kafka_pythons_request() -> None:
    dirs = Dirs()
    moves = {("t", 0, 1): "/d1", ("t", 1, 1): "/d2", ("u", 0, 1): "/d1", ("t", 2, 1): "/d1"}
    _both({ALTER_REPLICA_LOG_DIRS: dirs}, {"t": 3, "u": 1},
          lambda kp: kp.alter_replica_log_dirs(
              {kafka.TopicPartitionReplica(*k): p for k, p in moves.items()}),
          lambda a: a.alter_replica_log_dirs(
              {TopicPartitionReplica(*k): p for k, p in moves.items()}, timeout=10))
    (v_theirs, _), (v_ours, _) = dirs.asked
    assert v_ours == v_theirs
    theirs, ours = dirs.sent()
    assert ours == theirs


def test_list_config_resources_sends_and_reads_what_kafka_python_does() -> None:
    lister = Lister()
    theirs, ours = _both({LIST_CONFIG_RESOURCES: lister}, {},
                         lambda kp: kp.list_config_resources(["TOPIC", "GROUP"]),
                         lambda a: a.list_config_resources(["topic", "group"], timeout=10))
    (v_theirs, req_theirs), (v_ours, req_ours) = lister.asked
    assert (v_ours, sorted(req_ours.resource_types)) == (
        v_theirs, sorted(req_theirs.resource_types))
    by_type: dict[str, list[str]] = {}
    for r in ours:
        by_type.setdefault(r.restype.name.lower(), []).append(r.name)
    assert {k: sorted(v) for k, v in by_type.items()} == {
        k: sorted(v) for k, v in theirs.items()}


# --- list_groups, describe_topic_partitions, reset_configs, reset_group_offsets -------

LIST_GROUPS, DESCRIBE_TOPIC_PARTITIONS, INCREMENTAL_ALTER_CONFIGS = 16, 75, 44


def test_list_groups_sends_and_reads_what_kafka_python_does() -> None:
    from kontrakt.protocol.messages import ListGroupsResponse

    G = ListGroupsResponse.ListedGroup
    asked: list[tuple[int, Any]] = []

    def answer(version: int, req: Any) -> Any:
        asked.append((version, req))
        return ListGroupsResponse(groups=[
            G(group_id="s", protocol_type="share", group_state="Stable", group_type="share"),
            G(group_id="c", protocol_type="consumer", group_state="Stable",
              group_type="consumer")])

    theirs, ours = _both({LIST_GROUPS: answer}, {},
                         lambda kp: kp.list_groups(states_filter=["Stable"],
                                                   types_filter=["consumer", "share"]),
                         lambda a: a.list_groups(states=["Stable"], types=["consumer", "share"],
                                                 timeout=10))
    (v_theirs, req_theirs), (v_ours, req_ours) = asked
    assert (v_ours, req_ours) == (v_theirs, req_theirs)
    assert sorted((g["group_id"], g["protocol_type"], g["group_state"], g["group_type"])
                  for g in theirs) == [
        (g.group_id, g.protocol_type, g.state.value, g.type.value.lower()) for g in ours]


def test_describe_topic_partitions_sends_and_reads_what_kafka_python_does() -> None:
    from tests.unit.admin.test_admin_describe_topic_partitions import Paging

    paging = Paging()
    theirs, ours = _both({DESCRIBE_TOPIC_PARTITIONS: paging}, {},
                         lambda kp: kp.describe_topic_partitions(
                             ["a", "b"], response_partition_limit=2,
                             cursor={"topic_name": "a", "partition_index": 1}),
                         lambda a: a.describe_topic_partitions(
                             ["a", "b"], response_partition_limit=2, cursor=TP("a", 1),
                             timeout=10))
    req_theirs, req_ours = paging.asked
    assert req_ours == req_theirs
    assert (ours.next_cursor.topic, ours.next_cursor.partition) == (
        theirs["next_cursor"]["topic_name"], theirs["next_cursor"]["partition_index"])
    assert {t["name"]: [(p["partition_index"], p["leader_id"], tuple(p["replica_nodes"]),
                         tuple(p["isr_nodes"]), tuple(p["eligible_leader_replicas"]),
                         tuple(p["last_known_elr"]), tuple(p["offline_replicas"]))
                        for p in t["partitions"]] for t in theirs["topics"]} == {
        n: [(p.partition, p.leader, p.replicas, p.isr, p.eligible_leader_replicas,
             p.last_known_elr, p.offline_replicas) for p in d.partitions]
        for n, d in ours.topics.items()}


def test_reset_configs_sends_kafka_pythons_deletes() -> None:
    from kontrakt.clients.admin import ConfigResource
    from tests.unit.admin.test_admin_reset_configs import Peer as ConfigPeer

    peer = ConfigPeer()
    _both({INCREMENTAL_ALTER_CONFIGS: peer.alter}, {"t": 1},
          lambda kp: kp.reset_configs([kafka_admin.ConfigResource(
              "TOPIC", "t", ["retention.ms", "cleanup.policy"])],
              raise_on_unknown=False, incremental=True),
          lambda a: a.reset_configs({ConfigResource("topic", "t"): ["retention.ms",
                                                                    "cleanup.policy"]},
                                    timeout=10))
    theirs, ours = peer.deleted()
    assert ours == theirs


def test_reset_group_offsets_commits_what_kafka_python_does() -> None:
    from kontrakt.clients.admin import OffsetSpec
    from tests.unit.admin.test_admin_reset_offsets import Peer as OffsetsPeer

    peer = OffsetsPeer()
    kt = kafka.TopicPartition
    _both({2: peer.list_offsets, 9: peer.offset_fetch, 8: peer.offset_commit}, {"t": 4},
          lambda kp: kp.reset_group_offsets("g", {
              kt("t", 0): kafka_admin.OffsetSpec.EARLIEST,
              kt("t", 1): kafka_admin.OffsetSpec.LATEST,
              kt("t", 2): kafka_admin.OffsetTimestamp(15),
              kt("t", 3): 99}),
          lambda a: a.reset_group_offsets("g", {
              TP("t", 0): OffsetSpec.earliest(), TP("t", 1): OffsetSpec.latest(),
              TP("t", 2): OffsetSpec.for_timestamp(15), TP("t", 3): 99}, timeout=10))
    theirs, ours = ({p.partition_index: p.committed_offset for t in c.topics
                     for p in t.partitions} for c in peer.commits)
    assert ours == theirs == {0: 10, 1: 20, 2: 15, 3: 20}
