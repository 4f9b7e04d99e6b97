"""A compiled Avro writer per schema, byte for byte fastavro's ``schemaless_writer``.

fastavro costs ~2.4 µs a call plus 0.5-2.5 µs a field (the 11-field ``Trade`` record of
``benchmarks/serde.py``: ~15 µs). :func:`compile_writer` turns a parsed schema into Python
source specialised to it (one function per named record and strictness, everything else
inline) that appends the encoding to a ``bytearray``.

It encodes exactly what it can prove fastavro encodes the same way: values of the exact
Python types the schema expects (``int`` in range for int/long, ``float`` or ``int`` for
float/double, ``str``, ``bytes``, ``list``, ``dict``, ``True``/``False``, ``None``), after
fastavro's own logical-type converters. Anything else (a subclass, a tuple, a ``-type`` hint,
a value out of range, a union the rules below cannot settle) raises :class:`SlowPath` naming
the field, and the caller encodes the whole record with fastavro instead: the bytes, or the
error a bad value gets, are fastavro's.

Unions follow fastavro's choice (``write_union``): the first branch whose validator accepts
the value, except that a ``float`` branch gives way to a later ``double`` one, and a record
branch is only taken once the whole value validates against it. The generated chain asks of
each branch "surely yes" or "surely no" and gives up otherwise; inside a union branch the
values are written "strict" (int in int32, every record field present, ``fixed`` only as
``bytes``) so that whatever it writes is also what fastavro's validator accepts.
"""

from __future__ import annotations

import datetime
import decimal
import functools
import struct
import uuid
from collections.abc import Callable
from typing import Any

from fastavro._logical_writers import LOGICAL_WRITERS

from kontrakt.serde._avro_codegen import (
    ZIGZAG_SMALL,
    AvroSource,
    NotCompiled,
    kind_of,
    record_type,
)

__all__ = ["SlowPath", "compile_writer"]

Writer = Callable[[bytearray, Any], None]

_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)
#: Python types whose validity for every union branch kind is known exactly (the last five:
#: what fastavro's logical-type converters take, which no plain branch accepts).
_KNOWN = frozenset({type(None), bool, int, float, str, bytes, list, dict, datetime.datetime,
                    datetime.date, datetime.time, uuid.UUID, decimal.Decimal})
#: how many map keys a map field's writer keeps encoded
_KEYS = 1024
#: struct codes of the types whose neighbouring record fields are packed in one call
_FIXED_WIDTH = {"float": "f", "double": "d", "boolean": "?"}


