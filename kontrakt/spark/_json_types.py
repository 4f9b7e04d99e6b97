"""JSON Schemas as Spark types, decoded JSON documents as Spark row values
(:func:`json_mapping`), and Spark row values as documents to write (:func:`json_writer`).

==========================================  ==============================================
JSON Schema                                 Spark
==========================================  ==============================================
object with ``properties``                  StructType, in property order; every field
                                            nullable (JSON may leave a property out)
object with only ``additionalProperties``   MapType(StringType, ...)
array with ``items``                        ArrayType
string, ``enum`` / ``const`` of strings     StringType (formats such as date stay text)
integer / number / boolean / null           LongType / DoubleType / BooleanType / NullType
``[T, "null"]``, ``oneOf/anyOf [T, null]``  T
``$ref`` to ``#/definitions/..``            the referenced type
``#/$defs/..``, or to a registry reference
(``other.json``, ``other.json#/$defs/..``)
==========================================  ==============================================

A ``$ref`` that does not start with ``#`` names a schema reference by its reference name
(as the registry's ``references`` and Kontrakt's and Confluent's validators resolve it); a
pointer inside a referenced document is relative to that document. Anything else (no
``type``, several non-null types, recursive ``$ref``, a ``$ref`` to a document that is not
a reference) raises :class:`~kontrakt.spark.UnsupportedSchemaError`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DoubleType,
    LongType,
    MapType,
    NullType,
    StringType,
    StructField,
    StructType,
)

from kontrakt.spark._mapping import ColumnMapping, Convert, UnsupportedSchemaError

__all__ = ["json_mapping", "json_writer"]

_SCALARS: dict[str, tuple[DataType, Convert | None]] = {
    "string": (StringType(), None),
    "integer": (LongType(), None),
    "number": (DoubleType(), lambda v: None if v is None else float(v)),
    "boolean": (BooleanType(), None),
    "null": (NullType(), None),
}


def json_mapping(schema: Any, path: str = "value",
                 documents: Mapping[str, Any] | None = None) -> ColumnMapping:
    """The Spark type of a JSON Schema and the converter for documents decoded with it.

    Args:
        schema: the schema as JSON text or parsed JSON.
        path: where the schema sits, for error messages.
        documents: the schemas it references, by reference name (text or parsed JSON).

    Raises:
        UnsupportedSchemaError: a construct without a Spark type (see the module table).
    """
    schema = _parsed(schema, path)
    return _Builder(schema, documents, path).build(schema, path, ("#",), "")


def json_writer(schema: Any, path: str = "value",
                documents: Mapping[str, Any] | None = None) -> Convert:
    """The converter from Spark values of :func:`json_mapping`'s type (``Row``, lists,
    dicts, scalars) to the JSON document to write: the inverse of its converter.

    A struct field that is null is left out of the object (it reads back as null); a null
    map value stays null; arrays become lists.

    Args:
        schema: the schema as JSON text or parsed JSON.
        path: where the schema sits, for error messages.
        documents: the schemas it references, by reference name.

    Raises:
        UnsupportedSchemaError: as :func:`json_mapping`.
    """
    schema = _parsed(schema, path)
    return _Builder(schema, documents, path).writer(schema, path, ("#",), "")


def _parsed(schema: Any, path: str) -> Any:
    if not isinstance(schema, str):
        return schema
    try:
        return json.loads(schema)
    except ValueError as exc:
        raise UnsupportedSchemaError(f"not valid JSON: {exc}", path=path) from exc


class _Builder:
    """Walks a schema for both directions, so that the Spark type read and the document
    written agree on every construct."""

    def __init__(self, root: Any, documents: Mapping[str, Any] | None, path: str) -> None:
        # Documents by reference name; "" is the schema itself.
        self.documents = {name: _parsed(doc, f"{path} (reference {name!r})")
                          for name, doc in (documents or {}).items()}
        self.documents[""] = root

    def resolve(self, ref: str, path: str, base: str) -> tuple[Any, str, str]:
        """The node ``ref`` points to from document ``base``, its document and the
        absolute ref (``document#pointer``)."""
        name, _, pointer = ref.partition("#")
        name = name or base
        if name not in self.documents:
            raise UnsupportedSchemaError(
                f"$ref {ref!r} names no schema reference (references: "
                f"{', '.join(sorted(n for n in self.documents if n)) or 'none'})", path=path)
        node = self.documents[name]
        if pointer and not pointer.startswith("/"):
            raise UnsupportedSchemaError(f"$ref {ref!r} is not a JSON pointer", path=path)
        for part in pointer[1:].split("/") if pointer else ():
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or part not in node:
                raise UnsupportedSchemaError(f"$ref {ref!r} does not resolve", path=path)
            node = node[part]
        return node, name, f"{name}#{pointer}"

    def unwrap(self, node: Any, path: str, refs: tuple[str, ...], base: str
               ) -> tuple[dict[str, Any], str, tuple[str, ...], str]:
        """The schema that fixes the Spark type (``$ref`` followed, a null alternative
        dropped), its kind (a key of ``_SCALARS``, ``array`` or ``object``), the refs
        followed so far and the document it is in."""
        if not isinstance(node, dict):
            raise UnsupportedSchemaError("a schema without a type has no Spark type",
                                         path=path)
        if "$ref" in node:
            ref = str(node["$ref"])
            target, base, absolute = self.resolve(ref, path, base)
            if absolute in refs:
                raise UnsupportedSchemaError(
                    f"$ref {ref!r} refers to itself; recursive types have no Spark type",
                    path=path)
            return self.unwrap(target, path, (*refs, absolute), base)
        for key in ("oneOf", "anyOf"):
            if key in node:
                options = [o for o in node[key] if not (isinstance(o, dict)
                                                        and o.get("type") == "null")]
                if len(options) != 1:
                    raise UnsupportedSchemaError(
                        f"{key} with several non-null schemas has no Spark type", path=path)
                return self.unwrap(options[0], path, refs, base)
        kind = node.get("type")
        if kind is None and ("enum" in node or "const" in node):
            values = node.get("enum", [node.get("const")])
            if all(isinstance(v, str) for v in values):
                return node, "string", refs, base
        if isinstance(kind, list):
            kinds = [k for k in kind if k != "null"]
            if len(kinds) != 1:
                raise UnsupportedSchemaError(
                    f"type {kind!r} (several non-null types) has no Spark type", path=path)
            kind = kinds[0]
        if kind in _SCALARS or kind in ("array", "object"):
            return node, str(kind), refs, base
        raise UnsupportedSchemaError(f"type {kind!r} has no Spark type", path=path)

    @staticmethod
    def items(node: dict[str, Any], path: str) -> dict[str, Any]:
        items = node.get("items")
        if not isinstance(items, dict):
            raise UnsupportedSchemaError("an array needs one 'items' schema", path=path)
        return items

    @staticmethod
    def values(node: dict[str, Any], path: str) -> dict[str, Any]:
        """The map's value schema, for an object without ``properties``."""
        extra = node.get("additionalProperties")
        if not isinstance(extra, dict):
            raise UnsupportedSchemaError(
                "an object needs 'properties' or an 'additionalProperties' schema", path=path)
        return extra

    def build(self, node: Any, path: str, refs: tuple[str, ...], base: str) -> ColumnMapping:
        node, kind, refs, base = self.unwrap(node, path, refs, base)
        if kind in _SCALARS:
            data_type, conv = _SCALARS[kind]
            return ColumnMapping(data_type, True, conv)
        if kind == "array":
            item = self.build(self.items(node, path), path + "[]", refs, base)
            iconv = item.convert
            return ColumnMapping(ArrayType(item.data_type, True), True,
                               None if iconv is None
                               else (lambda v: None if v is None else [iconv(x) for x in v]))
        return self.object(node, path, refs, base)

    def object(self, node: dict[str, Any], path: str, refs: tuple[str, ...],
               base: str) -> ColumnMapping:
        props = node.get("properties")
        if not props:
            val = self.build(self.values(node, path), path + "{}", refs, base)
            vconv = val.convert
            return ColumnMapping(MapType(StringType(), val.data_type, True), True,
                               None if vconv is None else
                               (lambda v: None if v is None
                                else {k: vconv(x) for k, x in v.items()}))
        names = list(props)
        mapped = [self.build(props[n], f"{path}.{n}", refs, base) for n in names]
        pairs: list[tuple[str, Callable[[Any], Any] | None]] = [
            (n, m.convert) for n, m in zip(names, mapped, strict=True)]

        def convert(value: Any) -> Any:
            if value is None:
                return None
            get = value.get
            return tuple([get(n) if c is None else c(get(n)) for n, c in pairs])
        return ColumnMapping(StructType([StructField(n, m.data_type, True)
                                       for n, m in zip(names, mapped, strict=True)]),
                           True, convert)

    def writer(self, node: Any, path: str, refs: tuple[str, ...], base: str) -> Convert:
        node, kind, refs, base = self.unwrap(node, path, refs, base)
        if kind in _SCALARS:
            return _identity
        if kind == "array":
            item = self.writer(self.items(node, path), path + "[]", refs, base)
            return lambda v: None if v is None else [item(x) for x in v]
        props = node.get("properties")
        if not props:
            val = self.writer(self.values(node, path), path + "{}", refs, base)
            # A map entry's null is data (the read side gives it back as null), so it stays.
            return lambda v: None if v is None else {k: val(x) for k, x in v.items()}
        fields = [(n, self.writer(props[n], f"{path}.{n}", refs, base)) for n in props]

        def convert(value: Any) -> Any:
            if value is None:
                return None
            data = value.asDict() if hasattr(value, "asDict") else value
            # A null property is left out rather than written as null: the read side reads
            # a missing property as null, and a property schema without "null" (most of
            # them) would reject an explicit null.
            return {n: conv(x) for n, conv in fields
                    if (x := data.get(n)) is not None}
        return convert


def _identity(value: Any) -> Any:
    return value
