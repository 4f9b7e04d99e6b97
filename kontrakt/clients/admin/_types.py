"""Admin value types: what goes into admin calls and what comes back.

Frozen, slotted dataclasses; enums carry the protocol's codes (or, for group states and
types, the strings brokers send). Names follow confluent-kafka's ``confluent_kafka.admin``
where it has one, so moving over is mostly an import change.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import ClassVar

from kontrakt._types import OffsetAndMetadata, TopicPartition

__all__ = [
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "AlterConfigOp",
    "AlterConfigOpType",
    "ClusterDescription",
    "ConfigEntry",
    "ConfigResource",
    "ConfigResourceType",
    "ConfigSource",
    "ConfigSynonym",
    "ConfigType",
    "ConsumerGroupDescription",
    "ConsumerGroupListing",
    "ConsumerGroupState",
    "ConsumerGroupType",
    "CreatedTopic",
    "DeletedRecords",
    "GroupListing",
    "IsolationLevel",
    "ListOffsetsResultInfo",
    "LogDirDescription",
    "MemberAssignment",
    "MemberDescription",
    "NewPartitions",
    "NewTopic",
    "Node",
    "OffsetAndMetadata",
    "OffsetSpec",
    "PartitionDescription",
    "ProducerState",
    "ReplicaInfo",
    "ResourcePatternType",
    "ResourceType",
    "ShareGroupDescription",
    "ShareMemberDescription",
    "TopicDescription",
    "TopicPartition",
    "TransactionDescription",
    "TransactionListing",
]


# --- enums with protocol codes -------------------------------------------------------


class ConfigResourceType(IntEnum):
    """Kinds of resources that have configuration (codes of DescribeConfigs & co)."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigSource(IntEnum):
    """Where a config value comes from (DescribeConfigs ``config_source``)."""

    UNKNOWN_CONFIG = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class ConfigType(IntEnum):
    """The declared type of a config (DescribeConfigs v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class AlterConfigOpType(IntEnum):
    """Operations of IncrementalAlterConfigs. APPEND and SUBTRACT apply to list configs."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class ResourceType(IntEnum):
    """Kinds of resources an ACL protects."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class ResourcePatternType(IntEnum):
    """How an ACL's resource name matches: exactly (LITERAL) or as a prefix (PREFIXED).
    ANY and MATCH are for filters only."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    """Operations an ACL allows or denies."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    """Whether an ACL allows or denies. ANY is for filters only."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class IsolationLevel(IntEnum):
    """Which offsets ListOffsets may return: READ_COMMITTED stops at the last stable offset."""

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


class ConsumerGroupState(str, Enum):
    """A group's state as brokers name it. Unrecognised names map to UNKNOWN."""

    UNKNOWN = "Unknown"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    NOT_READY = "NotReady"

    @classmethod
    def parse(cls, value: str | None) -> ConsumerGroupState:
        """The state named ``value`` (case-insensitive), else UNKNOWN."""
        for member in cls:
            if value and member.value.lower() == value.lower():
                return member
        return cls.UNKNOWN


class ConsumerGroupType(str, Enum):
    """A group's type (ListGroups v5+): the classic protocol or KIP-848 ``consumer``."""

    UNKNOWN = "Unknown"
    CLASSIC = "Classic"
    CONSUMER = "Consumer"
    SHARE = "Share"
    STREAMS = "Streams"

    @classmethod
    def parse(cls, value: str | None) -> ConsumerGroupType:
        """The type named ``value`` (case-insensitive), else UNKNOWN."""
        for member in cls:
            if value and member.value.lower() == value.lower():
                return member
        return cls.UNKNOWN


# --- inputs --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NewTopic:
    """A topic to create.

    Attributes:
        topic: the name: 1-249 characters of ``[a-zA-Z0-9._-]``, not ``.`` or ``..``.
        num_partitions: number of partitions; -1 for the broker's default (or when
            ``replica_assignment`` is given).
        replication_factor: copies of each partition; -1 for the broker's default.
        replica_assignment: broker ids for each partition (outer index = partition);
            excludes ``num_partitions`` and ``replication_factor``.
        config: topic configs, e.g. ``{"cleanup.policy": "compact"}``.
    """

    topic: str
    num_partitions: int = -1
    replication_factor: int = -1
    replica_assignment: Sequence[Sequence[int]] | None = None
    config: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NewPartitions:
    """Grow a topic to ``new_total_count`` partitions.

    Attributes:
        replica_assignment: broker ids for each new partition, or None to let the
            controller place them.
    """

    topic: str
    new_total_count: int
    replica_assignment: Sequence[Sequence[int]] | None = None


