"""Protobuf ``FileDescriptorProto`` → canonical ``.proto`` text, for the registry.

Confluent's serializers register Protobuf schemas as base64 of a serialized
``FileDescriptorProto`` (what generated classes carry). Confluent Schema Registry turns that
into ``.proto`` text, stores and compares the text, and hands the descriptor form back only
when asked (``format=serialized``). This module does the first half: it recognises the
base64 form and prints a descriptor as ``.proto`` text that protoc compiles back to the same
descriptor and that :mod:`kontrakt.registry.compatibility` can parse.

The layout is fixed, so equal descriptors print equal text: ``syntax``, ``package``, imports
in dependency order, file options, messages, enums, services, then top-level ``extend``
blocks. Type names are written fully qualified (``.pkg.Msg``): they can never be captured by
a nearer scope, whatever the file declares. Inside a message: options, nested enums, then
nested messages and fields interleaved exactly as the descriptor orders them (protoc places
the synthetic map-entry types where the map field is declared, and the message-index wire
format counts nested types by position), reserved and extension ranges, nested ``extend``.

Not representable, so dropped: custom options (extensions of ``*Options`` messages arrive as
unknown fields when the descriptor is parsed without their definitions) and source comments
(descriptors do not carry them). ``editions`` files are refused.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator
from typing import Any

from kontrakt.registry._errors import InvalidSchemaError

__all__ = ["decode_descriptor", "default_json_name", "descriptor_to_proto_text"]

_B64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_INDENT = "  "
_MAX_FIELD = 536870911  # 2^29 - 1: the largest field number ("max" in ranges)
_MAX_ENUM = 2147483647  # enum values are int32
# FieldDescriptorProto.Type numbers -> scalar names (10 group, 11 message, 14 enum: named).
_SCALARS = {
    1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64",
    7: "fixed32", 8: "bool", 9: "string", 12: "bytes", 13: "uint32", 15: "sfixed32",
    16: "sfixed64", 17: "sint32", 18: "sint64",
}
_TYPE_GROUP, _TYPE_MESSAGE, _TYPE_ENUM, _TYPE_BYTES, _TYPE_STRING = 10, 11, 14, 12, 9
_LABEL_OPTIONAL, _LABEL_REQUIRED, _LABEL_REPEATED = 1, 2, 3
# Descriptor option fields that are never written as `option` lines: map_entry is implied by
# `map<K, V>` (protoc refuses it written out) and uninterpreted_option is parser scratch space.
_SKIP_OPTIONS = frozenset({"map_entry", "uninterpreted_option"})


def _invalid(message: str) -> InvalidSchemaError:
    return InvalidSchemaError(422, 42201, message)


def decode_descriptor(schema: str) -> Any | None:
    """Recognise the base64 ``FileDescriptorProto`` form of a Protobuf schema.

    ``.proto`` text always holds whitespace or punctuation outside the base64 alphabet
    (``;``, ``{``, ``"``), so a string made only of base64 characters is taken as the
    serialized form, as Confluent's server falls back to it when the text does not parse.

    Args:
        schema: the ``schema`` string of a registration or lookup request.

    Returns:
        The parsed ``descriptor_pb2.FileDescriptorProto``, or ``None`` when ``schema`` is not
        in the base64 form (it is then .proto text to be parsed as such).

    Raises:
        InvalidSchemaError: (42201) the string is base64 but does not hold a descriptor that
            defines anything, or the protobuf runtime is not installed.
    """
    text = schema.strip()
    if not _B64.fullmatch(text):
        return None
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None  # not base64 after all (bad length or padding): leave it to the text parser
    try:
        from google.protobuf import descriptor_pb2
        from google.protobuf.message import DecodeError
    except ImportError:  # pragma: no cover - protobuf is in the protobuf extra
        raise _invalid("Could not parse Protobuf - a serialized FileDescriptorProto needs the "
                       "protobuf package (pip install kontrakt[protobuf])") from None
    try:
        fdp = descriptor_pb2.FileDescriptorProto.FromString(raw)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise _invalid(f"Could not parse Protobuf - not .proto text and not a serialized "
                       f"FileDescriptorProto: {exc}") from None
    # Random base64 words can decode as a message with only unknown fields; a descriptor
    # that declares nothing is never what a serializer sent.
    if not (fdp.message_type or fdp.enum_type or fdp.service or fdp.extension):
        raise _invalid("Could not parse Protobuf - the serialized FileDescriptorProto "
                       "defines no message, enum, service or extension")
    return fdp


def default_json_name(name: str) -> str:
    """protoc's default JSON name of a field: underscores dropped, the next letter upper."""
    out: list[str] = []
    upper = False
    for ch in name:
        if ch == "_":
            upper = True
        elif upper:
            out.append(ch.upper())
            upper = False
        else:
            out.append(ch)
    return "".join(out)


def descriptor_to_proto_text(fdp: Any) -> str:
    """Print a ``FileDescriptorProto`` as canonical ``.proto`` text.

    Args:
        fdp: a ``google.protobuf.descriptor_pb2.FileDescriptorProto``.

    Returns:
        ``.proto`` text ending with a newline. Compiled by protoc (with the same imports
        available) it gives back ``fdp``, except for what text cannot carry (see the module
        docstring); ``json_name`` is written only where it differs from protoc's default.

    Raises:
        InvalidSchemaError: (42201) an ``editions`` file, or a descriptor too malformed to
            print (for example a field without a type).
    """
    return _Printer(fdp).file()


# ---------------------------------------------------------------- value formatting
def _quote(value: str) -> str:
    """A .proto string literal: quotes, backslashes and control characters escaped."""
    out = ['"']
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ord(ch) < 0x20 or ch == "\x7f":
            out.append(f"\\{ord(ch):03o}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _quote_bytes(value: bytes) -> str:
    out = ['"']
    for b in value:
        if b in (0x22, 0x5C):
            out.append("\\" + chr(b))
        elif 0x20 <= b < 0x7F:
            out.append(chr(b))
        else:
            out.append(f"\\{b:03o}")
    out.append('"')
    return "".join(out)


def _float(value: float) -> str:
    if value != value:
        return "nan"
    if value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"
    return repr(value)


def _option_value(fd: Any, value: Any) -> str:
    """One option value in .proto syntax, by the option field's type."""
    if fd.type == fd.TYPE_MESSAGE or fd.type == fd.TYPE_GROUP:
        from google.protobuf import text_format

        return "{ " + str(text_format.MessageToString(value, as_one_line=True)) + " }"
    if fd.type == fd.TYPE_ENUM:
        ev = fd.enum_type.values_by_number.get(value)
        return str(ev.name) if ev is not None else str(value)
    if fd.type == fd.TYPE_BOOL:
        return "true" if value else "false"
    if fd.type == fd.TYPE_STRING:
        return _quote(value)
    if fd.type == fd.TYPE_BYTES:
        return _quote_bytes(value)
    if fd.type in (fd.TYPE_FLOAT, fd.TYPE_DOUBLE):
        return _float(value)
    return str(value)


def _is_repeated(fd: Any) -> bool:
    # protobuf >= 5.28 has is_repeated and 7.x dropped label; older releases only have label.
    flag = getattr(fd, "is_repeated", None)
    return bool(flag) if flag is not None else bool(fd.label == fd.LABEL_REPEATED)


def _options(options: Any) -> list[tuple[str, str]]:
    """The set fields of an ``*Options`` message as ``(name, value)``, in field order."""
    out: list[tuple[str, str]] = []
    for fd, value in options.ListFields():
        if fd.name in _SKIP_OPTIONS or fd.is_extension:
            continue
        values = value if _is_repeated(fd) else [value]
        out.extend((fd.name, _option_value(fd, v)) for v in values)
    return out


def _bracket(options: list[tuple[str, str]]) -> str:
    return " [" + ", ".join(f"{n} = {v}" for n, v in options) + "]" if options else ""


def _range(start: int, end_inclusive: int, maximum: int) -> str:
    if start == end_inclusive:
        return str(start)
    return f"{start} to {'max' if end_inclusive >= maximum else end_inclusive}"


# ---------------------------------------------------------------- the printer
class _Printer:
    def __init__(self, fdp: Any) -> None:
        self.fdp = fdp
        syntax = fdp.syntax or "proto2"
        if syntax not in ("proto2", "proto3"):
            raise _invalid(f"Could not parse Protobuf - syntax {syntax!r} (editions) is not "
                           "supported")
        self.proto3 = syntax == "proto3"
        self.syntax = syntax
        self.lines: list[str] = []

    def emit(self, depth: int, text: str) -> None:
        self.lines.append(_INDENT * depth + text)

    def file(self) -> str:
        f = self.fdp
        self.emit(0, f'syntax = "{self.syntax}";')
        if f.package:
            self.emit(0, f"package {f.package};")
        public, weak = set(f.public_dependency), set(f.weak_dependency)
        for i, dep in enumerate(f.dependency):
            kind = "public " if i in public else "weak " if i in weak else ""
            self.emit(0, f"import {kind}{_quote(dep)};")
        for name, value in _options(f.options):
            self.emit(0, f"option {name} = {value};")
        scope = f".{f.package}" if f.package else ""
        for msg in f.message_type:
            self.message(msg, scope, 0)
        for en in f.enum_type:
            self.enum(en, 0)
        for svc in f.service:
            self.service(svc)
        self.extends(f.extension, 0)
        return "\n".join(self.lines) + "\n"

    # -- types
    def type_name(self, fld: Any) -> str:
        if fld.type in _SCALARS:
            return _SCALARS[fld.type]
        if fld.type_name:
            return str(fld.type_name)
        raise _invalid(f"Could not parse Protobuf - field {fld.name!r} has no type")

    def enum(self, en: Any, depth: int) -> None:
        self.emit(depth, f"enum {en.name} {{")
        for name, value in _options(en.options):
            self.emit(depth + 1, f"option {name} = {value};")
        for val in en.value:
            self.emit(depth + 1, f"{val.name} = {val.number}{_bracket(_options(val.options))};")
        ranges = [_range(r.start, r.end, _MAX_ENUM) for r in en.reserved_range]
        if ranges:
            self.emit(depth + 1, f"reserved {', '.join(ranges)};")
        if en.reserved_name:
            self.emit(depth + 1, f"reserved {', '.join(_quote(n) for n in en.reserved_name)};")
        self.emit(depth, "}")

    def message(self, msg: Any, scope: str, depth: int) -> None:
        self.emit(depth, f"message {msg.name} {{")
        self.message_body(msg, f"{scope}.{msg.name}", depth + 1)
        self.emit(depth, "}")

    def message_body(self, msg: Any, full: str, depth: int) -> None:
        for name, value in _options(msg.options):
            self.emit(depth, f"option {name} = {value};")
        for en in msg.enum_type:
            self.enum(en, depth)
        nested = {f"{full}.{n.name}": n for n in msg.nested_type}
        # Nested types a field declares implicitly (map entries, groups): name -> field number.
        owned: dict[str, int] = {}
        for fld in msg.field:
            target = nested.get(fld.type_name)
            if target is not None and (fld.type == _TYPE_GROUP or (
                    fld.type == _TYPE_MESSAGE and fld.label == _LABEL_REPEATED
                    and target.options.map_entry)):
                owned[fld.type_name] = fld.number
        fields = iter(self.members(msg, full, {n: nested[n] for n in owned}))
        done: set[int] = set()
        # Interleave so protoc recreates nested_type in the same order: an implicit type is
        # created where its field is declared, so every field up to that one goes first.
        for ntype in msg.nested_type:
            owner = owned.get(f"{full}.{ntype.name}")
            if owner is None:
                self.message(ntype, full, depth)
                continue
            while owner not in done:
                item = next(fields, None)
                if item is None:
                    break
                self.lines.extend(_INDENT * depth + line for line in item[1])
                done.add(item[0])
        for _, block in fields:
            self.lines.extend(_INDENT * depth + line for line in block)
        ranges = [_range(r.start, r.end - 1, _MAX_FIELD) for r in msg.extension_range]
        for r, text in zip(msg.extension_range, ranges, strict=True):
            self.emit(depth, f"extensions {text}{_bracket(_options(r.options))};")
        ranges = [_range(r.start, r.end - 1, _MAX_FIELD) for r in msg.reserved_range]
        if ranges:
            self.emit(depth, f"reserved {', '.join(ranges)};")
        if msg.reserved_name:
            self.emit(depth, f"reserved {', '.join(_quote(n) for n in msg.reserved_name)};")
        self.extends(msg.extension, depth)

    def members(self, msg: Any, full: str, owned: dict[str, Any]
                ) -> Iterator[tuple[int, list[str]]]:
        """Fields and oneof blocks in declaration order, as ``(number, lines)``.

        A oneof is written where its first field is, with all its fields (protoc requires
        a oneof's fields to be consecutive): the block comes with its first field's number,
        its other fields follow with no lines.
        """
        real_oneofs: dict[int, list[Any]] = {}
        for fld in msg.field:
            if fld.HasField("oneof_index") and not fld.proto3_optional:
                real_oneofs.setdefault(fld.oneof_index, []).append(fld)
        printed: set[int] = set()
        for fld in msg.field:
            if fld.HasField("oneof_index") and not fld.proto3_optional:
                idx = fld.oneof_index
                if idx in printed:
                    continue
                printed.add(idx)
                if idx >= len(msg.oneof_decl):
                    raise _invalid(f"Could not parse Protobuf - field {fld.name!r} names a "
                                   "oneof that does not exist")
                decl = msg.oneof_decl[idx]
                block = [f"oneof {decl.name} {{"]
                block += [f"{_INDENT}option {n} = {v};" for n, v in _options(decl.options)]
                for member in real_oneofs[idx]:
                    block += [_INDENT + line for line in self.field(member, full, owned, True)]
                block.append("}")
                yield real_oneofs[idx][0].number, block
                for member in real_oneofs[idx][1:]:
                    yield member.number, []
            else:
                yield fld.number, self.field(fld, full, owned, False)

    def label(self, fld: Any, in_oneof: bool) -> str:
        if in_oneof:
            return ""
        if fld.label == _LABEL_REPEATED:
            return "repeated "
        if fld.label == _LABEL_REQUIRED:
            return "required "
        if self.proto3:
            return "optional " if fld.proto3_optional else ""
        return "optional "

    def field_options(self, fld: Any) -> list[tuple[str, str]]:
        opts: list[tuple[str, str]] = []
        if fld.HasField("default_value"):
            opts.append(("default", self.default(fld)))
        if fld.HasField("json_name") and fld.json_name != default_json_name(fld.name):
            opts.append(("json_name", _quote(fld.json_name)))
        return opts + _options(fld.options)

    def default(self, fld: Any) -> str:
        raw = str(fld.default_value)
        if fld.type == _TYPE_STRING:
            return _quote(raw)
        if fld.type == _TYPE_BYTES:
            return f'"{raw}"'  # protoc stores bytes defaults already C-escaped
        return raw  # numbers, true/false, inf/nan and enum value names are written bare

    def field(self, fld: Any, full: str, owned: dict[str, Any], in_oneof: bool) -> list[str]:
        opts = _bracket(self.field_options(fld))
        target = owned.get(fld.type_name) if fld.type_name else None
        if target is not None and fld.type == _TYPE_MESSAGE:
            by_number = {f.number: f for f in target.field}
            if 1 not in by_number or 2 not in by_number:
                raise _invalid(f"Could not parse Protobuf - map entry {target.name!r} needs "
                               "key and value fields")
            key, value = self.type_name(by_number[1]), self.type_name(by_number[2])
            return [f"map<{key}, {value}> {fld.name} = {fld.number}{opts};"]
        if target is not None and fld.type == _TYPE_GROUP:
            lines = [f"{self.label(fld, in_oneof)}group {target.name} = {fld.number}{opts} {{"]
            saved, self.lines = self.lines, []
            self.message_body(target, fld.type_name, 1)
            lines += self.lines
            self.lines = saved
            return [*lines, "}"]
        ftype = self.type_name(fld)
        return [f"{self.label(fld, in_oneof)}{ftype} {fld.name} = {fld.number}{opts};"]

    def extends(self, fields: Any, depth: int) -> None:
        # One block per run of the same extendee, so the extension order survives.
        run: list[Any] = []
        for fld in [*fields, None]:
            if run and (fld is None or fld.extendee != run[0].extendee):
                self.emit(depth, f"extend {run[0].extendee} {{")
                for ext in run:
                    opts = _bracket(self.field_options(ext))
                    label = self.label(ext, False)
                    self.emit(depth + 1, f"{label}{self.type_name(ext)} {ext.name} = "
                                         f"{ext.number}{opts};")
                self.emit(depth, "}")
                run = []
            if fld is not None:
                run.append(fld)

    def service(self, svc: Any) -> None:
        self.emit(0, f"service {svc.name} {{")
        for name, value in _options(svc.options):
            self.emit(1, f"option {name} = {value};")
        for m in svc.method:
            req = ("stream " if m.client_streaming else "") + m.input_type
            res = ("stream " if m.server_streaming else "") + m.output_type
            opts = _options(m.options)
            head = f"rpc {m.name}({req}) returns ({res})"
            if not opts:
                self.emit(1, head + ";")
                continue
            self.emit(1, head + " {")
            for name, value in opts:
                self.emit(2, f"option {name} = {value};")
            self.emit(1, "}")
        self.emit(0, "}")
