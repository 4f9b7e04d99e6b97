"""Inline tags of a JSON Schema, rewritten for the tags endpoint as Confluent's server does.

An entity path walks the schema by type words, as Confluent's ``JsonSchemaUtils`` reads it:

* ``object`` enters an object schema; the next words name a property (words joined with
  ``.`` until a property of that name exists, so property names may contain dots), or
  ``definitions.<name>`` / ``$defs.<name>``; an ``SR_RECORD`` path may end at ``object``
  (the object schema itself);
* ``array`` goes to ``items``; ``not`` to ``not``;
* ``anyof.<i>``, ``oneof.<i>``, ``allof.<i>`` go to a branch of the combinator, branches
  ordered as Confluent's schema comparator orders them (by kind, then title, description
  and default, then property names and required names for objects, items for arrays; ties
  keep document order); ``anyof.<i>`` on a ``type`` list stays on the node, and
  ``allof.<i>.conditional.<if|then|else>`` goes to a conditional's part.

Tags are the node's ``confluent:tags`` list. ``$ref`` is not followed: a referenced
definition is tagged through its ``definitions`` / ``$defs`` path.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from kontrakt.registry._errors import InvalidSchemaError

__all__ = ["merged_tags", "retag_document", "retag_json", "retag_order"]

_TAGS = "confluent:tags"
# Confluent's schema kinds in the order its comparator sorts them (alphabetical).
_KINDS = ("array", "boolean", "combined", "conditional", "const", "empty", "enum", "false",
          "not", "null", "number", "object", "reference", "string", "true")


def _kind(node: Any) -> str:
    if node is True or node is False:
        return "true" if node else "false"
    if not isinstance(node, dict):
        return "empty"
    kind = node.get("type")
    for key, name in (("$ref", "reference"), ("const", "const"), ("enum", "enum"),
                      ("not", "not"), ("if", "conditional")):
        if key in node:
            return name
    if any(k in node for k in ("anyOf", "oneOf", "allOf")) or isinstance(kind, list):
        return "combined"
    if kind == "integer":
        return "number"
    if isinstance(kind, str) and kind in _KINDS:
        return kind
    if "properties" in node:
        return "object"
    if "items" in node:
        return "array"
    return "empty"


def _text(node: Any, key: str) -> tuple[int, str]:
    # Java's nullsFirst order on strings: absent sorts first.
    value = node.get(key) if isinstance(node, dict) else None
    if value is None:
        return (0, "")
    return (1, value if isinstance(value, str) else json.dumps(value))


def _names(values: Any) -> tuple[int, list[str]]:
    names = sorted(str(v) for v in values or ())
    return (len(names), names)


def _sort_key(node: Any) -> tuple[Any, ...]:
    kind = _kind(node)
    key: tuple[Any, ...] = (_KINDS.index(kind), _text(node, "title"),
                            _text(node, "description"), _text(node, "default"))
    if kind == "object":
        key += (_names(node.get("properties")), _names(node.get("required")))
    elif kind == "array":
        key += (_sort_key(node.get("items", {})),)
    return key


def _branch(node: Any, word: str, path: deque[str], kind: str) -> Any:
    index = path.popleft() if path else None
    branches = node.get(word) if isinstance(node, dict) else None
    if index is None or not isinstance(branches, list) or not index.isdigit() \
            or int(index) >= len(branches):
        return None
    return _find(sorted(branches, key=_sort_key)[int(index)], path, kind)


def _property(container: Any, path: deque[str]) -> Any:
    if not isinstance(container, dict) or not path:
        return None
    name = path.popleft()
    while name not in container and path:
        name += "." + path.popleft()
    return container.get(name)


def _find(node: Any, path: deque[str], kind: str) -> Any:
    word = path.popleft() if path else None
    if not isinstance(node, dict) or word is None:
        return None
    if word == "object":
        if kind == "SR_RECORD" and not path:
            return node
        if path and path[0] in ("definitions", "$defs"):
            found = _property(node.get(path.popleft()), path)
        else:
            found = _property(node.get("properties"), path)
        return found if found is None or not path else _find(found, path, kind)
    if word == "array":
        return _find(node.get("items"), path, kind)
    if word == "not":
        return _find(node.get("not"), path, kind)
    if word == "oneof":
        return _branch(node, "oneOf", path, kind)
    if word == "anyof":
        if "anyOf" in node:
            return _branch(node, "anyOf", path, kind)
        if path:
            path.popleft()  # a type list: the index names a type of this very node
        return _find(node, path, kind)
    if word == "allof":
        if "allOf" in node:
            return _branch(node, "allOf", path, kind)
        if path:
            path.popleft()
        if path and path[0] == "conditional":
            path.popleft()
            part = path.popleft() if path else ""
            return _find(node.get(part), path, kind)
        return _find(node, path, kind)
    return None


def merged_tags(existing: Any, added: Any, removed: Any) -> list[str]:
    """``existing`` tags (order kept) with ``added`` appended and ``removed`` dropped."""
    tags = [t for t in existing or () if isinstance(t, str)]
    tags.extend(t for t in added or () if t not in tags)
    return [t for t in tags if t not in (removed or ())]


def retag_json(text: str, add: dict[tuple[str, str], list[str]],
               remove: dict[tuple[str, str], list[str]]) -> str:
    """JSON Schema ``text`` with the tags of ``add`` added and those of ``remove`` removed
    (keys are ``(entityType, entityPath)``; see the module docs for paths).

    Raises:
        InvalidSchemaError: a path the schema does not have (42201).
    """
    schema = json.loads(text)

    def node_of(key: tuple[str, str]) -> dict[str, Any]:
        kind, path = key
        node = _find(schema, deque(path.split(".")), kind)
        if not isinstance(node, dict):
            raise InvalidSchemaError(422, 42201, f"No matching path {path!r} in the schema")
        return node

    return retag_document(schema, add, remove, node_of)


def retag_order(add: Mapping[tuple[str, str], list[str]],
                remove: Mapping[tuple[str, str], list[str]]) -> list[tuple[str, str]]:
    """The entities a retag touches, in the order it edits them: those of ``add``, then
    those only in ``remove``."""
    return [*add, *(k for k in remove if k not in add)]


def retag_document(schema: Any, add: Mapping[tuple[str, str], list[str]],
                   remove: Mapping[tuple[str, str], list[str]],
                   node_of: Callable[[tuple[str, str]], dict[str, Any]]) -> str:
    """Rewrite the ``confluent:tags`` of each entity of a parsed JSON document (an Avro or
    JSON Schema schema), found by ``node_of`` (which raises for a missing one), dropping
    the keyword where no tag is left; returns the document as compact JSON."""
    for key in retag_order(add, remove):
        node = node_of(key)
        tags = merged_tags(node.get(_TAGS), add.get(key), remove.get(key))
        if tags:
            node[_TAGS] = tags
        else:
            node.pop(_TAGS, None)
    return json.dumps(schema, separators=(",", ":"))
