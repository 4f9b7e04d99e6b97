"""The Kontrakt error tree.

Every exception Kontrakt raises derives from :class:`KontraktError`. Broker error codes are
generated as subclasses of :class:`BrokerResponseError` in :mod:`kontrakt.protocol.errors`
(one class per code, with ``.code``, ``.retriable`` and ``.invalid_metadata``) and offered
here too, e.g. ``from kontrakt.errors import TopicAlreadyExistsError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "AuthenticationError",
    "BrokerResponseError",
    "CommitFailedError",
    "ConfigError",
    "ConsumerError",
    "CorruptMessageError",
    "CorruptRecordError",
    "DecompressionLimitError",
    "DeliveryTimeoutError",
    "IllegalStateError",
    "InvalidArgumentError",
    "InvalidMessageError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "KeyDeserializationError",
    "KeySerializationError",
    "KontraktError",
    "MissingExtraError",
    "NoBrokersAvailableError",
    "OffsetOutOfRangeResetError",
    "PartialFailureError",
    "ProduceError",
    "ProtocolError",
    "RecordTooLargeError",
    "RuleConditionError",
    "RuleError",
    "SchemaRegistryError",
    "SerializationError",
    "TransactionAbortableError",
    "TransactionError",
    "TransactionFatalError",
    "UnsupportedCodecError",
    "UnsupportedVersionError",
    "ValueDeserializationError",
    "ValueSerializationError",
]


class KontraktError(Exception):
    """Root of every error Kontrakt raises."""

    def __init__(self, message: str = "") -> None:
        super().__init__(message)


class ConfigError(KontraktError, ValueError):
    """A client configuration is invalid: unknown key, wrong type or out-of-range value.

    Attributes:
        option: the option (or unknown key) at fault, when one is (None otherwise).
    """

    def __init__(self, message: str, *, option: str | None = None) -> None:
        super().__init__(message)
        self.option = option


class IllegalStateError(KontraktError):
    """A call was made in a state that does not allow it (e.g. send after close)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


class KafkaError(KontraktError):
    """Base of errors that come from talking to Kafka brokers.

    Attributes:
        retriable: True when retrying the same operation may succeed.
        invalid_metadata: True when the client should refresh cluster metadata first.
    """

    retriable: bool = False
    invalid_metadata: bool = False

    def __init__(self, message: str = "") -> None:
        super().__init__(message)


class KafkaConnectionError(KafkaError):
    """A connection to a broker failed, was closed, or the peer sent unreadable bytes.

    Attributes:
        broker: ``host:port`` (or node id) of the broker when known.
    """

    retriable = True
    invalid_metadata = True

    def __init__(self, message: str, *, broker: str | None = None) -> None:
        super().__init__(f"{message} [broker {broker}]" if broker else message)
        self.broker = broker


class NoBrokersAvailableError(KafkaConnectionError):
    """None of the bootstrap servers or known brokers could be reached."""

    def __init__(self, message: str, *, broker: str | None = None) -> None:
        super().__init__(message, broker=broker)


class AuthenticationError(KafkaConnectionError):
    """A broker refused the client's credentials (SASL), or the client refused the broker's
    TLS certificate. Not retried: the same credentials fail the same way, so the first call
    that needs a connection raises it at once (subclasses in
    :mod:`kontrakt.clients._net.security` say which side refused and why)."""

    retriable = False
    invalid_metadata = False

    def __init__(self, message: str, *, broker: str | None = None) -> None:
        super().__init__(message, broker=broker)


class KafkaTimeoutError(KafkaError, TimeoutError):
    """An operation did not complete within its timeout (request, flush, metadata, ...)."""

    retriable = True

    def __init__(self, message: str) -> None:
        super().__init__(message)


class ProtocolError(KafkaError):
    """The peer sent a frame that violates the Kafka protocol (bad correlation id, size, ...)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


class UnsupportedVersionError(KafkaError):
    """No API version is supported by both this client and the broker, or a field
    cannot be carried by the negotiated version."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


