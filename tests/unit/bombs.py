"""Decompression bombs for the limit tests.

Payloads that inflate to ``prefix`` followed by zeros, far past their own size, in every codec
and framing a batch reader accepts, each with the header shapes that matter to a bounded
reader: sizes declared honestly, declared falsely, or not at all, and output spread over
several members, frames or blocks. They are written by the reference libraries where one
exists (zlib, ``zstandard``, ``lz4.frame``) and streamed, so building one never holds what it
inflates to.
"""

from __future__ import annotations

import random
import struct
import zlib
from collections.abc import Iterator
from typing import Any

import cramjam
import lz4.frame
import zstandard

from kontrakt.protocol.records._compression import xxh32

_CHUNK = 1 << 20
#: members / frames of the split variants: each stays within the tests' limits
_PARTS = 32

#: (codec name, variant) pairs; every variant of :func:`build`.
VARIANTS: list[tuple[str, str]] = [
    ("gzip", "one-member"), ("gzip", "lying-isize"), ("gzip", "members"),
    ("zstd", "content-size"), ("zstd", "streamed"), ("zstd", "lying-content-size"),
    ("zstd", "frames"),
    ("lz4", "64k-blocks"), ("lz4", "4m-blocks"), ("lz4", "content-size"),
    ("lz4", "lying-content-size"), ("lz4", "frames"),
    ("snappy", "raw"), ("snappy", "xerial"),
]

CODEC_IDS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _pieces(size: int, prefix: bytes) -> Iterator[bytes]:
    """``prefix`` then zeros, ``size`` bytes in all, a MiB at a time."""
    yield prefix
    left = size - len(prefix)
    zeros = bytes(_CHUNK)
    while left > 0:
        n = min(left, _CHUNK)
        yield zeros if n == _CHUNK else zeros[:n]
        left -= n


def _gzip(size: int, prefix: bytes) -> bytes:
    c = zlib.compressobj(1, zlib.DEFLATED, 31)
    return b"".join([*(c.compress(p) for p in _pieces(size, prefix)), c.flush()])


def _zstd(size: int, prefix: bytes, *, content_size: bool) -> bytes:
    c = zstandard.ZstdCompressor(level=1, write_content_size=content_size)
    obj = c.compressobj(size=size if content_size else -1)
    return b"".join([*(obj.compress(p) for p in _pieces(size, prefix)), obj.flush()])


def _lz4(size: int, prefix: bytes, *, block_size: int, content_size: bool) -> bytes:
    c = lz4.frame.LZ4FrameCompressor(block_size=block_size, block_linked=False)
    head = c.begin(source_size=size if content_size else 0)  # 0: no content size field
    return b"".join([head, *(c.compress(p) for p in _pieces(size, prefix)), c.flush()])


