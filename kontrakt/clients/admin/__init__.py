"""Kafka administration: :class:`AdminClient` (blocking) and :class:`AsyncAdminClient`.

Calls about several entities return ``dict`` entity -> result and raise
:class:`~kontrakt.errors.PartialFailureError` (carrying every entity's outcome) when some
failed, or return the failures in the dict with ``return_exceptions=True``. A call about a
single entity raises that entity's own error (e.g. ``TopicAlreadyExistsError``, from
:mod:`kontrakt.errors`) instead of a PartialFailureError. Bad input raises
:class:`~kontrakt.errors.InvalidArgumentError` before anything is sent.
"""

from __future__ import annotations

from kontrakt.clients.admin._acls import ReplicaLogDirInfo, TopicPartitionReplica
from kontrakt.clients.admin._admin import ADMIN_OPTIONS, AsyncAdminClient
from kontrakt.clients.admin._offsets import OffsetShift
from kontrakt.clients.admin._partition_admin import (
    ElectionType,
    FeatureMetadata,
    FeatureUpdate,
    FeatureUpgradeType,
    FinalizedVersionRange,
    PartitionReassignment,
    SupportedVersionRange,
    TopicPartitionsPage,
)
from kontrakt.clients.admin._quorum import (
    QuorumInfo,
    QuorumNode,
    QuorumReplicaState,
    RaftVoterEndpoint,
)
from kontrakt.clients.admin._quotas import (
    ClientQuotaAlteration,
    ClientQuotaEntity,
    ClientQuotaFilter,
    ClientQuotaFilterComponent,
    ClientQuotaMatchType,
)
from kontrakt.clients.admin._scram import (
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialDeletion,
    UserScramCredentialsDescription,
    UserScramCredentialUpsertion,
)
from kontrakt.clients.admin._sync import AdminClient
from kontrakt.clients.admin._tokens import DelegationToken, KafkaPrincipal, TokenInformation
from kontrakt.clients.admin._transactions import (
    AbortTransactionSpec,
    HangingTransaction,
    ProducerIdAndEpoch,
)
from kontrakt.clients.admin._types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AlterConfigOp,
    AlterConfigOpType,
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    ConsumerGroupDescription,
    ConsumerGroupListing,
    ConsumerGroupState,
    ConsumerGroupType,
    CreatedTopic,
    DeletedRecords,
    GroupListing,
    IsolationLevel,
    ListOffsetsResultInfo,
    LogDirDescription,
    MemberAssignment,
    MemberDescription,
    NewPartitions,
    NewTopic,
    Node,
    OffsetSpec,
    PartitionDescription,
    ProducerState,
    ReplicaInfo,
    ResourcePatternType,
    ResourceType,
    ShareGroupDescription,
    ShareMemberDescription,
    TopicDescription,
    TransactionDescription,
    TransactionListing,
)
from kontrakt.clients.admin._validate import TOPIC_CONFIG_NAMES

__all__ = [
    "ADMIN_OPTIONS",
    "TOPIC_CONFIG_NAMES",
    "AbortTransactionSpec",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "AdminClient",
    "AlterConfigOp",
    "AlterConfigOpType",
    "AsyncAdminClient",
    "ClientQuotaAlteration",
    "ClientQuotaEntity",
    "ClientQuotaFilter",
    "ClientQuotaFilterComponent",
    "ClientQuotaMatchType",
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
    "DelegationToken",
    "DeletedRecords",
    "GroupListing",
    "HangingTransaction",
    "IsolationLevel",
    "KafkaPrincipal",
    "ListOffsetsResultInfo",
    "LogDirDescription",
    "MemberAssignment",
    "MemberDescription",
    "NewPartitions",
    "NewTopic",
    "Node",
    "OffsetShift",
    "OffsetSpec",
    "PartitionDescription",
    "ProducerIdAndEpoch",
    "ProducerState",
    "ReplicaInfo",
    "ReplicaLogDirInfo",
    "ResourcePatternType",
    "ResourceType",
    "ScramCredentialInfo",
    "ScramMechanism",
    "ShareGroupDescription",
    "ShareMemberDescription",
    "TokenInformation",
    "TopicDescription",
    "TopicPartitionReplica",
    "TransactionDescription",
    "TransactionListing",
    "UserScramCredentialAlteration",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
    "UserScramCredentialsDescription",
]

__all__ += [
    "ElectionType",
    "FeatureMetadata",
    "FeatureUpdate",
    "FeatureUpgradeType",
    "FinalizedVersionRange",
    "PartitionReassignment",
    "QuorumInfo",
    "QuorumNode",
    "QuorumReplicaState",
    "RaftVoterEndpoint",
    "SupportedVersionRange",
    "TopicPartitionsPage",
]
