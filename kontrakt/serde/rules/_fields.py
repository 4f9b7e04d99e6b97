"""Field-level rules: walking an Avro, JSON Schema or Protobuf message with its schema,
field by field, with tags.

A field's tags are its inline ``confluent:tags`` (Protobuf: ``(confluent.field_meta).tags``)
and the tags the target schema's metadata gives to paths matching its full name (Avro
``Record.field``, JSON Schema ``$.a.b``, Protobuf ``package.Message.field``; ``*`` matches
within one dotted part, ``**`` across parts, ``?`` one character), as Confluent's data
contracts define them. The Protobuf walk lives in :mod:`._proto_fields`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from kontrakt.errors import RuleConditionError, RuleError

__all__ = ["FieldContext", "walk_fields", "wildcard_match"]

_PRIMITIVE = {"null": "NULL", "boolean": "BOOLEAN", "int": "INT", "long": "LONG",
              "float": "FLOAT", "double": "DOUBLE", "bytes": "BYTES", "string": "STRING"}
_NAMED = {"record": "RECORD", "enum": "ENUM", "fixed": "FIXED"}


@dataclass(slots=True)
class FieldContext:
    """The field a field rule is applied to.

    Attributes:
        containing_message: the record (dict) holding the field.
        full_name: ``Record.field`` with the record's full name.
        name: the field's name.
        field_type: ``STRING``, ``INT``, ``LONG``, ``FLOAT``, ``DOUBLE``, ``BOOLEAN``,
            ``BYTES``, ``NULL``, ``ENUM``, ``FIXED``, ``RECORD``, ``ARRAY``, ``MAP`` or
            ``COMBINED`` (a union).
        tags: the field's tags.
    """

    containing_message: Any
    full_name: str
    name: str
    field_type: str
    tags: frozenset[str]

    def is_primitive(self) -> bool:
        """Whether the value is a scalar a field rule sees (not a record, array, map...)."""
        return self.field_type in ("INT", "LONG", "FLOAT", "DOUBLE", "BOOLEAN", "NULL",
                                   "STRING", "BYTES")


@lru_cache(maxsize=256)
def _pattern(matcher: str) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(matcher):
        c = matcher[i]
        if matcher.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        out.append("[^.]*" if c == "*" else "[^.]" if c == "?" else re.escape(c))
        i += 1
    return re.compile("".join(out))


def wildcard_match(text: str, matcher: str) -> bool:
    """Whether dotted name ``text`` matches ``matcher`` (``*``, ``**``, ``?``)."""
    return _pattern(matcher).fullmatch(text) is not None


def _type_name(schema: Any, names: dict[str, Any]) -> str:
    if isinstance(schema, list):
        return "COMBINED"
    kind = schema.get("type") if isinstance(schema, dict) else schema
    if isinstance(kind, (dict, list)):
        return _type_name(kind, names)
    if kind in _PRIMITIVE:
        return _PRIMITIVE[kind]
    if kind in _NAMED:
        return _NAMED[kind]
    if kind in ("array", "map"):
        return str(kind).upper()
    if isinstance(kind, str) and kind in names:
        return _type_name(names[kind], names)
    return "NULL" if kind is None else "STRING"


def _matches_branch(schema: Any, value: Any, names: dict[str, Any]) -> bool:
    t = _type_name(schema, names)
    if value is None:
        return t == "NULL"
    if isinstance(value, bool):
        return t == "BOOLEAN"
    if isinstance(value, int):
        return t in ("INT", "LONG")
    if isinstance(value, float):
        return t in ("FLOAT", "DOUBLE")
    if isinstance(value, str):
        return t in ("STRING", "ENUM")
    if isinstance(value, (bytes, bytearray)):
        return t in ("BYTES", "FIXED")
    if isinstance(value, list):
        return t == "ARRAY"
    if isinstance(value, dict):
        return t in ("RECORD", "MAP")
    return False


def _register(schema: Any, namespace: str, names: dict[str, Any]) -> None:
    """Index named types (full and simple names) depth first, noting each one's full name
    as ``_full``."""
    if isinstance(schema, list):
        for s in schema:
            _register(s, namespace, names)
    elif isinstance(schema, dict):
        kind = schema.get("type")
        if kind in _NAMED:
            name = str(schema.get("name", ""))
            ns = name.rpartition(".")[0] if "." in name else schema.get("namespace", namespace)
            full = name if "." in name or not ns else f"{ns}.{name}"
            schema["_full"] = full
            names[full] = schema
            names.setdefault(name.rpartition(".")[2], schema)
            for f in schema.get("fields", ()) if kind == "record" else ():
                _register(f.get("type"), ns or "", names)
        elif kind in ("array", "map"):
            _register(schema.get("items" if kind == "array" else "values"), namespace, names)
        elif isinstance(kind, (dict, list)):
            _register(kind, namespace, names)


@lru_cache(maxsize=64)
def _json_schema(text: str) -> Any:
    return json.loads(text)


@lru_cache(maxsize=64)
def _prepared(text: str) -> tuple[Any, dict[str, Any]]:
    # Parsed and indexed once per schema text; the walk only reads it.
    schema = json.loads(text)
    names: dict[str, Any] = {}
    _register(schema, "", names)
    return schema, names


class _AvroWalker:
    def __init__(self, names: dict[str, Any], visit: Callable[[FieldContext, Any], Any],
                 tags_of: Callable[[str], Any], condition: bool) -> None:
        self.visit = visit
        self.tags_of = tags_of
        self.condition = condition
        self.names = names

    def resolve(self, schema: Any) -> Any:
        if isinstance(schema, str) and schema in self.names:
            return self.names[schema]
        if isinstance(schema, dict) and isinstance(schema.get("type"), (dict, list)):
            return self.resolve(schema["type"])
        if isinstance(schema, dict) and isinstance(schema.get("type"), str) and \
                schema["type"] in self.names:
            return self.names[schema["type"]]
        return schema

    def value(self, schema: Any, value: Any, field: FieldContext | None) -> Any:
        schema = self.resolve(schema)
        if isinstance(schema, list):
            if isinstance(value, tuple) and len(value) == 2:  # fastavro's (branch, value)
                branch = str(value[0])
                for s in schema:
                    r = self.resolve(s)
                    if isinstance(r, dict) and branch in (r.get("_full"), r.get("name")):
                        return (value[0], self.value(r, value[1], field))
                return value
            for s in schema:
                if _matches_branch(s, value, self.names):
                    return self.value(s, value, field)
            return value
        kind = schema.get("type") if isinstance(schema, dict) else schema
        if kind == "record":
            if not isinstance(value, dict):
                return value
            full = schema.get("_full", schema.get("name"))
            for f in schema.get("fields", ()):
                name = f["name"]
                if name not in value:
                    continue
                tags = set(f.get("confluent:tags") or ()) | set(self.tags_of(f"{full}.{name}"))
                ctx = FieldContext(value, f"{full}.{name}", name,
                                   _type_name(f["type"], self.names), frozenset(tags))
                _settle(value, name, self.value(f["type"], value[name], ctx), ctx, self.condition)
            return value
        if kind == "array" and isinstance(value, list):
            return [self.value(schema["items"], v, field) for v in value]
        if kind == "map" and isinstance(value, dict):
            return {k: self.value(schema["values"], v, field) for k, v in value.items()}
        if field is None:
            return value
        field.field_type = _type_name(schema, self.names)
        return self.visit(field, value)


class _Refused(Exception):
    def __init__(self, field: FieldContext) -> None:
        super().__init__(field.full_name)
        self.field = field


def _settle(record: dict[str, Any], name: str, new: Any, ctx: FieldContext,
            condition: bool) -> None:
    # A field's outcome: a CONDITION's False refuses the record; a TRANSFORM's value replaces
    # the field (the Avro and JSON Schema walks alike).
    if condition:
        if new is False:
            raise _Refused(ctx)
    else:
        record[name] = new


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _json_type(schema: Any) -> str:
    if not isinstance(schema, dict):
        return "COMBINED"
    kind = schema.get("type")
    if "const" in schema or "enum" in schema:
        return "ENUM"
    if kind == "object" or (kind is None and "properties" in schema):
        return "RECORD" if schema.get("properties") else "MAP"
    return {"array": "ARRAY", "string": "STRING", "integer": "INT", "number": "DOUBLE",
            "boolean": "BOOLEAN", "null": "NULL"}.get(str(kind), "COMBINED")


class _JsonWalker:
    """The JSON Schema walk: properties, items, allOf and local ``$ref`` (``#/...``); other
    combinators (anyOf, oneOf, type lists) and remote references refuse, since a field rule
    must not silently miss the fields inside them."""

    def __init__(self, root: Any, visit: Callable[[FieldContext, Any], Any],
                 tags_of: Callable[[str], Any], condition: bool, describe: str) -> None:
        self.root = root
        self.visit = visit
        self.tags_of = tags_of
        self.condition = condition
        self.describe = describe

    def deref(self, schema: Any, depth: int = 0) -> Any:
        ref = schema.get("$ref") if isinstance(schema, dict) else None
        if ref is None:
            return schema
        if not isinstance(ref, str) or not ref.startswith("#") or depth > 32:
            raise RuleError(f"{self.describe}: field rules through $ref {ref!r} are not "
                            "supported yet")
        node = self.root
        for part in [p for p in ref[1:].split("/") if p]:
            node = node.get(part.replace("~1", "/").replace("~0", "~")) \
                if isinstance(node, dict) else None
        if node is None:
            raise RuleError(f"{self.describe}: $ref {ref!r} points nowhere")
        return self.deref(node, depth + 1)

    def value(self, schema: Any, value: Any, path: str, field: FieldContext | None) -> Any:
        schema = self.deref(schema)
        if value is None or not isinstance(schema, dict):
            return value
        for word in ("anyOf", "oneOf"):
            if word in schema:
                raise RuleError(f"{self.describe}: field rules through {word} are not "
                                "supported yet")
        if isinstance(schema.get("type"), list):
            raise RuleError(f"{self.describe}: field rules on a list of types are not "
                            "supported yet")
        if field is not None:
            field.field_type = _json_type(schema)
        for sub in schema.get("allOf") or ():
            value = self.value(sub, value, path, field)
        props = schema.get("properties")
        if isinstance(props, dict) and isinstance(value, dict):
            for name, sub in props.items():
                if name not in value or value[name] is None:
                    continue
                full = f"{path}.{name}"
                sub_d = self.deref(sub)
                tags = set(sub_d.get("confluent:tags") or ()) if isinstance(sub_d, dict) \
                    else set()
                ctx = FieldContext(value, full, name, _json_type(sub_d),
                                   frozenset(tags | set(self.tags_of(full))))
                _settle(value, name, self.value(sub, value[name], full, ctx), ctx, self.condition)
            return value
        items = schema.get("items")
        if isinstance(items, dict) and isinstance(value, list):
            return [self.value(items, v, path, field) for v in value]
        if field is not None and field.field_type in ("ENUM", "STRING", "INT", "DOUBLE",
                                                      "BOOLEAN"):
            return self.visit(field, value)
        return value


def walk_fields(target: Any, message: Any, visit: Callable[[FieldContext, Any], Any],
                condition: bool, describe: str, schema_view: Any = None) -> Any:
    """Apply ``visit(field, value)`` to every field of ``message`` (an Avro record or JSON
    document as a dict, a Protobuf message) under ``target`` (the registry ``Schema``);
    returns the new message, a copy.

    ``visit`` sees only fields whose value is a scalar; for a condition, a False result
    refuses the message. ``schema_view``: for Protobuf, the message ``Descriptor`` of
    ``target`` that names and tags the fields (None: the message's own descriptor).

    Raises:
        RuleConditionError: a condition gave False for a field (named in the message).
        RuleError: JSON Schema constructs the walk does not follow (field rules there are
            not supported yet), or a schema type without a walk.
    """
    kind = getattr(target, "schema_type", "AVRO") or "AVRO"
    if kind not in ("AVRO", "JSON", "PROTOBUF"):
        raise RuleError(f"{describe}: field rules on {kind} schemas are not supported yet")
    tags_by_path = dict(getattr(getattr(target, "metadata", None), "tags", None) or {})

    def tags_of(full_name: str) -> set[str]:
        found: set[str] = set()
        for pattern, tags in tags_by_path.items():
            if wildcard_match(full_name, pattern):
                found.update(tags)
        return found

    try:
        if kind == "PROTOBUF":
            from kontrakt.serde.rules._proto_fields import walk_message

            return walk_message(schema_view, message, visit, tags_of, condition, FieldContext,
                                _Refused, describe)
        if kind == "JSON":
            root = _json_schema(target.schema_str)
            return _JsonWalker(root, visit, tags_of, condition, describe).value(
                root, _copy(message), "$", None)
        schema, names = _prepared(target.schema_str)
        return _AvroWalker(names, visit, tags_of, condition).value(schema, _copy(message), None)
    except _Refused as e:
        raise RuleConditionError(f"{describe} refused field {e.field.full_name!r}") from None
