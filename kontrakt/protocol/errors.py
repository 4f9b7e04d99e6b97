"""Kafka broker error codes as exception classes.

One class per error code a Kafka 4.1 broker can return (-1 and 1 through 133), each a subclass
of :class:`kontrakt.errors.BrokerResponseError` with ``code``, ``error_name``, ``retriable``,
``invalid_metadata`` and a ``description`` (its docstring). The flags follow the Java client:
``retriable`` marks codes whose exception is a ``RetriableException`` there, and
``invalid_metadata`` those that are an ``InvalidMetadataException`` (refresh metadata, then
retry; every such error is also retriable).

Three names are shared with :mod:`kontrakt.errors`: :class:`CorruptMessageError`,
:class:`UnsupportedVersionError` and :class:`TransactionAbortableError` here also derive from
the class of the same name there, so catching the general class catches the broker's code too.

The classes below are written out one per code (generated from a table of the codes, names,
flags and descriptions) so that type checkers and editors see every name. Use
:func:`for_code` or :func:`raise_for_code` to go from a code in a response to a class.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from kontrakt.errors import BrokerResponseError
from kontrakt.errors import CorruptMessageError as _CoreCorruptMessageError
from kontrakt.errors import TransactionAbortableError as _CoreTransactionAbortableError
from kontrakt.errors import UnsupportedVersionError as _CoreUnsupportedVersionError

__all__ = [
    "ERRORS_BY_CODE",
    "BrokerIdNotRegisteredError",
    "BrokerNotAvailableError",
    "ClusterAuthorizationFailedError",
    "ConcurrentTransactionsError",
    "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError",
    "CorruptMessageError",
    "DelegationTokenAuthDisabledError",
    "DelegationTokenAuthorizationFailedError",
    "DelegationTokenExpiredError",
    "DelegationTokenNotFoundError",
    "DelegationTokenOwnerMismatchError",
    "DelegationTokenRequestNotAllowedError",
    "DuplicateBrokerRegistrationError",
    "DuplicateResourceError",
    "DuplicateSequenceNumberError",
    "DuplicateVoterError",
    "ElectionNotNeededError",
    "EligibleLeadersNotAvailableError",
    "FeatureUpdateFailedError",
    "FencedInstanceIdError",
    "FencedLeaderEpochError",
    "FencedMemberEpochError",
    "FencedStateEpochError",
    "FetchSessionIdNotFoundError",
    "FetchSessionTopicIdError",
    "GroupAuthorizationFailedError",
    "GroupIdNotFoundError",
    "GroupMaxSizeReachedError",
    "GroupSubscribedToTopicError",
    "IllegalGenerationError",
    "IllegalSaslStateError",
    "InconsistentClusterIdError",
    "InconsistentGroupProtocolError",
    "InconsistentTopicIdError",
    "InconsistentVoterSetError",
    "IneligibleReplicaError",
    "InvalidCommitOffsetSizeError",
    "InvalidConfigError",
    "InvalidFetchSessionEpochError",
    "InvalidFetchSizeError",
    "InvalidGroupIdError",
    "InvalidPartitionsError",
    "InvalidPrincipalTypeError",
    "InvalidProducerEpochError",
    "InvalidProducerIdMappingError",
    "InvalidRecordError",
    "InvalidRecordStateError",
    "InvalidRegistrationError",
    "InvalidRegularExpressionError",
    "InvalidReplicaAssignmentError",
    "InvalidReplicationFactorError",
    "InvalidRequestError",
    "InvalidRequiredAcksError",
    "InvalidSessionTimeoutError",
    "InvalidShareSessionEpochError",
    "InvalidTimestampError",
    "InvalidTopicError",
    "InvalidTransactionTimeoutError",
    "InvalidTxnStateError",
    "InvalidUpdateVersionError",
    "InvalidVoterKeyError",
    "KafkaStorageError",
    "LeaderNotAvailableError",
    "ListenerNotFoundError",
    "LogDirNotFoundError",
    "MemberIdRequiredError",
    "MessageTooLargeError",
    "MismatchedEndpointTypeError",
    "NetworkError",
    "NewLeaderElectedError",
    "NoReassignmentInProgressError",
    "NonEmptyGroupError",
    "NotControllerError",
    "NotCoordinatorError",
    "NotEnoughReplicasAfterAppendError",
    "NotEnoughReplicasError",
    "NotLeaderOrFollowerError",
    "OffsetMetadataTooLargeError",
    "OffsetMovedToTieredStorageError",
    "OffsetNotAvailableError",
    "OffsetOutOfRangeError",
    "OperationNotAttemptedError",
    "OutOfOrderSequenceNumberError",
    "PolicyViolationError",
    "PositionOutOfRangeError",
    "PreferredLeaderNotAvailableError",
    "PrincipalDeserializationFailureError",
    "ProducerFencedError",
    "ReassignmentInProgressError",
    "RebalanceInProgressError",
    "RebootstrapRequiredError",
    "RecordListTooLargeError",
    "ReplicaNotAvailableError",
    "RequestTimedOutError",
    "ResourceNotFoundError",
    "SaslAuthenticationFailedError",
    "SecurityDisabledError",
    "ShareSessionLimitReachedError",
    "ShareSessionNotFoundError",
    "SnapshotNotFoundError",
    "StaleBrokerEpochError",
    "StaleControllerEpochError",
    "StaleMemberEpochError",
    "StreamsInvalidTopologyEpochError",
    "StreamsInvalidTopologyError",
    "StreamsTopologyFencedError",
    "TelemetryTooLargeError",
    "ThrottlingQuotaExceededError",
    "TopicAlreadyExistsError",
    "TopicAuthorizationFailedError",
    "TopicDeletionDisabledError",
    "TransactionAbortableError",
    "TransactionCoordinatorFencedError",
    "TransactionalIdAuthorizationFailedError",
    "TransactionalIdNotFoundError",
    "UnacceptableCredentialError",
    "UnknownControllerIdError",
    "UnknownLeaderEpochError",
    "UnknownMemberIdError",
    "UnknownProducerIdError",
    "UnknownServerError",
    "UnknownSubscriptionIdError",
    "UnknownTopicIdError",
    "UnknownTopicOrPartitionError",
    "UnreleasedInstanceIdError",
    "UnstableOffsetCommitError",
    "UnsupportedAssignorError",
    "UnsupportedCompressionTypeError",
    "UnsupportedEndpointTypeError",
    "UnsupportedForMessageFormatError",
    "UnsupportedSaslMechanismError",
    "UnsupportedVersionError",
    "VoterNotFoundError",
    "for_code",
    "raise_for_code",
]


class UnknownServerError(BrokerResponseError):
    """The broker hit an unexpected error while handling the request; its log has details."""

    code, error_name = -1, "UNKNOWN_SERVER_ERROR"


class OffsetOutOfRangeError(BrokerResponseError):
    """The requested offset is outside the range of offsets the partition holds."""

    code, error_name = 1, "OFFSET_OUT_OF_RANGE"


class CorruptMessageError(BrokerResponseError, _CoreCorruptMessageError):
    """A record or batch failed its CRC check, is too large, has a null key on a compacted topic,
    or is otherwise invalid.
    """

    code, error_name = 2, "CORRUPT_MESSAGE"
    retriable = True


class UnknownTopicOrPartitionError(BrokerResponseError):
    """This broker does not host the topic-partition (or the topic does not exist)."""

    code, error_name = 3, "UNKNOWN_TOPIC_OR_PARTITION"
    retriable = invalid_metadata = True


class InvalidFetchSizeError(BrokerResponseError):
    """The fetch size in the request is invalid."""

    code, error_name = 4, "INVALID_FETCH_SIZE"


class LeaderNotAvailableError(BrokerResponseError):
    """The partition has no leader right now, typically during a leader election."""

    code, error_name = 5, "LEADER_NOT_AVAILABLE"
    retriable = invalid_metadata = True


class NotLeaderOrFollowerError(BrokerResponseError):
    """The broker is not the leader (or, for replica requests, not a replica) of the partition."""

    code, error_name = 6, "NOT_LEADER_OR_FOLLOWER"
    retriable = invalid_metadata = True


class RequestTimedOutError(BrokerResponseError):
    """The broker did not complete the request within its timeout."""

    code, error_name = 7, "REQUEST_TIMED_OUT"
    retriable = True


class BrokerNotAvailableError(BrokerResponseError):
    """The broker is not available."""

    code, error_name = 8, "BROKER_NOT_AVAILABLE"


class ReplicaNotAvailableError(BrokerResponseError):
    """The replica for the partition is not available on the broker, e.g. during a reassignment."""

    code, error_name = 9, "REPLICA_NOT_AVAILABLE"
    retriable = invalid_metadata = True


class MessageTooLargeError(BrokerResponseError):
    """A record batch is larger than the broker's maximum message size."""

    code, error_name = 10, "MESSAGE_TOO_LARGE"


