"""Record batch compression codecs: none, gzip, snappy, lz4 (frame) and zstd, all via ``cramjam``.

Facts this module relies on (from the Kafka protocol documentation and the behaviour of the
Java client and librdkafka):

* The codec id lives in the low three bits of a batch's (or legacy message's) attributes:
  0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd. Ids 5-7 are unassigned.
* Snappy: the Java client wraps snappy in the *xerial* stream framing (a 16-byte header
  ``\\x82SNAPPY\\x00`` + int32 version + int32 compatible version, then blocks of int32
  big-endian length + raw snappy block, 32 KiB of input per block). librdkafka writes plain
  raw snappy and reads both. Kontrakt reads both and **writes xerial framing by default** so
  that its batches are byte-for-byte what a Java producer would send and readable by every
  client, including old ones that only understand the Java format; ``snappy_framing="raw"``
  selects librdkafka's form.
* LZ4: the LZ4 *frame* format with independent blocks, 64 KiB maximum block size and no
  content checksum, as the Java client writes. cramjam always adds per-block checksums, which
  the frame format makes optional for readers to verify; aiokafka has sent exactly these
  frames (same cramjam settings) to Java brokers for years. Any valid frame is read.
* Magic 0 lz4 messages (Kafka 0.8/0.9) carry a frame header checksum computed over the wrong
  bytes: the 4-byte frame magic was hashed along with the descriptor (KIP-57). Kontrakt reads
  either checksum for magic 0 and writes the old one when building magic 0 message sets, as
  those brokers expect.
* Decompression can be bounded (``max_size``; the consumer passes ``max.partition.fetch.bytes``
  x ``max.decompressed.batch.multiple``) at a cost within timing noise (1 MiB batches of
  JSON records, each codec: -1% to +0.5%). A payload is first sized from what its headers
  say: gzip's ISIZE trailer; snappy's stated lengths, which its decoder holds to; for lz4
  and zstd, declared content sizes and the block maximums of their frames, walked in Python
  (~10 us per MiB). A stated size past the limit is refused before any work; otherwise the
  payload is decoded into a buffer of the stated size, which cramjam cannot write past, so
  the output stays bounded even when the headers lie. Only a payload that may go past the
  limit (or does not fit: several gzip members, false headers) is decoded the exact way,
  into a buffer of ``max_size + 1`` bytes.
"""

from __future__ import annotations

import mmap
import struct
from enum import IntEnum
from typing import Any, Final, Literal, TypeAlias

import cramjam

from kontrakt.errors import (
    CorruptRecordError,
    DecompressionLimitError,
    InvalidArgumentError,
    UnsupportedCodecError,
)

__all__ = [
    "DEFAULT_LEVELS",
    "CompressionType",
    "compress",
    "decompress",
    "xxh32",
]

Buffer: TypeAlias = bytes | bytearray | memoryview


