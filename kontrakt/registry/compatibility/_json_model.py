"""JSON Schema loader: JSON text -> typed nodes shaped like the ones Confluent's diff walks.

A schema object is split into the parts it constrains: a typed part per ``type`` (object,
array, string, number/integer, boolean, null), ``enum``, ``const``, ``not``, the combiners
(``allOf`` / ``anyOf`` / ``oneOf``) and ``$ref``. One part is the node itself; several parts
become an ``allOf`` of them; a list of types becomes an ``anyOf``. This is how the everit
library that Confluent uses loads schemas, so differences are found at the same places.

Drafts 4, 6, 7, 2019-09 and 2020-12 are understood (``prefixItems``/``items`` vs.
``items``/``additionalItems``, ``dependentRequired``/``dependentSchemas`` vs.
``dependencies``, boolean ``exclusiveMaximum`` of draft 4). Keywords that constrain data but are
not compared (``propertyNames``, ``contains``, ``if``/``then``/``else``, ...) are kept in
``unmodelled`` so that the checker can refuse to judge a change to them;
``unevaluatedProperties`` is compared from draft 2019-09 on (a content model, as
``additionalProperties``) and unmodelled before.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kontrakt.registry.compatibility._result import (
    SchemaParseError,
    UnresolvedReferenceError,
    UnsupportedSchemaError,
)

__all__ = ["JsonNode", "JsonSchemaDocument", "parse_json_schema"]

_OBJECT_KEYS = frozenset({
    "properties", "required", "additionalProperties", "patternProperties", "dependencies",
    "dependentRequired", "dependentSchemas", "maxProperties", "minProperties",
    "unevaluatedProperties",
})
#: Keywords that mean something only from draft 2019-09 on; before, they are ignored data.
_SINCE_2019 = frozenset({"unevaluatedProperties"})
_ARRAY_KEYS = frozenset({
    "items", "prefixItems", "additionalItems", "maxItems", "minItems", "uniqueItems",
    "unevaluatedItems", "minContains", "maxContains",
})
_STRING_KEYS = frozenset({"maxLength", "minLength", "pattern", "format"})
_NUMBER_KEYS = frozenset({
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
})
#: Validation keywords that constrain data but that the diff does not compare.
UNMODELLED = frozenset({
    "propertyNames", "contains", "if", "then", "else", "unevaluatedProperties",
    "$dynamicRef", "$recursiveRef", "contentSchema",
})
_TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")
_FAMILIES = {"object": _OBJECT_KEYS, "array": _ARRAY_KEYS, "string": _STRING_KEYS,
             "number": _NUMBER_KEYS, "integer": _NUMBER_KEYS}


@dataclass(eq=False, slots=True)
class JsonNode:
    """One loaded schema (part). ``kind`` is one of: empty, false, null, boolean, string,
    number, object, array, enum, const, not, combined, ref."""

    kind: str
    raw: Any = None
    path: str = "#"
    # annotations
    id: Any = None
    title: Any = None
    description: Any = None
    default: Any = None
    has_default: bool = False
    # string
    max_length: int | None = None
    min_length: int | None = None
    pattern: str | None = None
    format: str | None = None
    # number
    requires_integer: bool = False
    maximum: float | None = None
    minimum: float | None = None
    exclusive_maximum: float | None = None
    exclusive_minimum: float | None = None
    multiple_of: float | None = None
    # object
    properties: dict[str, JsonNode] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    permits_additional: bool = True
    additional_schema: JsonNode | None = None
    pattern_properties: dict[str, JsonNode] = field(default_factory=dict)
    property_dependencies: dict[str, frozenset[str]] = field(default_factory=dict)
    schema_dependencies: dict[str, JsonNode] = field(default_factory=dict)
    max_properties: int | None = None
    min_properties: int | None = None
    unevaluated_properties: JsonNode | None = None
    # array
    all_items: JsonNode | None = None
    item_schemas: list[JsonNode] | None = None
    permits_additional_items: bool = True
    additional_items_schema: JsonNode | None = None
    unevaluated_items: JsonNode | None = None
    max_items: int | None = None
    min_items: int | None = None
    unique_items: bool = False
    max_contains: int | None = None
    min_contains: int | None = None
    # enum / const / not / combined
    values: tuple[Any, ...] = ()
    const: Any = None
    not_schema: JsonNode | None = None
    criterion: str = ""
    subschemas: list[JsonNode] = field(default_factory=list)
    # ref
    ref: str = ""
    resolve: Callable[[], JsonNode] | None = None
    unmodelled: dict[str, Any] = field(default_factory=dict)

    def deref(self) -> JsonNode:
        """Follow ``$ref`` chains to the schema they name."""
        node = self
        for _ in range(64):
            if node.kind != "ref":
                return node
            assert node.resolve is not None
            node = node.resolve()
        raise SchemaParseError(f"$ref chain too long at {self.path}", schema_type="JSON")


@dataclass(slots=True)
class JsonSchemaDocument:
    """A parsed JSON Schema with the documents its references point to."""

    root: JsonNode
    raw: Any
    draft2019: bool


def canonical_value(value: Any) -> str:
    """A JSON value as a string that compares equal for equal JSON values."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _fail(message: str, path: str) -> SchemaParseError:
    return SchemaParseError(message, schema_type="JSON", path=path)


