"""Value types of the Schema Registry API (frozen, slotted, hashable).

Field names follow confluent-kafka-python's ``schema_registry`` package so that code moving
from it only changes imports; ``to_dict`` / ``from_dict`` speak the registry's JSON shapes.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CompatibilityLevel",
    "CompatibilityTestResult",
    "ConfigCompatibilityLevel",
    "Metadata",
    "Mode",
    "RegisteredSchema",
    "RuleSet",
    "Schema",
    "SchemaReference",
    "SchemaVersion",
    "ServerConfig",
]


class CompatibilityLevel(str, enum.Enum):
    """Compatibility levels a registry enforces on a subject."""

    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"
    NONE = "NONE"

    def __str__(self) -> str:
        return self.value


#: confluent-kafka-python's name for :class:`CompatibilityLevel`.
ConfigCompatibilityLevel = CompatibilityLevel


class Mode(str, enum.Enum):
    """Registry modes: READONLY refuses writes, IMPORT accepts given ids and versions."""

    READWRITE = "READWRITE"
    READONLY = "READONLY"
    READONLY_OVERRIDE = "READONLY_OVERRIDE"
    IMPORT = "IMPORT"

    def __str__(self) -> str:
        return self.value


def _freeze(value: Any) -> Any:
    """Turn JSON-like data into a hashable equivalent (for ``__hash__`` of wrappers)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class SchemaReference:
    """A named reference from one schema to a registered subject version.

    Attributes:
        name: the name the referencing schema uses (Avro full name, JSON ``$ref`` URL or the
            Protobuf import path).
        subject: the subject the referenced schema is registered under.
        version: the version of that subject.
    """

    name: str
    subject: str
    version: int

    def to_dict(self) -> dict[str, Any]:
        """Returns: the registry's JSON shape ``{"name", "subject", "version"}``."""
        return {"name": self.name, "subject": self.subject, "version": self.version}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SchemaReference:
        """Build from the registry's JSON shape.

        Raises:
            KeyError, TypeError, ValueError: when a field is missing or of the wrong type.
        """
        return cls(str(data["name"]), str(data["subject"]), int(data["version"]))


@dataclass(frozen=True, slots=True)
class Metadata:
    """Schema metadata (data contracts): tags per path, free properties, sensitive names."""

    tags: Mapping[str, Sequence[str]] = field(default_factory=dict)
    properties: Mapping[str, str] = field(default_factory=dict)
    sensitive: Sequence[str] = ()

    def __post_init__(self) -> None:
        # Normalize containers so equal metadata compares equal however it was built.
        object.__setattr__(self, "tags", {str(k): tuple(v) for k, v in self.tags.items()})
        object.__setattr__(self, "properties", dict(self.properties))
        object.__setattr__(self, "sensitive", tuple(self.sensitive))

    def __hash__(self) -> int:
        return hash(_freeze(self.to_dict()))

    def to_dict(self) -> dict[str, Any]:
        """Returns: the registry's JSON shape (empty parts left out)."""
        out: dict[str, Any] = {}
        if self.tags:
            out["tags"] = {k: list(v) for k, v in self.tags.items()}
        if self.properties:
            out["properties"] = dict(self.properties)
        if self.sensitive:
            out["sensitive"] = list(self.sensitive)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Metadata:
        """Build from the registry's JSON shape."""
        return cls(
            tags={str(k): tuple(v) for k, v in (data.get("tags") or {}).items()},
            properties={str(k): str(v) for k, v in (data.get("properties") or {}).items()},
            sensitive=tuple(data.get("sensitive") or ()),
        )


