"""JSON Schema object and array rules (content models), split from _json_schema for size."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kontrakt.registry.compatibility._json_model import JsonNode

if TYPE_CHECKING:
    from kontrakt.registry.compatibility._json_schema import _Context

__all__ = ["compare_array", "compare_object", "keyword_change"]

Compare = Callable[["_Context", "JsonNode | None", "JsonNode | None"], None]


# Content models with unevaluatedProperties (U) next to additionalProperties (A), as Confluent
# judges unevaluatedItems next to items: open when A is true or absent and U is absent or
# true; partially open when A is a schema, or A is absent and U is a schema; closed when A or
# (A being absent) U is false. A takes precedence: it evaluates every undeclared property.


def _is_open(node: JsonNode) -> bool:
    if node.pattern_properties or node.additional_schema is not None:
        return False
    if not node.permits_additional:
        return False
    uneval = node.unevaluated_properties
    return uneval is None or uneval.deref().kind == "empty"


def _partial(node: JsonNode, name: str) -> JsonNode | None:
    """The schema a partially open model gives an undeclared property ``name``, if any."""
    for pattern, schema in node.pattern_properties.items():
        try:
            if re.search(pattern, name):
                return schema
        except re.error:
            continue  # a pattern Python cannot compile matches nothing here
    if node.additional_schema is not None or not node.permits_additional:
        return node.additional_schema
    uneval = node.unevaluated_properties
    if uneval is not None and uneval.deref().kind not in ("false", "empty"):
        return uneval
    return None


def compare_object(ctx: _Context, original: JsonNode, update: JsonNode, compare: Compare) -> None:
    """Compare two object schemas (required, properties, dependencies, additional, limits)."""
    with ctx.at("required"):
        for name in original.properties:
            if name not in update.properties:
                continue
            was, now = name in original.required, name in update.required
            if was and not now:
                ctx.add("REQUIRED_ATTRIBUTE_REMOVED", name)
            elif now and not was:
                has_default = update.properties[name].has_default
                ctx.add("REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED" if has_default
                        else "REQUIRED_ATTRIBUTE_ADDED", name)
    with ctx.at("properties"):
        for name in list(dict.fromkeys([*original.properties, *update.properties])):
            with ctx.at(name):
                _property(ctx, original, update, name, compare)
    with ctx.at("dependencies"):
        for name in dict.fromkeys([*original.property_dependencies,
                                   *update.property_dependencies]):
            before = original.property_dependencies.get(name)
            after = update.property_dependencies.get(name)
            if after is None:
                ctx.add("DEPENDENCY_ARRAY_REMOVED", name)
            elif before is None:
                ctx.add("DEPENDENCY_ARRAY_ADDED", name)
            elif before != after:
                ctx.add("DEPENDENCY_ARRAY_EXTENDED" if after >= before
                        else "DEPENDENCY_ARRAY_NARROWED" if before >= after
                        else "DEPENDENCY_ARRAY_CHANGED", name)
        for name in dict.fromkeys([*original.schema_dependencies,
                                   *update.schema_dependencies]):
            sb = original.schema_dependencies.get(name)
            sa = update.schema_dependencies.get(name)
            with ctx.at(name):
                if sa is None:
                    ctx.add("DEPENDENCY_SCHEMA_REMOVED")
                elif sb is None:
                    ctx.add("DEPENDENCY_SCHEMA_ADDED")
                else:
                    compare(ctx, sb, sa)
    with ctx.at("additionalProperties"):
        if original.permits_additional != update.permits_additional:
            ctx.add("ADDITIONAL_PROPERTIES_ADDED" if update.permits_additional
                    else "ADDITIONAL_PROPERTIES_REMOVED")
        elif original.additional_schema is None and update.additional_schema is not None:
            ctx.add("ADDITIONAL_PROPERTIES_NARROWED")
        elif update.additional_schema is None and original.additional_schema is not None:
            ctx.add("ADDITIONAL_PROPERTIES_EXTENDED")
        else:
            compare(ctx, original.additional_schema, update.additional_schema)
    _unevaluated(ctx, "unevaluatedProperties", "UNEVALUATED_PROPERTIES",
                 original.unevaluated_properties, update.unevaluated_properties, compare)
    keyword_change(ctx, "maxProperties", "MAX_PROPERTIES", original.max_properties,
           update.max_properties)
    keyword_change(ctx, "minProperties", "MIN_PROPERTIES", original.min_properties,
           update.min_properties)


def _property(ctx: _Context, original: JsonNode, update: JsonNode, name: str,
              compare: Compare) -> None:
    before = original.properties.get(name)
    after = update.properties.get(name)
    if after is None:
        assert before is not None
        # Only the update's content model matters: it decides whether the property is still
        # accepted as an undeclared one.
        if _is_open(update):
            ctx.add("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL")
            return
        partial = _partial(update, name)
        if partial is not None:
            _covered(ctx, compare, before, partial, "PROPERTY_REMOVED")
        elif before.deref().kind == "false":
            ctx.add("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
        else:
            ctx.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")
        return
    if before is None:
        # Only the original's content model matters: it decides what old data may hold.
        if _is_open(original):
            if after.deref().kind == "empty":
                ctx.add("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL")
            else:
                ctx.add("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
            return
        partial = _partial(original, name)
        if partial is not None:
            _covered(ctx, compare, partial, after, "PROPERTY_ADDED")
        if name in update.required:
            ctx.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL"
                    if after.has_default
                    else "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")
        else:
            ctx.add("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")
        return
    compare(ctx, before, after)


def _covered(ctx: _Context, compare: Compare, before: JsonNode, after: JsonNode,
             change: str) -> None:
    """A property or item added or removed where a partially open content model applies
    (``patternProperties``, ``additionalItems``...): record whether its schema covers the
    change, as ``{change}_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL`` or
    ``{change}_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL``."""
    sub = ctx.sub()
    compare(sub, before, after)
    ctx.extend(sub)
    ctx.add(f"{change}_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.is_compatible
            else f"{change}_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")


def keyword_change(ctx: _Context, leaf: str, name: str, before: Any, after: Any) -> None:
    """Record how keyword ``leaf`` changed: ``{name}_ADDED`` / ``_REMOVED``, then for numeric
    bounds ``_INCREASED`` / ``_DECREASED`` and for other values (``pattern``) ``_CHANGED``."""
    if before == after:
        return
    if before is None:
        ctx.add(f"{name}_ADDED", leaf)
    elif after is None:
        ctx.add(f"{name}_REMOVED", leaf)
    elif isinstance(before, (int, float)) and isinstance(after, (int, float)):
        ctx.add(f"{name}_INCREASED" if before < after else f"{name}_DECREASED", leaf)
    else:
        ctx.add(f"{name}_CHANGED", leaf)


def _array_open(node: JsonNode) -> bool:
    if not node.permits_additional_items or node.additional_items_schema is not None:
        return False
    uneval = node.unevaluated_items
    return uneval is None or uneval.deref().kind == "empty"


def _array_partial(node: JsonNode) -> JsonNode | None:
    if node.additional_items_schema is not None:
        return node.additional_items_schema
    uneval = node.unevaluated_items
    if uneval is not None and uneval.deref().kind not in ("false", "empty"):
        return uneval
    return None


def compare_array(ctx: _Context, original: JsonNode, update: JsonNode, compare: Compare) -> None:
    """Compare two array schemas (items, tuple items, additional/unevaluated items, limits)."""
    with ctx.at("items"):
        compare(ctx, original.all_items, update.all_items)
    olds = original.item_schemas or []
    news = update.item_schemas or []
    for index in range(max(len(olds), len(news))):
        with ctx.at("items", str(index)):
            if index < len(olds) and index < len(news):
                compare(ctx, olds[index], news[index])
            elif index < len(olds):
                _item_removed(ctx, olds[index], update, compare)
            else:
                _item_added(ctx, news[index], original, compare)
    with ctx.at("additionalItems"):
        if original.permits_additional_items != update.permits_additional_items:
            ctx.add("ADDITIONAL_ITEMS_REMOVED" if original.permits_additional_items
                    else "ADDITIONAL_ITEMS_ADDED")
        elif original.additional_items_schema is None and update.additional_items_schema:
            ctx.add("ADDITIONAL_ITEMS_NARROWED")
        elif update.additional_items_schema is None and original.additional_items_schema:
            ctx.add("ADDITIONAL_ITEMS_EXTENDED")
        else:
            compare(ctx, original.additional_items_schema, update.additional_items_schema)
    _unevaluated(ctx, "unevaluatedItems", "UNEVALUATED_ITEMS", original.unevaluated_items,
                 update.unevaluated_items, compare)
    keyword_change(ctx, "maxItems", "MAX_ITEMS", original.max_items, update.max_items)
    keyword_change(ctx, "minItems", "MIN_ITEMS", original.min_items, update.min_items)
    if original.unique_items != update.unique_items:
        ctx.add("UNIQUE_ITEMS_REMOVED" if original.unique_items else "UNIQUE_ITEMS_ADDED",
                "uniqueItems")
    keyword_change(ctx, "maxContains", "MAX_CONTAINS", original.max_contains, update.max_contains)
    keyword_change(ctx, "minContains", "MIN_CONTAINS", original.min_contains, update.min_contains)


def _item_removed(ctx: _Context, before: JsonNode, update: JsonNode, compare: Compare) -> None:
    if _array_open(update):
        ctx.add("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL")
        return
    partial = _array_partial(update)
    if partial is not None:
        _covered(ctx, compare, before, partial, "ITEM_REMOVED")
    elif before.deref().kind == "false":
        ctx.add("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
    else:
        ctx.add("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL")


def _item_added(ctx: _Context, after: JsonNode, original: JsonNode, compare: Compare) -> None:
    if _array_open(original):
        ctx.add("ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL"
                if after.deref().kind == "empty" else "ITEM_ADDED_TO_OPEN_CONTENT_MODEL")
        return
    partial = _array_partial(original)
    if partial is not None:
        _covered(ctx, compare, partial, after, "ITEM_ADDED")
    else:
        ctx.add("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL")


def _unevaluated(ctx: _Context, keyword: str, name: str, before: JsonNode | None,
                 after: JsonNode | None, compare: Compare) -> None:
    """Record how ``unevaluatedItems`` / ``unevaluatedProperties`` changed, as
    ``{name}_ADDED`` (now allowed: false -> anything), ``_REMOVED`` (now false), ``_EXTENDED``
    (a schema -> absent or true) or ``_NARROWED`` (absent or true -> a schema)."""
    if before is None and after is None:
        return
    with ctx.at(keyword):
        b = before.deref().kind if before is not None else None
        a = after.deref().kind if after is not None else None
        if before is None:
            ctx.add(f"{name}_REMOVED" if a == "false" else f"{name}_NARROWED")
        elif after is None:
            ctx.add(f"{name}_ADDED" if b == "false" else f"{name}_EXTENDED")
        elif b == "false" and a != "false":
            ctx.add(f"{name}_ADDED")
        elif b != "false" and a == "false":
            ctx.add(f"{name}_REMOVED")
        elif b == "empty" and a != "empty":
            ctx.add(f"{name}_NARROWED")
        elif b != "empty" and a == "empty":
            ctx.add(f"{name}_EXTENDED")
        else:
            compare(ctx, before, after)
