"""Avro payloads from untrusted producers: counts, values and nesting are bounded.

fastavro trusts block counts and recurses in C, so the bombs of issue 20 are run in a child
process (a crash or a runaway allocation there cannot take the test run with it), each bounded
in time and address space.
"""

from __future__ import annotations

import json
import os
import random
import struct
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_writer

from kontrakt.errors import ConfigError, SerializationError, ValueDeserializationError
from kontrakt.registry import MockSchemaRegistryClient, Schema
from kontrakt.serde import AvroDeserializer, MessageField, SerializationContext

CTX = SerializationContext("t", MessageField.VALUE, partition=0, offset=5)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))


def zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def framed(registry: MockSchemaRegistryClient, subject: str, schema: Any,
           payload: bytes) -> bytes:
    sid = registry.register_schema(subject, Schema(json.dumps(schema), "AVRO"))
    return b"\x00" + struct.pack(">I", sid) + payload


@pytest.fixture()
def registry() -> MockSchemaRegistryClient:
    return MockSchemaRegistryClient({"url": "mock://bounds"})


NULLS = {"type": "array", "items": "null"}
EMPTY = {"type": "array", "items": {"type": "record", "name": "Empty", "fields": []}}
LIST = {"type": "record", "name": "Node",
        "fields": [{"name": "next", "type": ["null", "Node"]}]}
SELF = {"type": "record", "name": "Loop", "fields": [{"name": "me", "type": "Loop"}]}

_CHILD = textwrap.dedent("""
    import json, resource, struct, sys
    resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31))
    from kontrakt.errors import ValueDeserializationError
    from kontrakt.registry import MockSchemaRegistryClient, Schema
    from kontrakt.serde import AvroDeserializer, MessageField, SerializationContext
    schema, payload = json.loads(sys.argv[1]), bytes.fromhex(sys.argv[2])
    registry = MockSchemaRegistryClient({"url": "mock://child"})
    sid = registry.register_schema("s", Schema(json.dumps(schema), "AVRO"))
    data = b"\\x00" + struct.pack(">I", sid) + payload
    try:
        AvroDeserializer(registry)(data, SerializationContext("t", MessageField.VALUE))
    except ValueDeserializationError as e:
        assert e.record == data
        print("refused:", e)
    else:
        print("decoded")
""")


@pytest.mark.parametrize(("schema", "payload", "why"), [
    # Issue 20's bomb: 10 bytes, an array of null with a block count of 2**62.
    (NULLS, zigzag(2**62) + b"\x00", "max.collection.items"),
    # The same through a block that carries its size (negative count), of empty records.
    (EMPTY, zigzag(-(2**61)) + zigzag(1) + b"\x00", "max.collection.items"),
    # A linked list 20,000 deep in 20 KB: fastavro's C recursion overflows the stack.
    (LIST, b"\x02" * 20_000 + b"\x00", "max.nesting.depth"),
    # A record that contains itself: fastavro recurses forever on any payload.
    (SELF, b"", "contains itself"),
], ids=["nulls-2**62", "empty-records-sized-block", "deep-list", "self-record"])
def test_bombs_are_refused_at_once(schema: Any, payload: bytes, why: str) -> None:
    """Before the bounds: the first two ran out of memory, the last two died of SIGSEGV."""
    env = {**os.environ, "PYTHONPATH": ROOT}
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(schema), payload.hex()],
                          capture_output=True, text=True, timeout=60, env=env, check=False)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.startswith("refused:") and why in proc.stdout, proc.stdout


def test_collection_items_bound(registry: MockSchemaRegistryClient) -> None:
    de = AvroDeserializer(registry, conf={"max.collection.items": 1000})
    ints = {"type": "array", "items": "int"}
    ok = framed(registry, "ints", ints, zigzag(1000) + b"\x02" * 1000 + b"\x00")
    assert de(ok, CTX) == [1] * 1000
    # Two blocks of 600: each fits, together they do not.
    over = framed(registry, "ints", ints,
                  (zigzag(600) + b"\x02" * 600) * 2 + b"\x00")
    with pytest.raises(ValueDeserializationError, match=r"max\.collection\.items \(1000\)"
                       ) as info:
        de(over, CTX)
    assert info.value.record == over
    strings = {"type": "map", "values": "null"}
    many = framed(registry, "map", strings, zigzag(1001) + b"\x00" * 1001 + b"\x00")
    with pytest.raises(ValueDeserializationError, match="map entries"):
        de(many, CTX)


