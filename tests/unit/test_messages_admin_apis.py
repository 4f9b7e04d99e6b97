"""Admin and transaction API declarations: shape, round trips, and bytes equal to kafka-python's.

kafka-python (a test-only peer) builds its codecs from its own copy of Kafka's JSON message
specifications; it is an independent encoder and decoder for every version checked here. Its
older hand-written encoders (``kafka.protocol.old``) are a second, separate oracle for a few
pre-flexible versions.
"""

from __future__ import annotations

import random
import re
import uuid
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

import kontrakt.protocol.messages as messages
from kontrakt.errors import UnsupportedVersionError
from kontrakt.protocol.codec import decode_struct, encode_struct
from kontrakt.protocol.headers import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from kontrakt.protocol.spec import ApiSpec, ArrayType, Field, Struct, StructType, registry

# kafka-python reads its bundled JSON with a deprecated importlib call while importing.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.protocol.admin as kp_admin
    import kafka.protocol.old.admin as kp_old_admin
    import kafka.protocol.old.init_producer_id as kp_old_init_producer_id
    import kafka.protocol.producer as kp_producer
    from kafka.protocol.api_message import ApiMessage

# (key, name, valid versions, flexible versions), from Kafka's message specifications.
EXPECTED = [
    (19, "CreateTopics", "0-7", "5+"),
    (20, "DeleteTopics", "0-6", "4+"),
    (21, "DeleteRecords", "0-2", "2+"),
    (22, "InitProducerId", "0-6", "2+"),
    (24, "AddPartitionsToTxn", "0-5", "3+"),
    (25, "AddOffsetsToTxn", "0-4", "3+"),
    (26, "EndTxn", "0-5", "3+"),
    (28, "TxnOffsetCommit", "0-5", "3+"),
    (29, "DescribeAcls", "0-3", "2+"),
    (30, "CreateAcls", "0-3", "2+"),
    (31, "DeleteAcls", "0-3", "2+"),
    (32, "DescribeConfigs", "0-4", "4+"),
    (33, "AlterConfigs", "0-2", "2+"),
    (35, "DescribeLogDirs", "0-5", "2+"),
    (37, "CreatePartitions", "0-3", "2+"),
    (38, "CreateDelegationToken", "0-3", "2+"),
    (39, "RenewDelegationToken", "0-2", "2+"),
    (40, "ExpireDelegationToken", "0-2", "2+"),
    (41, "DescribeDelegationToken", "0-3", "2+"),
    (43, "ElectLeaders", "0-2", "2+"),
    (44, "IncrementalAlterConfigs", "0-1", "1+"),
    (45, "AlterPartitionReassignments", "0-1", "0+"),
    (46, "ListPartitionReassignments", "0", "0+"),
    (48, "DescribeClientQuotas", "0-1", "1+"),
    (49, "AlterClientQuotas", "0-1", "1+"),
    (50, "DescribeUserScramCredentials", "0", "0+"),
    (51, "AlterUserScramCredentials", "0", "0+"),
    (57, "UpdateFeatures", "0-2", "0+"),
    (60, "DescribeCluster", "0-2", "0+"),
    (61, "DescribeProducers", "0", "0+"),
    (65, "DescribeTransactions", "0", "0+"),
    (66, "ListTransactions", "0-2", "0+"),
    (71, "GetTelemetrySubscriptions", "0", "0+"),
    (72, "PushTelemetry", "0", "0+"),
    (75, "DescribeTopicPartitions", "0", "0+"),
]
KEYS = [e[0] for e in EXPECTED]
# kafka-python declares no delegation-token or KIP-714 telemetry APIs: those are checked by
# round trips only (their fields were taken from Kafka's message specifications,
# CreateDelegationToken v3 of KIP-373), the telemetry ones also against bytes laid out by
# hand (test_telemetry_bytes_follow_kafkas_schema).
NOT_IN_KAFKA_PYTHON = {38, 39, 40, 41, 71, 72}

# Where our snake_case name differs from kafka-python's mechanical conversion.
KP_NAME = {"enable_2pc": "enable2_pc"}


def _spec(key: int) -> ApiSpec:
    return registry()[key]


