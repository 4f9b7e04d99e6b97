"""The JSON column decoder (Arrow's JSON reader over a batch) against the row path
(``JSONDeserializer`` validating with the writer schema, the mapping's converter,
``pa.array``): for random JSON Schemas (nested objects, arrays, maps, nullable types, string
enums, ``$defs`` references) and valid documents, the Arrow arrays are equal; invalid or
unframed records get their own error and the others their values, as the row path gives
them. No broker: an in-process registry (``MockSchemaRegistryClient``). Seeded."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="needs the spark extra")

import pyarrow as pa

from kontrakt.errors import SerializationError
from kontrakt.registry import MockSchemaRegistryClient, Schema
from kontrakt.serde import MessageField
from kontrakt.spark._columns import RowDecoder, column_decoder, row_decoder
from kontrakt.spark._fieldplan import FieldPlan
from kontrakt.spark._json_columns import JsonColumnDecoder


class FakeChunk:
    """The columns of a batch, as the decoders use a ``Chunk`` (the interface alone)."""

    def __init__(self, values: list[bytes | None], headers: Any = None) -> None:
        n = len(values)
        self.values = tuple(values)
        self.keys = (None,) * n
        self.offsets = tuple(range(n))
        self.timestamps = (0,) * n
        self.kinds = (0,) * n
        self.headers = tuple(headers or [()] * n)
        self.has_headers = any(self.headers)

    def __len__(self) -> int:
        return len(self.values)

    @property
    def value_array(self) -> pa.Array:
        return pa.array(self.values, pa.binary())

    @property
    def key_array(self) -> pa.Array:
        return pa.array(self.keys, pa.binary())


class _Gen:
    """Random JSON Schemas and documents valid against them."""

    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)
        self.defs: dict[str, Any] = {}

    def schema(self, depth: int) -> Any:
        r = self.r
        leaves: list[Any] = [{"type": "string"}, {"type": "integer"}, {"type": "number"},
                             {"type": "boolean"}, {"type": ["string", "null"]},
                             {"type": ["null", "integer"]}, {"enum": ["RED", "GREEN"]},
                             {"anyOf": [{"type": "number"}, {"type": "null"}]},
                             {"type": "string", "format": "date-time"}]
        if depth <= 0 or r.random() < 0.4:
            return dict(r.choice(leaves))
        kind = r.choice(["object", "array", "map", "ref", "nullable"])
        if kind == "object":
            return self.object(depth - 1)
        if kind == "array":
            return {"type": "array", "items": self.schema(depth - 1)}
        if kind == "map":
            return {"type": "object", "additionalProperties": self.schema(depth - 1)}
        if kind == "ref":
            name = f"D{len(self.defs)}"
            self.defs[name] = {}  # the name is taken before the nested ones are made
            self.defs[name] = self.object(depth - 1)
            return {"$ref": f"#/$defs/{name}"}
        return {"oneOf": [{"type": "null"}, self.object(depth - 1)]}

    def object(self, depth: int) -> dict[str, Any]:
        n = self.r.randrange(1, 5)
        return {"type": "object",
                "properties": {f"p{i}": self.schema(depth) for i in range(n)}}

    def root(self, depth: int) -> dict[str, Any]:
        root = self.object(depth)
        root["$defs"] = self.defs
        return root

    def value(self, s: Any) -> Any:
        r = self.r
        if "$ref" in s:
            return self.value(self.defs[s["$ref"].rsplit("/", 1)[1]])
        for key in ("oneOf", "anyOf"):
            if key in s:
                return self.value(r.choice(s[key]))
        if "enum" in s:
            return r.choice(s["enum"])
        kind = s["type"]
        if isinstance(kind, list):
            kind = r.choice(kind)
        if kind == "null":
            return None
        if kind == "string":
            return r.choice(["", "a", "é\u00e9 \"q\" \\", "\u20ac\U0001f600",
                             "2024-01-01T00:00:00Z"])
        if kind == "integer":
            return r.choice([0, -1, 2**40, -(2**63), 2**63 - 1, r.randrange(-1000, 1000)])
        if kind == "number":
            return r.choice([0.0, -1.5, 1e300, 5, r.random() * 10 ** r.randrange(-20, 20)])
        if kind == "boolean":
            return r.random() < 0.5
        if kind == "array":
            return [self.value(s["items"]) for _ in range(r.randrange(3))]
        if "additionalProperties" in s:
            return {f"k{i}": self.value(s["additionalProperties"]) for i in range(r.randrange(3))}
        props = s["properties"]
        # Some properties left out, and a property the schema does not name.
        doc = {k: self.value(v) for k, v in props.items() if r.random() < 0.85}
        if r.random() < 0.2:
            doc["extra"] = {"x": [1, 2]}
        return doc


def _decoders(client: Any, subject: str, schema: Any) -> tuple[bytes, RowDecoder, Any]:
    sid = client.register_schema(subject, Schema(json.dumps(schema), "JSON"))
    plan = FieldPlan("json", client.get_latest_version(subject).schema)
    data_type = plan.spark_type()
    # The row path as it was: every document validated against its writer schema.
    old = RowDecoder(row_decoder(FieldPlan("json", plan.schema, validate=True), client),
                     data_type)
    return b"\0" + sid.to_bytes(4, "big"), old, column_decoder(plan, client, data_type)


def _frame(prefix: bytes, doc: Any) -> bytes:
    return prefix + json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


@pytest.mark.parametrize("seed", range(24))
def test_random_schemas_decode_as_the_row_path_does(seed: int) -> None:
    gen = _Gen(seed)
    schema = gen.root(3)
    with MockSchemaRegistryClient({"url": "mock://"}) as client:
        prefix, old, new = _decoders(client, f"s{seed}-value", schema)
        assert isinstance(new, JsonColumnDecoder)
        payloads = [None if gen.r.random() < 0.1 else _frame(prefix, gen.value(schema))
                    for _ in range(60)]
        chunk = FakeChunk(payloads)
        want, want_errors = old.decode(chunk, MessageField.VALUE)
        got, errors = new.decode(chunk, MessageField.VALUE)
        assert not want_errors and not errors
        assert got.type == want.type
        assert got.equals(want), (schema, got.to_pylist(), want.to_pylist())
        # Maps are not Arrow's to read: only schemas without them take Arrow's reader.
        assert new.fallbacks == (1 if "map<" in str(want.type) else 0), schema
        assert new.decode_payloads(payloads).equals(want)


ORDER = {"type": "object", "properties": {
    "id": {"type": "integer"}, "name": {"type": "string"},
    "price": {"type": "number", "minimum": 0},
    "lines": {"type": "array", "items": {"$ref": "#/definitions/Line"}}},
    "required": ["id"],
    "definitions": {"Line": {"type": "object", "properties": {"sku": {"type": "string"}}}}}


def test_each_bad_record_gets_its_own_error_and_the_others_their_values() -> None:
    with MockSchemaRegistryClient({"url": "mock://"}) as client:
        prefix, _, new = _decoders(client, "bad-value", ORDER)
        avro_id = client.register_schema("avro-value", Schema('"string"', "AVRO"))
        good = [{"id": i, "name": f"n{i}", "price": 1.5, "lines": [{"sku": "a"}]}
                for i in range(8)]
        payloads: list[bytes | None] = [_frame(prefix, d) for d in good]
        payloads[1] = _frame(prefix, {"id": "one"})  # a string for a bigint
        payloads[2] = prefix + b'{"id": 1'  # truncated
        payloads[3] = b'{"id": 3}'  # not framed
        payloads[4] = b"\0" + avro_id.to_bytes(4, "big") + b'{"id": 4}'  # not a JSON id
        payloads[5] = prefix + b'{"id":5,\n"name":"x"}'  # valid, on two lines
        payloads[6] = None
        got, errors = new.decode(FakeChunk(payloads), MessageField.VALUE)
        assert sorted(errors) == [1, 2, 3, 4]
        assert all(isinstance(e, (SerializationError, pa.ArrowException))
                   for e in errors.values()), errors
        assert got.to_pylist() == [
            {"id": 0, "name": "n0", "price": 1.5, "lines": [{"sku": "a"}]},
            None, None, None, None,
            {"id": 5, "name": "x", "price": None, "lines": None},
            None,
            {"id": 7, "name": "n7", "price": 1.5, "lines": [{"sku": "a"}]}]
        with pytest.raises(SerializationError, match="payload 1 could not be decoded"):
            new.decode_payloads(payloads)


def test_what_is_validated_follows_from_json_unless_the_option_asks() -> None:
    """Without ``value.json.validate`` a document is checked against the column's type
    only (as Spark's ``from_json``): a missing required property or a negative price is
    read; with it, the writer schema's keywords are checked too, as the registry
    deserializers do."""
    with MockSchemaRegistryClient({"url": "mock://"}) as client:
        prefix, _, lenient = _decoders(client, "v-value", ORDER)
        plan = FieldPlan("json", client.get_latest_version("v-value").schema, validate=True)
        strict = column_decoder(plan, client, plan.spark_type())
        payloads = [_frame(prefix, {"name": "no id"}), _frame(prefix, {"id": 2, "price": -1})]
        got, errors = lenient.decode(FakeChunk(payloads), MessageField.VALUE)
        assert not errors and got.to_pylist() == [
            {"id": None, "name": "no id", "price": None, "lines": None},
            {"id": 2, "name": None, "price": -1.0, "lines": None}]
        got, errors = strict.decode(FakeChunk(payloads), MessageField.VALUE)
        assert sorted(errors) == [0, 1] and got.to_pylist() == [None, None]
        assert "does not match the JSON schema" in str(errors[0])


def test_a_document_arrow_would_misread_is_decoded_by_the_row_path() -> None:
    """Arrow's reader takes several objects from one line and skips blank lines; such
    payloads must not shift the values of the records after them."""
    with MockSchemaRegistryClient({"url": "mock://"}) as client:
        prefix, _, new = _decoders(client, "m-value", ORDER)
        payloads = [prefix + b'{"id":1} {"id":2}', prefix + b"", prefix + b'{"id":3}',
                    prefix + b" null", prefix + b'{"name":"\xff"}']
        got, errors = new.decode(FakeChunk(payloads), MessageField.VALUE)
        assert sorted(errors) == [0, 1, 4]  # a JSON null is a null value
        assert got.to_pylist() == [None, None, {"id": 3, "name": None, "price": None,
                                                "lines": None}, None, None]
        assert new.fallbacks == 1


def test_row_path_errors_name_the_topic_and_offset_without_the_records() -> None:
    """The row path reads only the chunk's columns (not ``chunk.records``); the topic comes
    from ``column_decoder``."""
    with MockSchemaRegistryClient({"url": "mock://"}) as client:
        client.register_schema("t-value", Schema(json.dumps(ORDER), "JSON"))
        plan = FieldPlan("json", client.get_latest_version("t-value").schema)
        decoder = column_decoder(plan, client, plan.spark_type(), "orders")
        chunk = FakeChunk([b"not framed"])
        chunk.offsets = (41,)
        _, errors = decoder.decode(chunk, MessageField.VALUE)
        assert "(topic 'orders', value, offset 41)" in str(errors[0])


def test_a_chunk_of_columns_is_read_without_a_python_object_a_record() -> None:
    """The frames are checked and stripped by Arrow kernels over the chunk's value array:
    the chunk's values are never made Python ``bytes`` (``Chunk.values``), nulls and
    documents of unequal lengths included."""
    from kontrakt.spark._arrow import Chunk
    from kontrakt.spark._batches import RecordColumns

    with MockSchemaRegistryClient({"url": "mock://"}) as client:
        prefix, old, new = _decoders(client, "c-value", ORDER)
        payloads = [None if i % 5 == 3 else _frame(prefix, {"id": i, "name": "n" * i})
                    for i in range(40)]
        n = len(payloads)
        ints = pa.array(range(n), pa.int64())
        chunk = Chunk.of_columns(RecordColumns(
            ints, ints, pa.array([0] * n, pa.int32()), pa.nulls(n, pa.binary()),
            pa.array(payloads, pa.binary()), None), "c", 0)
        got, errors = new.decode(chunk, MessageField.VALUE)
        assert not errors and new.fallbacks == 0
        assert "values" not in chunk._lists  # no per-record bytes were made
        want, _ = old.decode(FakeChunk(payloads), MessageField.VALUE)
        assert got.equals(want)
