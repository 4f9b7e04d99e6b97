"""The producer's Produce writer and reader (``kontrakt/protocol/produce.py``) against the
declared codec, their oracle: the same request bytes, the same answers and the same errors,
over every Produce version."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kontrakt.errors import CorruptMessageError, UnsupportedVersionError
from kontrakt.protocol import produce
from kontrakt.protocol.headers import decode_response, encode_request, encode_response
from kontrakt.protocol.messages import ProduceRequest, ProduceResponse
from kontrakt.protocol.produce import ProduceWire, answers_of

VERSIONS = range(3, 14)

_TD = ProduceRequest.TopicProduceData
_PD = _TD.PartitionProduceData
_TR = ProduceResponse.TopicProduceResponse
_PR = _TR.PartitionProduceResponse
_RE = _PR.BatchIndexAndErrorMessage
_LE = _PR.LeaderIdAndEpoch
_NE = ProduceResponse.NodeEndpoint

_SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                     suppress_health_check=list(HealthCheck))

_int32 = st.integers(-(2**31), 2**31 - 1)
_int64 = st.integers(-(2**63), 2**63 - 1)
# Names past 126 bytes, and past 127 partitions or 16 KiB of records below, take more than
# one varint byte.
_names = st.text(min_size=1, max_size=140)
_records = st.one_of(st.binary(max_size=200), st.integers(16_300, 16_400).map(bytes))


def _expected_frame(version: int, client_id: str | None, txn: str | None, acks: int,
                    timeout: int, topics: list[tuple[Any, list[tuple[int, bytes]]]],
                    corr: int) -> bytes:
    data = [_TD(topic_id=t, partition_data=[_PD(index=i, records=r) for i, r in parts])
            if version >= 13 else
            _TD(name=t, partition_data=[_PD(index=i, records=r) for i, r in parts])
            for t, parts in topics]
    return encode_request(ProduceRequest(transactional_id=txn, acks=acks, timeout_ms=timeout,
                                         topic_data=data), version, corr, client_id)


@pytest.mark.parametrize("version", VERSIONS)
def test_request_frames_are_the_codecs_bytes(version: int) -> None:
    @_SETTINGS
    @given(client_id=st.one_of(st.none(), st.text(max_size=20)),
           txn=st.one_of(st.none(), st.text(max_size=20)), acks=st.sampled_from([-1, 0, 1]),
           timeout=st.integers(0, 2**31 - 1), corr=st.integers(0, 2**31 - 1),
           topics=st.lists(st.tuples(st.one_of(_names, st.uuids()),
                                     st.lists(st.tuples(_int32, _records), max_size=3)),
                           max_size=3))
    def check(client_id: str | None, txn: str | None, acks: int, timeout: int, corr: int,
              topics: list[tuple[Any, list[tuple[int, bytes]]]]) -> None:
        # Names below v13, ids from it.
        topics = [(t if isinstance(t, uuid.UUID) == (version >= 13) else
                   (uuid.uuid5(uuid.NAMESPACE_DNS, t) if version >= 13 else str(t)), parts)
                  for t, parts in topics]
        wire = ProduceWire(version, client_id, txn, acks, timeout)
        expected = _expected_frame(version, client_id, txn, acks, timeout, topics, corr)
        assert wire.frame(corr, topics) == expected
        assert wire.frame(corr, topics) == expected  # with the names it keeps

    check()


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("size", [0, 3, 126, 127, 16_382, 16_383, 70_000])
def test_a_single_partitions_request_is_the_codecs(version: int, size: int) -> None:
    # An awaited single send's request: one topic, one partition (its own path).
    topic: Any = uuid.uuid4() if version >= 13 else "orders"
    topics = [(topic, [(4, b"r" * size)])]
    wire = ProduceWire(version, "cid", None, 1, 30_000)
    assert wire.frame(2**31 - 1, topics) == _expected_frame(version, "cid", None, 1, 30_000,
                                                            topics, 2**31 - 1)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_request_of_many_partitions_is_the_codecs(version: int) -> None:
    topic: Any = uuid.uuid4() if version >= 13 else "t" * 130
    topics = [(topic, [(p, bytes([p]) * p) for p in range(200)])]
    wire = ProduceWire(version, "cid", "txn", -1, 30_000)
    assert wire.frame(5, topics) == _expected_frame(version, "cid", "txn", -1, 30_000,
                                                     topics, 5)


def test_a_topic_named_the_wrong_way_for_the_version_is_refused() -> None:
    with pytest.raises(TypeError, match="by id"):
        ProduceWire(13, None, None, 1, 1000).frame(1, [("orders", [(0, b"x")])])
    with pytest.raises(TypeError, match="by name"):
        ProduceWire(12, None, None, 1, 1000).frame(1, [(uuid.uuid4(), [(0, b"x")])])
    with pytest.raises(UnsupportedVersionError):
        ProduceWire(14, None, None, 1, 1000)


def _response(version: int) -> st.SearchStrategy[Any]:
    v8, v10 = version >= 8, version >= 10
    errors = st.lists(st.builds(_RE, batch_index=_int32,
                                batch_index_error_message=st.one_of(st.none(), st.text())),
                      max_size=2) if v8 else st.just([])
    partition = st.builds(
        _PR, index=_int32, error_code=st.integers(-1, 120), base_offset=_int64,
        log_append_time_ms=_int64,
        log_start_offset=_int64 if version >= 5 else st.just(-1),
        # Mostly the plain shape, which the reader reads itself.
        record_errors=st.one_of(st.just([]), st.just([]), errors),
        error_message=st.one_of(st.none(), st.text(max_size=140)) if v8 else st.none(),
        current_leader=st.one_of(st.just(_LE()), st.builds(_LE, leader_id=_int32,
                                                          leader_epoch=_int32))
        if v10 else st.just(_LE()),
        unknown_tags=st.one_of(st.none(), st.just({5: b"\x01\x02"}))
        if version >= 9 else st.none())
    topic = st.builds(_TR, name=_names if version < 13 else st.just(""),
                      topic_id=st.uuids() if version >= 13 else st.just(uuid.UUID(int=0)),
                      partition_responses=st.lists(partition, max_size=3))
    return st.builds(
        ProduceResponse, responses=st.lists(topic, max_size=3), throttle_time_ms=_int32,
        node_endpoints=st.one_of(st.just([]), st.lists(st.builds(
            _NE, node_id=_int32, host=st.text(min_size=1, max_size=5), port=_int32,
            rack=st.none()), max_size=1)) if v10 else st.just([]))


def _same_as_the_codec(wire: ProduceWire, frame: bytes) -> None:
    """``wire`` reads ``frame`` as the declared codec does: the same answers, or a
    CorruptMessageError from both."""
    try:
        expected: Any = answers_of(decode_response(ProduceResponse, wire.version, frame)[1])
    except CorruptMessageError:
        with pytest.raises(CorruptMessageError):
            wire.answers(frame)
        return
    assert wire.answers(frame) == expected


@pytest.mark.parametrize("version", VERSIONS)
def test_answers_are_the_codecs(version: int) -> None:
    wire = ProduceWire(version, "cid", None, -1, 30_000)
    rng = random.Random(version)

    @_SETTINGS
    @given(_response(version))
    def check(resp: Any) -> None:
        frame = encode_response(resp, version, 77)[4:]
        assert wire.answers(frame) == answers_of(resp)
        # Cut short or with a byte changed, the same answers or the same error.
        for cut in (rng.randrange(len(frame)), len(frame) - 1):
            _same_as_the_codec(wire, frame[:cut])
        at = rng.randrange(4, len(frame))
        _same_as_the_codec(wire, frame[:at] + bytes([rng.randrange(256)]) + frame[at + 1:])

    check()


@pytest.mark.parametrize("version", VERSIONS)
def test_a_plain_answer_is_read_without_the_codec(version: int,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    resp = ProduceResponse(responses=[
        _TR(name="orders" if version < 13 else "",
            topic_id=uuid.uuid4() if version >= 13 else uuid.UUID(int=0),
            partition_responses=[
                _PR(index=3, error_code=0, base_offset=41, log_append_time_ms=-1,
                    log_start_offset=0 if version >= 5 else -1),
                _PR(index=1, error_code=6, base_offset=-1,
                    error_message="not the leader" if version >= 8 else None)])])
    frame = encode_response(resp, version, 9)[4:]
    expected = answers_of(resp)

    def no_codec(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the declared codec was used")

    monkeypatch.setattr(produce, "decode_response", no_codec)
    assert ProduceWire(version, None, None, 1, 1000).answers(frame) == expected
