"""Consumer options: the network core's options plus fetching, offsets and groups."""

from __future__ import annotations

from kontrakt._config import Option, options
from kontrakt.clients._hooks import HOOK_OPTIONS
from kontrakt.clients.client import CLIENT_OPTIONS

__all__ = ["CONSUMER_OPTIONS", "GROUP_OPTION_NAMES"]

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
