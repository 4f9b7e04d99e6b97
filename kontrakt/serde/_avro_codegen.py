"""What the compiled Avro codecs share: Python source built per schema and exec'd once.

:mod:`kontrakt.serde._avro_write` and :mod:`kontrakt.serde._avro_read` compile a parsed
(fastavro) schema into plain functions, one per named record (so that a recursive record
becomes functions that call each other), with every other type written inline. This module
holds the pieces both need: the source buffer with its constants, the resolution of named
types, and the inline zigzag varint decoding (the columnar decoder of
:mod:`kontrakt.spark._avro_columns` writes the same loop).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kontrakt.serde._avro_bounds import collect_named_types

__all__ = ["LENGTH_BYTE", "PRIMITIVES", "ZIGZAG_BYTE", "ZIGZAG_SMALL", "AvroSource",
           "NotCompiled", "kind_of", "record_type", "split_varint_lines", "varint_lines"]

PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
_COMPLEX = ("record", "error", "enum", "fixed", "array", "map")


class NotCompiled(Exception):
    """The schema (or schema pair) has a shape the compiler does not handle exactly: the
    caller keeps fastavro for it."""


def kind_of(s: Any) -> str:
    """The Avro kind of a resolved schema: a primitive name, a complex type or "union"."""
    if isinstance(s, list):
        return "union"
    if isinstance(s, str):
        return s
    kind = s["type"]
    if not isinstance(kind, str):
        raise NotCompiled(f"unexpected Avro type {kind!r}")
    return kind


def record_type(s: Any) -> Any:
    """fastavro's ``extract_record_type``: what its union rules compare to ``"double"``."""
    if isinstance(s, list):
        return "union"
    if isinstance(s, dict):
        return s["type"]
    return s


class AvroSource:
    """A generated module: its functions' source, the names it sees, fresh temporaries, and
    the named types of the schema (fastavro's parsed form defines each in place once)."""

    def __init__(self, schema: Any, env: Mapping[str, Any]) -> None:
        self.env: dict[str, Any] = dict(env)
        self.named: dict[str, Any] = {}
        if isinstance(schema, dict):
            self.named.update(schema.get("__named_schemas") or {})
        collect_named_types(schema, self.named)
        self.functions: list[str] = []
        self._n = 0

    def tmp(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n}"

    def const(self, value: Any) -> str:
        name = self.tmp("K")
        self.env[name] = value
        return name

    def deref(self, s: Any) -> Any:
        """``s`` with named references and ``{"type": <schema>}`` wrappers resolved."""
        for _ in range(64):
            if isinstance(s, str):
                if s in PRIMITIVES:
                    return s
                if s not in self.named:
                    raise NotCompiled(f"unknown Avro type {s!r}")
                s = self.named[s]
            elif isinstance(s, dict) and not isinstance(s.get("type"), str):
                if "logicalType" in s:
                    raise NotCompiled("a logical type on a nested schema")
                s = s["type"]
            else:
                return s
        raise NotCompiled("Avro type names refer to each other without end")

    def build(self, entry: str) -> Any:
        """Exec the functions into one namespace and return ``entry`` from it."""
        source = "\n\n".join(self.functions)
        namespace = dict(self.env)
        try:
            code = compile(source, f"<kontrakt avro {entry}>", "exec")
        except (SyntaxError, RecursionError, MemoryError) as e:
            # Types nested deeper than Python's blocks and indentation may go (some 20
            # anonymous arrays or maps in one another): fastavro reads such schemas.
            raise NotCompiled(f"the generated code does not compile: {e}") from None
        exec(code, namespace)
        fn = namespace[entry]
        fn.source = source  # for debugging: the generated code
        return fn


#: the value of each one-byte zigzag varint: a lookup is cheaper than the arithmetic
ZIGZAG_BYTE = tuple((b >> 1) ^ -(b & 1) for b in range(128))
#: the one-byte zigzag encoding of -64..63, indexed by the value (negative from the end)
ZIGZAG_SMALL = tuple((v << 1) ^ (v >> 63) for v in [*range(64), *range(-64, 0)])
#: a one-byte varint read as a byte count: its value, or 2**62 for a negative one (past
#: any payload's end, yet a valid index)
LENGTH_BYTE = tuple(b >> 1 if b & 1 == 0 else 1 << 62 for b in range(128))


#: indentation (in spaces) beyond which a varint is decoded by a loop rather than unrolled
_UNROLL_UP_TO = 160


