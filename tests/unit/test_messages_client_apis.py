# Nested struct classes (``FetchRequest.FetchTopic``) are set on the message classes at run
# time, so type checkers cannot see them.
# mypy: disable-error-code="attr-defined"
"""The client API declarations: Produce, Fetch, ListOffsets, offsets, classic groups, SASL and
the KIP-848 consumer group APIs.

Every (message, version) is round-tripped with every field it carries set to a non-default
value, and with every nullable field null. Bytes are compared with two independent encoders
in kafka-python: its JSON-driven encoder (every version it has) and its older hand-written
per-version classes (a few versions).
"""

from __future__ import annotations

import importlib
import itertools
import uuid
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from kontrakt.errors import UnsupportedVersionError
from kontrakt.protocol import primitives as P
from kontrakt.protocol._interpreted import interpreted_decode, interpreted_encode
from kontrakt.protocol.codec import decode_struct, encode_struct
from kontrakt.protocol.headers import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from kontrakt.protocol.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    FetchRequest,
    FetchResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    ListGroupsRequest,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    OffsetForLeaderEpochRequest,
    ProduceRequest,
    ProduceResponse,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
    SyncGroupRequest,
)
from kontrakt.protocol.spec import (
    ArrayType,
    Field,
    Request,
    Response,
    Struct,
    StructType,
    TypeSpec,
    VersionRange,
    registry,
    struct_class,
)

REQUESTS: list[type[Request]] = [
    ProduceRequest, FetchRequest, ListOffsetsRequest, OffsetCommitRequest, OffsetFetchRequest,
    FindCoordinatorRequest, JoinGroupRequest, HeartbeatRequest, LeaveGroupRequest,
    SyncGroupRequest, DescribeGroupsRequest, ListGroupsRequest, SaslHandshakeRequest,
    OffsetForLeaderEpochRequest, SaslAuthenticateRequest, DeleteGroupsRequest,
    OffsetDeleteRequest, ConsumerGroupHeartbeatRequest, ConsumerGroupDescribeRequest,
]

MESSAGES: list[type[Struct]] = [
    c for r in REQUESTS for c in (r, r.RESPONSE_TYPE)
]


def _versions(cls: type[Struct]) -> range:
    valid: VersionRange = cls.VALID_VERSIONS
    assert valid.hi is not None
    return range(valid.lo, valid.hi + 1)


CASES = [pytest.param(c, v, id=f"{c.__name__}-v{v}") for c in MESSAGES for v in _versions(c)]

# --- building populated messages -------------------------------------------------------------

_INT_BASE = {"int8": 1, "int16": 300, "uint16": 400, "int32": 70_000, "uint32": 80_000,
             "int64": 5_000_000_000}


def _inner(t: TypeSpec) -> TypeSpec:
    while isinstance(t, ArrayType):
        t = t.item
    return t


def _value(t: TypeSpec, f: Field, version: int, nulls: bool, counter: Iterator[int]) -> Any:
    """A value of type ``t`` that differs from the field's default."""
    n = next(counter)
    if nulls and version in f.nullable:
        return None
    if isinstance(t, ArrayType):
        return [_value(t.item, _ELEMENT, version, nulls, counter) for _ in range(2)]
    if isinstance(t, StructType):
        return _populate(struct_class(t), version, nulls, counter)
    if t == "bool":
        return not f.default_value()
    if t in _INT_BASE:
        v = _INT_BASE[t] + n % 100
        return v + 1 if v == f.default_value() else v
    if t == "float64":
        return n + 0.5
    if t == "string":
        return f"s{n}\u00e9"
    if t == "bytes":
        return bytes([n % 256, 0, 255])
    if t == "records":
        return b"records-" + bytes([n % 256])
    if t == "uuid":
        return uuid.UUID(int=(n + 1) << 64 | (n + 7))
    raise AssertionError(t)


_ELEMENT = Field(name="element", type="int8")


def _populate(cls: type[Struct], version: int, nulls: bool,
              counter: Iterator[int] | None = None) -> Any:
    """An instance of ``cls`` with every field ``version`` carries set to a non-default value
    (or None, where ``nulls`` and the field is nullable at ``version``)."""
    counter = counter if counter is not None else itertools.count()
    kwargs = {}
    for f in cls.FIELDS:
        if version in f.versions:
            kwargs[f.name] = _value(f.type, f, version, nulls, counter)
    # Tagged struct fields are "absent" when None; populate their nested class too.
    return cls(**kwargs)


