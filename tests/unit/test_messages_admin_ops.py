"""Declarations of the admin APIs added for describe_metadata_quorum, abort_transaction,
alter_replica_log_dirs, unregister_broker, list_config_resources, add_raft_voter and
remove_raft_voter (WriteTxnMarkers, AlterReplicaLogDirs, DescribeQuorum, UnregisterBroker,
ListConfigResources, AddRaftVoter, RemoveRaftVoter): ranges, round
trips over every version, and bytes equal to kafka-python's (an independent codec built
from its own copy of Kafka's JSON message specifications) where kafka-python declares the
API.

The checks are those of tests/unit/test_messages_admin_apis.py, run over these APIs (kept
in their own module so the two lists can grow apart).
"""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

import kontrakt.protocol.messages as messages
import tests.unit.test_messages_admin_apis as base
from kontrakt.protocol.codec import decode_struct, encode_struct

# (key, name, valid versions, flexible versions), from Kafka's message specifications.
EXPECTED = [
    (27, "WriteTxnMarkers", "1-2", "1+"),
    (34, "AlterReplicaLogDirs", "1-2", "2+"),
    (55, "DescribeQuorum", "0-2", "0+"),
    (64, "UnregisterBroker", "0", "0+"),
    (74, "ListConfigResources", "0-1", "0+"),
    (80, "AddRaftVoter", "0-1", "0+"),
    (81, "RemoveRaftVoter", "0", "0+"),
]
KEYS = [e[0] for e in EXPECTED]
# kafka-python 3.0.12 declares no UnregisterBroker, AddRaftVoter or RemoveRaftVoter: round
# trips and bytes laid out by hand.
NOT_IN_KAFKA_PYTHON = {64, 80, 81}
CASES = [(k, v) for k in KEYS for v in range(base._spec(k).valid.lo,
                                             (base._spec(k).valid.hi or 0) + 1)]
IDS = [f"{base._spec(k).name}-v{v}" for k, v in CASES]
KP_CASES = [c for c in CASES if c[0] not in NOT_IN_KAFKA_PYTHON]
KP_IDS = [f"{base._spec(k).name}-v{v}" for k, v in KP_CASES]


def test_declared_apis_and_ranges_match_kafka() -> None:
    for key, name, valid, flexible in EXPECTED:
        spec = base._spec(key)
        assert (spec.name, str(spec.valid), str(spec.flexible)) == (name, valid, flexible)
        assert getattr(messages, f"{name}Request") is spec.request_class
        assert getattr(messages, f"{name}Response") is spec.response_class
        assert {f"{name}Request", f"{name}Response"} <= set(messages.__all__)


@pytest.mark.parametrize("key", KEYS, ids=[base._spec(k).name for k in KEYS])
def test_fields_are_well_formed(key: int) -> None:
    base.test_fields_are_well_formed(key)


@pytest.mark.parametrize(("key", "version"), CASES, ids=IDS)
def test_round_trip(key: int, version: int) -> None:
    base.test_round_trip_populated(key, version)
    base.test_round_trip_whole_frames(key, version)


@pytest.mark.parametrize(("key", "version"), KP_CASES, ids=KP_IDS)
def test_bytes_equal_kafka_python(key: int, version: int) -> None:
    base.test_bytes_equal_kafka_python(key, version, base._kafka_python_classes())


def test_describe_quorum_v2_bytes_laid_out_by_hand() -> None:
    # A second check of the v2 response shape that does not go through any generated codec:
    # flexible throughout, so compact strings/arrays (length + 1) and an empty tag section
    # after every struct.
    r = messages.DescribeQuorumResponse
    td = r.TopicData
    pd = td.PartitionData
    node = r.Node
    resp = r(error_code=0, error_message=None, topics=[td(topic_name="m", partitions=[pd(
        partition_index=0, error_code=0, error_message=None, leader_id=1, leader_epoch=2,
        high_watermark=3, current_voters=[], observers=[])])],
        nodes=[node(node_id=1, listeners=[node.Listener(name="C", host="h", port=9093)])])
    expected = (
        b"\x00\x00"  # error_code
        + b"\x00"  # error_message: null
        + b"\x02" + b"\x02m"  # one topic "m"
        + b"\x02" + b"\x00\x00\x00\x00" + b"\x00\x00" + b"\x00"  # partition 0, no error
        + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x00\x00\x00\x00\x03"
        + b"\x01" + b"\x01" + b"\x00"  # no voters, no observers, partition tags
        + b"\x00"  # topic tags
        + b"\x02" + b"\x00\x00\x00\x01"  # one node, id 1
        + b"\x02" + b"\x02C" + b"\x02h" + b"\x23\x85" + b"\x00"  # listener C h:9093
        + b"\x00"  # node tags
        + b"\x00")  # top-level tags
    assert encode_struct(resp, 2) == expected
    assert decode_struct(r, 2, expected) == resp


def test_describe_quorum_replica_fields_by_version() -> None:
    rs = messages.DescribeQuorumResponse.TopicData.PartitionData.ReplicaState
    rng = random.Random(0)
    for version in (0, 1, 2):
        msg: Any = base._populate(rs, version, rng, 0.0)
        names = {f.name for f in rs.FIELDS if version in f.versions}
        assert ("replica_directory_id" in names) == (version >= 2)
        assert ("last_fetch_timestamp" in names) == (version >= 1)
        assert decode_struct(rs, version, encode_struct(msg, version)) == msg


def test_unregister_broker_bytes_laid_out_by_hand() -> None:
    # Flexible from v0: an empty tag section after each message; a compact nullable string.
    req = messages.UnregisterBrokerRequest(broker_id=7)
    assert encode_struct(req, 0) == b"\x00\x00\x00\x07" + b"\x00"
    resp = messages.UnregisterBrokerResponse(throttle_time_ms=1, error_code=102,
                                             error_message="gone")
    data = b"\x00\x00\x00\x01" + b"\x00\x66" + b"\x05gone" + b"\x00"
    assert encode_struct(resp, 0) == data
    assert decode_struct(messages.UnregisterBrokerResponse, 0, data) == resp
    null = messages.UnregisterBrokerResponse(error_code=0)
    assert encode_struct(null, 0) == b"\x00" * 6 + b"\x00" + b"\x00"


def test_raft_voter_requests_laid_out_by_hand() -> None:
    directory = uuid.UUID("00010203-0405-0607-0809-0a0b0c0d0e0f")
    add = messages.AddRaftVoterRequest
    req = add(cluster_id="c", timeout_ms=5, voter_id=3, voter_directory_id=directory,
              listeners=[add.Listener(name="C", host="h", port=9093)],
              ack_when_committed=False)
    v0 = (b"\x02c" + b"\x00\x00\x00\x05" + b"\x00\x00\x00\x03" + directory.bytes
          + b"\x02" + b"\x02C" + b"\x02h" + b"\x23\x85" + b"\x00")
    assert encode_struct(add(cluster_id="c", timeout_ms=5, voter_id=3,
                             voter_directory_id=directory, listeners=req.listeners), 0) == (
        v0 + b"\x00")
    assert encode_struct(req, 1) == v0 + b"\x00" + b"\x00"  # ack_when_committed False
    assert decode_struct(add, 1, v0 + b"\x01\x00").ack_when_committed is True
    rem = messages.RemoveRaftVoterRequest
    data = b"\x00" + b"\x00\x00\x00\x03" + directory.bytes + b"\x00"  # null cluster id
    assert encode_struct(rem(voter_id=3, voter_directory_id=directory), 0) == data
    assert decode_struct(rem, 0, data) == rem(voter_id=3, voter_directory_id=directory)
