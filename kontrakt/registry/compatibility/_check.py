"""The entry point: check a new schema against previous ones at a compatibility level."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kontrakt.registry.compatibility._result import (
    CompatibilityLevel,
    CompatibilityResult,
    Incompatibility,
    JsonSchemaPolicy,
    ReferenceLookup,
    SchemaLike,
    UnresolvedReferenceError,
    UnsupportedSchemaError,
)

__all__ = ["ResolvedReference", "check_compatibility", "resolve_references", "schema_type_of"]

SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")


class VersionSource(Protocol):
    """A registry client (ours or confluent-kafka's): ``get_version(subject, version)``
    returns a registered schema whose ``.schema`` is schema-like."""

    def get_version(self, subject_name: str, version: Any) -> Any:
        """The registered schema of one subject version."""


def as_lookup(source: ReferenceLookup | VersionSource | None) -> ReferenceLookup | None:
    """Turn a lookup callable or a registry client into a lookup callable."""
    get_version = getattr(source, "get_version", None)
    if get_version is None:
        return source  # type: ignore[return-value]

    def lookup(ref: Any) -> Any:
        registered = get_version(ref.subject, ref.version)
        return getattr(registered, "schema", registered)

    return lookup
_MAX_REFERENCE_DEPTH = 64


def schema_type_of(schema: SchemaLike) -> str:
    """The upper-case schema type of a schema-like object (None means AVRO).

    Raises:
        UnsupportedSchemaError: the type is not AVRO, JSON or PROTOBUF.
    """
    raw = getattr(schema, "schema_type", None)
    stype = "AVRO" if raw is None or raw == "" else str(raw).upper()
    if stype not in SCHEMA_TYPES:
        raise UnsupportedSchemaError(
            f"schema type {raw!r} is not supported; expected one of {', '.join(SCHEMA_TYPES)}"
        )
    return stype


@dataclass(frozen=True, slots=True)
class ResolvedReference:
    """A reference and the schema text it resolved to."""

    name: str
    subject: str
    version: int | None
    schema_str: str


def resolve_references(
    schema: SchemaLike, lookup: ReferenceLookup | None
) -> list[ResolvedReference]:
    """Resolve a schema's references (and theirs), dependencies first, each once.

    Args:
        schema: the schema whose references to resolve.
        lookup: callable turning a reference into a schema-like object.

    Returns:
        The resolved references in an order where every schema follows what it refers to.

    Raises:
        UnresolvedReferenceError: there are references but no lookup, the lookup failed, or
            the references nest deeper than 64 levels (a cycle).
    """
    out: list[ResolvedReference] = []
    seen: set[tuple[str, str, int | None]] = set()

    def visit(current: SchemaLike, depth: int) -> None:
        refs = list(getattr(current, "references", None) or [])
        if not refs:
            return
        if lookup is None:
            names = ", ".join(repr(r.name) for r in refs)
            raise UnresolvedReferenceError(
                f"the schema has references ({names}) but no lookup was given to resolve them"
            )
        if depth > _MAX_REFERENCE_DEPTH:
            raise UnresolvedReferenceError("schema references nest too deeply (a cycle?)")
        for ref in refs:
            key = (ref.name, ref.subject, ref.version)
            if key in seen:
                continue
            seen.add(key)
            try:
                target = lookup(ref)
            except Exception as exc:  # the lookup is user code: report what failed and why
                raise UnresolvedReferenceError(
                    f"could not resolve reference {ref.name!r} (subject {ref.subject!r}, "
                    f"version {ref.version}): {exc}"
                ) from exc
            if target is None:
                raise UnresolvedReferenceError(
                    f"reference {ref.name!r} (subject {ref.subject!r}, version {ref.version}) "
                    "was not found"
                )
            visit(target, depth + 1)
            out.append(ResolvedReference(ref.name, ref.subject, ref.version, target.schema_str))

    visit(schema, 0)
    return out


def parse_schema(schema: SchemaLike, lookup: ReferenceLookup | None) -> Any:
    """Parse a schema-like object into the model of its type (references resolved).

    Raises:
        SchemaParseError: invalid text; UnsupportedSchemaError: unknown type or construct.
    """
    stype = schema_type_of(schema)
    refs = resolve_references(schema, lookup)
    if stype == "AVRO":
        from kontrakt.registry.compatibility._avro_model import parse_avro

        return parse_avro(schema.schema_str, [r.schema_str for r in refs])
    if stype == "JSON":
        from kontrakt.registry.compatibility._json_model import parse_json_schema

        return parse_json_schema(schema.schema_str, [(r.name, r.schema_str) for r in refs])
    from kontrakt.registry.compatibility._proto_parser import parse_proto_schema

    return parse_proto_schema(schema.schema_str, [(r.name, r.schema_str) for r in refs])


def _pair(
    stype: str, new: Any, old: Any, direction: str, policy: JsonSchemaPolicy
) -> list[tuple[str, str, str, str]]:
    """Issues as (error_type, path, description, additional_info) for one direction."""
    if stype == "AVRO":
        from kontrakt.registry.compatibility._avro import check_avro_pair

        if direction == "BACKWARD":
            found = check_avro_pair(new, old, reader_role="new", writer_role="old")
        else:
            found = check_avro_pair(old, new, reader_role="old", writer_role="new")
        return [(i.error_type, i.path, i.description, i.additional_info) for i in found]
    if stype == "JSON":
        from kontrakt.registry.compatibility._json_schema import json_schema_issues

        if direction == "BACKWARD":
            return json_schema_issues(old, new, policy, original_role="old", update_role="new")
        return json_schema_issues(new, old, policy, original_role="new", update_role="old")
    from kontrakt.registry.compatibility._protobuf import protobuf_issues

    if direction == "BACKWARD":
        return protobuf_issues(old, new, original_role="old", update_role="new")
    return protobuf_issues(new, old, original_role="new", update_role="old")


def _version_of(schema: SchemaLike, position: int) -> int:
    version = getattr(schema, "version", None)
    return version if isinstance(version, int) and not isinstance(version, bool) else position


def check_compatibility(
    new_schema: SchemaLike,
    previous_schemas: Iterable[SchemaLike],
    level: CompatibilityLevel | str = "BACKWARD",
    *,
    lookup: ReferenceLookup | VersionSource | None = None,
    policy: JsonSchemaPolicy | str = JsonSchemaPolicy.STRICT,
) -> CompatibilityResult:
    """Check whether ``new_schema`` may follow ``previous_schemas`` at ``level``.

    This is what Confluent Schema Registry does when a schema is registered or tested with
    ``POST /compatibility/...``: the new schema is parsed (so an invalid schema is an error even
    at level NONE) and compared with the newest previous schema, or with every previous schema
    for the ``*_TRANSITIVE`` levels. Pure computation: no I/O except through ``lookup``.

    Args:
        new_schema: the candidate; any object with ``schema_str``, ``schema_type`` ("AVRO",
            "JSON", "PROTOBUF"; None means AVRO) and ``references``.
        previous_schemas: the subject's earlier schemas, oldest first. If an object has an
            integer ``version`` attribute, messages name it; otherwise its 1-based position.
        level: a :class:`CompatibilityLevel` or its name (any case).
        lookup: resolves a reference (``name``, ``subject``, ``version``) to a schema-like
            object; needed when any schema has references. A registry client (anything with
            ``get_version(subject, version)`` returning an object with ``.schema``) works too.
        policy: JSON Schema policy, ``"strict"`` (Confluent's rules, the default) or
            ``"lenient"`` (see :class:`JsonSchemaPolicy`). Ignored for other types.

    Returns:
        A :class:`CompatibilityResult`; ``messages`` list what changed, where, and which old
        version it conflicts with (Confluent's verbose style).

    Raises:
        InvalidCompatibilityLevelError: ``level`` or ``policy`` is not a known name (a
            ``ConfigError``).
        SchemaParseError: the new or an old schema is invalid.
        UnresolvedReferenceError: a reference cannot be resolved.
        UnsupportedSchemaError: an unknown schema type or a construct the engine cannot judge.
    """
    lvl = CompatibilityLevel.parse(level)
    pol = JsonSchemaPolicy.parse(policy)
    lookup = as_lookup(lookup)
    previous: Sequence[SchemaLike] = list(previous_schemas)
    stype = schema_type_of(new_schema)
    new_parsed = parse_schema(new_schema, lookup)
    if lvl is CompatibilityLevel.NONE or not previous:
        return CompatibilityResult(True)
    positions = list(range(1, len(previous) + 1))
    targets = list(zip(positions, previous, strict=True))
    if not lvl.transitive:
        targets = targets[-1:]
    directions = [d for d, on in (("BACKWARD", lvl.backward), ("FORWARD", lvl.forward)) if on]
    messages: list[str] = []
    found: list[Incompatibility] = []
    # Newest first, as Confluent reports it.
    for position, old in reversed(targets):
        version = _version_of(old, position)
        old_type = schema_type_of(old)
        lines: list[str] = []
        if old_type != stype:
            issue = Incompatibility(
                "SCHEMA_TYPE_MISMATCH", "/",
                f"Incompatible because of different schema type: the new schema is {stype} "
                f"and version {version} is {old_type}",
                version, directions[0],
            )
            found.append(issue)
            lines.append(_line(issue, ""))
        else:
            old_parsed = parse_schema(old, lookup)
            for direction in directions:
                for etype, path, desc, info in _pair(stype, new_parsed, old_parsed, direction,
                                                     pol):
                    issue = Incompatibility(etype, path, desc, version, direction)
                    if issue in found:
                        continue
                    found.append(issue)
                    lines.append(_line(issue, info))
        if lines:
            messages.extend(lines)
            messages.append(f"{{oldSchemaVersion: {version}}}")
            messages.append(f"{{oldSchema: '{_compact(old.schema_str)}'}}")
            messages.append(f"{{compatibility: '{lvl.value}'}}")
    return CompatibilityResult(not found, messages, tuple(found))


def _line(issue: Incompatibility, info: str) -> str:
    extra = f", additionalInfo:'{info}'" if info else ""
    return f"{{errorType:'{issue.error_type}', description:'{issue.description}'{extra}}}"


def _compact(text: str) -> str:
    try:
        return json.dumps(json.loads(text), separators=(",", ":"))
    except (ValueError, TypeError):
        return " ".join(text.split())
