"""A slow codec that walks the declarations at run time.

It implements the same wire rules as the compiled codec in :mod:`kontrakt.protocol.codec`
with none of its code generation, so tests can compare the two byte for byte. It is not
used on any hot path.
"""

from __future__ import annotations

import struct
from typing import Any

from kontrakt.errors import CorruptMessageError, UnsupportedVersionError
from kontrakt.protocol import primitives as P
from kontrakt.protocol.spec import Field, Struct, StructType, TypeSpec, struct_class

__all__ = ["interpreted_decode", "interpreted_encode"]

_FIXED = {
    "bool": P.BOOL, "int8": P.INT8, "int16": P.INT16, "uint16": P.UINT16,
    "int32": P.INT32, "uint32": P.UINT32, "int64": P.INT64, "float64": P.FLOAT64,
}


class _Walker:
    def __init__(self, root: type[Struct], version: int, flexible: bool) -> None:
        self.root = root
        self.v = version
        self.flex = flexible

    def cls(self, st: StructType) -> type[Struct]:
        return self.root if self.root.STRUCT is st else struct_class(st)

    # encode
    def enc(self, buf: bytearray, t: TypeSpec, value: Any, f: Field) -> None:
        nullable = self.v in f.nullable
        if value is None and not nullable and not (isinstance(t, str) and t in _FIXED):
            raise ValueError(f"field {f.name!r} cannot be None in this version")
        if isinstance(t, str):
            if t in _FIXED:
                buf += _FIXED[t].pack(value)
            elif t == "uuid":
                buf += value.bytes
            elif t == "string":
                (P.write_compact_string if self.flex else P.write_nullable_string)(buf, value)
            else:
                (P.write_compact_bytes if self.flex else P.write_nullable_bytes)(buf, value)
        elif isinstance(t, StructType):
            if nullable:
                if value is None:
                    buf.append(0xFF)
                    return
                buf.append(1)
            self.enc_struct(buf, t, value)
        else:
            if value is None:
                if self.flex:
                    buf.append(0)
                else:
                    buf += P.INT32.pack(-1)
                return
            if self.flex:
                P.write_uvarint(buf, len(value) + 1)
            else:
                buf += P.INT32.pack(len(value))
            element = Field("element", t.item)
            for item in value:
                self.enc(buf, t.item, item, element)

    def enc_struct(self, buf: bytearray, st: StructType, obj: Any) -> None:
        tags: dict[int, bytes] = dict(obj.unknown_tags or {})
        for f in st.fields:
            value = getattr(obj, f.name)
            if self.v not in f.versions:
                if not f.ignorable and value != f.default_value():
                    raise UnsupportedVersionError(
                        f"{self.cls(st).__name__}.{f.name} is set but version {self.v} "
                        "cannot carry it")
                continue
            if self.flex and self.v in f.tagged:
                if value != f.default_value():
                    t = bytearray()
                    self.enc(t, f.type, value, f)
                    assert f.tag is not None
                    tags[f.tag] = bytes(t)
                continue
            self.enc(buf, f.type, value, f)
        if self.flex:
            P.write_tagged_fields(buf, tags)

    # decode
    def dec(self, data: bytes, pos: int, t: TypeSpec, f: Field) -> tuple[Any, int]:
        nullable = self.v in f.nullable
        if isinstance(t, str):
            if t in _FIXED:
                s = _FIXED[t]
                return s.unpack_from(data, pos)[0], pos + s.size
            if t == "uuid":
                return P.read_uuid(data, pos)
            value: str | bytes | None
            if t == "string":
                value, pos = (P.read_compact_string if self.flex
                              else P.read_nullable_string)(data, pos)
            else:
                value, pos = (P.read_compact_bytes if self.flex
                              else P.read_nullable_bytes)(data, pos)
            if value is None and not nullable:
                raise CorruptMessageError(f"field {f.name!r} is null")
            return value, pos
        if isinstance(t, StructType):
            if nullable:
                if data[pos] == 0xFF:
                    return None, pos + 1
                pos += 1
            return self.dec_struct(data, pos, t)
        if self.flex:
            n, pos = P.read_uvarint(data, pos)
            n -= 1
        else:
            n = P.INT32.unpack_from(data, pos)[0]
            pos += 4
        if n < 0:
            if not nullable:
                raise CorruptMessageError(f"field {f.name!r} is null")
            return None, pos
        if n > len(data) - pos:
            raise CorruptMessageError(f"array {f.name} claims {n} elements")
        out = []
        element = Field("element", t.item)
        for _ in range(n):
            item, pos = self.dec(data, pos, t.item, element)
            out.append(item)
        return out, pos

    def dec_struct(self, data: bytes, pos: int, st: StructType) -> tuple[Any, int]:
        obj = object.__new__(self.cls(st))
        tagged: dict[int, Field] = {}
        for f in st.fields:
            if self.v not in f.versions:
                setattr(obj, f.name, f.default_value())
            elif self.flex and self.v in f.tagged:
                assert f.tag is not None
                tagged[f.tag] = f
                setattr(obj, f.name, f.default_value())
            else:
                value, pos = self.dec(data, pos, f.type, f)
                setattr(obj, f.name, value)
        unknown = None
        if self.flex:
            raw, pos = P.read_tagged_fields(data, pos)
            for tag, blob in raw.items():
                known = tagged.get(tag)
                if known is None:
                    unknown = unknown or {}
                    unknown[tag] = blob
                    continue
                value, end = self.dec(blob, 0, known.type, known)
                if end != len(blob):
                    raise CorruptMessageError(f"tagged field {known.name} has the wrong size")
                setattr(obj, known.name, value)
        obj.unknown_tags = unknown
        return obj, pos


def _flexible(cls: type[Struct], version: int) -> bool:
    flex = getattr(cls, "FLEXIBLE_VERSIONS", None)
    return flex is not None and version in flex


def interpreted_encode(msg: Struct, version: int) -> bytes:
    """Encode a message body by walking its declaration."""
    cls = type(msg)
    buf = bytearray()
    _Walker(cls, version, _flexible(cls, version)).enc_struct(buf, cls.STRUCT, msg)
    return bytes(buf)


def interpreted_decode(cls: type[Struct], version: int, data: bytes) -> Any:
    """Decode a whole message body by walking its declaration.

    Raises:
        CorruptMessageError: truncated or invalid bytes, or trailing bytes.
    """
    try:
        obj, end = _Walker(cls, version, _flexible(cls, version)).dec_struct(data, 0, cls.STRUCT)
    except (struct.error, IndexError) as exc:
        raise CorruptMessageError(f"truncated {cls.__name__} v{version}: {exc}") from None
    if end != len(data):
        raise CorruptMessageError(f"{cls.__name__} v{version}: trailing bytes")
    return obj
