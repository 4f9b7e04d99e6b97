"""Compression codecs: round trips, framings, levels."""

from __future__ import annotations

import gzip
import struct

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kontrakt.errors import CorruptRecordError, UnsupportedCodecError
from kontrakt.protocol.records import (
    CompressionType,
    RecordBatch,
    RecordBatchBuilder,
    compress,
    decompress,
)

PAYLOAD = b"".join(b"record %06d says hello; " % i for i in range(5000))  # ~130 KiB


@settings(max_examples=40, deadline=None)
@given(data=st.binary(max_size=5000), codec=st.sampled_from(list(CompressionType)))
def test_round_trip(data: bytes, codec: CompressionType) -> None:
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", list(CompressionType))
def test_large_payload_round_trip_and_shrinks(codec: CompressionType) -> None:
    packed = compress(codec, PAYLOAD)
    assert decompress(codec, packed) == PAYLOAD
    if codec:
        assert len(packed) < len(PAYLOAD) // 3


def test_snappy_xerial_framing_matches_java_layout() -> None:
    packed = compress(CompressionType.SNAPPY, PAYLOAD)
    assert packed[:8] == b"\x82SNAPPY\x00"
    assert struct.unpack_from(">ii", packed, 8) == (1, 1)
    # Blocks: int32 length + raw snappy of at most 32 KiB of input each.
    pos, pieces = 16, []
    while pos < len(packed):
        (n,) = struct.unpack_from(">i", packed, pos)
        pieces.append(bytes(cramjam.snappy.decompress_raw(packed[pos + 4:pos + 4 + n])))
        pos += 4 + n
    assert pos == len(packed)
    assert [len(p) for p in pieces[:-1]] == [32 * 1024] * (len(pieces) - 1)
    assert b"".join(pieces) == PAYLOAD


def test_snappy_raw_is_read_and_can_be_written() -> None:
    raw = bytes(cramjam.snappy.compress_raw(PAYLOAD))
    assert decompress(CompressionType.SNAPPY, raw) == PAYLOAD
    written = compress(CompressionType.SNAPPY, PAYLOAD, snappy_framing="raw")
    assert not written.startswith(b"\x82SNAPPY")
    assert bytes(cramjam.snappy.decompress_raw(written)) == PAYLOAD


def test_snappy_raw_batch_from_builder() -> None:
    builder = RecordBatchBuilder(compression="snappy", snappy_framing="raw")
    builder.append(1, None, b"x" * 500)
    batch = RecordBatch.from_bytes(builder.build())
    assert batch.records()[0].value == b"x" * 500


def test_lz4_frame_has_java_client_settings() -> None:
    packed = compress(CompressionType.LZ4, PAYLOAD)
    assert packed[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic
    flg, bd = packed[4], packed[5]
    assert flg >> 6 == 1  # version 01
    assert flg & 0x20  # independent blocks
    assert not flg & 0x08  # no content size
    assert not flg & 0x04  # no content checksum
    assert (bd >> 4) & 0x07 == 4  # 64 KiB maximum block size


def test_gzip_is_standard_gzip() -> None:
    assert gzip.decompress(compress(CompressionType.GZIP, PAYLOAD)) == PAYLOAD
    assert decompress(CompressionType.GZIP, gzip.compress(PAYLOAD)) == PAYLOAD


def test_zstd_frames_from_other_writers() -> None:
    assert decompress(CompressionType.ZSTD, bytes(cramjam.zstd.compress(PAYLOAD, level=19))) \
        == PAYLOAD


@pytest.mark.parametrize(("codec", "levels"), [
    (CompressionType.GZIP, [1, 9]),
    (CompressionType.LZ4, [1, 9]),
    (CompressionType.ZSTD, [1, 19]),
])
def test_levels_are_configurable(codec: CompressionType, levels: list[int]) -> None:
    fast, strong = (compress(codec, PAYLOAD, level) for level in levels)
    assert decompress(codec, fast) == decompress(codec, strong) == PAYLOAD
    assert fast != strong  # the level reached the codec
    builder = RecordBatchBuilder(compression=codec, compression_level=levels[1])
    builder.append(1, None, PAYLOAD)
    assert RecordBatch.from_bytes(builder.build()).records()[0].value == PAYLOAD


def test_names_and_ids() -> None:
    assert CompressionType.from_name("ZSTD") is CompressionType.ZSTD
    assert CompressionType.from_name(None) is CompressionType.NONE
    assert CompressionType.from_name(2) is CompressionType.SNAPPY
    with pytest.raises(UnsupportedCodecError):
        CompressionType.from_name(9)
    with pytest.raises(UnsupportedCodecError):
        compress(6, b"x")


def test_xerial_with_bad_block_length() -> None:
    bad = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", 1000) + b"abc"
    with pytest.raises(CorruptRecordError, match="overruns"):
        decompress(CompressionType.SNAPPY, bad)
    with pytest.raises(CorruptRecordError, match="truncated"):
        decompress(CompressionType.SNAPPY, bad[:18])


def test_snappy_claiming_a_huge_length_is_rejected_before_allocating() -> None:
    bogus = b"\xff\xff\xff\xff\x0f" + b"\x00" * 5  # header varint: 4 GiB uncompressed
    with pytest.raises(CorruptRecordError, match="claims"):
        decompress(CompressionType.SNAPPY, bogus)
    framed = b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, len(bogus)) + bogus
    with pytest.raises(CorruptRecordError, match="claims"):
        decompress(CompressionType.SNAPPY, framed)


def test_snappy_highly_compressible_input_is_within_the_ratio_bound() -> None:
    zeros = bytes(1 << 20)
    assert decompress(CompressionType.SNAPPY, compress(CompressionType.SNAPPY, zeros,
                                                       snappy_framing="raw")) == zeros