def _xerial(size: int, prefix: bytes) -> bytes:
    # The Java client's framing: 32 KiB of input per block. Every all-zero block compresses
    # the same, so it is compressed once.
    block = 32 * 1024
    first = prefix + bytes(block - len(prefix))
    zero = bytes(cramjam.snappy.compress_raw(bytes(block)))
    packed_first = bytes(cramjam.snappy.compress_raw(first))
    parts = [b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1),
             struct.pack(">i", len(packed_first)), packed_first]
    framed_zero = struct.pack(">i", len(zero)) + zero
    parts.extend([framed_zero] * (size // block - 1))
    return b"".join(parts)


def _patch_zstd_content_size(frame: bytes, value: int) -> bytes:
    fhd = frame[4]
    single_segment = fhd >> 5 & 1
    width = (single_segment, 2, 4, 8)[fhd >> 6]
    pos = 5 + (1 - single_segment) + (0, 1, 2, 4)[fhd & 3]
    field = (value - 256 if width == 2 else value).to_bytes(width, "little")
    return frame[:pos] + field + frame[pos + width:]


def build(codec: str, variant: str, size: int, prefix: bytes = b"") -> bytes:
    """A ``codec`` payload inflating to ``size`` bytes: ``prefix`` then zeros.

    Args:
        codec, variant: one of :data:`VARIANTS`.
        size: bytes it inflates to (a multiple of 32 KiB for snappy's xerial framing).
        prefix: its first bytes (e.g. a record header, so that the bomb is a valid batch).
    """
    if codec == "gzip":
        if variant == "one-member":
            return _gzip(size, prefix)
        if variant == "lying-isize":  # the trailer claims 1000 bytes
            return _gzip(size, prefix)[:-4] + struct.pack("<I", 1000)
        if variant == "members":  # the last trailer states only its own member's size
            part = size // _PARTS
            return _gzip(part, prefix) + b"".join(_gzip(part, b"") for _ in range(_PARTS - 1))
    if codec == "zstd":
        if variant == "content-size":
            return _zstd(size, prefix, content_size=True)
        if variant == "streamed":  # no content size, as the Java client writes
            return _zstd(size, prefix, content_size=False)
        if variant == "lying-content-size":
            return _patch_zstd_content_size(_zstd(size, prefix, content_size=True), 1000)
        if variant == "frames":  # each declares a size within any limit the tests set
            part = size // _PARTS
            return _zstd(part, prefix, content_size=True) + b"".join(
                _zstd(part, b"", content_size=True) for _ in range(_PARTS - 1))
    if codec == "lz4":
        kb64, mb4 = lz4.frame.BLOCKSIZE_MAX64KB, lz4.frame.BLOCKSIZE_MAX4MB
        if variant == "64k-blocks":
            return _lz4(size, prefix, block_size=kb64, content_size=False)
        if variant == "4m-blocks":
            return _lz4(size, prefix, block_size=mb4, content_size=False)
        if variant == "content-size":
            return _lz4(size, prefix, block_size=kb64, content_size=True)
        if variant == "lying-content-size":
            frame = bytearray(_lz4(size, prefix, block_size=kb64, content_size=True))
            struct.pack_into("<Q", frame, 6, 1000)
            desc = bytes(frame[4:14])
            frame[14] = lz4_header_checksum(desc)
            return bytes(frame)
        if variant == "frames":
            part = size // _PARTS
            return _lz4(part, prefix, block_size=kb64, content_size=False) + b"".join(
                _lz4(part, b"", block_size=kb64, content_size=False) for _ in range(_PARTS - 1))
    if codec == "snappy":
        if variant == "raw":
            return bytes(cramjam.snappy.compress_raw(b"".join(_pieces(size, prefix))))
        if variant == "xerial":
            return _xerial(size, prefix)
    raise ValueError(f"no bomb {codec}/{variant}")


def _varint(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)  # zig-zag
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def record_prefix(size: int) -> bytes:
    """The first bytes of a v2 record of exactly ``size`` bytes whose value is all zeros:
    a bomb with this prefix inflates to one valid record (the last zero is its header
    count), so a reader without a limit takes it whole."""
    for value_len in range(size - 16, size):
        # attributes, timestamp delta 0, offset delta 0, key length -1, value length
        body = b"\x00\x00\x00\x01" + _varint(value_len)
        record = _varint(len(body) + value_len + 1) + body
        if len(record) + value_len + 1 == size:
            return record
    raise ValueError(f"no record of {size} bytes")


def lz4_header_checksum(descriptor: bytes) -> int:
    """The LZ4 frame header checksum byte over the descriptor (FLG .. dictionary id)."""
    return (xxh32(descriptor) >> 8) & 0xFF


def sample(rng: random.Random, codec: str) -> dict[str, Any]:
    """A random bomb case for ``codec``: variant, inflated size and where it sits."""
    variants = [v for c, v in VARIANTS if c == codec]
    return {"codec": codec, "variant": rng.choice(variants),
            "size": rng.choice([16, 24, 32, 64]) << 20,
            "before": rng.randint(0, 3), "after": rng.randint(0, 2)}


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def rss_mark() -> int:
    """Start measuring this process's peak RSS: reset the kernel's high-water mark to the
    current RSS and return that.

    ``getrusage(RUSAGE_SELF).ru_maxrss`` cannot serve in a child: the kernel carries the
    high-water mark over exec from the memory the child forked from (the whole test
    process). ``VmHWM`` is that of the running program alone, and writing 5 to
    ``/proc/self/clear_refs`` resets it (Linux 4.0+).
    """
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _status("VmRSS")


def rss_growth(mark: int) -> int:
    """Bytes the peak RSS rose above ``mark`` (from :func:`rss_mark`)."""
    return _status("VmHWM") - mark
