"""v2 record batches: round trips, builder options, record sets, control batches."""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kontrakt.protocol.records import (
    BATCH_HEADER_SIZE,
    CompressionType,
    ControlRecordType,
    Record,
    RecordBatch,
    RecordBatchBuilder,
    RecordSetReader,
    TimestampType,
    build_control_batch,
    iter_batches,
    parse_control_record,
    read_records,
)

CODECS = list(CompressionType)

optional_bytes = st.one_of(st.none(), st.binary(max_size=300))
headers_st = st.lists(st.tuples(st.text(max_size=12), optional_bytes), max_size=4)
record_st = st.tuples(
    st.integers(min_value=0, max_value=2**45),  # timestamp
    optional_bytes,  # key
    optional_bytes,  # value
    headers_st,
)


def build(records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
          **kwargs: object) -> bytes:
    builder = RecordBatchBuilder(**kwargs)  # type: ignore[arg-type]
    for ts, key, value, headers in records:
        assert builder.append(ts, key, value, headers) is not None
    return builder.build()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=st.lists(record_st, min_size=1, max_size=25),
       codec=st.sampled_from(CODECS),
       base_offset=st.integers(min_value=0, max_value=2**62))
def test_round_trip_every_codec(records: list[tuple[int, bytes | None, bytes | None,
                                                    list[tuple[str, bytes | None]]]],
                                codec: CompressionType, base_offset: int) -> None:
    blob = build(records, compression=codec, base_offset=base_offset)
    batch = RecordBatch.from_bytes(blob)
    assert batch.compression == codec
    assert batch.records_count == len(records)
    assert batch.base_offset == base_offset
    assert batch.last_offset_delta == len(records) - 1
    assert batch.base_timestamp == records[0][0]
    assert batch.max_timestamp == max(r[0] for r in records)
    decoded = batch.records()
    assert decoded == [
        Record(base_offset + i, ts, 0, key, value, list(headers))
        for i, (ts, key, value, headers) in enumerate(records)
    ]


@settings(max_examples=30, deadline=None)
@given(deltas=st.lists(st.integers(min_value=1, max_value=2**31 - 1), min_size=1, max_size=20),
       timestamps=st.lists(st.integers(min_value=-(2**40), max_value=2**50), min_size=20,
                           max_size=20))
def test_large_and_negative_deltas(deltas: list[int], timestamps: list[int]) -> None:
    """Offset gaps (compacted batches) and timestamps before the first need wide varints."""
    builder = RecordBatchBuilder()
    offset = -1
    expected: list[tuple[int, int]] = []
    for i, step in enumerate(deltas):
        offset = min(offset + step, 2**31 - 1)
        if expected and offset <= expected[-1][0]:
            break
        assert builder.append(timestamps[i], b"k", b"v", offset_delta=offset) == offset
        expected.append((offset, timestamps[i]))
    records = RecordBatch.from_bytes(builder.build()).records()
    assert [(r.offset, r.timestamp) for r in records] == expected


def test_batch_attributes_and_producer_state() -> None:
    builder = RecordBatchBuilder(compression="gzip", producer_id=4242, producer_epoch=7,
                                 base_sequence=100, is_transactional=True)
    builder.append(1000, b"a", b"b")
    builder.append(2000, b"c", b"d")
    blob = builder.build(base_offset=50, partition_leader_epoch=9, base_sequence=200)
    batch = RecordBatch.from_bytes(blob)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (4242, 7, 200)
    assert batch.is_transactional and not batch.is_control
    assert batch.partition_leader_epoch == batch.leader_epoch == 9
    assert batch.compression == CompressionType.GZIP
    assert batch.timestamp_type == TimestampType.CREATE_TIME
    assert (batch.last_offset, batch.next_offset, batch.last_sequence) == (51, 52, 201)
    assert batch.size_in_bytes == len(blob) == batch.batch_length + 12
    assert batch.raw() == blob
    assert [r.offset for r in batch.records()] == [50, 51]


def test_defaults_match_java_producer_header() -> None:
    """A producer batch: leader epoch -1, no producer id, magic 2, attributes 0."""
    builder = RecordBatchBuilder()
    builder.append(5, None, b"x")
    blob = builder.build()
    (base, _, epoch, magic, crc, attrs, last_delta, first_ts, max_ts, pid, pepoch, seq,
     count) = struct.unpack_from(">qiibIhiqqqhii", blob)
    assert (base, epoch, magic, attrs, last_delta, first_ts, max_ts) == (0, -1, 2, 0, 0, 5, 5)
    assert (pid, pepoch, seq, count) == (-1, -1, -1, 1)
    assert crc == crc32c.crc32c(blob[21:])


