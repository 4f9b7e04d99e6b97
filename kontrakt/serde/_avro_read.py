"""A compiled Avro reader per writer schema, returning what fastavro's ``schemaless_reader``
returns.

fastavro costs ~14.5 µs to read the 11-field ``Trade`` record of ``benchmarks/serde.py``.
:func:`compile_reader` turns a parsed writer schema into Python source specialised to it (one
function per named record, everything else inline, varints decoded without a call) that
builds the same dicts, lists and values, with fastavro's own logical-type readers applied
(``datetime`` with its timezone, ``Decimal``, ``UUID`` ...), and with fastavro's
``return_record_name`` tuples.

Only what the compiled code can decode with certainty is decoded: any anomaly (a truncated
payload, a union or enum index out of range, a varint beyond 64 bits, invalid UTF-8) raises,
and the caller decodes the payload again with fastavro, which either gives the value or
raises the error it raises today. Of schema resolution, the common evolution of a record is
compiled (fields added with a default, removed, or renamed by alias, the others keeping their
types, named types included, or promoted between primitives: int -> long -> float -> double,
string <-> bytes, a primitive made an optional union); any other reader schema is left to
fastavro.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from fastavro._logical_readers import LOGICAL_READERS

from kontrakt.serde._avro_bounds import collect_named_types
from kontrakt.serde._avro_codegen import (
    LENGTH_BYTE,
    PRIMITIVES,
    ZIGZAG_BYTE,
    AvroSource,
    NotCompiled,
    kind_of,
    split_varint_lines,
)

__all__ = ["Corrupt", "compile_reader"]

Reader = Callable[[bytes, int], tuple[Any, int]]


class Corrupt(Exception):
    """The compiled reader cannot decode the payload (the caller asks fastavro)."""


_FAIL = "CORRUPT"
_KINDS = (*PRIMITIVES, "record", "error", "enum", "fixed", "array", "map")


class _ReaderGen(AvroSource):
    def __init__(self, schema: Any, return_record_name: bool) -> None:
        super().__init__(schema, {
            "CORRUPT": Corrupt, "ZZ": ZIGZAG_BYTE, "ZL": LENGTH_BYTE,
            "UF": struct.Struct("<f").unpack_from, "UD": struct.Struct("<d").unpack_from,
        })
        self.return_record_name = return_record_name
        self.records: dict[str, str] = {}
        self.reader_named: dict[str, Any] = {}

    def varint(self, out: list[str], ind: str, var: str, length: bool = False) -> None:
        out += split_varint_lines(ind, var, _FAIL, length)

    def sized(self, out: list[str], ind: str, n: str, var: str, decode: bool = False) -> None:
        """``var = data[pos:pos+n]`` (``decode``: as UTF-8 text); ``n``: a constant or a count
        read by ``varint(..., length=True)``, never negative.

        A slice past the end is cut short by Python and leaves ``pos`` past ``len(data)``,
        where it stays (no count is negative, every other read past the end raises): the
        entry function refuses such a ``pos`` once, before it returns (one test a record,
        not one a string).
        """
        suffix = ".decode()" if decode else ""
        out += [f"{ind}end = pos + {n}", f"{ind}{var} = data[pos:end]{suffix}", f"{ind}pos = end"]

    def value(self, out: list[str], ind: str, s: Any, var: str) -> None:
        """Source reading one value of schema ``s`` into variable ``var``."""
        s = self.deref(s)
        kind = kind_of(s)
        if kind == "null":
            out.append(f"{ind}{var} = None")
        elif kind == "boolean":
            out += [f"{ind}{var} = data[pos] != 0", f"{ind}pos += 1"]
        elif kind in ("int", "long"):
            self.varint(out, ind, var)
        elif kind == "float":
            out += [f"{ind}{var} = UF(data, pos)[0]", f"{ind}pos += 4"]
        elif kind == "double":
            out += [f"{ind}{var} = UD(data, pos)[0]", f"{ind}pos += 8"]
        elif kind in ("string", "bytes"):
            n = self.tmp("n")
            self.varint(out, ind, n, length=True)
            self.sized(out, ind, n, var, decode=kind == "string")
        elif kind == "fixed":
            self.sized(out, ind, str(int(s["size"])), var)
        elif kind == "enum":
            symbols = tuple(s["symbols"])
            i = self.tmp("i")
            self.varint(out, ind, i)
            out += [f"{ind}if not 0 <= {i} < {len(symbols)}: raise {_FAIL}",
                    f"{ind}{var} = {self.const(symbols)}[{i}]"]
        elif kind in ("array", "map"):
            self.collection(out, ind, s, kind, var)
        elif kind in ("record", "error"):
            out.append(f"{ind}{var}, pos = {self.record(s)}(data, pos)")
        elif kind == "union":
            self.union(out, ind, s, var)
        else:
            raise NotCompiled(f"no reader for Avro type {kind!r}")
        if isinstance(s, dict) and "logicalType" in s and kind not in ("record", "error"):
            convert = LOGICAL_READERS.get(f"{kind}-{s['logicalType']}")
            if convert is not None:
                out.append(f"{ind}{var} = {self.const(convert)}({var}, {self.const(s)}, None)")

    def collection(self, out: list[str], ind: str, s: dict[str, Any], kind: str,
                   var: str) -> None:
        k, item = self.tmp("k"), self.tmp("x")
        out.append(f"{ind}{var} = {{}}" if kind == "map" else f"{ind}{var} = []")
        out.append(f"{ind}while True:")
        inner = ind + "    "
        self.varint(out, inner, k)
        out += [f"{inner}if {k} == 0: break", f"{inner}if {k} < 0:",
                f"{inner}    {k} = -{k}"]
        self.varint(out, inner + "    ", "_")  # the block's size in bytes: not needed
        # More items than the payload has bytes cannot be (a zero-byte item type has every
        # payload checked by AvroBounds first); refusing them keeps a garbage count from
        # looping long. The items are counted down in a while loop: a range() costs ~1,000
        # instructions a block more.
        out += [f"{inner}if {k} > ln: raise {_FAIL}",
                f"{inner}while {k}:", f"{inner}    {k} -= 1"]
        body = inner + "    "
        if kind == "map":
            key, n = self.tmp("key"), self.tmp("n")
            self.varint(out, body, n, length=True)
            self.sized(out, body, n, key, decode=True)
            self.value(out, body, s["values"], item)
            out.append(f"{body}{var}[{key}] = {item}")
        else:
            self.value(out, body, s["items"], item)
            out.append(f"{body}{var}.append({item})")

    def record(self, s: dict[str, Any], reader: dict[str, Any] | None = None,
               entry: bool = False) -> str:
        """The name of the function reading record ``s`` (made on first use); with
        ``reader``, resolved to that reader record as fastavro's ``read_record`` does."""
        name = str(s.get("name"))
        key = name if reader is None else "\0resolved"
        if key in self.records:
            return self.records[key]
        fn = self.tmp("r")
        self.records[key] = fn  # before the body: a recursive record calls itself
        body = [f"def {fn}(data, pos):", "    ln = len(data)"]
        names: list[tuple[str | None, str]] = []
        fields = list(s["fields"])
        targets, defaults, promotions = self.resolve_fields(s, reader)
        while fields:
            run = self.fixed_width_run(fields)
            if len(run) > 1:
                # Neighbouring floats, doubles and booleans: one unpack for all of them.
                fmt = "<" + "".join(code for _, code, _ in run)
                vs = [self.tmp("v") for _ in run]
                body += [f"    {', '.join(vs)}, = {self.const(struct.Struct(fmt).unpack_from)}"
                         f"(data, pos)", f"    pos += {struct.calcsize(fmt)}"]
                names += [(targets[f["name"]], v) for (f, _, _), v in zip(run, vs, strict=True)]
                del fields[:len(run)]
                continue
            f = fields.pop(0)
            v = self.tmp("v")
            # A field the reader does not have is decoded and dropped: whatever the
            # decoding refuses, fastavro (which only skips it) reads instead.
            self.value(body, "    ", f["type"], v)
            convert = promotions.get(f["name"], "{}")
            if convert != "{}":
                body.append(f"    {v} = {convert.format(v)}")
            names.append((targets[f["name"]], v))
        names += [(n, self.const(d)) for n, d in defaults]
        items = ", ".join(f"{n!r}: {v}" for n, v in names if n is not None)
        if entry:
            body.append(f"    if pos > ln: raise {_FAIL}")  # see sized()
        body.append(f"    return {{{items}}}, pos")
        self.functions.append("\n".join(body))
        return fn

    def resolve_fields(self, s: dict[str, Any], reader: dict[str, Any] | None
                       ) -> tuple[dict[str, str | None], list[tuple[str, Any]], dict[str, str]]:
        """Writer field name -> the reader field it fills (None: dropped); the reader's
        fields filled from their defaults, in fastavro's order; and writer field name -> the
        expression (``{}``: the value) converting a promoted field as fastavro's
        ``maybe_promote`` does."""
        if reader is None:
            return {f["name"]: f["name"] for f in s["fields"]}, [], {}
        if reader.get("name") != s.get("name") or kind_of(reader) != kind_of(s):
            raise NotCompiled("the reader record has another name")
        by_name = {f["name"]: f for f in reader["fields"]}
        by_alias = {a: f for f in reader["fields"] for a in f.get("aliases", ())}
        targets: dict[str, str | None] = {}
        promotions: dict[str, str] = {}
        left = dict(by_name)
        for f in s["fields"]:
            match = by_name.get(f["name"], by_alias.get(f["name"]))
            if match is None:
                targets[f["name"]] = None
                continue
            if match["name"] not in left:
                raise NotCompiled("two writer fields fill one reader field")
            if self.expand(f["type"], self.named, ()) != self.expand(
                    match["type"], self.reader_named, ()):
                convert = _promotion(f["type"], match["type"])
                if convert is None:
                    raise NotCompiled(f"field {f['name']!r} changes type")
                promotions[f["name"]] = convert
            targets[f["name"]] = match["name"]
            del left[match["name"]]
        for f in left.values():
            if "default" not in f:
                raise NotCompiled(f"reader field {f['name']!r} has no default")
        return targets, [(f["name"], f["default"]) for f in left.values()], promotions

    def expand(self, t: Any, named: dict[str, Any], seen: tuple[str, ...]) -> Any:
        """``t`` with named references replaced by their definitions (once per path), so
        that two schemas' types compare equal only if they decode alike."""
        if isinstance(t, str):
            if t in PRIMITIVES:
                return t
            if t in seen:
                return ("ref", t)
            if t not in named:
                raise NotCompiled(f"unknown Avro type {t!r}")
            return self.expand(named[t], named, seen)
        if isinstance(t, list):
            return [self.expand(b, named, seen) for b in t]
        if not isinstance(t, dict):
            return t
        name = t.get("name")
        inner = (*seen, name) if isinstance(name, str) else seen
        out: dict[str, Any] = {}
        for k, v in t.items():
            if k.startswith("__"):
                continue
            if k == "type" and isinstance(v, str) and v in _KINDS:
                out[k] = v
            elif k in ("type", "items", "values"):
                out[k] = self.expand(v, named, inner)
            elif k == "fields":
                out[k] = [{**f, "type": self.expand(f["type"], named, inner)} for f in v]
            else:
                out[k] = v
        return out

    def fixed_width_run(self, fields: list[dict[str, Any]]) -> list[tuple[Any, str, int]]:
        """The leading fields of plain float, double and boolean type (struct codes)."""
        run: list[tuple[Any, str, int]] = []
        for f in fields:
            t = self.deref(f["type"])
            code = {"float": "f", "double": "d", "boolean": "?"}.get(t if isinstance(t, str)
                                                                      else "")
            if code is None:
                break
            run.append((f, code, 0))
        return run

    def union(self, out: list[str], ind: str, branches: list[Any], var: str) -> None:
        i = self.tmp("u")
        self.varint(out, ind, i)
        for n, branch in enumerate(branches):
            out.append(f"{ind}{'if' if n == 0 else 'elif'} {i} == {n}:")
            self.value(out, ind + "    ", branch, var)
            tag = self._record_name_tag(branch)
            if tag is not None:
                out.append(f"{ind}    {var} = ({tag!r}, {var})")
        out.append(f"{ind}else: raise {_FAIL}")

    def _record_name_tag(self, branch: Any) -> str | None:
        """fastavro's ``return_record_name``: an inline record branch, or any named type
        given by name, comes back as ``(name, value)``."""
        if not self.return_record_name:
            return None
        if isinstance(branch, dict) and branch.get("type") == "record":
            return str(branch["name"])
        if isinstance(branch, str) and kind_of(branch) not in (
                "null", "boolean", "int", "long", "float", "double", "bytes", "string"):
            target = self.deref(branch)
            if isinstance(target, dict) and isinstance(target.get("name"), str):
                return str(target["name"])
            raise NotCompiled(f"no name for {branch!r}")
        if isinstance(branch, dict) and branch.get("type") == "error":
            raise NotCompiled("an error type in a union")
        return None


