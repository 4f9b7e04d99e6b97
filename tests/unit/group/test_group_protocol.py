"""Consumer protocol blobs: byte equality with kafka-python, round trips, forward compatibility
and typed errors on garbage."""

from __future__ import annotations

import struct
import warnings
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kontrakt._types import TopicPartition
from kontrakt.clients.group import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kontrakt.clients.group._sticky import (
    decode_cooperative_user_data,
    decode_sticky_user_data,
    encode_cooperative_user_data,
    encode_sticky_user_data,
)
from kontrakt.errors import CorruptMessageError

with warnings.catch_warnings():
    # kafka-python loads its bundled JSON schemas with a deprecated importlib API on import.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.coordinator.assignors.sticky.user_data import StickyAssignorUserData
    from kafka.protocol.consumer.metadata import (
        ConsumerProtocolAssignment as KpAssignment,
    )
    from kafka.protocol.consumer.metadata import (
        ConsumerProtocolSubscription as KpSubscription,
    )

pytestmark = pytest.mark.interop

topics_st = st.lists(st.text(min_size=0, max_size=12), max_size=5)
partition_st = st.integers(min_value=-(2**31), max_value=2**31 - 1)
tps_st = st.lists(
    st.builds(TopicPartition, st.text(max_size=8), partition_st), max_size=12
)
user_data_st = st.none() | st.binary(max_size=40)
subscription_st = st.builds(
    Subscription,
    topics=topics_st,
    user_data=user_data_st,
    owned_partitions=tps_st,
    generation_id=st.integers(min_value=-(2**31), max_value=2**31 - 1),
    rack_id=st.none() | st.text(max_size=10),
)
assignment_st = st.builds(Assignment, partitions=tps_st, user_data=user_data_st)


def _grouped(tps: list[TopicPartition]) -> list[tuple[str, list[int]]]:
    """Topic entries in first-seen order, as the encoder writes them."""
    out: dict[str, list[int]] = {}
    for tp in tps:
        out.setdefault(tp.topic, []).append(tp.partition)
    return list(out.items())


def _regrouped(tps: list[TopicPartition]) -> list[TopicPartition]:
    """What a decode returns for ``tps``: partitions of one topic come out together."""
    return [TopicPartition(t, p) for t, parts in _grouped(tps) for p in parts]


def _kp_subscription(sub: Subscription, version: int) -> bytes:
    kwargs: dict[str, Any] = {"version": version, "topics": list(sub.topics)}
    kwargs["user_data"] = sub.user_data
    if version >= 1:
        kwargs["owned_partitions"] = [
            KpSubscription.TopicPartition(topic=t, partitions=p)
            for t, p in _grouped(sub.owned_partitions)
        ]
    if version >= 2:
        kwargs["generation_id"] = sub.generation_id
    if version >= 3:
        kwargs["rack_id"] = sub.rack_id
    return bytes(KpSubscription(**kwargs).encode())


@settings(max_examples=150, deadline=None)
@given(sub=subscription_st, version=st.integers(0, 3))
def test_subscription_bytes_equal_kafka_python(sub: Subscription, version: int) -> None:
    ours = encode_subscription(sub, version)
    assert ours == _kp_subscription(sub, version)
    # And kafka-python reads ours back to the same fields.
    theirs = KpSubscription.decode(ours)
    assert theirs.version == version
    assert list(theirs.topics) == sub.topics
    assert theirs.user_data == sub.user_data


@settings(max_examples=150, deadline=None)
@given(a=assignment_st, version=st.integers(0, 3))
def test_assignment_bytes_equal_kafka_python(a: Assignment, version: int) -> None:
    kp = KpAssignment(
        version=version,
        assigned_partitions=[
            KpAssignment.TopicPartition(topic=t, partitions=p) for t, p in _grouped(a.partitions)
        ],
        user_data=a.user_data,
    )
    assert encode_assignment(a, version) == bytes(kp.encode())
    back = KpAssignment.decode(encode_assignment(a, version))
    assert back.partitions() == [(tp.topic, tp.partition) for tp in _regrouped(a.partitions)]


