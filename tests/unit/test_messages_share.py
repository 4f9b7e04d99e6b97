# Nested struct classes are set on the message classes at run time.
# mypy: disable-error-code="attr-defined"
"""The share-group declarations (KIP-932): ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch
and ShareAcknowledge, version 1 (the only stable one; Kafka 4.1 offers 1-1 of each).

kafka-python has no share-group messages, so besides the round trips (compiled codec against
the interpreted oracle) the layouts are pinned by hand-written bytes taken field by field from
Kafka's message JSON.
"""

from __future__ import annotations

import uuid

import pytest

from kontrakt.protocol._interpreted import interpreted_decode, interpreted_encode
from kontrakt.protocol.codec import decode_struct, encode_struct
from kontrakt.protocol.messages import (
    ShareAcknowledgeRequest,
    ShareFetchRequest,
    ShareFetchResponse,
    ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from kontrakt.protocol.spec import Request, Struct, registry
from tests.unit import test_messages_client_apis as client_apis

REQUESTS: list[type[Request]] = [
    ShareGroupHeartbeatRequest, ShareGroupDescribeRequest, ShareFetchRequest,
    ShareAcknowledgeRequest,
]
MESSAGES: list[type[Struct]] = [c for r in REQUESTS for c in (r, r.RESPONSE_TYPE)]
CASES = [pytest.param(c, 1, id=f"{c.__name__}-v1") for c in MESSAGES]


@pytest.mark.parametrize(("cls", "version"), CASES)
def test_share_round_trips(cls: type[Struct], version: int) -> None:
    client_apis.test_round_trip_populated(cls, version)
    client_apis.test_round_trip_nulls_and_defaults(cls, version)
    client_apis.test_round_trip_whole_frame(cls, version)


@pytest.mark.parametrize("req", REQUESTS, ids=lambda r: r.API_NAME)
def test_share_declarations_well_formed(req: type[Request]) -> None:
    client_apis.test_declaration_is_well_formed(req)
    assert registry()[req.API_KEY].name == req.API_NAME


def test_share_versions_match_kafka_41() -> None:
    data = client_apis._import_kafka_python("kafka.protocol.broker_version_data")
    broker = data.BROKER_API_VERSIONS[(4, 1)]
    for req in REQUESTS:
        assert (req.VALID_VERSIONS.lo, req.VALID_VERSIONS.hi) == broker[req.API_KEY], req


def _cs(text: str) -> bytes:
    return bytes([len(text) + 1]) + text.encode()


def test_share_group_heartbeat_bytes() -> None:
    msg = ShareGroupHeartbeatRequest(group_id="g", member_id="m", member_epoch=0,
                                     subscribed_topic_names=["t"])
    expected = (_cs("g") + _cs("m") + b"\x00" * 4  # group, member, epoch 0
                + b"\x00"  # rack_id null
                + b"\x02" + _cs("t")  # one subscribed topic
                + b"\x00")  # tags
    assert encode_struct(msg, 1) == expected
    tid = uuid.UUID(int=0x0102)
    resp = (b"\x00" * 4 + b"\x00\x00" + b"\x00" + _cs("m") + b"\x00\x00\x00\x03"
            + b"\x00\x00\x13\x88"  # heartbeat interval 5000
            + b"\x01"  # assignment present
            + b"\x02" + tid.bytes + b"\x03" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x01" + b"\x00"
            + b"\x00" + b"\x00")
    back = decode_struct(ShareGroupHeartbeatResponse, 1, resp)
    [tp] = back.assignment.topic_partitions
    assert (back.member_epoch, back.heartbeat_interval_ms, tp.topic_id, tp.partitions) == (
        3, 5000, tid, [0, 1])
    assert encode_struct(back, 1) == resp


def test_share_fetch_response_bytes() -> None:
    tid = uuid.UUID(int=9)
    part = (b"\x00\x00\x00\x02" + b"\x00\x00" + b"\x00" + b"\x00\x00" + b"\x00"  # p2, no errors
            + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x07" + b"\x00"  # leader 1, epoch 7, tags
            + b"\x04abc"  # records: compact bytes
            + b"\x02" + (5).to_bytes(8, "big") + (9).to_bytes(8, "big") + b"\x00\x02" + b"\x00"
            + b"\x00")
    data = (b"\x00" * 4 + b"\x00\x00" + b"\x00" + b"\x00\x00\x75\x30"  # lock timeout 30000
            + b"\x02" + tid.bytes + b"\x02" + part + b"\x00"
            + b"\x01"  # no node endpoints
            + b"\x00")
    msg = decode_struct(ShareFetchResponse, 1, data)
    assert msg.acquisition_lock_timeout_ms == 30_000
    [p] = msg.responses[0].partitions
    [acq] = p.acquired_records
    assert (p.partition_index, p.current_leader.leader_epoch, p.records) == (2, 7, b"abc")
    assert (acq.first_offset, acq.last_offset, acq.delivery_count) == (5, 9, 2)
    assert encode_struct(msg, 1) == data
    assert interpreted_decode(ShareFetchResponse, 1, data) == msg
    assert interpreted_encode(msg, 1) == data


def test_share_fetch_request_bytes() -> None:
    tid = uuid.UUID(int=5)
    req = ShareFetchRequest(
        group_id="g", member_id="m", share_session_epoch=1, max_wait_ms=500, min_bytes=1,
        max_records=500, batch_size=500,
        topics=[ShareFetchRequest.FetchTopic(topic_id=tid, partitions=[
            ShareFetchRequest.FetchTopic.FetchPartition(
                partition_index=0, acknowledgement_batches=[
                    ShareFetchRequest.FetchTopic.FetchPartition.AcknowledgementBatch(
                        first_offset=3, last_offset=4, acknowledge_types=[1, 2])])])])
    expected = (_cs("g") + _cs("m") + b"\x00\x00\x00\x01" + b"\x00\x00\x01\xf4"
                + b"\x00\x00\x00\x01" + b"\x7f\xff\xff\xff" + b"\x00\x00\x01\xf4" * 2
                + b"\x02" + tid.bytes + b"\x02" + b"\x00" * 4
                + b"\x02" + (3).to_bytes(8, "big") + (4).to_bytes(8, "big")
                + b"\x03\x01\x02" + b"\x00"  # types, batch tags
                + b"\x00" + b"\x00"  # partition tags, topic tags
                + b"\x01"  # no forgotten topics
                + b"\x00")
    assert encode_struct(req, 1) == expected


def test_populated_share_messages_differ_from_default() -> None:
    for cls in MESSAGES:
        assert encode_struct(client_apis._root(cls, 1, nulls=False), 1) != encode_struct(cls(), 1)
