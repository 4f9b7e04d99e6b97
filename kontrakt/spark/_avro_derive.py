"""Avro schemas derived from Spark types, for writes to a subject that has no schema yet.

The type correspondence follows Spark's documented ``to_avro`` mapping, narrowed to what
:func:`~kontrakt.spark._types.avro_mapping` (the read side) maps back to the same Spark type,
so that a write followed by a read of the subject gives the column's type again:

=====================  ============================================================
Spark                  Avro
=====================  ============================================================
string, binary         ``string``, ``bytes``
boolean, int, bigint   ``boolean``, ``int``, ``long``
float, double          ``float``, ``double``
date                   ``int`` with logical type ``date``
timestamp              ``long`` with ``timestamp-micros``
timestamp_ntz          ``long`` with ``local-timestamp-micros``
decimal(p, s)          ``bytes`` with ``decimal``, precision p, scale s
void                   ``null``
array                  ``array``
map<string, T>         ``map``
struct                 ``record``
=====================  ============================================================

Where this differs from Spark's: a nullable field is ``["null", T]`` with default null
(Spark puts null last and gives no default; null first lets the field have a default, so
later schema versions can drop or add such fields compatibly), and a decimal is ``bytes``
rather than ``fixed`` (no extra named type). tinyint and smallint, which Spark writes as
``int``, are refused: they would read back as int; so is a string with a collation.

Records are named as Spark names them: the top record from ``<field>.avro.recordName`` /
``<field>.avro.namespace`` (default ``topLevelRecord``, no namespace); a nested struct is
a record named after its field, in a namespace made of the enclosing record's full name
(array elements and map values take the field's name too). Full names follow the path, so
they never collide.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from kontrakt.errors import ConfigError
from kontrakt.spark._options import AVRO_NAME, DEFAULT_RECORD_NAME

__all__ = ["derive_avro_schema"]

# By exact class: subclasses of these (if any) are not assumed to read back the same.
_PRIMITIVES: dict[type[DataType], str] = {
    NullType: "null", BooleanType: "boolean", IntegerType: "int", LongType: "long",
    FloatType: "float", DoubleType: "double", BinaryType: "bytes", StringType: "string",
}


def derive_avro_schema(data_type: DataType, path: str = "value", *,
                       record_name: str = DEFAULT_RECORD_NAME, namespace: str = "") -> Any:
    """The Avro schema (parsed JSON) a column of ``data_type`` is written with when its
    subject has none (see the module docstring for the mapping and the record names).

    Args:
        data_type: the column's Spark type; the column itself is not made nullable (a null
            key or value is written as a null record key or value, not as Avro null).
        path: the column, for error messages.
        record_name, namespace: the name and namespace of a struct column's record.

    Raises:
        ConfigError: a type without an Avro equivalent that reads back as the same Spark
            type (a map with non-string keys, intervals, tinyint, ...) or a field name that
            Avro does not allow; the message names the path (``value.lines[].qty``).
    """
    return _derive(data_type, path, record_name, namespace)


def _derive(data_type: DataType, path: str, name: str, namespace: str) -> Any:
    if isinstance(data_type, StringType) and data_type.collation != "UTF8_BINARY":
        # Avro strings carry no collation: it would read back as a plain string.
        raise ConfigError(f"{path}: {data_type.simpleString()} would read back as string; "
                          f"cast it to string")
    primitive = _PRIMITIVES.get(type(data_type))
    if primitive is not None:
        return primitive
    if isinstance(data_type, DateType):
        return {"type": "int", "logicalType": "date"}
    if isinstance(data_type, TimestampType):
        return {"type": "long", "logicalType": "timestamp-micros"}
    if isinstance(data_type, TimestampNTZType):
        return {"type": "long", "logicalType": "local-timestamp-micros"}
    if isinstance(data_type, DecimalType):
        return {"type": "bytes", "logicalType": "decimal",
                "precision": data_type.precision, "scale": data_type.scale}
    if isinstance(data_type, ArrayType):
        items = _derive(data_type.elementType, path + "[]", name, namespace)
        return {"type": "array", "items": _nullable(items, data_type.containsNull)}
    if isinstance(data_type, MapType):
        if not isinstance(data_type.keyType, StringType):
            raise ConfigError(f"{path}: {data_type.simpleString()} has no Avro type (Avro "
                              f"map keys are strings)")
        values = _derive(data_type.valueType, path + "{}", name, namespace)
        return {"type": "map", "values": _nullable(values, data_type.valueContainsNull)}
    if isinstance(data_type, StructType):
        return _record(data_type, path, name, namespace)
    if isinstance(data_type, (ByteType, ShortType)):
        raise ConfigError(f"{path}: {data_type.simpleString()} would be written as Avro int "
                          f"and read back as int; cast it to int")
    raise ConfigError(f"{path}: Spark type {data_type.simpleString()} has no Avro "
                      f"equivalent")


def _record(struct: StructType, path: str, name: str, namespace: str) -> Any:
    if not AVRO_NAME.fullmatch(name):
        raise ConfigError(f"{path}: {name!r} is not an Avro record name "
                          f"([A-Za-z_][A-Za-z0-9_]*); rename the field")
    inner = f"{namespace}.{name}" if namespace else name
    fields: list[dict[str, Any]] = []
    seen: set[str] = set()
    for field in struct.fields:
        where = f"{path}.{field.name}"
        if not AVRO_NAME.fullmatch(field.name):
            raise ConfigError(f"{where}: {field.name!r} is not an Avro field name "
                              f"([A-Za-z_][A-Za-z0-9_]*); rename the field")
        if field.name in seen:
            raise ConfigError(f"{where}: the struct has two fields of this name")
        seen.add(field.name)
        avro = _derive(field.dataType, where, field.name, inner)
        if field.nullable or avro == "null":
            # null first: Avro takes a union's default from its first branch
            fields.append({"name": field.name, "type": _nullable(avro, True),
                           "default": None})
        else:
            fields.append({"name": field.name, "type": avro})
    record: dict[str, Any] = {"type": "record", "name": name}
    if namespace:
        record["namespace"] = namespace
    record["fields"] = fields
    return record


def _nullable(avro: Any, nullable: bool) -> Any:
    return ["null", avro] if nullable and avro != "null" else avro