def _root(cls: type[Struct], version: int, nulls: bool) -> Struct:
    msg = _populate(cls, version, nulls)
    assert isinstance(msg, cls)
    return msg


# --- 1. round trips --------------------------------------------------------------------------


@pytest.mark.parametrize(("cls", "version"), CASES)
def test_round_trip_populated(cls: type[Struct], version: int) -> None:
    msg = _root(cls, version, nulls=False)
    data = encode_struct(msg, version)
    if any(version in f.versions for f in cls.FIELDS):
        assert data != encode_struct(cls(), version), "populated message encodes like default"
    back = decode_struct(cls, version, data)
    assert back == msg
    assert encode_struct(back, version) == data
    # The compiled codec agrees with the slow interpreted one.
    assert interpreted_encode(msg, version) == data
    assert interpreted_decode(cls, version, data) == msg


@pytest.mark.parametrize(("cls", "version"), CASES)
def test_round_trip_nulls_and_defaults(cls: type[Struct], version: int) -> None:
    for msg in (_root(cls, version, nulls=True), cls()):
        data = encode_struct(msg, version)
        back = decode_struct(cls, version, data)
        assert back == msg
        assert encode_struct(back, version) == data


@pytest.mark.parametrize(("cls", "version"), CASES)
def test_round_trip_whole_frame(cls: type[Struct], version: int) -> None:
    msg = _root(cls, version, nulls=False)
    back: Struct
    if isinstance(msg, Request):
        frame = encode_request(msg, version, correlation_id=77, client_id="cid")
        header, back = decode_request(frame[4:])
        assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
            cls.API_KEY, version, 77, "cid")
    else:
        assert isinstance(msg, Response)
        frame = encode_response(msg, version, correlation_id=78)
        corr, back = decode_response(type(msg), version, frame[4:])
        assert corr == 78
    assert P.INT32.unpack_from(frame, 0)[0] == len(frame) - 4
    assert back == msg


# --- 2. the declarations themselves ---------------------------------------------------------


def _walk(st: StructType) -> Iterator[tuple[StructType, Field]]:
    for f in st.fields:
        yield st, f
        inner = _inner(f.type)
        if isinstance(inner, StructType):
            yield from _walk(inner)


def _within(r: VersionRange, valid: VersionRange) -> bool:
    """``r`` is a sensible range inside ``valid``: it meets the valid versions; a lower bound
    is either 0 ("always") or a version after the first valid one; an upper bound is a valid
    version. Bounds left over from versions the API no longer has are rejected."""
    assert valid.hi is not None
    if r.empty:
        return True
    lo_ok = r.lo == 0 or valid.lo < r.lo <= valid.hi
    hi_ok = r.hi is None or valid.lo <= r.hi < valid.hi
    return lo_ok and hi_ok


@pytest.mark.parametrize("req", REQUESTS, ids=lambda r: r.API_NAME)
def test_declaration_is_well_formed(req: type[Request]) -> None:
    spec = req.SPEC
    assert registry()[spec.key] is spec
    for st in (spec.request, spec.response):
        for parent, f in _walk(st):
            where = f"{parent.name}.{f.name}"
            assert f.name == f.name.lower() and f.name.isidentifier(), where
            assert _within(f.versions, spec.valid), f"{where}: versions {f.versions}"
            if not f.nullable.empty:
                assert _within(f.nullable, spec.valid), f"{where}: nullable {f.nullable}"
                # Nullable only where present.
                assert f.nullable.lo >= f.versions.lo, where
                assert f.versions.hi is None or (
                    f.nullable.hi is not None and f.nullable.hi <= f.versions.hi), where
            if f.tag is not None:
                assert f.tagged.lo >= spec.flexible.lo and f.tagged.lo >= f.versions.lo, where
            elif f.default is None and not isinstance(f.type, StructType):
                # A null default needs the field nullable wherever it is sent.
                assert all(v in f.nullable for v in _versions(req) if v in f.versions), where
        # Field names are unique in each struct, and struct names unique per API.
        names: dict[str, StructType] = {}
        for parent, _f in _walk(st):
            assert len({g.name for g in parent.fields}) == len(parent.fields), parent.name
            other = names.setdefault(parent.name, parent)
            assert other is parent or other.fields == parent.fields, parent.name


