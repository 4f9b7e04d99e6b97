"""Confluent-framed Avro decoded straight into Arrow columns.

For each (writer schema, reader schema) pair a decoder is compiled: Python source
specialised to the two schemas (as ``kontrakt.protocol.codec`` compiles codecs) that reads a
payload and appends every value to the list of its column, with the writer → reader
resolution of the Avro specification written in (fields added with a default, removed,
renamed by alias; int → long → float → double, string ↔ bytes; union branches; enum
symbols). No per-record dict or tuple is built: the columns are plain lists of ints,
floats, bytes (UTF-8 for strings, cast and checked by Arrow once per batch) and the arrays
are assembled at the end (structs, lists and maps from their children, offsets and null
masks).

Columns are in the shape and raw values of :mod:`kontrakt.spark._types`' mapping: strings,
enums and uuids are text, timestamps microseconds, dates days, decimals ``Decimal``, a
``[null, T]`` union a nullable T, ``[int, long]`` a long, other unions a struct of
``member0, member1, ...``. fastavro with the mapping's converter is the oracle in the tests.

Untrusted payloads: an item count beyond the bytes left is refused for items that take at
least one byte; for writer schemas where counts or nesting cannot be bounded by the payload
length, :class:`~kontrakt.serde._avro_bounds.AvroBounds` walks the payload first, as the
registry deserializer does. One difference from fastavro remains: a map payload that
repeats a key keeps every entry (fastavro keeps the last); Avro writers never produce one.

Measured in-process on the project machine (2 shared cores, busy with other jobs), the
5-field ``Order`` record of ``benchmarks/spark.py``, 50,000 payloads into one array:
2.9-4.5 µs a record, against 9-15 µs for fastavro → dict → converter → ``pa.array`` in the
same runs (one payload decoded in a tight loop: 1.6 µs).
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.types import (
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    NullType,
    StringType,
    TimestampNTZType,
    TimestampType,
)

from kontrakt.serde._avro_bounds import collect_named_types
from kontrakt.serde._avro_codegen import ZIGZAG_BYTE, varint_lines
from kontrakt.spark._avro_tree import (
    MAX_ITEMS,
    NAMED,
    PRIMITIVES,
    NoColumnarPlan,
    Node,
    SourceWriter,
    append_null,
    append_value,
    build_array,
    corrupt,
    fail,
    kind_of,
    logical_of,
    raw_value,
    shape,
    short_name,
    to_decimal,
    uuid_fixed,
    uuid_text,
)
from kontrakt.spark._types import avro_mapping

__all__ = ["AvroColumns", "NoColumnarPlan", "decode_bare", "null_appender", "parse_text"]


# -- code generation ------------------------------------------------------------------------
class _Codegen(SourceWriter):
    """Writes the decoder of one (writer, reader) pair as Python source."""

    def __init__(self, writer: Any, named: Mapping[str, Any]) -> None:
        super().__init__({
            "_F": struct.Struct("<f").unpack_from,
            "_D": struct.Struct("<d").unpack_from, "fail": fail, "corrupt": corrupt,
            "uuid_text": uuid_text, "uuid_fixed": uuid_fixed, "to_decimal": to_decimal,
            "append_value": append_value, "_MAXI": MAX_ITEMS, "ZZ": ZIGZAG_BYTE,
        }, "t")
        self.named = dict(named)
        collect_named_types(writer, self.named)
        self.skips: dict[str, str] = {}  # writer record name -> skip function name
        self.functions: list[str] = []

    def deref(self, s: Any) -> Any:
        while isinstance(s, str) and s not in PRIMITIVES:
            if s not in self.named:
                raise NoColumnarPlan(f"unknown Avro type {s!r}")
            s = self.named[s]
        if isinstance(s, dict) and isinstance(s.get("type"), (dict, list)) \
                and "logicalType" not in s:
            return self.deref(s["type"])
        return s

    # primitives
    def varint(self, out: list[str], ind: str, var: str) -> None:
        # Inline, with no call: a call and its tuple cost more than the decoding (ids and
        # timestamps take 2-9 bytes). At most 10 bytes and 64 bits, as fastavro reads; the
        # same loop as the registry deserializer's compiled reader.
        out += varint_lines(ind, var, "corrupt('an Avro varint longer than 10 bytes')")

    def read_len(self, out: list[str], ind: str, var: str) -> None:
        """``var = data[pos:pos+n]`` for a length-prefixed string or bytes."""
        n = self.tmp("n")
        self.varint(out, ind, n)
        out += [f"{ind}end = pos + {n}",
                f"{ind}if {n} < 0 or end > ln:", f"{ind}    raise corrupt()",
                f"{ind}{var} = data[pos:end]", f"{ind}pos = end"]

    def read_primitive(self, out: list[str], ind: str, w: Any, var: str) -> None:
        kind = kind_of(w)
        if kind == "null":
            out.append(f"{ind}{var} = None")
        elif kind == "boolean":
            out += [f"{ind}{var} = data[pos] != 0", f"{ind}pos += 1"]
        elif kind in ("int", "long"):
            self.varint(out, ind, var)
        elif kind == "float":
            out += [f"{ind}{var} = _F(data, pos)[0]", f"{ind}pos += 4"]
        elif kind == "double":
            out += [f"{ind}{var} = _D(data, pos)[0]", f"{ind}pos += 8"]
        elif kind in ("string", "bytes"):
            self.read_len(out, ind, var)
        elif kind == "fixed":
            size = int(w["size"])
            out += [f"{ind}end = pos + {size}", f"{ind}if end > ln:",
                    f"{ind}    raise corrupt()", f"{ind}{var} = data[pos:end]",
                    f"{ind}pos = end"]
        else:
            raise NoColumnarPlan(f"no primitive reader for {kind}")

    # skipping what the reader does not have
    def skip(self, out: list[str], ind: str, w: Any) -> None:
        w = self.deref(w)
        kind = kind_of(w)
        if kind in ("null", "boolean", "int", "long", "float", "double", "string", "bytes",
                    "fixed"):
            self.read_primitive(out, ind, w, "_")
        elif kind == "enum":
            self.varint(out, ind, "_")
        elif kind == "union":
            idx = self.tmp("u")
            self.varint(out, ind, idx)
            for i, branch in enumerate(w):
                out.append(f"{ind}{'if' if i == 0 else 'elif'} {idx} == {i}:")
                body: list[str] = []
                self.skip(body, ind + "    ", branch)
                out += body or [f"{ind}    pass"]
            out += [f"{ind}else:", f"{ind}    raise corrupt('an Avro union index out of range')"]
        elif kind in ("record", "error"):
            out.append(f"{ind}pos = {self.skip_function(w)}(data, pos, ln)")
        elif kind in ("array", "map"):
            k = self.tmp("k")
            out += [f"{ind}while True:"]
            self.varint(out, ind + "    ", k)
            out += [f"{ind}    if {k} == 0:", f"{ind}        break",
                    f"{ind}    if {k} < 0:"]
            size = self.tmp("s")
            self.varint(out, ind + "        ", size)
            out += [f"{ind}        if {size} < 0 or pos + {size} > ln:",
                    f"{ind}            raise corrupt()",
                    f"{ind}        pos += {size}", f"{ind}        continue",
                    f"{ind}    if {k} > _MAXI:",
                    f"{ind}        raise fail('an Avro collection has more items than "
                    f"max.collection.items')",
                    f"{ind}    for _ in range({k}):"]
            items: list[str] = []
            if kind == "map":
                self.read_len(items, ind + "        ", "_")
                self.skip(items, ind + "        ", w["values"])
            else:
                self.skip(items, ind + "        ", w["items"])
            out += items or [f"{ind}        pass"]
        else:
            raise NoColumnarPlan(f"cannot skip {kind}")

    def skip_function(self, w: dict[str, Any]) -> str:
        name = str(w.get("name"))
        if name in self.skips:
            return self.skips[name]
        fn = self.tmp("skip")
        self.skips[name] = fn  # before the body: a recursive record refers to itself
        body: list[str] = []
        for f in w.get("fields", ()):
            self.skip(body, "    ", f["type"])
        self.functions.append("\n".join([f"def {fn}(data, pos, ln):", *body,
                                         "    return pos"]))
        return fn

    # resolution writer -> reader, appending into the reader's column tree
    def put(self, out: list[str], ind: str, w: Any, r: Any, node: Node) -> None:
        w = self.deref(w)
        if isinstance(w, list):
            idx = self.tmp("u")
            self.varint(out, ind, idx)
            for i, branch in enumerate(w):
                out.append(f"{ind}{'if' if i == 0 else 'elif'} {idx} == {i}:")
                body: list[str] = []
                try:
                    self.put(body, ind + "    ", branch, r, node)
                except NoColumnarPlan as exc:
                    # As fastavro: a branch the reader cannot take fails only when written.
                    body = [f"{ind}    raise fail({str(exc)!r})"]
                out += body
            out += [f"{ind}else:", f"{ind}    raise corrupt('an Avro union index out of range')"]
            return
        if isinstance(r, list):
            self.put_into_union(out, ind, w, r, node)
            return
        self.put_value(out, ind, w, r, node)

    def matches(self, w: Any, r: Any) -> bool:
        """fastavro's test of whether a reader branch takes a writer type (first wins)."""
        w, r = self.deref(w), self.deref(r)
        if isinstance(w, list) or isinstance(r, list):
            return True
        wk, rk = kind_of(w), kind_of(r)
        if wk == rk:
            if wk in NAMED:
                if wk == "fixed" and int(w["size"]) != int(r["size"]):
                    return False
                aliases = r.get("aliases") or []
                return (short_name(w["name"]) == short_name(r["name"]) or w["name"] in aliases
                        or short_name(w["name"]) in aliases)
            if wk == "array":
                return self.matches(w["items"], r["items"])
            if wk == "map":
                return self.matches(w["values"], r["values"])
            return True
        return (wk, rk) in _PROMOTIONS

    def put_into_union(self, out: list[str], ind: str, w: Any, r: list[Any],
                       node: Node) -> None:
        branch = next((b for b in r if self.matches(w, b)), None)
        if branch is None:
            raise NoColumnarPlan(f"no branch of the reader's union takes a {kind_of(w)}")
        if kind_of(w) == "null" or branch == "null":
            out.append(f"{ind}{self.null_code(node)}")
            return
        if node.union in ("optional", "numeric"):
            self.put_value(out, ind, w, branch, node)
            return
        members = [b for b in r if b != "null"]
        k = next(i for i, m in enumerate(members) if m is branch)
        self.put_value(out, ind, w, branch, node.children[k])
        for i, child in enumerate(node.children):
            if i != k:
                out.append(f"{ind}{self.null_code(child)}")
        out.append(f"{ind}a{node.mask}(False)")

    def null_code(self, node: Node) -> str:
        """One line that appends a null (a placeholder under a null parent) to ``node``."""
        parts: list[str] = []

        def walk(n: Node) -> None:
            if n.kind == "leaf":
                parts.append(f"a{n.slot}(None)")
                return
            if n.mask >= 0:
                parts.append(f"a{n.mask}(True)")
            if n.kind == "struct":
                for c in n.children:
                    walk(c)
            else:
                parts.append(f"a{n.slot}(0)")
        walk(node)
        return "; ".join(parts)

    def put_value(self, out: list[str], ind: str, w: Any, r: Any, node: Node) -> None:
        """A non-union writer value into a non-union reader node."""
        w, r = self.deref(w), self.deref(r)
        if isinstance(r, list):
            self.put_into_union(out, ind, w, r, node)
            return
        wk, rk = kind_of(w), kind_of(r)
        if not self.matches(w, r):
            raise NoColumnarPlan(f"a writer {wk} cannot be read as {rk}")
        if rk in ("record", "error"):
            self.put_record(out, ind, w, r, node)
        elif rk in ("array", "map"):
            self.put_collection(out, ind, w, r, node)
        elif rk == "enum":
            table = []
            for sym in w["symbols"]:
                if sym in r["symbols"]:
                    table.append(sym.encode())
                elif r.get("default") is not None:
                    table.append(str(r["default"]).encode())
                else:
                    table.append(None)
            t = self.const(tuple(table))
            i = self.tmp("e")
            self.varint(out, ind, i)
            out += [f"{ind}if {i} < 0:", f"{ind}    raise corrupt('a negative Avro enum index')",
                    f"{ind}s = {t}[{i}]", f"{ind}if s is None:",
                    f"{ind}    raise fail('the enum symbol is not in the reader schema')",
                    f"{ind}a{node.slot}(s)"]
        else:
            x = self.tmp("x")
            self.read_primitive(out, ind, w, x)
            out.append(f"{ind}a{node.slot}({self.convert(x, w, r, node)})")

    def convert(self, x: str, w: Any, r: Any, node: Node) -> str:
        """The expression that turns the writer's primitive ``x`` into the raw column value."""
        wk = kind_of(w)
        dt = node.data_type
        logical = logical_of(w) or logical_of(r)
        if isinstance(dt, StringType):
            if logical == "uuid":
                return f"uuid_fixed({x})" if wk == "fixed" else f"uuid_text({x})"
            return x
        if isinstance(dt, (TimestampType, TimestampNTZType)):
            return f"{x} * 1000" if logical and logical.endswith("millis") else x
        if isinstance(dt, DecimalType):
            source = w if logical_of(w) == "decimal" else r
            spec = self.deref(source)
            return (f"to_decimal({x}, {int(spec.get('precision', 0))}, "
                    f"{int(spec.get('scale', 0))})")
        if isinstance(dt, (FloatType, DoubleType)) and wk in ("int", "long"):
            return f"float({x})"
        if isinstance(dt, NullType):
            return "None"
        return x

    def put_record(self, out: list[str], ind: str, w: Any, r: Any, node: Node) -> None:
        by_name: dict[str, int] = {}
        for i, f in enumerate(r["fields"]):
            by_name[f["name"]] = i
            for alias in f.get("aliases") or ():
                by_name.setdefault(alias, i)
        seen: set[int] = set()
        for wf in w["fields"]:
            i = by_name.get(wf["name"], -1)
            if i < 0 or i in seen:
                self.skip(out, ind, wf["type"])
                continue
            seen.add(i)
            self.put(out, ind, wf["type"], r["fields"][i]["type"], node.children[i])
        for i, rf in enumerate(r["fields"]):
            if i in seen:
                continue
            if "default" not in rf:
                raise NoColumnarPlan(f"the reader's field {rf['name']!r} has no default and "
                                     f"the writer lacks it")
            value = _default(r, rf)
            child = node.children[i]
            out.append(f"{ind}append_value({self.const(child)}, "
                       f"{self.const(raw_value(child.data_type, value))}, L)")
        if node.mask >= 0:
            out.append(f"{ind}a{node.mask}(False)")

    def put_collection(self, out: list[str], ind: str, w: Any, r: Any, node: Node) -> None:
        is_map = kind_of(r) == "map"
        item_w = w["values"] if is_map else w["items"]
        item_r = r["values"] if is_map else r["items"]
        item_node = node.children[1] if is_map else node.children[0]
        c, k = self.tmp("c"), self.tmp("k")
        # A map entry has at least its key's length byte; other items their minimum size.
        least = 1 if is_map else _min_bytes(self, item_w, set())
        out.append(f"{ind}{c} = 0")
        out.append(f"{ind}while True:")
        i2 = ind + "    "
        self.varint(out, i2, k)
        out += [f"{i2}if {k} == 0:", f"{i2}    break", f"{i2}if {k} < 0:", f"{i2}    {k} = -{k}"]
        self.varint(out, i2 + "    ", "_")
        if least:
            out += [f"{i2}if {k} * {least} > ln - pos:",
                    f"{i2}    raise corrupt('an Avro item count beyond the payload')"]
        out += [f"{i2}{c} += {k}", f"{i2}if {c} > _MAXI:",
                f"{i2}    raise fail('an Avro collection has more items than "
                f"max.collection.items')",
                f"{i2}for _ in range({k}):"]
        i3 = i2 + "    "
        if is_map:
            key = self.tmp("x")
            self.read_len(out, i3, key)
            out.append(f"{i3}a{node.children[0].slot}({key})")
        self.put(out, i3, item_w, item_r, item_node)
        out.append(f"{ind}a{node.slot}({c})")
        if node.mask >= 0:
            out.append(f"{ind}a{node.mask}(False)")


