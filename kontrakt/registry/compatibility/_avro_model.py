"""Avro schema parser: JSON text -> a small typed model the checker and normalizer walk.

The rules are the Avro specification's (names and namespaces, named-type references, unions,
defaults), applied the way the Java implementation (and so Confluent Schema Registry) does:
a short name is looked up in the enclosing namespace first and then in the null namespace,
and a union default may match any branch.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kontrakt.registry.compatibility._result import SchemaParseError, UnresolvedReferenceError

__all__ = ["AvroField", "AvroNode", "parse_avro", "parse_avro_json"]

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
NAMED = frozenset({"record", "error", "enum", "fixed"})
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_INT_RANGE = (-(2**31), 2**31 - 1)
_LONG_RANGE = (-(2**63), 2**63 - 1)
# Attributes with meaning in each kind of schema; everything else is a custom property.
_RESERVED = frozenset(
    {"type", "name", "namespace", "doc", "aliases", "fields", "symbols", "default", "size",
     "items", "values", "logicalType"}
)


@dataclass(eq=False, slots=True)
class AvroField:
    """One record field."""

    name: str
    type: AvroNode
    index: int
    has_default: bool = False
    default: Any = None
    aliases: tuple[str, ...] = ()
    order: str = "ascending"
    doc: str | None = None
    props: dict[str, Any] = field(default_factory=dict)


@dataclass(eq=False, slots=True)
class AvroNode:
    """One Avro schema node. Named nodes are shared by every reference to them."""

    kind: str
    fullname: str | None = None
    aliases: tuple[str, ...] = ()
    doc: str | None = None
    fields: list[AvroField] = field(default_factory=list)
    symbols: tuple[str, ...] = ()
    enum_default: str | None = None
    size: int | None = None
    items: AvroNode | None = None
    values: AvroNode | None = None
    branches: list[AvroNode] = field(default_factory=list)
    logical_type: str | None = None
    props: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str | None:
        """The unqualified name of a named type."""
        return None if self.fullname is None else self.fullname.rpartition(".")[2]

    @property
    def namespace(self) -> str:
        """The namespace of a named type ('' for the null namespace)."""
        return "" if self.fullname is None else self.fullname.rpartition(".")[0]

    def describe(self) -> str:
        """A short name for messages: the full name, or the kind."""
        return self.fullname or self.kind


def _fail(message: str, path: str) -> SchemaParseError:
    return SchemaParseError(message, schema_type="AVRO", path=path or "/")


class _Parser:
    def __init__(self, names: dict[str, AvroNode], validate_defaults: bool) -> None:
        self.names = names
        self.validate_defaults = validate_defaults

    def _check_name(self, name: Any, path: str, what: str = "name") -> str:
        if not isinstance(name, str) or not name:
            raise _fail(f"{what} must be a non-empty string, got {name!r}", path)
        for part in name.split("."):
            if not _NAME_RE.match(part):
                raise _fail(f"invalid {what} {name!r}", path)
        return name

    def _full(self, name: str, namespace: str) -> str:
        if "." in name or not namespace:
            return name
        return f"{namespace}.{name}"

    def lookup(self, name: str, namespace: str, path: str) -> AvroNode:
        candidates = [self._full(name, namespace)]
        if "." not in name:
            candidates.append(name)
        for candidate in candidates:
            node = self.names.get(candidate)
            if node is not None:
                return node
        raise UnresolvedReferenceError(
            f"unknown type {name!r} (not a primitive and not a named type defined before it)",
            schema_type="AVRO",
            path=path or "/",
        )

    def parse(self, obj: Any, namespace: str, path: str) -> AvroNode:
        if isinstance(obj, str):
            if obj in PRIMITIVES:
                return AvroNode(kind=obj)
            return self.lookup(obj, namespace, path)
        if isinstance(obj, list):
            return self._union(obj, namespace, path)
        if isinstance(obj, dict):
            return self._object(obj, namespace, path)
        raise _fail(f"a schema must be a string, an object or an array, got {obj!r}", path)

    def _union(self, obj: list[Any], namespace: str, path: str) -> AvroNode:
        branches: list[AvroNode] = []
        seen: set[str] = set()
        for i, item in enumerate(obj):
            branch = self.parse(item, namespace, f"{path}/{i}")
            if branch.kind == "union":
                raise _fail("a union may not immediately contain another union", f"{path}/{i}")
            key = branch.fullname or branch.kind
            if key in seen:
                raise _fail(f"duplicate type {key!r} in union", f"{path}/{i}")
            seen.add(key)
            branches.append(branch)
        return AvroNode(kind="union", branches=branches)

    def _props(self, obj: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in obj.items() if k not in _RESERVED}

    def _object(self, obj: dict[str, Any], namespace: str, path: str) -> AvroNode:
        if "type" not in obj:
            raise _fail("schema object has no 'type'", path)
        kind = obj["type"]
        if not isinstance(kind, str):
            # {"type": {...}} / {"type": [...]}: a nested schema; Java accepts this form too.
            return self.parse(kind, namespace, f"{path}/type")
        logical = obj.get("logicalType")
        if logical is not None and not isinstance(logical, str):
            raise _fail("logicalType must be a string", path)
        if kind in PRIMITIVES:
            return AvroNode(kind=kind, logical_type=logical, props=self._props(obj))
        if kind in NAMED:
            return self._named(obj, "record" if kind == "error" else kind, namespace, path)
        if kind == "array":
            if "items" not in obj:
                raise _fail("array schema has no 'items'", path)
            items = self.parse(obj["items"], namespace, f"{path}/items")
            return AvroNode(kind="array", items=items, logical_type=logical,
                            props=self._props(obj))
        if kind == "map":
            if "values" not in obj:
                raise _fail("map schema has no 'values'", path)
            values = self.parse(obj["values"], namespace, f"{path}/values")
            return AvroNode(kind="map", values=values, logical_type=logical,
                            props=self._props(obj))
        # {"type": "com.example.Named"}: a reference to an already defined named type.
        return self.lookup(kind, namespace, path)

    def _named(self, obj: dict[str, Any], kind: str, namespace: str, path: str) -> AvroNode:
        name = self._check_name(obj.get("name"), path)
        ns_value = obj.get("namespace")
        if ns_value is not None and not isinstance(ns_value, str):
            raise _fail("namespace must be a string", path)
        if "." in name:
            fullname = name
        else:
            own_ns = namespace if ns_value is None else ns_value
            if own_ns:
                self._check_name(own_ns, path, "namespace")
            fullname = self._full(name, own_ns)
        if fullname.rpartition(".")[2] in PRIMITIVES:
            raise _fail(f"{fullname!r} may not redefine a primitive type name", path)
        if fullname in self.names:
            raise _fail(f"named type {fullname!r} is defined more than once", path)
        child_ns = fullname.rpartition(".")[0]
        aliases = obj.get("aliases", [])
        if not isinstance(aliases, list):
            raise _fail("aliases must be an array of names", path)
        full_aliases = tuple(
            self._full(self._check_name(a, path, "alias"), child_ns) for a in aliases
        )
        doc = obj.get("doc")
        node = AvroNode(kind=kind, fullname=fullname, aliases=full_aliases,
                        doc=doc if isinstance(doc, str) else None,
                        logical_type=obj.get("logicalType"), props=self._props(obj))
        # Registered before the body is parsed so that the body may refer to it (recursion).
        self.names[fullname] = node
        if kind == "record":
            self._record_fields(node, obj, child_ns, path)
        elif kind == "enum":
            self._enum(node, obj, path)
        else:
            size = obj.get("size")
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise _fail(f"fixed size must be a non-negative integer, got {size!r}", path)
            node.size = size
        return node

    def _enum(self, node: AvroNode, obj: dict[str, Any], path: str) -> None:
        symbols = obj.get("symbols")
        if not isinstance(symbols, list):
            raise _fail("enum schema needs a 'symbols' array", path)
        for s in symbols:
            if not isinstance(s, str) or not _NAME_RE.match(s):
                raise _fail(f"invalid enum symbol {s!r}", f"{path}/symbols")
        if len(set(symbols)) != len(symbols):
            raise _fail("duplicate enum symbol", f"{path}/symbols")
        node.symbols = tuple(symbols)
        if "default" in obj:
            default = obj["default"]
            if default not in node.symbols:
                raise _fail(f"enum default {default!r} is not one of the symbols", path)
            node.enum_default = default

    def _record_fields(self, node: AvroNode, obj: dict[str, Any], ns: str, path: str) -> None:
        fields = obj.get("fields")
        if not isinstance(fields, list):
            raise _fail("record schema needs a 'fields' array", path)
        seen: set[str] = set()
        for i, fobj in enumerate(fields):
            fpath = f"{path}/fields/{i}"
            if not isinstance(fobj, dict):
                raise _fail("a field must be an object", fpath)
            fname = fobj.get("name")
            if not isinstance(fname, str) or not _NAME_RE.match(fname):
                raise _fail(f"invalid field name {fname!r}", fpath)
            if fname in seen:
                raise _fail(f"duplicate field name {fname!r}", fpath)
            seen.add(fname)
            if "type" not in fobj:
                raise _fail(f"field {fname!r} has no 'type'", fpath)
            ftype = self.parse(fobj["type"], ns, f"{fpath}/type")
            aliases = fobj.get("aliases", [])
            if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
                raise _fail("field aliases must be an array of strings", fpath)
            order = fobj.get("order", "ascending")
            if order not in ("ascending", "descending", "ignore"):
                raise _fail(f"invalid field order {order!r}", fpath)
            has_default = "default" in fobj
            default = fobj.get("default")
            if has_default and self.validate_defaults and not is_valid_default(ftype, default):
                raise _fail(
                    f"invalid default {json.dumps(default)} for field {fname!r} of type "
                    f"{ftype.describe()}",
                    fpath,
                )
            doc = fobj.get("doc")
            node.fields.append(
                AvroField(
                    name=fname, type=ftype, index=i, has_default=has_default, default=default,
                    aliases=tuple(aliases), order=order, doc=doc if isinstance(doc, str) else None,
                    props={k: v for k, v in fobj.items()
                           if k not in ("name", "type", "default", "aliases", "order", "doc")},
                )
            )


def is_valid_default(node: AvroNode, value: Any) -> bool:
    """Whether a JSON default value fits a schema (union defaults may match any branch)."""
    kind = node.kind
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind in ("int", "long"):
        lo, hi = _INT_RANGE if kind == "int" else _LONG_RANGE
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        return isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi
    if kind in ("float", "double"):
        if isinstance(value, str):
            return value in ("NaN", "Infinity", "-Infinity")
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind in ("bytes", "string"):
        return isinstance(value, str)
    if kind == "fixed":
        return isinstance(value, str) and len(value) == node.size
    if kind == "enum":
        return isinstance(value, str) and value in node.symbols
    if kind == "array":
        assert node.items is not None
        return isinstance(value, list) and all(is_valid_default(node.items, v) for v in value)
    if kind == "map":
        assert node.values is not None
        return isinstance(value, dict) and all(
            is_valid_default(node.values, v) for v in value.values())
    if kind == "record":
        if not isinstance(value, dict):
            return False
        for f in node.fields:
            if f.name in value:
                if not is_valid_default(f.type, value[f.name]):
                    return False
            elif not f.has_default:
                return False
        return True
    if kind == "union":
        return any(is_valid_default(b, value) for b in node.branches)
    return False


def parse_avro_json(
    obj: Any,
    referenced: Iterable[Any] = (),
    names: dict[str, AvroNode] | None = None,
    *,
    validate_defaults: bool = False,
) -> AvroNode:
    """Parse an already-decoded Avro schema.

    Args:
        obj: the decoded JSON of the schema.
        referenced: decoded JSON of referenced schemas, dependencies first; their named types
            become visible to ``obj``.
        names: a name table to fill (a fresh one by default).
        validate_defaults: reject field defaults that do not fit their type. Off by default,
            like Confluent Schema Registry (``avro.validate.defaults=false``).

    Returns:
        The root node.

    Raises:
        SchemaParseError: the schema is invalid; UnresolvedReferenceError: a name is unknown.
    """
    parser = _Parser({} if names is None else names, validate_defaults)
    for ref in referenced:
        parser.parse(ref, "", "/")
    return parser.parse(obj, "", "")


def parse_avro(
    schema_str: str, referenced: Iterable[str] = (), *, validate_defaults: bool = False
) -> AvroNode:
    """Parse Avro schema text (and referenced schema texts, dependencies first).

    Args:
        schema_str: the schema text.
        referenced: texts of referenced schemas, dependencies first.
        validate_defaults: reject field defaults that do not fit their type.

    Raises:
        SchemaParseError: the text is not JSON or not a valid Avro schema.
    """
    return parse_avro_json(_load(schema_str), [_load(r) for r in referenced],
                           validate_defaults=validate_defaults)


def _load(text: str) -> Any:
    if not isinstance(text, str):
        raise SchemaParseError(f"schema text must be a string, got {type(text).__name__}",
                               schema_type="AVRO")
    stripped = text.strip()
    try:
        return json.loads(stripped)
    except json.JSONDecodeError as exc:
        # A bare primitive name such as `string` (without quotes) is accepted by Confluent.
        if stripped in PRIMITIVES:
            return stripped
        raise SchemaParseError(f"not valid JSON: {exc}", schema_type="AVRO") from None