def varint_lines(ind: str, var: str, fail: str) -> list[str]:
    """Source decoding one zigzag varint at ``data[pos]`` into ``var`` (``pos`` advances;
    the generated module binds :data:`ZIGZAG_BYTE` as ``ZZ``).

    ``fail`` is the expression raised for a varint of more than 10 bytes, or of 10 whose
    last byte carries bits beyond 64 (fastavro keeps only 64 bits of such a value; the
    callers hand these payloads to fastavro, which gives the answer). One byte (most
    lengths, counts, indexes and small ints) is a table lookup; longer ones are unrolled,
    one nested level a byte: 10-15% faster on the Trade record than a loop (a 6-byte id).
    """
    out = [f"{ind}b = data[pos]", f"{ind}if b < 128:", f"{ind}    {var} = ZZ[b]",
           f"{ind}    pos += 1", f"{ind}else:", f"{ind}    v = b & 127"]
    if len(ind) > _UNROLL_UP_TO:
        # Deep in nested code: a loop, which takes 3 levels of Python's 100 of indentation
        # where the unrolled form takes 10.
        return [*out, f"{ind}    sh = 7", f"{ind}    while True:",
                f"{ind}        b = data[pos + 1]", f"{ind}        pos += 1",
                f"{ind}        v |= (b & 127) << sh", f"{ind}        if b < 128:",
                f"{ind}            break", f"{ind}        sh += 7",
                f"{ind}        if sh > 63:", f"{ind}            raise {fail}",
                f"{ind}    pos += 1", f"{ind}    if v >> 64:", f"{ind}        raise {fail}",
                f"{ind}    {var} = (v >> 1) ^ -(v & 1)"]
    level = ind + "    "
    for i in range(1, 10):
        out += [f"{level}b = data[pos + {i}]", f"{level}v |= (b & 127) << {7 * i}",
                f"{level}if b < 128:", f"{level}    pos += {i + 1}", f"{level}else:"]
        level += "    "
    out += [f"{level}raise {fail}", f"{ind}    if v >> 64:", f"{ind}        raise {fail}",
            f"{ind}    {var} = (v >> 1) ^ -(v & 1)"]
    return out


def split_varint_lines(ind: str, var: str, fail: str, length: bool = False) -> list[str]:
    """:func:`varint_lines` with the value gathered in two one-digit ints by additions and
    multiplications (which CPython specialises for ints, where it does not ``&``, ``|`` and
    ``<<``): bytes 1-4 in ``lo`` (28 bits), bytes 5-10 in ``hi``, joined once at the end (a
    big int costs ~250 instructions an operation). A 6-byte varint ~7,500 -> ~5,700
    instructions, a 2-byte one ~2,300 -> ~1,700. Same contract; the generated code also
    uses ``lo`` and ``hi``.

    ``length``: a byte count (of a string, bytes or map key): its one-byte form is looked up
    in :data:`LENGTH_BYTE` (bound as ``ZL``) and a negative count becomes 2**62, so that
    the caller's test against the payload's end also refuses it.
    """
    if len(ind) > _UNROLL_UP_TO:
        out = varint_lines(ind, var, fail)
        return [*out, f"{ind}if {var} < 0: {var} = 4611686018427387904"] if length else out

    def zigzag(x: str) -> str:
        return f"4611686018427387904 if lo & 1 else {x}" if length else \
            f"~({x}) if lo & 1 else {x}"
    out = [f"{ind}b = data[pos]", f"{ind}if b < 128:",
           f"{ind}    {var} = {'ZL' if length else 'ZZ'}[b]",
           f"{ind}    pos += 1", f"{ind}else:", f"{ind}    lo = b - 128"]
    level = ind + "    "
    for i in range(1, 4):
        out += [f"{level}b = data[pos + {i}]", f"{level}if b < 128:",
                f"{level}    lo += b * {128 ** i}", f"{level}    pos += {i + 1}",
                f"{level}    {var} = {zigzag('lo >> 1')}", f"{level}else:",
                f"{level}    lo += (b - 128) * {128 ** i}"]
        level += "    "
    out += [f"{level}b = data[pos + 4]", f"{level}if b < 128:", f"{level}    hi = b",
            f"{level}    pos += 5", f"{level}else:", f"{level}    hi = b - 128"]
    join = level
    level += "    "
    for i in range(5, 9):
        out += [f"{level}b = data[pos + {i}]", f"{level}if b < 128:",
                f"{level}    hi += b * {128 ** (i - 4)}", f"{level}    pos += {i + 1}",
                f"{level}else:", f"{level}    hi += (b - 128) * {128 ** (i - 4)}"]
        level += "    "
    # The 10th byte holds bit 63 only: anything more is a value fastavro cuts to 64 bits.
    out += [f"{level}b = data[pos + 9]", f"{level}if b > 1: raise {fail}",
            f"{level}hi += b * 34359738368", f"{level}pos += 10",
            f"{join}{var} = {zigzag('(hi << 27) | (lo >> 1)')}"]
    return out
