"""Field-level rules on Protobuf messages: the walk, field tags from ``confluent.field_meta``,
and the dict form migration rules see.

A field's tags are the ``tags`` of its ``(confluent.field_meta)`` option in the schema the
rule belongs to, plus those the schema's metadata gives to paths matching the field's full
name (``package.Message.field``). The walk follows the message being written or read, field
by field, and finds each field's schema side by number (a compatible rename keeps the number),
so a generated class that lags the registered schema is still walked with the registered
schema's names and tags. Fields with explicit presence that are unset are not visited: there
is no value to transform, and writing one back would set them.

Only this module imports protobuf, and only when a Protobuf rule runs.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

from kontrakt.errors import RuleError

__all__ = ["META_PROTO", "from_plain", "inline_tags", "meta_file", "to_plain", "walk_message"]

#: ``confluent/meta.proto`` as Confluent's schema registry defines it (field tags and
#: parameters as custom options, extension number 1088); given to protoc when a ``.proto``
#: text schema imports it, and loaded into every descriptor pool kontrakt builds.
META_PROTO = """syntax = "proto3";
package confluent;

import "google/protobuf/descriptor.proto";

message Meta {
  string doc = 1;
  map<string, string> params = 2;
  repeated string tags = 3;
  repeated Rule rules = 4;
}

message Rule {
  string name = 1;
  string doc = 2;
  string expr = 3;
  string sql = 4;
}