@dataclass(frozen=True, slots=True)
class RuleSet:
    """Data-contract rules attached to a schema, kept as the registry's JSON rule objects.

    The registry stores and returns rules faithfully; the registry-bound serdes execute them
    (``kontrakt.serde.rules``). ``enable_at`` (``enableAt``) says where the rules run
    (``ALL``/``CLIENT`` or None: in clients).
    """

    migration_rules: Sequence[Mapping[str, Any]] = ()
    domain_rules: Sequence[Mapping[str, Any]] = ()
    encoding_rules: Sequence[Mapping[str, Any]] = ()
    enable_at: str | None = None

    def __post_init__(self) -> None:
        for name in ("migration_rules", "domain_rules", "encoding_rules"):
            object.__setattr__(self, name, tuple(dict(r) for r in getattr(self, name)))

    def __hash__(self) -> int:
        return hash(_freeze(self.to_dict()))

    def to_dict(self) -> dict[str, Any]:
        """Returns: the registry's JSON shape (empty lists left out)."""
        out: dict[str, Any] = {}
        for key, rules in (
            ("migrationRules", self.migration_rules),
            ("domainRules", self.domain_rules),
            ("encodingRules", self.encoding_rules),
        ):
            if rules:
                out[key] = [dict(r) for r in rules]
        if self.enable_at is not None:
            out["enableAt"] = self.enable_at
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RuleSet:
        """Build from the registry's JSON shape."""
        return cls(
            migration_rules=tuple(data.get("migrationRules") or ()),
            domain_rules=tuple(data.get("domainRules") or ()),
            encoding_rules=tuple(data.get("encodingRules") or ()),
            enable_at=str(data["enableAt"]) if data.get("enableAt") is not None else None,
        )


@dataclass(frozen=True, slots=True)
class Schema:
    """A schema, registered or not.

    Attributes:
        schema_str: the schema text (Avro JSON, JSON Schema JSON or ``.proto`` text).
        schema_type: ``"AVRO"`` (default), ``"JSON"`` or ``"PROTOBUF"``.
        references: schemas this one refers to.
        metadata: optional data-contract metadata.
        rule_set: optional data-contract rules.
    """

    schema_str: str
    schema_type: str = "AVRO"
    references: Sequence[SchemaReference] = ()
    metadata: Metadata | None = None
    rule_set: RuleSet | None = None

    def __post_init__(self) -> None:
        # Lists are accepted (confluent-kafka passes them); a tuple keeps the value hashable.
        if not isinstance(self.references, tuple):
            object.__setattr__(self, "references", tuple(self.references))

    def to_dict(self) -> dict[str, Any]:
        """Returns: the request body the registry expects (``schema``, ``schemaType``, ...)."""
        out: dict[str, Any] = {"schema": self.schema_str}
        if self.schema_type and self.schema_type != "AVRO":
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = [r.to_dict() for r in self.references]
        if self.metadata is not None:
            out["metadata"] = self.metadata.to_dict()
        if self.rule_set is not None:
            out["ruleSet"] = self.rule_set.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Schema:
        """Build from a registry response or request body.

        Raises:
            KeyError, TypeError, ValueError: when the shape is wrong.
        """
        meta = data.get("metadata")
        rules = data.get("ruleSet")
        return cls(
            schema_str=str(data["schema"]),
            schema_type=str(data.get("schemaType") or "AVRO"),
            references=tuple(SchemaReference.from_dict(r) for r in data.get("references") or ()),
            metadata=Metadata.from_dict(meta) if isinstance(meta, Mapping) else None,
            rule_set=RuleSet.from_dict(rules) if isinstance(rules, Mapping) else None,
        )