def test_struct_names_unique_per_module() -> None:
    """Two different structs of one module never share a class name."""
    by_module: dict[str, dict[str, StructType]] = {}
    for req in REQUESTS:
        module = importlib.import_module(_module_of(req)).__name__
        seen = by_module.setdefault(module, {})
        for st in (req.SPEC.request, req.SPEC.response):
            for parent, _ in _walk(st):
                other = seen.setdefault(parent.name, parent)
                assert other is parent, f"{module}: two structs named {parent.name}"


def _module_of(req: type[Request]) -> str:
    mods = ["_produce", "_fetch", "_list_offsets", "_offsets", "_group", "_sasl",
            "_consumer_group"]
    for m in mods:
        mod = importlib.import_module(f"kontrakt.protocol.messages.{m}")
        if getattr(mod, req.__name__, None) is req:
            return mod.__name__
    raise AssertionError(req)


def test_version_ranges_match_kafka_41() -> None:
    """The newest version of each API is the newest a Kafka 4.1 broker offers (kafka-python's
    table of broker versions is an independent record of that), and the oldest is one such a
    broker still accepts."""
    broker = _import_kafka_python("kafka.protocol.broker_version_data").BROKER_API_VERSIONS[(4, 1)]
    for req in REQUESTS:
        lo, hi = broker[req.API_KEY]
        assert req.VALID_VERSIONS.hi == hi, req.API_NAME
        assert req.VALID_VERSIONS.lo >= lo, req.API_NAME


# --- 3. byte equality with kafka-python's JSON-driven encoder --------------------------------

_KP_MODULES = ["kafka.protocol.producer", "kafka.protocol.consumer", "kafka.protocol.metadata",
               "kafka.protocol.admin", "kafka.protocol.sasl"]


def _import_kafka_python(name: str) -> Any:
    # kafka-python reads its bundled JSON with an importlib API that warns on Python 3.11;
    # the warning is about kafka-python, not about us.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return importlib.import_module(name)


def _kp_class(name: str) -> Any:
    for m in _KP_MODULES:
        cls = getattr(_import_kafka_python(m), name, None)
        if cls is not None:
            return cls
    return None


def _to_kp(obj: Struct, kp_cls: Any, version: int) -> Any:
    """Rebuild ``obj`` as a kafka-python message, checking the field names match."""
    kp_fields = {f.name: f for f in kp_cls._struct._fields}
    ours = {f.name for f in obj.FIELDS if version in f.versions}
    theirs = {n for n, f in kp_fields.items() if f.for_version_q(version)}
    assert ours == theirs, f"{type(obj).__name__} v{version}: {ours ^ theirs}"
    kwargs = {}
    for f in obj.FIELDS:
        if version not in f.versions:
            continue
        _same_field_facts(f, kp_fields[f.name], version, type(obj).__name__)
        value = getattr(obj, f.name)
        if f.tag is not None and version in f.tagged and value == f.default_value():
            continue  # both encoders leave a default tagged field out
        kwargs[f.name] = _kp_value(value, f.type, kp_cls, kp_fields[f.name], version)
    return kp_cls(**kwargs)


# Where kafka-python's copy of the specifications knowingly differs from Kafka 4.1's.
_KNOWN_DIFFERENCES = {
    # Kafka 4.2 adds topic ids to OffsetCommit v10 / OffsetFetch v10, which makes the topic
    # name ignorable there; in 4.1 it is a plain field.
    ("OffsetCommitRequestTopic.name", "ignorable"),
    ("OffsetCommitResponseTopic.name", "ignorable"),
    ("OffsetFetchRequestTopics.name", "ignorable"),
    ("OffsetFetchResponseTopics.name", "ignorable"),
    # kafka-python patches its copy to default to -1; Kafka's specification has no default.
    ("ListOffsetsRequest.replica_id", "default"),
}


def _same_field_facts(f: Field, kp_field: Any, version: int, where: str) -> None:
    """Nullability, tags, ignorability and simple defaults agree with kafka-python's copy of
    Kafka's message specifications."""
    name = f"{where}.{f.name}"
    where = f"{name} v{version}"
    assert (version in f.nullable) == kp_field.nullable_for_version_q(version), where
    assert (version in f.tagged) == kp_field.tagged_field_q(version), where
    if version in f.tagged:
        assert f.tag == kp_field.tag, where
    if (name, "ignorable") not in _KNOWN_DIFFERENCES:
        assert f.ignorable == bool(kp_field._ignorable), where
    simple = f.type in ("bool", "int8", "int16", "int32", "int64", "string")
    if simple and kp_field.type_str != "bitfield" and (name, "default") not in _KNOWN_DIFFERENCES:
        assert f.default_value() == kp_field.default, where


