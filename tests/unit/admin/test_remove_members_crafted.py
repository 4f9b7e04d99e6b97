"""remove_members_from_consumer_group against crafted coordinators: how members are listed
(ConsumerGroupDescribe first, DescribeGroups for a classic group, as Java's
describeConsumerGroups), how each is named in LeaveGroup (a static member by its instance
id alone, a dynamic one by its member id, Java's default reason) and how per-member answers
are reported. The cluster (tests/cluster/test_consumer_protocol.py) removes members of a
real KIP-848 group; these crafted answers cover the fallbacks and the answers of older
brokers (Kafka 3.8/3.9 refusing consumer-protocol members) that no test broker gives.
"""

from __future__ import annotations

from typing import Any

import pytest

from kontrakt.errors import KafkaError, PartialFailureError
from kontrakt.protocol.errors import GroupIdNotFoundError, UnknownMemberIdError
from kontrakt.protocol.messages import (
    ConsumerGroupDescribeResponse,
    DescribeGroupsResponse,
    LeaveGroupResponse,
)
from tests._crafted_broker import CraftedBroker
from tests.unit.admin.test_admin_crafted import run

CONSUMER_GROUP_DESCRIBE, DESCRIBE_GROUPS, LEAVE_GROUP = 69, 15, 13
GROUP_ID_NOT_FOUND, UNSUPPORTED_VERSION, UNKNOWN_MEMBER_ID = 69, 35, 25
JAVA_REASON = "member was removed by an admin"
_CGD = ConsumerGroupDescribeResponse.DescribedGroup
_DG = DescribeGroupsResponse.DescribedGroup


def _kip848(ver: int, req: Any) -> Any:
    """A KIP-848 group "g": static member m1 (instance i1), dynamic member m2."""
    return ConsumerGroupDescribeResponse(groups=[_CGD(
        group_id=x, group_state="Stable", group_epoch=3, assignment_epoch=3,
        assignor_name="uniform", members=[
            _CGD.Member(member_id="m1", instance_id="i1", member_epoch=3, client_id="c",
                        client_host="/h", subscribed_topic_names=["t"]),
            _CGD.Member(member_id="m2", member_epoch=3, client_id="c", client_host="/h",
                        subscribed_topic_names=["t"])]) for x in req.group_ids])


def _classic(ver: int, req: Any) -> Any:
    """A classic group "g": static member m1 (instance i1), dynamic member m2."""
    M = _DG.DescribedGroupMember
    return DescribeGroupsResponse(groups=[_DG(
        group_id=x, group_state="Stable", protocol_type="consumer", protocol_data="range",
        members=[M(member_id="m1", group_instance_id="i1", client_id="c", client_host="/h"),
                 M(member_id="m2", client_id="c", client_host="/h")]) for x in req.groups])


class Leave:
    """LeaveGroup: echoes each member named (as Kafka 4), with the error ``errors`` gives
    its instance id or member id; ``drop`` names one left out of the answer."""

    def __init__(self, errors: dict[str, int] | None = None, drop: str | None = None) -> None:
        self.errors = errors or {}
        self.drop = drop
        self.asked: list[tuple[str, str | None, str | None]] = []

    def __call__(self, ver: int, req: Any) -> Any:
        R = LeaveGroupResponse.MemberResponse
        out = []
        for m in req.members:
            self.asked.append((m.member_id, m.group_instance_id, m.reason))
            key = m.group_instance_id or m.member_id
            if key != self.drop:
                out.append(R(member_id=m.member_id, group_instance_id=m.group_instance_id,
                             error_code=self.errors.get(key, 0)))
        return LeaveGroupResponse(error_code=0, members=out)


def test_remove_all_lists_a_kip848_group_with_consumer_group_describe() -> None:
    # Java's removeAll lists members with describeConsumerGroups: a KIP-848 group is
    # described by ConsumerGroupDescribe and never asked with DescribeGroups (which a Kafka
    # 4 coordinator answers GROUP_ID_NOT_FOUND for it).
    leave = Leave()
    broker = CraftedBroker({CONSUMER_GROUP_DESCRIBE: _kip848, LEAVE_GROUP: leave})
    out = run(broker, lambda a: a.remove_members_from_consumer_group("g"))
    assert out == {"i1": None, "m2": None}
    assert [k for k, _v, _r in broker.seen] == [CONSUMER_GROUP_DESCRIBE, LEAVE_GROUP]
    # The static member by its instance id alone, the dynamic one by its member id.
    assert leave.asked == [("", "i1", JAVA_REASON), ("m2", None, JAVA_REASON)]


