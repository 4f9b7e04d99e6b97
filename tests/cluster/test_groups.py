"""Classic groups on the cluster, request by request (Kafka's GroupCoordinator rules): member
ids, rebalances that wait for every member, rebalance and session timeouts, static
membership fencing, commit generation checks, and the group admin APIs through Kontrakt's
AdminClient."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from kontrakt import Consumer
from kontrakt._types import TopicPartition as TP
from kontrakt.clients.admin import AdminClient
from kontrakt.errors import InvalidArgumentError
from kontrakt.protocol import errors as E
from kontrakt.protocol.messages import (
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kontrakt.protocol.spec import Request
from kontrakt.testing import Cluster, send_request

GROUP = "g1"


def coordinator(cluster: Cluster, group: str = GROUP) -> str:
    resp = send_request(cluster.bootstrap_servers.split(",")[0],
                        FindCoordinatorRequest(key=group, key_type=0), 3)
    assert resp.error_code == 0
    return f"{resp.host}:{resp.port}"


def send(cluster: Cluster, msg: Request, version: int, timeout: float = 10.0) -> Any:
    return send_request(coordinator(cluster, getattr(msg, "group_id", GROUP)), msg, version,
                        timeout=timeout)


def join(cluster: Cluster, member_id: str = "", instance: str | None = None,
         session_ms: int = 5000, rebalance_ms: int = 5000, meta: bytes = b"m",
         protocols: tuple[str, ...] = ("p1",), version: int = 7) -> Any:
    return send(cluster, JoinGroupRequest(
        group_id=GROUP, session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms,
        member_id=member_id, group_instance_id=instance, protocol_type="custom",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=p, metadata=meta)
                   for p in protocols]), version)


def sync(cluster: Cluster, member_id: str, generation: int,
         assignments: dict[str, bytes] | None = None, instance: str | None = None) -> Any:
    return send(cluster, SyncGroupRequest(
        group_id=GROUP, generation_id=generation, member_id=member_id,
        group_instance_id=instance, assignments=[
            SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
            for m, a in (assignments or {}).items()]), 3)


def heartbeat(cluster: Cluster, member_id: str, generation: int,
              instance: str | None = None) -> int:
    return int(send(cluster, HeartbeatRequest(group_id=GROUP, generation_id=generation,
                                              member_id=member_id,
                                              group_instance_id=instance), 3).error_code)


def describe(cluster: Cluster) -> Any:
    return send(cluster, DescribeGroupsRequest(groups=[GROUP]), 5).groups[0]


def first_join(cluster: Cluster, **kw: Any) -> Any:
    """A dynamic member's two-step join (MEMBER_ID_REQUIRED, then with the given id)."""
    first = join(cluster, **kw)
    assert first.error_code == E.MemberIdRequiredError.code and first.member_id
    return join(cluster, member_id=first.member_id, **kw)


def test_a_second_member_triggers_a_rebalance_that_waits_for_both(cluster: Cluster) -> None:
    a = first_join(cluster)
    assert (a.error_code, a.generation_id, a.leader) == (0, 1, a.member_id)
    assert [m.member_id for m in a.members] == [a.member_id]
    assert sync(cluster, a.member_id, 1, {a.member_id: b"A1"}).assignment == b"A1"
    assert heartbeat(cluster, a.member_id, 1) == 0
    with ThreadPoolExecutor(2) as pool:
        b_first = join(cluster)
        b_join = pool.submit(join, cluster, b_first.member_id)
        deadline = time.monotonic() + 5
        while heartbeat(cluster, a.member_id, 1) != E.RebalanceInProgressError.code:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert not b_join.done()  # held until A rejoins
        a2 = join(cluster, member_id=a.member_id)
        b = b_join.result(5)
    assert a2.generation_id == b.generation_id == 2
    assert a2.leader == b.leader == a.member_id
    assert sorted(m.member_id for m in a2.members) == sorted([a.member_id, b.member_id])
    assert b.members == []  # only the leader gets the members
    with ThreadPoolExecutor(1) as pool:
        follower = pool.submit(sync, cluster, b.member_id, 2)
        leader = sync(cluster, a.member_id, 2, {a.member_id: b"A2", b.member_id: b"B2"})
        assert (leader.assignment, follower.result(5).assignment) == (b"A2", b"B2")
    group = describe(cluster)
    assert (group.group_state, group.protocol_type, group.protocol_data) == (
        "Stable", "custom", "p1")
    assert sorted(m.member_assignment for m in group.members) == [b"A2", b"B2"]
    assert heartbeat(cluster, a.member_id, 1) == E.IllegalGenerationError.code