def _cases() -> Iterator[tuple[int, int]]:
    for key in KEYS:
        valid = _spec(key).valid
        assert valid.hi is not None
        for v in range(valid.lo, valid.hi + 1):
            yield key, v


CASES = list(_cases())
CASE_IDS = [f"{_spec(k).name}-v{v}" for k, v in CASES]
KP_CASES = [c for c in CASES if c[0] not in NOT_IN_KAFKA_PYTHON]
KP_CASE_IDS = [f"{_spec(k).name}-v{v}" for k, v in KP_CASES]


# --- a populated-message builder -------------------------------------------------------------

_INT_BOUNDS = {
    "int8": 7, "int16": 15, "uint16": 16, "int32": 31, "uint32": 32, "int64": 63,
}


def _value(t: Any, f: Field, v: int, rng: random.Random, owner: type[Struct],
           null_p: float) -> Any:
    if v in f.nullable and rng.random() < null_p:
        return None
    return _non_null(t, v, rng, owner, null_p)


def _non_null(t: Any, v: int, rng: random.Random, owner: type[Struct], null_p: float) -> Any:
    if isinstance(t, ArrayType):
        n = rng.randint(1, 3)
        return [_non_null(t.item, v, rng, owner, null_p) for _ in range(n)]
    if isinstance(t, StructType):
        return _populate(getattr(owner, t.name), v, rng, null_p)
    if t == "bool":
        return rng.random() < 0.5
    if t == "float64":
        return rng.choice([0.0, -1.5, 1e300, rng.uniform(-1e9, 1e9)])
    if t in _INT_BOUNDS:
        bits = _INT_BOUNDS[t]
        lo = 0 if t.startswith("u") else -(2 ** bits)
        hi = 2 ** bits - 1
        return rng.randint(lo, hi)
    if t == "string":
        # Non-ASCII characters check that lengths are counted in UTF-8 bytes.
        return "".join(rng.choice("abcxyz-._é☃") for _ in range(rng.randint(0, 12)))
    if t == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    if t == "bytes":
        return rng.randbytes(rng.randint(0, 40))
    raise AssertionError(f"no generator for {t!r}")


def _populate(cls: type[Struct], v: int, rng: random.Random, null_p: float) -> Any:
    kwargs = {
        f.name: _value(f.type, f, v, rng, cls, null_p)
        for f in cls.FIELDS
        if v in f.versions
    }
    return cls(**kwargs)


def _in_version_dict(obj: Any, v: int) -> Any:
    """Fields a version carries, nested, in kafka-python's ``to_dict`` shape."""
    if isinstance(obj, Struct):
        return {
            KP_NAME.get(f.name, f.name): _in_version_dict(getattr(obj, f.name), v)
            for f in obj.FIELDS
            if v in f.versions
        }
    if isinstance(obj, list):
        return [_in_version_dict(e, v) for e in obj]
    if isinstance(obj, uuid.UUID):
        return str(obj)
    return obj


SEEDS = [(0, 0.0), (1, 1.0), (2, 0.5)]  # (seed, probability of null where nullable)


# --- declaration shape ----------------------------------------------------------------------


def test_declared_apis_and_ranges_match_kafka() -> None:
    for key, name, valid, flexible in EXPECTED:
        spec = _spec(key)
        assert (spec.name, str(spec.valid), str(spec.flexible)) == (name, valid, flexible)
        assert spec.request_class.__name__ == f"{name}Request"
        assert getattr(messages, f"{name}Request") is spec.request_class
        assert getattr(messages, f"{name}Response") is spec.response_class
        assert f"{name}Request" in messages.__all__
        assert f"{name}Response" in messages.__all__


def _walk(st: StructType) -> Iterator[StructType]:
    yield st
    for f in st.fields:
        t: Any = f.type
        while isinstance(t, ArrayType):
            t = t.item
        if isinstance(t, StructType):
            yield from _walk(t)