@dataclass(frozen=True, slots=True)
class RegisteredSchema:
    """A schema as registered under a subject.

    Attributes:
        schema_id: the registry-wide (per context) id of the schema.
        schema: the schema itself.
        subject: the subject, when known.
        version: the version within the subject, when known.
        guid: the schema's globally unique id, when the registry returns one.
    """

    schema_id: int
    schema: Schema
    subject: str | None = None
    version: int | None = None
    guid: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Returns: the registry's response shape (``id``, ``subject``, ``version``, ...)."""
        out = self.schema.to_dict()
        out["id"] = self.schema_id
        if self.subject is not None:
            out["subject"] = self.subject
        if self.version is not None:
            out["version"] = self.version
        if self.guid is not None:
            out["guid"] = self.guid
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], schema: Schema | None = None) -> RegisteredSchema:
        """Build from a registry response; ``schema`` stands in when the body has none.

        Raises:
            KeyError, TypeError, ValueError: when the shape is wrong.
        """
        if "schema" in data or schema is None:
            schema = Schema.from_dict(data)
        version = data.get("version")
        subject = data.get("subject")
        guid = data.get("guid")
        return cls(
            schema_id=int(data["id"]),
            schema=schema,
            subject=str(subject) if subject is not None else None,
            version=int(version) if version is not None else None,
            guid=str(guid) if guid is not None else None,
        )


@dataclass(frozen=True, slots=True)
class SchemaVersion:
    """One ``(subject, version)`` pair that holds a schema id."""

    subject: str
    version: int

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SchemaVersion:
        """Build from ``{"subject": ..., "version": ...}``."""
        return cls(str(data["subject"]), int(data["version"]))


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Global or subject configuration of a registry.

    Attributes:
        compatibility: the level to set (request side), or returned by a PUT.
        compatibility_level: the level a GET returns.
        compatibility_group, default_metadata, override_metadata, default_rule_set,
        override_rule_set: data-contract settings, stored and returned as given.
    """

    compatibility: CompatibilityLevel | None = None
    compatibility_level: CompatibilityLevel | None = None
    compatibility_group: str | None = None
    normalize: bool | None = None
    default_metadata: Metadata | None = None
    override_metadata: Metadata | None = None
    default_rule_set: RuleSet | None = None
    override_rule_set: RuleSet | None = None

    def to_dict(self) -> dict[str, Any]:
        """Returns: the registry's JSON shape, unset fields left out."""
        out: dict[str, Any] = {}
        if self.compatibility is not None:
            out["compatibility"] = self.compatibility.value
        if self.compatibility_level is not None:
            out["compatibilityLevel"] = self.compatibility_level.value
        if self.compatibility_group is not None:
            out["compatibilityGroup"] = self.compatibility_group
        if self.normalize is not None:
            out["normalize"] = self.normalize
        for key, val in (
            ("defaultMetadata", self.default_metadata),
            ("overrideMetadata", self.override_metadata),
            ("defaultRuleSet", self.default_rule_set),
            ("overrideRuleSet", self.override_rule_set),
        ):
            if val is not None:
                out[key] = val.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ServerConfig:
        """Build from the registry's JSON shape.

        Raises:
            ValueError: for an unknown compatibility level.
        """

        def level(key: str) -> CompatibilityLevel | None:
            raw = data.get(key)
            return CompatibilityLevel(str(raw).upper()) if raw is not None else None

        def meta(key: str) -> Metadata | None:
            raw = data.get(key)
            return Metadata.from_dict(raw) if isinstance(raw, Mapping) else None

        def rules(key: str) -> RuleSet | None:
            raw = data.get(key)
            return RuleSet.from_dict(raw) if isinstance(raw, Mapping) else None

        norm = data.get("normalize")
        group = data.get("compatibilityGroup")
        return cls(
            compatibility=level("compatibility"),
            compatibility_level=level("compatibilityLevel"),
            compatibility_group=str(group) if group is not None else None,
            normalize=bool(norm) if norm is not None else None,
            default_metadata=meta("defaultMetadata"),
            override_metadata=meta("overrideMetadata"),
            default_rule_set=rules("defaultRuleSet"),
            override_rule_set=rules("overrideRuleSet"),
        )


@dataclass(frozen=True, slots=True)
class CompatibilityTestResult:
    """Answer of a registry compatibility test with ``verbose=true``.

    Attributes:
        is_compatible: the verdict.
        messages: the registry's explanations (empty when compatible).
    """

    is_compatible: bool
    messages: tuple[str, ...] = ()