class CompressionType(IntEnum):
    """Compression codec ids as carried in batch attributes (bits 0-2)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str | int | CompressionType | None) -> CompressionType:
        """Resolve a codec from a name (``"gzip"``, ``"none"`` ...), an id or None.

        Args:
            name: a Kafka ``compression.type`` value, a codec id, a member, or None (= none).

        Returns:
            The codec.

        Raises:
            UnsupportedCodecError: for an unknown name or id.
        """
        if name is None:
            return cls.NONE
        if isinstance(name, str):
            try:
                return cls[name.strip().upper()]
            except KeyError:
                raise UnsupportedCodecError(f"unknown compression type {name!r}") from None
        try:
            return cls(int(name))
        except ValueError:
            raise UnsupportedCodecError(f"unknown compression codec id {name!r}") from None


#: Level used when none is given: what the Java client uses by default, except lz4 where the
#: Java default (9, i.e. LZ4-HC) is several times slower; Kontrakt uses lz4's fast mode.
DEFAULT_LEVELS: Final[dict[CompressionType, int | None]] = {
    CompressionType.GZIP: 6,
    CompressionType.SNAPPY: None,
    CompressionType.LZ4: 1,
    CompressionType.ZSTD: 3,
}

_XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK: Final = 32 * 1024
_INT32: Final = struct.Struct(">i")
_UINT32_LE: Final = struct.Struct("<I")
_UINT64_LE: Final = struct.Struct("<Q")
_ZSTD_MAGIC: Final = 0xFD2FB528
_ZSTD_BLOCK_MAX: Final = 128 * 1024
_LZ4_MAGIC: Final = 0x184D2204
#: block maximum sizes by the BD byte's bits 4-6
_LZ4_BLOCK_MAX: Final = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}
#: skippable frames (zstd and lz4 alike): magic 0x184D2A50-5F, int32 size, payload
_SKIPPABLE_MAGIC: Final = 0x184D2A50


_M32: Final = 0xFFFFFFFF
_P1: Final = 2654435761
_P2: Final = 2246822519
_P3: Final = 3266489917
_P4: Final = 668265263
_P5: Final = 374761393


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 of ``data`` (the hash LZ4 frames use for header checksums); small inputs only
    are hashed here, so plain Python is fast enough."""
    n = len(data)
    pos = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while pos + 16 <= n:
            for i in range(4):
                lane = int.from_bytes(data[pos:pos + 4], "little")
                v[i] = (_rotl((v[i] + lane * _P2) & _M32, 13) * _P1) & _M32
                pos += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while pos + 4 <= n:
        h = (_rotl((h + int.from_bytes(data[pos:pos + 4], "little") * _P3) & _M32, 17)
             * _P4) & _M32
        pos += 4
    while pos < n:
        h = (_rotl((h + data[pos] * _P5) & _M32, 11) * _P1) & _M32
        pos += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


def _lz4_header_end(frame: bytes) -> int:
    """Index of the header checksum byte of an LZ4 frame (after magic, FLG, BD [, size]
    [, dict id])."""
    if len(frame) < 7 or frame[:4] != b"\x04\x22\x4d\x18":
        raise CorruptRecordError("lz4 payload does not start with an LZ4 frame header")
    flg = frame[4]
    end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if len(frame) <= end:
        raise CorruptRecordError("truncated lz4 frame header")
    return end


def _lz4_set_header_checksum(frame: bytes, broken: bool) -> bytes:
    end = _lz4_header_end(frame)
    hashed = frame[0:end] if broken else frame[4:end]
    checksum = (xxh32(hashed) >> 8) & 0xFF
    return frame[:end] + bytes([checksum]) + frame[end + 1:]


def compress(
    codec: CompressionType | int,
    data: Buffer,
    level: int | None = None,
    *,
    snappy_framing: Literal["xerial", "raw"] = "xerial",
    lz4_legacy_header: bool = False,
) -> bytes:
    """Compress ``data`` with ``codec``.

    Args:
        codec: codec id (:class:`CompressionType`).
        data: the uncompressed bytes.
        level: codec level; None means :data:`DEFAULT_LEVELS`. Ignored by snappy.
        snappy_framing: ``"xerial"`` (Java client's framing, the default) or ``"raw"``.
        lz4_legacy_header: write the magic 0 (Kafka 0.8/0.9) header checksum.

    Returns:
        The compressed bytes (``data`` unchanged as bytes for ``NONE``).

    Raises:
        UnsupportedCodecError: for an unknown codec id.
        ValueError: for a level the codec rejects.
    """
    if codec == 0:
        return bytes(data)
    if level is None:
        level = DEFAULT_LEVELS.get(CompressionType(codec)) if 0 < codec < 5 else None
    if codec == CompressionType.GZIP:
        return bytes(cramjam.gzip.compress(data, level=level))
    if codec == CompressionType.SNAPPY:
        if snappy_framing == "raw":
            return bytes(cramjam.snappy.compress_raw(data))
        return _xerial_encode(data)
    if codec == CompressionType.LZ4:
        comp = cramjam.lz4.Compressor(level=level, content_checksum=False, block_linked=False)
        comp.compress(data)
        frame = bytes(comp.finish())
        return _lz4_set_header_checksum(frame, broken=True) if lz4_legacy_header else frame
    if codec == CompressionType.ZSTD:
        return bytes(cramjam.zstd.compress(data, level=level))
    raise UnsupportedCodecError(f"unknown compression codec id {codec}")


def _xerial_encode(data: Buffer) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start:start + _XERIAL_BLOCK]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


