"""Consumer protocol blobs: the subscription and assignment bytes inside JoinGroup / SyncGroup.

These are not regular request messages. JoinGroup carries each member's
``ConsumerProtocolSubscription`` as opaque ``metadata`` bytes and SyncGroup carries each member's
``ConsumerProtocolAssignment`` as opaque ``assignment`` bytes; only consumers read them. Both are
"data" schemas of the Kafka message specifications, never flexible, and start with an int16
version header (written here by hand with :mod:`kontrakt.protocol.primitives`).

Versions (facts of ConsumerProtocolSubscription.json / ConsumerProtocolAssignment.json):

* Subscription v0: topics, user_data. v1 adds owned_partitions, v2 generation_id, v3 rack_id.
* Assignment v0-v3 all have the same fields: assigned partitions, user_data (v1-v3 exist only to
  track the subscription's version).

Decoders follow Kafka's forward-compatibility rule: a blob with a higher version than we know is
read with our newest layout, and whatever follows the known fields is ignored. Garbage raises
:class:`~kontrakt.errors.CorruptMessageError` (also a ``ValueError``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kontrakt._types import TopicPartition
from kontrakt.errors import CorruptMessageError
from kontrakt.protocol.primitives import (
    INT16,
    INT32,
    read_nullable_bytes,
    read_nullable_string,
    write_nullable_bytes,
    write_nullable_string,
)

__all__ = [
    "ASSIGNMENT_MAX_VERSION",
    "CONSUMER_PROTOCOL_TYPE",
    "SUBSCRIPTION_MAX_VERSION",
    "Assignment",
    "MemberSubscription",
    "Subscription",
    "decode_assignment",
    "decode_subscription",
    "decode_topic_partitions",
    "encode_assignment",
    "encode_subscription",
    "encode_topic_partitions",
    "group_by_topic",
]

#: The ``protocol_type`` of JoinGroup for consumer groups.
CONSUMER_PROTOCOL_TYPE = "consumer"
#: Newest ConsumerProtocolSubscription version this module knows.
SUBSCRIPTION_MAX_VERSION = 3
#: Newest ConsumerProtocolAssignment version this module knows.
ASSIGNMENT_MAX_VERSION = 3

_Buffer = bytes | bytearray | memoryview


@dataclass(frozen=True, slots=True)
class Subscription:
    """What a member sends in JoinGroup (``ConsumerProtocolSubscription``).

    Attributes:
        topics: the topics the member wants to consume.
        user_data: assignor-specific bytes (opaque to the broker), or None.
        owned_partitions: partitions the member owns now (v1+; what cooperative assignors use).
        generation_id: the generation in which ``owned_partitions`` were assigned, -1 if none
            (v2+).
        rack_id: the member's ``client.rack``, or None (v3+).
    """

    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class Assignment:
    """What the leader hands each member in SyncGroup (``ConsumerProtocolAssignment``).

    Attributes:
        partitions: the partitions assigned to the member.
        user_data: assignor-specific bytes, or None.
    """

    partitions: list[TopicPartition]
    user_data: bytes | None = None


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """One member as the group leader sees it when it computes the assignment.

    Attributes:
        member_id: the broker-given member id.
        group_instance_id: the member's ``group.instance.id`` (static membership), or None.
        subscription: the member's decoded subscription.
    """

    member_id: str
    group_instance_id: str | None
    subscription: Subscription


# ---------------------------------------------------------------------------------------------
# Shared pieces


def group_by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """Group partitions by topic, keeping first-seen topic order and partition order.

    Args:
        partitions: any iterable of TopicPartition.

    Returns:
        ``{topic: [partition, ...]}``.
    """
    out: dict[str, list[int]] = {}
    for tp in partitions:
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


def _write_string(buf: bytearray, value: str, what: str) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {type(value).__name__}")
    write_nullable_string(buf, value)


def _write_array_len(buf: bytearray, n: int) -> None:
    buf += INT32.pack(n)


def encode_topic_partitions(buf: bytearray, partitions: Iterable[TopicPartition]) -> None:
    """Append ``[]{Topic string, Partitions []int32}`` (non-flexible) for ``partitions``.

    Partitions of one topic are written together in one entry, in first-seen order.

    Args:
        buf: the buffer to append to.
        partitions: the partitions.

    Raises:
        TypeError: a topic is not a str or a partition is not an int.
    """
    grouped = group_by_topic(partitions)
    _write_array_len(buf, len(grouped))
    for topic, parts in grouped.items():
        _write_string(buf, topic, "topic")
        _write_array_len(buf, len(parts))
        for p in parts:
            if not isinstance(p, int):
                raise TypeError(f"partition must be an int, got {type(p).__name__}")
            buf += INT32.pack(p)


def _read_int16(data: _Buffer, pos: int, what: str) -> tuple[int, int]:
    if pos + 2 > len(data):
        raise CorruptMessageError(f"truncated {what} at offset {pos}")
    return INT16.unpack_from(data, pos)[0], pos + 2


def _read_int32(data: _Buffer, pos: int, what: str) -> tuple[int, int]:
    if pos + 4 > len(data):
        raise CorruptMessageError(f"truncated {what} at offset {pos}")
    return INT32.unpack_from(data, pos)[0], pos + 4


def _read_count(data: _Buffer, pos: int, what: str, min_item_size: int) -> tuple[int, int]:
    """Read a non-nullable array length and check it could fit in the remaining bytes."""
    n, pos = _read_int32(data, pos, f"{what} length")
    if n < 0:
        raise CorruptMessageError(f"{what} is null (length {n}) at offset {pos - 4}")
    if n * min_item_size > len(data) - pos:
        raise CorruptMessageError(
            f"{what} claims {n} entries but only {len(data) - pos} bytes remain"
        )
    return n, pos


def _read_string(data: _Buffer, pos: int, what: str) -> tuple[str, int]:
    value, pos = read_nullable_string(data, pos)
    if value is None:
        raise CorruptMessageError(f"{what} is null at offset {pos - 2}")
    return value, pos


def decode_topic_partitions(data: _Buffer, pos: int) -> tuple[list[TopicPartition], int]:
    """Read ``[]{Topic string, Partitions []int32}`` (non-flexible).

    Args:
        data: the bytes.
        pos: where the array starts.

    Returns:
        (partitions in wire order, position after the array).

    Raises:
        CorruptMessageError: truncated or malformed bytes.
    """
    out: list[TopicPartition] = []
    n, pos = _read_count(data, pos, "topic partition array", 6)
    for _ in range(n):
        topic, pos = _read_string(data, pos, "topic")
        m, pos = _read_count(data, pos, "partition array", 4)
        for _ in range(m):
            p = INT32.unpack_from(data, pos)[0]
            pos += 4
            out.append(TopicPartition(topic, p))
    return out, pos


def _check_version(version: int, max_version: int, what: str) -> None:
    if not isinstance(version, int) or not 0 <= version <= max_version:
        raise ValueError(f"{what} version must be 0..{max_version}, got {version!r}")


def _check_user_data(user_data: object) -> None:
    if user_data is not None and not isinstance(user_data, (bytes, bytearray, memoryview)):
        raise TypeError(f"user_data must be bytes or None, got {type(user_data).__name__}")


# ---------------------------------------------------------------------------------------------
# Subscription


def encode_subscription(sub: Subscription, version: int = SUBSCRIPTION_MAX_VERSION) -> bytes:
    """Encode a subscription as JoinGroup member metadata.

    Fields the chosen version cannot carry are left out (as Kafka does for these ignorable
    fields): owned partitions below v1, generation below v2, rack below v3.

    Args:
        sub: the subscription.
        version: ConsumerProtocolSubscription version, 0..3 (default 3).

    Returns:
        The bytes, starting with the int16 version.

    Raises:
        ValueError: unknown version.
        TypeError: a field has the wrong type.
    """
    _check_version(version, SUBSCRIPTION_MAX_VERSION, "subscription")
    _check_user_data(sub.user_data)
    buf = bytearray(INT16.pack(version))
    _write_array_len(buf, len(sub.topics))
    for topic in sub.topics:
        _write_string(buf, topic, "topic")
    write_nullable_bytes(buf, sub.user_data)
    if version >= 1:
        encode_topic_partitions(buf, sub.owned_partitions)
    if version >= 2:
        buf += INT32.pack(sub.generation_id)
    if version >= 3:
        write_nullable_string(buf, sub.rack_id)
    return bytes(buf)


def decode_subscription(data: _Buffer) -> Subscription:
    """Decode JoinGroup member metadata of any version.

    Versions above 3 are read with the v3 layout and trailing bytes are ignored, as Kafka does.
    Bytes after the known fields of a known version are ignored too (Kafka tolerates them).

    Args:
        data: the member metadata bytes.

    Returns:
        The subscription (fields absent from the version keep their defaults).

    Raises:
        CorruptMessageError: truncated or malformed bytes, or a negative version.
    """
    version, pos = _read_int16(data, 0, "subscription version")
    if version < 0:
        raise CorruptMessageError(f"subscription has negative version {version}")
    n, pos = _read_count(data, pos, "topic array", 2)
    topics: list[str] = []
    for _ in range(n):
        topic, pos = _read_string(data, pos, "topic")
        topics.append(topic)
    user_data, pos = read_nullable_bytes(data, pos)
    owned: list[TopicPartition] = []
    generation_id = -1
    rack_id: str | None = None
    if version >= 1:
        owned, pos = decode_topic_partitions(data, pos)
    if version >= 2:
        generation_id, pos = _read_int32(data, pos, "generation id")
    if version >= 3:
        rack_id, pos = read_nullable_string(data, pos)
    return Subscription(
        topics=topics,
        user_data=user_data,
        owned_partitions=owned,
        generation_id=generation_id,
        rack_id=rack_id,
    )


# ---------------------------------------------------------------------------------------------
# Assignment


def encode_assignment(a: Assignment, version: int = ASSIGNMENT_MAX_VERSION) -> bytes:
    """Encode an assignment as SyncGroup member assignment bytes.

    Args:
        a: the assignment.
        version: ConsumerProtocolAssignment version, 0..3 (default 3; all versions share one
            layout, only the header differs).

    Returns:
        The bytes, starting with the int16 version.

    Raises:
        ValueError: unknown version.
        TypeError: a field has the wrong type.
    """
    _check_version(version, ASSIGNMENT_MAX_VERSION, "assignment")
    _check_user_data(a.user_data)
    buf = bytearray(INT16.pack(version))
    encode_topic_partitions(buf, a.partitions)
    write_nullable_bytes(buf, a.user_data)
    return bytes(buf)


def decode_assignment(data: _Buffer) -> Assignment:
    """Decode SyncGroup member assignment bytes of any version.

    An empty blob decodes to an empty assignment: the broker hands members that the leader left
    out of SyncGroup zero bytes, and Kafka's clients treat that as "nothing assigned".

    Args:
        data: the assignment bytes.

    Returns:
        The assignment.

    Raises:
        CorruptMessageError: truncated or malformed bytes, or a negative version.
    """
    if len(data) == 0:
        return Assignment(partitions=[])
    version, pos = _read_int16(data, 0, "assignment version")
    if version < 0:
        raise CorruptMessageError(f"assignment has negative version {version}")
    partitions, pos = decode_topic_partitions(data, pos)
    user_data, pos = read_nullable_bytes(data, pos)
    return Assignment(partitions=partitions, user_data=user_data)