class StaleControllerEpochError(BrokerResponseError):
    """The request carried an old controller epoch: the controller has moved."""

    code, error_name = 11, "STALE_CONTROLLER_EPOCH"


class OffsetMetadataTooLargeError(BrokerResponseError):
    """The metadata string of an offset commit is longer than the broker allows."""

    code, error_name = 12, "OFFSET_METADATA_TOO_LARGE"


class NetworkError(BrokerResponseError):
    """The connection was closed before a response arrived."""

    code, error_name = 13, "NETWORK_EXCEPTION"
    retriable = invalid_metadata = True


class CoordinatorLoadInProgressError(BrokerResponseError):
    """The coordinator is still loading its state and cannot serve the request yet."""

    code, error_name = 14, "COORDINATOR_LOAD_IN_PROGRESS"
    retriable = True


class CoordinatorNotAvailableError(BrokerResponseError):
    """The group or transaction coordinator is not available."""

    code, error_name = 15, "COORDINATOR_NOT_AVAILABLE"
    retriable = True


class NotCoordinatorError(BrokerResponseError):
    """The broker is not the coordinator for this group or transactional id."""

    code, error_name = 16, "NOT_COORDINATOR"
    retriable = True


class InvalidTopicError(BrokerResponseError):
    """The topic name is invalid or the operation is not allowed on this topic."""

    code, error_name = 17, "INVALID_TOPIC_EXCEPTION"