#: A snappy element of n bytes yields at most ~21n bytes (a 3-byte copy of 64); a header
#: claiming more is corrupt, and must not make the decoder reserve the claimed size.
_SNAPPY_MAX_RATIO: Final = 22


def _too_big(name: str, limit: int, claimed: int | None = None) -> DecompressionLimitError:
    what = (f"{name} payload decompresses to" if claimed is None
            else f"{name} payload claims {claimed} bytes uncompressed:")
    return DecompressionLimitError(
        f"{what} more than {limit} bytes, the most a batch may take", limit=limit)


def _inflate_bounded(codec: Any, name: str, data: Buffer, limit: int) -> bytes:
    """Decompress into a buffer of ``limit + 1`` bytes, which the codec cannot write past:
    an exact bound, whatever the payload. The buffer is an anonymous map, whose pages are
    only committed when written, so a payload that stops early costs its own size."""
    buf = mmap.mmap(-1, limit + 1)
    try:
        try:
            n = int(codec.decompress_into(data, buf))
        except cramjam.DecompressionError as exc:
            # The codecs stream into the buffer through Rust's io::Write, which fails with
            # WriteZero ("failed to write whole buffer") once the buffer is full.
            if "whole buffer" in str(exc):
                raise _too_big(name, limit) from None
            raise
        if n > limit:
            raise _too_big(name, limit)
        return buf[:n]
    finally:
        buf.close()


def _snappy_raw_len(block: Buffer) -> int:
    claimed = int(cramjam.snappy.decompress_raw_len(block))
    if claimed > _SNAPPY_MAX_RATIO * len(block) + 64:
        raise CorruptRecordError(
            f"snappy block of {len(block)} bytes claims {claimed} uncompressed bytes")
    return claimed


def _unsnappy(data: Buffer, limit: int | None) -> bytes:
    # A raw block states its exact uncompressed length up front, and the decoder writes
    # exactly that many bytes or fails: checking the stated lengths bounds the output.
    if data[:8] != _XERIAL_MAGIC:
        claimed = _snappy_raw_len(data)
        if limit is not None and claimed > limit:
            raise _too_big("snappy", limit, claimed)
        return bytes(cramjam.snappy.decompress_raw(data))
    # Xerial framing: magic (8) + version (4) + compatible version (4), then blocks of
    # int32 length + raw snappy block. The running total is checked before each block is
    # inflated, and the blocks are joined straight from cramjam's buffers (one copy).
    pos = 16
    end = len(data)
    total = 0
    parts: list[Any] = []
    while pos < end:
        if pos + 4 > end:
            raise CorruptRecordError("truncated xerial snappy block length")
        (n,) = _INT32.unpack_from(data, pos)
        pos += 4
        if n < 0 or pos + n > end:
            raise CorruptRecordError(f"xerial snappy block of {n} bytes overruns the payload")
        block = data[pos:pos + n]
        total += _snappy_raw_len(block)
        if limit is not None and total > limit:
            raise _too_big("snappy", limit)
        parts.append(cramjam.snappy.decompress_raw(block))
        pos += n
    return b"".join(parts)


def _inflate_sized(codec: Any, name: str, data: Buffer, size: int, limit: int) -> bytes:
    """Decompress into a buffer of ``size`` bytes (at most ``limit``): what the headers say
    the payload holds, or at most can. The codec cannot write past it, so the output stays
    within it whatever the payload does; one that does not fit (several gzip members, or
    headers that lie) goes the exact way."""
    out = bytearray(size)
    try:
        n = int(codec.decompress_into(data, out))
    except cramjam.DecompressionError:
        n = -1
    if n < 0:
        del out  # before the second buffer is taken
        return _inflate_bounded(codec, name, data, limit)
    return bytes(out) if n == size else bytes(memoryview(out)[:n])


def _gunzip(data: Buffer, limit: int) -> bytes:
    # A gzip member ends with ISIZE, its uncompressed size mod 2**32, which the decoder
    # checks; Kafka writers produce one member. A trailer past the limit is refused before
    # any work.
    if len(data) < 4:
        return _inflate_bounded(cramjam.gzip, "gzip", data, limit)
    (size,) = _UINT32_LE.unpack_from(data, len(data) - 4)
    if size > limit:
        raise _too_big("gzip", limit, size)
    return _inflate_sized(cramjam.gzip, "gzip", data, size, limit)