_PROMOTIONS = {("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"),
               ("long", "double"), ("float", "double"), ("string", "bytes"),
               ("bytes", "string")}
_MIN_BYTES = {"null": 0, "boolean": 1, "int": 1, "long": 1, "float": 4, "double": 8,
              "bytes": 1, "string": 1, "enum": 1, "union": 1, "array": 1, "map": 1}


def _min_bytes(gen: _Codegen, w: Any, seen: set[int]) -> int:
    w = gen.deref(w)
    kind = kind_of(w)
    if kind == "fixed":
        return int(w["size"])
    if kind in ("record", "error"):
        if id(w) in seen:
            return 0  # a cycle ends in a union or collection, which costs a byte anyway
        seen = seen | {id(w)}
        return sum(_min_bytes(gen, f["type"], seen) for f in w["fields"])
    return _MIN_BYTES.get(kind, 0)


def _default(record: dict[str, Any], field: dict[str, Any]) -> Any:
    """A reader field's default as a Spark row value: fastavro reads it (from an empty
    writer record), the mapping converts it."""
    from fastavro import parse_schema, schemaless_reader

    writer = parse_schema({"type": "record", "name": record["name"], "fields": []})
    reader = parse_schema({"type": "record", "name": record["name"], "fields": [field]})
    decoded = schemaless_reader(io.BytesIO(b""), writer, reader, return_record_name=True)
    convert = avro_mapping(field["type"]).convert
    value = decoded[field["name"]]  # type: ignore[index]
    return value if value is None or convert is None else convert(value)


