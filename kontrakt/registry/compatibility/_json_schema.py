"""JSON Schema compatibility: Confluent's difference-based rules.

The original schema is compared with the update and every difference gets a Confluent type
name (``PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL``, ``TYPE_NARROWED``, ...). A change is compatible
when every difference is in the compatible set: the update accepts at least everything the
original accepts. BACKWARD compares (old -> new), FORWARD (new -> old).

Content models: an object is *open* when it has no ``patternProperties`` and
``additionalProperties`` is absent or ``true``; *closed* when ``additionalProperties`` is
``false``; *partially open* when an ``additionalProperties`` schema or ``patternProperties``
says what undeclared properties look like. Adding a property to an open model is incompatible
(old data may hold anything under that name) unless its schema is empty; adding one to a closed
model is compatible unless it is required without a default; a partially open model must
cover it. Removing properties is the mirror image. Arrays (tuple items) follow the same rules.
Where ``additionalProperties`` (``additionalItems``) is absent, ``unevaluatedProperties`` (from
draft 2019-09 on) and ``unevaluatedItems`` decide the content model the same way.

Kontrakt extensions (Confluent does not compare these keywords and would say "compatible"):
``format`` added or changed is incompatible (``FORMAT_ADDED``/``FORMAT_CHANGED``), removed is
compatible; a change to a keyword the engine does not model (``propertyNames``, ``contains``,
``if``/``then``/``else``, ...) raises UnsupportedSchemaError.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kontrakt.registry.compatibility._json_model import (
    JsonNode,
    JsonSchemaDocument,
    canonical_value,
)
from kontrakt.registry.compatibility._json_object import (
    compare_array,
    compare_object,
    keyword_change,
)
from kontrakt.registry.compatibility._result import JsonSchemaPolicy, UnsupportedSchemaError

__all__ = ["COMPATIBLE_CHANGES", "json_schema_issues"]

COMPATIBLE_CHANGES = frozenset({
    "ID_CHANGED", "DESCRIPTION_CHANGED", "TITLE_CHANGED", "DEFAULT_CHANGED", "SCHEMA_REMOVED",
    "TYPE_EXTENDED",
    "MAX_LENGTH_INCREASED", "MAX_LENGTH_REMOVED", "MIN_LENGTH_DECREASED", "MIN_LENGTH_REMOVED",
    "PATTERN_REMOVED", "FORMAT_REMOVED",
    "MAXIMUM_INCREASED", "MAXIMUM_REMOVED", "MINIMUM_DECREASED", "MINIMUM_REMOVED",
    "EXCLUSIVE_MAXIMUM_INCREASED", "EXCLUSIVE_MAXIMUM_REMOVED", "EXCLUSIVE_MINIMUM_DECREASED",
    "EXCLUSIVE_MINIMUM_REMOVED", "MULTIPLE_OF_REDUCED", "MULTIPLE_OF_REMOVED",
    "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED", "REQUIRED_ATTRIBUTE_REMOVED",
    "DEPENDENCY_ARRAY_NARROWED", "DEPENDENCY_ARRAY_REMOVED", "DEPENDENCY_SCHEMA_REMOVED",
    "MAX_PROPERTIES_INCREASED", "MAX_PROPERTIES_REMOVED", "MIN_PROPERTIES_DECREASED",
    "MIN_PROPERTIES_REMOVED", "ADDITIONAL_PROPERTIES_ADDED", "ADDITIONAL_PROPERTIES_EXTENDED",
    "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
    "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL",
    "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
    "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL",
    "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "MAX_ITEMS_INCREASED", "MAX_ITEMS_REMOVED", "MIN_ITEMS_DECREASED", "MIN_ITEMS_REMOVED",
    "UNIQUE_ITEMS_REMOVED", "ADDITIONAL_ITEMS_ADDED", "ADDITIONAL_ITEMS_EXTENDED",
    "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL",
    "ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL",
    "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "MAX_CONTAINS_INCREASED", "MAX_CONTAINS_REMOVED", "MIN_CONTAINS_DECREASED",
    "MIN_CONTAINS_REMOVED", "UNEVALUATED_ITEMS_ADDED", "UNEVALUATED_ITEMS_EXTENDED",
    "UNEVALUATED_PROPERTIES_ADDED", "UNEVALUATED_PROPERTIES_EXTENDED",
    "ENUM_ARRAY_EXTENDED",
    "COMBINED_TYPE_EXTENDED", "PRODUCT_TYPE_NARROWED", "SUM_TYPE_EXTENDED", "NOT_TYPE_NARROWED",
})
#: The lenient policy also assumes writers never emit undeclared properties or items.
LENIENT_EXTRA = frozenset({"PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL",
                           "ITEM_ADDED_TO_OPEN_CONTENT_MODEL"})

_EXPLAIN = {
    "TYPE_CHANGED": "the type changed",
    "TYPE_NARROWED": "the type was narrowed (number to integer)",
    "SCHEMA_ADDED": "a schema was added where there was none",
    "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL":
        "a property was added to an open content model, where {orig} data may already hold "
        "that property with any type",
    "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL":
        "a property was removed from a closed content model, so {orig} data holding it is "
        "rejected",
    "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL":
        "a required property without a default was added",
    "REQUIRED_ATTRIBUTE_ADDED": "an existing property became required without a default",
    "ADDITIONAL_PROPERTIES_REMOVED": "additional properties are no longer allowed",
    "ADDITIONAL_PROPERTIES_NARROWED": "additional properties are now constrained by a schema",
    "UNEVALUATED_PROPERTIES_REMOVED": "unevaluated properties are no longer allowed",
    "UNEVALUATED_PROPERTIES_NARROWED": "unevaluated properties are now constrained by a schema",
    "ENUM_ARRAY_NARROWED": "enum values were removed",
    "ENUM_ARRAY_CHANGED": "enum values were changed",
    "COMBINED_TYPE_SUBSCHEMAS_CHANGED": "the subschemas of a combined schema changed",
    "COMBINED_TYPE_CHANGED": "the kind of combined schema changed",
    "SUM_TYPE_NARROWED": "alternatives were removed from a oneOf/anyOf",
    "PRODUCT_TYPE_EXTENDED": "schemas were added to an allOf",
    "NOT_TYPE_EXTENDED": "the schema under 'not' changed",
    "CONST_CHANGED": "the const value changed",
}


class _Context:
    def __init__(self, compatible: frozenset[str]) -> None:
        self.compatible = compatible
        self.path: list[str] = ["#"]
        self.diffs: list[tuple[str, str]] = []
        self.visiting: set[tuple[int, int]] = set()

    def sub(self) -> _Context:
        ctx = _Context(self.compatible)
        ctx.path = list(self.path)
        ctx.visiting = self.visiting
        return ctx

    def add(self, dtype: str, leaf: str | None = None) -> None:
        path = "/".join([*self.path, leaf] if leaf else self.path)
        self.diffs.append((dtype, "#/" if path == "#" else path))

    def extend(self, other: _Context) -> None:
        self.diffs.extend(other.diffs)

    @property
    def is_compatible(self) -> bool:
        return all(d in self.compatible for d, _ in self.diffs)

    @contextmanager
    def at(self, *tokens: str) -> Iterator[None]:
        self.path.extend(tokens)
        try:
            yield
        finally:
            del self.path[len(self.path) - len(tokens):]


def _compare(ctx: _Context, original: JsonNode | None, update: JsonNode | None) -> None:
    if original is None and update is None:
        return
    if original is None:
        ctx.add("SCHEMA_ADDED")
        return
    if update is None:
        ctx.add("SCHEMA_REMOVED")
        return
    original, update = original.deref(), update.deref()
    if original.kind != "combined" and update.kind == "combined":
        if len(update.subschemas) == 1:
            if _adopt(ctx, original, update.subschemas[0]):
                return
        elif update.criterion in ("anyOf", "oneOf") and any(
                _adopt(ctx, original, candidate, "SUM_TYPE_EXTENDED")
                for candidate in update.subschemas):
            return
    elif original.kind == "combined" and update.kind != "combined":
        if len(original.subschemas) == 1:
            if _adopt(ctx, original.subschemas[0], update):
                return
        # Dropping conjuncts (e.g. an enum next to a type) accepts more: compatible when
        # what is left is compatible with one of them.
        elif original.criterion == "allOf" and any(
                _adopt(ctx, candidate, update, "PRODUCT_TYPE_NARROWED")
                for candidate in original.subschemas):
            return
    if original.kind != update.kind:
        if original.kind == "false" or update.kind == "empty":
            return  # nothing was accepted before, or everything is accepted now
        ctx.add("TYPE_CHANGED")
        return
    key = (id(original), id(update))
    if key in ctx.visiting:
        return  # recursive schema: this pair is already being compared further up
    ctx.visiting.add(key)
    try:
        _compare_same_kind(ctx, original, update)
    finally:
        ctx.visiting.discard(key)


def _compare_same_kind(ctx: _Context, original: JsonNode, update: JsonNode) -> None:
    for attr, dtype in (("id", "ID_CHANGED"), ("title", "TITLE_CHANGED"),
                        ("description", "DESCRIPTION_CHANGED"), ("default", "DEFAULT_CHANGED")):
        if canonical_value(getattr(original, attr)) != canonical_value(getattr(update, attr)):
            ctx.add(dtype)
    _check_unmodelled(ctx, original, update)
    kind = original.kind
    if kind == "string":
        keyword_change(ctx, "maxLength", "MAX_LENGTH", original.max_length, update.max_length)
        keyword_change(ctx, "minLength", "MIN_LENGTH", original.min_length, update.min_length)
        keyword_change(ctx, "pattern", "PATTERN", original.pattern, update.pattern)
        keyword_change(ctx, "format", "FORMAT", original.format, update.format)
    elif kind == "number":
        _number(ctx, original, update)
    elif kind == "enum":
        _enum(ctx, original, update)
    elif kind == "const":
        if canonical_value(original.const) != canonical_value(update.const):
            ctx.add("CONST_CHANGED", "const")
    elif kind == "combined":
        _combined(ctx, original, update)
    elif kind == "not":
        sub = ctx.sub()
        # `not A` accepts more when A accepts less: compare the other way round.
        _compare(sub, update.not_schema, original.not_schema)
        if not sub.is_compatible:
            ctx.add("NOT_TYPE_EXTENDED", "not")
        elif sub.diffs:
            ctx.add("NOT_TYPE_NARROWED", "not")
    elif kind == "object":

        compare_object(ctx, original, update, _compare)
    elif kind == "array":

        compare_array(ctx, original, update, _compare)


def _check_unmodelled(ctx: _Context, original: JsonNode, update: JsonNode) -> None:
    keys = set(original.unmodelled) | set(update.unmodelled)
    for key in sorted(keys):
        before = canonical_value(original.unmodelled.get(key))
        after = canonical_value(update.unmodelled.get(key))
        if before != after:
            where = "/".join(ctx.path)
            raise UnsupportedSchemaError(
                f"JSON Schema keyword {key!r} changed at {where}; Kontrakt cannot judge the "
                "compatibility of changes to it (refusing rather than answering 'compatible')"
            )


def _adopt(ctx: _Context, original: JsonNode, update: JsonNode, change: str = "") -> bool:
    """Compare in a scratch context; keep its findings (and record ``change``) only when
    compatible. Returns whether it was."""
    sub = ctx.sub()
    _compare(sub, original, update)
    if not sub.is_compatible:
        return False
    ctx.extend(sub)
    if change:
        ctx.add(change)
    return True




def _number(ctx: _Context, original: JsonNode, update: JsonNode) -> None:
    keyword_change(ctx, "maximum", "MAXIMUM", original.maximum, update.maximum)
    keyword_change(ctx, "minimum", "MINIMUM", original.minimum, update.minimum)
    keyword_change(ctx, "exclusiveMaximum", "EXCLUSIVE_MAXIMUM", original.exclusive_maximum,
            update.exclusive_maximum)
    keyword_change(ctx, "exclusiveMinimum", "EXCLUSIVE_MINIMUM", original.exclusive_minimum,
            update.exclusive_minimum)
    before, after = original.multiple_of, update.multiple_of
    if before != after:
        if before is None:
            ctx.add("MULTIPLE_OF_ADDED", "multipleOf")
        elif after is None:
            ctx.add("MULTIPLE_OF_REMOVED", "multipleOf")
        elif _is_multiple(after, before):
            ctx.add("MULTIPLE_OF_EXPANDED", "multipleOf")
        elif _is_multiple(before, after):
            ctx.add("MULTIPLE_OF_REDUCED", "multipleOf")
        else:
            ctx.add("MULTIPLE_OF_CHANGED", "multipleOf")
    if original.requires_integer != update.requires_integer:
        ctx.add("TYPE_EXTENDED" if original.requires_integer else "TYPE_NARROWED")


def _is_multiple(value: float, of: float) -> bool:
    if of == 0:
        return False
    ratio = value / of
    return abs(ratio - round(ratio)) < 1e-9


def _enum(ctx: _Context, original: JsonNode, update: JsonNode) -> None:
    before = {canonical_value(v) for v in original.values}
    after = {canonical_value(v) for v in update.values}
    if before == after:
        return
    if after >= before:
        ctx.add("ENUM_ARRAY_EXTENDED", "enum")
    elif before >= after:
        ctx.add("ENUM_ARRAY_NARROWED", "enum")
    else:
        ctx.add("ENUM_ARRAY_CHANGED", "enum")


def _combined(ctx: _Context, original: JsonNode, update: JsonNode) -> None:
    before, after = original.criterion, update.criterion
    dtype: str | None = None
    if before != after:
        single_before = len(original.subschemas) == 1
        single_after = len(update.subschemas) == 1
        # Widening criteria: to anyOf; between singletons; a singleton to oneOf; an allOf down
        # to a single subschema (what is left must then match one of its conjuncts).
        if (after == "anyOf" or (single_before and single_after)
                or (single_before and after == "oneOf")
                or (single_after and before == "allOf")):
            dtype = "COMBINED_TYPE_EXTENDED"
        else:
            dtype = "COMBINED_TYPE_CHANGED"
        ctx.add(dtype)
    if dtype == "COMBINED_TYPE_CHANGED":
        return
    olds = _unique(original.subschemas)
    news = _unique(update.subschemas)
    # More subschemas are named by the update's criterion, fewer by the original's: dropping
    # conjuncts of an allOf accepts more, dropping alternatives of an anyOf/oneOf accepts less.
    if len(olds) < len(news):
        ctx.add("PRODUCT_TYPE_EXTENDED" if after == "allOf" else "SUM_TYPE_EXTENDED")
    elif len(olds) > len(news):
        ctx.add("PRODUCT_TYPE_NARROWED" if before == "allOf" else "SUM_TYPE_NARROWED")
    edges: dict[int, dict[int, list[tuple[str, str]]]] = {}
    for i, old in enumerate(olds):
        with ctx.at(before, str(i)):
            for j, new in enumerate(news):
                sub = ctx.sub()
                _compare(sub, old, new)
                if sub.is_compatible:
                    edges.setdefault(i, {})[j] = sub.diffs
    matching = _max_matching(edges, len(olds))
    for i, j in matching.items():
        ctx.diffs.extend(edges[i][j])
    if len(matching) < min(len(olds), len(news)):
        ctx.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED")


def _unique(nodes: list[JsonNode]) -> list[JsonNode]:
    seen: dict[str, JsonNode] = {}
    for node in nodes:
        seen.setdefault(canonical_value(node.raw), node)
    return list(seen.values())


def _max_matching(edges: dict[int, dict[int, Any]], left: int) -> dict[int, int]:
    """Maximum bipartite matching (augmenting paths); returns left -> right."""
    match_right: dict[int, int] = {}

    def augment(i: int, seen: set[int]) -> bool:
        for j in edges.get(i, {}):
            if j in seen:
                continue
            seen.add(j)
            if j not in match_right or augment(match_right[j], seen):
                match_right[j] = i
                return True
        return False

    for i in range(left):
        augment(i, set())
    return {i: j for j, i in match_right.items()}


def _describe(dtype: str, path: str, orig: str, upd: str) -> str:
    explain = _EXPLAIN.get(dtype, dtype.lower().replace("_", " "))
    text = explain.format(orig=orig, upd=upd)
    return (f"{text[0].upper()}{text[1:]} at path '{path}' "
            f"(comparing the {orig} schema with the {upd} schema)")


def json_schema_issues(
    original: JsonSchemaDocument,
    update: JsonSchemaDocument,
    policy: JsonSchemaPolicy,
    *,
    original_role: str = "old",
    update_role: str = "new",
) -> list[tuple[str, str, str, str]]:
    """Incompatible differences from ``original`` to ``update``.

    Returns:
        ``(error_type, path, description, additional_info)`` for each incompatible difference.

    Raises:
        UnsupportedSchemaError: a keyword the engine does not model changed.
    """
    compatible = COMPATIBLE_CHANGES
    if policy is JsonSchemaPolicy.LENIENT:
        compatible = compatible | LENIENT_EXTRA
    ctx = _Context(compatible)
    _compare(ctx, original.root, update.root)
    out: list[tuple[str, str, str, str]] = []
    for dtype, path in ctx.diffs:
        if dtype in compatible:
            continue
        item = (dtype, path, _describe(dtype, path, original_role, update_role), path)
        if item not in out:
            out.append(item)
    return out

