"""Protobuf messages as Spark types, and decoded (dynamic) messages as Spark row values.

====================================  =================================================
Protobuf                              Spark
====================================  =================================================
message                               StructType (fields in declaration order)
int32, sint32, sfixed32               IntegerType
int64, sint64, sfixed64, uint32,      LongType
fixed32
uint64, fixed64                       DecimalType(20, 0) (exact above 2**63)
float / double / bool                 FloatType / DoubleType / BooleanType
string / bytes                        StringType / BinaryType
enum                                  StringType (the value's name)
repeated T                            ArrayType
map<K, V>                             MapType
====================================  =================================================

Every field is nullable: a message field, a ``oneof`` member or a proto3 ``optional``
field that is not set reads as null; other scalars read as their value (proto3 defaults
included). Well-known types are messages like any other (``Timestamp`` is
``struct<seconds:bigint,nanos:int>``). Recursive messages raise
:class:`~kontrakt.spark.UnsupportedSchemaError`.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from kontrakt.spark._types import AvroMapping, Convert, UnsupportedSchemaError

__all__ = ["proto_mapping"]

# FieldDescriptor.TYPE_* numbers (descriptor.proto), kept here so that mapping a type does
# not need the runtime's constants.
_SCALARS: dict[int, tuple[DataType, Convert | None]] = {
    1: (DoubleType(), None), 2: (FloatType(), None),
    3: (LongType(), None), 4: (DecimalType(20, 0), decimal.Decimal),  # int64, uint64
    5: (IntegerType(), None), 6: (DecimalType(20, 0), decimal.Decimal),  # int32, fixed64
    7: (LongType(), None), 8: (BooleanType(), None),  # fixed32, bool
    9: (StringType(), None), 12: (BinaryType(), None),  # string, bytes
    13: (LongType(), None), 15: (IntegerType(), None),  # uint32, sfixed32
    16: (LongType(), None), 17: (IntegerType(), None), 18: (LongType(), None),
}
_MESSAGE, _GROUP, _ENUM = 11, 10, 14
_REPEATED = 3


def proto_mapping(descriptor: Any, path: str = "value") -> AvroMapping:
    """The Spark type of a Protobuf message descriptor, and the converter from messages
    of that type (generated or dynamic) to Spark rows.

    Raises:
        UnsupportedSchemaError: a recursive message or an unknown field type.
    """
    return _message(descriptor, path, ())


def _repeated(field: Any) -> bool:
    # protobuf 6 replaced FieldDescriptor.label with is_repeated.
    flag = getattr(field, "is_repeated", None)
    return bool(flag) if flag is not None else field.label == _REPEATED


def _presence(field: Any) -> bool:
    has = getattr(field, "has_presence", None)
    if has is not None:
        return bool(has)
    return field.type in (_MESSAGE, _GROUP) or field.containing_oneof is not None


def _single(field: Any, path: str, stack: tuple[str, ...]) -> tuple[DataType, Convert | None]:
    if field.type in (_MESSAGE, _GROUP):
        m = _message(field.message_type, path, stack)
        return m.data_type, m.convert
    if field.type == _ENUM:
        names = {v.number: v.name for v in field.enum_type.values}
        return StringType(), lambda v: names.get(v, str(v))
    if field.type in _SCALARS:
        return _SCALARS[field.type]
    raise UnsupportedSchemaError(f"protobuf field type {field.type} has no Spark type",
                                 path=path)


def _message(desc: Any, path: str, stack: tuple[str, ...]) -> AvroMapping:
    if desc.full_name in stack:
        raise UnsupportedSchemaError(
            f"message {desc.full_name!r} contains itself; recursive messages have no Spark "
            f"type", path=path)
    stack = (*stack, desc.full_name)
    fields: list[StructField] = []
    # (field name, reads the whole message?, reader)
    readers: list[tuple[str, bool, Callable[[Any], Any]]] = []
    for f in desc.fields:
        where = f"{path}.{f.name}"
        entry = f.message_type if f.type == _MESSAGE else None
        repeated = _repeated(f)
        if repeated and entry is not None and entry.GetOptions().map_entry:
            ktype, kconv = _single(entry.fields_by_name["key"], where, stack)
            vtype, vconv = _single(entry.fields_by_name["value"], where, stack)
            fields.append(StructField(f.name, MapType(ktype, vtype, True), True))
            readers.append((f.name, False, _map_reader(kconv, vconv)))
        elif repeated:
            etype, econv = _single(f, where + "[]", stack)
            fields.append(StructField(f.name, ArrayType(etype, False), True))
            readers.append((f.name, False, _list_reader(econv)))
        else:
            dtype, conv = _single(f, where, stack)
            fields.append(StructField(f.name, dtype, True))
            readers.append((f.name, True, _field_reader(f.name, _presence(f), conv)))

    def convert(msg: Any) -> Any:
        if msg is None:
            return None
        known = msg.DESCRIPTOR.fields_by_name
        return tuple([None if name not in known  # written with a version without it
                      else read(msg) if whole else read(getattr(msg, name))
                      for name, whole, read in readers])
    return AvroMapping(StructType(fields), True, convert)


def _field_reader(name: str, presence: bool, conv: Convert | None) -> Callable[[Any], Any]:
    def read(msg: Any) -> Any:
        if presence and not msg.HasField(name):
            return None
        value = getattr(msg, name)
        return value if conv is None else conv(value)
    return read


def _list_reader(conv: Convert | None) -> Callable[[Any], Any]:
    if conv is None:
        return list
    return lambda value: [conv(x) for x in value]


def _map_reader(kconv: Convert | None, vconv: Convert | None) -> Callable[[Any], Any]:
    def read(value: Any) -> Any:
        return {(k if kconv is None else kconv(k)): (v if vconv is None else vconv(v))
                for k, v in value.items()}
    return read
