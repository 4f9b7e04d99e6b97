"""Schema Registry: sync and async clients, an in-process mock, models and errors.

Names follow confluent-kafka-python's ``schema_registry`` package, so moving from it is an
import change. :class:`DekRegistryClient` reaches the DEK registry field-level encryption
keeps its keys in. The embedded server lives in :mod:`kontrakt.registry.server` and the
compatibility engine in :mod:`kontrakt.registry.compatibility`.
"""

from __future__ import annotations

from kontrakt.registry._async_client import AsyncSchemaRegistryClient
from kontrakt.registry._client import SchemaRegistryClient
from kontrakt.registry._dek import AsyncDekRegistryClient, Dek, DekRegistryClient, Kek
from kontrakt.registry._errors import (
    CompatibilityCheckUnavailableError,
    DekGenerationError,
    IncompatibleSchemaError,
    InvalidCompatibilityLevelError,
    InvalidKeyError,
    InvalidModeError,
    InvalidSchemaError,
    InvalidVersionError,
    KeyExistsError,
    KeyNotFoundError,
    KeyNotSoftDeletedError,
    KeyReferenceExistsError,
    KeySoftDeletedError,
    OperationNotPermittedError,
    ReferenceExistsError,
    RegistryConnectionError,
    SchemaNotFoundError,
    SchemaRegistryError,
    SubjectNotFoundError,
    SubjectNotSoftDeletedError,
    SubjectSoftDeletedError,
    VersionNotFoundError,
    VersionNotSoftDeletedError,
    VersionSoftDeletedError,
    error_from_response,
)
from kontrakt.registry._mock import AsyncMockSchemaRegistryClient, MockSchemaRegistryClient
from kontrakt.registry._models import (
    CompatibilityLevel,
    CompatibilityTestResult,
    ConfigCompatibilityLevel,
    Metadata,
    Mode,
    RegisteredSchema,
    RuleSet,
    Schema,
    SchemaReference,
    SchemaVersion,
    ServerConfig,
)

__all__ = [
    "AsyncDekRegistryClient",
    "AsyncMockSchemaRegistryClient",
    "AsyncSchemaRegistryClient",
    "CompatibilityCheckUnavailableError",
    "CompatibilityLevel",
    "CompatibilityTestResult",
    "ConfigCompatibilityLevel",
    "Dek",
    "DekGenerationError",
    "DekRegistryClient",
    "IncompatibleSchemaError",
    "InvalidCompatibilityLevelError",
    "InvalidKeyError",
    "InvalidModeError",
    "InvalidSchemaError",
    "InvalidVersionError",
    "Kek",
    "KeyExistsError",
    "KeyNotFoundError",
    "KeyNotSoftDeletedError",
    "KeyReferenceExistsError",
    "KeySoftDeletedError",
    "Metadata",
    "MockSchemaRegistryClient",
    "Mode",
    "OperationNotPermittedError",
    "ReferenceExistsError",
    "RegisteredSchema",
    "RegistryConnectionError",
    "RuleSet",
    "Schema",
    "SchemaNotFoundError",
    "SchemaReference",
    "SchemaRegistryClient",
    "SchemaRegistryError",
    "SchemaVersion",
    "ServerConfig",
    "SubjectNotFoundError",
    "SubjectNotSoftDeletedError",
    "SubjectSoftDeletedError",
    "VersionNotFoundError",
    "VersionNotSoftDeletedError",
    "VersionSoftDeletedError",
    "error_from_response",
]
