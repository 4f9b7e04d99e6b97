"""Bad input to the record readers: typed errors with location, never a hang or a crash."""

from __future__ import annotations

import struct
import time
from typing import Any

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kontrakt.errors import CorruptMessageError, CorruptRecordError, UnsupportedCodecError
from kontrakt.protocol.records import (
    CompressionType,
    LegacyMessageSetBuilder,
    RecordBatch,
    RecordBatchBuilder,
    RecordSetReader,
    decompress,
    iter_batches,
    read_records,
)

WHERE: dict[str, Any] = {"topic": "orders", "partition": 3}


def batch(codec: int = 0, base_offset: int = 40, count: int = 3) -> bytes:
    builder = RecordBatchBuilder(compression=codec, base_offset=base_offset)
    for i in range(count):
        builder.append(1000 + i, b"key-%d" % i, b"value-%d" % i * 5, [("h", b"x")])
    return builder.build()


def fix_crc(blob: bytearray) -> bytes:
    struct.pack_into(">I", blob, 17, crc32c.crc32c(bytes(blob[21:])))
    return bytes(blob)


def assert_located(exc: CorruptRecordError, offset: int | None = 40) -> None:
    assert exc.topic == "orders" and exc.partition == 3
    assert exc.offset == offset
    assert "orders" in str(exc) and "partition 3" in str(exc)


def test_crc_mismatch() -> None:
    blob = bytearray(batch())
    blob[70] ^= 0x01
    with pytest.raises(CorruptRecordError, match="CRC mismatch") as info:
        list(iter_batches(bytes(blob), **WHERE))
    assert_located(info.value)
    with pytest.raises(CorruptRecordError, match="CRC"):
        RecordBatch.from_bytes(bytes(blob))


def test_truncated_batch_header() -> None:
    blob = batch()
    for cut in (0, 5, 30, 60):
        with pytest.raises(CorruptRecordError, match="truncated"):
            RecordBatch.from_bytes(blob[:cut])


def test_length_field_larger_than_buffer() -> None:
    blob = bytearray(batch())
    struct.pack_into(">i", blob, 8, 10_000_000)
    with pytest.raises(CorruptRecordError, match="truncated") as info:
        RecordBatch.from_bytes(bytes(blob), **WHERE)
    assert_located(info.value)
    # In a record set the same batch looks like a partial batch with nothing before it.
    with pytest.raises(CorruptRecordError, match="no complete batch") as info2:
        list(iter_batches(bytes(blob), **WHERE))
    assert_located(info2.value, offset=None)
    # ... unless the caller accepts "no progress", and a max batch size makes it corrupt.
    assert list(iter_batches(bytes(blob), require_progress=False)) == []
    with pytest.raises(CorruptRecordError, match="exceeds the maximum"):
        list(iter_batches(bytes(blob), max_batch_size=1 << 20, **WHERE))


@pytest.mark.parametrize("length", [-1, -(2**31), 0, 13])
def test_length_field_too_small_or_negative(length: int) -> None:
    blob = bytearray(batch())
    struct.pack_into(">i", blob, 8, length)
    with pytest.raises(CorruptRecordError, match="below the minimum") as info:
        list(iter_batches(bytes(blob), **WHERE))
    assert_located(info.value)


def test_v2_length_below_header_size() -> None:
    blob = bytearray(batch())
    struct.pack_into(">i", blob, 8, 20)
    with pytest.raises(CorruptRecordError, match="smaller than a batch header"):
        list(iter_batches(bytes(blob)))


def test_unknown_magic() -> None:
    blob = bytearray(batch())
    blob[16] = 7
    with pytest.raises(CorruptRecordError, match="magic"):
        list(iter_batches(bytes(blob), **WHERE))


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec(codec_id: int) -> None:
    blob = bytearray(batch())
    struct.pack_into(">h", blob, 21, codec_id)
    fixed = fix_crc(blob)
    (parsed,) = list(iter_batches(fixed, **WHERE))
    with pytest.raises(UnsupportedCodecError) as info:
        parsed.records()
    assert_located(info.value)
    with pytest.raises(UnsupportedCodecError):
        decompress(codec_id, b"abc")
    with pytest.raises(UnsupportedCodecError):
        RecordBatchBuilder(compression=codec_id)
    with pytest.raises(UnsupportedCodecError):
        RecordBatchBuilder(compression="brotli")