class _Loader:
    def __init__(self, docs: dict[str, Any]) -> None:
        # name -> decoded document ("" is the root document).
        self.docs = docs
        self.cache: dict[tuple[str, int], JsonNode] = {}
        self.draft2019 = False

    def _pointer(self, doc_name: str, pointer: str, path: str) -> tuple[Any, str]:
        doc = self.docs[doc_name]
        target = doc
        if pointer in ("", "#"):
            return target, "#"
        if pointer.startswith("#/"):
            for token in pointer[2:].split("/"):
                token = token.replace("~1", "/").replace("~0", "~")
                if isinstance(target, dict) and token in target:
                    target = target[token]
                elif isinstance(target, list) and token.isdigit() and int(token) < len(target):
                    target = target[int(token)]
                else:
                    raise UnresolvedReferenceError(
                        f"$ref {pointer!r} does not point into the document",
                        schema_type="JSON", path=path,
                    )
            return target, pointer
        anchor = pointer[1:]
        found = self._find_anchor(doc, anchor)
        if found is None:
            raise UnresolvedReferenceError(f"$ref anchor {pointer!r} not found",
                                           schema_type="JSON", path=path)
        return found, pointer

    def _find_anchor(self, obj: Any, anchor: str) -> Any:
        if isinstance(obj, dict):
            if obj.get("$anchor") == anchor or obj.get("$id") == f"#{anchor}":
                return obj
            for v in obj.values():
                hit = self._find_anchor(v, anchor)
                if hit is not None:
                    return hit
        elif isinstance(obj, list):
            for v in obj:
                hit = self._find_anchor(v, anchor)
                if hit is not None:
                    return hit
        return None

    def _external(self, ref: str, path: str) -> str:
        """Find which referenced document a non-local $ref names."""
        if ref in self.docs:
            return ref
        for name, doc in self.docs.items():
            if not name:
                continue
            doc_id = doc.get("$id") if isinstance(doc, dict) else None
            if doc_id == ref or name.rsplit("/", 1)[-1] == ref.rsplit("/", 1)[-1]:
                return name
            if isinstance(doc_id, str) and doc_id.rsplit("/", 1)[-1] == ref.rsplit("/", 1)[-1]:
                return name
        raise UnresolvedReferenceError(
            f"$ref {ref!r} names no local definition and no schema reference",
            schema_type="JSON", path=path,
        )

    def ref_node(self, doc_name: str, ref: str, path: str) -> JsonNode:
        if not isinstance(ref, str):
            raise _fail("$ref must be a string", path)
        if ref.startswith("#"):
            target_doc, pointer = doc_name, ref
        else:
            base, _, frag = ref.partition("#")
            target_doc, pointer = self._external(base, path), f"#{frag}"
        # Resolve eagerly that the target exists (a clear error now, not during the diff) ...
        raw, _ = self._pointer(target_doc, pointer, path)
        node = JsonNode(kind="ref", raw={"$ref": ref}, path=path, ref=ref)
        memo: list[JsonNode] = []

        # ... but load it lazily, so that recursive schemas terminate.
        def resolve() -> JsonNode:
            if not memo:
                memo.append(self.load(raw, target_doc, f"{target_doc}{pointer}"))
            return memo[0]

        node.resolve = resolve
        return node

    def load(self, obj: Any, doc: str, path: str) -> JsonNode:
        if obj is True:
            return JsonNode(kind="empty", raw=obj, path=path)
        if obj is False:
            return JsonNode(kind="false", raw=obj, path=path)
        if not isinstance(obj, dict):
            raise _fail(f"a schema must be an object or a boolean, got {obj!r}", path)
        key = (doc, id(obj))
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        node = self._load_object(obj, doc, path)
        self.cache[key] = node
        return node

    def _annotate(self, node: JsonNode, obj: dict[str, Any]) -> JsonNode:
        node.id = obj.get("$id", obj.get("id"))
        node.title = obj.get("title")
        node.description = obj.get("description")
        node.has_default = "default" in obj
        node.default = obj.get("default")
        node.unmodelled = {k: obj[k] for k in UNMODELLED if k in obj
                           and not (self.draft2019 and k in _SINCE_2019)}
        return node

    def _load_object(self, obj: dict[str, Any], doc: str, path: str) -> JsonNode:
        parts: list[JsonNode] = []
        if "$ref" in obj:
            ref = self.ref_node(doc, obj["$ref"], path)
            if not self.draft2019:
                # Before 2019-09, keywords next to $ref are ignored.
                return self._annotate(ref, obj)
            parts.append(ref)
        types = obj.get("type")
        if isinstance(types, str):
            types = [types]
        if types is not None:
            if not isinstance(types, list) or not all(t in _TYPES for t in types):
                raise _fail(f"invalid type {obj.get('type')!r}", path)
            typed = [self._typed(t, obj, doc, path) for t in dict.fromkeys(types)]
            if "integer" in types and "number" in types:
                typed = [t for t in typed if not (t.kind == "number" and t.requires_integer)]
            if len(typed) == 1:
                parts.append(typed[0])
            elif typed:
                parts.append(JsonNode(kind="combined", raw={"type": types}, path=path,
                                      criterion="anyOf", subschemas=typed))
        else:
            present = obj.keys() if self.draft2019 else obj.keys() - _SINCE_2019
            implied = [t for t, keys in (("object", _OBJECT_KEYS), ("array", _ARRAY_KEYS),
                                         ("string", _STRING_KEYS), ("number", _NUMBER_KEYS))
                       if keys & present]
            if len(implied) == 1:
                parts.append(self._typed(implied[0], obj, doc, path, required_type=False))
            elif implied:
                parts.append(JsonNode(
                    kind="combined", raw={"impliedTypes": implied}, path=path,
                    criterion="anyOf",
                    subschemas=[self._typed(t, obj, doc, path, required_type=False)
                                for t in implied]))
        if "enum" in obj:
            if not isinstance(obj["enum"], list):
                raise _fail("enum must be an array", path)
            parts.append(JsonNode(kind="enum", raw={"enum": obj["enum"]}, path=path,
                                  values=tuple(obj["enum"])))
        if "const" in obj:
            parts.append(JsonNode(kind="const", raw={"const": obj["const"]}, path=path,
                                  const=obj["const"]))
        if "not" in obj:
            parts.append(JsonNode(kind="not", raw={"not": obj["not"]}, path=path,
                                  not_schema=self.load(obj["not"], doc, f"{path}/not")))
        for criterion in ("allOf", "anyOf", "oneOf"):
            if criterion in obj:
                subs = obj[criterion]
                if not isinstance(subs, list) or not subs:
                    raise _fail(f"{criterion} must be a non-empty array", path)
                parts.append(JsonNode(
                    kind="combined", raw={criterion: subs}, path=path, criterion=criterion,
                    subschemas=[self.load(s, doc, f"{path}/{criterion}/{i}")
                                for i, s in enumerate(subs)]))
        if not parts:
            node = JsonNode(kind="empty", raw=obj, path=path)
        elif len(parts) == 1:
            node = parts[0]
            node.raw = obj
        else:
            node = JsonNode(kind="combined", raw=obj, path=path, criterion="allOf",
                            subschemas=parts)
        return self._annotate(node, obj)

    def _int(self, obj: dict[str, Any], key: str, path: str) -> int | None:
        value = obj.get(key)
        if value is None:
            return None
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise _fail(f"{key} must be a non-negative integer", path)
        return value

    def _num(self, obj: dict[str, Any], key: str, path: str) -> float | None:
        value = obj.get(key)
        if value is None or isinstance(value, bool):
            return None
        if not isinstance(value, (int, float)):
            raise _fail(f"{key} must be a number", path)
        return value

    def _typed(self, kind: str, obj: dict[str, Any], doc: str, path: str,
               required_type: bool = True) -> JsonNode:
        node = self._typed_node(kind, obj, doc, path)
        # Each part keeps only its own keywords as `raw`, so that parts cut from one schema
        # object (e.g. the branches of "type": ["string", "null"]) stay distinct when
        # combined subschemas are de-duplicated.
        family = _FAMILIES.get(kind, frozenset())
        node.raw = {"type": kind, **{k: v for k, v in obj.items() if k in family}}
        if not required_type:
            node.raw["impliedType"] = True
        return node

    def _typed_node(self, kind: str, obj: dict[str, Any], doc: str, path: str) -> JsonNode:
        if kind in ("boolean", "null"):
            return JsonNode(kind=kind, raw=obj, path=path)
        if kind == "string":
            pattern = obj.get("pattern")
            fmt = obj.get("format")
            return JsonNode(kind="string", raw=obj, path=path,
                            max_length=self._int(obj, "maxLength", path),
                            min_length=self._int(obj, "minLength", path),
                            pattern=pattern if isinstance(pattern, str) else None,
                            format=fmt if isinstance(fmt, str) else None)
        if kind in ("number", "integer"):
            node = JsonNode(kind="number", raw=obj, path=path,
                            requires_integer=kind == "integer",
                            maximum=self._num(obj, "maximum", path),
                            minimum=self._num(obj, "minimum", path),
                            exclusive_maximum=self._num(obj, "exclusiveMaximum", path),
                            exclusive_minimum=self._num(obj, "exclusiveMinimum", path),
                            multiple_of=self._num(obj, "multipleOf", path))
            # Draft 4: boolean exclusiveMaximum/Minimum turn maximum/minimum exclusive.
            if obj.get("exclusiveMaximum") is True:
                node.exclusive_maximum, node.maximum = node.maximum, None
            if obj.get("exclusiveMinimum") is True:
                node.exclusive_minimum, node.minimum = node.minimum, None
            return node
        if kind == "object":
            return self._object(obj, doc, path)
        return self._array(obj, doc, path)

    def _object(self, obj: dict[str, Any], doc: str, path: str) -> JsonNode:
        node = JsonNode(kind="object", raw=obj, path=path)
        props = obj.get("properties", {})
        if not isinstance(props, dict):
            raise _fail("properties must be an object", path)
        node.properties = {k: self.load(v, doc, f"{path}/properties/{k}")
                           for k, v in props.items()}
        required = obj.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise _fail("required must be an array of strings", path)
        node.required = tuple(required)
        additional = obj.get("additionalProperties", True)
        if additional is False:
            node.permits_additional = False
        elif additional is not True:
            node.additional_schema = self.load(additional, doc, f"{path}/additionalProperties")
        patterns = obj.get("patternProperties", {})
        if not isinstance(patterns, dict):
            raise _fail("patternProperties must be an object", path)
        node.pattern_properties = {k: self.load(v, doc, f"{path}/patternProperties/{k}")
                                   for k, v in patterns.items()}
        deps: dict[str, Any] = dict(obj.get("dependencies", {}))
        deps.update(obj.get("dependentRequired", {}))
        deps.update(obj.get("dependentSchemas", {}))
        for name, dep in deps.items():
            if isinstance(dep, list):
                node.property_dependencies[name] = frozenset(dep)
            else:
                node.schema_dependencies[name] = self.load(dep, doc,
                                                           f"{path}/dependencies/{name}")
        node.max_properties = self._int(obj, "maxProperties", path)
        node.min_properties = self._int(obj, "minProperties", path)
        if self.draft2019 and "unevaluatedProperties" in obj:
            node.unevaluated_properties = self.load(obj["unevaluatedProperties"], doc,
                                                    f"{path}/unevaluatedProperties")
        return node

    def _array(self, obj: dict[str, Any], doc: str, path: str) -> JsonNode:
        node = JsonNode(kind="array", raw=obj, path=path)
        items = obj.get("items")
        tuple_items: Any = None
        additional: Any = obj.get("additionalItems")
        if "prefixItems" in obj:
            tuple_items = obj["prefixItems"]
            additional = items
        elif isinstance(items, list):
            tuple_items = items
        elif items is not None:
            node.all_items = self.load(items, doc, f"{path}/items")
        if tuple_items is not None:
            if not isinstance(tuple_items, list):
                raise _fail("prefixItems must be an array", path)
            node.item_schemas = [self.load(s, doc, f"{path}/items/{i}")
                                 for i, s in enumerate(tuple_items)]
        if additional is False:
            node.permits_additional_items = False
        elif additional is not None and additional is not True:
            node.additional_items_schema = self.load(additional, doc, f"{path}/additionalItems")
        if "unevaluatedItems" in obj:
            node.unevaluated_items = self.load(obj["unevaluatedItems"], doc,
                                               f"{path}/unevaluatedItems")
        node.max_items = self._int(obj, "maxItems", path)
        node.min_items = self._int(obj, "minItems", path)
        node.unique_items = obj.get("uniqueItems") is True
        node.max_contains = self._int(obj, "maxContains", path)
        node.min_contains = self._int(obj, "minContains", path)
        return node


