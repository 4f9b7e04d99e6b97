"""Protobuf messages as Spark types, decoded (dynamic) messages as Spark row values
(:func:`proto_mapping`), and Spark row values as messages to write (:func:`proto_writer`).

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
google.protobuf.Timestamp             TimestampType (a UTC ``datetime``; microseconds)
google.protobuf.Duration              DayTimeIntervalType(DAY, SECOND) (a ``timedelta``;
                                      microseconds)
repeated T                            ArrayType
map<K, V>                             MapType
====================================  =================================================

Every field is nullable: a message field, a ``oneof`` member or a proto3 ``optional``
field that is not set reads as null; other scalars read as their value (proto3 defaults
included). ``Timestamp`` and ``Duration`` are recognised by their full names and map as
Spark's own ``from_protobuf`` maps them; Spark holds microseconds, so the nanoseconds below
a microsecond are dropped (towards the past for a ``Timestamp``, towards zero for a
``Duration``). Other well-known types are messages like any other. Recursive messages raise
:class:`~kontrakt.spark.UnsupportedSchemaError`.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
from collections.abc import Callable
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DayTimeIntervalType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kontrakt.spark._mapping import ColumnMapping, Convert, UnsupportedSchemaError, aware_utc

__all__ = ["proto_mapping", "proto_writer"]

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

Fill = Callable[[Any, Any], None]  # (message, Spark value): sets the message's fields


def proto_mapping(descriptor: Any, path: str = "value") -> ColumnMapping:
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


def _message(desc: Any, path: str, stack: tuple[str, ...]) -> ColumnMapping:
    known = _WELL_KNOWN.get(desc.full_name)
    if known is not None:
        return ColumnMapping(known.data_type, True, known.reader(path))
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
    return ColumnMapping(StructType(fields), True, convert)


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


def proto_writer(descriptor: Any, path: str = "value") -> Convert:
    """The converter from Spark values of :func:`proto_mapping`'s type to messages of the
    descriptor's class (``message_factory.GetMessageClass(descriptor)``): the inverse of
    its converter.

    A null field is left unset (so a message, ``oneof`` member or ``optional`` field reads
    back as null, and another scalar as its default); enums are given by value name (or by
    number, as a read gives an unknown one); ``uint64`` / ``fixed64`` come as Decimals.
    A ``Timestamp`` comes as a ``datetime``: an aware one is exact, and a naive one is read
    in the local time zone of the Python worker, which is how PySpark hands a
    ``TimestampType`` value to a data source (so UTC when the worker runs in UTC). A
    ``Duration`` comes as a ``timedelta``.
    A value that does not fit its field (an unknown enum name, a null element of an array
    or value of a map, two members of one ``oneof``, a value of the wrong Python type, a
    time outside the range ``Timestamp`` or ``Duration`` allows) raises ``ValueError``
    naming the field.

    Raises:
        UnsupportedSchemaError: as :func:`proto_mapping`.
    """
    from google.protobuf.message_factory import GetMessageClass

    proto_mapping(descriptor, path)  # refuses what has no Spark type, with its path
    cls = GetMessageClass(descriptor)
    fill = _filler(descriptor, path)

    def convert(value: Any) -> Any:
        if value is None:
            return None
        msg = cls()
        fill(msg, value)
        return msg
    return convert


class _FieldError(ValueError):
    """A value that does not fit its field; the message starts with the field's path."""


