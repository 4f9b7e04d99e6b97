"""Byte-level interop of record batches with kafka-python and aiokafka (no broker).

aiokafka compresses with cramjam (as kontrakt does); kafka-python uses the reference
libraries (``lz4`` = liblz4 frames, ``zstandard`` = libzstd; both in the dev extra), so it
checks kontrakt's codec framing against independent implementations. kafka-python's snappy
needs python-snappy, which is not installed: snappy is covered through aiokafka's xerial and
raw framings.
"""

from __future__ import annotations

import warnings
from typing import Any

import aiokafka.record.default_records as aio_default
import aiokafka.record.legacy_records as aio_legacy
import pytest
from aiokafka.record.memory_records import MemoryRecords
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kontrakt.protocol.records import (
    CompressionType,
    ControlRecordType,
    LegacyMessageSetBuilder,
    RecordBatch,
    RecordBatchBuilder,
    build_control_batch,
    compress,
    decompress,
    iter_batches,
    read_records,
)

with warnings.catch_warnings():
    # kafka-python's package import loads its JSON schemas with a deprecated importlib API.
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.codec as kp_codec
    import kafka.record.default_records as kp_default
    import kafka.record.legacy_records as kp_legacy

pytestmark = pytest.mark.interop

ALL = list(CompressionType)
KAFKA_PYTHON = [CompressionType.NONE, CompressionType.GZIP]
if kp_codec.has_lz4():
    KAFKA_PYTHON.append(CompressionType.LZ4)
if kp_codec.has_zstd():
    KAFKA_PYTHON.append(CompressionType.ZSTD)
LEGACY_KAFKA_PYTHON = [c for c in KAFKA_PYTHON if c != CompressionType.ZSTD]

Rec = tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]

optional_bytes = st.one_of(st.none(), st.binary(max_size=200))
records_st = st.lists(
    st.tuples(st.integers(0, 2**43), optional_bytes, optional_bytes,
              st.lists(st.tuples(st.text(max_size=8), optional_bytes), max_size=3)),
    min_size=1, max_size=12)


def kontrakt_batch(records: list[Rec], codec: CompressionType, **kwargs: Any) -> bytes:
    builder = RecordBatchBuilder(compression=codec, **kwargs)
    for ts, key, value, headers in records:
        builder.append(ts, key, value, headers)
    return builder.build()


def peer_batch(module: Any, records: list[Rec], codec: CompressionType,
               producer: tuple[int, int, int] = (-1, -1, -1), transactional: int = 0) -> bytes:
    builder = module.DefaultRecordBatchBuilder(2, int(codec), transactional, *producer, 1 << 24)
    for i, (ts, key, value, headers) in enumerate(records):
        builder.append(i, ts, key, value, headers)
    return bytes(builder.build())


def as_tuples(records: Any) -> list[tuple[Any, ...]]:
    return [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, list(r.headers))
            for r in records]


def expected(records: list[Rec], base: int = 0) -> list[tuple[Any, ...]]:
    return [(base + i, ts, 0, k, v, list(h)) for i, (ts, k, v, h) in enumerate(records)]


# --- kontrakt writes, peers read ------------------------------------------------------------

@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=records_st, codec=st.sampled_from(ALL))
def test_aiokafka_reads_kontrakt(records: list[Rec], codec: CompressionType) -> None:
    blob = kontrakt_batch(records, codec, base_offset=10)
    batch = MemoryRecords(blob).next_batch()
    assert batch is not None and batch.validate_crc()
    assert batch.compression_type == codec
    assert as_tuples(batch) == expected(records, base=10)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=records_st, codec=st.sampled_from(KAFKA_PYTHON))
def test_kafka_python_reads_kontrakt(records: list[Rec], codec: CompressionType) -> None:
    blob = kontrakt_batch(records, codec)
    batch = kp_default.DefaultRecordBatch(blob)
    assert batch.validate_crc()
    assert as_tuples(batch) == expected(records)


@pytest.mark.parametrize("codec", ALL)
def test_aiokafka_reads_producer_state_and_snappy_framings(codec: CompressionType) -> None:
    records: list[Rec] = [(1000, b"k", b"v" * 50, [("h", b"1")]), (1001, None, None, [])]
    blob = kontrakt_batch(records, codec, producer_id=99, producer_epoch=4, base_sequence=17,
                          is_transactional=True)
    batch = aio_default.DefaultRecordBatch(blob)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (99, 4, 17)
    assert batch.is_transactional and not batch.is_control_batch
    assert as_tuples(batch) == expected(records)
    if codec == CompressionType.SNAPPY:
        raw = kontrakt_batch(records, codec, snappy_framing="raw")
        assert as_tuples(aio_default.DefaultRecordBatch(raw)) == expected(records)


def test_kafka_python_reads_control_batch() -> None:
    blob = build_control_batch(ControlRecordType.COMMIT, producer_id=5, producer_epoch=1,
                               base_offset=42, coordinator_epoch=3, timestamp=77)
    batch = kp_default.DefaultRecordBatch(blob)
    assert batch.is_control_batch and batch.is_transactional
    (record,) = list(batch)
    assert record.commit and not record.abort and record.offset == 42


# --- peers write, kontrakt reads ------------------------------------------------------------

@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=records_st, codec=st.sampled_from(ALL))
def test_kontrakt_reads_aiokafka(records: list[Rec], codec: CompressionType) -> None:
    blob = peer_batch(aio_default, records, codec, producer=(7, 2, 30), transactional=1)
    batch = RecordBatch.from_bytes(blob)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 2, 30)
    assert batch.is_transactional and batch.compression == codec
    assert as_tuples(batch.records()) == expected(records)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=records_st, codec=st.sampled_from(KAFKA_PYTHON))
