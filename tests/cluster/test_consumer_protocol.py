"""The KIP-848 consumer group protocol on the cluster: reconciliation on the wire by Kafka's
rules (revoke before reassign, member epochs, fencing, stale commits), and Kontrakt and
confluent-kafka members (group.protocol=consumer) sharing one group. Tansu has no KIP-848;
the mock cluster has it only for librdkafka members."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kontrakt import Consumer, Producer
from kontrakt._types import TopicPartition as TP
from kontrakt.protocol import errors as E
from kontrakt.protocol.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    FindCoordinatorRequest,
    MetadataRequest,
    OffsetCommitRequest,
)
from kontrakt.testing import Cluster, send_request

HB = ConsumerGroupHeartbeatRequest
GROUP = "g848"


def _coordinator(cluster: Cluster) -> str:
    found = send_request(cluster.bootstrap_servers.split(",")[0],
                         FindCoordinatorRequest(key=GROUP, key_type=0), 3)
    return f"{found.host}:{found.port}"


def _hb(cluster: Cluster, member: str, epoch: int, topics: list[str] | None = None,
        owned: list[int] | None = None, topic_id: Any = None) -> Any:
    return send_request(_coordinator(cluster), HB(
        group_id=GROUP, member_id=member, member_epoch=epoch, rebalance_timeout_ms=5000,
        subscribed_topic_names=topics, server_assignor="range" if epoch == 0 else None,
        topic_partitions=None if owned is None else [HB.TopicPartitions(
            topic_id=topic_id, partitions=owned)] if owned else []), 1)


def _parts(resp: Any) -> list[int] | None:
    if resp.assignment is None:
        return None
    return sorted(p for tp in resp.assignment.topic_partitions for p in tp.partitions)


def test_partitions_move_only_after_their_owner_lets_go(cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic, partitions=2)
    tid = send_request(cluster.bootstrap_servers.split(",")[0], MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=topic)]), 12).topics[0].topic_id
    a = _hb(cluster, "a", 0, [topic], [], tid)
    assert (a.error_code, a.member_epoch, _parts(a)) == (0, 1, [0, 1])
    b = _hb(cluster, "b", 0, [topic], [], tid)
    # The range assignor gives b partition 1, but a still holds it: b gets nothing yet.
    assert (b.error_code, b.member_epoch, _parts(b)) == (0, 2, [])
    a = _hb(cluster, "a", 1, owned=[0, 1], topic_id=tid)
    assert (a.member_epoch, _parts(a)) == (1, [0])  # let go of 1; epoch stays
    b = _hb(cluster, "b", 2, owned=[], topic_id=tid)
    assert _parts(b) is None  # still held: nothing changed for b
    a = _hb(cluster, "a", 1, owned=[0], topic_id=tid)
    assert (a.member_epoch, _parts(a)) == (2, None)  # confirmed: a moves to epoch 2
    b = _hb(cluster, "b", 2, owned=[], topic_id=tid)
    assert _parts(b) == [1]
    described = send_request(_coordinator(cluster), ConsumerGroupDescribeRequest(
        group_ids=[GROUP]), 0).groups[0]
    assert (described.group_state, described.group_epoch, described.assignor_name) == (
        "Stable", 2, "range")
    # Fencing and stale commits.
    assert _hb(cluster, "a", 1).error_code == E.FencedMemberEpochError.code
    assert _hb(cluster, "nobody", 3).error_code == E.UnknownMemberIdError.code
    OC = OffsetCommitRequest

    def commit(member: str, epoch: int) -> int:
        resp = send_request(_coordinator(cluster), OC(
            group_id=GROUP, generation_id_or_member_epoch=epoch, member_id=member,
            topics=[OC.OffsetCommitRequestTopic(name=topic, partitions=[
                OC.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                    partition_index=1, committed_offset=3, committed_metadata="")])]), 9)
        return int(resp.topics[0].partitions[0].error_code)

    assert commit("b", 1) == E.StaleMemberEpochError.code
    assert commit("b", 2) == 0
    assert commit("", -1) == E.UnknownMemberIdError.code  # not while the group has members
    left = _hb(cluster, "a", -1)
    assert (left.error_code, left.member_epoch) == (0, -1)
    b = _hb(cluster, "b", 2)
    assert (b.member_epoch, _parts(b)) == (3, [0, 1])


def test_members_without_heartbeats_expire(topic: str) -> None:
    with Cluster(1, group_consumer_session_timeout_ms=300) as cluster:
        cluster.create_topic(topic)
        assert _hb(cluster, "a", 0, [topic], []).member_epoch == 1
        deadline = time.monotonic() + 5
        while _hb(cluster, "a", 1).error_code != E.UnknownMemberIdError.code:
            assert time.monotonic() < deadline
            time.sleep(0.4)


def test_kontrakt_and_confluent_members_share_a_group(topic: str) -> None:
    import confluent_kafka

    with Cluster(3, group_consumer_heartbeat_interval_ms=200) as cluster:
        cluster.create_topic(topic, partitions=6)
        bs = cluster.bootstrap_servers
        with Producer(bootstrap_servers=bs) as p:
            for i in range(60):
                p.send(topic, b"%d" % i, partition=i % 6)
            p.flush(10)
        seen: set[tuple[int, int]] = set()
        kontrakt = Consumer(bootstrap_servers=bs, group_id=GROUP, group_protocol="consumer",
                            auto_offset_reset="earliest")
        confluent = confluent_kafka.Consumer({
            "bootstrap.servers": bs, "group.id": GROUP, "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "log_level": 3})
        try:
            kontrakt.subscribe([topic])
            confluent.subscribe([topic])
            deadline = time.monotonic() + 20
            mine: set[int] = set()
            theirs: set[int] = set()
            while time.monotonic() < deadline:
                r = kontrakt.poll(0.05)
                if r is not None:
                    seen.add((r.partition, r.offset))
                m = confluent.poll(0.05)
                if m is not None and m.error() is None:
                    seen.add((m.partition(), m.offset()))
                mine = {tp.partition for tp in kontrakt.assignment()}
                theirs = {tp.partition for tp in confluent.assignment()}
                if len(mine) == 3 and len(theirs) == 3 and len(seen) == 60:
                    break
            assert (len(mine), len(theirs), mine & theirs, len(seen)) == (3, 3, set(), 60)
            kontrakt.commit()
            committed = kontrakt.committed([TP(topic, p) for p in mine])
            assert all(o is not None and o.offset == 10 for o in committed.values())
        finally:
            confluent.close()
        try:
            deadline = time.monotonic() + 20
            while len(kontrakt.assignment()) < 6 and time.monotonic() < deadline:
                kontrakt.poll(0.05)
            assert len(kontrakt.assignment()) == 6  # the leaver's partitions came over
        finally:
            kontrakt.close()
        assert cluster.internal_errors() == []


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_assignors_cover_every_partition_once(cluster: Cluster, topic: str,
                                              assignor: str) -> None:
    cluster.create_topic(topic, partitions=5)
    tid = send_request(cluster.bootstrap_servers.split(",")[0], MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=topic)]), 12).topics[0].topic_id
    got = {}
    for member in ("m1", "m2", "m3"):
        resp = send_request(_coordinator(cluster), HB(
            group_id=GROUP, member_id=member, member_epoch=0, subscribed_topic_names=[topic],
            server_assignor=assignor, topic_partitions=[]), 1)
        assert resp.error_code == 0
    described = send_request(_coordinator(cluster), ConsumerGroupDescribeRequest(
        group_ids=[GROUP]), 0).groups[0]
    for m in described.members:
        got[m.member_id] = sorted(p for tp in m.target_assignment.topic_partitions
                                  if tp.topic_id == tid for p in tp.partitions)
    assert sorted(p for ps in got.values() for p in ps) == [0, 1, 2, 3, 4]
    assert sorted(len(ps) for ps in got.values()) == [1, 2, 2]


def test_classic_apis_see_a_consumer_protocol_group_as_such(cluster: Cluster,
                                                            topic: str) -> None:
    from kontrakt.protocol.messages import DescribeGroupsRequest, ListGroupsRequest

    cluster.create_topic(topic)
    assert _hb(cluster, "a", 0, [topic], []).error_code == 0
    listed = send_request(_coordinator(cluster), ListGroupsRequest(), 5).groups
    assert [(g.group_id, g.group_type, g.protocol_type) for g in listed] == [
        (GROUP, "consumer", "consumer")]
    described = send_request(_coordinator(cluster), DescribeGroupsRequest(
        groups=[GROUP]), 6).groups[0]
    assert described.error_code == E.GroupIdNotFoundError.code


def test_admin_describes_a_consumer_protocol_group_and_a_classic_one(cluster: Cluster,
                                                                     topic: str) -> None:
    # ConsumerGroupDescribe describes the KIP-848 group; DescribeGroups, asked after
    # ConsumerGroupDescribe answers GROUP_ID_NOT_FOUND, the classic one. confluent-kafka's
    # admin (librdkafka, which does the same) describes both as the oracle.
    import asyncio

    import confluent_kafka.admin as ck

    from kontrakt import AsyncConsumer
    from kontrakt.clients.admin import AsyncAdminClient, ConsumerGroupState, ConsumerGroupType

    other = topic + "-classic"
    cluster.create_topic(topic, partitions=3)
    cluster.create_topic(other, partitions=2)
    bs = cluster.bootstrap_servers

    def confluent_describe(groups: list[str]) -> dict[str, Any]:
        admin = ck.AdminClient({"bootstrap.servers": bs, "log_level": 3})
        return {g: f.result(15) for g, f in admin.describe_consumer_groups(groups).items()}

    async def main() -> tuple[dict[str, Any], dict[str, Any]]:
        async with AsyncConsumer(bootstrap_servers=bs, group_id=GROUP,
                                 group_protocol="consumer", client_id="k848",
                                 group_instance_id="i848") as new, \
                AsyncConsumer(bootstrap_servers=bs, group_id="gclassic",
                              client_id="kclassic") as old, \
                AsyncAdminClient(bootstrap_servers=bs) as admin:
            new.subscribe([topic])
            old.subscribe([other])
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and (
                    len(new.assignment()) < 3 or len(old.assignment()) < 2):
                await asyncio.gather(new.getmany(timeout=0.05), old.getmany(timeout=0.05))
            assert (len(new.assignment()), len(old.assignment())) == (3, 2)
            ours = await admin.describe_consumer_groups([GROUP, "gclassic"])
            theirs = await asyncio.to_thread(confluent_describe, [GROUP, "gclassic"])
            return ours, theirs

    ours, theirs = asyncio.run(main())
    d848, dclassic = ours[GROUP], ours["gclassic"]
    assert (d848.type, d848.state, d848.is_simple_consumer_group, d848.protocol_type) == (
        ConsumerGroupType.CONSUMER, ConsumerGroupState.STABLE, False, "consumer")
    assert d848.group_epoch is not None and d848.group_epoch > 0
    assert d848.target_assignment_epoch == d848.group_epoch
    (m,) = d848.members
    every = tuple(TP(topic, p) for p in range(3))
    assert (m.client_id, m.group_instance_id, m.subscription, m.upgraded) == (
        "k848", "i848", (topic,), True)
    assert m.assignment.topic_partitions == every
    assert m.target_assignment is not None and m.target_assignment.topic_partitions == every
    assert m.member_epoch == d848.group_epoch
    assert (dclassic.type, dclassic.state, dclassic.group_epoch) == (
        ConsumerGroupType.CLASSIC, ConsumerGroupState.STABLE, None)
    (c,) = dclassic.members
    assert c.client_id == "kclassic" and c.target_assignment is None
    assert c.assignment.topic_partitions == (TP(other, 0), TP(other, 1))
    for gid, ours_d in ours.items():
        oracle = theirs[gid]
        assert (ours_d.type.name, ours_d.state.name, ours_d.partition_assignor,
                ours_d.is_simple_consumer_group) == (
            oracle.type.name, oracle.state.name, oracle.partition_assignor,
            oracle.is_simple_consumer_group), gid
        assert [(x.member_id, x.client_id, x.host, x.group_instance_id,
                 sorted(x.assignment.topic_partitions)) for x in ours_d.members] == [
            (x.member_id, x.client_id, x.host, x.group_instance_id,
             sorted(TP(t.topic, t.partition) for t in x.assignment.topic_partitions))
            for x in oracle.members], gid
        assert [x.target_assignment and sorted(x.target_assignment.topic_partitions)
                for x in ours_d.members] == [
            x.target_assignment and sorted(TP(t.topic, t.partition)
                                           for t in x.target_assignment.topic_partitions)
            for x in oracle.members], gid


def test_admin_removes_members_of_a_consumer_protocol_group(cluster: Cluster,
                                                            topic: str) -> None:
    # Kafka 4's coordinator removes any member of a KIP-848 group that LeaveGroup names
    # (KAFKA-18188): a static one by instance id, every one with members=None, listed with
    # ConsumerGroupDescribe (DescribeGroups does not know the group). Members that stopped
    # heartbeating stay removed; a removed member's next heartbeat is UNKNOWN_MEMBER_ID.
    from kontrakt.clients.admin import AdminClient

    cluster.create_topic(topic, partitions=2)
    assert _hb(cluster, "a", 0, [topic], []).error_code == 0
    static = send_request(_coordinator(cluster), HB(
        group_id=GROUP, member_id="b", instance_id="ib", member_epoch=0,
        rebalance_timeout_ms=5000, subscribed_topic_names=[topic], topic_partitions=[]), 1)
    assert static.error_code == 0

    def described() -> Any:
        return send_request(_coordinator(cluster), ConsumerGroupDescribeRequest(
            group_ids=[GROUP]), 0).groups[0]

    epoch = described().group_epoch
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers,
                     default_api_timeout_ms=10000) as admin:
        missing = admin.remove_members_from_consumer_group(GROUP, ["nobody", "ib"],
                                                           return_exceptions=True)
        assert isinstance(missing["nobody"], E.UnknownMemberIdError)
        assert missing["ib"] is None
        assert [m.member_id for m in described().members] == ["a"]
        assert admin.remove_members_from_consumer_group(GROUP) == {"a": None}
        after = described()
        assert (after.members, after.group_state) == ([], "Empty")
        assert after.group_epoch == epoch + 2
        assert admin.remove_members_from_consumer_group(GROUP) == {}
    assert _hb(cluster, "a", 1).error_code == E.UnknownMemberIdError.code
    assert _hb(cluster, "b", 1).error_code == E.UnknownMemberIdError.code


def test_admin_removes_live_kontrakt_and_confluent_members(topic: str) -> None:
    # A KIP-848 group of a static Kontrakt member and a dynamic confluent-kafka one:
    # members=None removes both, named as confluent-kafka's admin (the oracle) describes
    # them (instance id, else member id). Each learns it at its next heartbeat
    # (UNKNOWN_MEMBER_ID): the Kontrakt member's partitions are lost and it joins again.
    import confluent_kafka
    import confluent_kafka.admin as ck

    from kontrakt.clients.admin import AdminClient

    with Cluster(3, group_consumer_heartbeat_interval_ms=200) as cluster:
        cluster.create_topic(topic, partitions=4)
        bs = cluster.bootstrap_servers
        events: list[str] = []

        class Listener:
            def on_partitions_assigned(self, parts: set[TP]) -> None:
                events.append("assigned")

            def on_partitions_lost(self, parts: set[TP]) -> None:
                events.append(f"lost {len(parts)}")

        kontrakt = Consumer(bootstrap_servers=bs, group_id=GROUP, group_protocol="consumer",
                            group_instance_id="ik")
        confluent = confluent_kafka.Consumer({
            "bootstrap.servers": bs, "group.id": GROUP, "group.protocol": "consumer",
            "log_level": 3})
        try:
            kontrakt.subscribe([topic], listener=Listener())
            confluent.subscribe([topic])

            def settle(what: Any) -> None:
                deadline = time.monotonic() + 20
                while not what():
                    assert time.monotonic() < deadline, events
                    kontrakt.poll(0.05)
                    confluent.poll(0.05)

            settle(lambda: len(kontrakt.assignment()) == 2 == len(confluent.assignment()))
            oracle = ck.AdminClient({"bootstrap.servers": bs, "log_level": 3})
            described = oracle.describe_consumer_groups([GROUP])[GROUP].result(15)
            del oracle  # (not left reconnecting to the stopped cluster)
            expected = {m.group_instance_id or m.member_id: None for m in described.members}
            assert "ik" in expected and len(expected) == 2
            with AdminClient(bootstrap_servers=bs, default_api_timeout_ms=10000) as admin:
                assert admin.remove_members_from_consumer_group(GROUP) == expected
            settle(lambda: "lost 2" in events and events[-1] == "assigned"
                   and len(kontrakt.assignment()) + len(confluent.assignment()) == 4)
        finally:
            confluent.close()
            kontrakt.close()
        assert cluster.internal_errors() == []