@pytest.mark.parametrize("key", KEYS, ids=[_spec(k).name for k in KEYS])
def test_fields_are_well_formed(key: int) -> None:
    spec = _spec(key)
    valid, flexible = spec.valid, spec.flexible
    assert valid.hi is not None
    assert flexible.lo <= valid.hi + 1
    for root in (spec.request, spec.response):
        for st in _walk(root):
            names = [f.name for f in st.fields]
            assert len(names) == len(set(names)), st.name
            tags = [f.tag for f in st.fields if f.tag is not None]
            assert len(tags) == len(set(tags)), st.name
            for f in st.fields:
                where = f"{spec.name}.{st.name}.{f.name}"
                assert re.fullmatch(r"[a-z][a-z0-9_]*", f.name), where
                # the field exists in at least one valid version, and a bounded range ends
                # inside the valid range
                assert any(v in f.versions for v in range(valid.lo, valid.hi + 1)), where
                if f.versions.hi is not None:
                    assert f.versions.hi <= valid.hi, where
                if f.tag is not None:
                    assert f.tagged.lo >= flexible.lo, where
                    assert all(v in f.versions for v in range(f.tagged.lo, valid.hi + 1)), where


# --- round trips ----------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "version"), CASES, ids=CASE_IDS)
def test_round_trip_populated(key: int, version: int) -> None:
    spec = _spec(key)
    for seed, null_p in SEEDS:
        rng = random.Random(f"{key}/{version}/{seed}")
        for cls in (spec.request_class, spec.response_class):
            msg = _populate(cls, version, rng, null_p)
            data = encode_struct(msg, version)
            back = decode_struct(cls, version, data)
            assert back == msg, (cls.__name__, version, seed)
            assert encode_struct(back, version) == data


@pytest.mark.parametrize(("key", "version"), CASES, ids=CASE_IDS)
def test_round_trip_whole_frames(key: int, version: int) -> None:
    spec = _spec(key)
    rng = random.Random(f"frames/{key}/{version}")
    req = _populate(spec.request_class, version, rng, 0.5)
    frame = encode_request(req, version, correlation_id=41, client_id="cid")
    header, back = decode_request(frame[4:])
    assert (header.api_key, header.api_version, header.correlation_id) == (key, version, 41)
    assert back == req
    resp = _populate(spec.response_class, version, rng, 0.5)
    rframe = encode_response(resp, version, correlation_id=42)
    corr, rback = decode_response(spec.response_class, version, rframe[4:])
    assert (corr, rback) == (42, resp)


# --- kafka-python as an oracle --------------------------------------------------------------


def _kafka_python_classes() -> dict[tuple[int, bool], Any]:
    found: dict[tuple[int, bool], Any] = {}
    for mod in (kp_admin, kp_producer):
        for obj in vars(mod).values():
            if isinstance(obj, type) and issubclass(obj, ApiMessage) and obj is not ApiMessage:
                kp: Any = obj
                found[(kp.API_KEY, kp.is_request())] = kp
    return found


@pytest.fixture(scope="module")
def kp_classes() -> dict[tuple[int, bool], Any]:
    return _kafka_python_classes()


def _without_bytes(obj: Any, ours: Any) -> Any:
    """``obj`` without the entries that are bytes in ``ours`` (same shape)."""
    if isinstance(ours, dict):
        return {k: _without_bytes(obj[k], v) for k, v in ours.items()
                if not isinstance(v, bytes)}
    if isinstance(ours, list):
        return [_without_bytes(o, v) for o, v in zip(obj, ours, strict=True)]
    return obj


@pytest.mark.parametrize(("key", "version"), KP_CASES, ids=KP_CASE_IDS)
def test_bytes_equal_kafka_python(key: int, version: int,
                                  kp_classes: dict[tuple[int, bool], Any]) -> None:
    spec = _spec(key)
    for seed, null_p in SEEDS:
        rng = random.Random(f"kp/{key}/{version}/{seed}")
        for cls, is_request in ((spec.request_class, True), (spec.response_class, False)):
            kp_cls = kp_classes[(key, is_request)]
            msg = _populate(cls, version, rng, null_p)
            data = encode_struct(msg, version)
            theirs = kp_cls.decode(data, version=version)
            theirs._header = None  # decode leaves it unset; encode() reads it
            # Same field names and values as kafka-python reads them ...
            their_dict, our_dict = theirs.to_dict(), _in_version_dict(msg, version)
            if cls is messages.DescribeClusterResponse:
                # kafka-python renames this field and decodes the bit set into a list.
                bits = their_dict.pop("authorized_operations")
                ops = our_dict.pop("cluster_authorized_operations")
                assert bits == [i for i in range(32) if ops & (1 << i)]
            # (kafka-python's to_dict shows bytes fields as text: those are compared by
            # the bytes below.)
            assert _without_bytes(their_dict, our_dict) == _without_bytes(our_dict, our_dict), (
                cls.__name__, seed)
            # ... and kafka-python writes exactly our bytes back.
            assert bytes(theirs.encode()) == data, (cls.__name__, version, seed)
            # Their bytes decode to our message.
            assert decode_struct(cls, version, bytes(theirs.encode())) == msg


