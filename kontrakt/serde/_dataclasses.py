"""Typed models: a dataclass as the schema source, and values that come back as it.

The Avro and JSON schemas are generated from the type hints — ``str``, ``int`` (Avro ``long``,
JSON ``integer``), ``float``, ``bool``, ``bytes``, ``Optional[X]``, ``list[X]``,
``dict[str, X]``, ``Enum`` subclasses, nested dataclasses, and the logical types ``datetime``
(timestamp-micros), ``date``, ``Decimal`` (precision/scale from ``field(metadata=...)``, default
38/9) and ``UUID``. Field defaults become schema defaults, so a v2 dataclass with a new
defaulted field reads v1 data. The converters are built once per class.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import decimal
import enum
import types
import typing
import uuid
from collections.abc import Callable
from typing import Any

__all__ = [
    "avro_schema_of",
    "from_dict_for",
    "json_schema_of",
    "schema_of",
    "to_dict_for",
]

Conv = Callable[[Any], Any]
_NONE_TYPE = type(None)


def _check(cls: Any) -> None:
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"{cls!r} is not a dataclass type")


def _unwrap_optional(tp: Any) -> tuple[bool, Any]:
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(tp) if a is not _NONE_TYPE]
        if len(args) != len(typing.get_args(tp)):
            if len(args) != 1:
                raise TypeError(f"only Optional[X] unions are supported, got {tp!r}")
            return True, args[0]
        raise TypeError(f"only Optional[X] unions are supported, got {tp!r}")
    return False, tp


def _fields(cls: Any) -> list[tuple[str, Any, dataclasses.Field[Any]]]:
    hints = typing.get_type_hints(cls)
    return [(f.name, hints[f.name], f) for f in dataclasses.fields(cls) if f.init]


def _default(f: dataclasses.Field[Any]) -> tuple[bool, Any]:
    if f.default is not dataclasses.MISSING:
        return True, f.default
    if f.default_factory is not dataclasses.MISSING:
        return True, f.default_factory()
    return False, None


def _namespace(cls: Any) -> str | None:
    ns = getattr(cls, "__avro_namespace__", None)
    return ns if isinstance(ns, str) else None


# ------------------------------------------------------------------ Avro schema generation
def avro_schema_of(cls: Any) -> dict[str, Any]:
    """The Avro record schema of a dataclass.

    The record is named after the class, or ``__avro_name__`` when the class sets it (so two
    versions of a model can be different Python classes); the namespace comes from
    ``__avro_namespace__``.

    Raises:
        TypeError: a field type that has no Avro mapping.
    """
    _check(cls)
    out: dict[str, Any] = _avro_record(cls, set())
    return out


def _avro_default(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, (list, dict, str, int, float, bool)) or value is None:
        return value
    raise TypeError("unsupported default")


def _record_name(cls: Any) -> str:
    name = getattr(cls, "__avro_name__", None)
    return name if isinstance(name, str) else str(cls.__name__)


def _avro_record(cls: Any, seen: set[Any]) -> Any:
    name = _record_name(cls)
    ns = _namespace(cls)
    full = f"{ns}.{name}" if ns else name
    if cls in seen:
        return full
    seen.add(cls)
    fields = []
    for fname, tp, f in _fields(cls):
        entry: dict[str, Any] = {"name": fname, "type": _avro_type(tp, f, seen)}
        has, value = _default(f)
        if has:
            try:
                entry["default"] = _avro_default(value)
            except TypeError:
                pass  # a default with no JSON form stays a Python-side default only
        fields.append(entry)
    out: dict[str, Any] = {"type": "record", "name": name}
    if ns:
        out["namespace"] = ns
    if cls.__doc__ and not cls.__doc__.startswith(cls.__name__ + "("):
        out["doc"] = cls.__doc__.strip()
    out["fields"] = fields
    return out


def _avro_type(tp: Any, f: dataclasses.Field[Any] | None, seen: set[Any]) -> Any:
    optional, tp = _unwrap_optional(tp)
    if optional:
        return ["null", _avro_type(tp, f, seen)]
    origin = typing.get_origin(tp)
    if tp is str:
        return "string"
    if tp is bool:
        return "boolean"
    if tp is int:
        return "long"
    if tp is float:
        return "double"
    if tp is bytes:
        return "bytes"
    if tp is dt.datetime:
        return {"type": "long", "logicalType": "timestamp-micros"}
    if tp is dt.date:
        return {"type": "int", "logicalType": "date"}
    if tp is uuid.UUID:
        return {"type": "string", "logicalType": "uuid"}
    if tp is decimal.Decimal:
        meta = f.metadata if f is not None else {}
        return {"type": "bytes", "logicalType": "decimal",
                "precision": int(meta.get("precision", 38)), "scale": int(meta.get("scale", 9))}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        ns = _namespace(tp)
        full = f"{ns}.{tp.__name__}" if ns else tp.__name__
        if tp in seen:
            return full
        seen.add(tp)
        out: dict[str, Any] = {"type": "enum", "name": tp.__name__,
                               "symbols": [m.name for m in tp]}
        if ns:
            out["namespace"] = ns
        return out
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _avro_record(tp, seen)
    if origin in (list, _seq()):
        (item,) = typing.get_args(tp) or (Any,)
        return {"type": "array", "items": _avro_type(item, None, seen)}
    if origin in (dict, _map()):
        key, value = typing.get_args(tp)
        if key is not str:
            raise TypeError(f"Avro maps need str keys, got {key!r}")
        return {"type": "map", "values": _avro_type(value, None, seen)}
    raise TypeError(f"no Avro type for {tp!r}")


def _seq() -> Any:
    import collections.abc as cabc
    return cabc.Sequence


def _map() -> Any:
    import collections.abc as cabc
    return cabc.Mapping


# ------------------------------------------------------------------ converters
def _conv_pair(tp: Any, f: dataclasses.Field[Any] | None, fmt: str) -> tuple[Conv | None,
                                                                             Conv | None]:
    """(to wire, from wire) converters for a type; ``None`` means identity."""
    optional, tp = _unwrap_optional(tp)
    if optional:
        to, back = _conv_pair(tp, f, fmt)
        return (None if to is None else (lambda x, c=to: None if x is None else c(x)),
                None if back is None else (lambda x, c=back: None if x is None else c(x)))
    origin = typing.get_origin(tp)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        if fmt == "avro":
            return (lambda x: x.name), (lambda x, e=tp: e[x])
        return (lambda x: x.value), (lambda x, e=tp: e(x))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _record_to(tp, fmt), _record_from(tp, fmt)
    if origin in (list, _seq()):
        (item,) = typing.get_args(tp) or (Any,)
        to, back = _conv_pair(item, None, fmt)
        return (None if to is None else (lambda x, c=to: [c(i) for i in x]),
                None if back is None else (lambda x, c=back: [c(i) for i in x]))
    if origin in (dict, _map()):
        _, value = typing.get_args(tp)
        to, back = _conv_pair(value, None, fmt)
        return (None if to is None else (lambda x, c=to: {k: c(v) for k, v in x.items()}),
                None if back is None else (lambda x, c=back: {k: c(v) for k, v in x.items()}))
    if fmt == "avro":
        if tp is decimal.Decimal:
            scale = int((f.metadata if f is not None else {}).get("scale", 9))
            quantum = decimal.Decimal(1).scaleb(-scale)
            return (lambda x: decimal.Decimal(x).quantize(quantum)), None
        return None, None  # fastavro handles datetime, date, UUID and primitives
    # JSON: logical types travel as strings.
    if tp is dt.datetime:
        return (lambda x: x.isoformat()), dt.datetime.fromisoformat
    if tp is dt.date:
        return (lambda x: x.isoformat()), dt.date.fromisoformat
    if tp is decimal.Decimal:
        return str, decimal.Decimal
    if tp is uuid.UUID:
        return str, uuid.UUID
    if tp is bytes:
        return ((lambda x: base64.b64encode(x).decode("ascii")),
                (lambda x: base64.b64decode(x)))
    return None, None


_TO_CACHE: dict[tuple[Any, str], Conv] = {}
_FROM_CACHE: dict[tuple[Any, str], Conv] = {}


def _record_to(cls: Any, fmt: str) -> Conv:
    key = (cls, fmt)
    hit = _TO_CACHE.get(key)
    if hit is not None:
        return hit
    plan: list[tuple[str, Conv | None]] = []

    def to(obj: Any) -> Any:
        if isinstance(obj, dict):
            return obj
        return {name: (getattr(obj, name) if c is None else c(getattr(obj, name)))
                for name, c in plan}
    _TO_CACHE[key] = to  # before recursing: self-referencing dataclasses terminate
    plan.extend((name, _conv_pair(tp, f, fmt)[0]) for name, tp, f in _fields(cls))
    return to


def _record_from(cls: Any, fmt: str) -> Conv:
    key = (cls, fmt)
    hit = _FROM_CACHE.get(key)
    if hit is not None:
        return hit
    plan: list[tuple[str, Conv | None]] = []

    def back(data: Any) -> Any:
        kwargs = {}
        for name, c in plan:
            if name in data:
                value = data[name]
                kwargs[name] = value if c is None else c(value)
        return cls(**kwargs)
    _FROM_CACHE[key] = back
    plan.extend((name, _conv_pair(tp, f, fmt)[1]) for name, tp, f in _fields(cls))
    return back


def schema_of(cls: Any, fmt: str) -> dict[str, Any]:
    """:func:`avro_schema_of` (``fmt="avro"``) or :func:`json_schema_of` (``"json"``).

    Raises:
        TypeError: not a dataclass, or a field type has no mapping.
        ValueError: an unknown ``fmt``.
    """
    if fmt == "avro":
        return avro_schema_of(cls)
    if fmt == "json":
        return json_schema_of(cls)
    raise ValueError(f"unknown dataclass schema format {fmt!r}")


def to_dict_for(cls: Any, fmt: str) -> Callable[[Any, Any], Any]:
    """``to_dict`` for a serializer: dataclass instance → the dict the codec writes.

    Args:
        cls: the dataclass.
        fmt: ``"avro"`` (the dict fastavro writes) or ``"json"`` (a JSON-ready dict).

    Raises:
        TypeError: ``cls`` is not a dataclass, or a field type has no mapping.
    """
    _check(cls)
    to = _record_to(cls, fmt)
    return lambda obj, ctx: to(obj)


def from_dict_for(cls: Any, fmt: str) -> Callable[[Any, Any], Any]:
    """``from_dict`` for a deserializer: decoded dict (``"avro"`` or ``"json"``) → instance.

    Raises:
        TypeError: ``cls`` is not a dataclass, or a field type has no mapping.
    """
    _check(cls)
    back = _record_from(cls, fmt)
    return lambda data, ctx: back(data)


# ------------------------------------------------------------------ JSON Schema generation
def json_schema_of(cls: Any) -> dict[str, Any]:
    """The JSON Schema (draft 7) of a dataclass; nested dataclasses go to ``definitions``.

    Raises:
        TypeError: a field type that has no JSON Schema mapping.
    """
    _check(cls)
    definitions: dict[str, Any] = {}
    root = _json_object(cls, definitions, root=True)
    out: dict[str, Any] = {"$schema": "http://json-schema.org/draft-07/schema#",
                           "title": _record_name(cls), **root}
    if definitions:
        out["definitions"] = definitions
    return out


def _json_object(cls: Any, definitions: dict[str, Any], root: bool = False) -> dict[str, Any]:
    props: dict[str, Any] = {}
    required: list[str] = []
    for fname, tp, f in _fields(cls):
        prop = _json_type(tp, f, definitions)
        has, value = _default(f)
        if has:
            try:
                prop = {**prop, "default": value.value if isinstance(value, enum.Enum)
                        else _avro_default(value)}
            except TypeError:
                pass
        else:
            required.append(fname)
        props[fname] = prop
    out: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        out["required"] = required
    return out


def _json_type(tp: Any, f: dataclasses.Field[Any] | None,
               definitions: dict[str, Any]) -> dict[str, Any]:
    optional, tp = _unwrap_optional(tp)
    if optional:
        return {"anyOf": [{"type": "null"}, _json_type(tp, f, definitions)]}
    origin = typing.get_origin(tp)
    simple = {str: "string", bool: "boolean", int: "integer", float: "number"}
    if tp in simple:
        return {"type": simple[tp]}
    if tp is bytes:
        return {"type": "string", "contentEncoding": "base64"}
    if tp is dt.datetime:
        return {"type": "string", "format": "date-time"}
    if tp is dt.date:
        return {"type": "string", "format": "date"}
    if tp is uuid.UUID:
        return {"type": "string", "format": "uuid"}
    if tp is decimal.Decimal:
        return {"type": "string", "pattern": r"^-?[0-9]+(\.[0-9]+)?$"}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": [m.value for m in tp]}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if tp.__name__ not in definitions:
            definitions[tp.__name__] = {}  # placeholder first: recursive types terminate
            definitions[tp.__name__] = _json_object(tp, definitions)
        return {"$ref": f"#/definitions/{tp.__name__}"}
    if origin in (list, _seq()):
        (item,) = typing.get_args(tp) or (Any,)
        return {"type": "array", "items": _json_type(item, None, definitions)}
    if origin in (dict, _map()):
        key, value = typing.get_args(tp)
        if key is not str:
            raise TypeError(f"JSON objects need str keys, got {key!r}")
        return {"type": "object", "additionalProperties": _json_type(value, None, definitions)}
    raise TypeError(f"no JSON Schema type for {tp!r}")