@settings(max_examples=200, deadline=None)
@given(sub=subscription_st, version=st.integers(0, 3))
def test_subscription_round_trip(sub: Subscription, version: int) -> None:
    got = decode_subscription(encode_subscription(sub, version))
    assert got.topics == sub.topics
    assert got.user_data == sub.user_data
    assert got.owned_partitions == (_regrouped(sub.owned_partitions) if version >= 1 else [])
    assert got.generation_id == (sub.generation_id if version >= 2 else -1)
    assert got.rack_id == (sub.rack_id if version >= 3 else None)


@settings(max_examples=200, deadline=None)
@given(a=assignment_st, version=st.integers(0, 3))
def test_assignment_round_trip(a: Assignment, version: int) -> None:
    got = decode_assignment(encode_assignment(a, version))
    assert got == Assignment(_regrouped(a.partitions), a.user_data)


@settings(max_examples=100, deadline=None)
@given(sub=subscription_st, future=st.integers(4, 2**15 - 1), tail=st.binary(max_size=20))
def test_subscription_from_a_future_version_reads_known_fields(
    sub: Subscription, future: int, tail: bytes
) -> None:
    """Kafka reads a newer version with its own newest layout and ignores the rest."""
    blob = struct.pack(">h", future) + encode_subscription(sub, 3)[2:] + tail
    got = decode_subscription(blob)
    assert got == decode_subscription(encode_subscription(sub, 3))


@settings(max_examples=100, deadline=None)
@given(a=assignment_st, future=st.integers(4, 2**15 - 1), tail=st.binary(max_size=20))
def test_assignment_from_a_future_version_reads_known_fields(
    a: Assignment, future: int, tail: bytes
) -> None:
    blob = struct.pack(">h", future) + encode_assignment(a, 3)[2:] + tail
    assert decode_assignment(blob) == decode_assignment(encode_assignment(a, 3))


def test_kafka_python_future_version_blob_is_read() -> None:
    """A v3 blob from kafka-python decodes to the fields it carried."""
    kp = KpSubscription(
        version=3,
        topics=["t1", "t2"],
        user_data=b"\x00\x01",
        owned_partitions=[KpSubscription.TopicPartition(topic="t1", partitions=[3, 1])],
        generation_id=42,
        rack_id="rack-a",
    )
    got = decode_subscription(kp.encode())
    assert got == Subscription(
        ["t1", "t2"],
        b"\x00\x01",
        [TopicPartition("t1", 3), TopicPartition("t1", 1)],
        42,
        "rack-a",
    )


def test_empty_assignment_blob_means_nothing_assigned() -> None:
    assert decode_assignment(b"") == Assignment([])


@pytest.mark.parametrize("version", range(4))
def test_every_truncation_of_a_subscription_is_a_typed_error(version: int) -> None:
    sub = Subscription(
        ["alpha", "beta"], b"ud", [TopicPartition("alpha", 1)], 3, "r"
    )
    blob = encode_subscription(sub, version)
    for cut in range(len(blob)):
        with pytest.raises(CorruptMessageError):
            decode_subscription(blob[:cut])


def test_every_truncation_of_an_assignment_is_a_typed_error() -> None:
    blob = encode_assignment(Assignment([TopicPartition("alpha", 1)], b"ud"))
    for cut in range(1, len(blob)):
        with pytest.raises(CorruptMessageError):
            decode_assignment(blob[:cut])


@pytest.mark.parametrize(
    ("decode", "blob", "match"),
    [
        (decode_subscription, b"\xff\xff", "negative version"),
        (decode_assignment, b"\x80\x00", "negative version"),
        (decode_subscription, b"\x00\x00\xff\xff\xff\xff", "null"),
        (decode_subscription, b"\x00\x00\x7f\xff\xff\xff", "claims"),
        (decode_assignment, b"\x00\x00\x00\x00\x00\x01\xff\xff\x00\x00\x00\x00", "null"),
        (decode_subscription, b"\x00\x00\x00\x00\x00\x01\x00\x02\xff\xfe\xff\xff\xff\xff", "UTF"),
    ],
)
def test_specific_garbage(decode: Any, blob: bytes, match: str) -> None:
    with pytest.raises(CorruptMessageError, match=match):
        decode(blob)