class RecordListTooLargeError(BrokerResponseError):
    """A record batch is larger than the topic's segment size."""

    code, error_name = 18, "RECORD_LIST_TOO_LARGE"


class NotEnoughReplicasError(BrokerResponseError):
    """Fewer in-sync replicas than min.insync.replicas: the records were rejected."""

    code, error_name = 19, "NOT_ENOUGH_REPLICAS"
    retriable = True


class NotEnoughReplicasAfterAppendError(BrokerResponseError):
    """The records were written, but to fewer in-sync replicas than required."""

    code, error_name = 20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
    retriable = True


class InvalidRequiredAcksError(BrokerResponseError):
    """The produce request has an invalid acks value."""

    code, error_name = 21, "INVALID_REQUIRED_ACKS"


class IllegalGenerationError(BrokerResponseError):
    """The group generation id in the request is not the current one."""

    code, error_name = 22, "ILLEGAL_GENERATION"


class InconsistentGroupProtocolError(BrokerResponseError):
    """The member's protocols do not match the group's, or none were given."""

    code, error_name = 23, "INCONSISTENT_GROUP_PROTOCOL"


class InvalidGroupIdError(BrokerResponseError):
    """The group id is invalid (for instance empty)."""

    code, error_name = 24, "INVALID_GROUP_ID"


class UnknownMemberIdError(BrokerResponseError):
    """The coordinator does not know this member id."""

    code, error_name = 25, "UNKNOWN_MEMBER_ID"


class InvalidSessionTimeoutError(BrokerResponseError):
    """The session timeout is outside the range the broker allows."""

    code, error_name = 26, "INVALID_SESSION_TIMEOUT"


class RebalanceInProgressError(BrokerResponseError):
    """The group is rebalancing; the member must rejoin."""

    code, error_name = 27, "REBALANCE_IN_PROGRESS"


class InvalidCommitOffsetSizeError(BrokerResponseError):
    """The offset commit data has an invalid size."""

    code, error_name = 28, "INVALID_COMMIT_OFFSET_SIZE"


class TopicAuthorizationFailedError(BrokerResponseError):
    """The principal is not authorized for the topic."""

    code, error_name = 29, "TOPIC_AUTHORIZATION_FAILED"


class GroupAuthorizationFailedError(BrokerResponseError):
    """The principal is not authorized for the group."""

    code, error_name = 30, "GROUP_AUTHORIZATION_FAILED"


class ClusterAuthorizationFailedError(BrokerResponseError):
    """The principal is not authorized for the cluster operation."""

    code, error_name = 31, "CLUSTER_AUTHORIZATION_FAILED"


class InvalidTimestampError(BrokerResponseError):
    """A record timestamp is outside the range the broker accepts."""

    code, error_name = 32, "INVALID_TIMESTAMP"


class UnsupportedSaslMechanismError(BrokerResponseError):
    """The broker does not support the requested SASL mechanism."""

    code, error_name = 33, "UNSUPPORTED_SASL_MECHANISM"


