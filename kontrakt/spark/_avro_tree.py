"""The reader's shape as column lists, and the Arrow arrays built from them.

The runtime half of :mod:`kontrakt.spark._avro_columns`: the column tree of a reader schema
(a node per struct, list, map or leaf column, each holding Python lists in ``L``), the
helpers the generated decoders call, and the assembly of the arrays (structs, lists and maps
from their children, offsets and null masks).
"""

from __future__ import annotations

import datetime
import decimal
import itertools
import uuid
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    DataType,
    DateType,
    MapType,
    NullType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from kontrakt.errors import SerializationError
from kontrakt.serde._avro_bounds import LIMIT_DEFAULTS
from kontrakt.spark._arrow import arrow_type, int_array

__all__ = ["MAX_ITEMS", "NAMED", "PRIMITIVES", "NoColumnarPlan", "Node", "SourceWriter",
           "alloc_slot", "append_null", "append_value", "build_array", "corrupt", "fail",
           "kind_of", "logical_of", "raw_value", "shape", "short_name", "to_decimal",
           "uuid_fixed", "uuid_text"]

MAX_ITEMS = LIMIT_DEFAULTS["max.collection.items"]
PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
NAMED = ("record", "error", "enum", "fixed")
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_NAIVE_EPOCH = datetime.datetime(1970, 1, 1)
_DAY0 = datetime.date(1970, 1, 1)
_MICRO = datetime.timedelta(microseconds=1)


class NoColumnarPlan(Exception):
    """The schema pair has no columnar decoder (the caller decodes record by record)."""


def corrupt(what: str = "the Avro payload is truncated or corrupt") -> SerializationError:
    return SerializationError(what)


def uuid_text(raw: bytes) -> bytes:
    return str(uuid.UUID(raw.decode())).encode()


def uuid_fixed(raw: bytes) -> bytes:
    return str(uuid.UUID(bytes=raw)).encode()


_CONTEXT = decimal.Context()


def to_decimal(raw: bytes, precision: int, scale: int) -> decimal.Decimal:
    # As fastavro: the unscaled integer in a context of the schema's precision.
    _CONTEXT.prec = precision
    return _CONTEXT.create_decimal(int.from_bytes(raw, "big", signed=True)).scaleb(
        -scale, _CONTEXT)


def fail(message: str) -> SerializationError:
    return SerializationError(message)


# -- the column tree (the reader's shape) ---------------------------------------------------
class Node:
    """One column of the reader's shape and the slots (lists in ``L``) that hold it."""

    def __init__(self, kind: str, data_type: DataType, nullable: bool,
                 children: Sequence[Node] = (), union: str = "") -> None:
        self.kind = kind  # leaf, struct, list, map
        self.data_type = data_type
        self.nullable = nullable
        self.children = list(children)
        self.union = union  # for a reader union: optional, numeric or struct
        self.slot = -1  # leaf values; list/map item counts
        self.mask = -1  # null flags (nullable struct/list/map)


def alloc_slot(slots: list[int]) -> int:
    """The next free slot (``slots[0]`` counts them)."""
    slots[0] += 1
    return slots[0] - 1


class SourceWriter:
    """What the column decoders' code generators share: the names the generated source
    sees (``env``), fresh temporaries and constants bound into ``env``."""

    def __init__(self, env: dict[str, Any], prefix: str) -> None:
        self.env = env
        self._prefix = prefix
        self._n = 0

    def tmp(self, prefix: str | None = None) -> str:
        self._n += 1
        return f"{prefix or self._prefix}{self._n}"

    def const(self, value: Any) -> str:
        name = self.tmp("K")
        self.env[name] = value
        return name


def shape(r: Any, dt: DataType, nullable: bool, slots: list[int]) -> Node:
    if isinstance(r, list):
        members = [b for b in r if b != "null"]
        if len(members) == 1:
            node = shape(members[0], dt, True, slots)
            node.union = "optional"
            return node
        if not members or isinstance(dt, (NullType,)) or not isinstance(dt, StructType):
            node = Node("leaf", dt, True, union="numeric")
            node.slot = alloc_slot(slots)
            return node
        children = [shape(m, f.dataType, True, slots) for m, f in zip(members, dt.fields,
                                                                        strict=True)]
        node = Node("struct", dt, True, children, union="struct")
        node.mask = alloc_slot(slots)
        return node
    kind = kind_of(r)
    if kind in ("record", "error") and isinstance(dt, StructType):
        if not dt.fields:
            raise NoColumnarPlan("a record without fields")
        children = [shape(f["type"], sf.dataType, sf.nullable, slots)
                    for f, sf in zip(r["fields"], dt.fields, strict=True)]
        node = Node("struct", dt, nullable, children)
    elif kind == "array" and isinstance(dt, ArrayType):
        node = Node("list", dt, nullable,
                     [shape(r["items"], dt.elementType, dt.containsNull, slots)])
        node.slot = alloc_slot(slots)
    elif kind == "map" and isinstance(dt, MapType):
        key = Node("leaf", StringType(), False)
        key.slot = alloc_slot(slots)
        node = Node("map", dt, nullable,
                     [key, shape(r["values"], dt.valueType, dt.valueContainsNull, slots)])
        node.slot = alloc_slot(slots)
    elif kind in ("record", "error", "array", "map"):
        raise NoColumnarPlan(f"the {kind} does not map to {dt.simpleString()}")
    else:
        node = Node("leaf", dt, nullable)
        node.slot = alloc_slot(slots)
        return node
    if nullable:
        node.mask = alloc_slot(slots)
    return node


