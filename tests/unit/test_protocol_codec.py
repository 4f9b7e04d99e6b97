"""Every declared (api, version): compiled codec round trip, equal to the interpreted oracle."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kontrakt.protocol.messages  # noqa: F401  (fills the registry)
from kontrakt.errors import CorruptMessageError, UnsupportedVersionError
from kontrakt.protocol._interpreted import interpreted_decode, interpreted_encode
from kontrakt.protocol.codec import codec_source, decode_struct, encode_struct
from kontrakt.protocol.headers import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    request_header_version,
    response_header_version,
)
from kontrakt.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
)
from kontrakt.protocol.spec import (
    ArrayType,
    Field,
    Struct,
    StructType,
    TypeSpec,
    VersionRange,
    registry,
    struct_class,
)

_INTS = {
    "int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-(2**63), 2**63 - 1),
}


def _value(t: TypeSpec, version: int, flexible: bool, nullable: bool,
           root: type[Struct]) -> st.SearchStrategy[Any]:
    if isinstance(t, str):
        if t in _INTS:
            lo, hi = _INTS[t]
            base: st.SearchStrategy[Any] = st.integers(lo, hi)
        elif t == "bool":
            base = st.booleans()
        elif t == "float64":
            base = st.floats(allow_nan=False)
        elif t == "string":
            base = st.text(max_size=8)
        elif t in ("bytes", "records"):
            base = st.binary(max_size=16)
        elif t == "uuid":
            base = st.uuids()
        else:  # pragma: no cover
            raise AssertionError(t)
    elif isinstance(t, StructType):
        base = _struct(t, version, flexible, root)
    else:
        base = st.lists(_value(t.item, version, flexible, False, root), max_size=3)
    return st.one_of(st.none(), base) if nullable else base


def _struct(sty: StructType, version: int, flexible: bool,
            root: type[Struct]) -> st.SearchStrategy[Any]:
    cls = root if root.STRUCT is sty else struct_class(sty)
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for f in sty.fields:
        if version in f.versions:
            fields[f.name] = _value(f.type, version, flexible, version in f.nullable, root)
    return st.fixed_dictionaries(fields).map(lambda kw: cls(**kw))


def _cases() -> list[Any]:
    out = []
    for _key, spec in sorted(registry().items()):
        hi = spec.valid.hi if spec.valid.hi is not None else spec.valid.lo
        for v in range(spec.valid.lo, hi + 1):
            for cls in (spec.request_class, spec.response_class):
                out.append(pytest.param(cls, v, id=f"{cls.__name__}-v{v}"))
    return out


@pytest.mark.parametrize(("cls", "version"), _cases())
def test_round_trip_matches_oracle(cls: type[Struct], version: int) -> None:
    flexible = version in cls.FLEXIBLE_VERSIONS  # type: ignore[attr-defined]

    @settings(max_examples=8, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(_struct(cls.STRUCT, version, flexible, cls))
    def check(msg: Struct) -> None:
        data = encode_struct(msg, version)
        assert data == interpreted_encode(msg, version)
        back = decode_struct(cls, version, data)
        assert back == msg
        assert interpreted_decode(cls, version, data) == msg

    check()


def test_every_api_declared() -> None:
    wanted = {
        "ApiVersions", "Metadata", "Produce", "Fetch", "ListOffsets", "OffsetCommit",
        "OffsetFetch", "FindCoordinator", "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup",
        "DescribeGroups", "ListGroups", "DeleteGroups", "OffsetDelete", "OffsetForLeaderEpoch",
        "SaslHandshake", "SaslAuthenticate", "CreateTopics", "DeleteTopics", "CreatePartitions",
        "DeleteRecords", "DescribeConfigs", "AlterConfigs", "IncrementalAlterConfigs",
        "DescribeCluster", "DescribeAcls", "CreateAcls", "DeleteAcls", "DescribeLogDirs",
        "InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn", "TxnOffsetCommit",
        "DescribeProducers", "DescribeTransactions", "ListTransactions",
        "ConsumerGroupHeartbeat", "ConsumerGroupDescribe",
    }
    declared = {spec.name for spec in registry().values()}
    assert wanted - declared == set()


def test_unknown_tags_are_kept_and_written_back() -> None:
    resp = ApiVersionsResponse(
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=0, min_version=3, max_version=12,
                                                 unknown_tags={7: b"\x01\x02"})],
        unknown_tags={9: b"hello"},
    )
    data = encode_struct(resp, 3)
    back = decode_struct(ApiVersionsResponse, 3, data)
    assert back.unknown_tags == {9: b"hello"}
    assert back.api_keys[0].unknown_tags == {7: b"\x01\x02"}
    assert encode_struct(back, 3) == data


def test_known_tag_written_only_when_not_default() -> None:
    plain = encode_struct(ApiVersionsResponse(), 3)
    tagged = encode_struct(ApiVersionsResponse(finalized_features_epoch=4), 3)
    assert len(tagged) > len(plain)
    assert decode_struct(ApiVersionsResponse, 3, tagged).finalized_features_epoch == 4
    assert decode_struct(ApiVersionsResponse, 3, plain).finalized_features_epoch == -1


def test_field_the_version_cannot_carry_raises() -> None:
    topic = MetadataRequest.MetadataRequestTopic(name="t", topic_id=uuid.uuid4())
    with pytest.raises(UnsupportedVersionError, match="topic_id"):
        encode_struct(MetadataRequest(topics=[topic]), 9)
    # ignorable fields are dropped silently
    encode_struct(MetadataRequest(topics=[], allow_auto_topic_creation=False), 1)


def test_null_where_not_nullable_raises() -> None:
    with pytest.raises(ValueError, match="topics"):
        encode_struct(MetadataRequest(topics=None), 0)


def test_keyword_construction_rejects_unknown_fields() -> None:
    with pytest.raises(TypeError, match="no field"):
        MetadataRequest(topicz=[])


def _every_class() -> list[type[Struct]]:
    seen: dict[int, type[Struct]] = {}
    todo: list[type[Struct]] = []
    for spec in registry().values():
        todo += [spec.request_class, spec.response_class]
    while todo:
        cls = todo.pop()
        if id(cls) in seen:
            continue
        seen[id(cls)] = cls
        for f in cls.FIELDS:
            inner: TypeSpec = f.type
            while isinstance(inner, ArrayType):
                inner = inner.item
            if isinstance(inner, StructType):
                todo.append(getattr(cls, inner.name))
    return list(seen.values())


def test_each_class_s_own_init_builds_what_the_generic_one_does() -> None:
    # Every message class gets an __init__ written for its fields (one per request is on
    # the producer's hot path); it must fill defaults as Struct.__init__ does, give each
    # instance its own lists and nested structs, and refuse unknown fields alike.
    classes = _every_class()
    assert len(classes) > 150
    own = 0
    for cls in classes:
        own += "__init__" in vars(cls)
        generic = object.__new__(cls)
        Struct.__init__(generic)
        made, other = cls(), cls()
        assert made == generic, cls
        for f in cls.FIELDS:
            value = getattr(made, f.name)
            if isinstance(value, (list, Struct)):
                assert value is not getattr(other, f.name), (cls, f.name)
        # Given values win over defaults, for every field at once.
        given = {f.name: object() for f in cls.FIELDS}
        built = cls(**given, unknown_tags={1: b"x"})
        assert all(getattr(built, n) is v for n, v in given.items())
        assert built.unknown_tags == {1: b"x"}
        with pytest.raises(TypeError, match=f"{cls.__name__} has no field\\(s\\) a_, z_"):
            cls(z_=1, a_=2)
    assert own == len(classes)


def test_truncated_and_trailing_bytes_are_corrupt() -> None:
    resp = MetadataResponse(brokers=[MetadataResponse.MetadataResponseBroker(
        node_id=1, host="h", port=1)])
    for v in (0, 9, 12):
        data = encode_struct(resp, v)
        for cut in range(len(data)):
            with pytest.raises(CorruptMessageError):
                decode_struct(MetadataResponse, v, data[:cut])
        with pytest.raises(CorruptMessageError):
            decode_struct(MetadataResponse, v, data + b"\0")


def test_hostile_array_count_does_not_allocate() -> None:
    # An array count of 2**31-1 with no bytes behind it must fail fast.
    data = b"\x00\x00\x00\x00" + b"\x7f\xff\xff\xff"
    with pytest.raises(CorruptMessageError, match="claims"):
        decode_struct(MetadataResponse, 3, data)


def test_header_versions() -> None:
    assert request_header_version(MetadataRequest, 8) == 1
    assert request_header_version(MetadataRequest, 9) == 2
    assert response_header_version(MetadataResponse, 9) == 1
    # ApiVersions responses always use header v0
    assert response_header_version(ApiVersionsResponse, 3) == 0


def test_request_frame_round_trip_and_client_id_is_legacy_string() -> None:
    req = ApiVersionsRequest(client_software_name="kontrakt", client_software_version="1")
    frame = encode_request(req, 3, 42, "me")
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    # api key 18, version 3, correlation 42, client id as int16 length + bytes
    assert frame[4:12] == b"\x00\x12\x00\x03\x00\x00\x00\x2a"
    assert frame[12:16] == b"\x00\x02me"
    header, back = decode_request(frame[4:])
    assert (header.api_key, header.api_version, header.correlation_id) == (18, 3, 42)
    assert back == req


@pytest.mark.parametrize("version", [3, 8, 9, 11])
def test_request_frames_with_large_values_match_the_interpreted_oracle(version: int) -> None:
    # encode_request keeps bytes values of 4 KiB or more aside and joins the frame once
    # (primitives.Frame); the bytes must be those of copying every value in, whatever the
    # mix and order of small, large and empty values, legacy or compact lengths.
    td = ProduceRequest.TopicProduceData
    pd = td.PartitionProduceData
    sizes = [[0, 70_000, 10, 4095, 4096], [200_000], [5, 4097, 4097, 1]]
    req = ProduceRequest(transactional_id="txn", acks=-1, timeout_ms=1000, topic_data=[
        td(name=f"t{i}", partition_data=[
            pd(index=j, records=bytes([i * 16 + j]) * n) for j, n in enumerate(row)])
        for i, row in enumerate(sizes)])
    frame = encode_request(req, version, 9, "me")
    header = encode_request(ApiVersionsRequest(), 0, 9, "me")[8:16]  # corr id + client id
    body = interpreted_encode(req, version)
    flexible = version >= 9
    assert frame[4:] == b"\x00\x00" + version.to_bytes(2, "big") + header + \
        (b"\x00" if flexible else b"") + body
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    _, back = decode_request(frame[4:])
    assert back == req


def test_response_frame_round_trip() -> None:
    resp = MetadataResponse(cluster_id="c", controller_id=2)
    frame = encode_response(resp, 12, 7)
    corr, back = decode_response(MetadataResponse, 12, frame[4:], exact=True)
    assert corr == 7 and back == resp


def test_codec_source_is_inspectable() -> None:
    src = codec_source(MetadataResponse, 12)
    assert "def dec_MetadataResponse" in src and "def enc_MetadataResponse" in src


def test_version_range_parsing() -> None:
    assert 5 in VersionRange.parse("3+")
    assert 2 not in VersionRange.parse("3+")
    assert 7 in VersionRange.parse("3-7") and 8 not in VersionRange.parse("3-7")
    assert VersionRange.parse("none").empty
    assert str(VersionRange.parse("4")) == "4"


def test_matches_kafka_python_metadata_bytes() -> None:
    kp = pytest.importorskip("kafka.protocol.metadata")
    ours = encode_struct(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
        name="a")], allow_auto_topic_creation=True), 4)
    theirs = kp.MetadataRequest[4](topics=["a"], allow_auto_topic_creation=True).encode()
    assert ours == bytes(theirs)


_ = (ArrayType, Field)