class IllegalSaslStateError(BrokerResponseError):
    """The request is not allowed in the current SASL state."""

    code, error_name = 34, "ILLEGAL_SASL_STATE"


class UnsupportedVersionError(BrokerResponseError, _CoreUnsupportedVersionError):
    """The broker does not support this version of the API."""

    code, error_name = 35, "UNSUPPORTED_VERSION"


class TopicAlreadyExistsError(BrokerResponseError):
    """A topic with this name already exists."""

    code, error_name = 36, "TOPIC_ALREADY_EXISTS"


class InvalidPartitionsError(BrokerResponseError):
    """The partition count is invalid (below 1, or not larger than the current count)."""

    code, error_name = 37, "INVALID_PARTITIONS"


class InvalidReplicationFactorError(BrokerResponseError):
    """The replication factor is below 1 or larger than the number of brokers."""

    code, error_name = 38, "INVALID_REPLICATION_FACTOR"


class InvalidReplicaAssignmentError(BrokerResponseError):
    """The manual replica assignment is invalid."""

    code, error_name = 39, "INVALID_REPLICA_ASSIGNMENT"


class InvalidConfigError(BrokerResponseError):
    """A configuration name or value is invalid."""

    code, error_name = 40, "INVALID_CONFIG"


class NotControllerError(BrokerResponseError):
    """The broker is not the active controller."""

    code, error_name = 41, "NOT_CONTROLLER"
    retriable = True


class InvalidRequestError(BrokerResponseError):
    """The request is malformed or not valid for this broker; the broker log has details."""

    code, error_name = 42, "INVALID_REQUEST"


class UnsupportedForMessageFormatError(BrokerResponseError):
    """The broker's message format version does not support the request."""

    code, error_name = 43, "UNSUPPORTED_FOR_MESSAGE_FORMAT"


class PolicyViolationError(BrokerResponseError):
    """The request violates a policy configured on the broker."""

    code, error_name = 44, "POLICY_VIOLATION"


class OutOfOrderSequenceNumberError(BrokerResponseError):
    """The broker received a producer sequence number out of order."""

    code, error_name = 45, "OUT_OF_ORDER_SEQUENCE_NUMBER"


class DuplicateSequenceNumberError(BrokerResponseError):
    """The broker received a duplicate producer sequence number."""

    code, error_name = 46, "DUPLICATE_SEQUENCE_NUMBER"


class InvalidProducerEpochError(BrokerResponseError):
    """The producer used an old epoch, e.g. after its transaction timed out."""

    code, error_name = 47, "INVALID_PRODUCER_EPOCH"
    retriable = True


class InvalidTxnStateError(BrokerResponseError):
    """The transactional operation is not valid in the transaction's current state."""

    code, error_name = 48, "INVALID_TXN_STATE"


class InvalidProducerIdMappingError(BrokerResponseError):
    """The producer id is not the one assigned to this transactional id."""

    code, error_name = 49, "INVALID_PRODUCER_ID_MAPPING"


class InvalidTransactionTimeoutError(BrokerResponseError):
    """The transaction timeout exceeds the broker's transaction.max.timeout.ms."""

    code, error_name = 50, "INVALID_TRANSACTION_TIMEOUT"


class ConcurrentTransactionsError(BrokerResponseError):
    """Another operation on the same transaction is still in progress."""

    code, error_name = 51, "CONCURRENT_TRANSACTIONS"
    retriable = True


class TransactionCoordinatorFencedError(BrokerResponseError):
    """The transaction coordinator that sent the marker is no longer current."""

    code, error_name = 52, "TRANSACTION_COORDINATOR_FENCED"


class TransactionalIdAuthorizationFailedError(BrokerResponseError):
    """The principal is not authorized for the transactional id."""

    code, error_name = 53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"


class SecurityDisabledError(BrokerResponseError):
    """Security features are disabled on the broker."""

    code, error_name = 54, "SECURITY_DISABLED"


class OperationNotAttemptedError(BrokerResponseError):
    """The broker skipped this operation because another one in the same batch failed."""

    code, error_name = 55, "OPERATION_NOT_ATTEMPTED"


class KafkaStorageError(BrokerResponseError):
    """A disk error occurred while accessing the partition's log."""

    code, error_name = 56, "KAFKA_STORAGE_ERROR"
    retriable = invalid_metadata = True


class LogDirNotFoundError(BrokerResponseError):
    """The log directory is not in the broker's configuration."""

    code, error_name = 57, "LOG_DIR_NOT_FOUND"