class SlowPath(Exception):
    """The compiled writer met a value it cannot prove it encodes as fastavro does."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


@functools.cache
def _groups() -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
    """Each 14-bit group of a varint as its two bytes: with the continuation bit on both
    (more follows), and on the first only (the last group). Lookups and ``+=`` write a
    6-byte varint in ~5,000 instructions, shifts and masks of 7-bit groups in ~6,800; the
    two tables take ~1.4 MB, so they are built when a writer first needs them."""
    more = tuple([bytes((x & 127 | 128, x >> 7 | 128)) for x in range(16384)])
    last = tuple([bytes((x & 127 | 128, x >> 7)) for x in range(16384)])
    return more, last


def _write_zigzag(out: bytearray, z: int) -> None:
    """The varint of a zigzag-encoded ``z`` (0 <= z < 2**64), 14 bits at a time."""
    more, last = _groups()
    while z >= 16384:
        out += more[z & 16383]
        z >>= 14
    if z < 128:
        out.append(z)
    else:
        out += last[z]


def _write_long(out: bytearray, v: int) -> None:
    """A zigzag varint of any int64 (the inline code handles most of them itself)."""
    if not -9223372036854775808 <= v <= 9223372036854775807:
        raise OverflowError("Python int too large to convert to C long")
    _write_zigzag(out, (v << 1) ^ (v >> 63))


class _WriterGen(AvroSource):
    def __init__(self, schema: Any) -> None:
        super().__init__(schema, {
            "SLOW": SlowPath, "wl": _write_long, "ZS": ZIGZAG_SMALL, "PF": struct.Struct("<f").pack,
            "PD": struct.Struct("<d").pack, "KNOWN": _KNOWN, "wz": _write_zigzag,
            "zb": _zigzag_bytes,
        })
        self.records: dict[tuple[str, bool], str] = {}

    # -- scalars ---------------------------------------------------------------------------
    def long(self, out: list[str], ind: str, v: str, path: str, lo_hi: tuple[int, int] | None,
             trusted: bool) -> None:
        if trusted:
            pass  # the union's guard checked the type and range
        elif lo_hi is None:
            out.append(f"{ind}if type({v}) is not int: raise SLOW({path!r})")
        else:
            out.append(f"{ind}if type({v}) is not int or not {lo_hi[0]} <= {v} <= {lo_hi[1]}: "
                       f"raise SLOW({path!r})")
        # -64..63 by table; beyond, the zigzag value (by additions, which CPython
        # specialises for ints, where it does not << and ^; big ints cost ~250 instructions
        # an operation) is split at 28 bits so that the rest works on one-digit ints, and
        # its 14-bit groups are looked up (_groups): a 13-digit millisecond timestamp ~7,900
        # -> ~4,600 instructions, a 2-byte varint ~1,450 -> ~900 (a loop of 7-bit groups,
        # or a call, cost more). Out of int64's range fastavro decides.
        if "G14" not in self.env:  # the tables only for schemas with ints or longs
            self.env["G14"], self.env["G14E"] = _groups()
        z, lo, hi = self.tmp("z"), self.tmp("lo"), self.tmp("hi")
        out += [f"{ind}if -64 <= {v} < 64: ap(ZS[{v}])",
                f"{ind}else:",
                f"{ind}    {z} = {v} + {v} if {v} >= 0 else -1 - {v} - {v}",
                f"{ind}    if {z} < 16384: out += G14E[{z}]",
                f"{ind}    elif {z} < 268435456:",
                f"{ind}        out += G14[{z} & 16383]",
                f"{ind}        if {z} < 2097152: ap({z} >> 14)",
                f"{ind}        else: out += G14E[{z} >> 14]",
                f"{ind}    elif {z} < 4398046511104:",
                f"{ind}        {lo} = {z} & 268435455",
                f"{ind}        {hi} = {z} >> 28",
                f"{ind}        out += G14[{lo} & 16383]",
                f"{ind}        out += G14[{lo} >> 14]",
                f"{ind}        if {hi} < 128: ap({hi})",
                f"{ind}        else: out += G14E[{hi}]",
                f"{ind}    elif {z} < 18446744073709551616: wz(out, {z})",
                f"{ind}    else: raise SLOW({path!r})"]

    def length_prefixed(self, out: list[str], ind: str, b: str) -> None:
        n = self.tmp("n")
        out += [f"{ind}{n} = len({b})",
                f"{ind}if {n} < 64: ap({n} + {n})", f"{ind}else: wl(out, {n})",
                f"{ind}out += {b}"]

    def value(self, out: list[str], ind: str, s: Any, v: str, path: str, strict: bool,
              trusted: bool = False) -> None:
        """Source writing the value in variable ``v`` of schema ``s`` (``trusted``: a union's
        guard has checked a scalar's type already)."""
        s = self.deref(s)
        kind = kind_of(s)
        if isinstance(s, dict) and "logicalType" in s and kind not in ("record", "error"):
            prepare = LOGICAL_WRITERS.get(f"{kind}-{s['logicalType']}")
            if prepare is not None:
                out.append(f"{ind}{v} = {self.const(prepare)}({v}, {self.const(s)})")
        if kind == "null":
            if not trusted:
                out.append(f"{ind}if {v} is not None: raise SLOW({path!r})")
        elif kind == "boolean":
            out += [f"{ind}if {v} is True: ap(1)", f"{ind}elif {v} is False: ap(0)",
                    f"{ind}else: raise SLOW({path!r})"]
        elif kind in ("int", "long"):
            self.long(out, ind, v, path, _INT32 if strict and kind == "int" else None, trusted)
        elif kind in ("float", "double"):
            if not trusted:
                out.append(f"{ind}if type({v}) is not float and type({v}) is not int: "
                           f"raise SLOW({path!r})")
            out.append(f"{ind}out += {'PF' if kind == 'float' else 'PD'}({v})")
        elif kind == "string":
            b = self.tmp("b")
            if not trusted:
                out.append(f"{ind}if type({v}) is not str: raise SLOW({path!r})")
            out.append(f"{ind}{b} = {v}.encode()")
            self.length_prefixed(out, ind, b)
        elif kind == "bytes":
            if not trusted:
                out.append(f"{ind}if type({v}) is not bytes: raise SLOW({path!r})")
            self.length_prefixed(out, ind, v)
        elif kind == "fixed":
            types = f"type({v}) is not bytes" if strict else \
                f"type({v}) is not bytes and type({v}) is not bytearray"
            out += [f"{ind}if {types} or len({v}) != {int(s['size'])}: raise SLOW({path!r})",
                    f"{ind}out += {v}"]
        elif kind == "enum":
            table = self.const({sym: _zigzag_bytes(i) for i, sym in enumerate(s["symbols"])})
            e = self.tmp("e")
            out += [f"{ind}{e} = {table}.get({v}) if type({v}) is str else None",
                    f"{ind}if {e} is None: raise SLOW({path!r})", f"{ind}out += {e}"]
        elif kind == "array":
            x = self.tmp("x")
            out += [f"{ind}if type({v}) is not list: raise SLOW({path!r})",
                    f"{ind}if {v}:"]
            self.length_prefixed_count(out, ind + "    ", v)
            out.append(f"{ind}    for {x} in {v}:")
            self.value(out, ind + "        ", s["items"], x, path + "[]", strict)
            out.append(f"{ind}ap(0)")
        elif kind == "map":
            k, x, kb = self.tmp("k"), self.tmp("x"), self.tmp("kb")
            out += [f"{ind}if type({v}) is not dict: raise SLOW({path!r})",
                    f"{ind}if {v}:"]
            self.length_prefixed_count(out, ind + "    ", v)
            # Map keys are mostly a small set: each one's count and UTF-8 are kept (up to
            # _KEYS of them a map field), so a key seen before is one lookup and one +=
            # (~500 instructions less a key).
            keys = self.const({})
            inner = ind + "            "
            out += [f"{ind}    for {k}, {x} in {v}.items():",
                    f"{ind}        if type({k}) is not str: raise SLOW({path!r})",
                    f"{ind}        {kb} = {keys}.get({k})",
                    f"{ind}        if {kb} is not None: out += {kb}",
                    f"{ind}        else:",
                    f"{inner}{kb} = {k}.encode()"]
            self.length_prefixed(out, inner, kb)
            out.append(f"{inner}if len({keys}) < {_KEYS}: {keys}[{k}] = zb(len({kb})) + {kb}")
            self.value(out, ind + "        ", s["values"], x, path + "{}", strict)
            out.append(f"{ind}ap(0)")
        elif kind in ("record", "error"):
            if "logicalType" in s:
                raise NotCompiled("a record with a logical type")
            out.append(f"{ind}{self.record(s, strict)}(out, {v})")
        elif kind == "union":
            self.union(out, ind, s, v, path)
        else:
            raise NotCompiled(f"no writer for Avro type {kind!r}")

    def length_prefixed_count(self, out: list[str], ind: str, v: str) -> None:
        n = self.tmp("n")
        out += [f"{ind}{n} = len({v})", f"{ind}if {n} < 64: ap({n} + {n})",
                f"{ind}else: wl(out, {n})"]

    # -- records ---------------------------------------------------------------------------
    def record(self, s: dict[str, Any], strict: bool) -> str:
        """The name of the function writing record ``s`` (made on first use)."""
        key = (str(s.get("name")), strict)
        if key in self.records:
            return self.records[key]
        fn = self.tmp("w_strict" if strict else "w")
        self.records[key] = fn  # before the body: a recursive record calls itself
        name = str(s.get("name"))
        body = [f"def {fn}(out, d):", "    ap = out.append",
                f"    if type(d) is not dict: raise SLOW({name!r})"]
        if strict:
            # fastavro's validator refuses a record whose -type names another record.
            body.append(f"    if '-type' in d: raise SLOW({name!r})")
        run: list[tuple[str, str]] = []  # (variable, struct code) of the pending fields
        for f in s["fields"]:
            fname, ftype = f["name"], f["type"]
            path = f"{name}.{fname}"
            v = self.tmp("v")
            code = _FIXED_WIDTH.get(ftype) if isinstance(ftype, str) else None
            if code is None:
                self.flush_run(body, run)
            if strict:
                body.append(f"    {v} = d[{fname!r}]")
            elif "default" in f:
                body.append(f"    {v} = d.get({fname!r}, {self.const(f['default'])})")
            elif isinstance(ftype, (str, list, dict)) and "null" in ftype:
                # fastavro's own test (a substring test on a type name): a missing field
                # is written as None.
                body.append(f"    {v} = d.get({fname!r})")
            else:
                body.append(f"    {v} = d[{fname!r}]")
            if code is None:
                self.value(body, "    ", ftype, v, path, strict)
                continue
            # Neighbouring floats, doubles and booleans: checked one by one, packed at once.
            if code == "?":
                body.append(f"    if {v} is not True and {v} is not False: raise SLOW({path!r})")
            else:
                body.append(f"    if type({v}) is not float and type({v}) is not int: "
                            f"raise SLOW({path!r})")
            run.append((v, code))
        self.flush_run(body, run)
        self.functions.append("\n".join(body))
        return fn

    def flush_run(self, body: list[str], run: list[tuple[str, str]]) -> None:
        if run:
            pack = self.const(struct.Struct("<" + "".join(c for _, c in run)).pack)
            body.append(f"    out += {pack}({', '.join(v for v, _ in run)})")
            run.clear()

    # -- unions ----------------------------------------------------------------------------
    def union(self, out: list[str], ind: str, branches: list[Any], v: str, path: str
              ) -> None:
        resolved = [self.deref(b) for b in branches]
        kinds = [kind_of(r) for r in resolved]
        if "union" in kinds:
            raise NotCompiled("a union directly inside a union")
        dict_takers = sum(k in ("record", "error", "map") for k in kinds)
        list_takers = kinds.count("array")
        chain: list[str] = []
        # Without logical types every branch's "surely yes" is a test of the exact Python
        # type, which a type outside KNOWN never passes: such a value reaches the final
        # else (SLOW) anyway, so a scalar branch needs no "surely no" test (one set lookup
        # less an optional field).
        plain = not any(isinstance(r, dict) and "logicalType" in r for r in resolved)
        for i, (branch, s, kind) in enumerate(zip(branches, resolved, kinds, strict=True)):
            val = v
            logical = (LOGICAL_WRITERS.get(f"{kind}-{s['logicalType']}")
                       if isinstance(s, dict) and "logicalType" in s else None)
            if logical is not None:
                val = self.tmp("p")
                prep = f"({val} := {self.const(logical)}({v}, {self.const(s)}))"
            else:
                prep = val
            if kind in ("record", "error"):
                if "logicalType" in s:
                    raise NotCompiled("a record with a logical type in a union")
                yes = (f"type({prep}) is dict and '-type' not in {val}" if dict_takers == 1
                       else "False")
                no = f"type({prep}) in KNOWN and type({val}) is not dict"
            elif kind == "map":
                yes = f"type({prep}) is dict" if dict_takers == 1 else "False"
                no = f"type({prep}) in KNOWN and type({val}) is not dict"
            elif kind == "array":
                yes = f"type({prep}) is list" if list_takers == 1 else "False"
                no = (f"type({prep}) in KNOWN and type({val}) is not list "
                      f"and type({val}) is not bytes")
            else:
                yes = _scalar_yes(kind, s, prep, val)
                no = f"type({prep if yes == 'False' else val}) in KNOWN"
            target, target_schema = i, branch
            if kind == "float":
                # fastavro prefers a later double for any number that fits a float.
                later = [j for j in range(i + 1, len(branches))
                         if record_type(branches[j]) == "double"]
                if later:
                    target, target_schema = later[0], "double"
            body: list[str] = [f"{ind}    ap({target * 2})" if target < 64
                               else f"{ind}    wl(out, {target})"]
            written = target_schema
            if logical is not None and target == i:
                written = {k: x for k, x in s.items() if k != "logicalType"}
            # Whatever a branch holds is validated by fastavro as a whole: written strict.
            self.value(body, ind + "    ", written, val, path, True,
                       trusted=kind in ("null", "int", "long", "float", "double", "string",
                                        "bytes"))
            chain.append(f"{ind}{'if' if not chain else 'elif'} {yes}:")
            chain += body
            if not (plain and no == f"type({val}) in KNOWN"):
                chain.append(f"{ind}elif not ({no}): raise SLOW({path!r})")
        chain.append(f"{ind}else: raise SLOW({path!r})")
        out += chain


def _scalar_yes(kind: str, s: Any, prep: str, val: str) -> str:
    """The condition under which fastavro's validator surely accepts the value for a branch of
    a scalar kind (``prep`` evaluates it first, ``val`` names it after)."""
    if kind == "null":
        return f"{prep} is None"
    if kind == "boolean":
        return f"type({prep}) is bool"
    if kind in ("int", "long"):
        lo, hi = _INT32 if kind == "int" else _INT64
        return f"type({prep}) is int and {lo} <= {val} <= {hi}"
    if kind in ("float", "double"):
        return f"(type({prep}) is float or type({val}) is int)"
    if kind == "string":
        return f"type({prep}) is str"
    if kind == "bytes":
        return f"type({prep}) is bytes"
    if kind == "fixed":
        return f"type({prep}) is bytes and len({val}) == {int(s['size'])}"
    if kind == "enum":
        return f"type({prep}) is str and {val} in {tuple(s['symbols'])!r}"
    raise NotCompiled(f"no union rule for Avro type {kind!r}")


def _zigzag_bytes(i: int) -> bytes:
    out = bytearray()
    _write_long(out, i)
    return bytes(out)


def compile_writer(schema: Any) -> Writer:
    """``write(out, value)``: append ``value``'s encoding under the parsed ``schema`` to the
    ``bytearray`` ``out``.

    Raises:
        NotCompiled: the schema has a shape the compiler does not handle (use fastavro).
        SlowPath: (from the writer) a value it cannot encode exactly as fastavro; the caller
            encodes the record with fastavro instead. Other exceptions from the writer mean
            the same.
    """
    try:
        return _compile_writer(schema)
    except RecursionError:
        raise NotCompiled("the schema nests too deep to compile") from None


def _compile_writer(schema: Any) -> Writer:
    gen = _WriterGen(schema)
    top = gen.deref(schema)
    if isinstance(top, dict) and top.get("type") in ("record", "error") \
            and "logicalType" not in top:
        fn: Writer = gen.build(gen.record(top, False))  # the record's function writes it
        return fn
    body = ["def write(out, d):", "    ap = out.append"]
    gen.value(body, "    ", schema, "d", str(schema.get("name", "value"))
              if isinstance(schema, dict) else "value", False)
    gen.functions.append("\n".join(body))
    fn = gen.build("write")
    return fn