def test_create_topics_v1_and_v4_equal_kafka_python_encoders() -> None:
    KpCreateTopics = kp_admin.CreateTopicsRequest
    CreateTopicsRequest_v1 = kp_old_admin.CreateTopicsRequest_v1
    cls: Any = messages.CreateTopicsRequest
    topic = cls.CreatableTopic(
        name="orders", num_partitions=-1, replication_factor=-1,
        assignments=[cls.CreatableTopic.CreatableReplicaAssignment(
            partition_index=0, broker_ids=[1, 2])],
        configs=[cls.CreatableTopic.CreatableTopicConfig(name="cleanup.policy", value="compact"),
                 cls.CreatableTopic.CreatableTopicConfig(name="retention.ms", value=None)],
    )
    ours = cls(topics=[topic], timeout_ms=30000, validate_only=True)

    old = CreateTopicsRequest_v1(
        topics=[("orders", -1, -1, [(0, [1, 2])],
                 [("cleanup.policy", "compact"), ("retention.ms", None)])],
        timeout_ms=30000, validate_only=True,
    )
    assert encode_struct(ours, 1) == bytes(old.encode())

    kp_topic = KpCreateTopics.CreatableTopic(
        name="orders", num_partitions=-1, replication_factor=-1,
        assignments=[KpCreateTopics.CreatableTopic.CreatableReplicaAssignment(
            partition_index=0, broker_ids=[1, 2])],
        configs=[KpCreateTopics.CreatableTopic.CreatableTopicConfig(
                     name="cleanup.policy", value="compact"),
                 KpCreateTopics.CreatableTopic.CreatableTopicConfig(
                     name="retention.ms", value=None)],
    )
    theirs = KpCreateTopics(topics=[kp_topic], timeout_ms=30000, validate_only=True)
    assert encode_struct(ours, 4) == bytes(theirs.encode(version=4))
    # v4 is not flexible, so it matches the hand-written v1 layout too.
    assert encode_struct(ours, 4) == encode_struct(ours, 1)


def test_old_kafka_python_encoders_agree() -> None:
    AlterConfigsRequest_v1 = kp_old_admin.AlterConfigsRequest_v1
    DeleteTopicsRequest_v1 = kp_old_admin.DeleteTopicsRequest_v1
    DescribeConfigsRequest_v1 = kp_old_admin.DescribeConfigsRequest_v1
    InitProducerIdRequest_v1 = kp_old_init_producer_id.InitProducerIdRequest_v1
    dt = messages.DeleteTopicsRequest(topic_names=["a", "bé"], timeout_ms=1500)
    assert encode_struct(dt, 1) == bytes(
        DeleteTopicsRequest_v1(topics=["a", "bé"], timeout=1500).encode())

    dc_cls: Any = messages.DescribeConfigsRequest
    dc = dc_cls(resources=[
        dc_cls.DescribeConfigsResource(resource_type=2, resource_name="t",
                                       configuration_keys=None),
        dc_cls.DescribeConfigsResource(resource_type=4, resource_name="1",
                                       configuration_keys=["log.retention.ms"]),
    ], include_synonyms=True)
    assert encode_struct(dc, 1) == bytes(DescribeConfigsRequest_v1(
        resources=[(2, "t", None), (4, "1", ["log.retention.ms"])],
        include_synonyms=True).encode())

    ip = messages.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000)
    assert encode_struct(ip, 1) == bytes(InitProducerIdRequest_v1(
        transactional_id=None, transaction_timeout_ms=60000).encode())

    ac_cls: Any = messages.AlterConfigsRequest
    ac = ac_cls(resources=[ac_cls.AlterConfigsResource(
        resource_type=2, resource_name="t",
        configs=[ac_cls.AlterConfigsResource.AlterableConfig(name="retention.ms", value="10"),
                 ac_cls.AlterConfigsResource.AlterableConfig(name="x", value=None)])],
        validate_only=False)
    assert encode_struct(ac, 1) == bytes(AlterConfigsRequest_v1(
        resources=[(2, "t", [("retention.ms", "10"), ("x", None)])],
        validate_only=False).encode())


