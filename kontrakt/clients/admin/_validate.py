"""Checks on admin input, done before anything is sent (sans-I/O).

Bad input raises :class:`~kontrakt.errors.InvalidArgumentError` naming the entity and the rule.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar

from kontrakt._types import TopicPartition
from kontrakt.errors import InvalidArgumentError

__all__ = [
    "TOPIC_CONFIG_NAMES",
    "VENDOR_CONFIG_PREFIXES",
    "check_assignment",
    "check_group_id",
    "check_partition",
    "check_partitions",
    "check_topic_config",
    "check_topic_configs",
    "check_topic_name",
    "unique",
]

# Kafka's topic-level configs (TopicConfig in Kafka 4.1). A key outside this set is a typo
# unless it carries a vendor prefix (brokers such as Confluent Server add their own).
TOPIC_CONFIG_NAMES: frozenset[str] = frozenset({
    "cleanup.policy", "compression.type", "compression.gzip.level", "compression.lz4.level",
    "compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages",
    "flush.ms", "follower.replication.throttled.replicas", "index.interval.bytes",
    "leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
    "max.compaction.lag.ms", "max.message.bytes", "message.downconversion.enable",
    "message.format.version", "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms", "message.timestamp.difference.max.ms",
    "message.timestamp.type", "min.cleanable.dirty.ratio", "min.compaction.lag.ms",
    "min.insync.replicas", "preallocate", "remote.log.copy.disable",
    "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes",
    "retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
    "unclean.leader.election.enable",
})

#: Prefixes of broker-specific topic configs that are passed through unchecked.
VENDOR_CONFIG_PREFIXES: tuple[str, ...] = ("confluent.", "tansu.", "redpanda.", "aiven.")

_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
_MAX_TOPIC_LENGTH = 249

T = TypeVar("T")


def check_topic_name(name: object) -> str:
    """Return ``name`` if it is a legal Kafka topic name.

    Raises:
        InvalidArgumentError: not a string, empty, ``.``/``..``, longer than 249 characters,
            or containing characters outside ``[a-zA-Z0-9._-]``.
    """
    if not isinstance(name, str):
        raise InvalidArgumentError(f"topic name must be a str, got {name!r}")
    if not name:
        raise InvalidArgumentError("topic name is empty")
    if name in (".", ".."):
        raise InvalidArgumentError(f"topic name cannot be {name!r}")
    if len(name) > _MAX_TOPIC_LENGTH:
        raise InvalidArgumentError(
            f"topic name is {len(name)} characters long; the limit is {_MAX_TOPIC_LENGTH}")
    if not _LEGAL_TOPIC.fullmatch(name):
        bad = sorted({c for c in name if not _LEGAL_TOPIC.fullmatch(c)})
        raise InvalidArgumentError(
            f"topic name {name!r} has illegal characters {bad}; allowed: a-z A-Z 0-9 . _ -")
    return name


def check_group_id(group_id: object) -> str:
    """Return ``group_id`` if it is a non-empty string.

    Raises:
        InvalidArgumentError: not a string or empty.
    """
    if not isinstance(group_id, str):
        raise InvalidArgumentError(f"group id must be a str, got {group_id!r}")
    if not group_id:
        raise InvalidArgumentError("group id is empty")
    return group_id


def check_partition(topic: str, partition: object) -> int:
    """Return ``partition`` if it is an int >= 0.

    Raises:
        InvalidArgumentError: otherwise.
    """
    if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
        raise InvalidArgumentError(
            f"partition of {topic!r} must be an int >= 0, got {partition!r}")
    return partition


def check_partitions(tps: Iterable[object], what: str) -> list[TopicPartition]:
    """``tps`` as a list of distinct, well-formed :class:`TopicPartition` values.

    Raises:
        InvalidArgumentError: an item is not a TopicPartition, has a bad topic name or
            partition, or is given twice (``what`` names the argument).
    """
    out = []
    for tp in tps:
        if not isinstance(tp, TopicPartition):
            raise InvalidArgumentError(f"{what}: expected TopicPartition, got {tp!r}")
        check_topic_name(tp.topic)
        check_partition(tp.topic, tp.partition)
        out.append(tp)
    return unique(out, "partition")


def check_topic_config(topic: str, key: object, value: object, *,
                       allow_none: bool = False) -> None:
    """Check one topic config entry: a known key (or a vendor-prefixed one) and a string value.

    Raises:
        InvalidArgumentError: unknown key (naming close matches) or a non-string value.
    """
    if not isinstance(key, str) or not key:
        raise InvalidArgumentError(f"config key for topic {topic!r} must be a non-empty str")
    if key not in TOPIC_CONFIG_NAMES and not key.startswith(VENDOR_CONFIG_PREFIXES):
        close = difflib.get_close_matches(key, TOPIC_CONFIG_NAMES, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise InvalidArgumentError(f"unknown topic config {key!r} for topic {topic!r}{hint}")
    if value is None and allow_none:
        return
    if not isinstance(value, str):
        raise InvalidArgumentError(
            f"config {key!r} of topic {topic!r} must be a str value, got {value!r}")


def check_topic_configs(topic: str, configs: Mapping[str, object]) -> None:
    """:func:`check_topic_config` over a mapping."""
    for key, value in configs.items():
        check_topic_config(topic, key, value)


def check_assignment(topic: str, assignment: Sequence[Sequence[int]]) -> None:
    """Check a replica assignment: each entry a non-empty list of distinct broker ids >= 0,
    all entries of the same length.

    Raises:
        InvalidArgumentError: otherwise.
    """
    sizes = set()
    for i, replicas in enumerate(assignment):
        ids = list(replicas)
        if not ids or any(isinstance(b, bool) or not isinstance(b, int) or b < 0 for b in ids):
            raise InvalidArgumentError(
                f"replica assignment of {topic!r} entry {i} must be broker ids >= 0, got {ids}")
        if len(set(ids)) != len(ids):
            raise InvalidArgumentError(
                f"replica assignment of {topic!r} entry {i} repeats a broker: {ids}")
        sizes.add(len(ids))
    if len(sizes) > 1:
        raise InvalidArgumentError(
            f"replica assignment of {topic!r} gives partitions different replica counts")


def unique(items: Iterable[T], what: str) -> list[T]:
    """``items`` as a list, refusing duplicates (a result dict could not hold both).

    Raises:
        InvalidArgumentError: an item appears twice.
    """
    out: list[T] = []
    seen: set[T] = set()
    for item in items:
        if item in seen:
            raise InvalidArgumentError(f"{what} {item!r} is given more than once")
        seen.add(item)
        out.append(item)
    return out
