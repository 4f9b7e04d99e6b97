"""Legacy message sets (magic 0 and 1)."""

from __future__ import annotations

import struct
import zlib

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kontrakt.errors import CorruptRecordError
from kontrakt.protocol.records import (
    CompressionType,
    LegacyBatch,
    LegacyMessageSetBuilder,
    RecordBatchBuilder,
    TimestampType,
    compress,
    decompress,
    iter_batches,
    read_records,
)
from kontrakt.protocol.records._compression import xxh32

optional_bytes = st.one_of(st.none(), st.binary(max_size=200))
LEGACY_CODECS = [CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY,
                 CompressionType.LZ4]


@settings(max_examples=50, deadline=None)
@given(magic=st.sampled_from([0, 1]), codec=st.sampled_from(LEGACY_CODECS),
       records=st.lists(st.tuples(st.integers(0, 2**45), optional_bytes, optional_bytes),
                        min_size=1, max_size=15),
       base=st.integers(0, 2**40))
def test_round_trip(magic: int, codec: CompressionType,
                    records: list[tuple[int, bytes | None, bytes | None]], base: int) -> None:
    builder = LegacyMessageSetBuilder(magic, compression=codec)
    for ts, key, value in records:
        builder.append(ts, key, value)
    decoded = read_records(builder.build(base))
    assert [(r.offset, r.key, r.value, r.headers) for r in decoded] == [
        (base + i, k, v, []) for i, (_, k, v) in enumerate(records)]
    if magic == 0:
        assert {(r.timestamp, r.timestamp_type) for r in decoded} == {(-1, -1)}
    else:
        assert [r.timestamp for r in decoded] == [ts for ts, _, _ in records]
        assert {r.timestamp_type for r in decoded} == {TimestampType.CREATE_TIME}


def test_v1_wrapper_uses_relative_inner_offsets() -> None:
    builder = LegacyMessageSetBuilder(1, compression="gzip")
    for i in range(3):
        builder.append(100 + i, None, b"v%d" % i)
    blob = builder.build(500)
    (wrapper,) = list(iter_batches(blob))
    assert isinstance(wrapper, LegacyBatch)
    assert wrapper.offset == wrapper.last_offset == 502
    assert wrapper.compression == CompressionType.GZIP and wrapper.timestamp == 102
    inner = zlib.decompress(wrapper.value or b"", 31)
    offsets = []
    pos = 0
    while pos < len(inner):
        offset, size = struct.unpack_from(">qi", inner, pos)
        offsets.append(offset)
        pos += 12 + size
    assert offsets == [0, 1, 2]
    assert [r.offset for r in wrapper.records()] == [500, 501, 502]


def test_v1_log_append_time_wrapper_overrides_inner_timestamps() -> None:
    builder = LegacyMessageSetBuilder(1, compression="snappy", log_append_time=True)
    builder.append(1, None, b"a")
    builder.append(7, None, b"b")
    records = read_records(builder.build(0))
    assert [(r.timestamp, r.timestamp_type) for r in records] == [(7, 1), (7, 1)]


def test_uncompressed_message_is_one_record_batch() -> None:
    builder = LegacyMessageSetBuilder(1)
    builder.append(5, b"k", b"v")
    builder.append(6, b"k2", b"v2")
    batches = list(iter_batches(builder.build(9)))
    assert [b.base_offset for b in batches] == [9, 10]
    assert all(not b.is_control and not b.is_transactional and b.producer_id == -1
               for b in batches)
    assert batches[0].next_offset == 10 and batches[0].magic == 1


def test_mixed_legacy_and_v2_in_one_record_set() -> None:
    old = LegacyMessageSetBuilder(1)
    old.append(1, None, b"old")
    new = RecordBatchBuilder(base_offset=1)
    new.append(2, None, b"new")
    records = read_records(old.build(0) + new.build())
    assert [(r.offset, r.value) for r in records] == [(0, b"old"), (1, b"new")]