@pytest.mark.parametrize("codec", [c for c in CompressionType if c])
def test_corrupt_compressed_payload(codec: CompressionType) -> None:
    blob = bytearray(batch(codec))
    # Overwrite the compressed payload with junk of the same size and fix the CRC so only the
    # decompression can notice.
    for i in range(61, len(blob)):
        blob[i] = (i * 37) & 0xFF
    fixed = fix_crc(blob)
    (parsed,) = list(iter_batches(fixed, **WHERE))
    with pytest.raises(CorruptRecordError) as info:
        parsed.records()
    assert_located(info.value)


@pytest.mark.parametrize("codec", [c for c in CompressionType if c])
def test_truncated_compressed_payload(codec: CompressionType) -> None:
    blob = bytearray(batch(codec, count=50))
    del blob[-8:]
    struct.pack_into(">i", blob, 8, len(blob) - 12)
    (parsed,) = list(iter_batches(fix_crc(blob), **WHERE))
    with pytest.raises(CorruptRecordError):
        parsed.records()


def test_record_count_larger_than_records() -> None:
    blob = bytearray(batch())
    struct.pack_into(">i", blob, 57, 2**31 - 1)  # absurd count must not allocate or spin
    (parsed,) = list(iter_batches(fix_crc(blob), **WHERE))
    start = time.monotonic()
    with pytest.raises(CorruptRecordError, match="runs past") as info:
        parsed.records()
    assert time.monotonic() - start < 1.0
    assert_located(info.value)


def test_record_count_smaller_than_records() -> None:
    blob = bytearray(batch())
    struct.pack_into(">i", blob, 57, 1)
    (parsed,) = list(iter_batches(fix_crc(blob)))
    with pytest.raises(CorruptRecordError, match="after its 1 records"):
        parsed.records()


def test_negative_record_count() -> None:
    blob = bytearray(batch())
    struct.pack_into(">i", blob, 57, -5)
    with pytest.raises(CorruptRecordError, match="negative record count"):
        list(iter_batches(fix_crc(blob)))


def test_record_length_disagrees_with_fields() -> None:
    blob = bytearray(batch(count=1))
    blob[61] += 2  # first record's length varint (small, one byte)
    (parsed,) = list(iter_batches(fix_crc(blob)))
    with pytest.raises(CorruptRecordError):
        parsed.records()


def test_garbage_record_set() -> None:
    garbage = bytes(range(256)) * 4
    with pytest.raises(CorruptRecordError):
        list(iter_batches(garbage, **WHERE))


def test_corrupt_record_error_is_a_corrupt_message_error() -> None:
    assert issubclass(CorruptRecordError, CorruptMessageError)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=400))
def test_fuzz_random_bytes(data: bytes) -> None:
    try:
        for parsed in iter_batches(data, check_crcs=False):
            parsed.records()
    except CorruptRecordError:
        pass


_VALID = [batch(c, count=4) for c in CompressionType]
_LEGACY = [LegacyMessageSetBuilder(m, compression=c) for m in (0, 1) for c in (0, 1, 2)]
for _b in _LEGACY:
    _b.append(5, b"k", b"v" * 20)
    _b.append(6, None, b"w")
_VALID += [b.build(10) for b in _LEGACY]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(which=st.integers(min_value=0, max_value=len(_VALID) - 1),
       flips=st.lists(st.tuples(st.integers(min_value=0, max_value=10_000),
                                st.integers(min_value=1, max_value=255)), min_size=1,
                      max_size=4),
       cut=st.integers(min_value=0, max_value=10_000))
def test_fuzz_mutated_batches(which: int, flips: list[tuple[int, int]], cut: int) -> None:
    """Mutations of valid batches (CRC not checked, so the decoders see them) raise only
    CorruptRecordError (UnsupportedCodecError included) and finish quickly."""
    blob = bytearray(_VALID[which])
    for pos, mask in flips:
        blob[pos % len(blob)] ^= mask
    blob = blob[:max(cut, 1)] if cut < len(blob) else blob
    start = time.monotonic()
    try:
        for parsed in iter_batches(bytes(blob), check_crcs=False):
            parsed.records()
    except CorruptRecordError:
        pass
    assert time.monotonic() - start < 2.0


def test_decoded_records_survive_crc_checks_of_valid_input() -> None:
    for blob in _VALID:
        assert read_records(blob)


def test_reader_rejects_non_progress_by_default_but_empty_is_fine() -> None:
    assert list(RecordSetReader(b"")) == []
    assert list(RecordSetReader(b"\x00" * 5, require_progress=False)) == []
    with pytest.raises(CorruptRecordError):
        list(RecordSetReader(b"\x00" * 5))
