"""Values shared by every format checker: levels, results, schema protocols and errors."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar, runtime_checkable

from kontrakt.errors import ConfigError, KontraktError

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
]


class SchemaParseError(KontraktError, ValueError):
    """A schema text is not a valid schema of its declared type.

    Attributes:
        schema_type: ``"AVRO"``, ``"JSON"`` or ``"PROTOBUF"``.
        path: where in the schema the problem was found (``/fields/2/type``), or ``""``.
    """

    def __init__(self, message: str, *, schema_type: str = "", path: str = "") -> None:
        where = f" at {path}" if path else ""
        prefix = f"invalid {schema_type} schema" if schema_type else "invalid schema"
        super().__init__(f"{prefix}{where}: {message}")
        self.schema_type = schema_type
        self.path = path


class UnsupportedSchemaError(KontraktError, ValueError):
    """A schema uses a construct (or a schema type) the compatibility engine cannot judge.

    Raised instead of answering "compatible" for something that was not checked.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)


class UnresolvedReferenceError(SchemaParseError):
    """A schema reference (or an import / named type it needs) could not be resolved."""

    def __init__(self, message: str, *, schema_type: str = "", path: str = "") -> None:
        super().__init__(message, schema_type=schema_type, path=path)


class InvalidCompatibilityLevelError(ConfigError):
    """A compatibility level (or JSON Schema policy) name is not one of the known values."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


_E = TypeVar("_E", bound=enum.Enum)


def _member(cls: type[_E], value: object) -> _E | None:
    """``value`` as a member of the str enum ``cls`` (a member, or its name in any case)."""
    if isinstance(value, cls):
        return value
    if isinstance(value, str):
        try:
            return cls(value.strip().upper())
        except ValueError:
            pass
    return None


class CompatibilityLevel(str, enum.Enum):
    """Schema Registry compatibility levels (Confluent's names and meanings).

    BACKWARD: the new schema can read data written with the previous schema.
    FORWARD: the previous schema can read data written with the new schema.
    FULL: both. ``*_TRANSITIVE``: against every previous schema, not only the newest.
    """

    NONE = "NONE"
    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"

    @classmethod
    def parse(cls, value: CompatibilityLevel | str) -> CompatibilityLevel:
        """Turn a level name (any case) or member into a member.

        Args:
            value: a member, or a name such as ``"backward_transitive"``.

        Returns:
            The member.

        Raises:
            InvalidCompatibilityLevelError: the name is not a known level.
        """
        member = _member(cls, value)
        if member is not None:
            return member
        known = ", ".join(m.value for m in cls)
        raise InvalidCompatibilityLevelError(
            f"unknown compatibility level {value!r}; expected one of {known}"
        )

    @property
    def transitive(self) -> bool:
        """True when every previous schema is checked, not only the newest."""
        return self.value.endswith("_TRANSITIVE")

    @property
    def backward(self) -> bool:
        """True when the new schema must read the previous schemas' data."""
        return self.value.startswith(("BACKWARD", "FULL"))

    @property
    def forward(self) -> bool:
        """True when the previous schemas must read the new schema's data."""
        return self.value.startswith(("FORWARD", "FULL"))


class JsonSchemaPolicy(str, enum.Enum):
    """How strictly JSON Schema changes are judged.

    STRICT: Confluent's rules: adding a property to an *open* content model is incompatible,
    because data written before may already hold that property with another type.
    LENIENT: additionally assume writers never emit undeclared properties, so properties may be
    added to (and removed from) open content models as long as the change is otherwise
    compatible. Everything else is judged as in STRICT.
    """

    STRICT = "STRICT"
    LENIENT = "LENIENT"

    @classmethod
    def parse(cls, value: JsonSchemaPolicy | str) -> JsonSchemaPolicy:
        """Turn a policy name (any case) or member into a member.

        Raises:
            InvalidCompatibilityLevelError: the name is not ``strict`` or ``lenient``.
        """
        member = _member(cls, value)
        if member is not None:
            return member
        raise InvalidCompatibilityLevelError(
            f"unknown JSON Schema policy {value!r}; expected 'strict' or 'lenient'"
        )


@runtime_checkable
class ReferenceLike(Protocol):
    """A reference from one schema to another registered schema."""

    @property
    def name(self) -> str:
        """The name the referring schema uses (Avro full name, import path, $ref URL)."""

    @property
    def subject(self) -> str:
        """Subject the referenced schema is registered under."""

    @property
    def version(self) -> int | None:
        """Version of the referenced schema in that subject."""


@runtime_checkable
class SchemaLike(Protocol):
    """Anything that looks like a registry ``Schema``: text, type and references."""

    @property
    def schema_str(self) -> str:
        """The schema text."""

    @property
    def schema_type(self) -> str | None:
        """``"AVRO"`` (or None), ``"JSON"`` or ``"PROTOBUF"``."""

    @property
    def references(self) -> Sequence[ReferenceLike] | None:
        """References to other schemas, in declaration order."""


#: Resolves a reference to the schema it names.
ReferenceLookup = Callable[[ReferenceLike], SchemaLike]


@dataclass(frozen=True, slots=True)
class Incompatibility:
    """One reason why two schemas are not compatible.

    Attributes:
        error_type: Confluent's name for the kind of problem, e.g.
            ``READER_FIELD_MISSING_DEFAULT_VALUE`` (Avro), ``PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL``
            (JSON Schema), ``FIELD_SCALAR_KIND_CHANGED`` (Protobuf).
        path: where in the schema (``/fields/1``, ``#/properties/age``, ``#/Order/3``).
        description: a sentence saying what changed.
        old_version: version of the previous schema it conflicts with, when known.
        direction: ``"BACKWARD"`` (new schema reads old data) or ``"FORWARD"``.
    """

    error_type: str
    path: str
    description: str
    old_version: int | None = None
    direction: str = "BACKWARD"

    def __str__(self) -> str:
        return (
            f"{{errorType:'{self.error_type}', description:'{self.description}', "
            f"path:'{self.path}', oldSchemaVersion: {self.old_version}, "
            f"direction:'{self.direction}'}}"
        )


@dataclass(frozen=True, slots=True)
class CompatibilityResult:
    """The answer of :func:`check_compatibility`.

    Attributes:
        is_compatible: True when the new schema may be registered at the level.
        messages: human-readable reasons (empty when compatible), like Confluent's verbose mode:
            one line per incompatibility, then which old version it conflicts with.
        incompatibilities: the same reasons as structured values.
    """

    is_compatible: bool
    messages: list[str] = field(default_factory=list)
    incompatibilities: tuple[Incompatibility, ...] = ()
