"""Schema compatibility: is a schema change safe, with the answer Confluent Schema Registry gives?

``check_compatibility(new, previous, level)`` judges Avro (reader/writer resolution), JSON Schema
(Confluent's content-model rules) and Protobuf (Confluent's wire-compatibility rules) schemas;
``normalize_schema`` gives the canonical form used when ``normalize=true``.
"""

from __future__ import annotations

from kontrakt.registry.compatibility._check import check_compatibility
from kontrakt.registry.compatibility._normalize import normalize_schema
from kontrakt.registry.compatibility._result import (
    CompatibilityLevel,
    CompatibilityResult,
    Incompatibility,
    InvalidCompatibilityLevelError,
    JsonSchemaPolicy,
    ReferenceLike,
    ReferenceLookup,
    SchemaLike,
    SchemaParseError,
    UnresolvedReferenceError,
    UnsupportedSchemaError,
)

__all__ = [
    "CompatibilityLevel",
    "CompatibilityResult",
    "Incompatibility",
    "InvalidCompatibilityLevelError",
    "JsonSchemaPolicy",
    "ReferenceLike",
    "ReferenceLookup",
    "SchemaLike",
    "SchemaParseError",
    "UnresolvedReferenceError",
    "UnsupportedSchemaError",
    "check_compatibility",
    "normalize_schema",
]
