"""What the compatibility rule tables share: schema values and a checked checker call."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kontrakt.registry.compatibility import check_compatibility


@dataclass
class Ref:
    """A schema reference (the registry client's ``SchemaReference`` shape)."""

    name: str
    subject: str
    version: int


@dataclass
class Schema:
    """A schema value (the registry client's ``Schema`` shape)."""

    schema_str: str
    schema_type: str | None = None
    references: list[Ref] = field(default_factory=list)


def schemas_of(default_type: str | None) -> Callable[..., Schema]:
    """A ``Schema`` factory whose ``schema_type`` defaults to ``default_type``."""
    def make(schema_str: str, schema_type: str | None = default_type,
             references: Iterable[Ref] = ()) -> Schema:
        return Schema(schema_str, schema_type, list(references))
    return make


def error_types(new: Schema, previous: list[Schema], level: str, **options: Any) -> set[str]:
    """The error types ``check_compatibility`` reports, after checking that its verdict agrees
    with them (compatible exactly when there are none)."""
    result = check_compatibility(new, previous, level, **options)
    found = {i.error_type for i in result.incompatibilities}
    assert result.is_compatible == (not found)
    return found