def test_log_append_time_gives_every_record_the_max_timestamp() -> None:
    builder = RecordBatchBuilder(log_append_time=True)
    builder.append(10, None, b"a")
    builder.append(30, None, b"b")
    batch = RecordBatch.from_bytes(builder.build())
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [(r.timestamp, r.timestamp_type) for r in batch.records()] == [(30, 1), (30, 1)]


def test_max_batch_size_refuses_records_but_always_takes_the_first() -> None:
    builder = RecordBatchBuilder(max_batch_size=BATCH_HEADER_SIZE + 250)
    assert builder.append(1, None, b"x" * 400) == 0  # first record: always accepted
    assert builder.append(1, None, b"y") is None
    assert builder.record_count == 1
    small = RecordBatchBuilder(max_batch_size=BATCH_HEADER_SIZE + 250)
    accepted = 0
    while small.append(1, None, b"z" * 40) is not None:
        accepted += 1
        assert accepted < 100
    assert small.size_in_bytes <= BATCH_HEADER_SIZE + 250
    assert not small.has_room_for(None, b"z" * 40)
    blob = small.build()
    assert len(blob) == small.size_in_bytes
    assert len(RecordBatch.from_bytes(blob).records()) == accepted


def test_size_estimate_is_an_upper_bound() -> None:
    builder = RecordBatchBuilder()
    before = builder.size_in_bytes
    headers = [("trace", b"1234"), ("x", None)]
    builder.append(123, b"key", b"v" * 100, headers)
    assert builder.size_in_bytes - before <= RecordBatchBuilder.estimate_size(b"key",
                                                                              b"v" * 100,
                                                                              headers)


def test_empty_builder_builds_valid_empty_batch() -> None:
    batch = RecordBatch.from_bytes(RecordBatchBuilder().build())
    assert batch.records_count == 0 and batch.records() == []


def test_append_rejects_non_bytes_and_decreasing_offsets() -> None:
    builder = RecordBatchBuilder()
    with pytest.raises(TypeError):
        builder.append(1, "text", b"v")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        builder.append(1, None, b"v", [("h", "not bytes")])  # type: ignore[list-item]
    builder.append(1, None, b"v", offset_delta=5)
    with pytest.raises(ValueError):
        builder.append(1, None, b"v", offset_delta=5)
    assert builder.record_count == 1


def test_bytes_like_inputs_are_accepted() -> None:
    builder = RecordBatchBuilder()
    builder.append(1, bytearray(b"k"), memoryview(b"value"))
    (record,) = RecordBatch.from_bytes(builder.build()).records()
    assert (record.key, record.value) == (b"k", b"value")


def test_control_batch_round_trip() -> None:
    blob = build_control_batch(ControlRecordType.ABORT, producer_id=77, producer_epoch=3,
                               base_offset=900, coordinator_epoch=12, timestamp=5000)
    (batch,) = list(iter_batches(blob))
    assert batch.is_control and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch) == (77, 3)
    (record,) = batch.records()
    marker = parse_control_record(record)
    assert (marker.offset, marker.version, marker.type, marker.coordinator_epoch) == (
        900, 0, ControlRecordType.ABORT, 12)
    assert marker.is_abort and not marker.is_commit
    commit = parse_control_record(RecordBatch.from_bytes(build_control_batch(
        ControlRecordType.COMMIT, producer_id=1, producer_epoch=0)).records()[0])
    assert commit.is_commit
    # read_records skips control batches unless asked
    assert read_records(blob) == []
    assert len(read_records(blob, include_control=True)) == 1


def test_record_set_with_several_batches_and_truncated_tail() -> None:
    first = build([(1, b"a", b"1", [])], base_offset=0)
    second = build([(2, b"b", b"2", []), (3, b"c", b"3", [])], compression="lz4",
                   base_offset=1)
    third = build([(4, b"d", b"4", [])], base_offset=3)
    for cut in (1, 11, 12, 20, 60, len(third) - 1):
        blob = first + second + third[:cut]
        reader = RecordSetReader(blob)
        batches = list(reader)
        assert [b.base_offset for b in batches] == [0, 1]
        assert reader.truncated_bytes == cut
    full = read_records(first + second + third)
    assert [(r.offset, r.value) for r in full] == [(0, b"1"), (1, b"2"), (2, b"3"), (3, b"4")]


def test_check_crcs_off_skips_validation() -> None:
    blob = bytearray(build([(1, None, b"value", [])]))
    blob[-2] ^= 0xFF  # corrupt a byte inside the value
    (batch,) = list(iter_batches(bytes(blob), check_crcs=False))
    assert batch.records()[0].value != b"value"
