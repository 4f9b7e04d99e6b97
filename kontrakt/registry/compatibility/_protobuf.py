"""Protobuf compatibility: Confluent's difference-based rules over parsed .proto files.

Differences between the original and the update get Confluent's type names.

Compatible: a changed package (names are not on the wire), adding or moving messages, adding
or removing enums and enum constants, adding, removing or renaming (optional) fields, changing
the label of a string/bytes or message field, adding or removing oneofs (a oneof deleted with
all its members), adding oneof members, moving a member out of its oneof.

Incompatible: a removed message, a field whose kind (scalar / message / map) or wire-compatible
scalar group changes, a message-typed field whose type is renamed or changes incompatibly,
adding or removing a required field, removing a oneof member (also when its oneof is renamed or
merged and other members survive), a oneof whose existing members come from more than one
original group (a top-level field each, or one original oneof): several top-level fields moved
into one oneof, or fields joined from different oneofs / a oneof and a top-level field, and
changing a numeric field between repeated and singular (packed encoding).

Fields are compared by number across the whole message, whatever oneof holds them, so a
renamed or merged oneof cannot hide a change (Confluent's current MessageSchemaDiff).

Scalar groups (values of one group can be read as another): int32/int64/uint32/uint64/bool and
enums; sint32/sint64; string/bytes; fixed32/sfixed32; fixed64/sfixed64; float; double.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kontrakt.registry.compatibility._proto_parser import (
    SCALARS,
    ProtoEnum,
    ProtoField,
    ProtoMessage,
    ProtoOneOf,
    ProtoSchema,
    resolve_type,
)

__all__ = ["COMPATIBLE_CHANGES", "protobuf_issues"]

COMPATIBLE_CHANGES = frozenset({
    # The package is not on the wire; current Confluent releases accept a changed package.
    "PACKAGE_CHANGED",
    "MESSAGE_ADDED", "MESSAGE_MOVED", "ENUM_ADDED", "ENUM_REMOVED", "ENUM_CONST_ADDED",
    "ENUM_CONST_CHANGED", "ENUM_CONST_REMOVED", "FIELD_ADDED", "FIELD_REMOVED",
    "FIELD_NAME_CHANGED", "FIELD_STRING_OR_BYTES_LABEL_CHANGED", "ONEOF_ADDED",
    "ONEOF_REMOVED", "ONEOF_FIELD_ADDED", "ONEOF_FIELD_MOVED_TO_TOP_LEVEL",
})
_GROUPS = {
    "int32": "GENERAL_NUMBER", "int64": "GENERAL_NUMBER", "uint32": "GENERAL_NUMBER",
    "uint64": "GENERAL_NUMBER", "bool": "GENERAL_NUMBER", "sint32": "SIGNED_NUMBER",
    "sint64": "SIGNED_NUMBER", "string": "STRING_OR_BYTES", "bytes": "STRING_OR_BYTES",
    "fixed32": "FIXED32", "sfixed32": "FIXED32", "fixed64": "FIXED64", "sfixed64": "FIXED64",
    "float": "FLOAT", "double": "DOUBLE",
}
_EXPLAIN = {
    "MESSAGE_REMOVED": "a message was removed",
    "FIELD_KIND_CHANGED": "the field's kind changed (scalar, message or map)",
    "FIELD_SCALAR_KIND_CHANGED": "the field's type changed to one that is not wire-compatible",
    "FIELD_NAMED_TYPE_CHANGED": "the field's message type changed",
    "FIELD_NUMERIC_LABEL_CHANGED": "a numeric field changed between repeated and singular",
    "REQUIRED_FIELD_ADDED": "a required field was added",
    "REQUIRED_FIELD_REMOVED": "a required field was removed",
    "ONEOF_FIELD_REMOVED": "a field was removed from a oneof",
    "MULTIPLE_FIELDS_MOVED_TO_ONEOF": "several existing fields were moved into one oneof",
    "FIELD_MOVED_TO_EXISTING_ONEOF": "a field was moved into an existing oneof",
}


@dataclass
class _Ctx:
    original: ProtoSchema
    update: ProtoSchema
    path: list[str] = field(default_factory=lambda: ["#"])
    diffs: list[tuple[str, str]] = field(default_factory=list)
    visiting: set[tuple[int, int]] = field(default_factory=set)

    def add(self, dtype: str, *leaf: str) -> None:
        self.diffs.append((dtype, "/".join([*self.path, *leaf])))

    def sub(self) -> _Ctx:
        return _Ctx(self.original, self.update, list(self.path), [], self.visiting)

    @property
    def is_compatible(self) -> bool:
        return all(d in COMPATIBLE_CHANGES for d, _ in self.diffs)


def _compare_types(ctx: _Ctx, original: list[ProtoMessage | ProtoEnum],
                   update: list[ProtoMessage | ProtoEnum]) -> None:
    def split(types: list[ProtoMessage | ProtoEnum]) -> tuple[
            dict[str, tuple[int, ProtoMessage]], dict[str, ProtoEnum]]:
        messages = [t for t in types if isinstance(t, ProtoMessage)]
        enums = {t.name: t for t in types if isinstance(t, ProtoEnum)}
        return {m.name: (i, m) for i, m in enumerate(messages)}, enums

    omsgs, oenums = split(original)
    umsgs, uenums = split(update)
    for name in dict.fromkeys([*omsgs, *umsgs]):
        ctx.path.append(name)
        try:
            if name not in umsgs:
                ctx.add("MESSAGE_REMOVED")
            elif name not in omsgs:
                ctx.add("MESSAGE_ADDED")
            else:
                _compare_message(ctx, omsgs[name][1], umsgs[name][1])
                if omsgs[name][0] != umsgs[name][0]:
                    # Serialized message indexes refer to the schema id's own layout.
                    ctx.add("MESSAGE_MOVED")
        finally:
            ctx.path.pop()
    for name in dict.fromkeys([*oenums, *uenums]):
        ctx.path.append(name)
        try:
            if name not in uenums:
                ctx.add("ENUM_REMOVED")
            elif name not in oenums:
                ctx.add("ENUM_ADDED")
            else:
                before = {num: n for n, num, _ in oenums[name].values}
                after = {num: n for n, num, _ in uenums[name].values}
                for num in sorted(set(before) | set(after)):
                    if num not in after:
                        ctx.add("ENUM_CONST_REMOVED", str(num))
                    elif num not in before:
                        ctx.add("ENUM_CONST_ADDED", str(num))
                    elif before[num] != after[num]:
                        ctx.add("ENUM_CONST_CHANGED", str(num))
        finally:
            ctx.path.pop()


def _compare_message(ctx: _Ctx, original: ProtoMessage, update: ProtoMessage) -> None:
    key = (id(original), id(update))
    if key not in ctx.visiting:
        ctx.visiting.add(key)
        try:
            _compare_fields(ctx, original, update)
        finally:
            ctx.visiting.discard(key)
    _compare_types(ctx, original.types, update.types)


def _compare_fields(ctx: _Ctx, original: ProtoMessage, update: ProtoMessage) -> None:
    # Every field is compared by number across the whole message, whatever oneof holds it, so
    # that a oneof renamed, merged or left cannot hide a removal or a type change.
    o_all, o_oneof_of, o_oneofs = _members(original)
    u_all, u_oneof_of, u_oneofs = _members(update)
    # A oneof gone by name with none of its members left anywhere was deleted as a whole (old
    # data under it is ignored, as for removed fields); one whose members partly survive lost
    # the others.
    deleted = {name for name, oneof in o_oneofs.items()
               if name not in u_oneofs and not any(f.tag in u_all for f in oneof.fields)}
    for oneof in update.oneofs:
        # Old data may set any two fields that were not in one oneof: a oneof whose existing
        # members come from more than one such group makes them exclude each other.
        groups: set[tuple[str, object]] = set()
        moved_in = 0
        for f in oneof.fields:
            if f.tag in o_oneof_of:
                groups.add(("oneof", o_oneof_of[f.tag]))
            elif f.tag in o_all:
                groups.add(("field", f.tag))
                moved_in += 1
        if len(groups) > 1:
            ctx.add("MULTIPLE_FIELDS_MOVED_TO_ONEOF" if moved_in > 1
                    else "FIELD_MOVED_TO_EXISTING_ONEOF", oneof.name)
    for name in sorted(set(o_oneofs) | set(u_oneofs)):
        if name not in u_oneofs:
            ctx.add("ONEOF_REMOVED", name)
        elif name not in o_oneofs:
            ctx.add("ONEOF_ADDED", name)
    for tag in sorted(set(o_all) | set(u_all)):
        of, uf = o_all.get(tag), u_all.get(tag)
        oo, uo = o_oneof_of.get(tag), u_oneof_of.get(tag)
        if uf is None:
            assert of is not None
            if oo is None:
                ctx.add("REQUIRED_FIELD_REMOVED" if of.label == "required" else "FIELD_REMOVED",
                        str(tag))
            elif oo not in deleted:
                ctx.add("ONEOF_FIELD_REMOVED", oo, str(tag))
        elif of is None:
            if uo is not None:
                ctx.add("ONEOF_FIELD_ADDED", uo, str(tag))
            else:
                ctx.add("REQUIRED_FIELD_ADDED" if uf.label == "required" else "FIELD_ADDED",
                        str(tag))
        else:
            if oo is not None and uo is None:
                # Out of a oneof: same number and type, only the exclusion is relaxed.
                ctx.add("ONEOF_FIELD_MOVED_TO_TOP_LEVEL", str(tag))
            # Reported where the field is now: under its oneof when it is a member.
            _compare_field(ctx, of, uf, original, update, *((uo,) if uo is not None else ()))


def _members(message: ProtoMessage) -> tuple[
        dict[int, ProtoField], dict[int, str], dict[str, ProtoOneOf]]:
    """Every field by number (top level and oneof members), each member's oneof, the oneofs."""
    by_tag = {f.tag: f for f in message.fields}
    oneof_of: dict[int, str] = {}
    for oneof in message.oneofs:
        for f in oneof.fields:
            by_tag[f.tag] = f
            oneof_of[f.tag] = oneof.name
    return by_tag, oneof_of, {o.name: o for o in message.oneofs}