def _kp_value(value: Any, t: TypeSpec, kp_parent: Any, kp_field: Any, version: int) -> Any:
    if value is None:
        return None
    if isinstance(_inner(t), StructType):
        # kafka-python exposes a nested struct's class on its parent, by type name.
        nested = getattr(kp_parent, kp_field.type_str)
        if isinstance(t, ArrayType):
            return [_to_kp(e, nested, version) for e in value]
        return _to_kp(value, nested, version)
    if kp_field.type_str == "bitfield":
        # kafka-python holds authorized-operation bit fields as sets of bit numbers.
        return {i for i in range(32) if (value & 0xFFFFFFFF) >> i & 1}
    return list(value) if isinstance(value, list) else value


KP_CASES = [p for p in CASES if _kp_class(p.values[0].__name__) is not None]  # type: ignore[union-attr]


def test_kafka_python_covers_most_cases() -> None:
    # Only the KIP-848 APIs are missing from kafka-python's JSON specs.
    missing = {p.values[0].API_NAME for p in CASES} - {  # type: ignore[union-attr]
        p.values[0].API_NAME for p in KP_CASES}  # type: ignore[union-attr]
    assert missing == {"ConsumerGroupHeartbeat", "ConsumerGroupDescribe"}


@pytest.mark.interop
@pytest.mark.parametrize(("cls", "version"), KP_CASES)
def test_bytes_match_kafka_python(cls: type[Struct], version: int) -> None:
    kp_cls = _kp_class(cls.__name__)
    for nulls in (False, True):
        msg = _root(cls, version, nulls)
        ours = encode_struct(msg, version)
        built = _to_kp(msg, kp_cls, version)
        theirs = bytes(built.encode(version=version))
        assert ours == theirs, f"nulls={nulls}"
        # And kafka-python reads back what we wrote (its decoder leaves the header slot unset,
        # which its encoder needs, hence the assignment).
        decoded = kp_cls.decode(ours, version=version)
        decoded._header = None
        assert bytes(decoded.encode(version=version)) == ours


# --- 4. byte equality with kafka-python's older hand-written encoders ------------------------


def _legacy(module: str, name: str) -> Any:
    return getattr(_import_kafka_python(f"kafka.protocol.old.{module}"), name)


@pytest.mark.interop
@pytest.mark.parametrize("version", [3, 7])
def test_produce_request_matches_legacy(version: int) -> None:
    batch = b"\x00" * 8 + b"fake-batch"
    ours = ProduceRequest(transactional_id="tx", acks=-1, timeout_ms=30_000, topic_data=[
        ProduceRequest.TopicProduceData(name="t1", partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=batch),
            ProduceRequest.TopicProduceData.PartitionProduceData(index=3, records=None),
        ]),
    ])
    legacy = _legacy("produce", f"ProduceRequest_v{version}")(
        "tx", -1, 30_000, [("t1", [(0, batch), (3, None)])])
    assert encode_struct(ours, version) == legacy.encode()


@pytest.mark.interop
def test_produce_response_v7_from_legacy() -> None:
    legacy = _legacy("produce", "ProduceResponse_v7")(
        [("t1", [(0, 0, 42, -1, 7), (1, 6, -1, -1, -1)])], 5)
    msg = decode_struct(ProduceResponse, 7, legacy.encode())
    parts = msg.responses[0].partition_responses
    assert (msg.throttle_time_ms, msg.responses[0].name) == (5, "t1")
    assert [(p.index, p.error_code, p.base_offset, p.log_start_offset) for p in parts] == [
        (0, 0, 42, 7), (1, 6, -1, -1)]


@pytest.mark.interop
def test_fetch_request_v4_matches_legacy() -> None:
    ours = FetchRequest(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=52_428_800,
                        isolation_level=1, topics=[
        FetchRequest.FetchTopic(topic="t", partitions=[
            FetchRequest.FetchTopic.FetchPartition(partition=2, fetch_offset=1234,
                                                   partition_max_bytes=1_048_576),
        ]),
    ])
    legacy = _legacy("fetch", "FetchRequest_v4")(
        -1, 500, 1, 52_428_800, 1, [("t", [(2, 1234, 1_048_576)])])
    assert encode_struct(ours, 4) == legacy.encode()