def test_decoded_values_bound_counts_zero_byte_items(
        registry: MockSchemaRegistryClient) -> None:
    """100,000 empty records from 4 bytes: far under max.collection.items, over the values."""
    de = AvroDeserializer(registry, conf={"max.decoded.values": 50_000})
    data = framed(registry, "empty", EMPTY, zigzag(100_000) + b"\x00")
    with pytest.raises(ValueDeserializationError, match=r"max\.decoded\.values \(50000\)"):
        de(data, CTX)
    small = framed(registry, "empty", EMPTY, zigzag(1_000) + b"\x00")
    assert de(small, CTX) == [{}] * 1_000
    # The default bound: 10 million Nones from 5 bytes are refused.
    nulls = framed(registry, "nulls", NULLS, zigzag(10_000_001) + b"\x00")
    with pytest.raises(ValueDeserializationError, match=r"max\.collection\.items"):
        AvroDeserializer(registry)(nulls, CTX)


def test_decoded_values_bound_counts_wide_records(registry: MockSchemaRegistryClient) -> None:
    """An item of 1 byte that decodes to 101 values: the payload length alone is no bound."""
    wide = {"type": "array", "items": {"type": "record", "name": "Wide", "fields": [
        {"name": "n", "type": "int"},
        *({"name": f"f{i}", "type": "null"} for i in range(100))]}}
    de = AvroDeserializer(registry, conf={"max.decoded.values": 100_000})
    over = framed(registry, "wide", wide, zigzag(1000) + b"\x02" * 1000 + b"\x00")
    with pytest.raises(ValueDeserializationError, match=r"max\.decoded\.values"):
        de(over, CTX)
    fits = framed(registry, "wide", wide, zigzag(900) + b"\x02" * 900 + b"\x00")
    assert len(de(fits, CTX)) == 900


def test_nesting_bound(registry: MockSchemaRegistryClient) -> None:
    def chain(depth: int) -> bytes:
        return b"\x02" * (depth - 1) + b"\x00"
    de = AvroDeserializer(registry)
    deep = framed(registry, "list", LIST, chain(256))
    value = de(deep, CTX)
    for _ in range(255):
        value = value["next"]
    assert value == {"next": None}
    with pytest.raises(ValueDeserializationError, match=r"max\.nesting\.depth \(256\)"):
        de(framed(registry, "list", LIST, chain(257)), CTX)
    shallow = AvroDeserializer(registry, conf={"max.nesting.depth": 10})
    with pytest.raises(ValueDeserializationError, match=r"max\.nesting\.depth \(10\)"):
        shallow(framed(registry, "list", LIST, chain(11)), CTX)
    assert shallow(framed(registry, "list", LIST, chain(10)), CTX) is not None


def test_limits_are_validated(registry: MockSchemaRegistryClient) -> None:
    for key in ("max.collection.items", "max.decoded.values", "max.nesting.depth"):
        for bad in (0, -1, True, "10", 1.5):
            with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
                AvroDeserializer(registry, conf={key: bad})