class CorruptMessageError(ProtocolError, ValueError):
    """Bytes could not be decoded as a Kafka message (truncated, bad varint, bad UTF-8)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


class CorruptRecordError(CorruptMessageError):
    """A record batch failed validation (CRC mismatch, truncation, bad compression).

    Attributes:
        topic, partition, offset: where the corrupt batch was found, when known.
    """

    def __init__(
        self,
        message: str,
        *,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> None:
        where = []
        if topic is not None:
            where.append(f"topic {topic!r}")
        if partition is not None:
            where.append(f"partition {partition}")
        if offset is not None:
            where.append(f"offset {offset}")
        super().__init__(f"{message} ({', '.join(where)})" if where else message)
        self.topic = topic
        self.partition = partition
        self.offset = offset


class UnsupportedCodecError(CorruptRecordError):
    """A record batch names a compression codec that Kontrakt does not know."""


class DecompressionLimitError(CorruptRecordError):
    """A compressed record batch inflates past the most its reader allows (a decompression
    bomb, or a batch larger than the consumer's ``max.partition.fetch.bytes`` x
    ``max.decompressed.batch.multiple``). Decompression stopped at the limit.

    Attributes:
        limit: the most bytes the batch was allowed to decompress to.
        topic, partition, offset: where the batch was found, when known.
    """

    def __init__(
        self,
        message: str,
        *,
        limit: int,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> None:
        super().__init__(message, topic=topic, partition=partition, offset=offset)
        self.limit = limit


class BrokerResponseError(KafkaError):
    """A broker answered with a non-zero error code.

    Subclasses, one per code, live in :mod:`kontrakt.protocol.errors`; use
    :func:`kontrakt.protocol.errors.for_code` to get the class for a code.

    Attributes:
        code: the Kafka error code.
        error_name: the Kafka name of the code, e.g. ``NOT_LEADER_OR_FOLLOWER``.
    """

    code: int = -1
    error_name: str = "UNKNOWN_SERVER_ERROR"
    description: str = ""

    def __init__(self, message: str = "") -> None:
        text = f"[{self.error_name} ({self.code})] {message or self.description}"
        super().__init__(text.rstrip())


class RecordTooLargeError(KafkaError):
    """A record is larger than the producer's ``message.max.bytes`` or buffer."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


class ProduceError(KafkaError):
    """Delivery of a record failed for good (retries exhausted or fatal broker error).

    Attributes:
        cause: the underlying error.
    """

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.cause = cause


class DeliveryTimeoutError(KafkaTimeoutError, ProduceError):
    """A record was not acknowledged within the producer's ``delivery.timeout.ms``.

    Raised by a record's future (and passed to its delivery callback) once
    ``delivery.timeout.ms`` has passed since its batch was created (the ``send()`` of the
    batch's first record), whatever kept it: a broker that does not answer, retriable
    errors, backoff, a connection that cannot be made, a leader that is missing. Never
    sooner, and at most a pass of the producer's sender later (a request in flight is not
    waited for past the deadline). A record whose request was in flight at the deadline
    may still have been written by the broker.

    A :class:`KafkaTimeoutError` (and so a ``TimeoutError``) and a :class:`ProduceError`,
    so that code catching either keeps working.

    Attributes:
        cause: the last error seen while delivering the batch (e.g. a retriable broker
            error, a request timeout, a connection failure), also set as ``__cause__``;
            None when the batch was never answered nor failed before.
    """

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.cause = cause
        self.__cause__ = cause


class ConsumerError(KafkaError):
    """Base of consumer-side failures."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


class OffsetOutOfRangeResetError(ConsumerError):
    """A fetch position is out of range and ``auto.offset.reset`` is ``none``."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


class CommitFailedError(ConsumerError):
    """An offset commit cannot succeed: the group rebalanced and this member's generation is
    stale. The records since the last commit may be redelivered to another member."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


class TransactionError(KafkaError):
    """Base of transactional producer errors."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


class TransactionAbortableError(TransactionError):
    """The current transaction failed and must be aborted; the producer stays usable."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


class TransactionFatalError(TransactionError):
    """The transactional producer cannot continue (fenced, or a fatal broker error)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


