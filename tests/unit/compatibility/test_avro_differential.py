"""Differential test: our Avro checker against `avro`'s ReaderWriterCompatibilityChecker.

The `avro` package is a port of the Java ``SchemaCompatibility`` class that Confluent Schema
Registry uses, so on valid schemas both must give the same verdict. Schema pairs come from a
seeded generator: a random schema and a randomly mutated copy (fields added/removed/renamed with
aliases, defaults toggled, primitives swapped along and against the promotion lattice, enum
symbols and defaults changed, fixed sizes changed, records renamed with aliases, types wrapped
in and unwrapped from unions, recursive references).

Deliberate differences (kept out of the generator, documented here):
* Aliases: the `avro` package compares a reader's raw ``aliases`` strings with the writer's full
  name, while Java qualifies short aliases with the record's namespace first. We follow Java
  (Confluent); the generator only writes fully qualified aliases, where both agree.
* Short names of types in the null namespace used inside a namespace: Java (and we) look a
  short name up in the enclosing namespace and then in the null namespace; the `avro` package
  only in the enclosing one. The generator references named types by full name.
* Dotted ``name`` values: the `avro` package compares the name attribute as written; Java (and
  we) compare unqualified names. The generator uses a ``namespace`` attribute instead.
"""

from __future__ import annotations

import copy
import json
import random
import time
from typing import Any

import avro.schema
import pytest
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

from kontrakt.registry.compatibility._avro import check_avro_pair
from kontrakt.registry.compatibility._avro_model import parse_avro
from kontrakt.registry.compatibility._result import SchemaParseError

PRIMS = ["null", "boolean", "int", "long", "float", "double", "bytes", "string"]
NUMERIC = ["int", "long", "float", "double"]


class Gen:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.counter = 0
        self.defined: list[str] = []  # full names, so references never rely on lookup order
        self.ns = ""

    def name(self, prefix: str) -> str:
        self.counter += 1
        name = f"{prefix}{self.counter}"
        self.defined.append(f"{self.ns}.{name}" if self.ns else name)
        return name

    def prim(self) -> str:
        return self.rng.choice(PRIMS[1:] + NUMERIC)

    def type_(self, depth: int, enclosing: list[str]) -> Any:
        r = self.rng.random()
        if depth >= 3 or r < 0.4:
            usable = [n for n in self.defined if "." in n or not self.ns]
            if usable and self.rng.random() < 0.1:
                return self.rng.choice(usable)
            return self.prim()
        kind = self.rng.choice(["record", "record", "enum", "fixed", "array", "map", "union"])
        if kind == "record":
            return self.record(depth + 1, enclosing)
        if kind == "enum":
            name = self.name("E")
            out: dict[str, Any] = {
                "type": "enum", "name": name,
                "symbols": self.rng.sample(["A", "B", "C", "D", "E"], self.rng.randint(1, 4)),
            }
            if self.rng.random() < 0.3:
                out["default"] = self.rng.choice(out["symbols"])
            return out
        if kind == "fixed":
            name = self.name("F")
            return {"type": "fixed", "name": name, "size": self.rng.choice([4, 8, 16])}
        if kind == "array":
            return {"type": "array", "items": self.type_(depth + 1, enclosing)}
        if kind == "map":
            return {"type": "map", "values": self.type_(depth + 1, enclosing)}
        branches: list[Any] = ["null"]
        for p in self.rng.sample(["int", "string", "long", "double", "bytes"],
                                 self.rng.randint(1, 3)):
            branches.append(p)
        if self.rng.random() < 0.3:
            branches.append(self.record(depth + 1, enclosing))
        return branches

    def record(self, depth: int, enclosing: list[str]) -> dict[str, Any]:
        outer_ns = self.ns
        if self.rng.random() < 0.2:
            self.ns = "ns.x"
        name = self.name("R")
        # Always explicit, so that mutate() can write fully qualified aliases.
        out: dict[str, Any] = {"type": "record", "name": name, "namespace": self.ns,
                               "fields": []}
        for i in range(self.rng.randint(1, 4)):
            ftype = self.type_(depth, [*enclosing, name])
            if self.rng.random() < 0.08:
                ftype = ["null", self.qualified(out)]  # recursion
            field: dict[str, Any] = {"name": f"f{i}", "type": ftype}
            if self.rng.random() < 0.4:
                default = default_for(ftype)
                if default is not NO_DEFAULT:
                    field["default"] = default
            out["fields"].append(field)
        self.ns = outer_ns
        return out

    def qualified(self, rec: dict[str, Any]) -> str:
        return f"{self.ns}.{rec['name']}" if self.ns else str(rec["name"])


NO_DEFAULT = object()


def default_for(t: Any) -> Any:
    if isinstance(t, list):
        return default_for(t[0])
    if isinstance(t, str):
        return {"null": None, "boolean": True, "int": 1, "long": 2, "float": 1.5,
                "double": 2.5, "bytes": "\u0001", "string": "s"}.get(t, NO_DEFAULT)
    kind = t["type"]
    if kind == "enum":
        return t["symbols"][0]
    if kind == "fixed":
        return "x" * t["size"]
    if kind == "array":
        return []
    if kind == "map":
        return {}
    if kind == "record":
        out = {}
        for f in t["fields"]:
            d = default_for(f["type"])
            if d is NO_DEFAULT:
                return NO_DEFAULT
            out[f["name"]] = d
        return out
    return NO_DEFAULT