def test_members_that_miss_the_rebalance_or_their_session_are_removed(
        cluster: Cluster) -> None:
    a = first_join(cluster, session_ms=1000, rebalance_ms=300)
    sync(cluster, a.member_id, 1, {a.member_id: b"x"})
    b_first = join(cluster, session_ms=60000, rebalance_ms=300)
    start = time.monotonic()
    b = join(cluster, member_id=b_first.member_id, session_ms=60000, rebalance_ms=300)
    # A never rejoined: the rebalance ends after its timeout without it.
    assert 0.2 < time.monotonic() - start < 3
    assert (b.error_code, b.generation_id, b.leader) == (0, 2, b.member_id)
    assert heartbeat(cluster, a.member_id, 1) == E.UnknownMemberIdError.code
    sync(cluster, b.member_id, 2, {b.member_id: b"y"})
    # C (1 s session) joins, then never heartbeats: it expires; B (60 s session) stays.
    c_first = join(cluster, session_ms=1000, rebalance_ms=300)
    with ThreadPoolExecutor(1) as pool:
        c_join = pool.submit(join, cluster, c_first.member_id, None, 1000, 300)
        deadline = time.monotonic() + 5
        while describe(cluster).group_state != "PreparingRebalance":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        join(cluster, member_id=b.member_id, session_ms=60000, rebalance_ms=300)
        c = c_join.result(5)
    assert c.generation_id == 3
    deadline = time.monotonic() + 5
    while len(describe(cluster).members) != 1:
        assert time.monotonic() < deadline, "C's session never expired"
        time.sleep(0.05)
    assert [m.member_id for m in describe(cluster).members] == [b.member_id]


def test_a_static_member_rejoins_without_a_rebalance_and_fences_its_old_id(
        cluster: Cluster) -> None:
    first = join(cluster, instance="i1")
    assert first.error_code == 0 and first.generation_id == 1  # no MEMBER_ID_REQUIRED
    sync(cluster, first.member_id, 1, {first.member_id: b"mine"}, instance="i1")
    again = join(cluster, instance="i1")
    assert again.error_code == 0 and again.member_id != first.member_id
    assert again.generation_id == 1  # same generation: no rebalance
    assert sync(cluster, again.member_id, 1, instance="i1").assignment == b"mine"
    assert heartbeat(cluster, first.member_id, 1, "i1") == E.FencedInstanceIdError.code
    assert heartbeat(cluster, again.member_id, 1, "i1") == 0
    assert describe(cluster).group_state == "Stable"


def test_a_restarted_static_leader_with_new_subscription_bytes_keeps_the_assignment(
        cluster: Cluster) -> None:
    # A restarted consumer's subscription differs (owned partitions and generation start
    # over); Kafka rebalances only when the group's protocol would change (KIP-345), and
    # tells a returning leader to keep the assignment (KIP-814, JoinGroup v9).
    first = join(cluster, instance="i1", meta=b"owned=p0,gen=1", protocols=("p1", "p2"),
                 version=9)
    sync(cluster, first.member_id, 1, {first.member_id: b"mine"}, instance="i1")
    again = join(cluster, instance="i1", meta=b"owned=,gen=-1", protocols=("p1", "p2"),
                 version=9)
    assert (again.error_code, again.generation_id, again.leader) == (0, 1, again.member_id)
    assert again.skip_assignment
    assert [(m.member_id, m.group_instance_id, m.metadata) for m in again.members] == [
        (again.member_id, "i1", b"owned=,gen=-1")]
    assert sync(cluster, again.member_id, 1, instance="i1").assignment == b"mine"
    assert describe(cluster).group_state == "Stable"
    # Another first choice changes the group's protocol: that rebalances.
    changed = join(cluster, instance="i1", protocols=("p2", "p1"), version=9)
    assert (changed.error_code, changed.generation_id, changed.skip_assignment) == (
        0, 2, False)
    assert describe(cluster).protocol_data == "p2"