@pytest.mark.parametrize("answer", ["not advertised", "unsupported", "group id not found"])
def test_remove_all_falls_back_to_describe_groups_for_a_classic_group(answer: str) -> None:
    # ConsumerGroupDescribe not offered (before Kafka 3.7), answering UNSUPPORTED_VERSION, or
    # GROUP_ID_NOT_FOUND (a classic group): DescribeGroups lists the members.
    def describe(ver: int, req: Any) -> Any:
        code = UNSUPPORTED_VERSION if answer == "unsupported" else GROUP_ID_NOT_FOUND
        return ConsumerGroupDescribeResponse(groups=[_CGD(
            group_id=x, error_code=code, group_state="", assignor_name="")
            for x in req.group_ids])

    leave = Leave()
    handlers: dict[int, Any] = {DESCRIBE_GROUPS: _classic, LEAVE_GROUP: leave}
    if answer != "not advertised":
        handlers[CONSUMER_GROUP_DESCRIBE] = describe
    broker = CraftedBroker(handlers)
    out = run(broker, lambda a: a.remove_members_from_consumer_group("g", reason="ops"))
    assert out == {"i1": None, "m2": None}
    assert [k for k, _v, _r in broker.seen][-2:] == [DESCRIBE_GROUPS, LEAVE_GROUP]
    assert leave.asked == [("", "i1", "ops"), ("m2", None, "ops")]


def test_members_the_coordinator_refuses_are_reported_each_with_its_error() -> None:
    # Kafka 3.8/3.9 answer UNKNOWN_MEMBER_ID for a member of a KIP-848 group that uses the
    # consumer protocol (KAFKA-18188 lifted that in 4.0): the others are removed; a member
    # the answer leaves out is an error too (Java: "was not included in the removal
    # response").
    leave = Leave({"i1": UNKNOWN_MEMBER_ID})
    broker = CraftedBroker({CONSUMER_GROUP_DESCRIBE: _kip848, LEAVE_GROUP: leave})
    out = run(broker, lambda a: a.remove_members_from_consumer_group(
        "g", return_exceptions=True))
    assert isinstance(out["i1"], UnknownMemberIdError) and out["m2"] is None
    with pytest.raises(PartialFailureError) as caught:
        run(CraftedBroker({CONSUMER_GROUP_DESCRIBE: _kip848, LEAVE_GROUP: leave}),
            lambda a: a.remove_members_from_consumer_group("g"))
    assert isinstance(caught.value.__cause__, UnknownMemberIdError)
    silent = Leave(drop="m2")
    out = run(CraftedBroker({CONSUMER_GROUP_DESCRIBE: _kip848, LEAVE_GROUP: silent}),
              lambda a: a.remove_members_from_consumer_group("g", return_exceptions=True))
    assert out["i1"] is None
    assert isinstance(out["m2"], KafkaError) and "did not mention" in str(out["m2"])
    # One member named: its own error.
    with pytest.raises(UnknownMemberIdError):
        run(CraftedBroker({LEAVE_GROUP: Leave({"i1": UNKNOWN_MEMBER_ID})}),
            lambda a: a.remove_members_from_consumer_group("g", ["i1"]))


def test_a_group_neither_describe_finds_fails_without_a_leave_group() -> None:
    def describe(ver: int, req: Any) -> Any:
        return ConsumerGroupDescribeResponse(groups=[_CGD(
            group_id=x, error_code=GROUP_ID_NOT_FOUND, error_message="no group",
            group_state="", assignor_name="") for x in req.group_ids])

    def classic(ver: int, req: Any) -> Any:
        return DescribeGroupsResponse(groups=[_DG(group_id=x, error_code=GROUP_ID_NOT_FOUND)
                                              for x in req.groups])

    broker = CraftedBroker({CONSUMER_GROUP_DESCRIBE: describe, DESCRIBE_GROUPS: classic,
                            LEAVE_GROUP: Leave()})
    with pytest.raises(GroupIdNotFoundError, match="no group"):
        run(broker, lambda a: a.remove_members_from_consumer_group("g"))
    assert LEAVE_GROUP not in [k for k, _v, _r in broker.seen]


@pytest.mark.parametrize("top", [3, 4, 5])
def test_the_reason_goes_from_v5_cut_to_255_characters(top: int) -> None:
    leave = Leave()
    broker = CraftedBroker({LEAVE_GROUP: leave}, max_versions={LEAVE_GROUP: top})
    assert run(broker, lambda a: a.remove_members_from_consumer_group(
        "g", ["i1"], reason="x" * 300)) == {"i1": None}
    assert leave.asked == [("", "i1", "x" * 255 if top >= 5 else None)]
