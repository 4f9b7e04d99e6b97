"""Consumer options (the network core's plus fetching, offsets and groups), declared here and
parsed once into :class:`ConsumerSettings` (with the group's :class:`GroupSettings`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kontrakt._config import Option, options
from kontrakt.clients._hooks import HOOK_OPTIONS
from kontrakt.clients.client import CLIENT_OPTIONS
from kontrakt.clients.group._settings import GroupSettings, group_settings

__all__ = ["CONSUMER_OPTIONS", "GROUP_OPTION_NAMES", "ConsumerSettings", "consumer_settings"]

_FETCH = options(
    Option("fetch.min.bytes", "int", 1, minimum=1,
           doc="the broker waits (up to fetch.max.wait.ms) until this much data is ready"),
    Option("fetch.max.wait.ms", "int", 500, minimum=0,
           doc="longest time the broker holds a fetch waiting for fetch.min.bytes"),
    Option("fetch.max.bytes", "int", 52_428_800, minimum=1,
           doc="most data one fetch response may carry (across partitions)"),
    Option("max.partition.fetch.bytes", "int", 1_048_576, minimum=1,
           doc="most data one partition may contribute to one fetch response"),
    Option("max.decompressed.batch.multiple", "int", 64, minimum=1,
           doc="a fetched batch may decompress to at most this many times "
               "max.partition.fetch.bytes (64 MiB by default: a 1 MiB batch of text "
               "compressing 64 to 1); decompression stops there, and a batch inflating "
               "further (a decompression bomb) is a DecompressionLimitError "
               "(CorruptRecordError) for its partition, raised after the records before it"),
    Option("queued.max.messages.kbytes", "int", 65_536, minimum=1,
           doc="memory cap (KiB) on fetched records waiting to be consumed, counted as "
               "decoded (a record's bytes plus 288, a header 128); above it nothing more is "
               "fetched or decoded until the application consumes. Records are decoded an "
               "eighth of it at a time (64 KiB to 8 MiB), so they take at most about 1.25 "
               "times it, besides the batch being decoded (up to max.partition.fetch.bytes x "
               "max.decompressed.batch.multiple) and the responses in flight (up to "
               "fetch.max.bytes per broker). Records of paused partitions do not hold the "
               "others back: a paused partition's decoding stops at the cap, and the rest "
               "is fetched again on resume"),
    Option("max.poll.records", "int", 500, minimum=1,
           doc="most records one getmany() returns by default"),
    Option("auto.offset.reset", "str", "latest",
           choices=("earliest", "latest", "none", "smallest", "largest", "beginning", "end",
                    "error"),
           doc="where to start when there is no valid position: earliest, latest, or none "
               "(raise OffsetOutOfRangeResetError)"),
    Option("check.crcs", "bool", True, doc="verify the CRC of every fetched batch"),
    Option("isolation.level", "str", "read_uncommitted",
           choices=("read_uncommitted", "read_committed"),
           doc="read_committed hides records of open and aborted transactions"),
    Option("client.rack", "str", doc="rack id sent with fetches (follower fetching, KIP-392)"),
    Option("fetch.sessions", "bool", True,
           doc="use incremental fetch sessions (KIP-227) where the broker offers them"),
)

_GROUP = options(
    Option("group.id", "str", doc="the consumer group; needed for subscribe() and commits"),
    Option("group.instance.id", "str", doc="static membership id (KIP-345)"),
    Option("group.protocol", "str", "classic", choices=("classic", "consumer"),
           doc="classic (JoinGroup/SyncGroup) or consumer (KIP-848 ConsumerGroupHeartbeat)"),
    Option("group.remote.assignor", "str",
           doc="server-side assignor for group.protocol=consumer (uniform, range)"),
    Option("session.timeout.ms", "int", 45_000, minimum=1,
           doc="a member is dropped when no heartbeat arrives within this"),
    Option("heartbeat.interval.ms", "int", 3_000, minimum=1, doc="how often to heartbeat"),
    Option("max.poll.interval.ms", "int", 300_000, minimum=1,
           doc="leave the group when the application does not poll for this long"),
    Option("rebalance.timeout.ms", "int",
           doc="how long the coordinator waits for members to rejoin (default: "
               "max.poll.interval.ms)"),
    Option("partition.assignment.strategy", "any", "range,roundrobin",
           doc="assignors: names ('range', 'roundrobin', 'sticky', 'cooperative-sticky'), "
               "a comma-separated string, a list, or Assignor objects"),
    Option("enable.auto.commit", "bool", True,
           doc="commit every auto.commit.interval.ms, on revocation and on close; at least "
               "once: the timed and revocation commits cover only records the application "
               "moved past by polling again (a revocation waits up to session.timeout.ms/2 "
               "for that poll), close() covers every record handed out"),
    Option("enable.auto.offset.store", "bool", True,
           doc="false: auto commit and commit() without offsets commit only the offsets "
               "given to store_offsets() (librdkafka's model); true: records count as "
               "processed at the next poll, or earlier through store_offsets()"),
    Option("auto.commit.interval.ms", "int", 5_000, minimum=1,
           doc="how often positions are committed when enable.auto.commit is on"),
    Option("exclude.internal.topics", "bool", True,
           doc="pattern subscriptions never match internal topics (__consumer_offsets)"),
    Option("allow.auto.create.topics", "bool", False,
           doc="kept for compatibility; subscriptions never create topics"),
)

CONSUMER_OPTIONS: dict[str, Option] = {**CLIENT_OPTIONS, **_FETCH, **_GROUP, **HOOK_OPTIONS}
"""Every option :class:`~kontrakt.clients.consumer.AsyncConsumer` understands."""

GROUP_OPTION_NAMES: frozenset[str] = frozenset(_GROUP)

_RESET_ALIASES = {"smallest": "earliest", "beginning": "earliest", "largest": "latest",
                  "end": "latest", "error": "none"}


def reset_strategy(value: str) -> str:
    """Normalise an ``auto.offset.reset`` value (librdkafka aliases) to earliest/latest/none."""
    return _RESET_ALIASES.get(value, value)


@dataclass(frozen=True, slots=True)
class ConsumerSettings:
    """The consumer options after validation, in the units the code uses (seconds, bytes).

    The network core's own options stay in the :class:`~kontrakt._config.ClientConfig`
    (``AsyncKafkaClient`` parses them).
    """

    fetch_max_wait_ms: int
    fetch_min_bytes: int
    fetch_max_bytes: int
    max_partition_fetch_bytes: int
    #: The most bytes one fetched batch may decompress to (max.partition.fetch.bytes x
    #: max.decompressed.batch.multiple).
    max_batch_bytes: int
    #: queued.max.messages.kbytes, in bytes.
    queued_max_bytes: int
    max_poll_records: int
    #: earliest, latest or none (librdkafka's aliases resolved).
    auto_offset_reset: str
    check_crcs: bool
    read_committed: bool
    rack: str | None
    fetch_sessions: bool
    request_timeout: float
    retry_backoff: float
    retry_backoff_max: float
    auto_offset_store: bool
    #: The group's settings; None without ``group.id``.
    group: GroupSettings | None


def consumer_settings(cfg: Mapping[str, Any]) -> ConsumerSettings:
    """The settings of a validated consumer configuration (``CONSUMER_OPTIONS``).

    Raises:
        ConfigError: a bad ``partition.assignment.strategy`` (checked with ``group.id`` only).
    """
    partition_max = int(cfg["max.partition.fetch.bytes"])
    return ConsumerSettings(
        fetch_max_wait_ms=int(cfg["fetch.max.wait.ms"]),
        fetch_min_bytes=int(cfg["fetch.min.bytes"]),
        fetch_max_bytes=int(cfg["fetch.max.bytes"]),
        max_partition_fetch_bytes=partition_max,
        max_batch_bytes=partition_max * int(cfg["max.decompressed.batch.multiple"]),
        queued_max_bytes=cfg["queued.max.messages.kbytes"] * 1024,
        max_poll_records=int(cfg["max.poll.records"]),
        auto_offset_reset=reset_strategy(cfg["auto.offset.reset"]),
        check_crcs=bool(cfg["check.crcs"]),
        read_committed=cfg["isolation.level"] == "read_committed",
        rack=cfg.get("client.rack"),
        fetch_sessions=bool(cfg.get("fetch.sessions", True)),
        request_timeout=cfg["request.timeout.ms"] / 1000,
        retry_backoff=cfg["retry.backoff.ms"] / 1000,
        retry_backoff_max=cfg["retry.backoff.max.ms"] / 1000,
        auto_offset_store=bool(cfg["enable.auto.offset.store"]),
        group=group_settings(cfg) if cfg["group.id"] else None,
    )