@dataclass(frozen=True, slots=True)
class ConfigResource:
    """A resource that has configuration; hashable, so results are keyed by it.

    ``ConfigResource(ConfigResource.Type.TOPIC, "orders")``; for brokers the name is the
    broker id as a string (``""`` for the cluster-wide default). ``restype`` also accepts
    ``"topic"``/``"broker"``/... and is normalised to :class:`ConfigResourceType`.
    """

    Type: ClassVar[type[ConfigResourceType]] = ConfigResourceType

    restype: ConfigResourceType
    name: str

    def __post_init__(self) -> None:
        rt = self.restype
        if isinstance(rt, str):
            try:
                rt = ConfigResourceType[rt.upper()]
            except KeyError:
                raise ValueError(f"unknown config resource type {self.restype!r}") from None
        object.__setattr__(self, "restype", ConfigResourceType(rt))


@dataclass(frozen=True, slots=True)
class AlterConfigOp:
    """One change of :meth:`~kontrakt.clients.admin.AsyncAdminClient.incremental_alter_configs`.

    Attributes:
        name: the config key.
        value: the value to SET, APPEND or SUBTRACT (a comma-separated list item); None
            for DELETE (revert to the default).
        op: the operation.
    """

    name: str
    value: str | None = None
    op: AlterConfigOpType = AlterConfigOpType.SET


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Which offset :meth:`list_offsets` looks up: ``OffsetSpec.earliest()``,
    ``OffsetSpec.latest()``, ``OffsetSpec.max_timestamp()`` or
    ``OffsetSpec.for_timestamp(ms)`` (the first offset whose timestamp is >= ms).

    Attributes:
        timestamp: the protocol's value: a time in ms, or -1 latest, -2 earliest,
            -3 max timestamp.
    """

    timestamp: int

    LATEST: ClassVar[int] = -1
    EARLIEST: ClassVar[int] = -2
    MAX_TIMESTAMP: ClassVar[int] = -3

    @classmethod
    def earliest(cls) -> OffsetSpec:
        """The log start offset."""
        return cls(cls.EARLIEST)

    @classmethod
    def latest(cls) -> OffsetSpec:
        """The end offset (high watermark, or last stable offset for READ_COMMITTED)."""
        return cls(cls.LATEST)

    @classmethod
    def max_timestamp(cls) -> OffsetSpec:
        """The offset of the record with the largest timestamp (KIP-734)."""
        return cls(cls.MAX_TIMESTAMP)

    @classmethod
    def for_timestamp(cls, timestamp_ms: int) -> OffsetSpec:
        """The first offset whose timestamp is at or after ``timestamp_ms`` (>= 0)."""
        if timestamp_ms < 0:
            raise ValueError(f"timestamp must be >= 0, got {timestamp_ms}")
        return cls(timestamp_ms)


@dataclass(frozen=True, slots=True)
class AclBinding:
    """An ACL: who (principal, host) may or may not do what (operation) to which resource.

    Attributes:
        restype: the kind of resource (not ANY/UNKNOWN).
        name: the resource name (``kafka-cluster`` for CLUSTER).
        resource_pattern_type: LITERAL or PREFIXED.
        principal: e.g. ``User:alice``.
        host: a host, or ``*``.
        operation: not ANY/UNKNOWN.
        permission_type: ALLOW or DENY.
    """

    restype: ResourceType
    name: str
    resource_pattern_type: ResourcePatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Matches ACLs for describe and delete: None or ANY fields match everything."""

    restype: ResourceType = ResourceType.ANY
    name: str | None = None
    resource_pattern_type: ResourcePatternType = ResourcePatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY


