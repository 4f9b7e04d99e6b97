"""A small .proto parser (proto2 and proto3): tokenizer, recursive descent, name resolution.

It reads what Schema Registry users write: syntax, package, imports (resolved through schema
references or the well-known ``google/protobuf`` files), options (including aggregate values),
messages with nested messages and enums, fields with labels and options, oneofs, maps,
reserved ranges and names, extension ranges, ``extend`` blocks and services. Groups (a
deprecated proto2 feature) and editions files are refused with UnsupportedSchemaError.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from kontrakt.registry.compatibility._result import (
    SchemaParseError,
    UnresolvedReferenceError,
    UnsupportedSchemaError,
)

__all__ = [
    "SCALARS", "ProtoEnum", "ProtoField", "ProtoFile", "ProtoMessage", "ProtoOneOf",
    "ProtoSchema", "parse_proto", "parse_proto_schema",
]

SCALARS = frozenset({
    "double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32",
    "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes",
})
# Well-known types: the file that defines them -> their full names.
WELL_KNOWN = {
    "google/protobuf/any.proto": ("google.protobuf.Any",),
    "google/protobuf/duration.proto": ("google.protobuf.Duration",),
    "google/protobuf/empty.proto": ("google.protobuf.Empty",),
    "google/protobuf/field_mask.proto": ("google.protobuf.FieldMask",),
    "google/protobuf/struct.proto": ("google.protobuf.Struct", "google.protobuf.Value",
                                     "google.protobuf.ListValue", "google.protobuf.NullValue"),
    "google/protobuf/timestamp.proto": ("google.protobuf.Timestamp",),
    "google/protobuf/wrappers.proto": tuple(
        f"google.protobuf.{n}Value" for n in ("Double", "Float", "Int64", "UInt64", "Int32",
                                              "UInt32", "Bool", "String", "Bytes")),
    "google/protobuf/descriptor.proto": (),
    # Confluent's field and message meta options: a known dependency of every schema.
    "confluent/meta.proto": ("confluent.Meta", "confluent.Rule"),
}
_TOKEN = re.compile(
    r"""(?P<ws>\s+)|(?P<lc>//[^\n]*)|(?P<bc>/\*.*?\*/)
    |(?P<str>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
    |(?P<num>[-+]?(?:0[xX][0-9a-fA-F]+|\d+\.\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?
        |\d+[eE][-+]?\d+|\d+)(?![A-Za-z_]))
    |(?P<id>\.?[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
    |(?P<sym>[{}\[\]()<>;,=:.\-+/])""",
    re.VERBOSE | re.DOTALL,
)


@dataclass(eq=False, slots=True)
class ProtoField:
    """A message field (or oneof member)."""

    name: str
    type: str
    tag: int
    label: str | None = None  # "optional", "required", "repeated" or None
    options: list[tuple[str, str]] = field(default_factory=list)
    key_type: str = ""  # for map<K, V>
    value_type: str = ""


@dataclass(eq=False, slots=True)
class ProtoOneOf:
    """A oneof and its member fields."""

    name: str
    fields: list[ProtoField] = field(default_factory=list)
    options: list[tuple[str, str]] = field(default_factory=list)


@dataclass(eq=False, slots=True)
class ProtoEnum:
    """An enum: constants as (name, number, options)."""

    name: str
    full_name: str = ""
    package: str = ""
    values: list[tuple[str, int, list[tuple[str, str]]]] = field(default_factory=list)
    options: list[tuple[str, str]] = field(default_factory=list)
    reserved: list[str] = field(default_factory=list)


@dataclass(eq=False, slots=True)
class ProtoMessage:
    """A message with its fields, oneofs and nested types (in declaration order)."""

    name: str
    full_name: str = ""
    package: str = ""
    fields: list[ProtoField] = field(default_factory=list)
    oneofs: list[ProtoOneOf] = field(default_factory=list)
    types: list[ProtoMessage | ProtoEnum] = field(default_factory=list)
    options: list[tuple[str, str]] = field(default_factory=list)
    reserved: list[str] = field(default_factory=list)
    extensions: list[str] = field(default_factory=list)
    extends: list[tuple[str, list[ProtoField]]] = field(default_factory=list)


@dataclass(eq=False, slots=True)
class ProtoFile:
    """A parsed .proto file."""

    syntax: str = "proto2"
    package: str = ""
    imports: list[tuple[str, str]] = field(default_factory=list)  # (path, ""|public|weak)
    options: list[tuple[str, str]] = field(default_factory=list)
    types: list[ProtoMessage | ProtoEnum] = field(default_factory=list)
    services: list[tuple[str, list[str]]] = field(default_factory=list)  # name, rpc lines
    extends: list[tuple[str, list[ProtoField]]] = field(default_factory=list)


@dataclass(eq=False, slots=True)
class ProtoSchema:
    """A parsed schema with every type it can see (its own and its imports'), by full name."""

    file: ProtoFile
    types: dict[str, ProtoMessage | ProtoEnum | None]  # None: a well-known type
    own: frozenset[str]


def _fail(message: str, line: int) -> SchemaParseError:
    return SchemaParseError(f"{message} (line {line})", schema_type="PROTOBUF")


class _Tokens:
    def __init__(self, text: str) -> None:
        self.items: list[tuple[str, str, int]] = []
        pos, line = 0, 1
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                raise _fail(f"unexpected character {text[pos]!r}", line)
            kind = m.lastgroup or ""
            value = m.group()
            if kind not in ("ws", "lc", "bc"):
                self.items.append((kind, value, line))
            line += value.count("\n")
            pos = m.end()
        self.i = 0

    def peek(self, ahead: int = 0) -> str:
        j = self.i + ahead
        return self.items[j][1] if j < len(self.items) else ""

    @property
    def line(self) -> int:
        if self.i < len(self.items):
            return self.items[self.i][2]
        return self.items[-1][2] if self.items else 1

    def next(self) -> tuple[str, str]:
        if self.i >= len(self.items):
            raise _fail("unexpected end of file", self.line)
        kind, value, _ = self.items[self.i]
        self.i += 1
        return kind, value

    def expect(self, value: str) -> None:
        _, got = self.next()
        if got != value:
            raise _fail(f"expected {value!r}, got {got!r}", self.line)

    def ident(self) -> str:
        kind, value = self.next()
        if kind != "id":
            raise _fail(f"expected a name, got {value!r}", self.line)
        return value

    def integer(self) -> int:
        kind, value = self.next()
        if kind != "num":
            raise _fail(f"expected a number, got {value!r}", self.line)
        digits = value.lstrip("-+")
        sign = -1 if value.startswith("-") else 1
        try:
            if digits[:2].lower() == "0x":
                return sign * int(digits, 16)
            if len(digits) > 1 and digits.startswith("0"):
                return sign * int(digits, 8)
            return sign * int(digits)
        except ValueError:
            raise _fail(f"expected an integer, got {value!r}", self.line) from None

    def accept(self, value: str) -> bool:
        if self.peek() == value:
            self.i += 1
            return True
        return False


class _Parser:
    def __init__(self, text: str) -> None:
        self.t = _Tokens(text)

    def parse(self) -> ProtoFile:
        f = ProtoFile()
        t = self.t
        if t.peek() == "syntax":
            t.next()
            t.expect("=")
            f.syntax = self._string()
            t.expect(";")
            if f.syntax not in ("proto2", "proto3"):
                raise _fail(f"unknown syntax {f.syntax!r}", t.line)
        elif t.peek() == "edition":
            raise UnsupportedSchemaError("protobuf editions files are not supported")
        while t.peek():
            word = t.peek()
            if word == ";":
                t.next()
            elif word == "package":
                t.next()
                f.package = t.ident()
                t.expect(";")
            elif word == "import":
                t.next()
                kind = ""
                if t.peek() in ("public", "weak"):
                    kind = t.next()[1]
                f.imports.append((self._string(), kind))
                t.expect(";")
            elif word == "option":
                f.options.append(self._option_stmt())
            elif word == "message":
                f.types.append(self._message())
            elif word == "enum":
                f.types.append(self._enum())
            elif word == "service":
                f.services.append(self._service())
            elif word == "extend":
                f.extends.append(self._extend())
            else:
                raise _fail(f"unexpected {word!r} at top level", t.line)
        return f

    def _string(self) -> str:
        kind, value = self.t.next()
        if kind != "str":
            raise _fail(f"expected a string, got {value!r}", self.t.line)
        out = value[1:-1]
        while self.t.items[self.t.i:self.t.i + 1] and self.t.items[self.t.i][0] == "str":
            out += self.t.next()[1][1:-1]  # adjacent string literals concatenate
        return out

    def _option_name(self) -> str:
        t = self.t
        parts = []
        while True:
            if t.accept("("):
                parts.append(f"({t.ident()})")
                t.expect(")")
            else:
                parts.append(t.ident().lstrip("."))
            if t.peek().startswith("."):
                # `(ext).field` tokenizes as ")" then ".field"
                if t.peek() == ".":
                    t.next()
                    continue
                parts.append(t.ident().lstrip("."))
            if not t.accept("."):
                break
        return ".".join(parts)

    def _value(self) -> str:
        t = self.t
        if t.peek() == "{":
            depth, out = 0, []
            while True:
                _, v = t.next()
                out.append(v)
                depth += {"{": 1, "}": -1}.get(v, 0)
                if depth == 0:
                    return " ".join(out)
        if t.peek() == "-":
            t.next()
            return "-" + t.next()[1]
        kind, value = t.items[t.i][0], t.peek()
        if kind == "str":
            return '"' + self._string() + '"'
        t.next()
        return value

    def _option_stmt(self) -> tuple[str, str]:
        self.t.expect("option")
        name = self._option_name()
        self.t.expect("=")
        value = self._value()
        self.t.expect(";")
        return name, value

    def _field_options(self) -> list[tuple[str, str]]:
        opts: list[tuple[str, str]] = []
        if self.t.accept("["):
            while True:
                name = self._option_name()
                self.t.expect("=")
                opts.append((name, self._value()))
                if self.t.accept("]"):
                    break
                self.t.expect(",")
        return opts

    def _ranges(self) -> list[str]:
        t = self.t
        out: list[str] = []
        while True:
            if t.items[t.i][0] == "str":
                out.append(f'"{self._string()}"')
            else:
                lo = t.integer()
                if t.accept("to"):
                    hi = "max" if t.accept("max") else str(t.integer())
                    out.append(f"{lo} to {hi}")
                else:
                    out.append(str(lo))
            if t.accept(";"):
                return out
            if t.peek() == "[":
                self._field_options()
                continue
            t.expect(",")

    def _field(self, label: str | None) -> ProtoField:
        t = self.t
        if t.peek() == "map" and t.peek(1) == "<":
            t.next()
            t.next()
            key = t.ident()
            t.expect(",")
            value = t.ident()
            t.expect(">")
            ftype = f"map<{key}, {value}>"
        else:
            ftype = t.ident()
            key = value = ""
        if ftype == "group":
            raise UnsupportedSchemaError(
                f"proto2 groups are not supported (line {t.line}); use a nested message")
        name = t.ident()
        t.expect("=")
        tag = t.integer()
        if not 1 <= tag <= 536870911 or 19000 <= tag <= 19999:
            raise _fail(f"invalid field number {tag} for {name!r}", t.line)
        opts = self._field_options()
        t.expect(";")
        return ProtoField(name=name, type=ftype, tag=tag, label=label, options=opts,
                          key_type=key, value_type=value)

    def _message(self) -> ProtoMessage:
        t = self.t
        t.expect("message")
        msg = ProtoMessage(name=t.ident())
        t.expect("{")
        while not t.accept("}"):
            word = t.peek()
            if word == ";":
                t.next()
            elif word == "message":
                msg.types.append(self._message())
            elif word == "enum":
                msg.types.append(self._enum())
            elif word == "option":
                msg.options.append(self._option_stmt())
            elif word == "oneof":
                t.next()
                oneof = ProtoOneOf(name=t.ident())
                t.expect("{")
                while not t.accept("}"):
                    if t.peek() == "option":
                        oneof.options.append(self._option_stmt())
                    elif t.peek() == ";":
                        t.next()
                    else:
                        oneof.fields.append(self._field(None))
                msg.oneofs.append(oneof)
            elif word == "reserved":
                t.next()
                msg.reserved.extend(self._ranges())
            elif word == "extensions":
                t.next()
                msg.extensions.extend(self._ranges())
            elif word == "extend":
                msg.extends.append(self._extend())
            elif word in ("optional", "required", "repeated"):
                t.next()
                msg.fields.append(self._field(word))
            elif word == "":
                raise _fail(f"message {msg.name!r} is not closed", t.line)
            else:
                msg.fields.append(self._field(None))
        return msg

    def _enum(self) -> ProtoEnum:
        t = self.t
        t.expect("enum")
        en = ProtoEnum(name=t.ident())
        t.expect("{")
        while not t.accept("}"):
            if t.peek() == "option":
                en.options.append(self._option_stmt())
            elif t.peek() == "reserved":
                t.next()
                en.reserved.extend(self._ranges())
            elif t.peek() == ";":
                t.next()
            elif t.peek() == "":
                raise _fail(f"enum {en.name!r} is not closed", t.line)
            else:
                name = t.ident()
                t.expect("=")
                number = t.integer()
                opts = self._field_options()
                t.expect(";")
                en.values.append((name, number, opts))
        return en

    def _extend(self) -> tuple[str, list[ProtoField]]:
        t = self.t
        t.expect("extend")
        target = t.ident()
        t.expect("{")
        fields: list[ProtoField] = []
        while not t.accept("}"):
            label = None
            if t.peek() in ("optional", "required", "repeated"):
                label = t.next()[1]
            fields.append(self._field(label))
        return target, fields

    def _service(self) -> tuple[str, list[str]]:
        t = self.t
        t.expect("service")
        name = t.ident()
        t.expect("{")
        lines: list[str] = []
        while not t.accept("}"):
            if t.peek() == "option":
                n, v = self._option_stmt()
                lines.append(f"option {n} = {v};")
            elif t.peek() == ";":
                t.next()
            else:
                t.expect("rpc")
                rpc = t.ident()
                t.expect("(")
                req = ("stream " if t.accept("stream") else "") + t.ident()
                t.expect(")")
                t.expect("returns")
                t.expect("(")
                res = ("stream " if t.accept("stream") else "") + t.ident()
                t.expect(")")
                body: list[str] = []
                if t.accept("{"):
                    while not t.accept("}"):
                        if t.peek() == ";":
                            t.next()
                            continue
                        n, v = self._option_stmt()
                        body.append(f"option {n} = {v};")
                else:
                    t.expect(";")
                lines.append(f"rpc {rpc}({req}) returns ({res})"
                             + (" { " + " ".join(body) + " }" if body else ";"))
        return name, lines


def parse_proto(text: str) -> ProtoFile:
    """Parse .proto text into a :class:`ProtoFile` (names not yet resolved).

    Raises:
        SchemaParseError: a syntax error (with its line); UnsupportedSchemaError: groups or
        editions.
    """
    if not isinstance(text, str):
        raise SchemaParseError("schema text must be a string", schema_type="PROTOBUF")
    return _Parser(text).parse()


def _index(types: list[ProtoMessage | ProtoEnum], scope: str,
           out: dict[str, ProtoMessage | ProtoEnum | None], package: str) -> None:
    for ty in types:
        full = f"{scope}.{ty.name}" if scope else ty.name
        ty.full_name = full
        ty.package = package
        if full in out:
            raise SchemaParseError(f"{full!r} is defined more than once",
                                   schema_type="PROTOBUF")
        out[full] = ty
        if isinstance(ty, ProtoMessage):
            _index(ty.types, full, out, package)


def parse_proto_schema(
    schema_str: str, references: Iterable[tuple[str, str]] = ()
) -> ProtoSchema:
    """Parse a schema and its imports (given as ``(import path, text)`` references).

    Every field type is resolved (protobuf scoping: innermost scope outwards), so a misspelt
    or missing type is reported here rather than silently compared by name.

    Raises:
        SchemaParseError: syntax error or duplicate definition; UnresolvedReferenceError: an
        import without a reference, or an unknown type; UnsupportedSchemaError: see
        :func:`parse_proto`.
    """
    files = {name: parse_proto(text) for name, text in references}
    root = parse_proto(schema_str)
    types: dict[str, ProtoMessage | ProtoEnum | None] = {}
    own: dict[str, ProtoMessage | ProtoEnum | None] = {}
    _index(root.types, root.package, own, root.package)
    seen: set[str] = set()

    def add_imports(f: ProtoFile) -> None:
        for path, _ in f.imports:
            if path in seen:
                continue
            seen.add(path)
            if path in files:
                imported = files[path]
                found: dict[str, ProtoMessage | ProtoEnum | None] = {}
                _index(imported.types, imported.package, found, imported.package)
                for k, v in found.items():
                    types.setdefault(k, v)
                add_imports(imported)
            elif path in WELL_KNOWN:
                for name in WELL_KNOWN[path]:
                    types.setdefault(name, None)
            else:
                raise UnresolvedReferenceError(
                    f"import {path!r} has no matching schema reference", schema_type="PROTOBUF")

    add_imports(root)
    types.update(own)
    schema = ProtoSchema(file=root, types=types, own=frozenset(own))
    for ty in root.types:
        _check_types(schema, ty)
    return schema


def resolve_type(schema: ProtoSchema, name: str, scope: str) -> str | None:
    """Resolve a type name used in ``scope`` (a full message name) to a full type name."""
    if name.startswith("."):
        return name[1:] if name[1:] in schema.types else None
    parts = scope.split(".") if scope else []
    while True:
        candidate = ".".join([*parts, name])
        if candidate in schema.types:
            return candidate
        if not parts:
            return None
        parts.pop()


def _check_types(schema: ProtoSchema, ty: ProtoMessage | ProtoEnum) -> None:
    if isinstance(ty, ProtoEnum):
        return
    members = list(ty.fields) + [f for o in ty.oneofs for f in o.fields]
    tags: set[int] = set()
    for f in members:
        if f.tag in tags:
            raise SchemaParseError(f"field number {f.tag} is used twice in {ty.full_name!r}",
                                   schema_type="PROTOBUF")
        tags.add(f.tag)
        names = [f.key_type, f.value_type] if f.key_type else [f.type]
        for n in names:
            if n not in SCALARS and resolve_type(schema, n, ty.full_name) is None:
                raise UnresolvedReferenceError(
                    f"unknown type {n!r} of field {ty.full_name}.{f.name}",
                    schema_type="PROTOBUF")
    for nested in ty.types:
        _check_types(schema, nested)