class SaslAuthenticationFailedError(BrokerResponseError):
    """SASL authentication failed."""

    code, error_name = 58, "SASL_AUTHENTICATION_FAILED"


class UnknownProducerIdError(BrokerResponseError):
    """The broker has no state for this producer id, e.g. its records were all deleted."""

    code, error_name = 59, "UNKNOWN_PRODUCER_ID"


class ReassignmentInProgressError(BrokerResponseError):
    """A partition reassignment is in progress."""

    code, error_name = 60, "REASSIGNMENT_IN_PROGRESS"


class DelegationTokenAuthDisabledError(BrokerResponseError):
    """Delegation tokens are not enabled."""

    code, error_name = 61, "DELEGATION_TOKEN_AUTH_DISABLED"


class DelegationTokenNotFoundError(BrokerResponseError):
    """The delegation token was not found."""

    code, error_name = 62, "DELEGATION_TOKEN_NOT_FOUND"


class DelegationTokenOwnerMismatchError(BrokerResponseError):
    """The principal is not the owner or a renewer of the delegation token."""

    code, error_name = 63, "DELEGATION_TOKEN_OWNER_MISMATCH"


class DelegationTokenRequestNotAllowedError(BrokerResponseError):
    """Delegation token requests are not allowed on this kind of connection."""

    code, error_name = 64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"


class DelegationTokenAuthorizationFailedError(BrokerResponseError):
    """The principal is not authorized for the delegation token operation."""

    code, error_name = 65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED"


class DelegationTokenExpiredError(BrokerResponseError):
    """The delegation token has expired."""

    code, error_name = 66, "DELEGATION_TOKEN_EXPIRED"


class InvalidPrincipalTypeError(BrokerResponseError):
    """The principal type is not supported."""

    code, error_name = 67, "INVALID_PRINCIPAL_TYPE"


class NonEmptyGroupError(BrokerResponseError):
    """The group still has members."""

    code, error_name = 68, "NON_EMPTY_GROUP"


class GroupIdNotFoundError(BrokerResponseError):
    """The group does not exist."""

    code, error_name = 69, "GROUP_ID_NOT_FOUND"


class FetchSessionIdNotFoundError(BrokerResponseError):
    """The broker does not know the fetch session id."""

    code, error_name = 70, "FETCH_SESSION_ID_NOT_FOUND"
    retriable = True


class InvalidFetchSessionEpochError(BrokerResponseError):
    """The fetch session epoch is not the expected one."""

    code, error_name = 71, "INVALID_FETCH_SESSION_EPOCH"
    retriable = True


class ListenerNotFoundError(BrokerResponseError):
    """The partition leader has no endpoint for the listener the metadata request came in on."""

    code, error_name = 72, "LISTENER_NOT_FOUND"
    retriable = invalid_metadata = True


class TopicDeletionDisabledError(BrokerResponseError):
    """Topic deletion is disabled on the broker."""

    code, error_name = 73, "TOPIC_DELETION_DISABLED"


class FencedLeaderEpochError(BrokerResponseError):
    """The leader epoch in the request is older than the broker's."""

    code, error_name = 74, "FENCED_LEADER_EPOCH"
    retriable = invalid_metadata = True


class UnknownLeaderEpochError(BrokerResponseError):
    """The leader epoch in the request is newer than the broker's."""

    code, error_name = 75, "UNKNOWN_LEADER_EPOCH"
    retriable = True


class UnsupportedCompressionTypeError(BrokerResponseError):
    """The client cannot read the compression type used by the partition."""

    code, error_name = 76, "UNSUPPORTED_COMPRESSION_TYPE"


class StaleBrokerEpochError(BrokerResponseError):
    """The broker epoch in the request is stale."""

    code, error_name = 77, "STALE_BROKER_EPOCH"


class OffsetNotAvailableError(BrokerResponseError):
    """The new leader's high watermark has not caught up yet, so the offset cannot be given."""

    code, error_name = 78, "OFFSET_NOT_AVAILABLE"
    retriable = True


class MemberIdRequiredError(BrokerResponseError):
    """The member must rejoin with the member id the coordinator assigned."""

    code, error_name = 79, "MEMBER_ID_REQUIRED"


class PreferredLeaderNotAvailableError(BrokerResponseError):
    """The preferred leader is not available."""

    code, error_name = 80, "PREFERRED_LEADER_NOT_AVAILABLE"
    retriable = invalid_metadata = True


