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
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import Final, Literal, TypeAlias

import cramjam

from kontrakt.errors import CorruptRecordError, UnsupportedCodecError

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


def _xerial_decode(data: bytes) -> bytes:
    # Header: magic (8) + version (4) + compatible version (4), then length-prefixed blocks.
    pos = 16
    end = len(data)
    out = []
    while pos < end:
        if pos + 4 > end:
            raise CorruptRecordError("truncated xerial snappy block length")
        (n,) = _INT32.unpack_from(data, pos)
        pos += 4
        if n < 0 or pos + n > end:
            raise CorruptRecordError(f"xerial snappy block of {n} bytes overruns the payload")
        out.append(_snappy_raw_decode(data[pos:pos + n]))
        pos += n
    return b"".join(out)


#: A snappy element of n bytes yields at most ~21n bytes (a 3-byte copy of 64); a header
#: claiming more is corrupt, and must not make the decoder reserve the claimed size.
_SNAPPY_MAX_RATIO: Final = 22


def _snappy_raw_decode(block: bytes) -> bytes:
    claimed = cramjam.snappy.decompress_raw_len(block)
    if claimed > _SNAPPY_MAX_RATIO * len(block) + 64:
        raise CorruptRecordError(
            f"snappy block of {len(block)} bytes claims {claimed} uncompressed bytes")
    return bytes(cramjam.snappy.decompress_raw(block))


def decompress(codec: int, data: Buffer, *, lz4_legacy_header: bool = False) -> bytes:
    """Decompress a batch payload.

    Args:
        codec: codec id from the batch attributes.
        data: the compressed payload.
        lz4_legacy_header: (magic 0 messages) accept the Kafka 0.8/0.9 lz4 header checksum.

    Returns:
        The uncompressed bytes.

    Raises:
        UnsupportedCodecError: the codec id is not 0-4.
        CorruptRecordError: the payload is not valid for the codec (no location attached: the
            batch reader re-raises with topic, partition and offset).
    """
    try:
        if codec == 0:
            return bytes(data)
        if codec == CompressionType.GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == CompressionType.SNAPPY:
            raw = bytes(data)
            if raw[:8] == _XERIAL_MAGIC:
                return _xerial_decode(raw)
            return _snappy_raw_decode(raw)
        if codec == CompressionType.LZ4:
            if lz4_legacy_header:
                # Either checksum may appear (some old clients wrote the correct one);
                # rewriting it to the correct value accepts both.
                data = _lz4_set_header_checksum(bytes(data), broken=False)
            return bytes(cramjam.lz4.decompress(data))
        if codec == CompressionType.ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except CorruptRecordError:
        raise
    except Exception as exc:  # cramjam raises its own DecompressionError, or ValueError
        name = CompressionType(codec).name.lower()
        raise CorruptRecordError(f"cannot decompress {name} payload: {exc}") from None
    raise UnsupportedCodecError(f"unknown compression codec id {codec}")