# --- version rules --------------------------------------------------------------------------


def test_fields_a_version_cannot_carry() -> None:
    # Not ignorable: setting them for an older version is an error, not silent data loss.
    with pytest.raises(UnsupportedVersionError, match="validate_only"):
        encode_struct(messages.CreateTopicsRequest(validate_only=True), 0)
    acl = messages.DescribeAclsRequest(pattern_type_filter=4)  # PREFIXED does not exist in v0
    with pytest.raises(UnsupportedVersionError, match="pattern_type_filter"):
        encode_struct(acl, 0)
    assert encode_struct(acl, 1)
    with pytest.raises(UnsupportedVersionError, match="member_id"):
        encode_struct(messages.TxnOffsetCommitRequest(member_id="m"), 2)
    with pytest.raises(UnsupportedVersionError, match="endpoint_type"):
        encode_struct(messages.DescribeClusterRequest(endpoint_type=2), 0)
    # Ignorable: silently left out, as Kafka's generated code does.
    resp = messages.CreateTopicsResponse(throttle_time_ms=9)
    assert encode_struct(resp, 1) == encode_struct(messages.CreateTopicsResponse(), 1)
    dt = messages.DeleteTopicsRequest(topic_names=["a"], timeout_ms=1)
    assert encode_struct(dt, 6) == encode_struct(messages.DeleteTopicsRequest(timeout_ms=1), 6)


def test_defaults_follow_kafka() -> None:
    assert messages.CreateTopicsRequest().timeout_ms == 60000
    assert messages.InitProducerIdRequest().producer_id == -1
    assert messages.InitProducerIdRequest().producer_epoch == -1
    assert messages.DescribeAclsRequest().pattern_type_filter == 3
    assert messages.DescribeClusterResponse().cluster_authorized_operations == -(2**31)
    assert messages.TxnOffsetCommitRequest().group_instance_id is None
    assert messages.ListTransactionsRequest().duration_filter == -1
    dc_resp: Any = messages.DescribeClusterResponse
    broker = dc_resp.DescribeClusterBroker()
    assert broker.rack is None
    # Absent fields decode to their defaults.
    resp = decode_struct(messages.EndTxnResponse, 4, encode_struct(messages.EndTxnResponse(), 4))
    assert (resp.producer_id, resp.producer_epoch) == (-1, -1)


def test_tagged_field_and_unknown_tags_survive() -> None:
    cls: Any = messages.CreateTopicsResponse
    result = cls.CreatableTopicResult(name="t", topic_config_error_code=29,
                                      unknown_tags={7: b"\x01\x02"})
    data = encode_struct(cls(topics=[result]), 5)
    back = decode_struct(cls, 5, data)
    assert back.topics[0].topic_config_error_code == 29
    assert back.topics[0].unknown_tags == {7: b"\x01\x02"}
    # The tagged field is not on the wire when left at its default.
    plain = encode_struct(cls(topics=[cls.CreatableTopicResult(name="t")]), 5)
    assert len(plain) < len(data)


def test_add_partitions_to_txn_shares_the_topic_struct() -> None:
    cls: Any = messages.AddPartitionsToTxnRequest
    txn_cls = cls.AddPartitionsToTxnTransaction
    assert txn_cls.AddPartitionsToTxnTopic is cls.AddPartitionsToTxnTopic
    topic = cls.AddPartitionsToTxnTopic(name="t", partitions=[0, 1])
    v3 = cls(v3_and_below_transactional_id="tx", v3_and_below_producer_id=7,
             v3_and_below_producer_epoch=1, v3_and_below_topics=[topic])
    assert decode_struct(cls, 3, encode_struct(v3, 3)) == v3
    with pytest.raises(UnsupportedVersionError):
        encode_struct(v3, 4)