#: fastavro's promotions (``match_types``) and the conversion ``maybe_promote`` applies
_PROMOTIONS = {
    ("int", "long"): "{}", ("int", "float"): "float({})", ("int", "double"): "float({})",
    ("long", "float"): "float({})", ("long", "double"): "float({})",
    ("float", "double"): "{}", ("string", "bytes"): "{}.encode()",
    ("bytes", "string"): "{}.decode()",
}


def _promotion(writer: Any, reader: Any) -> str | None:
    """How a field of the plain primitive ``writer`` type is read as ``reader``: another
    primitive it promotes to, or a union of plain primitives (the first branch it matches,
    as fastavro's ``match_schemas`` picks); None for anything else."""
    if not isinstance(writer, str) or writer not in PRIMITIVES:
        return None
    branches = reader if isinstance(reader, list) else [reader]
    for branch in branches:
        if not isinstance(branch, str) or branch not in PRIMITIVES:
            return None  # a named or complex branch: left to fastavro
        if branch == writer:
            return "{}"
        if (writer, branch) in _PROMOTIONS:
            return _PROMOTIONS[writer, branch]
    return None


def compile_reader(schema: Any, return_record_name: bool = False,
                   reader: Any = None) -> Reader:
    """``read(data, pos) -> (value, end)``: decode one value of the parsed writer ``schema``
    from ``data[pos:]`` as fastavro's ``schemaless_reader`` would.

    A parsed ``reader`` schema is resolved as fastavro does for records whose fields keep
    their types or change between primitives (promotions, a primitive made a union of
    primitives): fields added with a default, fields removed, fields renamed by alias; other
    differences raise ``NotCompiled``.

    Raises:
        NotCompiled: the schema has a shape the compiler does not handle (use fastavro).
        Corrupt: (from the reader) the payload is not one the reader decodes with certainty;
            ``IndexError``, ``struct.error`` and ``UnicodeDecodeError`` mean the same.
    """
    try:
        return _compile_reader(schema, return_record_name, reader)
    except RecursionError:
        raise NotCompiled("the schema nests too deep to compile") from None


def _compile_reader(schema: Any, return_record_name: bool, reader: Any) -> Reader:
    gen = _ReaderGen(schema, return_record_name)
    top = gen.deref(schema)
    if reader is not None:
        gen.reader_named = {}
        if isinstance(reader, dict):
            gen.reader_named.update(reader.get("__named_schemas") or {})
        collect_named_types(reader, gen.reader_named)
        if not (isinstance(top, dict) and top.get("type") in ("record", "error")
                and isinstance(reader, dict)):
            if gen.expand(schema, gen.named, ()) != gen.expand(reader, gen.reader_named, ()):
                raise NotCompiled("only records are resolved to another reader schema")
            reader = None  # the same type: read as the writer's
    if isinstance(top, dict) and top.get("type") in ("record", "error"):
        fn: Reader = gen.build(gen.record(top, reader, entry=True))  # the record's function
        return fn
    body = ["def read(data, pos):", "    ln = len(data)"]
    gen.value(body, "    ", schema, "value")
    body += [f"    if pos > ln: raise {_FAIL}", "    return value, pos"]
    gen.functions.append("\n".join(body))
    fn = gen.build("read")
    return fn