class GroupMaxSizeReachedError(BrokerResponseError):
    """The group has reached its maximum size."""

    code, error_name = 81, "GROUP_MAX_SIZE_REACHED"


class FencedInstanceIdError(BrokerResponseError):
    """Another member with the same group.instance.id has taken over."""

    code, error_name = 82, "FENCED_INSTANCE_ID"


class EligibleLeadersNotAvailableError(BrokerResponseError):
    """No eligible leader is available for the partition."""

    code, error_name = 83, "ELIGIBLE_LEADERS_NOT_AVAILABLE"
    retriable = invalid_metadata = True


class ElectionNotNeededError(BrokerResponseError):
    """The leader election is not needed for the partition."""

    code, error_name = 84, "ELECTION_NOT_NEEDED"
    retriable = invalid_metadata = True


class NoReassignmentInProgressError(BrokerResponseError):
    """No partition reassignment is in progress."""

    code, error_name = 85, "NO_REASSIGNMENT_IN_PROGRESS"


class GroupSubscribedToTopicError(BrokerResponseError):
    """The group is subscribed to the topic, so its offsets cannot be deleted."""

    code, error_name = 86, "GROUP_SUBSCRIBED_TO_TOPIC"


class InvalidRecordError(BrokerResponseError):
    """The broker rejected a record that failed its validation."""

    code, error_name = 87, "INVALID_RECORD"


class UnstableOffsetCommitError(BrokerResponseError):
    """The partition has pending transactional offsets that must be resolved first."""

    code, error_name = 88, "UNSTABLE_OFFSET_COMMIT"
    retriable = True


class ThrottlingQuotaExceededError(BrokerResponseError):
    """The request exceeds a throttling quota (e.g. topic mutation rate)."""

    code, error_name = 89, "THROTTLING_QUOTA_EXCEEDED"
    retriable = True


class ProducerFencedError(BrokerResponseError):
    """A newer producer with the same transactional id has fenced this one."""

    code, error_name = 90, "PRODUCER_FENCED"


class ResourceNotFoundError(BrokerResponseError):
    """The request refers to a resource that does not exist."""

    code, error_name = 91, "RESOURCE_NOT_FOUND"


class DuplicateResourceError(BrokerResponseError):
    """The request refers to the same resource twice."""

    code, error_name = 92, "DUPLICATE_RESOURCE"


class UnacceptableCredentialError(BrokerResponseError):
    """The credential does not meet the broker's requirements."""

    code, error_name = 93, "UNACCEPTABLE_CREDENTIAL"


class InconsistentVoterSetError(BrokerResponseError):
    """The sender or receiver of a voter request is not among the expected voters."""

    code, error_name = 94, "INCONSISTENT_VOTER_SET"


class InvalidUpdateVersionError(BrokerResponseError):
    """The feature update version is invalid."""

    code, error_name = 95, "INVALID_UPDATE_VERSION"


class FeatureUpdateFailedError(BrokerResponseError):
    """The finalized features could not be updated."""

    code, error_name = 96, "FEATURE_UPDATE_FAILED"


class PrincipalDeserializationFailureError(BrokerResponseError):
    """The broker could not deserialize a forwarded request's principal."""

    code, error_name = 97, "PRINCIPAL_DESERIALIZATION_FAILURE"


class SnapshotNotFoundError(BrokerResponseError):
    """The requested snapshot does not exist."""

    code, error_name = 98, "SNAPSHOT_NOT_FOUND"


class PositionOutOfRangeError(BrokerResponseError):
    """The requested snapshot position is out of range."""

    code, error_name = 99, "POSITION_OUT_OF_RANGE"


class UnknownTopicIdError(BrokerResponseError):
    """This broker does not host a topic with this topic id."""

    code, error_name = 100, "UNKNOWN_TOPIC_ID"
    retriable = invalid_metadata = True


class DuplicateBrokerRegistrationError(BrokerResponseError):
    """The broker id is already registered."""

    code, error_name = 101, "DUPLICATE_BROKER_REGISTRATION"


class BrokerIdNotRegisteredError(BrokerResponseError):
    """The broker id is not registered."""

    code, error_name = 102, "BROKER_ID_NOT_REGISTERED"


class InconsistentTopicIdError(BrokerResponseError):
    """The topic id in the request does not match the partition's log."""

    code, error_name = 103, "INCONSISTENT_TOPIC_ID"
    retriable = invalid_metadata = True


