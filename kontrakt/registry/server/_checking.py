"""The compatibility checker's plug point: its signature and the default engine.

:class:`~kontrakt.registry.server.RegistryState` calls a checker with the new schema and
the previous ones (as :class:`VersionedSchema`) it must be compared with; the default,
:func:`default_compatibility_checker`, asks :mod:`kontrakt.registry.compatibility` and
refuses to answer rather than call a schema compatible that it could not check.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kontrakt.registry._errors import CompatibilityCheckUnavailableError, InvalidSchemaError
from kontrakt.registry._models import Schema, SchemaReference

__all__ = [
    "CompatibilityChecker",
    "ReferenceResolver",
    "VersionedSchema",
    "default_compatibility_checker",
]

#: Resolves a reference (``name``, ``subject``, ``version``) to the referenced schema.
ReferenceResolver = Callable[[Any], Schema]
#: ``checker(new_schema, previous_schemas, level, lookup) -> (is_compatible, messages)``;
#: previous schemas are oldest first and carry a ``version`` attribute.
CompatibilityChecker = Callable[[Schema, list[Any], str, ReferenceResolver],
                                "tuple[bool, list[str]]"]


@dataclass(frozen=True)
class VersionedSchema:
    """A previous schema handed to the checker, with the version messages should name."""

    schema_str: str
    schema_type: str
    references: tuple[SchemaReference, ...]
    version: int


def default_compatibility_checker(new: Schema, previous: list[Any], level: str,
                                  lookup: ReferenceResolver) -> tuple[bool, list[str]]:
    """Check with :mod:`kontrakt.registry.compatibility`; refuse if it cannot answer.

    Raises:
        InvalidSchemaError: the engine could not parse the new schema (42201).
        CompatibilityCheckUnavailableError: the engine is not installed, or it raised for any
            other reason (for example a construct it does not support). Never reports
            "compatible" then.
    """
    try:
        from kontrakt.registry.compatibility import (
            SchemaParseError,  # type: ignore[attr-defined,unused-ignore]
            check_compatibility,  # type: ignore[attr-defined,unused-ignore]
        )
    except ImportError as exc:
        raise CompatibilityCheckUnavailableError(
            422, 42290, f"Compatibility level {level} cannot be checked: the compatibility "
            f"engine is not available ({exc}); set the level to NONE to register anyway"
        ) from None
    try:
        result = check_compatibility(new, previous, level=level, lookup=lookup)
        return bool(result.is_compatible), [str(m) for m in result.messages]
    except SchemaParseError as exc:
        raise InvalidSchemaError(422, 42201, f"Invalid schema: {exc}") from None
    except Exception as exc:  # the engine's "unsupported construct" and any failure alike
        raise CompatibilityCheckUnavailableError(
            422, 42290, f"Compatibility level {level} cannot be checked for this schema: "
            f"{type(exc).__name__}: {exc}") from None