def _kind(schema: ProtoSchema, ftype: str, scope: str) -> tuple[str, str]:
    if ftype in SCALARS:
        return "SCALAR", _GROUPS[ftype]
    if ftype.startswith("map<"):
        return "MAP", ftype
    full = resolve_type(schema, ftype, scope) or ftype
    if isinstance(schema.types.get(full), ProtoEnum):
        return "SCALAR", "GENERAL_NUMBER"
    return "MESSAGE", full


def _compare_field(ctx: _Ctx, of: ProtoField, uf: ProtoField, om: ProtoMessage,
                   um: ProtoMessage, *prefix: str) -> None:
    leaf = [*prefix, str(of.tag)]
    if of.name != uf.name:
        ctx.add("FIELD_NAME_CHANGED", *leaf)
    if (of.label == "repeated") != (uf.label == "repeated") and not of.type.startswith("map<"):
        okind = _kind(ctx.original, of.type, om.full_name)
        if okind == ("SCALAR", "STRING_OR_BYTES"):
            ctx.add("FIELD_STRING_OR_BYTES_LABEL_CHANGED", *leaf)
        elif okind[0] == "SCALAR":
            ctx.add("FIELD_NUMERIC_LABEL_CHANGED", *leaf)
    _compare_type(ctx, of, uf, om.full_name, um.full_name, leaf)