class InconsistentClusterIdError(BrokerResponseError):
    """The cluster id in the request does not match the broker's."""

    code, error_name = 104, "INCONSISTENT_CLUSTER_ID"


class TransactionalIdNotFoundError(BrokerResponseError):
    """The transactional id does not exist."""

    code, error_name = 105, "TRANSACTIONAL_ID_NOT_FOUND"


class FetchSessionTopicIdError(BrokerResponseError):
    """The fetch session used topic ids inconsistently."""

    code, error_name = 106, "FETCH_SESSION_TOPIC_ID_ERROR"
    retriable = True


class IneligibleReplicaError(BrokerResponseError):
    """The new ISR contains a replica that is not eligible."""

    code, error_name = 107, "INELIGIBLE_REPLICA"


class NewLeaderElectedError(BrokerResponseError):
    """The partition state was updated but the leader has changed."""

    code, error_name = 108, "NEW_LEADER_ELECTED"


class OffsetMovedToTieredStorageError(BrokerResponseError):
    """The requested offset is only in tiered storage."""

    code, error_name = 109, "OFFSET_MOVED_TO_TIERED_STORAGE"


class FencedMemberEpochError(BrokerResponseError):
    """The member epoch is fenced; the member must give up its partitions and rejoin."""

    code, error_name = 110, "FENCED_MEMBER_EPOCH"


class UnreleasedInstanceIdError(BrokerResponseError):
    """The instance id is still held by another member that must leave first."""

    code, error_name = 111, "UNRELEASED_INSTANCE_ID"


class UnsupportedAssignorError(BrokerResponseError):
    """The group does not support the assignor or its versions."""

    code, error_name = 112, "UNSUPPORTED_ASSIGNOR"


class StaleMemberEpochError(BrokerResponseError):
    """The member epoch is stale; retry after the next heartbeat updates it."""

    code, error_name = 113, "STALE_MEMBER_EPOCH"


class MismatchedEndpointTypeError(BrokerResponseError):
    """The request was sent to the wrong type of endpoint (broker or controller)."""

    code, error_name = 114, "MISMATCHED_ENDPOINT_TYPE"


class UnsupportedEndpointTypeError(BrokerResponseError):
    """The endpoint type is not supported."""

    code, error_name = 115, "UNSUPPORTED_ENDPOINT_TYPE"


class UnknownControllerIdError(BrokerResponseError):
    """The controller id is not known."""

    code, error_name = 116, "UNKNOWN_CONTROLLER_ID"


class UnknownSubscriptionIdError(BrokerResponseError):
    """The client telemetry subscription id is unknown or outdated."""

    code, error_name = 117, "UNKNOWN_SUBSCRIPTION_ID"


class TelemetryTooLargeError(BrokerResponseError):
    """The pushed client telemetry is larger than the broker accepts."""

    code, error_name = 118, "TELEMETRY_TOO_LARGE"


class InvalidRegistrationError(BrokerResponseError):
    """The controller considers the broker registration invalid."""

    code, error_name = 119, "INVALID_REGISTRATION"


class TransactionAbortableError(BrokerResponseError, _CoreTransactionAbortableError):
    """The transaction failed on the broker; abort it to keep using the transactional id."""

    code, error_name = 120, "TRANSACTION_ABORTABLE"


class InvalidRecordStateError(BrokerResponseError):
    """The record state does not allow the acknowledgement."""

    code, error_name = 121, "INVALID_RECORD_STATE"


class ShareSessionNotFoundError(BrokerResponseError):
    """The broker does not know the share session."""

    code, error_name = 122, "SHARE_SESSION_NOT_FOUND"
    retriable = True


class InvalidShareSessionEpochError(BrokerResponseError):
    """The share session epoch is not the expected one."""

    code, error_name = 123, "INVALID_SHARE_SESSION_EPOCH"
    retriable = True


class FencedStateEpochError(BrokerResponseError):
    """The share-group state epoch does not match the share coordinator's."""

    code, error_name = 124, "FENCED_STATE_EPOCH"


class InvalidVoterKeyError(BrokerResponseError):
    """The voter key does not match the receiving replica's."""

    code, error_name = 125, "INVALID_VOTER_KEY"


class DuplicateVoterError(BrokerResponseError):
    """The voter is already in the voter set."""

    code, error_name = 126, "DUPLICATE_VOTER"


class VoterNotFoundError(BrokerResponseError):
    """The voter is not in the voter set."""

    code, error_name = 127, "VOTER_NOT_FOUND"


