"""JSON Schemas derived from Spark types, for writes to a subject that has no schema yet.

The derivation is the inverse of :func:`~kontrakt.spark._json_types.json_mapping` (the read
side), so that a write followed by a read of the subject gives the column's type again
(nullability aside: a read makes every field, element and map value nullable, since a
document may leave a property out):

=====================  ============================================================
Spark                  JSON Schema (draft-07)
=====================  ============================================================
string                 ``string``
bigint                 ``integer``
double                 ``number``
boolean                ``boolean``
void                   ``null``
array                  ``array`` with ``items``
map<string, T>         ``object`` with only ``additionalProperties``
struct                 ``object`` with ``properties`` in field order; the non-nullable
                       fields are ``required``
=====================  ============================================================

Whatever may be null (a nullable field, the elements of an array that contains null, the
values of a map that does) has the type list ``[T, "null"]``: the read side drops the null
alternative, and validation accepts both the values and the nulls the writer produces (a
null field is left out of the document, a null element or map value is written as null).

JSON has fewer types than Spark, so the types that would read back as another one are
refused rather than widened silently: int, smallint and tinyint (they would read back as
bigint), float (as double), decimal, date, timestamps and binary (JSON has no such type),
maps with non-string keys (object keys are strings), a string with a collation, and a struct
without fields (an object without properties reads back as a map). The column itself is not
made nullable: a null key or value is written as a null record key or value, not as JSON
null. The top level names the draft (``$schema``) and nothing else.
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

__all__ = ["DRAFT_07", "derive_json_schema"]

DRAFT_07 = "http://json-schema.org/draft-07/schema#"

# By exact class: subclasses of these (if any) are not assumed to read back the same.
_PRIMITIVES: dict[type[DataType], str] = {
    NullType: "null", BooleanType: "boolean", LongType: "integer", DoubleType: "number",
    StringType: "string",
}

# Types with a plausible JSON encoding that the read side would give back as another type:
# the hint says what to cast the column to so the write and a later read agree.
_REFUSED: dict[type[DataType], str] = {
    IntegerType: "would be written as JSON integer and read back as bigint; cast it to bigint",
    ShortType: "would be written as JSON integer and read back as bigint; cast it to bigint",
    ByteType: "would be written as JSON integer and read back as bigint; cast it to bigint",
    FloatType: "would be written as JSON number and read back as double; cast it to double",
    DecimalType: "has no JSON Schema type (a JSON number reads back as double, losing "
                 "precision); cast it to double, or to string to keep every digit",
    DateType: "has no JSON Schema type (as text it would read back as string); cast it to "
              "string",
    TimestampType: "has no JSON Schema type (as text it would read back as string); cast it "
                   "to string",
    TimestampNTZType: "has no JSON Schema type (as text it would read back as string); cast "
                      "it to string",
    BinaryType: "has no JSON Schema type (JSON has no bytes); encode it as string, e.g. with "
                "base64()",
}


def derive_json_schema(data_type: DataType, path: str = "value") -> dict[str, Any]:
    """The JSON Schema (parsed JSON) a column of ``data_type`` is written with when its
    subject has none (see the module docstring for the mapping).

    Args:
        data_type: the column's Spark type.
        path: the column, for error messages.

    Raises:
        ConfigError: a type that would not read back as the same Spark type (int, decimal,
            date, a map with non-string keys, ...) or a struct the read side cannot give
            back; the message names the path (``value.lines[].qty``) and the type.
    """
    return {"$schema": DRAFT_07, **_derive(data_type, path)}


def _derive(data_type: DataType, path: str) -> dict[str, Any]:
    if isinstance(data_type, StringType) and data_type.collation != "UTF8_BINARY":
        # JSON strings carry no collation: it would read back as a plain string.
        raise ConfigError(f"{path}: {data_type.simpleString()} would read back as string; "
                          f"cast it to string")
    primitive = _PRIMITIVES.get(type(data_type))
    if primitive is not None:
        return {"type": primitive}
    if isinstance(data_type, ArrayType):
        items = _derive(data_type.elementType, path + "[]")
        return {"type": "array", "items": _nullable(items, data_type.containsNull)}
    if isinstance(data_type, MapType):
        if not isinstance(data_type.keyType, StringType):
            raise ConfigError(f"{path}: {data_type.simpleString()} has no JSON Schema type "
                              f"(JSON object keys are strings)")
        if data_type.keyType.collation != "UTF8_BINARY":
            raise ConfigError(f"{path}: {data_type.simpleString()} would read back with "
                              f"string keys; cast the keys to string")
        values = _derive(data_type.valueType, path + "{}")
        return {"type": "object",
                "additionalProperties": _nullable(values, data_type.valueContainsNull)}
    if isinstance(data_type, StructType):
        return _object(data_type, path)
    reason = _REFUSED.get(type(data_type))
    if reason is not None:
        raise ConfigError(f"{path}: {data_type.simpleString()} {reason}")
    raise ConfigError(f"{path}: Spark type {data_type.simpleString()} has no JSON Schema "
                      f"equivalent")


def _object(struct: StructType, path: str) -> dict[str, Any]:
    if not struct.fields:
        raise ConfigError(f"{path}: struct<> (a struct without fields) would read back as "
                          f"a map; add a field or leave the column out")
    properties: dict[str, Any] = {}
    required: list[str] = []
    for field in struct.fields:
        where = f"{path}.{field.name}"
        if field.name in properties:
            # A JSON object holds one value per name: the second field would be lost.
            raise ConfigError(f"{where}: the struct has two fields of this name")
        schema = _derive(field.dataType, where)
        # A void field is always null, which the writer leaves out: it cannot be required.
        nullable = field.nullable or schema["type"] == "null"
        properties[field.name] = _nullable(schema, nullable)
        if not nullable:
            required.append(field.name)
    derived: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        derived["required"] = required
    return derived


def _nullable(schema: dict[str, Any], nullable: bool) -> dict[str, Any]:
    # A type list rather than oneOf: one schema node, which the read side and every
    # validator take, and null first or last makes no difference to either.
    if not nullable or schema["type"] == "null":
        return schema
    return {**schema, "type": [schema["type"], "null"]}

