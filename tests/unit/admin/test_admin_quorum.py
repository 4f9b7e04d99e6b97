"""describe_metadata_quorum against crafted DescribeQuorum answers.

Neither test broker answers DescribeQuorum (API 55): Tansu 0.6.0 does not advertise it and
librdkafka's mock cluster has no admin APIs, so the admin client's request, decoding, error
reporting and retries are checked against a crafted peer (``tests/_crafted_broker.py``).
The codec itself is checked byte for byte against kafka-python in
tests/unit/test_messages_admin_ops.py.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from kontrakt.clients.admin import (
    AdminClient,
    QuorumInfo,
    QuorumNode,
    QuorumReplicaState,
    RaftVoterEndpoint,
)
from kontrakt.errors import ProtocolError, UnsupportedVersionError
from kontrakt.protocol.errors import ClusterAuthorizationFailedError, NotLeaderOrFollowerError
from kontrakt.protocol.messages import DescribeQuorumResponse
from tests._crafted_broker import CraftedBroker
from tests.unit.admin.test_admin_crafted import FAST, run

DESCRIBE_QUORUM = 55
NOT_LEADER_OR_FOLLOWER, CLUSTER_AUTHORIZATION_FAILED = 6, 31
R = DescribeQuorumResponse
TD = R.TopicData
PD = TD.PartitionData
RS = PD.ReplicaState
DIR_A, DIR_B = uuid.UUID(int=0xA), uuid.UUID(int=0xB)


def _answer(version: int, *, topic: str = "__cluster_metadata", partition: int = 0,
            error: int = 0, partition_error: int = 0, message: str | None = None) -> Any:
    """A three-node quorum as a broker answering ``version`` lays it out (directory ids,
    messages and nodes from v2, fetch times from v1)."""
    v1, v2 = version >= 1, version >= 2

    def replica(rid: int, directory: uuid.UUID, leo: int, fetch: int, caught_up: int) -> Any:
        return RS(replica_id=rid, replica_directory_id=directory if v2 else uuid.UUID(int=0),
                  log_end_offset=leo, last_fetch_timestamp=fetch if v1 else -1,
                  last_caught_up_timestamp=caught_up if v1 else -1)

    return R(error_code=error, topics=[TD(topic_name=topic, partitions=[PD(
        partition_index=partition, error_code=partition_error,
        error_message=message if v2 else None,
        leader_id=3000, leader_epoch=7, high_watermark=1234,
        current_voters=[replica(3000, DIR_A, 1240, -1, 99), replica(3001, DIR_B, 1230, 95, 90)],
        observers=[RS(replica_id=1, log_end_offset=-1)])])],
        nodes=[R.Node(node_id=3000, listeners=[
            R.Node.Listener(name="CONTROLLER", host="c0", port=9093)])] if v2 else [])


class Quorum:
    """Answers DescribeQuorum with ``_answer(version, **kw)`` for each ``kw`` of ``answers``
    in turn (the last one from then on)."""

    def __init__(self, *answers: dict[str, Any]) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[int, Any]] = []

    def __call__(self, ver: int, req: Any) -> Any:
        self.asked.append((ver, req))
        kw = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return _answer(ver, **kw)


def _sent(req: Any) -> list[tuple[str, list[int]]]:
    return [(t.topic_name, [p.partition_index for p in t.partitions]) for t in req.topics]


def test_v2_answer_is_decoded_with_directory_ids_times_and_listeners() -> None:
    quorum = Quorum({})
    out = run(CraftedBroker({DESCRIBE_QUORUM: quorum}), lambda a: a.describe_metadata_quorum())
    assert out == QuorumInfo(
        3000, 7, 1234,
        (QuorumReplicaState(3000, DIR_A, 1240, None, 99),
         QuorumReplicaState(3001, DIR_B, 1230, 95, 90)),
        # the zero directory id and -1 times mean "none" / "unknown"
        (QuorumReplicaState(1, None, -1, None, None),),
        {3000: QuorumNode(3000, (RaftVoterEndpoint("CONTROLLER", "c0", 9093),))})
    [(version, req)] = quorum.asked
    assert version == 2
    assert _sent(req) == [("__cluster_metadata", [0])]


def test_a_v0_broker_reports_no_times_directories_or_nodes() -> None:
    quorum = Quorum({})
    out = run(CraftedBroker({DESCRIBE_QUORUM: quorum}, max_versions={DESCRIBE_QUORUM: 0}),
              lambda a: a.describe_metadata_quorum())
    assert [v for v, _r in quorum.asked] == [0]
    assert out.voters == (QuorumReplicaState(3000, None, 1240, None, None),
                          QuorumReplicaState(3001, None, 1230, None, None))
    assert out.nodes == {}
    assert (out.leader_id, out.leader_epoch, out.high_watermark) == (3000, 7, 1234)


def test_not_leader_or_follower_is_retried_until_the_quorum_answers() -> None:
    quorum = Quorum(dict(partition_error=NOT_LEADER_OR_FOLLOWER), {})
    out = run(CraftedBroker({DESCRIBE_QUORUM: quorum}), lambda a: a.describe_metadata_quorum())
    assert out.leader_id == 3000
    assert len(quorum.asked) == 2


def test_a_retriable_error_that_persists_ends_at_the_timeout_with_that_error() -> None:
    quorum = Quorum(dict(partition_error=NOT_LEADER_OR_FOLLOWER, message="electing"))
    with pytest.raises(NotLeaderOrFollowerError, match="electing"):
        run(CraftedBroker({DESCRIBE_QUORUM: quorum}),
            lambda a: a.describe_metadata_quorum(timeout=0.5))
    assert len(quorum.asked) >= 2


def test_a_top_level_error_is_raised_typed_and_not_retried() -> None:
    quorum = Quorum(dict(error=CLUSTER_AUTHORIZATION_FAILED))
    with pytest.raises(ClusterAuthorizationFailedError):
        run(CraftedBroker({DESCRIBE_QUORUM: quorum}), lambda a: a.describe_metadata_quorum())
    assert len(quorum.asked) == 1


@pytest.mark.parametrize(("topic", "partition"), [("other", 0), ("__cluster_metadata", 1)])
def test_an_answer_about_another_partition_is_a_protocol_error(topic: str,
                                                               partition: int) -> None:
    quorum = Quorum(dict(topic=topic, partition=partition))
    with pytest.raises(ProtocolError, match="not __cluster_metadata-0"):
        run(CraftedBroker({DESCRIBE_QUORUM: quorum}), lambda a: a.describe_metadata_quorum())


def test_a_broker_without_describe_quorum_raises_unsupported_version() -> None:
    with pytest.raises(UnsupportedVersionError):
        run(CraftedBroker({}), lambda a: a.describe_metadata_quorum(timeout=5))


def test_the_blocking_client_returns_the_same_info() -> None:
    async def main() -> Any:
        async with CraftedBroker({DESCRIBE_QUORUM: Quorum({})}) as broker:
            def blocking() -> Any:
                with AdminClient({"bootstrap.servers": broker.bootstrap, **FAST}) as admin:
                    return admin.describe_metadata_quorum(timeout=10)
            return await asyncio.to_thread(blocking)

    out = asyncio.run(main())
    assert out.leader_id == 3000 and out.voters[1].last_fetch_timestamp == 95