@pytest.mark.interop
def test_fetch_request_v11_matches_legacy() -> None:
    ours = FetchRequest(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=1000,
                        isolation_level=0, session_id=9, session_epoch=3, topics=[
        FetchRequest.FetchTopic(topic="t", partitions=[
            FetchRequest.FetchTopic.FetchPartition(
                partition=2, current_leader_epoch=5, fetch_offset=1234, log_start_offset=-1,
                partition_max_bytes=100),
        ]),
    ], forgotten_topics_data=[FetchRequest.ForgottenTopic(topic="old", partitions=[1, 2])],
        rack_id="rack-a")
    legacy = _legacy("fetch", "FetchRequest_v11")(
        -1, 500, 1, 1000, 0, 9, 3, [("t", [(2, 5, 1234, -1, 100)])], [("old", [1, 2])], "rack-a")
    assert encode_struct(ours, 11) == legacy.encode()


@pytest.mark.interop
def test_fetch_response_v4_from_legacy() -> None:
    legacy = _legacy("fetch", "FetchResponse_v4")(
        0, [("t", [(0, 0, 100, 90, [(7, 80)], b"batch-bytes"), (1, 1, -1, -1, None, None)])])
    msg = decode_struct(FetchResponse, 4, legacy.encode())
    p0, p1 = msg.responses[0].partitions
    assert (p0.high_watermark, p0.last_stable_offset, p0.records) == (100, 90, b"batch-bytes")
    assert [(a.producer_id, a.first_offset) for a in p0.aborted_transactions] == [(7, 80)]
    assert (p1.error_code, p1.aborted_transactions, p1.records) == (1, None, None)
    assert encode_struct(msg, 4) == legacy.encode()


@pytest.mark.interop
def test_list_offsets_v1_matches_legacy() -> None:
    ours = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name="t", partitions=[
            ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=0, timestamp=-2),
        ])])
    legacy = _legacy("list_offsets", "ListOffsetsRequest_v1")(-1, [("t", [(0, -2)])])
    assert encode_struct(ours, 1) == legacy.encode()
    resp = _legacy("list_offsets", "ListOffsetsResponse_v1")([("t", [(0, 0, -1, 17)])])
    msg = decode_struct(ListOffsetsResponse, 1, resp.encode())
    assert msg.topics[0].partitions[0].offset == 17


@pytest.mark.interop
def test_offset_commit_v2_matches_legacy() -> None:
    ours = OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=4, member_id="m",
                               retention_time_ms=-1, topics=[
        OffsetCommitRequest.OffsetCommitRequestTopic(name="t", partitions=[
            OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                partition_index=1, committed_offset=99, committed_metadata="meta"),
        ]),
    ])
    legacy = _legacy("commit", "OffsetCommitRequest_v2")(
        "g", 4, "m", -1, [("t", [(1, 99, "meta")])])
    assert encode_struct(ours, 2) == legacy.encode()


@pytest.mark.interop
def test_join_group_v5_matches_legacy() -> None:
    ours = JoinGroupRequest(group_id="g", session_timeout_ms=10_000, rebalance_timeout_ms=30_000,
                            member_id="", group_instance_id="static-1", protocol_type="consumer",
                            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(
                                name="range", metadata=b"\x00\x01sub")])
    legacy = _legacy("group", "JoinGroupRequest_v5")(
        "g", 10_000, 30_000, "", "static-1", "consumer", [("range", b"\x00\x01sub")])
    assert encode_struct(ours, 5) == legacy.encode()
    resp = _legacy("group", "JoinGroupResponse_v5")(
        0, 0, 3, "range", "m1", "m1", [("m1", None, b"meta")])
    msg = decode_struct(JoinGroupResponse, 5, resp.encode())
    assert (msg.generation_id, msg.protocol_name, msg.leader) == (3, "range", "m1")
    assert (msg.members[0].group_instance_id, msg.members[0].metadata) == (None, b"meta")