class InvalidRegularExpressionError(BrokerResponseError):
    """A regular expression in the request is invalid."""

    code, error_name = 128, "INVALID_REGULAR_EXPRESSION"


class RebootstrapRequiredError(BrokerResponseError):
    """The client's metadata is stale beyond repair; it must rebootstrap."""

    code, error_name = 129, "REBOOTSTRAP_REQUIRED"


class StreamsInvalidTopologyError(BrokerResponseError):
    """The Streams topology in the request is invalid."""

    code, error_name = 130, "STREAMS_INVALID_TOPOLOGY"


class StreamsInvalidTopologyEpochError(BrokerResponseError):
    """The Streams topology epoch in the request is invalid."""

    code, error_name = 131, "STREAMS_INVALID_TOPOLOGY_EPOCH"


class StreamsTopologyFencedError(BrokerResponseError):
    """The Streams topology epoch in the request is outdated."""

    code, error_name = 132, "STREAMS_TOPOLOGY_FENCED"


class ShareSessionLimitReachedError(BrokerResponseError):
    """The broker's limit of share sessions has been reached."""

    code, error_name = 133, "SHARE_SESSION_LIMIT_REACHED"
    retriable = True

def _collect() -> dict[int, type[BrokerResponseError]]:
    by_code: dict[int, type[BrokerResponseError]] = {}
    for obj in list(globals().values()):
        if (isinstance(obj, type) and issubclass(obj, BrokerResponseError)
                and obj.__module__ == __name__):
            if obj.code in by_code:  # pragma: no cover - guarded by the unit tests
                raise RuntimeError(f"error code {obj.code} declared twice")
            # The docstring is the one place each description is written.
            obj.description = inspect.cleandoc(obj.__doc__ or "").replace("\n", " ")
            by_code[obj.code] = obj
    return dict(sorted(by_code.items()))


ERRORS_BY_CODE: Final[Mapping[int, type[BrokerResponseError]]] = MappingProxyType(_collect())
"""Every known error code (0, "no error", excluded) mapped to its class."""

_INT16_MIN, _INT16_MAX = -(2**15), 2**15 - 1
_unknown_classes: dict[int, type[BrokerResponseError]] = {}
_unknown_lock = threading.Lock()


def _unknown_code_class(code: int) -> type[BrokerResponseError]:
    with _unknown_lock:
        cls = _unknown_classes.get(code)
        if cls is None:
            suffix = f"Minus{-code}" if code < 0 else str(code)
            doc = f"Error code {code}, which this version of Kontrakt does not know."
            cls = type(f"UnknownErrorCode{suffix}Error", (UnknownServerError,), {
                "__doc__": doc,
                "__module__": __name__,
                "code": code,
                "error_name": f"UNKNOWN_ERROR_CODE_{code}",
                "description": doc,
            })
            _unknown_classes[code] = cls
        return cls


def for_code(code: int) -> type[BrokerResponseError]:
    """The exception class for a broker error code.

    Args:
        code: a non-zero error code from a response.

    Returns:
        The class declared for ``code``. A code this table does not know (e.g. from a newer
        broker) gets a class generated once and cached: a subclass of
        :class:`UnknownServerError` whose ``code`` is ``code``, not retriable, as the Java
        client treats unknown codes.

    Raises:
        TypeError: ``code`` is not an int.
        ValueError: ``code`` is 0 (no error) or outside the int16 range of error codes.
    """
    if isinstance(code, bool) or not isinstance(code, int):
        raise TypeError(f"error code must be an int, not {type(code).__name__}")
    if code == 0:
        raise ValueError("error code 0 means no error and has no exception class")
    if not _INT16_MIN <= code <= _INT16_MAX:
        raise ValueError(f"error code {code} is outside the int16 range")
    cls = ERRORS_BY_CODE.get(code)
    return cls if cls is not None else _unknown_code_class(code)


def raise_for_code(code: int, message: str | None = None) -> None:
    """Raise the exception for a broker error code; do nothing for 0.

    Args:
        code: the error code from a response.
        message: the error message the broker sent, if any; the code's description is used
            when it is empty or None.

    Raises:
        BrokerResponseError: the subclass for ``code`` (see :func:`for_code`), unless ``code``
            is 0.
        TypeError: ``code`` is not an int.
        ValueError: ``code`` is outside the int16 range.
    """
    if code == 0 and not isinstance(code, bool):
        return
    raise for_code(code)(message or "")