class AvroColumns:
    """The columnar decoder of one reader schema, compiled per writer schema.

    Args:
        reader: the reader schema, parsed by fastavro with ``expand=True``.
        data_type: the column's Spark type (the reader schema's mapping, nullability
            possibly wider).

    Raises:
        NoColumnarPlan: the reader schema has a shape the columnar decoder does not take
            (the caller decodes record by record).
    """

    def __init__(self, reader: Any, data_type: DataType) -> None:
        slots = [0]
        self.reader = reader
        self.root = shape(reader, data_type, True, slots)
        self.slots = slots[0]

    def compile(self, writer: Any, named: Mapping[str, Any] | None = None
                ) -> Callable[[list[list[Any]]], tuple[Callable[[bytes, int], int],
                                                       Callable[[], None]]]:
        """The decoder for payloads written with ``writer`` (parsed by fastavro with
        ``expand=True``): a function of the column lists that returns ``(one, null)``,
        ``one(data, pos)`` appending one payload's value (from ``pos``) and returning the
        end position, ``null()`` appending a null.

        Raises:
            NoColumnarPlan: the pair cannot be resolved (the reader has a field without
                default that the writer lacks, or types that do not match).
        """
        gen = _Codegen(writer, named or {})
        body: list[str] = []
        gen.put(body, "        ", writer, self.reader, self.root)
        src = "\n".join([
            *gen.functions,
            "def make(L):",
            *[f"    a{i} = L[{i}].append" for i in range(self.slots)],
            "    def one(data, pos):",
            "        ln = len(data)",
            *body,
            "        return pos",
            "    def null():",
            f"        {gen.null_code(self.root)}",
            "    return one, null",
        ])
        env = dict(gen.env)
        exec(compile(src, "<avro-columns>", "exec"), env)
        make: Any = env["make"]
        make.source = src
        return make  # type: ignore[no-any-return]

    def new_columns(self) -> list[list[Any]]:
        """Empty column lists for one batch."""
        return [[] for _ in range(self.slots)]

    def build(self, L: list[list[Any]], n: int) -> pa.Array:
        """The Arrow array of ``n`` values appended to ``L``.

        Raises:
            pyarrow.ArrowInvalid: a value that does not fit its column (a string that is
                not UTF-8, an int beyond 32 bits).
        """
        return build_array(self.root, L, n)


def decode_bare(columns: AvroColumns, writer: Any, payloads: Sequence[bytes | None],
                offset: int = 0) -> pa.Array:
    """Decode Avro payloads (each starting at ``offset``) written with ``writer`` into one
    Arrow array of the reader's column type; a None payload is a null.

    Raises:
        SerializationError: a payload is not a value of ``writer``.
        NoColumnarPlan: the schemas cannot be resolved.
    """
    L = columns.new_columns()
    one, null = columns.compile(writer)(L)
    for data in payloads:
        if data is None:
            null()
            continue
        try:
            end = one(data, offset)
        except (IndexError, struct.error):
            raise corrupt() from None
        if end != len(data):
            raise corrupt("bytes left after the Avro value")
    return columns.build(L, len(payloads))


def parse_text(text: str) -> Any:
    """A schema's JSON, or a bare primitive name (``string``) as it is."""
    try:
        return json.loads(text)
    except ValueError:
        return text.strip()


def null_appender(columns: AvroColumns, L: list[list[Any]]) -> Callable[[], None]:
    """The function that appends a null value (a tombstone) to ``L``."""
    root = columns.root
    return lambda: append_null(root, L)
