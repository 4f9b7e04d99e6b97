"""The cluster's shared state: brokers, topics (partitions, leaders, configs) and settings.

Only the cluster's event loop thread touches it (the public fault-control methods hop onto
that thread), so nothing here locks.
"""

from __future__ import annotations

import asyncio
import time
import uuid
import zlib
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from kontrakt.protocol import errors as E
from kontrakt.testing._cluster._log import PartitionLog

if TYPE_CHECKING:
    from kontrakt.testing._cluster._persist import Storage

__all__ = [
    "TOPIC_CONFIG_DEFAULTS",
    "BrokerState",
    "ClusterSettings",
    "ClusterState",
    "RequestContext",
    "Topic",
    "validate_topic_config",
]

# config_type values of DescribeConfigs v3+
_BOOLEAN, _STRING, _INT, _LONG, _DOUBLE, _LIST = 1, 2, 3, 5, 6, 7
_LONG_MAX = str(2**63 - 1)

#: Kafka's topic-level configuration keys with their defaults and types.
TOPIC_CONFIG_DEFAULTS: Final[dict[str, tuple[str, int]]] = {
    "cleanup.policy": ("delete", _LIST),
    "compression.gzip.level": ("-1", _INT),
    "compression.lz4.level": ("9", _INT),
    "compression.type": ("producer", _STRING),
    "compression.zstd.level": ("3", _INT),
    "delete.retention.ms": ("86400000", _LONG),
    "file.delete.delay.ms": ("60000", _LONG),
    "flush.messages": (_LONG_MAX, _LONG),
    "flush.ms": (_LONG_MAX, _LONG),
    "follower.replication.throttled.replicas": ("", _LIST),
    "index.interval.bytes": ("4096", _INT),
    "leader.replication.throttled.replicas": ("", _LIST),
    "local.retention.bytes": ("-2", _LONG),
    "local.retention.ms": ("-2", _LONG),
    "max.compaction.lag.ms": (_LONG_MAX, _LONG),
    "max.message.bytes": ("1048588", _INT),
    # Kafka 3.x keys that 4.0 dropped, accepted so clients aimed at 3.x can set them
    "message.downconversion.enable": ("true", _BOOLEAN),
    "message.format.version": ("3.0-IV1", _STRING),
    "message.timestamp.difference.max.ms": (_LONG_MAX, _LONG),
    "message.timestamp.after.max.ms": ("3600000", _LONG),
    "message.timestamp.before.max.ms": (_LONG_MAX, _LONG),
    "message.timestamp.type": ("CreateTime", _STRING),
    "min.cleanable.dirty.ratio": ("0.5", _DOUBLE),
    "min.compaction.lag.ms": ("0", _LONG),
    "min.insync.replicas": ("1", _INT),
    "preallocate": ("false", _BOOLEAN),
    "remote.log.copy.disable": ("false", _BOOLEAN),
    "remote.log.delete.on.disable": ("false", _BOOLEAN),
    "remote.storage.enable": ("false", _BOOLEAN),
    "retention.bytes": ("-1", _LONG),
    "retention.ms": ("604800000", _LONG),
    "segment.bytes": ("1073741824", _INT),
    "segment.index.bytes": ("10485760", _INT),
    "segment.jitter.ms": ("0", _LONG),
    "segment.ms": ("604800000", _LONG),
    "unclean.leader.election.enable": ("false", _BOOLEAN),
}

_CHOICES: Final[dict[str, frozenset[str]]] = {
    "compression.type": frozenset({"producer", "uncompressed", "gzip", "snappy", "lz4",
                                   "zstd"}),
    "message.timestamp.type": frozenset({"CreateTime", "LogAppendTime"}),
}


def validate_topic_config(name: str, value: str | None) -> str | None:
    """Why ``name=value`` is not a valid topic config, or None when it is."""
    spec = TOPIC_CONFIG_DEFAULTS.get(name)
    if spec is None:
        return f"Unknown topic config name: {name}"
    if value is None:
        return None
    kind = spec[1]
    try:
        if kind in (_INT, _LONG):
            int(value)
        elif kind == _DOUBLE:
            float(value)
    except ValueError:
        return f"Invalid value {value} for configuration {name}: not a number"
    if kind == _BOOLEAN and value.lower() not in ("true", "false"):
        return f"Invalid value {value} for configuration {name}: expected true or false"
    if name in _CHOICES and value not in _CHOICES[name]:
        return f"Invalid value {value} for configuration {name}: one of {sorted(_CHOICES[name])}"
    if name == "cleanup.policy" and not set(value.split(",")) <= {"delete", "compact", ""}:
        return f"Invalid value {value} for configuration {name}"
    return None


