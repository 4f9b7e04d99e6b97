"""Schema contract assertions for pytest (or any test runner).

Example::

    from kontrakt.testing.contracts import assert_compatible, assert_folder_compatible

    def test_user_event_v2_is_backward_compatible():
        assert_compatible(Path("schemas/user-value.avsc"), [Path("tests/data/user-v1.avsc")])

    def test_schemas_folder_against_main():
        assert_folder_compatible("schemas", git="origin/main", level="FULL")
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kontrakt.registry.compatibility import (
    CompatibilityLevel,
    CompatibilityResult,
    JsonSchemaPolicy,
    ReferenceLookup,
    SchemaLike,
    check_compatibility,
)

__all__ = ["assert_compatible", "assert_folder_compatible"]

_EXTENSIONS = {".avsc": "AVRO", ".json": "JSON", ".proto": "PROTOBUF"}
SchemaInput = SchemaLike | str | Path


@dataclass(frozen=True, slots=True)
class _Schema:
    schema_str: str
    schema_type: str | None
    references: list[Any] = field(default_factory=list)


def _as_schema(value: SchemaInput, schema_type: str | None) -> SchemaLike:
    if isinstance(value, Path):
        stype = schema_type or _EXTENSIONS.get(value.suffix.lower())
        if stype is None:
            raise ValueError(f"cannot tell the schema type of {str(value)!r}; pass schema_type")
        return _Schema(value.read_text(encoding="utf-8"), stype)
    if isinstance(value, str):
        return _Schema(value, schema_type or "AVRO")
    return value


def assert_compatible(
    new: SchemaInput,
    previous: SchemaInput | Sequence[SchemaInput],
    level: CompatibilityLevel | str = "BACKWARD",
    *,
    schema_type: str | None = None,
    lookup: ReferenceLookup | None = None,
    policy: JsonSchemaPolicy | str = "strict",
) -> CompatibilityResult:
    """Assert that ``new`` may follow ``previous`` at ``level``.

    Args:
        new: the candidate: a schema-like object, schema text, or a ``Path`` to a ``.avsc``,
            ``.json`` or ``.proto`` file.
        previous: one previous schema or a sequence of them, oldest first (same forms).
        level: compatibility level (name or member).
        schema_type: type of schemas given as text or as files with another extension
            (text defaults to AVRO).
        lookup: resolves schema references.
        policy: JSON Schema policy (``strict`` or ``lenient``).

    Returns:
        The result, for further assertions.

    Raises:
        AssertionError: incompatible; the message lists every reason (Confluent-style).
        SchemaParseError, UnsupportedSchemaError, InvalidCompatibilityLevelError: bad input.
    """
    olds = ([previous] if isinstance(previous, (str, Path)) or not isinstance(previous, Sequence)
            else list(previous))
    result = check_compatibility(
        _as_schema(new, schema_type),
        [_as_schema(o, schema_type) for o in olds],
        level, lookup=lookup, policy=policy,
    )
    if not result.is_compatible:
        reasons = "\n  ".join(result.messages)
        raise AssertionError(f"schema is not {CompatibilityLevel.parse(level).value} "
                             f"compatible:\n  {reasons}")
    return result


def assert_folder_compatible(
    folder: str | Path = "schemas",
    *,
    git: str | None = None,
    registry: str | None = None,
    level: CompatibilityLevel | str | None = None,
    policy: JsonSchemaPolicy | str = "strict",
) -> None:
    """Assert that every schema file in ``folder`` is compatible with its previous versions.

    The same check as ``kontrakt schemas check``: against the files committed at git revision
    ``git`` (default ``HEAD`` when no registry is given) or the subjects in the registry at
    ``registry``.

    Raises:
        AssertionError: a schema is incompatible or could not be checked (the report says
            which and why).
        SchemaSourceError: git or the registry could not be read.
    """
    from kontrakt.cli._schemas import check_against_git, check_against_registry, format_report

    path = Path(folder)
    if registry is not None:
        reports = check_against_registry(path, registry, level, policy)
    else:
        reports = check_against_git(path, git or "HEAD", level or "BACKWARD", policy)
    if not all(r.ok for r in reports):
        raise AssertionError("schema contract check failed:\n" + format_report(reports))
