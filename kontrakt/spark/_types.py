"""Avro schemas as Spark types, and fastavro's decoded values as Spark row values.

The mapping follows Spark's own ``from_avro`` so that a query moved from Spark's Kafka source
plus ``from_avro`` sees the same columns:

==============================  =====================================================
Avro                            Spark
==============================  =====================================================
null                            NullType
boolean / int / long            BooleanType / IntegerType / LongType
float / double                  FloatType / DoubleType
string, enum, uuid              StringType
bytes, fixed                    BinaryType
record                          StructType (a field is nullable only if its type is)
array / map                     ArrayType / MapType(StringType, ...)
``[null, T]``                   T, nullable
``[int, long]``                 LongType (``[float, double]``: DoubleType)
any other union                 StructType ``member0, member1, ...`` (all nullable);
                                the branch a value took is set, the others are null
date                            DateType
timestamp-millis / -micros      TimestampType
local-timestamp-millis/-micros  TimestampNTZType
decimal(p, s), p <= 38          DecimalType(p, s)
time-millis / time-micros       IntegerType / LongType (as Spark: the raw count)
==============================  =====================================================

Recursive records and decimals wider than 38 digits have no Spark type and raise
:class:`UnsupportedSchemaError`. Unknown logical types are ignored, as the Avro spec says.
"""

from __future__ import annotations

import datetime
import decimal
import json
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from kontrakt.errors import SerializationError
from kontrakt.spark._mapping import ColumnMapping, Convert, UnsupportedSchemaError, aware_utc

__all__ = [
    "UnsupportedSchemaError",
    "avro_mapping",
    "avro_to_spark_type",
    "avro_writer",
]

_MAX_DECIMAL_PRECISION = 38  # Spark's DecimalType limit

_PRIMITIVES: dict[str, DataType] = {
    "null": NullType(), "boolean": BooleanType(), "int": IntegerType(), "long": LongType(),
    "float": FloatType(), "double": DoubleType(), "bytes": BinaryType(),
    "string": StringType(),
}


def avro_to_spark_type(schema: Any) -> DataType:
    """The Spark type of an Avro schema (JSON text, or the parsed JSON).

    Raises:
        UnsupportedSchemaError: a construct without a Spark type, or a malformed schema.
    """
    return avro_mapping(schema).data_type


def avro_mapping(schema: Any, named: Mapping[str, Any] | None = None,
                 path: str = "value") -> ColumnMapping:
    """The Spark type of an Avro schema and the converter for values fastavro decoded with it
    (with ``return_record_name=True``, so that a union names the record branch it took).

    Args:
        schema: the schema as JSON text or parsed JSON.
        named: named types defined by referenced schemas (full name -> parsed schema).
        path: where the schema sits, for error messages.

    Raises:
        UnsupportedSchemaError: a construct without a Spark type, or a malformed schema.
    """
    from fastavro import parse_schema

    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except ValueError:
            schema = schema.strip()  # a bare primitive name such as string
    try:
        # expand=True inlines every named type with its full name; a recursive reference is
        # left as a bare name, which _build reports.
        expanded = parse_schema(schema, named_schemas=dict(named or {}), expand=True)
    except Exception as exc:  # fastavro raises SchemaParseException, KeyError, ...
        raise UnsupportedSchemaError(f"not a valid Avro schema: {exc}", path=path) from exc
    return _build(expanded, path)


def _build(node: Any, path: str) -> ColumnMapping:
    if isinstance(node, str):
        if node in _PRIMITIVES:
            return ColumnMapping(_PRIMITIVES[node], node == "null", None)
        raise UnsupportedSchemaError(
            f"the record {node!r} refers to itself; recursive Avro types have no Spark type",
            path=path)
    if isinstance(node, list):
        return _union(node, path)
    if not isinstance(node, dict):
        raise UnsupportedSchemaError(f"unexpected schema node {node!r}", path=path)
    kind = node.get("type")
    logical = node.get("logicalType")
    if logical is not None:
        mapped = _logical(node, str(logical), path)
        if mapped is not None:
            return mapped
    if isinstance(kind, (dict, list)):
        return _build(kind, path)
    if kind in _PRIMITIVES:
        return _build(kind, path)
    if kind == "record" or kind == "error":
        return _record(node, path)
    if kind == "enum":
        return ColumnMapping(StringType(), False, None)
    if kind == "fixed":
        return ColumnMapping(BinaryType(), False, None)
    if kind == "array":
        item = _build(node["items"], path + "[]")
        conv = item.convert
        return ColumnMapping(ArrayType(item.data_type, item.nullable), False,
                           None if conv is None else (lambda v: [conv(x) for x in v]))
    if kind == "map":
        val = _build(node["values"], path + "{}")
        vconv = val.convert
        return ColumnMapping(MapType(StringType(), val.data_type, val.nullable), False,
                           None if vconv is None
                           else (lambda v: {k: vconv(x) for k, x in v.items()}))
    return _build(kind, path)  # a bare name: a recursive reference or an unknown type