def config_type(name: str) -> int:
    """The DescribeConfigs ``config_type`` of a topic config key."""
    spec = TOPIC_CONFIG_DEFAULTS.get(name)
    return spec[1] if spec else _STRING


@dataclass(slots=True)
class ClusterSettings:
    """Broker-wide settings (Kafka's broker config names in snake case)."""

    auto_create_topics_enable: bool = False
    num_partitions: int = 1
    default_replication_factor: int = 1
    group_initial_rebalance_delay_ms: int = 0
    group_min_session_timeout_ms: int = 1000
    group_max_session_timeout_ms: int = 1_800_000
    transaction_max_timeout_ms: int = 900_000
    offset_metadata_max_bytes: int = 4096
    message_max_bytes: int = 1_048_588
    group_consumer_heartbeat_interval_ms: int = 1000
    group_consumer_session_timeout_ms: int = 45_000
    # SASL: user -> password; None: the listeners need no authentication
    sasl_users: dict[str, str] | None = None
    sasl_mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    # ACLs: checked only with an authorizer (Kafka's authorizer.class.name)
    authorizer: bool = False
    super_users: tuple[str, ...] = ()
    allow_everyone_if_no_acl_found: bool = False
    # delegation tokens: enabled by a secret
    delegation_token_secret_key: str | None = None
    delegation_token_max_lifetime_ms: int = 604_800_000
    delegation_token_expiry_time_ms: int = 86_400_000

    def broker_configs(self) -> dict[str, tuple[str, int]]:
        """The broker configs DescribeConfigs reports: name -> (value, type)."""
        return {
            "auto.create.topics.enable": (str(self.auto_create_topics_enable).lower(),
                                          _BOOLEAN),
            "num.partitions": (str(self.num_partitions), _INT),
            "default.replication.factor": (str(self.default_replication_factor), _INT),
            "group.initial.rebalance.delay.ms": (str(self.group_initial_rebalance_delay_ms),
                                                 _INT),
            "group.min.session.timeout.ms": (str(self.group_min_session_timeout_ms), _INT),
            "group.max.session.timeout.ms": (str(self.group_max_session_timeout_ms), _INT),
            "transaction.max.timeout.ms": (str(self.transaction_max_timeout_ms), _INT),
            "offset.metadata.max.bytes": (str(self.offset_metadata_max_bytes), _INT),
            "message.max.bytes": (str(self.message_max_bytes), _INT),
            "group.consumer.heartbeat.interval.ms": (
                str(self.group_consumer_heartbeat_interval_ms), _INT),
            "group.consumer.session.timeout.ms": (
                str(self.group_consumer_session_timeout_ms), _INT),
        }


@dataclass(slots=True)
class BrokerState:
    """One broker: its listener and the faults set on it."""

    node_id: int
    port: int = 0
    up: bool = True
    rtt_ms: int = 0
    rack: str | None = None
    # api key -> queued (error code, delay ms) for requests to this broker only
    errors: dict[int, deque[tuple[int, int]]] = field(default_factory=dict)