@pytest.mark.interop
def test_find_coordinator_v1_matches_legacy() -> None:
    ours = FindCoordinatorRequest(key="g", key_type=0)
    legacy = _legacy("find_coordinator", "FindCoordinatorRequest_v1")("g", 0)
    assert encode_struct(ours, 1) == legacy.encode()
    resp = _legacy("find_coordinator", "FindCoordinatorResponse_v1")(0, 0, None, 2, "h", 9092)
    msg = decode_struct(FindCoordinatorResponse, 1, resp.encode())
    assert (msg.node_id, msg.host, msg.port, msg.error_message) == (2, "h", 9092, None)


# --- 5. version-specific behaviour -----------------------------------------------------------


def test_produce_topic_name_until_v12_topic_id_from_v13() -> None:
    tid = uuid.UUID(int=42)
    topic = ProduceRequest.TopicProduceData(name="t", topic_id=tid, partition_data=[])
    msg = ProduceRequest(acks=1, timeout_ms=1, topic_data=[topic])
    v12 = decode_struct(ProduceRequest, 12, encode_struct(msg, 12)).topic_data[0]
    v13 = decode_struct(ProduceRequest, 13, encode_struct(msg, 13)).topic_data[0]
    # Both fields are ignorable: each version silently drops the one it cannot carry.
    assert (v12.name, v12.topic_id) == ("t", uuid.UUID(int=0))
    assert (v13.name, v13.topic_id) == ("", tid)


def test_non_ignorable_field_rejected_by_old_version() -> None:
    msg = FetchRequest(forgotten_topics_data=[FetchRequest.ForgottenTopic(topic="t")])
    with pytest.raises(UnsupportedVersionError, match="forgotten_topics_data"):
        encode_struct(msg, 6)
    assert encode_struct(msg, 7)
    with pytest.raises(UnsupportedVersionError, match="group_instance_id"):
        encode_struct(HeartbeatRequest(group_instance_id="s"), 2)


def test_fetch_tagged_fields_on_the_wire() -> None:
    base = FetchRequest(max_wait_ms=1, min_bytes=1)
    plain = encode_struct(base, 12)
    tagged = encode_struct(FetchRequest(max_wait_ms=1, min_bytes=1, cluster_id="c1"), 12)
    # Without tags the request ends with an empty tag section; with cluster_id it ends with
    # one tag: count 1, tag 0, size 3, compact string "c1".
    assert plain.endswith(b"\x00")
    assert tagged == plain[:-1] + b"\x01\x00\x03\x03c1"
    # replica_state (tag 1) exists from v15 and replaces replica_id.
    state = FetchRequest.ReplicaState(replica_id=3, replica_epoch=9)
    msg = FetchRequest(replica_state=state, replica_id=-1)
    back = decode_struct(FetchRequest, 15, encode_struct(msg, 15))
    assert (back.replica_state.replica_id, back.replica_state.replica_epoch) == (3, 9)
    with pytest.raises(UnsupportedVersionError):
        encode_struct(FetchRequest(replica_id=3), 15)


def test_fetch_response_unknown_tags_kept() -> None:
    part = FetchResponse.FetchableTopicResponse.PartitionData(
        partition_index=1, records=b"x", unknown_tags={9: b"\x01\x02"})
    msg = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
        topic_id=uuid.UUID(int=1), partitions=[part])])
    data = encode_struct(msg, 16)
    back = decode_struct(FetchResponse, 16, data)
    assert back.responses[0].partitions[0].unknown_tags == {9: b"\x01\x02"}
    assert encode_struct(back, 16) == data


def test_offset_fetch_switches_to_groups_at_v8() -> None:
    topic = OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0])
    old = OffsetFetchRequest(group_id="g", topics=[topic])
    assert decode_struct(OffsetFetchRequest, 7, encode_struct(old, 7)) == old
    with pytest.raises(UnsupportedVersionError, match="group_id"):
        encode_struct(old, 8)
    new = OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
        group_id="g", topics=None)])
    assert decode_struct(OffsetFetchRequest, 8, encode_struct(new, 8)) == new
    with pytest.raises(ValueError, match="topics"):
        encode_struct(OffsetFetchRequest(group_id="g", topics=None), 1)  # null from v2 only


# --- 6. KIP-848 APIs, which kafka-python lacks: bytes written out by hand from the spec ------


def _cs(text: str) -> bytes:
    """A compact string: uvarint(length + 1) then UTF-8 (all lengths here are < 127)."""
    return bytes([len(text) + 1]) + text.encode()