def test_telemetry_bytes_follow_kafkas_schema() -> None:
    """GetTelemetrySubscriptions / PushTelemetry v0 (flexible) against byte layouts written
    from Kafka's GetTelemetrySubscriptions*.json and PushTelemetry*.json."""
    iid = uuid.UUID(int=0x0102030405060708090A0B0C0D0E0F10)
    tag0 = b"\x00"  # no tagged fields
    req = messages.GetTelemetrySubscriptionsRequest(client_instance_id=iid)
    assert encode_struct(req, 0) == iid.bytes + tag0
    resp = messages.GetTelemetrySubscriptionsResponse(
        throttle_time_ms=1, error_code=0, client_instance_id=iid, subscription_id=7,
        accepted_compression_types=[0, 4], push_interval_ms=300_000,
        telemetry_max_bytes=1_048_576, delta_temporality=True, requested_metrics=["org."])
    assert encode_struct(resp, 0) == (
        b"\x00\x00\x00\x01" + b"\x00\x00" + iid.bytes + b"\x00\x00\x00\x07"
        + b"\x03\x00\x04"                      # compact array: length + 1, then int8s
        + (300_000).to_bytes(4, "big") + (1_048_576).to_bytes(4, "big") + b"\x01"
        + b"\x02" + b"\x05org." + tag0)         # compact array of compact strings
    push = messages.PushTelemetryRequest(client_instance_id=iid, subscription_id=-1,
                                         terminating=True, compression_type=4,
                                         metrics=b"abc")
    assert encode_struct(push, 0) == (iid.bytes + b"\xff\xff\xff\xff" + b"\x01\x04"
                                      + b"\x04abc" + tag0)
    assert encode_struct(messages.PushTelemetryResponse(throttle_time_ms=0, error_code=117),
                         0) == b"\x00\x00\x00\x00\x00\x75" + tag0


def test_partition_admin_defaults_and_version_rules() -> None:
    assert messages.ElectLeadersRequest().timeout_ms == 60000
    assert messages.ElectLeadersRequest().topic_partitions == []
    assert messages.AlterPartitionReassignmentsRequest().allow_replication_factor_change is True
    assert messages.ListPartitionReassignmentsRequest().topics is None
    dtp = messages.DescribeTopicPartitionsRequest()
    assert (dtp.response_partition_limit, dtp.cursor) == (2000, None)
    assert messages.DescribeTopicPartitionsResponse().next_cursor is None
    uf: Any = messages.UpdateFeaturesRequest
    assert uf.FeatureUpdateKey().upgrade_type == 1
    # ElectionType is not in v0 (always preferred there): a non-default value cannot be sent.
    with pytest.raises(UnsupportedVersionError, match="election_type"):
        encode_struct(messages.ElectLeadersRequest(election_type=1), 0)
    # UpdateFeatures v2 answers with the top-level error only; results are ignorable.
    resp: Any = messages.UpdateFeaturesResponse
    r = resp(results=[resp.UpdatableFeatureResult(feature="f", error_code=0)])
    assert encode_struct(r, 2) == encode_struct(resp(), 2)


def test_describe_topic_partitions_cursor_bytes() -> None:
    """Hand-checked v0 request bytes: compact arrays/strings (length + 1), a nullable struct
    as a presence byte (-1 absent, 1 present) and the empty tagged-field sections."""
    cls: Any = messages.DescribeTopicPartitionsRequest
    req = cls(topics=[cls.TopicRequest(name="ab")], response_partition_limit=5,
              cursor=cls.Cursor(topic_name="ab", partition_index=3))
    assert encode_struct(req, 0) == (
        b"\x02" + b"\x03ab" + b"\x00"        # topics: 1 entry, name "ab", no tags
        + b"\x00\x00\x00\x05"                # response_partition_limit
        + b"\x01" + b"\x03ab" + b"\x00\x00\x00\x03" + b"\x00"  # cursor present
        + b"\x00"                            # no top-level tags
    )
    assert encode_struct(cls(topics=[]), 0) == b"\x01" + b"\x00\x00\x07\xd0" + b"\xff" + b"\x00"