def nodes(obj: Any, acc: list[Any]) -> list[Any]:
    """Every dict/list node of a schema JSON tree (mutable containers we can edit in place)."""
    if isinstance(obj, dict):
        acc.append(obj)
        for f in obj.get("fields", []):
            nodes(f, acc)
            nodes(f["type"], acc)
        for key in ("items", "values"):
            if key in obj:
                nodes(obj[key], acc)
    elif isinstance(obj, list):
        acc.append(obj)
        for b in obj:
            nodes(b, acc)
    return acc


def mutate(schema: Any, rng: random.Random) -> Any:
    out = copy.deepcopy(schema)
    for _ in range(rng.randint(1, 3)):
        candidates = nodes(out, [])
        if not candidates:
            break
        node = rng.choice(candidates)
        if isinstance(node, list):
            op = rng.random()
            if op < 0.4 and len(node) > 2:
                node.pop(rng.randrange(1, len(node)))
            elif op < 0.8:
                extra = rng.choice(["int", "string", "long", "double", "bytes", "boolean"])
                if extra not in node:
                    node.append(extra)
            else:
                node.reverse()
            continue
        kind = node.get("type")
        if "name" in node and "type" in node and kind not in ("record", "enum", "fixed"):
            # a field
            op = rng.random()
            if op < 0.25:
                t = node["type"]
                if isinstance(t, str) and t in PRIMS:
                    node["type"] = rng.choice(PRIMS[1:] + NUMERIC * 2)
                    node.pop("default", None)
            elif op < 0.5:
                if "default" in node:
                    del node["default"]
                else:
                    d = default_for(node["type"])
                    if d is not NO_DEFAULT:
                        node["default"] = d
            elif op < 0.7:
                old = node["name"]
                node["name"] = old + "x"
                if rng.random() < 0.5:
                    node["aliases"] = [old]
            else:
                t = node["type"]
                if not isinstance(t, list):
                    node["type"] = ["null", t]
                    node["default"] = None
            continue
        if kind == "record":
            op = rng.random()
            if op < 0.35:
                i = len(node["fields"])
                ftype = rng.choice(PRIMS[1:])
                f: dict[str, Any] = {"name": f"n{i}{rng.randint(0, 99)}", "type": ftype}
                if rng.random() < 0.5:
                    f["default"] = default_for(ftype)
                if f["name"] not in {x["name"] for x in node["fields"]}:
                    node["fields"].append(f)
            elif op < 0.65 and len(node["fields"]) > 1:
                node["fields"].pop(rng.randrange(len(node["fields"])))
            elif op < 0.8:
                old = node["name"]
                node["name"] = node["name"] + "V2"
                if rng.random() < 0.6:
                    ns = node["namespace"]
                    node["aliases"] = [f"{ns}.{old}" if ns else old]
            else:
                rng.shuffle(node["fields"])
        elif kind == "enum":
            op = rng.random()
            symbols = node["symbols"]
            if op < 0.35:
                new = rng.choice(["A", "B", "C", "D", "E", "F"])
                if new not in symbols:
                    symbols.append(new)
            elif op < 0.7 and len(symbols) > 1:
                removed = symbols.pop(rng.randrange(len(symbols)))
                if node.get("default") == removed:
                    del node["default"]
            elif "default" in node:
                del node["default"]
            else:
                node["default"] = symbols[0]
        elif kind == "fixed":
            node["size"] = rng.choice([4, 8, 16])
        elif kind == "array":
            if isinstance(node["items"], str) and node["items"] in PRIMS:
                node["items"] = rng.choice([*NUMERIC, "string", "bytes"])
        elif kind == "map" and isinstance(node["values"], str) and node["values"] in PRIMS:
            node["values"] = rng.choice([*NUMERIC, "string", "bytes"])
    return out


def oracle(reader: str, writer: str) -> bool:
    checker = ReaderWriterCompatibilityChecker()  # type: ignore[no-untyped-call]
    result = checker.get_compatibility(avro.schema.parse(reader), avro.schema.parse(writer))
    return bool(result.compatibility is SchemaCompatibilityType.compatible)


def ours(reader: str, writer: str) -> bool:
    return not check_avro_pair(parse_avro(reader), parse_avro(writer))


def test_differential_against_avro_package() -> None:
    rng = random.Random(20260422)
    deadline = time.monotonic() + 25.0
    compared = 0
    verdicts = {True: 0, False: 0}
    mismatches: list[str] = []
    skipped = 0
    for _ in range(6000):
        if time.monotonic() > deadline:
            break
        gen = Gen(rng)
        base = gen.record(0, [])
        other = mutate(base, rng)
        a, b = json.dumps(base), json.dumps(other)
        try:
            avro.schema.parse(a)
            avro.schema.parse(b)
        except Exception:
            # the mutation produced an invalid schema (e.g. a renamed type still referenced
            # by its old name); ours must reject it too.
            skipped += 1
            with pytest.raises(SchemaParseError):
                parse_avro(a)
                parse_avro(b)
            continue
        for reader, writer in ((a, b), (b, a)):
            expected = oracle(reader, writer)
            got = ours(reader, writer)
            compared += 1
            verdicts[expected] += 1
            if expected != got:
                mismatches.append(f"reader={reader}\nwriter={writer}\navro={expected} ours={got}")
    print(f"compared={compared} verdicts={verdicts} skipped={skipped}")
    assert not mismatches, f"{len(mismatches)} mismatches, first:\n{mismatches[0]}"
    assert compared >= 3000, (compared, skipped)
    # The generator must exercise both outcomes substantially.
    assert verdicts[True] > compared // 10 and verdicts[False] > compared // 10, verdicts