def _filler(desc: Any, path: str) -> Fill:
    """Sets a message's fields from a Row (or a dict) of :func:`proto_mapping`'s type."""
    known = _WELL_KNOWN.get(desc.full_name)
    if known is not None:
        return known.filler(path)
    setters: list[tuple[str, str, str | None, Fill]] = []  # name, path, oneof, setter
    for f in desc.fields:
        where = f"{path}.{f.name}"
        entry = f.message_type if f.type == _MESSAGE else None
        oneof = f.containing_oneof
        if _repeated(f) and entry is not None and entry.GetOptions().map_entry:
            setter = _map_setter(f.name, entry, where)
        elif _repeated(f):
            setter = _list_setter(f, where)
        elif f.type in (_MESSAGE, _GROUP):
            setter = _message_setter(f.name, _filler(f.message_type, where))
        else:
            setter = _scalar_setter(f.name, _scalar_writer(f, where))
        setters.append((f.name, where, None if oneof is None else oneof.name, setter))

    def fill(msg: Any, value: Any) -> None:
        data = value.asDict() if hasattr(value, "asDict") else value
        chosen: dict[str, str] = {}
        for name, where, oneof, setter in setters:
            item = data.get(name)
            if item is None:
                continue
            if oneof is not None:
                # Protobuf would keep the last member set and drop the others silently.
                if oneof in chosen:
                    raise _FieldError(f"{where}: oneof {oneof!r} has {chosen[oneof]!r} set "
                                      f"already; set at most one of its fields")
                chosen[oneof] = name
            try:
                setter(msg, item)
            except _FieldError:
                raise
            except (TypeError, ValueError) as exc:
                raise _FieldError(f"{where}: {exc}") from exc
    return fill


def _scalar_writer(field: Any, path: str) -> Convert:
    if field.type == _ENUM:
        numbers = {v.name: v.number for v in field.enum_type.values}

        def enum(value: Any) -> Any:
            number = numbers.get(value)
            if number is not None:
                return number
            try:
                return int(value)  # a number a read could not name
            except ValueError:
                raise _FieldError(f"{path}: {value!r} is not a value of enum "
                                  f"{field.enum_type.full_name}") from None
        return enum
    if _SCALARS[field.type][1] is decimal.Decimal:
        return int  # uint64 / fixed64: a Decimal of scale 0
    if field.type == 12:  # bytes: PySpark hands binary over as bytearray
        return bytes
    return _identity


def _identity(value: Any) -> Any:
    return value


def _scalar_setter(name: str, conv: Convert) -> Fill:
    def put(msg: Any, value: Any) -> None:
        setattr(msg, name, conv(value))
    return put


def _message_setter(name: str, fill: Fill) -> Fill:
    def put(msg: Any, value: Any) -> None:
        sub = getattr(msg, name)
        sub.SetInParent()  # an empty struct still sets the field
        fill(sub, value)
    return put


def _list_setter(field: Any, path: str) -> Fill:
    name = field.name
    if field.type in (_MESSAGE, _GROUP):
        fill = _filler(field.message_type, path + "[]")

        def put_messages(msg: Any, value: Any) -> None:
            container = getattr(msg, name)
            for item in value:
                _not_null(item, path, "an array element")
                fill(container.add(), item)
        return put_messages
    conv = _scalar_writer(field, path + "[]")

    def put(msg: Any, value: Any) -> None:
        container = getattr(msg, name)
        for item in value:
            _not_null(item, path, "an array element")
            container.append(conv(item))
    return put


def _map_setter(name: str, entry: Any, path: str) -> Fill:
    kconv = _scalar_writer(entry.fields_by_name["key"], path)
    value_field = entry.fields_by_name["value"]
    if value_field.type in (_MESSAGE, _GROUP):
        fill = _filler(value_field.message_type, path + "{}")

        def put_messages(msg: Any, value: Any) -> None:
            container = getattr(msg, name)
            for k, v in value.items():
                _not_null(v, path, f"the map value for key {k!r}")
                fill(container[kconv(k)], v)
        return put_messages
    vconv = _scalar_writer(value_field, path + "{}")

    def put(msg: Any, value: Any) -> None:
        container = getattr(msg, name)
        for k, v in value.items():
            _not_null(v, path, f"the map value for key {k!r}")
            container[kconv(k)] = vconv(v)
    return put


def _not_null(value: Any, path: str, what: str) -> None:
    if value is None:
        raise _FieldError(f"{path}: {what} is null, which protobuf cannot hold")