def _zstd_bound(data: Buffer, limit: int) -> tuple[int, int | None]:
    """Walk the zstd frames in ``data``: the most bytes they can decompress to, and the sum
    of the content sizes their headers declare (None once one does not: streaming writers,
    such as the Java client's, leave it out). Stops early once either passes ``limit``.

    A compressed block decompresses to at most 128 KiB (the format's block maximum, which
    the decoder enforces), a raw or RLE block to exactly its stated size, so the bound holds
    for anything the decoder accepts; writers fill their blocks, so it is within a block of
    the true size.

    Raises:
        CorruptRecordError: the frames are truncated or malformed.
    """
    end = len(data)
    pos = 0
    bound = 0
    declared: int | None = 0
    while pos < end:
        if pos + 8 > end:
            raise CorruptRecordError("truncated zstd frame header")
        (magic,) = _UINT32_LE.unpack_from(data, pos)
        if magic & 0xFFFFFFF0 == _SKIPPABLE_MAGIC:
            pos += 8 + _UINT32_LE.unpack_from(data, pos + 4)[0]
            continue
        if magic != _ZSTD_MAGIC:
            raise CorruptRecordError(f"zstd payload holds no frame at byte {pos}")
        fhd = data[pos + 4]
        single_segment = fhd >> 5 & 1
        fcs_size = (single_segment, 2, 4, 8)[fhd >> 6]
        pos += 5 + (1 - single_segment) + (0, 1, 2, 4)[fhd & 3]
        if pos + fcs_size > end:
            raise CorruptRecordError("truncated zstd frame header")
        if not fcs_size:
            declared = None
        elif declared is not None:
            declared += int.from_bytes(data[pos:pos + fcs_size], "little") + (
                256 if fcs_size == 2 else 0)
            if declared > limit:
                return bound, declared
        pos += fcs_size
        last = 0
        while not last:
            if pos + 3 > end:
                raise CorruptRecordError("truncated zstd block header")
            header = data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16
            pos += 3
            last = header & 1
            kind = header >> 1 & 3
            size = header >> 3
            if kind == 0:  # raw
                bound += size
                pos += size
            elif kind == 1:  # RLE: one byte, repeated size times
                bound += size
                pos += 1
            elif kind == 2:
                bound += _ZSTD_BLOCK_MAX
                pos += size
            else:
                raise CorruptRecordError("zstd block of the reserved type")
            if bound > limit:
                return bound, declared
        pos += 4 * (fhd >> 2 & 1)  # content checksum
    if pos != end:
        raise CorruptRecordError(f"zstd frame runs {pos - end} bytes past the payload")
    return bound, declared


def _lz4_bound(data: Buffer, limit: int) -> tuple[int, int | None]:
    """Walk the LZ4 frames in ``data``: the most bytes they can decompress to, and the sum
    of the content sizes their headers declare (None once one does not, as neither the Java
    client nor cramjam writes it). Stops early once either passes ``limit``.

    A compressed block decompresses to at most the frame's block maximum (64 KiB to 4 MiB,
    from its descriptor), a stored block to exactly its size; writers fill their blocks, so
    the bound is within a block of the true size.

    Raises:
        CorruptRecordError: the frames are truncated or malformed.
    """
    end = len(data)
    pos = 0
    bound = 0
    declared: int | None = 0
    while pos < end:
        if pos + 8 > end:
            raise CorruptRecordError("truncated lz4 frame header")
        (magic,) = _UINT32_LE.unpack_from(data, pos)
        if magic & 0xFFFFFFF0 == _SKIPPABLE_MAGIC:
            pos += 8 + _UINT32_LE.unpack_from(data, pos + 4)[0]
            continue
        if magic != _LZ4_MAGIC:
            raise CorruptRecordError(f"lz4 payload holds no frame at byte {pos}")
        flg = data[pos + 4]
        block_max = _LZ4_BLOCK_MAX.get(data[pos + 5] >> 4 & 7)
        if flg >> 6 != 1 or block_max is None:
            raise CorruptRecordError("unsupported lz4 frame descriptor")
        pos += 6
        if not flg & 0x08:
            declared = None
        elif pos + 8 > end:
            raise CorruptRecordError("truncated lz4 frame header")
        else:
            if declared is not None:
                declared += _UINT64_LE.unpack_from(data, pos)[0]
                if declared > limit:
                    return bound, declared
            pos += 8
        pos += 1 + 4 * (flg & 1)  # dictionary id, header checksum
        block_checksum = 4 * (flg >> 4 & 1)
        while True:
            if pos + 4 > end:
                raise CorruptRecordError("truncated lz4 block")
            (size,) = _UINT32_LE.unpack_from(data, pos)
            pos += 4
            if not size:  # end mark
                break
            if size & 0x80000000:  # stored uncompressed
                size &= 0x7FFFFFFF
                bound += size
            else:
                bound += block_max
            pos += size + block_checksum
            if bound > limit:
                return bound, declared
        pos += 4 * (flg >> 2 & 1)  # content checksum
    if pos != end:
        raise CorruptRecordError(f"lz4 frame runs {pos - end} bytes past the payload")
    return bound, declared