class PartialFailureError(KafkaError):
    """Some entities of a multi-entity request (several topics, groups, resources, ...)
    failed. A call about a single entity raises that entity's own error instead.

    The message names each failed entity with its error (the first
    :data:`PartialFailureError.LISTED` of them, then how many more).

    Attributes:
        results: every entity's outcome: a result value, or the exception it failed with.
    """

    #: How many failed entities the message spells out.
    LISTED = 10

    def __init__(self, message: str, results: Mapping[Any, Any]) -> None:
        failed = [(k, v) for k, v in results.items() if isinstance(v, BaseException)]
        listed = "; ".join(f"{k!r}: {type(v).__name__}: {v}" if isinstance(k, str)
                           else f"{k}: {type(v).__name__}: {v}"
                           for k, v in failed[:self.LISTED])
        more = len(failed) - self.LISTED
        super().__init__(f"{message}: {len(failed)} of {len(results)} failed: {listed}"
                         + (f"; and {more} more (see .errors)" if more > 0 else ""))
        self.results = dict(results)

    @property
    def errors(self) -> dict[Any, BaseException]:
        """Only the failed entities and their errors."""
        return {k: v for k, v in self.results.items() if isinstance(v, BaseException)}


class SchemaRegistryError(KontraktError):
    """A Schema Registry call failed.

    Attributes:
        http_status_code: HTTP status of the response (-1 when no response was received).
        error_code: Confluent error code from the body (e.g. 40401), or -1.
        error_message: message from the body, or a description of the failure.
    """

    UNKNOWN = -1

    def __init__(self, http_status_code: int, error_code: int, error_message: str) -> None:
        super().__init__(f"{error_message} (HTTP status code {http_status_code}, "
                         f"SR code {error_code})")
        self.http_status_code = http_status_code
        self.error_code = error_code
        self.error_message = error_message


class SerializationError(KontraktError):
    """A key or value could not be serialized or deserialized.

    Attributes:
        record: the raw record (for deserialization), when there is one.
        rule: the data-contract rule that refused the record (``kontrakt.serde.rules.Rule``:
            name, kind, type, mode), when a rule did.
    """

    def __init__(self, message: str, *, record: Any = None, rule: Any = None) -> None:
        super().__init__(message)
        self.record = record
        self.rule = rule


class KeySerializationError(SerializationError):
    """A key could not be serialized."""


class ValueSerializationError(SerializationError):
    """A value could not be serialized."""


class KeyDeserializationError(SerializationError):
    """A record's key could not be deserialized; ``.record`` carries the raw record."""


class ValueDeserializationError(SerializationError):
    """A record's value could not be deserialized; ``.record`` carries the raw record."""


class RuleError(KontraktError):
    """A data-contract rule could not run (no executor for its type, an unknown action, an
    executor that raised) or refused a message (:class:`RuleConditionError`).

    Raised inside rule execution; the serdes report it as the ``__cause__`` of a
    ``Key``/``Value`` (de)serialization error whose ``.rule`` names the rule.

    Attributes:
        rule: the rule (``kontrakt.serde.rules.Rule``), once the rule engine has set it.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.rule: Any = None


class RuleConditionError(RuleError):
    """A ``CONDITION`` rule evaluated to false for a message."""


class MissingExtraError(KontraktError, ModuleNotFoundError):
    """A feature needs a package that one of Kontrakt's extras installs, and it is missing
    (e.g. fastavro for Avro: ``pip install 'kontrakt[avro]'``); the message says which.

    Attributes:
        name: the module that could not be imported.
        extra: the extra that provides it (``avro``, ``json``, ``protobuf``).
    """

    def __init__(self, message: str, *, name: str, extra: str) -> None:
        super().__init__(message)
        self.name = name
        self.extra = extra


class InvalidArgumentError(KontraktError, ValueError):
    """An argument to a client call is invalid (an illegal topic or group name, a negative
    partition count, an unknown topic config key, ...). Raised before anything is sent."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


class InvalidMessageError(InvalidArgumentError, TypeError):
    """A message handed to ``produce_batch`` is not a dict, has a field it does not know, or
    a field of the wrong type. Also a TypeError, as confluent-kafka raises there. Raised
    before any message of the call is queued; ``index`` is the message's position."""

    def __init__(self, message: str, index: int) -> None:
        super().__init__(message)
        self.index = index


