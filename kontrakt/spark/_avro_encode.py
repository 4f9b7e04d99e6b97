"""Arrow columns written as Confluent-framed Avro, column by column.

The inverse of :mod:`kontrakt.spark._avro_vector`: for a writer schema and the Spark type
a read maps it to (:mod:`kontrakt.spark._types`), an encoder is compiled once (a tree of
closures, one per schema node) that turns an Arrow column into one framed payload a row
(magic byte, schema id, Avro body), byte for byte what the registry serializer writes for
the same rows (``AvroSerializer`` with fastavro, and confluent-kafka's, which also writes
with fastavro). No per-row ``Row``, dict or fastavro call: each leaf column is encoded in
one comprehension over its Python values (varints from a table, floats and doubles sliced
from the Arrow buffer), and a row's payload is the concatenation of its parts, joined once
at the top (``map(b"".join, zip(...))``, a loop in C); records of records add parts, not
joins.

Byte identity with fastavro is kept where fastavro's choices are implicit: an ``[int,
long]`` union takes the first of its branches whose range holds the value, ``[float,
double]`` takes double; decimals take fastavro's byte lengths. Unions whose branches
fastavro picks by a value test that can match another member (two numeric members, string
and enum, a map beside records, logical types) have no column plan (:class:`NoColumnarPlan`),
and neither have fixed uuids: those schemas keep the row path.
"""

from __future__ import annotations

import logging
import struct
import sys
from collections.abc import Callable, Iterable
from itertools import pairwise, repeat
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    DataType,
    DoubleType,
    LongType,
    MapType,
    NullType,
    StructType,
)

from kontrakt.errors import SerializationError
from kontrakt.spark._avro_tree import NoColumnarPlan, kind_of, logical_of

if TYPE_CHECKING:
    from kontrakt.registry import SchemaRegistryClient
    from kontrakt.spark._fieldplan import FieldPlan

log = logging.getLogger("kontrakt.spark")

__all__ = ["AvroColumnEncoder", "NoColumnarPlan", "avro_column_encoder"]

Part = Iterable[bytes]
"""One piece of each row's payload, in row order (a list, or ``repeat`` of a constant)."""
Enc = Callable[[pa.Array], list[Part]]
"""Encodes every row of an Arrow array (nulls included, where the node admits them)."""

_TABLE = 1 << 14
_LITTLE = sys.byteorder == "little"
_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1


def _varint(z: int) -> bytes:
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


#: the unsigned varint of each value below _TABLE (zigzag values, and lengths doubled)
_VAR = [_varint(z) for z in range(_TABLE)]
#: the low 14 bits of a larger value: two 7-bit groups, both with the continuation bit
_LOW = [bytes(((z & 0x7F) | 0x80, (z >> 7) | 0x80)) for z in range(_TABLE)]


def _wide(z: int) -> bytes:
    """The varint of ``z >= _TABLE``, 14 bits a table lookup (ids, timestamps)."""
    if z < 1 << 28:
        return _LOW[z & 0x3FFF] + _VAR[z >> 14]
    if z < 1 << 42:
        return _LOW[z & 0x3FFF] + _LOW[(z >> 14) & 0x3FFF] + _VAR[z >> 28]
    return _varint(z)


def _zigzag(v: int) -> bytes:
    z = (v << 1) ^ (v >> 63)
    return _VAR[z] if z < _TABLE else _wide(z)


def _longs(values: list[Any]) -> list[bytes]:
    V, T, var = _VAR, _TABLE, _wide
    return [V[z] if (z := (v << 1) ^ (v >> 63)) < T else var(z) for v in values]


def _lengths(values: list[bytes]) -> list[bytes]:
    V, T, var = _VAR, _TABLE, _wide
    return [V[z] if (z := len(v) << 1) < T else var(z) for v in values]


def _join(parts: list[Part]) -> list[bytes]:
    return list(map(b"".join, zip(*parts, strict=False)))


def _no_nulls(arr: pa.Array, path: str) -> None:
    if arr.null_count:
        raise SerializationError(f"{path}: a null where the Avro type admits none")