def _compare_type(ctx: _Ctx, of: ProtoField, uf: ProtoField, oscope: str, uscope: str,
                  leaf: list[str]) -> None:
    okind = _kind(ctx.original, of.type, oscope)
    ukind = _kind(ctx.update, uf.type, uscope)
    if okind[0] != ukind[0]:
        ctx.add("FIELD_KIND_CHANGED", *leaf)
        return
    if okind[0] == "SCALAR":
        if okind[1] != ukind[1]:
            ctx.add("FIELD_SCALAR_KIND_CHANGED", *leaf)
        return
    if okind[0] == "MAP":
        for attr in ("key_type", "value_type"):
            ot, ut = getattr(of, attr), getattr(uf, attr)
            _compare_type(ctx, ProtoField(of.name, ot, of.tag), ProtoField(uf.name, ut, uf.tag),
                          oscope, uscope, leaf)
        return
    _compare_named(ctx, okind[1], ukind[1], leaf)


def _compare_named(ctx: _Ctx, ofull: str, ufull: str, leaf: list[str]) -> None:
    otype, utype = ctx.original.types.get(ofull), ctx.update.types.get(ufull)
    olocal = _local(ofull, otype)
    ulocal = _local(ufull, utype)
    if olocal != ulocal:
        ctx.add("FIELD_NAMED_TYPE_CHANGED", *leaf)
        return
    if not isinstance(otype, ProtoMessage) or not isinstance(utype, ProtoMessage):
        return  # well-known types: the same name is the same type
    sub = ctx.sub()
    sub.path = ["#", *olocal.split(".")]
    _compare_message(sub, otype, utype)
    ctx.diffs.extend(sub.diffs)
    if not sub.is_compatible:
        ctx.add("FIELD_NAMED_TYPE_CHANGED", *leaf)


def _local(full: str, ty: ProtoMessage | ProtoEnum | None) -> str:
    package = ty.package if ty is not None else ""
    return full[len(package) + 1:] if package and full.startswith(package + ".") else full


def protobuf_issues(
    original: ProtoSchema,
    update: ProtoSchema,
    *,
    original_role: str = "old",
    update_role: str = "new",
) -> list[tuple[str, str, str, str]]:
    """Incompatible differences from ``original`` to ``update``.

    Returns:
        ``(error_type, path, description, additional_info)`` per incompatible difference; the
        path is ``#/<Message>/<field number>``.
    """
    ctx = _Ctx(original, update)
    if original.file.package != update.file.package:
        ctx.add("PACKAGE_CHANGED")
    _compare_types(ctx, original.file.types, update.file.types)
    out: list[tuple[str, str, str, str]] = []
    for dtype, path in ctx.diffs:
        if dtype in COMPATIBLE_CHANGES:
            continue
        explain = _EXPLAIN.get(dtype, dtype.lower().replace("_", " "))
        desc = (f"{explain[0].upper()}{explain[1:]} at path '{path}' (comparing the "
                f"{original_role} schema with the {update_role} schema)")
        item = (dtype, path, desc, path)
        if item not in out:
            out.append(item)
    return out