def kind_of(s: Any) -> str:
    """The Avro type of a schema node (a bare name is a named type's reference)."""
    if isinstance(s, str):
        return s if s in PRIMITIVES else "ref"
    if isinstance(s, list):
        return "union"
    kind = s.get("type")
    if isinstance(kind, (dict, list)):
        return kind_of(kind)
    return str(kind)


def logical_of(s: Any) -> str | None:
    if isinstance(s, dict):
        logical = s.get("logicalType")
        if logical is None and isinstance(s.get("type"), dict):
            return logical_of(s["type"])
        return None if logical is None else str(logical)
    return None


def short_name(name: str) -> str:
    return name.rsplit(".", 1)[-1]


# -- building the arrays --------------------------------------------------------------------
def build_array(node: Node, L: list[list[Any]], n: int, text_as_bytes: bool = True
                ) -> pa.Array:
    """The Arrow array of ``node`` from the slot lists ``L``. ``text_as_bytes``: string
    leaves hold UTF-8 bytes (Avro's), else ``str`` (Protobuf's)."""
    kind = arrow_type(node.data_type)
    mask = None
    if node.mask >= 0:
        flags = L[node.mask]
        mask = pa.array(flags, pa.bool_()) if any(flags) else None
    if node.kind == "leaf":
        values = L[node.slot]
        if text_as_bytes and isinstance(node.data_type, StringType):
            return pa.array(values, pa.binary()).cast(pa.string())
        if isinstance(node.data_type, NullType):
            return pa.nulls(len(values))
        return pa.array(values, kind)
    if node.kind == "struct":
        children = [build_array(c, L, n, text_as_bytes) for c in node.children]
        return pa.StructArray.from_arrays(children, fields=list(kind), mask=mask)
    counts = L[node.slot]
    offsets = int_array([0, *itertools.accumulate(counts)], "i", pa.int32())
    if node.kind == "list":
        return pa.ListArray.from_arrays(offsets, build_array(node.children[0], L, n,
                                                             text_as_bytes),
                                        type=kind, mask=mask)
    keys = build_array(node.children[0], L, n, text_as_bytes)
    items = build_array(node.children[1], L, n, text_as_bytes)
    return pa.MapArray.from_arrays(offsets, keys, items, type=kind, mask=mask)


def append_value(node: Node, value: Any, L: list[list[Any]]) -> None:
    """Append a raw value (see :func:`raw_value`) to a node's slots (defaults; not a hot path)."""
    if value is None:
        append_null(node, L)
    elif node.kind == "leaf":
        L[node.slot].append(value)
    elif node.kind == "struct":
        for child, item in zip(node.children, value, strict=True):
            append_value(child, item, L)
        if node.mask >= 0:
            L[node.mask].append(False)
    else:
        items = list(value.items()) if node.kind == "map" else value
        for item in items:
            if node.kind == "map":
                append_value(node.children[0], item[0], L)
                append_value(node.children[1], item[1], L)
            else:
                append_value(node.children[0], item, L)
        L[node.slot].append(len(items))
        if node.mask >= 0:
            L[node.mask].append(False)


def append_null(node: Node, L: list[list[Any]]) -> None:
    if node.kind == "leaf":
        L[node.slot].append(None)
        return
    if node.mask >= 0:
        L[node.mask].append(True)
    if node.kind == "struct":
        for child in node.children:
            append_null(child, L)
    else:
        L[node.slot].append(0)


def raw_value(dt: DataType, value: Any) -> Any:
    """A Spark row value (the mapping's converter output) as the raw column value."""
    if value is None:
        return None
    if isinstance(dt, StringType):
        return value.encode()
    if isinstance(dt, TimestampType):
        return (value - _EPOCH) // _MICRO
    if isinstance(dt, TimestampNTZType):
        return (value - _NAIVE_EPOCH) // _MICRO
    if isinstance(dt, DateType):
        return (value - _DAY0).days
    if isinstance(dt, StructType):
        return tuple(raw_value(f.dataType, v) for f, v in zip(dt.fields, value, strict=True))
    if isinstance(dt, ArrayType):
        return [raw_value(dt.elementType, v) for v in value]
    if isinstance(dt, MapType):
        return {k.encode(): raw_value(dt.valueType, v) for k, v in value.items()}
    return value