def _fixed_width(arr: pa.Array, width: int, fmt: str) -> list[bytes]:
    """The little-endian values of a float column: slices of its buffer (no nulls)."""
    n = len(arr)
    if _LITTLE:
        raw = arr.buffers()[1].to_pybytes()[arr.offset * width:(arr.offset + n) * width]
        return [raw[i:i + width] for i in range(0, n * width, width)]
    pack = struct.Struct(fmt).pack
    return [pack(v) for v in arr.to_pylist()]


def _binary(arr: pa.Array) -> list[bytes]:
    if pa.types.is_string(arr.type):
        arr = arr.cast(pa.binary())  # the same buffers: UTF-8 is the encoding
    values: list[bytes] = arr.to_pylist()
    return values


def _ints(arr: pa.Array) -> list[int]:
    kind = arr.type
    if pa.types.is_timestamp(kind):
        if kind.unit != "us":
            arr = arr.cast(pa.timestamp("us", kind.tz))
        arr = arr.cast(pa.int64())
    elif pa.types.is_date32(kind):
        arr = arr.cast(pa.int32())
    values: list[int] = arr.to_pylist()
    return values


def _unscaled(arr: pa.Array) -> list[int]:
    """A decimal128 column's unscaled integers (no nulls)."""
    n = len(arr)
    raw = arr.buffers()[1].to_pybytes()[arr.offset * 16:(arr.offset + n) * 16]
    # Arrow buffers are in the machine's byte order.
    order = sys.byteorder
    return [int.from_bytes(raw[i:i + 16], order, signed=True) for i in range(0, n * 16, 16)]