def test_commits_are_checked_against_the_generation(cluster: Cluster) -> None:
    cluster.create_topic("t")
    OC = OffsetCommitRequest

    def commit(member: str, generation: int) -> int:
        resp = send(cluster, OC(group_id=GROUP, generation_id_or_member_epoch=generation,
                                member_id=member, topics=[OC.OffsetCommitRequestTopic(
                                    name="t", partitions=[
                                        OC.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                                            partition_index=0, committed_offset=7,
                                            committed_metadata="meta")])]), 8)
        return int(resp.topics[0].partitions[0].error_code)

    assert commit("", -1) == 0  # no members yet: a commit outside group management
    a = first_join(cluster)
    sync(cluster, a.member_id, 1, {a.member_id: b""})
    assert commit("someone", 1) == E.UnknownMemberIdError.code
    assert commit(a.member_id, 0) == E.IllegalGenerationError.code
    assert commit(a.member_id, 1) == 0
    OF = OffsetFetchRequest
    fetched = send(cluster, OF(group_id=GROUP, topics=[OF.OffsetFetchRequestTopic(
        name="t", partition_indexes=[0, 1])]), 7)
    parts = fetched.topics[0].partitions
    assert [(p.committed_offset, p.metadata) for p in parts] == [(7, "meta"), (-1, "")]


def test_group_admin_through_kontrakt(cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic, partitions=2)
    bs = cluster.bootstrap_servers
    with AdminClient(bootstrap_servers=bs, default_api_timeout_ms=10000) as admin, \
            Consumer(bootstrap_servers=bs, group_id="admin-g", auto_offset_reset="earliest",
                     session_timeout_ms=6000) as consumer:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 10
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.1)
        consumer.commit({TP(topic, 0): 0, TP(topic, 1): 0})
        listed = {g.group_id: g for g in admin.list_consumer_groups()}
        assert "admin-g" in listed
        described = admin.describe_consumer_groups(["admin-g"])["admin-g"]
        assert len(described.members) == 1
        assert {tp.partition for tp in described.members[0].assignment.topic_partitions} \
            == {0, 1}
        busy = admin.delete_consumer_groups(["admin-g"], return_exceptions=True)
        assert isinstance(busy["admin-g"], E.NonEmptyGroupError)
        held = admin.delete_consumer_group_offsets("admin-g", [TP(topic, 0)],
                                                   return_exceptions=True)
        assert isinstance(held[TP(topic, 0)], E.GroupSubscribedToTopicError)
    with AdminClient(bootstrap_servers=bs, default_api_timeout_ms=10000) as admin:
        admin.delete_consumer_group_offsets("admin-g", [TP(topic, 0)])
        offsets = admin.list_consumer_group_offsets("admin-g")
        assert set(offsets) == {TP(topic, 1)}
        admin.delete_consumer_groups(["admin-g"])
        assert "admin-g" not in {g.group_id for g in admin.list_consumer_groups()}


@pytest.mark.parametrize("version", [0, 4, 6, 9])
def test_join_versions(cluster: Cluster, version: int) -> None:
    """MEMBER_ID_REQUIRED from v4 on; older versions get a member id at once."""
    req = JoinGroupRequest(
        group_id=GROUP, session_timeout_ms=5000, rebalance_timeout_ms=5000, member_id="",
        protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")])
    resp = send(cluster, req, version)
    if version >= 4:
        assert resp.error_code == E.MemberIdRequiredError.code
        req.member_id = resp.member_id
        resp = send(cluster, req, version)
    assert resp.error_code == 0 and resp.protocol_name == "range"


def test_admin_removes_static_members_then_everyone(cluster: Cluster) -> None:
    """remove_members_from_consumer_group (LeaveGroup v3+ for the members, as Java's
    removeMembersFromConsumerGroup): by group.instance.id, then every member at once."""
    first = join(cluster, instance="i1")
    assert first.error_code == 0
    sync(cluster, first.member_id, 1, {first.member_id: b"x"}, instance="i1")
    bs = cluster.bootstrap_servers
    with AdminClient(bootstrap_servers=bs, default_api_timeout_ms=10000) as admin:
        missing = admin.remove_members_from_consumer_group(GROUP, ["nobody"],
                                                           return_exceptions=True)
        assert isinstance(missing["nobody"], E.UnknownMemberIdError)
        assert admin.remove_members_from_consumer_group(GROUP, ["i1"], reason="ops") \
            == {"i1": None}
        assert describe(cluster).members == []
        assert heartbeat(cluster, first.member_id, 1, "i1") == E.UnknownMemberIdError.code
        # A dynamic member: members=None finds it with DescribeGroups and removes it.
        dynamic = first_join(cluster)
        sync(cluster, dynamic.member_id, dynamic.generation_id, {dynamic.member_id: b"y"})
        assert len(describe(cluster).members) == 1
        removed = admin.remove_members_from_consumer_group(GROUP)
        assert removed == {dynamic.member_id: None}
        assert describe(cluster).members == []
        assert admin.remove_members_from_consumer_group(GROUP) == {}  # nobody left
        with pytest.raises(InvalidArgumentError):
            admin.remove_members_from_consumer_group(GROUP, [])