def _record(node: dict[str, Any], path: str) -> ColumnMapping:
    fields: list[StructField] = []
    names: list[str] = []
    convs: list[Convert | None] = []
    for field in node.get("fields", []):
        name = field["name"]
        mapped = _build(field["type"], f"{path}.{name}")
        fields.append(StructField(name, mapped.data_type, mapped.nullable))
        names.append(name)
        convs.append(mapped.convert)
    pairs = tuple(zip(names, convs, strict=True))
    if all(c is None for c in convs):
        def plain(value: Any) -> Any:
            return tuple([value[n] for n in names])
        return ColumnMapping(StructType(fields), False, plain)

    def convert(value: Any) -> Any:
        # A converter sees None only for a nullable (union) type, whose converter keeps it.
        return tuple([value[n] if c is None else c(value[n]) for n, c in pairs])
    return ColumnMapping(StructType(fields), False, convert)


def _logical(node: dict[str, Any], logical: str, path: str) -> ColumnMapping | None:
    kind = node.get("type")
    if logical == "date" and kind == "int":
        return ColumnMapping(DateType(), False, None)
    if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
        return ColumnMapping(TimestampType(), False, None)
    if logical in ("local-timestamp-millis", "local-timestamp-micros") and kind == "long":
        return ColumnMapping(TimestampNTZType(), False, None)
    if logical == "uuid" and kind in ("string", "fixed"):
        return ColumnMapping(StringType(), False, str)
    if logical == "time-millis" and kind == "int":
        return ColumnMapping(IntegerType(), False, _time_millis)
    if logical == "time-micros" and kind == "long":
        return ColumnMapping(LongType(), False, _time_micros)
    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision = int(node.get("precision", 0))
        scale = int(node.get("scale", 0))
        if not 0 < precision <= _MAX_DECIMAL_PRECISION or not 0 <= scale <= precision:
            raise UnsupportedSchemaError(
                f"decimal({precision}, {scale}) has no Spark type (precision 1..38, "
                f"0 <= scale <= precision)", path=path)
        return ColumnMapping(DecimalType(precision, scale), False, None)
    return None  # unknown logical type (or on the wrong base type): use the base type


