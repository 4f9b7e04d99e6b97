# Nested struct classes are set on the message classes at run time.
# mypy: disable-error-code="attr-defined"
"""describe_share_groups (ShareGroupDescribe, KIP-932) against crafted responses: neither
test broker has the API (librdkafka 2.16's mock serves share groups but not
ShareGroupDescribe; Tansu has no share groups)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from kontrakt._types import TopicPartition as TP
from kontrakt.clients.admin import (
    AclOperation,
    AdminClient,
    ConsumerGroupState,
    ShareGroupDescription,
)
from kontrakt.errors import PartialFailureError, UnsupportedVersionError
from kontrakt.protocol.errors import GroupIdNotFoundError
from kontrakt.protocol.messages import ShareGroupDescribeResponse
from tests._crafted_broker import NODE_ID, CraftedBroker
from tests.unit.admin.test_admin_crafted import FAST, run

_G = ShareGroupDescribeResponse.DescribedGroup
_A = _G.Member.ShareGroupDescribeAssignment


def _describe(ver: int, req: Any) -> Any:
    out = []
    for gid in req.group_ids:
        if gid == "nope":
            out.append(_G(group_id=gid, error_code=GroupIdNotFoundError.code,
                          error_message="nope is not a share group", group_state="",
                          assignor_name=""))
            continue
        out.append(_G(
            group_id=gid, group_state="Stable", group_epoch=4, assignment_epoch=3,
            assignor_name="simple",
            authorized_operations=1 << 3 if req.include_authorized_operations else -(2**31),
            members=[_G.Member(
                member_id="m1", rack_id="r1", member_epoch=4, client_id="c", client_host="/h",
                subscribed_topic_names=["t"],
                assignment=_A(topic_partitions=[_A.ShareGroupDescribeTopicPartitions(
                    topic_id=uuid.UUID(int=7), topic_name="t", partitions=[2, 0])]))]))
    return ShareGroupDescribeResponse(groups=out)


def test_describe_share_groups_maps_the_response() -> None:
    broker = CraftedBroker({77: _describe})
    out = run(broker, lambda a: a.describe_share_groups(
        ["work", "nope"], include_authorized_operations=True, return_exceptions=True))
    [(version, req)] = [(v, r) for k, v, r in broker.seen if k == 77]
    assert (version, req.group_ids, req.include_authorized_operations) == (
        1, ["work", "nope"], True)
    work = out["work"]
    assert isinstance(work, ShareGroupDescription)
    assert (work.group_id, work.state, work.partition_assignor, work.group_epoch,
            work.target_assignment_epoch) == ("work", ConsumerGroupState.STABLE, "simple", 4, 3)
    assert work.coordinator is not None and work.coordinator.id == NODE_ID
    assert work.authorized_operations == frozenset({AclOperation.READ})
    (m,) = work.members
    assert (m.member_id, m.client_id, m.host, m.rack_id, m.subscription, m.member_epoch) == (
        "m1", "c", "/h", "r1", ("t",), 4)
    assert m.assignment.topic_partitions == (TP("t", 0), TP("t", 2))
    assert isinstance(out["nope"], GroupIdNotFoundError)
    assert "nope is not a share group" in str(out["nope"])


def test_describe_share_groups_blocking_form_raises_partial_failure() -> None:
    broker = CraftedBroker({77: _describe})

    def call() -> Any:
        with AdminClient({"bootstrap.servers": broker.bootstrap, **FAST}) as admin:
            return admin.describe_share_groups(["work", "nope"])

    async def serve() -> Any:
        async with broker:  # the peer runs on this loop; the blocking admin on a thread
            return await asyncio.get_running_loop().run_in_executor(None, call)

    with pytest.raises(PartialFailureError) as info:
        asyncio.run(serve())
    assert isinstance(info.value.results["work"], ShareGroupDescription)


def test_describe_share_groups_without_the_api_fails_per_group() -> None:
    out = run(CraftedBroker({}), lambda a: a.describe_share_groups(["work"],
                                                                 return_exceptions=True))
    assert isinstance(out["work"], UnsupportedVersionError)