@pytest.mark.parametrize("version", [0, 1])
def test_consumer_group_heartbeat_request_bytes(version: int) -> None:
    msg = ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="m", member_epoch=0, rebalance_timeout_ms=30_000,
        subscribed_topic_names=["t"], server_assignor="uniform")
    expected = (
        _cs("g") + _cs("m") + b"\x00\x00\x00\x00"  # group, member, epoch
        + b"\x00\x00"  # instance_id, rack_id: null
        + b"\x00\x00\x75\x30"  # rebalance timeout
        + b"\x02" + _cs("t")  # one subscribed topic
        + (b"\x00" if version >= 1 else b"")  # v1+: subscribed_topic_regex, null
        + _cs("uniform")
        + b"\x00"  # topic_partitions: null
        + b"\x00"  # no tagged fields
    )
    assert encode_struct(msg, version) == expected
    assert decode_struct(ConsumerGroupHeartbeatRequest, version, expected) == msg
    with pytest.raises(UnsupportedVersionError, match="subscribed_topic_regex"):
        encode_struct(ConsumerGroupHeartbeatRequest(subscribed_topic_regex="t.*"), 0)


def test_consumer_group_heartbeat_response_bytes() -> None:
    resp_cls = ConsumerGroupHeartbeatRequest.RESPONSE_TYPE
    tid = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
    absent = b"\x00" * 4 + b"\x00\x00" + b"\x00" + _cs("m") + b"\x00\x00\x00\x01" + \
        b"\x00\x00\x13\x88"
    msg = decode_struct(resp_cls, 1, absent + b"\xff" + b"\x00")
    assert (msg.member_id, msg.member_epoch, msg.heartbeat_interval_ms, msg.assignment) == (
        "m", 1, 5000, None)
    present = absent + b"\x01" + b"\x02" + tid.bytes + b"\x03" + b"\x00\x00\x00\x00" + \
        b"\x00\x00\x00\x02" + b"\x00" + b"\x00" + b"\x00"
    msg = decode_struct(resp_cls, 0, present)
    [tp] = msg.assignment.topic_partitions
    assert (tp.topic_id, tp.partitions) == (tid, [0, 2])
    assert encode_struct(msg, 0) == present


@pytest.mark.parametrize("version", [0, 1])
def test_consumer_group_describe_response_bytes(version: int) -> None:
    resp_cls = ConsumerGroupDescribeRequest.RESPONSE_TYPE
    tid = uuid.UUID(int=7)
    described = resp_cls.DescribedGroup
    member_cls = described.Member
    assignment_cls = member_cls.ConsumerGroupDescribeAssignment
    tp_cls = assignment_cls.ConsumerGroupDescribeTopicPartitions
    member = member_cls(
        member_id="m", member_epoch=5, client_id="c", client_host="h",
        subscribed_topic_names=["t"],
        assignment=assignment_cls(topic_partitions=[tp_cls(topic_id=tid, topic_name="t",
                                                           partitions=[0])]),
        target_assignment=assignment_cls(), member_type=1 if version >= 1 else -1)
    msg = resp_cls(groups=[described(group_id="g", group_state="Stable", group_epoch=5,
                                     assignment_epoch=5, assignor_name="uniform",
                                     members=[member])])
    expected = (
        b"\x00\x00\x00\x00" + b"\x02"  # throttle, one group
        + b"\x00\x00" + b"\x00" + _cs("g") + _cs("Stable")  # error, null message, id, state
        + b"\x00\x00\x00\x05" * 2 + _cs("uniform") + b"\x02"  # epochs, assignor, one member
        + _cs("m") + b"\x00\x00" + b"\x00\x00\x00\x05" + _cs("c") + _cs("h")
        + b"\x02" + _cs("t") + b"\x00"  # subscribed names, null regex
        + b"\x02" + tid.bytes + _cs("t") + b"\x02" + b"\x00" * 4 + b"\x00" + b"\x00"
        + b"\x01" + b"\x00"  # empty target assignment
        + (b"\x01" if version >= 1 else b"")  # v1+: member_type
        + b"\x00"  # member tags
        + b"\x80\x00\x00\x00" + b"\x00"  # authorized operations unknown, group tags
        + b"\x00"  # top-level tags
    )
    assert encode_struct(msg, version) == expected
    assert decode_struct(resp_cls, version, expected) == msg