def test_common_payloads_are_not_scanned(registry: MockSchemaRegistryClient,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The bounds cost one length comparison for payloads that cannot break them."""
    order = {"type": "record", "name": "Order", "fields": [
        {"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"]},
        {"name": "lines", "type": {"type": "array", "items": {
            "type": "record", "name": "Line",
            "fields": [{"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}}},
        {"name": "tags", "type": {"type": "map", "values": "string"}}]}
    value = {"id": 1, "note": "x", "lines": [{"sku": "a", "qty": i} for i in range(5000)],
             "tags": {"k": "v"}}
    payload = _encode(order, value)

    from kontrakt.serde._avro_bounds import AvroBounds

    def scanned(self: Any, data: bytes, offset: int) -> None:
        raise AssertionError("scanned")
    monkeypatch.setattr(AvroBounds, "check", scanned)
    assert AvroDeserializer(registry)(framed(registry, "order", order, payload), CTX) == value
    bounds = AvroBounds(parse_schema(order), 10_000_000, 10_000_000, 256)
    assert bounds.safe_len is not None and bounds.safe_len > 1_000_000


def _encode(schema: Any, value: Any) -> bytes:
    import io

    out = io.BytesIO()
    schemaless_writer(out, parse_schema(schema), value)
    return out.getvalue()


ALL_TYPES = {"type": "record", "name": "All", "namespace": "t", "fields": [
    {"name": "marks", "type": {"type": "array", "items": "null"}},  # every payload is scanned
    {"name": "b", "type": "boolean"}, {"name": "i", "type": "int"},
    {"name": "l", "type": "long"}, {"name": "f", "type": "float"},
    {"name": "d", "type": "double"}, {"name": "s", "type": "string"},
    {"name": "by", "type": "bytes"},
    {"name": "fx", "type": {"type": "fixed", "name": "F3", "size": 3}},
    {"name": "fx0", "type": {"type": "fixed", "name": "F0", "size": 0}},
    {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}},
    {"name": "u", "type": ["null", "string", "F3", {"type": "map", "values": "long"}]},
    {"name": "date", "type": {"type": "int", "logicalType": "date"}},
    {"name": "tree", "type": {"type": "record", "name": "Tree", "fields": [
        {"name": "kids", "type": {"type": "array", "items": "t.Tree"}}]}},
    {"name": "m", "type": {"type": "map", "values": {"type": "array", "items": "E"}}},
]}


def _random_value(rng: random.Random) -> dict[str, Any]:
    def tree(depth: int) -> dict[str, Any]:
        n = rng.randrange(3) if depth < 4 else 0
        return {"kids": [tree(depth + 1) for _ in range(n)]}
    return {
        "marks": [None] * rng.randrange(40), "b": rng.random() < 0.5,
        "i": rng.randrange(-2**31, 2**31), "l": rng.randrange(-2**63, 2**63),
        "f": 1.5, "d": rng.random(), "s": "é" * rng.randrange(20),
        "by": rng.randbytes(rng.randrange(20)), "fx": rng.randbytes(3), "fx0": b"",
        "e": rng.choice("ABC"),
        "u": rng.choice([None, "text", b"abc", {"k": rng.randrange(1000)}]),
        "date": rng.randrange(0, 20000), "tree": tree(0),
        "m": {str(k): [rng.choice("ABC") for _ in range(rng.randrange(5))]
              for k in range(rng.randrange(5))},
    }


def test_scanner_agrees_with_fastavro_on_every_type(registry: MockSchemaRegistryClient) -> None:
    """Valid payloads pass the scan (the schema's array of null makes every one scanned), and
    cut or corrupted ones give a deserialization error, never another exception."""
    from kontrakt.serde._avro_bounds import AvroBounds

    rng = random.Random(20)
    de = AvroDeserializer(registry)
    bounds = AvroBounds(parse_schema(ALL_TYPES), 10_000_000, 10_000_000, 256)
    assert bounds.safe_len == -1
    for _ in range(200):
        value = _random_value(rng)
        payload = _encode(ALL_TYPES, value)
        bounds.check(payload, 0)
        data = framed(registry, "all", ALL_TYPES, payload)
        decoded = de(data, CTX)
        assert decoded["marks"] == value["marks"] and decoded["tree"] == value["tree"]
        cut = data[:rng.randrange(5, len(data))]
        with pytest.raises(ValueDeserializationError):
            de(cut, CTX)
        with pytest.raises(SerializationError):
            bounds.check(payload[:-1] if payload else b"", 0)