# -- leaves (no nulls: a nullable union filters them out before) ----------------------------
def _leaf(node: Any, path: str) -> Enc:
    kind = kind_of(node)
    logical = logical_of(node) if isinstance(node, dict) else None
    if logical == "decimal" and kind in ("bytes", "fixed"):
        return _decimal(node, kind, path)
    if logical == "uuid" and kind == "fixed":
        raise NoColumnarPlan("a fixed uuid")
    if kind in ("int", "long"):
        if kind == "long" and logical in ("timestamp-millis", "local-timestamp-millis"):
            return lambda arr: [_longs([v // 1000 for v in _ints(arr)])]
        return lambda arr: [_longs(_ints(arr))]
    if kind == "boolean":
        return lambda arr: [[b"\x01" if v else b"\x00" for v in arr.to_pylist()]]
    if kind == "double":
        return lambda arr: [_fixed_width(arr, 8, "<d")]
    if kind == "float":
        return lambda arr: [_fixed_width(arr, 4, "<f")]
    if kind in ("string", "bytes"):
        def text(arr: pa.Array) -> list[Part]:
            values = _binary(arr)
            return [_lengths(values), values]
        return text
    if kind == "enum":
        index = {s.encode(): _zigzag(i) for i, s in enumerate(node["symbols"])}

        def enum(arr: pa.Array) -> list[Part]:
            try:
                return [[index[v] for v in _binary(arr)]]
            except KeyError as exc:
                raise SerializationError(f"{path}: {exc.args[0]!r} is not a symbol of the "
                                         f"enum {node.get('name')}") from None
        return enum
    if kind == "fixed":
        size = int(node["size"])

        def fixed(arr: pa.Array) -> list[Part]:
            values = _binary(arr)
            if any(len(v) != size for v in values):
                raise SerializationError(f"{path}: a value is not {size} bytes long (fixed "
                                         f"{node.get('name')})")
            return [values]
        return fixed
    if kind == "null":
        return lambda arr: []
    raise NoColumnarPlan(f"no column encoder for Avro {kind} at {path}")


def _decimal(node: Any, kind: str, path: str) -> Enc:
    if kind == "fixed":
        size = int(node["size"])

        def fixed(arr: pa.Array) -> list[Part]:
            try:
                return [[u.to_bytes(size, "big", signed=True) for u in _unscaled(arr)]]
            except OverflowError:
                raise SerializationError(f"{path}: a decimal does not fit fixed({size})"
                                         ) from None
        return fixed

    def var(arr: pa.Array) -> list[Part]:
        # fastavro's length: the magnitude's bits plus a sign bit, in whole bytes.
        values = [u.to_bytes((abs(u).bit_length() + 8) // 8, "big", signed=True)
                  for u in _unscaled(arr)]
        return [_lengths(values), values]
    return var


# -- nulls, unions and the composite types ----------------------------------------------------
def _nullable(inner: Enc, branch: int, null_branch: int) -> Enc:
    """A union of null and one type: the branch index, then the value."""
    lead, null = _zigzag(branch), _zigzag(null_branch)

    def optional(arr: pa.Array) -> list[Part]:
        n = len(arr)
        if not arr.null_count:
            return [repeat(lead, n), *inner(arr)]
        valid = arr.is_valid()
        present = iter(_join(inner(arr.filter(valid))))
        return [[lead + next(present) if ok else null for ok in valid.to_pylist()]]
    return optional


def _strict(inner: Enc, path: str) -> Enc:
    def strict(arr: pa.Array) -> list[Part]:
        _no_nulls(arr, path)
        return inner(arr)
    return strict


def _int_long(branches: list[Any], null_branch: int) -> Enc:
    """``[int, long]`` (a Spark long): fastavro writes the first branch that holds the value."""
    kinds = [kind_of(b) for b in branches]
    first_int = kinds.index("int")
    first_long = kinds.index("long")
    small, big = _zigzag(first_int), _zigzag(first_long)
    if first_long < first_int:
        small = big  # long comes first and holds every value
    null = _zigzag(null_branch) if null_branch >= 0 else b""
    lo, hi = _INT_MIN, _INT_MAX

    def numeric(arr: pa.Array) -> list[Part]:
        values = arr.to_pylist()
        if None in values and null_branch < 0:
            raise SerializationError("a null where the Avro union admits none")
        return [[null if v is None else (small if lo <= v <= hi else big) + _zigzag(v)
                 for v in values]]
    return numeric


_GROUPS = {"boolean": "bool", "int": "number", "long": "number", "float": "number",
           "double": "number", "string": "text", "enum": "text", "bytes": "bytes",
           "fixed": "bytes", "array": "array", "map": "dict", "record": "record",
           "error": "record"}


def _general_union(branches: list[Any], dt: StructType, path: str) -> Enc:
    """A union mapped to a struct of ``member0, member1, ...``: the first member that is set
    names the branch. fastavro picks a record branch by name (the row path's tuple
    notation) and any other branch by testing the value, so only unions where that test
    cannot match another member's branch are written column-wise."""
    members = [(i, b) for i, b in enumerate(branches) if b != "null"]
    null_branch = branches.index("null") if "null" in branches else -1
    groups = []
    for _, b in members:
        if logical_of(b) is not None:
            raise NoColumnarPlan(f"a union with a logical type at {path}")
        groups.append(_GROUPS.get(kind_of(b), "?"))
    plain = [g for g in groups if g != "record"]
    if "?" in groups or len(set(plain)) < len(plain) or ("dict" in groups
                                                           and "record" in groups):
        raise NoColumnarPlan(f"a union whose branches fastavro tells apart by value at {path}")
    encs = [_compile(b, f.dataType, f"{path}.member{j}")
            for j, ((_, b), f) in enumerate(zip(members, dt.fields, strict=True))]
    leads = [_zigzag(i) for i, _ in members]
    null = _zigzag(null_branch) if null_branch >= 0 else None

    def union(arr: pa.Array) -> list[Part]:
        n = len(arr)
        fields = [arr.field(j) for j in range(len(members))]
        chosen = [-1] * n
        top = arr.is_valid().to_pylist()
        for j in reversed(range(len(members))):  # the first member set wins
            for i, ok in enumerate(fields[j].is_valid().to_pylist()):
                if ok and top[i]:
                    chosen[i] = j
        out: list[bytes] = [b""] * n
        for j, enc in enumerate(encs):
            rows = [i for i in range(n) if chosen[i] == j]
            if not rows:
                continue
            mask = pa.array([c == j for c in chosen], pa.bool_())
            for i, body in zip(rows, _join(enc(fields[j].filter(mask))), strict=True):
                out[i] = leads[j] + body
        if -1 in chosen:
            if null is None:
                raise SerializationError(f"{path}: no member set, and the union has no null")
            for i in range(n):
                if chosen[i] < 0:
                    out[i] = null
        return [out]
    return union


def _union(branches: list[Any], dt: DataType, path: str) -> Enc:
    members = [b for b in branches if b != "null"]
    null_branch = branches.index("null") if "null" in branches else -1
    if not members:
        return lambda arr: [repeat(_zigzag(null_branch), len(arr))]
    if len(members) == 1:
        inner = _compile(members[0], dt, path, union_member=True)
        branch = branches.index(members[0])
        if null_branch < 0:
            return _strict(lambda arr: [repeat(_zigzag(branch), len(arr)), *inner(arr)], path)
        return _nullable(inner, branch, null_branch)
    kinds = {kind_of(m) if logical_of(m) is None else "logical" for m in members}
    if kinds == {"int", "long"} and isinstance(dt, LongType):
        return _int_long(branches, null_branch)
    if kinds == {"float", "double"} and isinstance(dt, DoubleType):
        kinds_list = [kind_of(b) for b in branches]
        inner = _leaf("double", path)
        branch = kinds_list.index("double")
        if null_branch < 0:
            return _strict(lambda arr: [repeat(_zigzag(branch), len(arr)), *inner(arr)], path)
        return _nullable(inner, branch, null_branch)
    if not isinstance(dt, StructType):
        raise NoColumnarPlan(f"the union at {path} does not map to a struct")
    return _general_union(branches, dt, path)


def _record(node: Any, dt: StructType, path: str) -> Enc:
    fields = node.get("fields", [])
    if [f["name"] for f in fields] != dt.fieldNames():
        raise NoColumnarPlan(f"the record at {path} and its column differ in fields")
    encs = [_compile(f["type"], sf.dataType, f"{path}.{f['name']}")
            for f, sf in zip(fields, dt.fields, strict=True)]

    def record(arr: pa.Array) -> list[Part]:
        parts: list[Part] = []
        for j, enc in enumerate(encs):
            parts.extend(enc(arr.field(j)))
        if not parts:  # a record of nulls only: an empty body a row
            parts.append(repeat(b"", len(arr)))
        return parts
    return record


def _blocks(arr: pa.Array, items: Callable[[pa.Array], list[bytes]]) -> list[Part]:
    """An array or map column: a row is its item count, its items and a 0 (or just the 0)."""
    offsets = arr.offsets.to_pylist()
    start, end = offsets[0], offsets[-1]
    encoded = items(arr.values.slice(start, end - start)) if end > start else []
    join, count = b"".join, _zigzag
    return [[count(b - a) + join(encoded[a - start:b - start]) + b"\x00" if b > a else b"\x00"
             for a, b in pairwise(offsets)]]


def _array(node: Any, dt: ArrayType, path: str) -> Enc:
    item = _compile(node["items"], dt.elementType, path + "[]")
    return lambda arr: _blocks(arr, lambda values: _join(item(values)))


def _map(node: Any, dt: MapType, path: str) -> Enc:
    value = _compile(node["values"], dt.valueType, path + "{}")

    def entries(pairs: pa.Array) -> list[bytes]:
        keys = pairs.field(0)
        _no_nulls(keys, path)
        names = _binary(keys)
        return _join([_lengths(names), names, *value(pairs.field(1))])
    return lambda arr: _blocks(arr, entries)


def _compile(node: Any, dt: DataType, path: str, union_member: bool = False) -> Enc:
    """The encoder of one schema node for the column of Spark type ``dt``. A node outside
    a union refuses nulls (fastavro would too); a union member sees none."""
    if isinstance(node, list):
        return _union(node, dt, path)
    if isinstance(node, dict) and isinstance(node.get("type"), (dict, list)) \
            and "logicalType" not in node:
        return _compile(node["type"], dt, path, union_member)
    kind = kind_of(node)
    if kind == "ref":
        raise NoColumnarPlan(f"a recursive reference at {path}")
    if kind in ("record", "error"):
        if not isinstance(dt, StructType):
            raise NoColumnarPlan(f"the record at {path} does not map to a struct")
        enc = _record(node, dt, path)
    elif kind == "array":
        if not isinstance(dt, ArrayType):
            raise NoColumnarPlan(f"the array at {path} does not map to an array")
        enc = _array(node, dt, path)
    elif kind == "map":
        if not isinstance(dt, MapType):
            raise NoColumnarPlan(f"the map at {path} does not map to a map")
        enc = _map(node, dt, path)
    else:
        if isinstance(dt, NullType) and kind != "null":
            raise NoColumnarPlan(f"a null column for Avro {kind} at {path}")
        enc = _leaf(node, path)
    return enc if union_member or kind == "null" else _strict(enc, path)


class AvroColumnEncoder:
    """Encodes an Arrow column (of the Spark type a read maps the writer schema to) as
    Confluent-framed Avro payloads, one a row.

    Args:
        schema: the writer schema, parsed by fastavro with ``expand=True`` (named types
            inlined).
        data_type: the column's Spark type (nullability aside, the mapped type).
        prefix: the framing: magic byte and the 4-byte schema id.
        path: the column, for messages.

    Raises:
        NoColumnarPlan: a construct that keeps the row path (see the module docstring).
    """

    def __init__(self, schema: Any, data_type: DataType, prefix: bytes,
                 path: str = "value") -> None:
        self.prefix = prefix
        # A top-level bytes schema is written as the bytes themselves (no length), as the
        # registry serializers do.
        self.raw_bytes = schema == "bytes" or (isinstance(schema, dict)
                                               and schema.get("type") == "bytes"
                                               and "logicalType" not in schema)
        self._enc = _compile(schema, data_type, path, union_member=True)

    def encode(self, column: pa.Array) -> list[bytes | None]:
        """The framed payload of each row; None for a null row (a tombstone).

        Raises:
            SerializationError: a value the schema cannot hold (a null where the Avro type
                has none, an unknown enum symbol, a fixed of another size, a decimal too
                wide for its fixed); the message names the field, not the row.
        """
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        nulls = column.null_count
        valid = column.is_valid() if nulls else None
        if valid is not None:
            column = column.filter(valid)
        if self.raw_bytes:
            values = _binary(column)
            prefix = self.prefix
            body: list[bytes] = [prefix + v for v in values]
        else:
            body = _join([repeat(self.prefix, len(column)), *self._enc(column)])
        if valid is None:
            return body  # type: ignore[return-value]  # list is invariant
        present = iter(body)
        return [next(present) if ok else None for ok in valid.to_pylist()]


def avro_column_encoder(plan: FieldPlan, client: SchemaRegistryClient, subject: str,
                        data_type: DataType, path: str) -> AvroColumnEncoder | None:
    """The column encoder the sink uses for ``subject``, or None where the row path must
    write (the registry serializer's choices are not all the column path's).

    The serializer writes with the subject's latest schema; the column path takes it only
    if it is still the schema the column was checked against on the driver, has no WRITE
    rules to run (data contracts transform or refuse values row by row) and maps to a
    column plan.

    Raises:
        SchemaRegistryError: the registry failed (the row path would fail the same way).
    """
    import json

    from fastavro import parse_schema

    from kontrakt.spark._fieldplan import column_path_schema, named_types

    latest = column_path_schema(plan, client, subject, path)
    if latest is None or plan.schema is None:
        return None
    try:
        text = json.loads(plan.schema.schema_str)
    except ValueError:
        text = plan.schema.schema_str.strip()
    parsed = parse_schema(text, named_schemas=named_types(plan.deps), expand=True)
    prefix = b"\0" + latest.schema_id.to_bytes(4, "big")
    try:
        return AvroColumnEncoder(parsed, data_type, prefix, path)
    except NoColumnarPlan as exc:
        log.info("%s: no column-wise Avro encoder (%s); encoding row by row", path, exc)
        return None