@dataclass(slots=True)
class Topic:
    """A topic: id, partitions (logs), leaders and replicas per partition, explicit configs."""

    name: str
    topic_id: uuid.UUID
    partitions: list[PartitionLog]
    leaders: list[int]
    replicas: list[list[int]]
    configs: dict[str, str]

    def config(self, name: str) -> str:
        """The effective value of a topic config."""
        value = self.configs.get(name)
        return value if value is not None else TOPIC_CONFIG_DEFAULTS[name][0]


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Who sent a request, and to which broker."""

    node_id: int
    client_id: str | None
    client_host: str
    #: the SASL login as ``User:name``, or ``User:ANONYMOUS``
    principal: str = "User:ANONYMOUS"
    #: over SASL or TLS (delegation tokens are refused over PLAINTEXT)
    secure: bool = False
    #: logged in with a delegation token
    token_auth: bool = False


class ClusterState:
    """Everything the request handlers share."""

    def __init__(self, num_brokers: int, settings: ClusterSettings, cluster_id: str) -> None:
        self.settings = settings
        self.cluster_id = cluster_id
        self.brokers = {i: BrokerState(i) for i in range(1, num_brokers + 1)}
        self.topics: dict[str, Topic] = {}
        self.topics_by_id: dict[uuid.UUID, Topic] = {}
        # api key -> queued (error code, delay ms) for any broker
        self.errors: dict[int, deque[tuple[int, int]]] = {}
        # (key type, key) -> broker id, set by tests
        self.coordinators: dict[tuple[int, str], int] = {}
        self._changed = asyncio.Event()
        self._next_producer_id = 1000
        self.groups: Any = None  # GroupCoordinator, set by the server
        self.txns: Any = None  # TransactionCoordinator, set by the server
        self.persist: Storage | None = None  # set once a storage folder was recovered

    # --- clock and change notification ------------------------------------------------------
    @staticmethod
    def now_ms() -> int:
        """The broker clock (wall time, as record timestamps are)."""
        return int(time.time() * 1000)

    def notify(self) -> None:
        """Wake the long-polling fetches: some log or offset moved."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_change(self, timeout: float) -> None:
        """Wait until :meth:`notify` is called or ``timeout`` seconds pass."""
        if timeout <= 0:
            return
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
        except asyncio.TimeoutError:
            pass

    def new_producer_id(self) -> int:
        """A producer id never handed out before."""
        self._next_producer_id += 1
        if self.persist is not None:
            self.persist.next_producer_id(self._next_producer_id)
        return self._next_producer_id

    def last_producer_id(self) -> int:
        """The last producer id handed out."""
        return self._next_producer_id

    def restore_producer_id(self, last: int) -> None:
        """Never hand out ``last`` or a smaller id again (recovery)."""
        self._next_producer_id = max(self._next_producer_id, last)

    # --- brokers ----------------------------------------------------------------------------
    def live_brokers(self) -> list[BrokerState]:
        """Brokers that are up, by node id."""
        return [b for _, b in sorted(self.brokers.items()) if b.up]

    def controller_id(self) -> int:
        """The lowest live node id (Kafka elects one; any live broker will do)."""
        live = self.live_brokers()
        return live[0].node_id if live else -1

    def coordinator_for(self, key_type: int, key: str) -> int:
        """The broker coordinating a group (key type 0) or transactional id (1)."""
        forced = self.coordinators.get((key_type, key))
        if forced is not None:
            return forced
        ids = sorted(self.brokers)
        return ids[zlib.crc32(key.encode()) % len(ids)]

    # --- topics -----------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int, replication_factor: int,
                     configs: dict[str, str] | None = None,
                     assignments: list[list[int]] | None = None) -> Topic:
        """Create a topic (the caller validated its arguments)."""
        topic = Topic(name, uuid.uuid4(), [], [], [], dict(configs or {}))
        self.topics[name] = topic
        self.topics_by_id[topic.topic_id] = topic
        self.add_partitions(topic, partitions, replication_factor, assignments)
        return topic

    def add_partitions(self, topic: Topic, count: int, replication_factor: int,
                       assignments: list[list[int]] | None = None) -> None:
        """Grow ``topic`` to ``count`` partitions, spreading leaders over the brokers."""
        ids = sorted(self.brokers)
        start = zlib.crc32(topic.name.encode()) % len(ids)
        for p in range(len(topic.partitions), count):
            if assignments is not None:
                replicas = list(assignments[p - (count - len(assignments))])
            else:
                first = (start + p) % len(ids)
                replicas = [ids[(first + r) % len(ids)] for r in range(replication_factor)]
            topic.partitions.append(PartitionLog())
            topic.leaders.append(replicas[0])
            topic.replicas.append(replicas)
        self.topic_changed(topic)

    def topic_changed(self, topic: Topic) -> None:
        """Record a topic's partitions, leaders and configs in the storage folder, if any."""
        if self.persist is not None:
            self.persist.topic(topic)

    def delete_topic(self, topic: Topic) -> None:
        """Remove a topic and its logs."""
        self.topics.pop(topic.name, None)
        self.topics_by_id.pop(topic.topic_id, None)
        if self.persist is not None:
            self.persist.topic_deleted(topic)

    def partition(self, name: str, index: int) -> tuple[Topic, PartitionLog] | None:
        """The topic and log of a partition, or None when either is unknown."""
        topic = self.topics.get(name)
        if topic is None or not 0 <= index < len(topic.partitions):
            return None
        return topic, topic.partitions[index]

    def leader_error(self, topic: Topic, index: int, node_id: int) -> int:
        """The error for a partition request sent to ``node_id`` (0 when it leads)."""
        leader = topic.leaders[index]
        if not self.brokers[leader].up:
            return E.LeaderNotAvailableError.code
        return 0 if leader == node_id else E.NotLeaderOrFollowerError.code

    def check_topic_name(self, name: str) -> str | None:
        """Why ``name`` is not a valid topic name, or None."""
        if not name or name in (".", "..") or len(name) > 249:
            return f"Topic name {name!r} is illegal"
        if not all(c.isascii() and (c.isalnum() or c in "._-") for c in name):
            return f"Topic name {name!r} is illegal, it contains a character other than " \
                   "ASCII alphanumerics, '.', '_' and '-'"
        return None
