"""The consumer protocol's blobs inside classic group messages, by hand (sans-I/O).

JoinGroup/DescribeGroups member metadata is a ``ConsumerProtocolSubscription`` and SyncGroup /
DescribeGroups assignments are a ``ConsumerProtocolAssignment``: an int16 version followed by
non-flexible fields (int16-length strings, int32-length arrays and bytes). Later versions only
append fields, so a blob of a newer version than we know is read up to what we know (as the
Java client does). Versions 0-3 are understood:

- subscription v0: topics, user_data; v1 + owned_partitions; v2 + generation_id; v3 + rack_id
- assignment v0-3: assigned_partitions, user_data (unchanged across versions)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kontrakt._types import TopicPartition
from kontrakt.errors import CorruptMessageError

__all__ = [
    "ConsumerAssignment",
    "ConsumerSubscription",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
]


@dataclass(frozen=True, slots=True)
class ConsumerSubscription:
    """A decoded ConsumerProtocolSubscription."""

    version: int
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class ConsumerAssignment:
    """A decoded ConsumerProtocolAssignment."""

    version: int
    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = memoryview(buf)
        self.pos = 0

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise CorruptMessageError(
                f"consumer protocol blob truncated at byte {self.pos} (wanted {n} more)")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def at_end(self) -> bool:
        return self.pos >= len(self.buf)

    def int16(self) -> int:
        return int(struct.unpack(">h", self._take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self._take(4))[0])

    def string(self) -> str | None:
        n = self.int16()
        if n < 0:
            return None
        try:
            return bytes(self._take(n)).decode()
        except UnicodeDecodeError as exc:
            raise CorruptMessageError(f"consumer protocol string is not UTF-8: {exc}") from None

    def bytes_(self) -> bytes | None:
        n = self.int32()
        return None if n < 0 else bytes(self._take(n))

    def count(self) -> int:
        n = self.int32()
        if n > len(self.buf):  # a count larger than the blob cannot be real
            raise CorruptMessageError(f"consumer protocol array count {n} is impossible")
        return max(n, 0)

    def topic_partitions(self) -> tuple[TopicPartition, ...]:
        out: list[TopicPartition] = []
        for _ in range(self.count()):
            topic = self.string() or ""
            for _ in range(self.count()):
                out.append(TopicPartition(topic, self.int32()))
        return tuple(out)


def decode_subscription(blob: bytes) -> ConsumerSubscription:
    """Decode member metadata of the ``consumer`` protocol.

    Raises:
        CorruptMessageError: truncated or malformed blob.
    """
    r = _Reader(blob)
    version = r.int16()
    if version < 0:
        raise CorruptMessageError(f"consumer subscription version {version} is negative")
    topics = tuple(r.string() or "" for _ in range(r.count()))
    user_data = r.bytes_()
    owned: tuple[TopicPartition, ...] = ()
    generation, rack = -1, None
    if version >= 1 and not r.at_end():
        owned = r.topic_partitions()
    if version >= 2 and not r.at_end():
        generation = r.int32()
    if version >= 3 and not r.at_end():
        rack = r.string()
    return ConsumerSubscription(version, topics, user_data, owned, generation, rack)


def decode_assignment(blob: bytes) -> ConsumerAssignment:
    """Decode a member assignment of the ``consumer`` protocol (empty blob: no assignment).

    Raises:
        CorruptMessageError: truncated or malformed blob.
    """
    if not blob:
        return ConsumerAssignment(0, ())
    r = _Reader(blob)
    version = r.int16()
    if version < 0:
        raise CorruptMessageError(f"consumer assignment version {version} is negative")
    partitions = r.topic_partitions()
    user_data = r.bytes_() if not r.at_end() else None
    return ConsumerAssignment(version, partitions, user_data)


def _string(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _bytes(b: bytes | None) -> bytes:
    return struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b


def _topic_partitions(tps: tuple[TopicPartition, ...]) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = [struct.pack(">i", len(by_topic))]
    for topic, parts in by_topic.items():
        out.append(_string(topic) + struct.pack(f">i{len(parts)}i", len(parts), *parts))
    return b"".join(out)


def encode_subscription(sub: ConsumerSubscription) -> bytes:
    """Encode a subscription at ``sub.version`` (fields a version lacks are left out)."""
    out = [struct.pack(">hi", sub.version, len(sub.topics))]
    out += [_string(t) for t in sub.topics]
    out.append(_bytes(sub.user_data))
    if sub.version >= 1:
        out.append(_topic_partitions(sub.owned_partitions))
    if sub.version >= 2:
        out.append(struct.pack(">i", sub.generation_id))
    if sub.version >= 3:
        out.append(_string(sub.rack_id))
    return b"".join(out)


def encode_assignment(assignment: ConsumerAssignment) -> bytes:
    """Encode an assignment at ``assignment.version``."""
    return (struct.pack(">h", assignment.version) + _topic_partitions(assignment.partitions)
            + _bytes(assignment.user_data))