# --- google.protobuf.Timestamp and Duration --------------------------------------------

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_MICROSECOND = datetime.timedelta(microseconds=1)
# The seconds timestamp.proto and duration.proto allow: 0001-01-01T00:00:00Z up to the end
# of 9999-12-31 (Python's datetime range too), and about 10,000 years either way.
_TIMESTAMP_SECONDS = range(-62_135_596_800, 253_402_300_800)
_DURATION_SECONDS = range(-315_576_000_000, 315_576_000_001)


def _check_seconds(seconds: int, allowed: range, what: str, path: str) -> None:
    if seconds not in allowed:
        raise _FieldError(f"{path}: {seconds} seconds is outside the range of a "
                          f"google.protobuf.{what} ({allowed.start} to {allowed.stop - 1})")


def _timestamp_reader(path: str) -> Convert:
    def read(msg: Any) -> datetime.datetime:
        _check_seconds(msg.seconds, _TIMESTAMP_SECONDS, "Timestamp", path)
        # nanos is in [0, 10**9) in a valid Timestamp: flooring moves towards the past.
        return _EPOCH + datetime.timedelta(seconds=msg.seconds, microseconds=msg.nanos // 1000)
    return read


def _duration_reader(path: str) -> Convert:
    def read(msg: Any) -> datetime.timedelta:
        _check_seconds(msg.seconds, _DURATION_SECONDS, "Duration", path)
        # seconds and nanos share their sign in a valid Duration: truncate towards zero, so
        # that -1.5000009 s reads as -1.500000 s and not -1.500001 s.
        micros = abs(msg.nanos) // 1000
        return datetime.timedelta(seconds=msg.seconds,
                                  microseconds=micros if msg.nanos >= 0 else -micros)
    return read


def _expect(value: Any, kind: type, what: str, path: str) -> None:
    if not isinstance(value, kind):
        raise _FieldError(f"{path}: a google.protobuf.{what} needs a {kind.__module__}."
                          f"{kind.__qualname__}, got {type(value).__name__} {value!r}")


def _timestamp_filler(path: str) -> Fill:
    def fill(msg: Any, value: Any) -> None:
        _expect(value, datetime.datetime, "Timestamp", path)
        try:
            micros = (aware_utc(value) - _EPOCH) // _MICROSECOND
        except OverflowError:  # a naive datetime near year 1 or 9999 in the local zone
            raise _FieldError(f"{path}: {value!r} is outside the range of a "
                              f"google.protobuf.Timestamp") from None
        seconds, micros = divmod(micros, 1_000_000)  # nanos >= 0, also before 1970
        _check_seconds(seconds, _TIMESTAMP_SECONDS, "Timestamp", path)
        msg.seconds, msg.nanos = seconds, micros * 1000
    return fill


def _duration_filler(path: str) -> Fill:
    def fill(msg: Any, value: Any) -> None:
        _expect(value, datetime.timedelta, "Duration", path)
        micros = value // _MICROSECOND
        # seconds and nanos must share their sign: split the magnitude.
        seconds, rest = divmod(abs(micros), 1_000_000)
        if micros < 0:
            seconds, rest = -seconds, -rest
        _check_seconds(seconds, _DURATION_SECONDS, "Duration", path)
        msg.seconds, msg.nanos = seconds, rest * 1000
    return fill


@dataclasses.dataclass(frozen=True, slots=True)
class _WellKnown:
    """A well-known message type with a Spark type of its own; reader and filler are made
    for a field path."""

    data_type: DataType
    reader: Callable[[str], Convert]
    filler: Callable[[str], Fill]


# By full name, not by shape: a message of one's own with seconds and nanos stays a struct.
_WELL_KNOWN = {
    "google.protobuf.Timestamp": _WellKnown(TimestampType(), _timestamp_reader,
                                            _timestamp_filler),
    "google.protobuf.Duration": _WellKnown(
        DayTimeIntervalType(DayTimeIntervalType.DAY, DayTimeIntervalType.SECOND),
        _duration_reader, _duration_filler),
}
