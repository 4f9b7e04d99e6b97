"""Per-(message, version) encoders and decoders, compiled from the declarations on first use.

For each (message class, version) this module writes Python source for a flat ``encode``
and ``decode`` function (one pair per nested struct), compiles it once and caches it.
:func:`codec_source` shows the generated source for debugging. The interpreted walker in
:mod:`kontrakt.protocol._interpreted` implements the same rules slowly and is the oracle the
tests compare against.

Rules handled here once for every message:
- non-flexible versions: int16-length strings, int32-length bytes and arrays, -1 for null;
- flexible versions: compact strings/bytes/arrays (uvarint length + 1, 0 for null) and a
  tagged-field section after every struct; known tagged fields are written only when not
  at their default; unknown tags are kept in ``unknown_tags`` and written back.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable
from typing import Any

from kontrakt.errors import CorruptMessageError, UnsupportedVersionError
from kontrakt.protocol import primitives as P
from kontrakt.protocol.spec import (
    Field,
    Request,
    Response,
    Struct,
    StructType,
    TypeSpec,
    struct_class,
)

__all__ = [
    "StructCodec",
    "codec_for",
    "codec_source",
    "decode_struct",
    "encode_struct",
]

_FIXED: dict[str, tuple[str, int]] = {
    "bool": ("?", 1),
    "int8": ("b", 1),
    "int16": ("h", 2),
    "uint16": ("H", 2),
    "int32": ("i", 4),
    "uint32": ("I", 4),
    "int64": ("q", 8),
    "float64": ("d", 8),
}

Encoder = Callable[[bytearray, Any], None]
Decoder = Callable[[Any, int], "tuple[Any, int]"]


class StructCodec:
    """The compiled encoder and decoder of one struct class at one version."""

    __slots__ = ("cls", "decode", "encode", "flexible", "source", "version")

    def __init__(self, cls: type[Struct], version: int, flexible: bool,
                 encode: Encoder, decode: Decoder, source: str) -> None:
        self.cls = cls
        self.version = version
        self.flexible = flexible
        self.encode = encode
        self.decode = decode
        self.source = source


def _class_of(st: StructType, root: type[Struct]) -> type[Struct]:
    if root.STRUCT is st:
        return root
    return struct_class(st)


class _Gen:
    """Writes the source of every function needed for one (root struct, version)."""

    def __init__(self, root: type[Struct], version: int, flexible: bool) -> None:
        self.root = root
        self.version = version
        self.flexible = flexible
        self.lines: list[str] = []
        self.consts: dict[str, Any] = {}
        self.done: dict[int, str] = {}
        self.counter = 0

    def const(self, value: Any, hint: str = "c") -> str:
        self.counter += 1
        name = f"_{hint}{self.counter}"
        self.consts[name] = value
        return name

    def fn_name(self, st: StructType) -> str:
        key = id(st)
        if key not in self.done:
            self.done[key] = f"{st.name}_{len(self.done)}"
            self.gen_struct(st, self.done[key])
        return self.done[key]

    # --- encoding -------------------------------------------------------------------

    def enc_value(self, out: list[str], ind: str, t: TypeSpec, x: str, f: Field,
                  buf: str = "buf") -> None:
        """Emit code appending value expression ``x`` of type ``t`` to ``buf``."""
        v = self.version
        nullable = v in f.nullable
        if isinstance(t, str):
            if t in _FIXED:
                code, _ = _FIXED[t]
                s = self.const(struct.Struct(">" + code), "S")
                out.append(f"{ind}{buf} += {s}.pack({x})")
            elif t == "uuid":
                out.append(f"{ind}{buf} += {x}.bytes")
            elif t == "string":
                if not nullable:
                    out.append(f"{ind}if {x} is None: raise _null({f.name!r})")
                w = "write_compact_string" if self.flexible else "write_nullable_string"
                out.append(f"{ind}_P.{w}({buf}, {x})")
            elif t in ("bytes", "records"):
                if not nullable:
                    out.append(f"{ind}if {x} is None: raise _null({f.name!r})")
                w = "write_compact_bytes" if self.flexible else "write_nullable_bytes"
                out.append(f"{ind}_P.{w}({buf}, {x})")
            else:  # pragma: no cover - guarded by F()
                raise ValueError(t)
        elif isinstance(t, StructType):
            fn = self.fn_name(t)
            if nullable:
                out.append(f"{ind}if {x} is None: {buf}.append(0xff)")
                out.append(f"{ind}else:")
                out.append(f"{ind}    {buf}.append(1); enc_{fn}({buf}, {x})")
            else:
                out.append(f"{ind}if {x} is None: raise _null({f.name!r})")
                out.append(f"{ind}enc_{fn}({buf}, {x})")
        else:
            item = t.item
            self.counter += 1
            arr = f"a{self.counter}"
            out.append(f"{ind}{arr} = {x}")
            out.append(f"{ind}if {arr} is None:")
            if nullable:
                out.append(f"{ind}    {buf}.append(0)" if self.flexible
                           else f"{ind}    {buf} += b'\\xff\\xff\\xff\\xff'")
            else:
                out.append(f"{ind}    raise _null({f.name!r})")
            out.append(f"{ind}else:")
            ind2 = ind + "    "
            if self.flexible:
                out.append(f"{ind2}_P.write_uvarint({buf}, len({arr}) + 1)")
            else:
                out.append(f"{ind2}{buf} += _I32.pack(len({arr}))")
            if isinstance(item, str) and item in _FIXED:
                code, _ = _FIXED[item]
                out.append(f"{ind2}{buf} += _pack('>%d{code}' % len({arr}), *{arr})")
            elif isinstance(item, StructType):
                fn = self.fn_name(item)
                out.append(f"{ind2}for e in {arr}: enc_{fn}({buf}, e)")
            else:
                el = f"e{self.counter}"
                out.append(f"{ind2}for {el} in {arr}:")
                # Array elements are never nullable in Kafka's specifications.
                self.enc_value(out, ind2 + "    ", item, el, _ELEMENT, buf)

    def gen_struct(self, st: StructType, fn: str) -> None:
        v = self.version
        cls = _class_of(st, self.root)
        cls_name = self.const(cls, "K")
        present = [f for f in st.fields if v in f.versions]
        regular = [f for f in present if not (self.flexible and v in f.tagged)]
        tagged = sorted((f for f in present if self.flexible and v in f.tagged),
                        key=lambda f: f.tag or 0)
        absent = [f for f in st.fields if v not in f.versions]

        # encoder
        out = [f"def enc_{fn}(buf, o):"]
        for f in absent:
            if f.ignorable:
                continue
            d = self.const(f.default_value(), "D")
            out.append(f"    if o.{f.name} != {d}: raise _unsupported({cls_name}, "
                       f"{f.name!r}, {v})")
        run: list[Field] = []

        def flush_run() -> None:
            if not run:
                return
            fmt = ">" + "".join(_FIXED[f.type][0] for f in run)  # type: ignore[index]
            s = self.const(struct.Struct(fmt), "S")
            args = ", ".join(f"o.{f.name}" for f in run)
            out.append(f"    buf += {s}.pack({args})")
            run.clear()

        for f in regular:
            if isinstance(f.type, str) and f.type in _FIXED:
                run.append(f)
                continue
            flush_run()
            self.enc_value(out, "    ", f.type, f"o.{f.name}", f)
        flush_run()
        if self.flexible:
            if not tagged:
                out.append("    u = o.unknown_tags")
                out.append("    if u: _P.write_tagged_fields(buf, u)")
                out.append("    else: buf.append(0)")
            else:
                out.append("    tags = dict(o.unknown_tags) if o.unknown_tags else {}")
                for f in tagged:
                    d = self.const(f.default_value(), "D")
                    out.append(f"    if o.{f.name} != {d}:")
                    out.append("        t = bytearray()")
                    self.enc_value(out, "        ", f.type, f"o.{f.name}", f, "t")
                    out.append(f"        tags[{f.tag}] = bytes(t)")
                out.append("    if tags: _P.write_tagged_fields(buf, tags)")
                out.append("    else: buf.append(0)")
        out.append("    return None")
        self.lines.extend(out)
        self.lines.append("")

        # decoder
        out = [f"def dec_{fn}(data, pos):"]
        names: list[str] = []
        for f in regular:
            if isinstance(f.type, str) and f.type in _FIXED:
                run.append(f)
                continue
            self._flush_dec_run(out, run)
            self.dec_value(out, "    ", f.type, f"v_{f.name}", f)
            names.append(f.name)
        self._flush_dec_run(out, run)
        if self.flexible:
            for f in tagged:
                out.append(f"    v_{f.name} = {self.fresh_default(f)}")
            out.append("    unknown = None")
            out.append("    ntags, pos = _P.read_uvarint(data, pos)")
            out.append("    last = -1")
            out.append("    for _ in range(ntags):")
            out.append("        tag, pos = _P.read_uvarint(data, pos)")
            out.append("        if tag <= last: raise _corrupt('tagged fields out of order')")
            out.append("        last = tag")
            out.append("        size, pos = _P.read_uvarint(data, pos)")
            out.append("        end = pos + size")
            out.append("        if end > len(data): raise _corrupt('truncated tagged field')")
            first = True
            for f in tagged:
                kw = "if" if first else "elif"
                first = False
                out.append(f"        {kw} tag == {f.tag}:")
                self.dec_value(out, "            ", f.type, f"v_{f.name}", f)
                out.append("            if pos != end: raise _corrupt("
                           f"'tagged field {f.name} has the wrong size')")
            out.append("        " + ("else:" if tagged else "if True:"))
            out.append("            if unknown is None: unknown = {}")
            out.append("            unknown[tag] = bytes(data[pos:end])")
            out.append("            pos = end")
        out.append(f"    o = _new({cls_name})")
        for f in st.fields:
            if v in f.versions:
                out.append(f"    o.{f.name} = v_{f.name}")
            else:
                out.append(f"    o.{f.name} = {self.fresh_default(f)}")
        out.append("    o.unknown_tags = unknown" if self.flexible
                   else "    o.unknown_tags = None")
        out.append("    return o, pos")
        self.lines.extend(out)
        self.lines.append("")

    def fresh_default(self, f: Field) -> str:
        """An expression giving ``f``'s default; mutable defaults are built anew per call
        so decoded messages never share a list or struct."""
        d = f.default_value()
        if isinstance(d, list):
            return "[]" if not d else f"list({self.const(d, 'D')})"
        if isinstance(d, Struct):
            return f"{self.const(type(d), 'K')}()"
        return self.const(d, "D")

    def _flush_dec_run(self, out: list[str], run: list[Field]) -> None:
        if not run:
            return
        fmt = ">" + "".join(_FIXED[f.type][0] for f in run)  # type: ignore[index]
        s = self.const(struct.Struct(fmt), "S")
        targets = ", ".join(f"v_{f.name}" for f in run)
        if len(run) == 1:
            targets += ","
        out.append(f"    {targets} = {s}.unpack_from(data, pos)")
        out.append(f"    pos += {struct.calcsize(fmt)}")
        run.clear()

    # --- decoding -------------------------------------------------------------------

    def dec_value(self, out: list[str], ind: str, t: TypeSpec, target: str, f: Field) -> None:
        """Emit code decoding a value of type ``t`` at ``pos`` into ``target``."""
        v = self.version
        nullable = v in f.nullable
        if isinstance(t, str):
            if t in _FIXED:
                code, size = _FIXED[t]
                s = self.const(struct.Struct(">" + code), "S")
                out.append(f"{ind}{target}, = {s}.unpack_from(data, pos)")
                out.append(f"{ind}pos += {size}")
            elif t == "uuid":
                out.append(f"{ind}{target}, pos = _P.read_uuid(data, pos)")
            elif t == "string":
                r = "read_compact_string" if self.flexible else "read_nullable_string"
                out.append(f"{ind}{target}, pos = _P.{r}(data, pos)")
                if not nullable:
                    out.append(f"{ind}if {target} is None: raise _corrupt_null({f.name!r})")
            elif t in ("bytes", "records"):
                r = "read_compact_bytes" if self.flexible else "read_nullable_bytes"
                out.append(f"{ind}{target}, pos = _P.{r}(data, pos)")
                if not nullable:
                    out.append(f"{ind}if {target} is None: raise _corrupt_null({f.name!r})")
        elif isinstance(t, StructType):
            fn = self.fn_name(t)
            if nullable:
                out.append(f"{ind}if data[pos] == 0xff:")
                out.append(f"{ind}    {target} = None; pos += 1")
                out.append(f"{ind}else:")
                out.append(f"{ind}    {target}, pos = dec_{fn}(data, pos + 1)")
            else:
                out.append(f"{ind}{target}, pos = dec_{fn}(data, pos)")
        else:
            self.counter += 1
            n = f"n{self.counter}"
            if self.flexible:
                out.append(f"{ind}{n}, pos = _P.read_uvarint(data, pos)")
                out.append(f"{ind}{n} -= 1")
            else:
                out.append(f"{ind}{n}, = _I32.unpack_from(data, pos)")
                out.append(f"{ind}pos += 4")
            out.append(f"{ind}if {n} < 0:")
            if nullable:
                out.append(f"{ind}    {target} = None")
            else:
                out.append(f"{ind}    raise _corrupt_null({f.name!r})")
            # Every element takes at least one byte: a count beyond the remaining bytes
            # is corrupt, and checking it stops a hostile count from allocating memory.
            out.append(f"{ind}elif {n} > len(data) - pos:")
            out.append(f"{ind}    raise _corrupt('array {f.name} claims %d elements' % {n})")
            out.append(f"{ind}else:")
            ind2 = ind + "    "
            item = t.item
            if isinstance(item, str) and item in _FIXED:
                code, size = _FIXED[item]
                out.append(f"{ind2}{target} = list(_unpack_from('>%d{code}' % {n}, data, pos))")
                out.append(f"{ind2}pos += {size} * {n}")
            elif isinstance(item, StructType):
                fn = self.fn_name(item)
                lst = f"l{self.counter}"
                out.append(f"{ind2}{lst} = []")
                out.append(f"{ind2}for _ in range({n}):")
                out.append(f"{ind2}    e, pos = dec_{fn}(data, pos)")
                out.append(f"{ind2}    {lst}.append(e)")
                out.append(f"{ind2}{target} = {lst}")
            else:
                lst = f"l{self.counter}"
                el = f"e{self.counter}"
                out.append(f"{ind2}{lst} = []")
                out.append(f"{ind2}for _ in range({n}):")
                self.dec_value(out, ind2 + "    ", item, el, _ELEMENT)
                out.append(f"{ind2}    {lst}.append({el})")
                out.append(f"{ind2}{target} = {lst}")


_ELEMENT = Field(name="element", type="int8")


def _null(name: str) -> Exception:
    return ValueError(f"field {name!r} cannot be None in this version")


def _corrupt(msg: str) -> Exception:
    return CorruptMessageError(msg)


def _corrupt_null(name: str) -> Exception:
    return CorruptMessageError(f"field {name!r} is null but the version does not allow it")


def _unsupported(cls: type[Struct], name: str, version: int) -> Exception:
    return UnsupportedVersionError(
        f"{cls.__name__}.{name} is set but version {version} cannot carry it"
    )


def _compile(cls: type[Struct], version: int, flexible: bool) -> StructCodec:
    gen = _Gen(cls, version, flexible)
    root = gen.fn_name(cls.STRUCT)
    source = "\n".join(gen.lines)
    ns: dict[str, Any] = {
        "_P": P,
        "_I32": P.INT32,
        "_pack": struct.pack,
        "_unpack_from": struct.unpack_from,
        "_new": object.__new__,
        "_null": _null,
        "_corrupt": _corrupt,
        "_corrupt_null": _corrupt_null,
        "_unsupported": _unsupported,
        **gen.consts,
    }
    code = compile(source, f"<kontrakt codec {cls.__name__} v{version}>", "exec")
    exec(code, ns)
    return StructCodec(cls, version, flexible, ns[f"enc_{root}"], ns[f"dec_{root}"], source)


_CACHE: dict[tuple[type[Struct], int, bool], StructCodec] = {}
_LOCK = threading.Lock()


def _is_flexible(cls: type[Struct], version: int) -> bool:
    flex = getattr(cls, "FLEXIBLE_VERSIONS", None)
    return flex is not None and version in flex


def codec_for(cls: type[Struct], version: int, flexible: bool | None = None) -> StructCodec:
    """The compiled codec of ``cls`` at ``version``, built on first use and cached.

    Args:
        cls: a message class (request or response) or nested struct class.
        version: the API version.
        flexible: override whether the version is flexible (needed only for nested
            struct classes used on their own, e.g. headers).

    Raises:
        UnsupportedVersionError: ``version`` is outside the message's valid versions.
    """
    if flexible is None:
        flexible = _is_flexible(cls, version)
    key = (cls, version, flexible)
    codec = _CACHE.get(key)
    if codec is not None:
        return codec
    valid = getattr(cls, "VALID_VERSIONS", None)
    if valid is not None and version not in valid:
        raise UnsupportedVersionError(
            f"{cls.__name__} has no version {version} (valid: {valid})"
        )
    with _LOCK:
        codec = _CACHE.get(key)
        if codec is None:
            codec = _compile(cls, version, flexible)
            _CACHE[key] = codec
    return codec


def codec_source(cls: type[Struct], version: int) -> str:
    """The generated Python source of ``cls`` at ``version`` (for debugging)."""
    return codec_for(cls, version).source


def encode_struct(msg: Struct, version: int, flexible: bool | None = None) -> bytes:
    """Encode a message body (no header, no size prefix)."""
    buf = bytearray()
    codec_for(type(msg), version, flexible).encode(buf, msg)
    return bytes(buf)


def decode_struct(cls: type[Struct], version: int, data: bytes | bytearray | memoryview,
                  pos: int = 0, *, flexible: bool | None = None,
                  exact: bool = True) -> Any:
    """Decode a message body of ``cls`` at ``version``.

    Args:
        exact: require the body to end exactly at the end of ``data``.

    Raises:
        CorruptMessageError: the bytes are truncated or invalid.
    """
    codec = codec_for(cls, version, flexible)
    try:
        obj, end = codec.decode(data, pos)
    except (struct.error, IndexError) as exc:
        raise CorruptMessageError(
            f"truncated or invalid {cls.__name__} v{version}: {exc}"
        ) from None
    if exact and end != len(data):
        raise CorruptMessageError(
            f"{cls.__name__} v{version}: {len(data) - end} unexpected trailing bytes"
        )
    return obj


# Re-exported for type checkers that look up the message base classes here.
_ = (Request, Response)
