"""The consumer's one-pass decoding (``RecordBatch.records_as`` / ``decode_records_as``)
against the plain record decoder, and the tuple-based :class:`ConsumerRecord`."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kontrakt import ConsumerRecord, TimestampType
from kontrakt.clients.consumer._fetcher import parse_partition
from kontrakt.errors import CorruptRecordError
from kontrakt.protocol.records import RecordBatch, RecordBatchBuilder, iter_batches

# Sizes straddle the one/two/three-byte varint boundaries (64, 8192 for zig-zag values).
_SIZES = st.sampled_from([0, 1, 63, 64, 100, 8191, 8192, 9000])
_payload = st.one_of(st.none(), _SIZES.map(lambda n: bytes(i % 251 for i in range(n))))
_header = st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=70)))
_record = st.tuples(
    st.sampled_from([0, 1, 63, 64, 8191, 8192, 10**6, 10**12]),  # timestamp delta
    _payload, _payload, st.lists(_header, max_size=3),
    st.sampled_from([1, 1, 1, 63, 64, 8192, 70000]))  # gap to the next offset delta


@settings(max_examples=60, deadline=None)
@given(records=st.lists(_record, min_size=1, max_size=6),
       codec=st.sampled_from(["none", "gzip", "zstd"]),
       log_append=st.booleans(), base_offset=st.sampled_from([0, 5, 2**40]),
       epoch=st.sampled_from([-1, 0, 7]))
def test_records_as_matches_plain_decoding(records: list[tuple[Any, ...]], codec: str,
                                           log_append: bool, base_offset: int,
                                           epoch: int) -> None:
    b = RecordBatchBuilder(compression=codec, log_append_time=log_append,
                           partition_leader_epoch=epoch, max_batch_size=10**7)
    delta = 0
    base_ts = 1_700_000_000_000
    for ts_delta, key, value, headers, gap in records:
        b.append(base_ts + ts_delta, key, value, headers, offset_delta=delta)
        delta += gap
    batch = RecordBatch.from_bytes(b.build(base_offset=base_offset))
    plain = batch.records()
    ts_type = TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME
    fast = batch.records_as(ConsumerRecord, "t", 3, ts_type)
    assert [type(r) for r in fast] == [ConsumerRecord] * len(plain)
    assert fast == [ConsumerRecord("t", 3, r.offset, r.timestamp, ts_type, r.key, r.value,
                                   r.headers, epoch) for r in plain]


def test_records_as_reports_malformed_records_with_their_location() -> None:
    b = RecordBatchBuilder()
    b.append(1, b"k", b"v")
    blob = bytearray(b.build(base_offset=9))
    blob[61] += 2  # the record's length varint no longer matches its fields
    (batch,) = list(iter_batches(bytes(blob), check_crcs=False, topic="t", partition=1))
    assert isinstance(batch, RecordBatch)
    with pytest.raises(CorruptRecordError) as info:
        batch.records_as(ConsumerRecord, "t", 1, TimestampType.CREATE_TIME)
    assert (info.value.topic, info.value.partition, info.value.offset) == ("t", 1, 9)


def test_parse_partition_skips_records_before_the_fetch_offset() -> None:
    b = RecordBatchBuilder(partition_leader_epoch=4)
    for i in range(10):
        b.append(1000 + i, None, str(i).encode())
    data = b.build(base_offset=100)
    recs, next_offset, epoch = parse_partition("t", 0, data, 104, read_committed=False,
                                               aborted=None, check_crcs=True)
    assert [r.offset for r in recs] == list(range(104, 110))
    assert [r.value for r in recs] == [str(i).encode() for i in range(4, 10)]
    assert (next_offset, epoch) == (110, 4)
    assert all(r.leader_epoch == 4 and r.topic_partition.partition == 0 for r in recs)


def test_consumer_record_is_an_immutable_value() -> None:
    r: ConsumerRecord[bytes, str] = ConsumerRecord(
        "t", 1, 5, 100, TimestampType.CREATE_TIME, b"k", "v", leader_epoch=2)
    assert (r.topic, r.partition, r.offset, r.timestamp, r.key, r.value, r.headers,
            r.leader_epoch) == ("t", 1, 5, 100, b"k", "v", [], 2)
    assert not hasattr(r, "__dict__")
    with pytest.raises(AttributeError):
        r.value = "w"  # type: ignore[misc]
    assert ConsumerRecord("t", 1, 5, 100, TimestampType.CREATE_TIME, b"k", "v") != r
    assert r.replace(leader_epoch=-1) == ConsumerRecord(
        "t", 1, 5, 100, TimestampType.CREATE_TIME, b"k", "v")
    assert r != tuple(r) and tuple(r) != r  # a record never equals a plain tuple
    assert pickle.loads(pickle.dumps(r)) == r == copy.deepcopy(r)
    assert repr(r).startswith("ConsumerRecord(topic='t', partition=1, offset=5,")
    with pytest.raises(TypeError):
        r.replace(nope=1)
    match r:
        case ConsumerRecord(topic=t, offset=o):
            assert (t, o) == ("t", 5)
    # Generic aliases build plain records.
    typed = ConsumerRecord[bytes, str]("t", 0, 0, 0, TimestampType.CREATE_TIME, b"", "")
    assert type(typed) is ConsumerRecord and typed.headers == []