def _time_millis(value: Any) -> Any:
    if isinstance(value, datetime.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 \
            + value.microsecond // 1000
    return value


def _time_micros(value: Any) -> Any:
    if isinstance(value, datetime.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 \
            + value.microsecond
    return value


def _union(branches: list[Any], path: str) -> ColumnMapping:
    members = [b for b in branches if b != "null"]
    has_null = len(members) < len(branches)
    if not members:
        return ColumnMapping(NullType(), True, None)
    if len(members) == 1:
        only = _build(members[0], path)
        conv = only.convert
        if conv is None:
            return ColumnMapping(only.data_type, True, _unwrap)
        return ColumnMapping(only.data_type, True,
                           lambda v: None if v is None else conv(_unwrap(v)))
    kinds = {_kind(m) for m in members}
    if kinds == {"int", "long"}:
        return ColumnMapping(LongType(), has_null, None)
    if kinds == {"float", "double"}:
        return ColumnMapping(DoubleType(), has_null, _to_float)
    mapped = [_build(m, f"{path}.member{i}") for i, m in enumerate(members)]
    struct = StructType([StructField(f"member{i}", m.data_type, True)
                         for i, m in enumerate(mapped)])
    matchers = [_matcher(m) for m in members]
    names = [_full_name(m) for m in members]
    convs = [m.convert for m in mapped]
    width = len(members)

    def convert(value: Any) -> Any:
        if value is None:
            return None
        index = -1
        # fastavro's return_record_name form: (record full name, record)
        if type(value) is tuple and len(value) == 2 and value[0] in names:
            index = names.index(value[0])
            value = value[1]
        if index < 0:
            for i, matches in enumerate(matchers):
                if matches(value):
                    index = i
                    break
        if index < 0:
            raise SerializationError(
                f"{path}: a decoded {type(value).__name__} matches no branch of the union")
        out: list[Any] = [None] * width
        conv = convs[index]
        out[index] = value if conv is None else conv(value)
        return tuple(out)
    return ColumnMapping(struct, True, convert)


def _unwrap(value: Any) -> Any:
    if type(value) is tuple and len(value) == 2 and isinstance(value[0], str):
        return value[1]
    return value


def _to_float(value: Any) -> Any:
    return None if value is None else float(value)


def _kind(node: Any) -> str:
    if isinstance(node, str):
        return node
    if isinstance(node, dict):
        if "logicalType" in node:
            return f"{node.get('type')}:{node['logicalType']}"
        inner = node.get("type")
        return inner if isinstance(inner, str) else "complex"
    return "union"


def _full_name(node: Any) -> str | None:
    if isinstance(node, dict) and node.get("type") in ("record", "error", "enum", "fixed"):
        return str(node.get("name"))
    return None


def _matcher(node: Any) -> Callable[[Any], bool]:
    """Which Python values fastavro decodes from this branch (for non-record branches)."""
    kind = _kind(node)
    logical = kind.split(":", 1)[1] if ":" in kind else None
    base = kind.split(":", 1)[0]
    if logical == "date":
        return lambda v: isinstance(v, datetime.date) and not isinstance(v, datetime.datetime)
    if logical is not None and "timestamp" in logical:
        return lambda v: isinstance(v, datetime.datetime)
    if logical is not None and logical.startswith("time-"):
        return lambda v: isinstance(v, datetime.time)
    if logical == "decimal":
        return lambda v: isinstance(v, decimal.Decimal)
    if logical == "uuid":
        return lambda v: isinstance(v, (uuid.UUID, str))
    if base == "boolean":
        return lambda v: isinstance(v, bool)
    if base in ("int", "long"):
        return lambda v: isinstance(v, int) and not isinstance(v, bool)
    if base in ("float", "double"):
        return lambda v: isinstance(v, float)
    if base in ("string", "enum"):
        return lambda v: isinstance(v, str)
    if base in ("bytes", "fixed"):
        return lambda v: isinstance(v, (bytes, bytearray))
    if base == "array":
        return lambda v: isinstance(v, list)
    if base in ("map", "record", "error"):
        return lambda v: isinstance(v, dict)
    return lambda v: False


def avro_writer(schema: Any, named: Mapping[str, Any] | None = None,
                path: str = "value") -> Convert:
    """The converter from Spark row values (``Row``, ``bytearray``, naive timestamps, union
    structs) to values fastavro writes with ``schema``: the inverse of :func:`avro_mapping`.

    A record field missing from the Row is left out, so fastavro writes its default.

    Raises:
        UnsupportedSchemaError: as :func:`avro_mapping`.
    """
    from fastavro import parse_schema

    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except ValueError:
            schema = schema.strip()
    avro_mapping(schema, named, path)  # refuses what has no Spark type, with its path
    expanded = parse_schema(schema, named_schemas=dict(named or {}), expand=True)
    return _writer(expanded)


def _identity(value: Any) -> Any:
    return value


def _writer(node: Any) -> Convert:
    if isinstance(node, list):
        members = [b for b in node if b != "null"]
        if len(members) == 1:
            inner = _writer(members[0])
            return lambda v: None if v is None else inner(v)
        kinds = {_kind(m) for m in members}
        if kinds <= {"int", "long"} or kinds <= {"float", "double"}:
            return _identity
        convs = [_writer(m) for m in members]
        names = [_full_name(m) if _kind(m) in ("record", "error") else None for m in members]

        def union(value: Any) -> Any:
            if value is None:
                return None
            for i, member in enumerate(value):
                if member is not None:
                    out = convs[i](member)
                    # fastavro's tuple notation names the record branch to write
                    return out if names[i] is None else (names[i], out)
            return None
        return union
    if isinstance(node, str):
        return _to_bytes if node == "bytes" else _identity
    kind = node.get("type")
    logical = node.get("logicalType")
    if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
        return aware_utc
    if isinstance(kind, (dict, list)):
        return _writer(kind)
    if kind in ("bytes", "fixed") and logical not in ("decimal", "uuid"):
        return _to_bytes
    if kind in ("record", "error"):
        fields = [(f["name"], _writer(f["type"])) for f in node.get("fields", [])]

        def record(value: Any) -> Any:
            data = value.asDict() if hasattr(value, "asDict") else value
            return {name: conv(data[name]) for name, conv in fields if name in data}
        return record
    if kind == "array":
        item = _writer(node["items"])
        return lambda v: [item(x) for x in v]
    if kind == "map":
        val = _writer(node["values"])
        return lambda v: {k: val(x) for k, x in v.items()}
    return _identity


def _to_bytes(value: Any) -> Any:
    return bytes(value) if isinstance(value, (bytearray, memoryview)) else value
