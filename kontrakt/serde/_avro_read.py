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
raises the error it raises today. Reading with another reader schema (schema resolution) is
left to fastavro.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from fastavro._logical_readers import LOGICAL_READERS

from kontrakt.serde._avro_codegen import AvroSource, NotCompiled, kind_of, varint_lines

__all__ = ["Corrupt", "compile_reader"]

Reader = Callable[[bytes, int], tuple[Any, int]]


class Corrupt(Exception):
    """The compiled reader cannot decode the payload (the caller asks fastavro)."""


_FAIL = "CORRUPT"


class _ReaderGen(AvroSource):
    def __init__(self, schema: Any, return_record_name: bool) -> None:
        super().__init__(schema, {
            "CORRUPT": Corrupt, "UF": struct.Struct("<f").unpack_from,
            "UD": struct.Struct("<d").unpack_from,
        })
        self.return_record_name = return_record_name
        self.records: dict[str, str] = {}

    def varint(self, out: list[str], ind: str, var: str) -> None:
        out += varint_lines(ind, var, _FAIL)

    def sized(self, out: list[str], ind: str, n: str, var: str) -> None:
        """``var = data[pos:pos+n]``, refusing a slice past the end."""
        out += [f"{ind}end = pos + {n}", f"{ind}if {n} < 0 or end > ln: raise {_FAIL}",
                f"{ind}{var} = data[pos:end]", f"{ind}pos = end"]

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
            self.varint(out, ind, n)
            self.sized(out, ind, n, var)
            if kind == "string":
                out.append(f"{ind}{var} = {var}.decode()")
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
            out.append(f"{ind}{var}, pos = {self.record(s)}(data, pos, ln)")
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
        # More items than bytes left cannot be (a zero-byte item type has every payload
        # checked by AvroBounds first); refusing here keeps a garbage count from looping.
        out += [f"{inner}if {k} > ln - pos + 1: raise {_FAIL}",
                f"{inner}for _ in range({k}):"]
        body = inner + "    "
        if kind == "map":
            key, n = self.tmp("key"), self.tmp("n")
            self.varint(out, body, n)
            self.sized(out, body, n, key)
            self.value(out, body, s["values"], item)
            out.append(f"{body}{var}[{key}.decode()] = {item}")
        else:
            self.value(out, body, s["items"], item)
            out.append(f"{body}{var}.append({item})")

    def record(self, s: dict[str, Any]) -> str:
        name = str(s.get("name"))
        if name in self.records:
            return self.records[name]
        fn = self.tmp("r")
        self.records[name] = fn  # before the body: a recursive record calls itself
        body = [f"def {fn}(data, pos, ln):"]
        names = []
        for f in s["fields"]:
            v = self.tmp("v")
            self.value(body, "    ", f["type"], v)
            names.append((f["name"], v))
        items = ", ".join(f"{n!r}: {v}" for n, v in names)
        body.append(f"    return {{{items}}}, pos")
        self.functions.append("\n".join(body))
        return fn

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


def compile_reader(schema: Any, return_record_name: bool = False) -> Reader:
    """``read(data, pos) -> (value, end)``: decode one value of the parsed writer ``schema``
    from ``data[pos:]`` as fastavro's ``schemaless_reader`` (no reader schema) would.

    Raises:
        NotCompiled: the schema has a shape the compiler does not handle (use fastavro).
        Corrupt: (from the reader) the payload is not one the reader decodes with certainty;
            ``IndexError``, ``struct.error`` and ``UnicodeDecodeError`` mean the same.
    """
    gen = _ReaderGen(schema, return_record_name)
    body = ["def read(data, pos):", "    ln = len(data)"]
    gen.value(body, "    ", schema, "value")
    body.append("    return value, pos")
    gen.functions.append("\n".join(body))
    fn: Reader = gen.build("read")
    return fn
