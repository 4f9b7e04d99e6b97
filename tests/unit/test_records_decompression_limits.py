"""Bounded decompression: ``decompress(..., max_size=)`` and the batch readers that pass it.

Within the limit every codec and framing gives the exact bytes; one byte past it is a
:class:`DecompressionLimitError`; bombs (``tests/unit/bombs.py``) are refused with the
memory of the process that decompresses them bounded by about the limit, measured as the
peak RSS of a child process. Payloads come from the reference writers (zlib, ``zstandard``,
``lz4.frame``, cramjam's snappy) as well as Kontrakt's own.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from kontrakt.errors import CorruptRecordError, DecompressionLimitError, InvalidArgumentError
from kontrakt.protocol.records import (
    CompressionType,
    LegacyBatch,
    RecordBatch,
    compress,
    decompress,
    iter_batches,
)
from kontrakt.protocol.records._builder import frame_batch
from kontrakt.protocol.records._legacy import _encode_message
from tests.unit import bombs

ROOT = Path(__file__).resolve().parents[2]


def _text(n_records: int, seed: int = 1) -> bytes:
    """JSON-ish event records, about 100 bytes each: what a batch of real data looks like."""
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "order", "user", "click", "view", "paris", "oslo"]
    return b"".join(json.dumps({
        "id": i, "user": f"{rng.choice(words)}{rng.randint(0, 9999)}",
        "event": rng.choice(words), "ts": 1_700_000_000_000 + 37 * i,
        "amount": round(rng.random() * 1000, 2)}).encode() for i in range(n_records))


TEXT = _text(3000)  # ~300 KiB

Writer = Callable[[bytes], bytes]


def _lz4_ref(**kw: object) -> Writer:
    return lambda data: bytes(lz4.frame.compress(data, **kw))


def _zstd_ref(**kw: object) -> Writer:
    return lambda data: zstandard.ZstdCompressor(**kw).compress(data)  # type: ignore[arg-type]


def _zstd_streamed(data: bytes) -> bytes:
    obj = zstandard.ZstdCompressor().compressobj()
    return obj.compress(data) + obj.flush()


def _two(codec: CompressionType) -> Writer:
    return lambda data: compress(codec, data[:len(data) // 3]) + compress(
        codec, data[len(data) // 3:])


WRITERS: dict[str, tuple[CompressionType, Writer]] = {
    "gzip": (CompressionType.GZIP, lambda d: compress(CompressionType.GZIP, d)),
    "gzip-stdlib": (CompressionType.GZIP, gzip.compress),
    "gzip-two-members": (CompressionType.GZIP, _two(CompressionType.GZIP)),
    "snappy-xerial": (CompressionType.SNAPPY, lambda d: compress(CompressionType.SNAPPY, d)),
    "snappy-raw": (CompressionType.SNAPPY,
                   lambda d: compress(CompressionType.SNAPPY, d, snappy_framing="raw")),
    "lz4": (CompressionType.LZ4, lambda d: compress(CompressionType.LZ4, d)),
    "lz4-256k-linked-checksums": (CompressionType.LZ4, _lz4_ref(
        block_size=lz4.frame.BLOCKSIZE_MAX256KB, block_linked=True, content_checksum=True,
        block_checksum=True)),
    "lz4-4m-content-size": (CompressionType.LZ4, _lz4_ref(
        block_size=lz4.frame.BLOCKSIZE_MAX4MB, store_size=True)),
    "lz4-two-frames": (CompressionType.LZ4, _two(CompressionType.LZ4)),
    "zstd": (CompressionType.ZSTD, lambda d: compress(CompressionType.ZSTD, d)),
    "zstd-checksum-no-size": (CompressionType.ZSTD, _zstd_ref(write_checksum=True,
                                                              write_content_size=False)),
    "zstd-streamed": (CompressionType.ZSTD, _zstd_streamed),
    "zstd-two-frames": (CompressionType.ZSTD, _two(CompressionType.ZSTD)),
    "zstd-skippable-frame": (CompressionType.ZSTD, lambda d: struct.pack(
        "<II", 0x184D2A53, 3) + b"abc" + compress(CompressionType.ZSTD, d)),
}


@pytest.mark.parametrize("writer", list(WRITERS))
def test_within_the_limit_the_bytes_are_exact_and_one_past_it_is_refused(writer: str) -> None:
    codec, write = WRITERS[writer]
    packed = write(TEXT)
    n = len(TEXT)
    for limit in (n, n + 1, 64 * n):
        assert decompress(codec, packed, max_size=limit) == TEXT
    with pytest.raises(DecompressionLimitError) as info:
        decompress(codec, packed, max_size=n - 1)
    assert info.value.limit == n - 1
    assert f"more than {n - 1} bytes" in str(info.value)
    assert decompress(codec, packed) == TEXT  # no limit
    with pytest.raises(InvalidArgumentError):
        decompress(codec, packed, max_size=-1)


@settings(max_examples=60, deadline=None)
@given(codec=st.sampled_from([c for c in CompressionType if c]),
       pieces=st.lists(st.tuples(st.binary(min_size=1, max_size=40),
                                 st.integers(min_value=1, max_value=3000)), max_size=12),
       slack=st.integers(min_value=-300, max_value=300))
def test_any_payload_is_exact_up_to_its_size_and_refused_past_it(
        codec: CompressionType, pieces: list[tuple[bytes, int]], slack: int) -> None:
    # Runs of repeated snippets: anything from incompressible to a ratio in the hundreds.
    data = b"".join(snippet * times for snippet, times in pieces)
    limit = max(0, len(data) + slack)
    packed = compress(codec, data)
    if limit >= len(data):
        assert decompress(codec, packed, max_size=limit) == data
    else:
        with pytest.raises(DecompressionLimitError):
            decompress(codec, packed, max_size=limit)


@pytest.mark.parametrize(("codec", "payload", "claimed"), [
    # The stated size is past the limit; the rest is garbage, which shows that nothing was
    # inflated: the error is the size, not a decoding failure.
    (CompressionType.GZIP, b"\x1f\x8b\x08\x00" + bytes(20) + struct.pack("<I", 1 << 30),
     1 << 30),
    (CompressionType.ZSTD, struct.pack("<IBB", 0xFD2FB528, 0xC0, 0) + struct.pack(
        "<Q", 1 << 30) + b"\xff" * 20, 1 << 30),
    (CompressionType.LZ4, b"\x04\x22\x4d\x18" + bytes([0x68, 0x40]) + struct.pack(
        "<Q", 1 << 30) + b"\x00" + b"\xff" * 20, 1 << 30),
    (CompressionType.SNAPPY, b"\x80\x80\x80\x01" + b"\xff" * 100_000, 1 << 21),
])
def test_a_stated_size_past_the_limit_is_refused_before_inflating(
        codec: CompressionType, payload: bytes, claimed: int) -> None:
    with pytest.raises(DecompressionLimitError, match=f"claims {claimed}"):
        decompress(codec, payload, max_size=1 << 20)


@pytest.mark.parametrize(("codec", "variant"), bombs.VARIANTS)
def test_small_bombs_are_refused(codec: str, variant: str) -> None:
    payload = bombs.build(codec, variant, 8 << 20, b"head")
    cid = bombs.CODEC_IDS[codec]
    if "lying" not in variant:
        assert decompress(cid, payload, max_size=8 << 20) == b"head" + bytes((8 << 20) - 4)
    with pytest.raises(CorruptRecordError) as info:
        decompress(cid, payload, max_size=1 << 20)
    if "lying" not in variant:
        # A false header is corrupt data the decoder may notice first; a true one is always
        # refused for its size.
        assert isinstance(info.value, DecompressionLimitError)


_CHILD = """
import json, sys
from kontrakt.errors import CorruptRecordError, DecompressionLimitError, InvalidArgumentError
from kontrakt.protocol.records import compress, decompress
from tests.unit.bombs import rss_growth, rss_mark
limit, cases = json.loads(sys.argv[1])
payloads = [(c, v, cid, open(path, "rb").read()) for c, v, cid, path in cases]
for _, _, cid, _ in payloads:  # warm every code path up before the baseline
    decompress(cid, compress(cid, b"x" * 1000), max_size=limit)