# One class per broker error code, declared in kontrakt.protocol.errors (which builds on the
# classes above, hence this import at the end), offered here too so that application code
# catches them from one place: ``except kontrakt.errors.TopicAlreadyExistsError``. The three
# names both modules declare (CorruptMessageError, TransactionAbortableError,
# UnsupportedVersionError) stay the general classes above, which the broker's also derive from.
from kontrakt.protocol.errors import (  # noqa: E402
    BrokerIdNotRegisteredError,
    BrokerNotAvailableError,
    ClusterAuthorizationFailedError,
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    DelegationTokenAuthDisabledError,
    DelegationTokenAuthorizationFailedError,
    DelegationTokenExpiredError,
    DelegationTokenNotFoundError,
    DelegationTokenOwnerMismatchError,
    DelegationTokenRequestNotAllowedError,
    DuplicateBrokerRegistrationError,
    DuplicateResourceError,
    DuplicateSequenceNumberError,
    DuplicateVoterError,
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    FeatureUpdateFailedError,
    FencedInstanceIdError,
    FencedLeaderEpochError,
    FencedMemberEpochError,
    FencedStateEpochError,
    FetchSessionIdNotFoundError,
    FetchSessionTopicIdError,
    GroupAuthorizationFailedError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    IllegalSaslStateError,
    InconsistentClusterIdError,
    InconsistentGroupProtocolError,
    InconsistentTopicIdError,
    InconsistentVoterSetError,
    IneligibleReplicaError,
    InvalidCommitOffsetSizeError,
    InvalidConfigError,
    InvalidFetchSessionEpochError,
    InvalidFetchSizeError,
    InvalidGroupIdError,
    InvalidPartitionsError,
    InvalidPrincipalTypeError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidRecordError,
    InvalidRecordStateError,
    InvalidRegistrationError,
    InvalidRegularExpressionError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidRequiredAcksError,
    InvalidSessionTimeoutError,
    InvalidShareSessionEpochError,
    InvalidTimestampError,
    InvalidTopicError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    InvalidUpdateVersionError,
    InvalidVoterKeyError,
    KafkaStorageError,
    LeaderNotAvailableError,
    ListenerNotFoundError,
    LogDirNotFoundError,
    MemberIdRequiredError,
    MessageTooLargeError,
    MismatchedEndpointTypeError,
    NetworkError,
    NewLeaderElectedError,
    NonEmptyGroupError,
    NoReassignmentInProgressError,
    NotControllerError,
    NotCoordinatorError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetMetadataTooLargeError,
    OffsetMovedToTieredStorageError,
    OffsetNotAvailableError,
    OffsetOutOfRangeError,
    OperationNotAttemptedError,
    OutOfOrderSequenceNumberError,
    PolicyViolationError,
    PositionOutOfRangeError,
    PreferredLeaderNotAvailableError,
    PrincipalDeserializationFailureError,
    ProducerFencedError,
    ReassignmentInProgressError,
    RebalanceInProgressError,
    RebootstrapRequiredError,
    RecordListTooLargeError,
    ReplicaNotAvailableError,
    RequestTimedOutError,
    ResourceNotFoundError,
    SaslAuthenticationFailedError,
    SecurityDisabledError,
    ShareSessionLimitReachedError,
    ShareSessionNotFoundError,
    SnapshotNotFoundError,
    StaleBrokerEpochError,
    StaleControllerEpochError,
    StaleMemberEpochError,
    StreamsInvalidTopologyEpochError,
    StreamsInvalidTopologyError,
    StreamsTopologyFencedError,
    TelemetryTooLargeError,
    ThrottlingQuotaExceededError,
    TopicAlreadyExistsError,
    TopicAuthorizationFailedError,
    TopicDeletionDisabledError,
    TransactionalIdAuthorizationFailedError,
    TransactionalIdNotFoundError,
    TransactionCoordinatorFencedError,
    UnacceptableCredentialError,
    UnknownControllerIdError,
    UnknownLeaderEpochError,
    UnknownMemberIdError,
    UnknownProducerIdError,
    UnknownServerError,
    UnknownSubscriptionIdError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
    UnreleasedInstanceIdError,
    UnstableOffsetCommitError,
    UnsupportedAssignorError,
    UnsupportedCompressionTypeError,
    UnsupportedEndpointTypeError,
    UnsupportedForMessageFormatError,
    UnsupportedSaslMechanismError,
    VoterNotFoundError,
)