# --- results -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Node:
    """A broker: id, address and rack."""

    id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    """What :meth:`describe_cluster` returns.

    Attributes:
        controller: the active controller as brokers report it, or None.
        authorized_operations: what this client may do on the cluster, when asked for.
    """

    cluster_id: str | None
    controller: Node | None
    nodes: tuple[Node, ...]
    authorized_operations: frozenset[AclOperation] | None = None


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    """One partition of a described topic: its leader, replicas and in-sync replicas; from
    brokers answering DescribeTopicPartitions (KIP-966) also its eligible leader replicas
    and last known ELR (None otherwise, or when the broker does not track them)."""

    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    eligible_leader_replicas: tuple[int, ...] | None = None
    last_known_elr: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class TopicDescription:
    """A topic: its id and partitions (in partition order)."""

    name: str
    topic_id: uuid.UUID
    is_internal: bool
    partitions: tuple[PartitionDescription, ...]


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    """Another source of a config's value, in precedence order."""

    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One config of a described resource.

    Attributes:
        value: None when unset or sensitive.
        is_default: the value is the default (derived from ``source`` on v1+).
    """

    name: str
    value: str | None
    source: ConfigSource = ConfigSource.UNKNOWN_CONFIG
    is_read_only: bool = False
    is_default: bool = False
    is_sensitive: bool = False
    synonyms: tuple[ConfigSynonym, ...] = ()
    type: ConfigType = ConfigType.UNKNOWN
    documentation: str | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupListing:
    """A group as ListGroups reports it.

    Attributes:
        is_simple_consumer_group: the group has no protocol type (only commits offsets).
        state: UNKNOWN when the broker predates ListGroups v4.
        type: UNKNOWN when the broker predates ListGroups v5.
    """

    group_id: str
    is_simple_consumer_group: bool
    state: ConsumerGroupState = ConsumerGroupState.UNKNOWN
    type: ConsumerGroupType = ConsumerGroupType.UNKNOWN
    protocol_type: str = ""


@dataclass(frozen=True, slots=True)
class GroupListing:
    """A group of any type as ListGroups reports it (Java's ``GroupListing``).

    Attributes:
        group_id: the group's id.
        type: CLASSIC, CONSUMER (KIP-848), SHARE or STREAMS; UNKNOWN when the broker
            predates ListGroups v5.
        protocol_type: the group's protocol type: ``"consumer"`` for consumer groups (of
            either protocol), ``"share"``, ``"streams"``, ``"connect"`` for Connect workers,
            ``""`` for a group that only commits offsets.
        state: the group's state; UNKNOWN when the broker predates ListGroups v4.
    """

    group_id: str
    type: ConsumerGroupType = ConsumerGroupType.UNKNOWN
    protocol_type: str = ""
    state: ConsumerGroupState = ConsumerGroupState.UNKNOWN

    @property
    def is_simple_consumer_group(self) -> bool:
        """A classic group without a protocol type: its members only commit offsets (as
        Java's, False while the type is not known)."""
        return self.type is ConsumerGroupType.CLASSIC and not self.protocol_type


@dataclass(frozen=True, slots=True)
class MemberAssignment:
    """The partitions assigned to a member, and the assignor's user data."""

    topic_partitions: tuple[TopicPartition, ...] = ()
    user_data: bytes | None = None


@dataclass(frozen=True, slots=True)
class MemberDescription:
    """A member of a described consumer group.

    Attributes:
        subscription: the topics the member subscribed to (decoded from its metadata).
        owned_partitions: partitions the member said it owned (cooperative protocols).
        rack_id: the member's rack (subscription v3+).
        metadata, raw_assignment: the undecoded blobs, for non-consumer protocols.
        target_assignment: the partitions the coordinator is moving the member towards
            (KIP-848 groups; None for a classic group).
        member_epoch: the member's epoch (KIP-848 groups; None for a classic group).
        upgraded: whether the member heartbeats with the consumer protocol (True) or is a
            classic member of a KIP-848 group (False); None when not known (a classic
            group, or ConsumerGroupDescribe v0).
    """

    member_id: str
    client_id: str
    host: str
    assignment: MemberAssignment
    group_instance_id: str | None = None
    subscription: tuple[str, ...] = ()
    owned_partitions: tuple[TopicPartition, ...] = ()
    rack_id: str | None = None
    metadata: bytes = b""
    raw_assignment: bytes = b""
    target_assignment: MemberAssignment | None = None
    member_epoch: int | None = None
    upgraded: bool | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescription:
    """A described group.

    Attributes:
        partition_assignor: the chosen protocol, e.g. ``range`` (for a KIP-848 group, the
            server-side assignor, e.g. ``uniform``).
        coordinator: the broker that coordinates the group.
        type: CONSUMER for a group of the KIP-848 consumer protocol (described with
            ConsumerGroupDescribe), CLASSIC for one described with DescribeGroups.
        group_epoch, target_assignment_epoch: the KIP-848 group's epoch and the epoch of
            its target assignment; None for a classic group.
    """

    group_id: str
    is_simple_consumer_group: bool
    members: tuple[MemberDescription, ...]
    partition_assignor: str
    state: ConsumerGroupState
    coordinator: Node | None
    protocol_type: str = ""
    authorized_operations: frozenset[AclOperation] | None = None
    type: ConsumerGroupType = ConsumerGroupType.CLASSIC
    group_epoch: int | None = None
    target_assignment_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class ShareMemberDescription:
    """A member of a described share group (KIP-932).

    Attributes:
        host: the member's address as the coordinator saw it.
        rack_id: the member's ``client.rack``, or None.
        subscription: the topics the member subscribed to.
        assignment: the partitions the coordinator assigned the member.
        member_epoch: the member's epoch.
    """

    member_id: str
    client_id: str
    host: str
    rack_id: str | None
    subscription: tuple[str, ...]
    assignment: MemberAssignment
    member_epoch: int


@dataclass(frozen=True, slots=True)
class ShareGroupDescription:
    """A described share group (KIP-932), as Java's ``ShareGroupDescription``.

    Attributes:
        state: the group's state (``EMPTY``, ``STABLE``, ``DEAD``; UNKNOWN otherwise).
        partition_assignor: the coordinator's share assignor, e.g. ``simple``.
        coordinator: the broker that coordinates the group.
        group_epoch, target_assignment_epoch: the group's epoch and the epoch of its
            target assignment.
        authorized_operations: what this client may do on the group, when asked for.
    """

    group_id: str
    members: tuple[ShareMemberDescription, ...]
    partition_assignor: str
    state: ConsumerGroupState
    coordinator: Node | None
    group_epoch: int
    target_assignment_epoch: int
    authorized_operations: frozenset[AclOperation] | None = None


@dataclass(frozen=True, slots=True)
class ListOffsetsResultInfo:
    """A looked-up offset with its record's timestamp (-1 when not applicable)."""

    offset: int
    timestamp: int
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class DeletedRecords:
    """The partition's new log start offset after :meth:`delete_records`."""

    low_watermark: int


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """A replica in a log directory: its size, lag behind the leader's end offset, and
    whether it is a future replica (being moved to this directory)."""

    size: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    """A broker's log directory.

    Attributes:
        error: the directory's error (e.g. KAFKA_STORAGE_ERROR), or None.
        total_bytes, usable_bytes: -1 when the broker does not say (before v4).
    """

    path: str
    error: BaseException | None
    replicas: Mapping[TopicPartition, ReplicaInfo]
    total_bytes: int = -1
    usable_bytes: int = -1


@dataclass(frozen=True, slots=True)
class ProducerState:
    """An active producer of a partition (DescribeProducers)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_transaction_start_offset: int


@dataclass(frozen=True, slots=True)
class TransactionListing:
    """A transaction as ListTransactions reports it."""

    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """A transaction as its coordinator describes it.

    Attributes:
        state: e.g. ``Ongoing``, ``PrepareCommit``, ``CompleteAbort``, ``Empty``.
        transaction_start_time_ms: -1 when no transaction is open.
    """

    transactional_id: str
    coordinator_id: int
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int
    topic_partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class CreatedTopic:
    """What the controller reports for a created (or validated) topic.

    Attributes:
        topic_id: the zero UUID when the broker predates CreateTopics v7.
        num_partitions, replication_factor: -1 when the broker predates v5.
        config: the topic's effective configs (v5+), else empty.
    """

    name: str
    topic_id: uuid.UUID
    num_partitions: int = -1
    replication_factor: int = -1
    config: Mapping[str, ConfigEntry] = field(default_factory=dict)