mark = rss_mark()
results = []
for codec, variant, cid, data in payloads:
    try:
        decompress(cid, data, max_size=limit)
        results.append([codec, variant, "none"])
    except DecompressionLimitError:
        results.append([codec, variant, "limit"])
    except CorruptRecordError:
        results.append([codec, variant, "corrupt"])
print(json.dumps({"growth": rss_growth(mark), "results": results}))
"""


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="Linux /proc")
@pytest.mark.parametrize("codec", ["gzip", "zstd", "lz4", "snappy"])
def test_bombs_are_refused_within_bounded_memory(codec: str, tmp_path: Path) -> None:
    """Each bomb inflates to 128 MiB; with an 8 MiB limit, decompressing them all must
    raise the peak RSS of a fresh process by less than twice the limit (an unbounded
    decoder takes at least 256 MiB: the output, then its copy)."""
    limit = 8 << 20
    cases = []
    for c, variant in bombs.VARIANTS:
        if c != codec:
            continue
        path = tmp_path / f"{c}-{variant}"
        path.write_bytes(bombs.build(c, variant, 128 << 20, b"head"))
        cases.append([c, variant, bombs.CODEC_IDS[c], str(path)])
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps([limit, cases])],
                          capture_output=True, text=True, timeout=120, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    for c, variant, outcome in report["results"]:
        assert outcome == ("corrupt" if outcome == "corrupt" and "lying" in variant
                           else "limit"), (c, variant, outcome)
    assert report["growth"] < 2 * limit, report


def _bomb_batch(codec: str, variant: str, size: int, base_offset: int) -> bytes:
    payload = bombs.build(codec, variant, size)
    return frame_batch(payload, 1, 1_700_000_000_000, 1_700_000_000_000,
                       codec=CompressionType(bombs.CODEC_IDS[codec]), compressed=True,
                       base_offset=base_offset)


def test_batch_readers_pass_the_limit_and_name_the_batch() -> None:
    blob = _bomb_batch("zstd", "streamed", 4 << 20, 40)
    (batch,) = list(iter_batches(blob, topic="t", partition=3))
    assert isinstance(batch, RecordBatch)
    for call in (lambda: batch.payload(1 << 20), lambda: batch.records(1 << 20),
                 lambda: batch.records_as(tuple, "t", 3, 0, 1 << 20)):
        with pytest.raises(DecompressionLimitError) as info:
            call()
        err = info.value
        assert (err.topic, err.partition, err.offset, err.limit) == ("t", 3, 40, 1 << 20)
    assert len(batch.payload(4 << 20)) == 4 << 20


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_wrappers_pass_the_limit_and_name_the_message(magic: int) -> None:
    value = bombs.build("gzip", "one-member", 4 << 20)
    blob = _encode_message(magic, 77, 1_700_000_000_000 if magic else -1,
                           int(CompressionType.GZIP), None, value)
    (msg,) = list(iter_batches(blob, topic="t", partition=1))
    assert isinstance(msg, LegacyBatch)
    with pytest.raises(DecompressionLimitError) as info:
        msg.records(max_size=1 << 20)
    assert (info.value.topic, info.value.partition, info.value.offset) == ("t", 1, 77)


@pytest.mark.parametrize(("codec", "payload", "message"), [
    (CompressionType.ZSTD, compress(CompressionType.ZSTD, TEXT)[:-7], "past the payload"),
    (CompressionType.ZSTD, compress(CompressionType.ZSTD, TEXT) + b"junk!!!!", "no frame"),
    (CompressionType.ZSTD, struct.pack("<IBB", 0xFD2FB528, 0x00, 0x50) + b"\x07\x00\x00",
     "reserved type"),
    (CompressionType.LZ4, compress(CompressionType.LZ4, TEXT)[:-5],
     "truncated lz4|past the payload"),
    (CompressionType.LZ4, compress(CompressionType.LZ4, TEXT) + b"junk!!!!", "no frame"),
    (CompressionType.LZ4, b"\x04\x22\x4d\x18\x60\x10\x00\x00\x00\x00", "descriptor"),
])
def test_malformed_frames_are_corrupt_under_a_limit(codec: CompressionType, payload: bytes,
                                                    message: str) -> None:
    with pytest.raises(CorruptRecordError, match=message) as info:
        decompress(codec, payload, max_size=1 << 30)
    assert not isinstance(info.value, DecompressionLimitError)


def test_a_realistic_text_batch_is_far_within_the_default_multiple() -> None:
    """The consumer allows 64 x max.partition.fetch.bytes by default. Event records compress
    about 4-5x and even highly repetitive log lines under 64x, so the largest batch a
    default broker stores (1 MiB compressed) passes."""
    logs = b"".join(b"2026-11-26T07:%02d:%02d INFO request served path=/api/v1/orders "
                    b"status=200 ms=%d\n" % (i // 60 % 60, i % 60, i % 97)
                    for i in range(40_000))
    for codec in (CompressionType.GZIP, CompressionType.ZSTD, CompressionType.LZ4,
                  CompressionType.SNAPPY):
        for data in (TEXT, logs):
            packed = compress(codec, data)
            assert len(data) / len(packed) < 64, (codec, len(data) / len(packed))
            assert decompress(codec, packed, max_size=64 * len(packed)) == data
