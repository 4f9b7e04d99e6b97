"""Protobuf typed models: a dataclass as the message definition.

From the type hints a ``.proto`` file is generated (as text, which every registry accepts)
together with the matching ``FileDescriptorProto``, so no ``protoc`` run is needed; the
message class comes from a private descriptor pool. Fields are numbered in declaration order.

Mapping: ``str`` string, ``int`` int64, ``float`` double, ``bool`` bool, ``bytes`` bytes,
``Optional[scalar]`` proto3 ``optional``, ``Optional[dataclass]`` a message field (presence
is built in), ``list[X]`` repeated, ``dict[str, X]`` map, ``Enum`` a proto enum whose zero
value is ``<ENUM>_UNSPECIFIED`` (members follow from 1, in order, read back by name),
``datetime`` ``google.protobuf.Timestamp`` (UTC), ``date``/``Decimal``/``UUID`` strings.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kontrakt.serde._dataclasses import _fields, _map, _seq, _unwrap_optional

__all__ = ["ProtoModel", "proto_model"]

_SCALARS: dict[Any, tuple[str, int]] = {  # python type -> (proto name, FieldDescriptorProto type)
    str: ("string", 9), int: ("int64", 3), float: ("double", 1), bool: ("bool", 8),
    bytes: ("bytes", 12), dt.date: ("string", 9), decimal.Decimal: ("string", 9),
    uuid.UUID: ("string", 9),
}
_LABEL_OPTIONAL, _LABEL_REPEATED = 1, 3
_TYPE_MESSAGE, _TYPE_ENUM = 11, 14


@dataclass(frozen=True)
class ProtoModel:
    """A dataclass's Protobuf form.

    Attributes:
        proto_text: the ``.proto`` file (registered with the registry).
        file_name: its file name.
        full_name: the root message's full name (the record name for subject strategies).
        message_class: the dynamic message class of the root dataclass.
        indexes: the root message's index path in the file.
        to_message: dataclass instance -> message.
        from_message: message -> dataclass instance.
    """

    proto_text: str
    file_name: str
    full_name: str
    message_class: Any
    indexes: tuple[int, ...]
    to_message: Callable[[Any], Any]
    from_message: Callable[[Any], Any]


def _upper(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()


class _Builder:
    def __init__(self, package: str) -> None:
        from google.protobuf import descriptor_pb2

        self.pb2 = descriptor_pb2
        self.package = package
        self.fdp = descriptor_pb2.FileDescriptorProto(syntax="proto3")
        self.text: list[str] = []
        self.done: set[Any] = set()
        self.uses_timestamp = False

    def qualified(self, name: str) -> str:
        return f".{self.package}.{name}" if self.package else f".{name}"

    def enum(self, tp: Any) -> str:
        if tp not in self.done:
            self.done.add(tp)
            prefix = _upper(tp.__name__)
            e = self.fdp.enum_type.add(name=tp.__name__)
            e.value.add(name=f"{prefix}_UNSPECIFIED", number=0)
            lines = [f"enum {tp.__name__} {{", f"  {prefix}_UNSPECIFIED = 0;"]
            for i, member in enumerate(tp, start=1):
                e.value.add(name=f"{prefix}_{member.name.upper()}", number=i)
                lines.append(f"  {prefix}_{member.name.upper()} = {i};")
            self.text.append("\n".join([*lines, "}"]))
        return str(tp.__name__)

    def message(self, cls: Any) -> str:
        if cls in self.done:
            return str(cls.__name__)
        self.done.add(cls)
        msg = self.pb2.DescriptorProto(name=cls.__name__)
        lines = [f"message {cls.__name__} {{"]
        for number, (fname, tp, _) in enumerate(_fields(cls), start=1):
            lines.append("  " + self._field(msg, fname, tp, number))
        self.fdp.message_type.append(msg)
        self.text.append("\n".join([*lines, "}"]))
        return str(cls.__name__)

    def _type(self, tp: Any) -> tuple[str, int, str | None]:
        """(text type, descriptor type, descriptor type_name) of a non-container type."""
        if tp in _SCALARS:
            name, code = _SCALARS[tp]
            return name, code, None
        if tp is dt.datetime:
            self.uses_timestamp = True
            return "google.protobuf.Timestamp", _TYPE_MESSAGE, ".google.protobuf.Timestamp"
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            name = self.enum(tp)
            return name, _TYPE_ENUM, self.qualified(name)
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            name = self.message(tp)
            return name, _TYPE_MESSAGE, self.qualified(name)
        raise TypeError(f"no Protobuf type for {tp!r}")

    def _field(self, msg: Any, fname: str, tp: Any, number: int) -> str:
        optional, tp = _unwrap_optional(tp)
        origin = getattr(tp, "__origin__", None)
        field = msg.field.add(name=fname, number=number, json_name=_json_name(fname))
        if origin in (list, _seq()):
            (item,) = tp.__args__
            text, code, type_name = self._type(item)
            field.label, field.type = _LABEL_REPEATED, code
            if type_name:
                field.type_name = type_name
            return f"repeated {text} {fname} = {number};"
        if origin in (dict, _map()):
            key, value = tp.__args__
            if key is not str:
                raise TypeError(f"Protobuf maps need str keys here, got {key!r}")
            text, code, type_name = self._type(value)
            entry_name = "".join(p.capitalize() for p in fname.split("_")) + "Entry"
            entry = msg.nested_type.add(name=entry_name)
            entry.options.map_entry = True
            entry.field.add(name="key", number=1, label=_LABEL_OPTIONAL, type=9, json_name="key")
            v = entry.field.add(name="value", number=2, label=_LABEL_OPTIONAL, type=code,
                                json_name="value")
            if type_name:
                v.type_name = type_name
            field.label, field.type = _LABEL_REPEATED, _TYPE_MESSAGE
            field.type_name = f"{self.qualified(msg.name)}.{entry_name}"
            return f"map<string, {text}> {fname} = {number};"
        text, code, type_name = self._type(tp)
        field.label, field.type = _LABEL_OPTIONAL, code
        if type_name:
            field.type_name = type_name
        if optional and code != _TYPE_MESSAGE:
            # proto3 `optional`: a synthetic oneof gives the scalar presence.
            field.proto3_optional = True
            field.oneof_index = len(msg.oneof_decl)
            msg.oneof_decl.add(name=f"_{fname}")
            return f"optional {text} {fname} = {number};"
        return f"{text} {fname} = {number};"


def _json_name(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


_MODELS: dict[Any, ProtoModel] = {}


def proto_model(cls: Any) -> ProtoModel:
    """Build (once per class) the Protobuf form of a dataclass.

    The package comes from ``__proto_package__`` (none by default).

    Raises:
        TypeError: not a dataclass, or a field type with no Protobuf mapping.
    """
    hit = _MODELS.get(cls)
    if hit is not None:
        return hit
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"{cls!r} is not a dataclass type")
    package = getattr(cls, "__proto_package__", "") or ""
    b = _Builder(package)
    root = b.message(cls)
    file_name = (package.replace(".", "/") + "/" if package else "") + f"{root}.proto"
    b.fdp.name = file_name
    if package:
        b.fdp.package = package
    header = ['syntax = "proto3";']
    if package:
        header.append(f"package {package};")
    if b.uses_timestamp:
        b.fdp.dependency.append("google/protobuf/timestamp.proto")
        header.append('import "google/protobuf/timestamp.proto";')
    text = "\n\n".join(["\n".join(header), *b.text]) + "\n"

    from google.protobuf.message_factory import GetMessageClass

    from kontrakt.serde._proto_schema import new_pool

    pool = new_pool()
    pool.Add(b.fdp)
    full = f"{package}.{root}" if package else root
    names = [m.name for m in b.fdp.message_type]
    classes: dict[Any, Any] = {}

    def message_class(tp: Any) -> Any:
        if tp not in classes:
            if tp is dt.datetime:
                name = "google.protobuf.Timestamp"
            else:
                name = f"{package}.{tp.__name__}" if package else tp.__name__
            classes[tp] = GetMessageClass(pool.FindMessageTypeByName(name))
        return classes[tp]

    model = ProtoModel(text, file_name, full, message_class(cls), (names.index(root),),
                       lambda obj: _to_message(obj, message_class),
                       lambda msg: _from_message(msg, cls))
    _MODELS[cls] = model
    return model


def _enum_numbers(tp: Any) -> dict[Any, int]:
    return {m: i for i, m in enumerate(tp, start=1)}


def _to_value(value: Any, tp: Any, message_class: Callable[[Any], Any]) -> Any:
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum_numbers(tp)[value]
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _to_message(value, message_class)
    if tp is dt.datetime:
        # The Timestamp class of the model's own pool (a different pool's class is refused).
        ts = message_class(dt.datetime)()
        ts.FromDatetime(value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc))
        return ts
    if tp in (dt.date, decimal.Decimal, uuid.UUID):
        return value.isoformat() if tp is dt.date else str(value)
    return value


def _to_message(obj: Any, message_class: Callable[[Any], Any]) -> Any:
    kwargs: dict[str, Any] = {}
    for name, tp, _ in _fields(type(obj)):
        value = getattr(obj, name)
        _, tp = _unwrap_optional(tp)
        if value is None:
            continue
        origin = getattr(tp, "__origin__", None)
        if origin in (list, _seq()):
            (item,) = tp.__args__
            kwargs[name] = [_to_value(v, item, message_class) for v in value]
        elif origin in (dict, _map()):
            kwargs[name] = {k: _to_value(v, tp.__args__[1], message_class)
                            for k, v in value.items()}
        else:
            kwargs[name] = _to_value(value, tp, message_class)
    return message_class(type(obj))(**kwargs)


def _from_value(value: Any, tp: Any) -> Any:
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        if value == 0:
            raise ValueError(f"{tp.__name__} is unspecified (0)")
        return list(tp)[value - 1]
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _from_message(value, tp)
    if tp is dt.datetime:
        return value.ToDatetime(tzinfo=dt.timezone.utc)
    if tp is dt.date:
        return dt.date.fromisoformat(value)
    if tp is decimal.Decimal:
        return decimal.Decimal(value)
    if tp is uuid.UUID:
        return uuid.UUID(value)
    return value


def _from_message(msg: Any, cls: Any) -> Any:
    kwargs: dict[str, Any] = {}
    for name, tp, f in _fields(cls):
        optional, inner = _unwrap_optional(tp)
        origin = getattr(inner, "__origin__", None)
        value = getattr(msg, name)
        if origin in (list, _seq()):
            (item,) = inner.__args__
            kwargs[name] = [_from_value(v, item) for v in value]
        elif origin in (dict, _map()):
            kwargs[name] = {k: _from_value(v, inner.__args__[1]) for k, v in value.items()}
        elif optional and not msg.HasField(name):
            kwargs[name] = None
        elif (isinstance(inner, type) and issubclass(inner, enum.Enum) and value == 0
              and f.default is not dataclasses.MISSING):
            kwargs[name] = f.default  # unset enum: the dataclass default
        else:
            kwargs[name] = _from_value(value, inner)
    return cls(**kwargs)