def _inflate_framed(codec: Any, name: str, data: Buffer, bound: int, declared: int | None,
                    limit: int) -> bytes:
    # lz4 and zstd, from what their headers say (_lz4_bound, _zstd_bound).
    if declared is not None and declared > limit:
        raise _too_big(name, limit, declared)
    if bound > limit:
        return _inflate_bounded(codec, name, data, limit)
    return _inflate_sized(codec, name, data, bound if declared is None else min(declared, bound),
                          limit)


def decompress(codec: int, data: Buffer, *, lz4_legacy_header: bool = False,
               max_size: int | None = None) -> bytes:
    """Decompress a batch payload, within a size limit.

    With ``max_size``, no codec produces (or holds memory for) more than about
    ``max_size`` bytes (see the module notes): a payload is sized from its headers and
    decoded into a buffer of that size, or, when it may go past the limit, into one of
    ``max_size + 1`` bytes; the codec cannot write past either.

    Args:
        codec: codec id from the batch attributes.
        data: the compressed payload.
        lz4_legacy_header: (magic 0 messages) accept the Kafka 0.8/0.9 lz4 header checksum.
        max_size: the most bytes the payload may decompress to; None: no limit.

    Returns:
        The uncompressed bytes.

    Raises:
        UnsupportedCodecError: the codec id is not 0-4.
        DecompressionLimitError: the payload decompresses to more than ``max_size`` bytes.
        CorruptRecordError: the payload is not valid for the codec (no location attached: the
            batch reader re-raises with topic, partition and offset).
        InvalidArgumentError: ``max_size`` is negative.
    """
    if max_size is not None and max_size < 0:
        raise InvalidArgumentError(f"max_size must be at least 0, not {max_size}")
    if not isinstance(data, bytes | bytearray):
        # Any buffer (a cramjam Buffer from another library, say), seen as bytes: the
        # header walks below index and slice it.
        data = memoryview(data)
        if data.format != "B" or data.ndim != 1:
            data = data.cast("B")
    try:
        if codec == 0:
            return bytes(data)
        if codec == CompressionType.GZIP:
            if max_size is None:
                return bytes(cramjam.gzip.decompress(data))
            return _gunzip(data, max_size)
        if codec == CompressionType.SNAPPY:
            return _unsnappy(data, max_size)
        if codec == CompressionType.LZ4:
            if lz4_legacy_header:
                # Either checksum may appear (some old clients wrote the correct one);
                # rewriting it to the correct value accepts both.
                data = _lz4_set_header_checksum(bytes(data), broken=False)
            if max_size is None:
                return bytes(cramjam.lz4.decompress(data))
            bound, declared = _lz4_bound(data, max_size)
            return _inflate_framed(cramjam.lz4, "lz4", data, bound, declared, max_size)
        if codec == CompressionType.ZSTD:
            if max_size is None:
                return bytes(cramjam.zstd.decompress(data))
            bound, declared = _zstd_bound(data, max_size)
            return _inflate_framed(cramjam.zstd, "zstd", data, bound, declared, max_size)
    except CorruptRecordError:
        raise
    except Exception as exc:  # cramjam raises its own DecompressionError, or ValueError
        name = CompressionType(codec).name.lower()
        raise CorruptRecordError(f"cannot decompress {name} payload: {exc}") from None
    raise UnsupportedCodecError(f"unknown compression codec id {codec}")
