"""Canonical forms, so that equivalent schemas normalize to the same text (and get one id).

* Avro: like the Parsing Canonical Form (full names, no ``namespace`` attributes, a fixed
  attribute order, no whitespace, ``{"type": "int"}`` written ``"int"``), but keeping what
  Confluent keeps when ``normalize=true``: docs, aliases (qualified), defaults, field order,
  logical types and custom properties (sorted by key).
* JSON Schema: the same JSON with object keys sorted and no whitespace.
* Protobuf: the schema re-printed from its parsed form in a canonical layout.
"""

from __future__ import annotations

import json
from typing import Any

from kontrakt.registry.compatibility._avro_model import AvroNode, parse_avro_json
from kontrakt.registry.compatibility._check import (
    VersionSource,
    as_lookup,
    resolve_references,
    schema_type_of,
)
from kontrakt.registry.compatibility._result import (
    ReferenceLookup,
    SchemaLike,
    SchemaParseError,
)

__all__ = ["canonical_avro", "normalize_schema"]


def normalize_schema(
    schema: SchemaLike, lookup: ReferenceLookup | VersionSource | None = None
) -> str:
    """Return the canonical text of a schema.

    Args:
        schema: a schema-like object (``schema_str``, ``schema_type``, ``references``).
        lookup: resolves references (a callable or a registry client); Avro needs it when
            the schema uses named types defined in referenced schemas (those stay references
            and are written by full name).

    Returns:
        The canonical schema text. Two schemas that differ only in formatting, attribute
        order, namespace spelling or redundant wrappers give the same text.

    Raises:
        SchemaParseError: the schema is invalid.
        UnresolvedReferenceError: a reference cannot be resolved.
        UnsupportedSchemaError: the schema type is not supported.
    """
    stype = schema_type_of(schema)
    lookup = as_lookup(lookup)
    if stype == "AVRO":
        refs = resolve_references(schema, lookup) if schema.references else []
        names: dict[str, AvroNode] = {}
        ref_objs = [_load_json(r.schema_str, "AVRO") for r in refs]
        for obj in ref_objs:
            parse_avro_json(obj, (), names)
        external = set(names)
        root = parse_avro_json(_load_json(schema.schema_str, "AVRO"), (), names)
        return canonical_avro(root, external)
    if stype == "JSON":
        obj = _load_json(schema.schema_str, "JSON")
        return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    from kontrakt.registry.compatibility._proto_parser import parse_proto_schema
    from kontrakt.registry.compatibility._proto_print import print_proto

    refs = resolve_references(schema, lookup)
    parsed = parse_proto_schema(schema.schema_str, [(r.name, r.schema_str) for r in refs])
    return print_proto(parsed.file)


def _load_json(text: str, stype: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError) as exc:
        stripped = text.strip() if isinstance(text, str) else ""
        if stype == "AVRO" and stripped in (
            "null", "boolean", "int", "long", "float", "double", "bytes", "string"
        ):
            return stripped
        raise SchemaParseError(f"not valid JSON: {exc}", schema_type=stype) from None


def canonical_avro(root: AvroNode, external: set[str] | None = None) -> str:
    """Write a parsed Avro schema in Kontrakt's canonical form (see module docstring).

    Args:
        root: the parsed schema.
        external: full names defined in referenced schemas; they are written as names.
    """
    done: set[str] = set(external or ())
    return json.dumps(_avro_obj(root, done), separators=(",", ":"), ensure_ascii=False)


def _sorted_props(props: dict[str, Any]) -> list[tuple[str, Any]]:
    return sorted(props.items())


def _avro_obj(node: AvroNode, done: set[str]) -> Any:
    kind = node.kind
    if node.fullname is not None:
        if node.fullname in done:
            return node.fullname
        done.add(node.fullname)
    if kind == "union":
        return [_avro_obj(b, done) for b in node.branches]
    out: dict[str, Any] = {"type": kind}
    if node.fullname is not None:
        out["name"] = node.fullname
    if node.doc is not None:
        out["doc"] = node.doc
    if node.aliases:
        out["aliases"] = list(node.aliases)
    if kind == "record":
        out["fields"] = [_field_obj(f, done) for f in node.fields]
    elif kind == "enum":
        out["symbols"] = list(node.symbols)
        if node.enum_default is not None:
            out["default"] = node.enum_default
    elif kind == "fixed":
        out["size"] = node.size
    elif kind == "array":
        assert node.items is not None
        out["items"] = _avro_obj(node.items, done)
    elif kind == "map":
        assert node.values is not None
        out["values"] = _avro_obj(node.values, done)
    if node.logical_type is not None:
        out["logicalType"] = node.logical_type
    for key, value in _sorted_props(node.props):
        out[key] = value
    if len(out) == 1:
        return kind  # a primitive without attributes
    return out


def _field_obj(f: Any, done: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": f.name, "type": _avro_obj(f.type, done)}
    if f.doc is not None:
        out["doc"] = f.doc
    if f.has_default:
        out["default"] = f.default
    if f.order != "ascending":
        out["order"] = f.order
    if f.aliases:
        out["aliases"] = list(f.aliases)
    for key, value in _sorted_props(f.props):
        out[key] = value
    return out