def test_kontrakt_reads_kafka_python(records: list[Rec], codec: CompressionType) -> None:
    blob = peer_batch(kp_default, records, codec)
    assert as_tuples(read_records(blob)) == expected(records)


def test_kontrakt_reads_aiokafka_snappy_xerial_and_raw() -> None:
    from aiokafka import codec as aio_codec

    payload = b"".join(b"line %05d\n" % i for i in range(20000))
    for framed in (aio_codec.snappy_encode(payload, xerial_compatible=True),
                   aio_codec.snappy_encode(payload, xerial_compatible=False)):
        assert decompress(CompressionType.SNAPPY, framed) == payload
    assert decompress(CompressionType.LZ4, aio_codec.lz4_encode(payload)) == payload
    assert aio_codec.snappy_decode(compress(CompressionType.SNAPPY, payload)) == payload
    assert aio_codec.lz4_decode(compress(CompressionType.LZ4, payload)) == payload


# --- identical bytes ------------------------------------------------------------------------

@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=records_st)
def test_uncompressed_bytes_equal_kafka_python(records: list[Rec]) -> None:
    ours = kontrakt_batch(records, CompressionType.NONE, partition_leader_epoch=0)
    # kafka-python writes 0 as the leader epoch where the Java client writes -1.
    assert ours == peer_batch(kp_default, records, CompressionType.NONE)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=records_st)
def test_uncompressed_bytes_equal_aiokafka(records: list[Rec]) -> None:
    # aiokafka writes -1 as the leader epoch, like the Java client and kontrakt's default.
    ours = kontrakt_batch(records, CompressionType.NONE, producer_id=3, producer_epoch=1,
                          base_sequence=8)
    assert ours == peer_batch(aio_default, records, CompressionType.NONE, producer=(3, 1, 8))


# --- legacy message sets --------------------------------------------------------------------

LegacyRec = tuple[int, bytes | None, bytes | None]
legacy_st = st.lists(st.tuples(st.integers(0, 2**43), optional_bytes, optional_bytes),
                     min_size=1, max_size=10)


def peer_legacy(module: Any, magic: int, records: list[LegacyRec],
                codec: CompressionType) -> bytes:
    builder = module.LegacyRecordBatchBuilder(magic, int(codec), 1 << 24)
    for i, (ts, key, value) in enumerate(records):
        builder.append(i, ts if magic else None, key, value)
    return bytes(builder.build())


@settings(max_examples=30, deadline=None)
@given(records=legacy_st, magic=st.sampled_from([0, 1]),
       codec=st.sampled_from(LEGACY_KAFKA_PYTHON))
def test_kontrakt_reads_kafka_python_legacy(records: list[LegacyRec], magic: int,
                                           codec: CompressionType) -> None:
    # kafka-python needs the xxhash package (not installed) for magic 0 lz4; kontrakt's
    # magic 0 lz4 framing is checked in tests/unit/test_records_legacy.py.
    assume(not (magic == 0 and codec == CompressionType.LZ4))
    decoded = read_records(peer_legacy(kp_legacy, magic, records, codec))
    assert [(r.offset, r.key, r.value) for r in decoded] == [
        (i, k, v) for i, (_, k, v) in enumerate(records)]
    if magic:
        assert [r.timestamp for r in decoded] == [ts for ts, _, _ in records]


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.SNAPPY,
                                   CompressionType.LZ4])
@pytest.mark.parametrize("magic", [0, 1])
def test_kontrakt_reads_aiokafka_legacy(magic: int, codec: CompressionType) -> None:
    if magic == 0 and codec == CompressionType.LZ4:
        pytest.skip("aiokafka refuses to write lz4 with magic 0 (Kafka 0.8/0.9 framing)")
    records: list[LegacyRec] = [(10, b"a", b"1"), (11, None, b"2"), (12, b"c", None)]
    decoded = read_records(peer_legacy(aio_legacy, magic, records, codec))
    assert [(r.offset, r.key, r.value) for r in decoded] == [
        (i, k, v) for i, (_, k, v) in enumerate(records)]


@settings(max_examples=30, deadline=None)
@given(records=legacy_st, magic=st.sampled_from([0, 1]),
       codec=st.sampled_from(LEGACY_KAFKA_PYTHON))
def test_kafka_python_reads_kontrakt_legacy(records: list[LegacyRec], magic: int,
                                           codec: CompressionType) -> None:
    # kafka-python needs the xxhash package (not installed) for magic 0 lz4; kontrakt's
    # magic 0 lz4 framing is checked in tests/unit/test_records_legacy.py.
    assume(not (magic == 0 and codec == CompressionType.LZ4))
    builder = LegacyMessageSetBuilder(magic, compression=codec)
    for ts, key, value in records:
        builder.append(ts, key, value)
    blob = builder.build(0)
    if codec == CompressionType.NONE:
        # identical bytes for identical inputs
        assert blob == peer_legacy(kp_legacy, magic, records, codec)
    decoded: list[tuple[int, bytes | None, bytes | None]] = []
    for batch in iter_batches(blob):  # walk top-level messages; peers decode each one
        peer = kp_legacy.LegacyRecordBatch(bytearray(batch.raw()), magic)
        assert peer.validate_crc()
        decoded.extend((r.offset, r.key, r.value) for r in peer)
    assert decoded == [(i, k, v) for i, (_, k, v) in enumerate(records)]


def test_kafka_python_has_reference_lz4_and_zstd() -> None:
    """Guards the codec coverage above: the dev extra installs lz4 and zstandard."""
    assert CompressionType.LZ4 in KAFKA_PYTHON and CompressionType.ZSTD in KAFKA_PYTHON