def parse_json_schema(
    schema_str: str, references: Iterable[tuple[str, str]] = ()
) -> JsonSchemaDocument:
    """Load a JSON Schema and the schemas its references name.

    Args:
        schema_str: the schema text.
        references: ``(reference name, schema text)`` pairs; a ``$ref`` whose URL is (or ends
            like) a reference name or a referenced schema's ``$id`` resolves to it.

    Returns:
        The loaded document.

    Raises:
        SchemaParseError: invalid JSON or schema; UnresolvedReferenceError: a ``$ref`` names
        nothing known; UnsupportedSchemaError: a ``$schema`` of an unknown dialect.
    """
    docs: dict[str, Any] = {"": _decode(schema_str)}
    for name, text in references:
        docs[name] = _decode(text)
    root_raw = docs[""]
    dialect = root_raw.get("$schema", "") if isinstance(root_raw, dict) else ""
    if dialect and not isinstance(dialect, str):
        raise _fail("$schema must be a string", "#")
    if dialect and not any(d in dialect for d in ("draft-04", "draft-06", "draft-07",
                                                  "2019-09", "2020-12")):
        raise UnsupportedSchemaError(f"JSON Schema dialect {dialect!r} is not supported")
    loader = _Loader(docs)
    loader.draft2019 = "2019-09" in dialect or "2020-12" in dialect
    root = loader.load(root_raw, "", "#")
    return JsonSchemaDocument(root=root, raw=root_raw, draft2019=loader.draft2019)


def _decode(text: str) -> Any:
    if not isinstance(text, str):
        raise _fail(f"schema text must be a string, got {type(text).__name__}", "#")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _fail(f"not valid JSON: {exc}", "#") from None
