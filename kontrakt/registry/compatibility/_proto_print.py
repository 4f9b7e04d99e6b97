"""Canonical .proto printing, used to normalize Protobuf schemas.

Layout: syntax, package, imports (sorted), file options (sorted), then messages and enums in
declaration order (their position is part of the wire format: message indexes), services and
extends. Inside a message: options (sorted), fields and oneofs by field number, nested types in
declaration order, reserved and extension ranges. Comments and whitespace are dropped.
"""

from __future__ import annotations

from kontrakt.registry.compatibility._proto_parser import (
    ProtoEnum,
    ProtoField,
    ProtoFile,
    ProtoMessage,
    ProtoOneOf,
)

__all__ = ["print_proto"]

_INDENT = "  "


def _opts(options: list[tuple[str, str]]) -> str:
    if not options:
        return ""
    return " [" + ", ".join(f"{n} = {v}" for n, v in sorted(options)) + "]"


def _field(f: ProtoField, depth: int) -> str:
    label = f"{f.label} " if f.label else ""
    return f"{_INDENT * depth}{label}{f.type} {f.name} = {f.tag}{_opts(f.options)};"


def _oneof(o: ProtoOneOf, depth: int) -> list[str]:
    pad = _INDENT * depth
    lines = [f"{pad}oneof {o.name} {{"]
    lines += [f"{pad}{_INDENT}option {n} = {v};" for n, v in sorted(o.options)]
    lines += [_field(f, depth + 1) for f in sorted(o.fields, key=lambda f: f.tag)]
    return [*lines, f"{pad}}}"]


def _reserved(pad: str, items: list[str]) -> list[str]:
    # protoc accepts numbers and names only in separate ``reserved`` statements.
    numbers = [i for i in items if not i.startswith('"')]
    names = [i for i in items if i.startswith('"')]
    return [f"{pad}reserved {', '.join(group)};" for group in (numbers, names) if group]


def _type(t: ProtoMessage | ProtoEnum, depth: int) -> list[str]:
    pad = _INDENT * depth
    if isinstance(t, ProtoEnum):
        lines = [f"{pad}enum {t.name} {{"]
        lines += [f"{pad}{_INDENT}option {n} = {v};" for n, v in sorted(t.options)]
        lines += [f"{pad}{_INDENT}{n} = {num}{_opts(o)};" for n, num, o in t.values]
        lines += _reserved(pad + _INDENT, t.reserved)
        return [*lines, f"{pad}}}"]
    lines = [f"{pad}message {t.name} {{"]
    lines += [f"{pad}{_INDENT}option {n} = {v};" for n, v in sorted(t.options)]
    members: list[tuple[int, list[str]]] = [(f.tag, [_field(f, depth + 1)]) for f in t.fields]
    members += [(min((f.tag for f in o.fields), default=0), _oneof(o, depth + 1))
                for o in t.oneofs]
    for _, block in sorted(members, key=lambda m: m[0]):
        lines += block
    for nested in t.types:
        lines += _type(nested, depth + 1)
    lines += _reserved(pad + _INDENT, t.reserved)
    if t.extensions:
        lines.append(f"{pad}{_INDENT}extensions {', '.join(t.extensions)};")
    for target, fields in t.extends:
        lines.append(f"{pad}{_INDENT}extend {target} {{")
        lines += [_field(f, depth + 2) for f in sorted(fields, key=lambda f: f.tag)]
        lines.append(f"{pad}{_INDENT}}}")
    return [*lines, f"{pad}}}"]


def print_proto(f: ProtoFile) -> str:
    """Print a parsed file in canonical form (ends with a newline)."""
    lines = [f'syntax = "{f.syntax}";']
    if f.package:
        lines.append(f"package {f.package};")
    for path, kind in sorted(f.imports):
        lines.append(f'import {kind + " " if kind else ""}"{path}";')
    lines += [f"option {n} = {v};" for n, v in sorted(f.options)]
    for t in f.types:
        lines += _type(t, 0)
    for name, rpcs in f.services:
        lines.append(f"service {name} {{")
        lines += [f"{_INDENT}{r}" for r in rpcs]
        lines.append("}")
    for target, fields in f.extends:
        lines.append(f"extend {target} {{")
        lines += [_field(x, 1) for x in sorted(fields, key=lambda x: x.tag)]
        lines.append("}")
    return "\n".join(lines) + "\n"
