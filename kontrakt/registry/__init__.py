"""Schema Registry: sync and async clients, an in-process mock, models and errors.

Names follow confluent-kafka-python's ``schema_registry`` package, so moving from it is an
import change. The embedded server lives in :mod:`kontrakt.registry.server` and the
compatibility engine in :mod:`kontrakt.registry.compatibility`.
"""

from __future__ import annotations

from kontrakt.registry._async_client import AsyncSchemaRegistryClient
from kontrakt.registry._client import SchemaRegistryClient
from kontrakt.registry._errors import (
    CompatibilityCheckUnavailableError,
    IncompatibleSchemaError,
    InvalidCompatibilityLevelError,
    InvalidModeError,
    InvalidSchemaError,
    InvalidVersionError,
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
    "AsyncMockSchemaRegistryClient",
    "AsyncSchemaRegistryClient",
    "CompatibilityCheckUnavailableError",
    "CompatibilityLevel",
    "CompatibilityTestResult",
    "ConfigCompatibilityLevel",
    "IncompatibleSchemaError",
    "InvalidCompatibilityLevelError",
    "InvalidModeError",
    "InvalidSchemaError",
    "InvalidVersionError",
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