__all__ += [
    "BrokerIdNotRegisteredError", "BrokerNotAvailableError", "ClusterAuthorizationFailedError",
    "ConcurrentTransactionsError", "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError", "DelegationTokenAuthDisabledError",
    "DelegationTokenAuthorizationFailedError", "DelegationTokenExpiredError",
    "DelegationTokenNotFoundError", "DelegationTokenOwnerMismatchError",
    "DelegationTokenRequestNotAllowedError", "DuplicateBrokerRegistrationError",
    "DuplicateResourceError", "DuplicateSequenceNumberError", "DuplicateVoterError",
    "ElectionNotNeededError", "EligibleLeadersNotAvailableError", "FeatureUpdateFailedError",
    "FencedInstanceIdError", "FencedLeaderEpochError", "FencedMemberEpochError",
    "FencedStateEpochError", "FetchSessionIdNotFoundError", "FetchSessionTopicIdError",
    "GroupAuthorizationFailedError", "GroupIdNotFoundError", "GroupMaxSizeReachedError",
    "GroupSubscribedToTopicError", "IllegalGenerationError", "IllegalSaslStateError",
    "InconsistentClusterIdError", "InconsistentGroupProtocolError", "InconsistentTopicIdError",
    "InconsistentVoterSetError", "IneligibleReplicaError", "InvalidCommitOffsetSizeError",
    "InvalidConfigError", "InvalidFetchSessionEpochError", "InvalidFetchSizeError",
    "InvalidGroupIdError", "InvalidPartitionsError", "InvalidPrincipalTypeError",
    "InvalidProducerEpochError", "InvalidProducerIdMappingError", "InvalidRecordError",
    "InvalidRecordStateError", "InvalidRegistrationError", "InvalidRegularExpressionError",
    "InvalidReplicaAssignmentError", "InvalidReplicationFactorError", "InvalidRequestError",
    "InvalidRequiredAcksError", "InvalidSessionTimeoutError", "InvalidShareSessionEpochError",
    "InvalidTimestampError", "InvalidTopicError", "InvalidTransactionTimeoutError",
    "InvalidTxnStateError", "InvalidUpdateVersionError", "InvalidVoterKeyError",
    "KafkaStorageError", "LeaderNotAvailableError", "ListenerNotFoundError",
    "LogDirNotFoundError", "MemberIdRequiredError", "MessageTooLargeError",
    "MismatchedEndpointTypeError", "NetworkError", "NewLeaderElectedError",
    "NoReassignmentInProgressError", "NonEmptyGroupError", "NotControllerError",
    "NotCoordinatorError", "NotEnoughReplicasAfterAppendError", "NotEnoughReplicasError",
    "NotLeaderOrFollowerError", "OffsetMetadataTooLargeError",
    "OffsetMovedToTieredStorageError", "OffsetNotAvailableError", "OffsetOutOfRangeError",
    "OperationNotAttemptedError", "OutOfOrderSequenceNumberError", "PolicyViolationError",
    "PositionOutOfRangeError", "PreferredLeaderNotAvailableError",
    "PrincipalDeserializationFailureError", "ProducerFencedError",
    "ReassignmentInProgressError", "RebalanceInProgressError", "RebootstrapRequiredError",
    "RecordListTooLargeError", "ReplicaNotAvailableError", "RequestTimedOutError",
    "ResourceNotFoundError", "SaslAuthenticationFailedError", "SecurityDisabledError",
    "ShareSessionLimitReachedError", "ShareSessionNotFoundError", "SnapshotNotFoundError",
    "StaleBrokerEpochError", "StaleControllerEpochError", "StaleMemberEpochError",
    "StreamsInvalidTopologyEpochError", "StreamsInvalidTopologyError",
    "StreamsTopologyFencedError", "TelemetryTooLargeError", "ThrottlingQuotaExceededError",
    "TopicAlreadyExistsError", "TopicAuthorizationFailedError", "TopicDeletionDisabledError",
    "TransactionCoordinatorFencedError", "TransactionalIdAuthorizationFailedError",
    "TransactionalIdNotFoundError", "UnacceptableCredentialError", "UnknownControllerIdError",
    "UnknownLeaderEpochError", "UnknownMemberIdError", "UnknownProducerIdError",
    "UnknownServerError", "UnknownSubscriptionIdError", "UnknownTopicIdError",
    "UnknownTopicOrPartitionError", "UnreleasedInstanceIdError", "UnstableOffsetCommitError",
    "UnsupportedAssignorError", "UnsupportedCompressionTypeError",
    "UnsupportedEndpointTypeError", "UnsupportedForMessageFormatError",
    "UnsupportedSaslMechanismError", "VoterNotFoundError",
]