extend google.protobuf.FileOptions { Meta file_meta = 1088; }
extend google.protobuf.MessageOptions { Meta message_meta = 1088; }
extend google.protobuf.FieldOptions { Meta field_meta = 1088; }
extend google.protobuf.EnumOptions { Meta enum_meta = 1088; }
extend google.protobuf.EnumValueOptions { Meta enum_value_meta = 1088; }
"""

_META_FIELD = 1088  # the extension number of (confluent.field_meta)
_META_TAGS = 3  # Meta.tags


def meta_file() -> Any:
    """``confluent/meta.proto`` as a ``FileDescriptorProto`` (for a descriptor pool), built
    without protoc."""
    from google.protobuf import descriptor_pb2 as d

    f = d.FieldDescriptorProto
    fdp = d.FileDescriptorProto(name="confluent/meta.proto", package="confluent",
                                dependency=["google/protobuf/descriptor.proto"], syntax="proto3")
    meta = fdp.message_type.add(name="Meta")
    meta.field.add(name="doc", number=1, label=f.LABEL_OPTIONAL, type=f.TYPE_STRING,
                   json_name="doc")
    meta.field.add(name="params", number=2, label=f.LABEL_REPEATED, type=f.TYPE_MESSAGE,
                   type_name=".confluent.Meta.ParamsEntry", json_name="params")
    meta.field.add(name="tags", number=3, label=f.LABEL_REPEATED, type=f.TYPE_STRING,
                   json_name="tags")
    meta.field.add(name="rules", number=4, label=f.LABEL_REPEATED, type=f.TYPE_MESSAGE,
                   type_name=".confluent.Rule", json_name="rules")
    entry = meta.nested_type.add(name="ParamsEntry")
    entry.field.add(name="key", number=1, label=f.LABEL_OPTIONAL, type=f.TYPE_STRING,
                    json_name="key")
    entry.field.add(name="value", number=2, label=f.LABEL_OPTIONAL, type=f.TYPE_STRING,
                    json_name="value")
    entry.options.map_entry = True
    rule = fdp.message_type.add(name="Rule")
    for number, name in enumerate(("name", "doc", "expr", "sql"), 1):
        rule.field.add(name=name, number=number, label=f.LABEL_OPTIONAL, type=f.TYPE_STRING,
                       json_name=name)
    for name, options in (("file_meta", "FileOptions"), ("message_meta", "MessageOptions"),
                          ("field_meta", "FieldOptions"), ("enum_meta", "EnumOptions"),
                          ("enum_value_meta", "EnumValueOptions")):
        fdp.extension.add(name=name, number=_META_FIELD, label=f.LABEL_OPTIONAL,
                          type=f.TYPE_MESSAGE, type_name=".confluent.Meta",
                          extendee=f".google.protobuf.{options}", json_name=name)
    return fdp


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


def _fields(data: bytes) -> list[tuple[int, int, Any]]:
    """``(number, wire type, value)`` of every field of an encoded message (length-delimited
    values as bytes)."""
    out: list[tuple[int, int, Any]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == 2:
            size, pos = _varint(data, pos)
            value, pos = data[pos:pos + size], pos + size
        elif wire == 5:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"wire type {wire} in field options")
        if pos > len(data):
            raise ValueError("truncated field")
        out.append((number, wire, value))
    return out


@lru_cache(maxsize=4096)
def inline_tags(field: Any) -> frozenset[str]:
    """The tags of ``field``'s ``(confluent.field_meta)`` option (a ``FieldDescriptor``).

    Read from the option's wire form, so that it works whichever pool the descriptor comes
    from and whether or not a generated ``meta_pb2`` is imported.

    Raises:
        RuleError: the options cannot be decoded.
    """
    if not field.has_options:
        return frozenset()
    try:
        raw = field.GetOptions().SerializeToString()
        tags: set[str] = set()
        for number, wire, value in _fields(raw):
            if number == _META_FIELD and wire == 2:
                tags.update(v.decode() for n, w, v in _fields(value)
                            if n == _META_TAGS and w == 2)
        return frozenset(tags)
    except (ValueError, UnicodeDecodeError) as e:
        raise RuleError(f"cannot read the confluent.field_meta option of "
                        f"{field.full_name!r}: {e}") from e


def _field_type(fd: Any) -> str:
    from google.protobuf.descriptor import FieldDescriptor as F

    if _is_map(fd):
        return "MAP"
    t = fd.type
    if t == F.TYPE_MESSAGE or t == F.TYPE_GROUP:
        return "RECORD"
    if t == F.TYPE_ENUM:
        return "ENUM"
    if t == F.TYPE_STRING:
        return "STRING"
    if t == F.TYPE_BYTES:
        return "BYTES"
    if t in (F.TYPE_INT32, F.TYPE_SINT32, F.TYPE_UINT32, F.TYPE_FIXED32, F.TYPE_SFIXED32):
        return "INT"
    if t in (F.TYPE_INT64, F.TYPE_SINT64, F.TYPE_UINT64, F.TYPE_FIXED64, F.TYPE_SFIXED64):
        return "LONG"
    if t == F.TYPE_FLOAT:
        return "FLOAT"
    if t == F.TYPE_DOUBLE:
        return "DOUBLE"
    if t == F.TYPE_BOOL:
        return "BOOLEAN"
    return "NULL"


def _is_map(fd: Any) -> bool:
    from google.protobuf.descriptor import FieldDescriptor as F

    return bool(fd.type == F.TYPE_MESSAGE and fd.message_type.GetOptions().map_entry)


def _repeated(fd: Any) -> bool:
    flag = getattr(fd, "is_repeated", None)  # protobuf 6+; older releases only have label
    if flag is not None:
        return bool(flag)
    return bool(fd.label == fd.LABEL_REPEATED)


class _ProtoWalker:
    def __init__(self, visit: Callable[[Any, Any], Any], tags_of: Callable[[str], Any],
                 condition: bool, make_context: Callable[..., Any],
                 refused: Callable[[Any], Exception]) -> None:
        self.visit = visit
        self.tags_of = tags_of
        self.condition = condition
        self.make_context = make_context
        self.refused = refused

    def message(self, schema: Any, message: Any) -> None:
        """Walk ``message`` in place with ``schema``, its schema-side ``Descriptor``."""
        by_number = schema.fields_by_number
        for fd in message.DESCRIPTOR.fields:
            schema_fd = by_number.get(fd.number)
            if schema_fd is None:
                continue  # not in the schema: no tags, no rule applies
            if fd.has_presence and not message.HasField(fd.name):
                continue
            tags = inline_tags(schema_fd) | frozenset(self.tags_of(schema_fd.full_name))
            kind = _field_type(fd)
            field = self.make_context(message, schema_fd.full_name, schema_fd.name, kind, tags)
            value = getattr(message, fd.name)
            if kind == "MAP":
                self._map(schema_fd, fd, field, value)
            elif kind == "RECORD":
                child = schema_fd.message_type
                for item in (value if _repeated(fd) else (value,)):
                    self.message(child, item)
            elif _repeated(fd):
                new = [self._leaf(field, kind, v) for v in value]
                if not self.condition:
                    del value[:]
                    value.extend(new)
            else:
                new_value = self._leaf(field, kind, value)
                if not self.condition:
                    setattr(message, fd.name, new_value)

    def _map(self, schema_fd: Any, fd: Any, field: Any, value: Any) -> None:
        value_fd = fd.message_type.fields_by_name["value"]
        if _field_type(value_fd) == "RECORD":
            child = schema_fd.message_type.fields_by_name["value"].message_type
            for key in list(value):
                self.message(child, value[key])
            return
        # Each value is visited as a MAP field, as Confluent's walk reports it: encryption
        # refuses it there, and CEL_FIELD leaves it alone.
        new = {key: self._leaf(field, "MAP", value[key]) for key in list(value)}
        if not self.condition:
            value.clear()
            value.update(new)

    def _leaf(self, field: Any, kind: str, value: Any) -> Any:
        field.field_type = kind
        new = self.visit(field, value)
        if self.condition and new is False:
            raise self.refused(field)
        return new


def walk_message(schema: Any, message: Any, visit: Callable[[Any, Any], Any],
                 tags_of: Callable[[str], Any], condition: bool,
                 make_context: Callable[..., Any], refused: Callable[[Any], Exception],
                 describe: str) -> Any:
    """A copy of Protobuf ``message`` with ``visit(field, value)`` applied to each scalar
    field value (each element of a repeated field, each value of a map, with field type
    ``MAP``; the fields of nested messages, map values included); ``schema`` is the
    schema-side message ``Descriptor`` (None: the message's own).

    Raises:
        RuleError: ``message`` is not a Protobuf message.
        the exception ``refused(field)`` makes, when a condition gives False.
    """
    from google.protobuf.message import Message

    if not isinstance(message, Message):
        raise RuleError(f"{describe}: a Protobuf field rule needs a Protobuf message, got "
                        f"{type(message).__name__}")
    copy = type(message)()
    copy.CopyFrom(message)
    _ProtoWalker(visit, tags_of, condition, make_context, refused).message(
        schema if schema is not None else message.DESCRIPTOR, copy)
    return copy


def to_plain(message: Any) -> Any:
    """``message`` as the dict migration rules see, as Confluent's deserializers give it
    (``json_format`` with the ``.proto`` field names)."""
    from google.protobuf import json_format

    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def from_plain(cls: Any, value: Any) -> Any:
    """A migrated dict back into a message of ``cls``.

    Raises:
        RuleError: the migrated value does not fit the reader's message type.
    """
    from google.protobuf import json_format

    if not isinstance(value, dict):
        raise RuleError(f"a migration gave {type(value).__name__}, not an object, for "
                        f"{cls.DESCRIPTOR.full_name}")
    try:
        return json_format.ParseDict(value, cls())
    except json_format.ParseError as e:
        raise RuleError(f"the migrated message does not fit {cls.DESCRIPTOR.full_name}: "
                        f"{e}") from e
