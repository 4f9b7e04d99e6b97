"""The column-wise Avro decoder (``AvroVector``) gives exactly the per-record columnar
decoder's arrays (whose own oracle is fastavro, see test_spark_avro_columns), and declines
(None: the caller decodes payload by payload) every batch it does not take whole. Pure: no
broker, no JVM."""

from __future__ import annotations

import io
import random
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="needs the spark extra")

import pyarrow as pa
from fastavro import parse_schema, schemaless_writer

from kontrakt.spark._avro_columns import AvroColumns, decode_bare
from kontrakt.spark._avro_vector import AvroVector
from kontrakt.spark._types import avro_mapping

INNER = {"type": "record", "name": "In", "fields": [
    {"name": "x", "type": "long"}, {"name": "y", "type": ["null", "string"]}]}
SCHEMA = {"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "customer", "type": "string"},
    {"name": "qty", "type": "int"}, {"name": "price", "type": "double"},
    {"name": "note", "type": ["null", "string"]}, {"name": "ok", "type": "boolean"},
    {"name": "f", "type": ["float", "null"]}, {"name": "b", "type": "bytes"},
    {"name": "inner", "type": ["null", INNER]}]}
PREFIX = b"\0\0\0\0\x07"


def _record(rng: random.Random, i: int) -> dict[str, Any]:
    return {"id": rng.choice([i, -i, 2**61, -(2**62), 0]),
            "customer": rng.choice(["", f"customer-{i}", "é" * (i % 90)]),
            "qty": rng.choice([i % 7, -(2**31), 2**31 - 1]), "price": rng.random() * 1e6,
            "note": None if i % 3 else "gift wrap", "ok": i % 2 == 0,
            "f": None if i % 5 == 0 else 1.5, "b": rng.randbytes(i % 200),
            "inner": None if i % 4 == 0 else {"x": i, "y": None if i % 8 == 1 else "yy"}}


def _payloads(records: list[dict[str, Any]], prefix: bytes = PREFIX) -> list[bytes]:
    writer = parse_schema(SCHEMA)
    out = []
    for r in records:
        buf = io.BytesIO()
        buf.write(prefix)
        schemaless_writer(buf, writer, r)
        out.append(buf.getvalue())
    return out


def _decoders() -> tuple[AvroVector, AvroColumns, Any]:
    parsed = parse_schema(SCHEMA, expand=True)
    data_type = avro_mapping(SCHEMA).data_type
    return AvroVector(lambda schema_id: parsed, parsed, data_type), \
        AvroColumns(parsed, data_type), parsed


@pytest.mark.parametrize("seed", range(3))
def test_columns_are_the_per_record_decoders(seed: int) -> None:
    rng = random.Random(seed)
    payloads = _payloads([_record(rng, i) for i in range(rng.randrange(1, 3000))])
    vector, columns, parsed = _decoders()
    want = decode_bare(columns, parsed, [p[5:] for p in payloads])
    array = pa.array(payloads, pa.binary())
    got = vector.decode(array)
    assert got is not None
    assert got.type == want.type
    assert got.to_pylist() == want.to_pylist()
    # A slice of a larger array (offsets not starting at 0, as a chunk's are).
    if len(payloads) > 10:
        part = vector.decode(array.slice(3, len(payloads) - 7))
        assert part is not None and part.to_pylist() == want.slice(3, len(payloads) - 7
                                                                    ).to_pylist()


def _declined(payloads: list[bytes | None]) -> None:
    vector, _, _ = _decoders()
    assert vector.decode(pa.array(payloads, pa.binary())) is None


def test_batches_it_does_not_take_are_declined() -> None:
    rng = random.Random(7)
    good = _payloads([_record(rng, i) for i in range(20)])
    _declined([*good, None])  # a tombstone
    _declined([*good, _payloads([_record(rng, 1)], b"\0\0\0\0\x08")[0]])  # another id
    _declined([*good, good[0][:-1]])  # truncated
    _declined([*good, good[0] + b"\0"])  # bytes left over
    _declined([*good, b"\0\0\0\0\x07"])  # framing only
    bad_utf8 = _payloads([{**_record(rng, 2), "customer": "ab"}])[0].replace(b"ab", b"\xff\xfe")
    _declined([*good, bad_utf8])
    # A union index out of range: "note" is the first union; its index follows the double.
    rec = {**_record(rng, 3), "note": None}
    raw = bytearray(_payloads([rec])[0])
    plain = _payloads([{**rec, "note": "x"}])[0]
    at = next(i for i in range(len(raw)) if raw[i] != plain[i])
    raw[at] = 4  # index 2
    _declined([*good, bytes(raw)])


def test_schemas_with_resolution_or_other_types_have_no_plan() -> None:
    parsed = parse_schema(SCHEMA, expand=True)
    data_type = avro_mapping(SCHEMA).data_type
    other = {**SCHEMA, "fields": [*SCHEMA["fields"][1:], SCHEMA["fields"][0]]}  # reordered
    payloads = pa.array(_payloads([_record(random.Random(1), 1)]), pa.binary())
    assert AvroVector(lambda i: parse_schema(other, expand=True), parsed,
                      data_type).decode(payloads) is None
    assert AvroVector(lambda i: None, parsed, data_type).decode(payloads) is None