@settings(max_examples=400, deadline=None)
@given(data=st.binary(max_size=64))
def test_random_bytes_decode_or_raise_typed_error(data: bytes) -> None:
    for decode in (decode_subscription, decode_assignment):
        try:
            decode(data)
        except CorruptMessageError:
            pass


def test_corrupt_message_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        decode_subscription(b"\x00")


@pytest.mark.parametrize("version", [-1, 4, 100])
def test_encoding_an_unknown_version_is_rejected(version: int) -> None:
    with pytest.raises(ValueError, match="version"):
        encode_subscription(Subscription([]), version)
    with pytest.raises(ValueError, match="version"):
        encode_assignment(Assignment([]), version)


def test_encoding_wrong_types_is_rejected() -> None:
    with pytest.raises(TypeError, match="topic"):
        encode_subscription(Subscription([1]))  # type: ignore[list-item]
    with pytest.raises(TypeError, match="user_data"):
        encode_subscription(Subscription(["t"], "text"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="partition"):
        encode_assignment(Assignment([TopicPartition("t", "0")]))  # type: ignore[arg-type]


# --- sticky assignors' user data ------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(tps=tps_st, generation=st.integers(-(2**31), 2**31 - 1))
def test_sticky_user_data_v1_bytes_equal_kafka_python(
    tps: list[TopicPartition], generation: int
) -> None:
    kp = StickyAssignorUserData(_grouped(tps), generation)
    ours = encode_sticky_user_data(tps, generation)
    assert ours == bytes(kp.encode(header=False))
    assert decode_sticky_user_data(ours) == (_regrouped(tps), generation)


@settings(max_examples=50, deadline=None)
@given(tps=tps_st)
def test_sticky_user_data_v0_is_read_with_unknown_generation(tps: list[TopicPartition]) -> None:
    v0 = bytes(StickyAssignorUserData(version=0, previous_assignment=_grouped(tps)).encode(
        header=False
    ))
    assert decode_sticky_user_data(v0) == (_regrouped(tps), -1)


def test_sticky_user_data_garbage_is_a_typed_error() -> None:
    blob = encode_sticky_user_data([TopicPartition("t", 0)], 3)
    for cut in range(len(blob) - 4):
        with pytest.raises(CorruptMessageError):
            decode_sticky_user_data(blob[:cut] if cut else b"\x00")
    with pytest.raises(CorruptMessageError, match="generation"):
        decode_sticky_user_data(blob[:-2])


def test_cooperative_user_data_formats() -> None:
    assert encode_cooperative_user_data(7) == b"\x00\x00\x00\x07"
    assert decode_cooperative_user_data(encode_cooperative_user_data(-5)) == -5
    # librdkafka's cooperative-sticky sends StickyAssignorUserData v1.
    assert decode_cooperative_user_data(encode_sticky_user_data([TopicPartition("t", 1)], 9)) == 9
    assert decode_cooperative_user_data(None) == -1
    assert decode_cooperative_user_data(b"") == -1
    assert decode_cooperative_user_data(b"\x01\x02\x03") == -1


@settings(max_examples=50, deadline=None)
@given(tps=tps_st, generation=st.integers(-(2**31), 2**31 - 1))
def test_kafka_python_sticky_user_data_with_version_header_is_read(
    tps: list[TopicPartition], generation: int
) -> None:
    """kafka-python puts an int16 version before StickyAssignorUserData (Java does not)."""
    kp = bytes(StickyAssignorUserData(_grouped(tps), generation).encode())
    assert kp[:2] == b"\x00\x01"
    assert decode_sticky_user_data(kp) == (_regrouped(tps), generation)


def test_decoders_accept_bytearray_and_memoryview() -> None:
    sub = Subscription(["t"], b"u", [TopicPartition("t", 0)], 2, None)
    blob = encode_subscription(sub)
    assert decode_subscription(bytearray(blob)) == sub
    assert decode_subscription(memoryview(blob)) == sub
    a = Assignment([TopicPartition("t", 0)], b"x")
    assert decode_assignment(memoryview(encode_assignment(a))) == a
    assert type(decode_assignment(memoryview(encode_assignment(a))).user_data) is bytes