def test_crc_mismatch_names_location() -> None:
    builder = LegacyMessageSetBuilder(0)
    builder.append(None, b"k", b"value")
    blob = bytearray(builder.build(77))
    blob[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC") as info:
        list(iter_batches(bytes(blob), topic="t", partition=1))
    assert (info.value.topic, info.value.partition, info.value.offset) == ("t", 1, 77)


def _message(magic: int, offset: int, attributes: int, value: bytes) -> bytes:
    body = bytes([magic, attributes]) + (struct.pack(">q", 0) if magic else b"")
    body += b"\xff\xff\xff\xff" + struct.pack(">i", len(value)) + value
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


def test_nested_compression_is_rejected() -> None:
    inner = _message(1, 0, CompressionType.GZIP, compress(CompressionType.GZIP, b"x"))
    wrapper = _message(1, 0, CompressionType.GZIP, compress(CompressionType.GZIP, inner))
    (batch,) = list(iter_batches(wrapper))
    with pytest.raises(CorruptRecordError, match="nested"):
        batch.records()


def test_truncated_inner_message_set() -> None:
    inner = _message(1, 0, 0, b"hello")[:-3]
    wrapper = _message(1, 0, CompressionType.GZIP, compress(CompressionType.GZIP, inner))
    (batch,) = list(iter_batches(wrapper))
    with pytest.raises(CorruptRecordError):
        batch.records()


def test_bad_value_length() -> None:
    blob = bytearray(_message(0, 0, 0, b"abc"))
    struct.pack_into(">i", blob, 22, 5000)
    struct.pack_into(">I", blob, 12, zlib.crc32(bytes(blob[16:])))
    with pytest.raises(CorruptRecordError, match="length"):
        list(iter_batches(bytes(blob)))


def test_builder_rejects_magic_2() -> None:
    with pytest.raises(ValueError):
        LegacyMessageSetBuilder(2)


def test_magic0_lz4_uses_the_old_header_checksum_and_reads_both() -> None:
    builder = LegacyMessageSetBuilder(0, compression="lz4")
    builder.append(None, b"k", b"value" * 30)
    blob = builder.build(3)
    (wrapper,) = list(iter_batches(blob))
    assert isinstance(wrapper, LegacyBatch)
    frame = wrapper.value or b""
    assert frame[:4] == b"\x04\x22\x4d\x18" and not frame[4] & 0x08  # no content size
    # Kafka 0.8/0.9 hashed the frame magic too (KIP-57).
    assert frame[6] == (xxh32(frame[0:6]) >> 8) & 0xFF != (xxh32(frame[4:6]) >> 8) & 0xFF
    assert [(r.offset, r.value) for r in wrapper.records()] == [(3, b"value" * 30)]
    # A magic 0 wrapper holding a correct (modern) frame is read as well.
    payload = b"modern frame " * 20
    assert decompress(CompressionType.LZ4, compress(CompressionType.LZ4, payload),
                      lz4_legacy_header=True) == payload
    # Magic 1 keeps the standard checksum.
    v1 = LegacyMessageSetBuilder(1, compression="lz4")
    v1.append(1, None, b"x" * 50)
    (w1,) = list(iter_batches(v1.build()))
    assert isinstance(w1, LegacyBatch)
    f1 = w1.value or b""
    assert f1[6] == (xxh32(f1[4:6]) >> 8) & 0xFF


def test_xxh32_known_vectors_and_lz4_content_checksums() -> None:
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"a") == 0x550D7456
    assert xxh32(b"abc") == 0x32D153FF
    for size in (15, 16, 17, 100, 1000):
        data = bytes((i * 7 + 3) & 0xFF for i in range(size))
        frame = bytes(cramjam.lz4.compress(data))  # frame ends with xxh32(content), LE
        assert xxh32(data) == int.from_bytes(frame[-4:], "little")
