"""Arrow columns written as Confluent-framed JSON (JSON Schema), column by column.

The sink's row path turns each row into a ``Row``, then a dict (null properties left out),
validates the document against the subject's schema and writes ``json.dumps`` of it
(``separators=(",", ":")``, ``ensure_ascii=False``). :class:`JsonColumnEncoder` writes the
same text without a document a row: each leaf column is formatted in one pass (strings by
``json``'s own ``encode_basestring``, integers and doubles by their ``repr`` as ``json``
does), an object's properties are prefixed with their name and joined per row in C
(``map("".join, zip(...))``), arrays and maps are cut from their children's texts by the
Arrow offsets.

Validation: the row path validates every document (``validate``, on by default). The
column path gives the same guarantee by proving it instead, for *simple* schemas only: every
node uses only ``type``, ``properties``, ``required``, ``items``, ``additionalProperties``,
string ``enum`` / ``const``, ``$ref``, a ``oneOf`` / ``anyOf`` of one schema and ``null``,
and annotations (``title``, ``description``, ...). For those, a column of the Spark type the
schema maps to can only produce valid documents, except for what is checked here column-wise:
a null in a ``required`` property, a null array element or map value where the items schema
admits no null, a string outside an ``enum``, and NaN or infinite doubles (those batches go
to the row path, which validates and names the row). Any other keyword (``minimum``,
``pattern``, ``format``, ``minItems``, ``patternProperties``, ...) keeps the row path and its
per-document validation; with ``validate=false`` every schema with a Spark type takes the
column path.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from itertools import pairwise, repeat
from json.encoder import encode_basestring
from math import isfinite
from operator import add
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from kontrakt.errors import SerializationError
from kontrakt.spark._json_types import _Builder, _parsed
from kontrakt.spark._mapping import UnsupportedSchemaError

if TYPE_CHECKING:
    from kontrakt.registry import SchemaRegistryClient
    from kontrakt.spark._fieldplan import FieldPlan

log = logging.getLogger("kontrakt.spark")

__all__ = ["JsonColumnEncoder", "NoJsonColumnPlan", "json_column_encoder"]

Enc = Callable[[pa.Array], list[Any]]
"""The JSON text of each row of an Arrow array (None for a null)."""

#: keywords that only annotate (they never make a document invalid)
_ANNOTATIONS = frozenset({"title", "description", "$comment", "default", "examples",
                          "readOnly", "writeOnly", "deprecated", "$schema", "$id",
                          "definitions", "$defs"})
_STRUCTURE = frozenset({"type", "properties", "required", "items", "additionalProperties",
                        "enum", "const"})


class NoJsonColumnPlan(Exception):
    """The schema needs the row path (a keyword whose validation is not proved here)."""


class JsonColumnEncoder:
    """Encodes an Arrow column (of the Spark type a read maps the schema to) as
    Confluent-framed JSON documents, one a row.

    Args:
        schema: the JSON Schema (text or parsed).
        documents: the schemas it references, by reference name.
        prefix: the framing: magic byte and the 4-byte schema id.
        validate: whether documents must be valid (the serializer's ``validate``).
        path: the column, for messages.

    Raises:
        NoJsonColumnPlan: a schema the column path does not prove valid documents for.
        UnsupportedSchemaError: a schema without a Spark type.
    """

    def __init__(self, schema: Any, documents: dict[str, Any] | None, prefix: bytes,
                 validate: bool = True, path: str = "value") -> None:
        schema = _parsed(schema, path)
        self.prefix = prefix
        self._walk = _Walk(_Builder(schema, documents, path), validate)
        self._enc = self._walk.compile(schema, path, ("#",), "")

    def encode(self, column: pa.Array) -> list[bytes | None]:
        """The framed payload of each row; None for a null row (a tombstone).

        Raises:
            SerializationError: a batch the column path does not prove valid (see the
                module docstring); the message names the field, not the row.
        """
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        texts = _whole(self._enc, column)
        prefix = self.prefix
        if column.null_count:
            return [None if t is None else prefix + t.encode() for t in texts]
        return [*map(add, repeat(prefix), map(str.encode, texts))]


def _whole(enc: Enc, arr: pa.Array) -> list[Any]:
    """``enc`` of the array's valid rows, None at its null ones (children of a null
    struct or list row hold arbitrary values, so they are left out before encoding)."""
    if not arr.null_count:
        return enc(arr)
    valid = arr.is_valid()
    texts = iter(enc(arr.filter(valid)))
    return [next(texts) if ok else None for ok in valid.to_pylist()]


class _Walk:
    def __init__(self, builder: _Builder, validate: bool) -> None:
        self.builder = builder
        self.validate = validate

    def check(self, node: dict[str, Any], allowed: Iterable[str], path: str) -> None:
        if not self.validate:
            return
        extra = set(node) - _ANNOTATIONS - set(allowed)
        if extra:
            raise NoJsonColumnPlan(f"{path}: keyword(s) {', '.join(sorted(extra))} are "
                                   f"validated row by row")

    def unwrap(self, node: Any, path: str, refs: tuple[str, ...], base: str
               ) -> tuple[dict[str, Any], bool, tuple[str, ...], str]:
        """The node that fixes the type (as ``_Builder.unwrap`` finds it), whether a null
        is valid for it, the refs followed and its document; every node on the way
        checked for keywords."""
        nullable = False
        while True:
            if not isinstance(node, dict):
                raise UnsupportedSchemaError("a schema without a type has no Spark type",
                                             path=path)
            if "$ref" in node:
                self.check(node, ("$ref",), path)
                node, base, absolute = self.builder.resolve(str(node["$ref"]), path, base)
                if absolute in refs:
                    raise UnsupportedSchemaError("a recursive $ref has no Spark type",
                                                 path=path)
                refs = (*refs, absolute)
                continue
            key = "oneOf" if "oneOf" in node else "anyOf" if "anyOf" in node else None
            if key is None:
                break
            self.check(node, (key,), path)
            options = node[key]
            nulls = [o for o in options if isinstance(o, dict) and o.get("type") == "null"]
            rest = [o for o in options if o not in nulls]
            for option in nulls:
                self.check(option, ("type",), path)
            if len(rest) != 1:
                raise UnsupportedSchemaError(f"{key} with several non-null schemas has no "
                                             f"Spark type", path=path)
            _, inner_nullable, _, _ = self.unwrap(rest[0], path, refs, base)
            if key == "oneOf" and nulls and inner_nullable and self.validate:
                # A null would match both: oneOf refuses it.
                raise NoJsonColumnPlan(f"{path}: oneOf whose schemas both admit null")
            nullable = nullable or bool(nulls)
            node = rest[0]
        kind = node.get("type")
        if isinstance(kind, list):
            nullable = nullable or "null" in kind
        elif kind == "null":
            nullable = True
        return node, nullable, refs, base

    def compile(self, node: Any, path: str, refs: tuple[str, ...], base: str) -> Enc:
        node, _, refs, base = self.unwrap(node, path, refs, base)
        self.check(node, _STRUCTURE, path)
        kind = node.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if k != "null"]
            kind = kinds[0] if len(kinds) == 1 else kind
        if kind is None and ("enum" in node or "const" in node):
            kind = "string"
        if self.validate and ("enum" in node or "const" in node):
            allowed = node.get("enum", [node.get("const")])
            if kind != "string" or not all(isinstance(v, str) for v in allowed):
                raise NoJsonColumnPlan(f"{path}: an enum of other than strings is "
                                       f"validated row by row")
            return _strings(frozenset(allowed), path)
        if kind == "string":
            return _strings(None, path)
        if kind == "integer":
            return _integers
        if kind == "number":
            return _doubles(self.validate, path)
        if kind == "boolean":
            return _booleans
        if kind == "null":
            return lambda arr: [None] * len(arr)
        if kind == "array":
            items = _Builder.items(node, path)
            _, item_null, _, _ = self.unwrap(items, path + "[]", refs, base)
            return _array(self.compile(items, path + "[]", refs, base),
                          item_null or not self.validate, path)
        if kind != "object":
            raise UnsupportedSchemaError(f"type {kind!r} has no Spark type", path=path)
        props = node.get("properties")
        if not props:
            if self.validate and node.get("required"):
                raise NoJsonColumnPlan(f"{path}: required keys of a map")
            values = _Builder.values(node, path)
            _, value_null, _, _ = self.unwrap(values, path + "{}", refs, base)
            return _map(self.compile(values, path + "{}", refs, base),
                        value_null or not self.validate, path)
        required = node.get("required", [])
        if self.validate and not set(required) <= set(props):
            raise NoJsonColumnPlan(f"{path}: a required property that is not a property")
        fields = [(name, self.compile(props[name], f"{path}.{name}", refs, base),
                   self.validate and name in required) for name in props]
        return _object(fields, path)


def _strings(allowed: frozenset[str] | None, path: str) -> Enc:
    def enc(arr: pa.Array) -> list[Any]:
        values = arr.to_pylist()
        if allowed is not None and not set(values) - {None} <= allowed:
            raise SerializationError(f"{path}: a string outside the schema's enum")
        if arr.null_count:
            return [None if v is None else encode_basestring(v) for v in values]
        return [*map(encode_basestring, values)]
    return enc


def _scalars(text: Callable[[Any], str]) -> Enc:
    def enc(arr: pa.Array) -> list[Any]:
        values = arr.to_pylist()
        if arr.null_count:
            return [None if v is None else text(v) for v in values]
        return [*map(text, values)]
    return enc


def _integers(arr: pa.Array) -> list[Any]:
    # Arrow's decimal text of an int64 is Python's (and json's): formatted in C++
    values: list[Any] = arr.cast(pa.string()).to_pylist()
    return values


def _double(v: float) -> str:
    # json's float text: repr, and JavaScript's names for what JSON has no number for
    if isfinite(v):
        return float.__repr__(v)
    return "NaN" if v != v else "Infinity" if v > 0 else "-Infinity"


def _doubles(validate: bool, path: str) -> Enc:
    plain = _scalars(float.__repr__)
    special = _scalars(_double)

    def enc(arr: pa.Array) -> list[Any]:
        values = arr.to_pylist()
        if all(map(isfinite, filter(None, values))):
            return plain(arr)
        if validate:
            # JSON has no such number: left to the row path's validation.
            raise SerializationError(f"{path}: NaN or an infinite double")
        return special(arr)
    return enc


def _booleans(arr: pa.Array) -> list[Any]:
    return [None if v is None else "true" if v else "false" for v in arr.to_pylist()]


def _no_nulls(texts: list[Any], nullable: bool, path: str) -> list[Any]:
    """Null elements as JSON null, where the schema admits them."""
    if None not in texts:
        return texts
    if not nullable:
        raise SerializationError(f"{path}: a null the schema admits none for")
    return ["null" if t is None else t for t in texts]


def _array(item: Enc, nullable: bool, path: str) -> Enc:
    def enc(arr: pa.Array) -> list[Any]:
        texts = _no_nulls(_whole(item, arr.values), nullable, path + "[]")
        offsets = arr.offsets.to_pylist()
        return ["[" + ",".join(texts[a:b]) + "]" for a, b in pairwise(offsets)]
    return enc


def _map(value: Enc, nullable: bool, path: str) -> Enc:
    def enc(arr: pa.Array) -> list[Any]:
        keys = arr.keys.to_pylist()
        texts = _no_nulls(_whole(value, arr.items), nullable, path + "{}")
        entries = [*map(add, map(add, map(encode_basestring, keys), repeat(":")), texts)]
        offsets = arr.offsets.to_pylist()
        out = []
        for a, b in pairwise(offsets):
            if b - a > 1 and len(set(keys[a:b])) != b - a:
                # A dict keeps one entry a key: the row path's business.
                raise SerializationError(f"{path}: a map with a key twice")
            out.append("{" + ",".join(entries[a:b]) + "}")
        return out
    return enc


def _object(fields: list[tuple[str, Enc, bool]], path: str) -> Enc:
    names = [f"{path}.{name}" for name, _, _ in fields]
    # Each property's text after a comma; a row's first comma is dropped after the join,
    # unless the first property is in every row: then it opens the object.
    heads = ["," + encode_basestring(name) + ":" for name, _, _ in fields]
    opening = "{" + heads[0][1:] if heads else "{"

    def enc(arr: pa.Array) -> list[Any]:
        if not fields:
            return ["{}"] * len(arr)
        columns = []
        opened = False
        for i, (_, field, required) in enumerate(fields):
            texts = _whole(field, arr.field(i))
            if None not in texts:
                opened = opened or i == 0
                head = opening if i == 0 else heads[i]
                columns.append([*map(add, repeat(head), texts)])
                continue
            if required:
                raise SerializationError(f"{names[i]}: null in a required property")
            # A null property is left out, as the row path's writer does.
            head = heads[i]
            columns.append(["" if t is None else head + t for t in texts])
        if opened:
            columns.append(["}"] * len(arr))
            return [*map("".join, zip(*columns, strict=True))]
        return ["{" + row[1:] + "}" for row in map("".join, zip(*columns, strict=True))]
    return enc


def json_column_encoder(plan: FieldPlan, client: SchemaRegistryClient, subject: str,
                        path: str, validate: bool) -> JsonColumnEncoder | None:
    """The column encoder the sink uses for ``subject``, or None where the row path must
    write: the subject's latest schema must still be the one the column was checked
    against on the driver, have no WRITE rules (data contracts run row by row) and be
    simple enough to prove documents valid (see the module docstring).

    Raises:
        SchemaRegistryError: the registry failed (the row path would fail the same way).
    """
    from kontrakt.spark._fieldplan import column_path_schema

    latest = column_path_schema(plan, client, subject, path)
    if latest is None or plan.schema is None:
        return None
    prefix = b"\0" + latest.schema_id.to_bytes(4, "big")
    try:
        return JsonColumnEncoder(plan.schema.schema_str, dict(plan.deps), prefix, validate,
                                 path)
    except (NoJsonColumnPlan, UnsupportedSchemaError) as exc:
        log.info("%s: no column-wise JSON encoder (%s); encoding row by row", path, exc)
        return None
