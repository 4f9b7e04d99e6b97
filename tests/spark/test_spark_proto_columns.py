"""The Protobuf column decoder (upb parse, fields read by compiled fillers into column
lists) against the row path (``ProtobufDeserializer``, the mapping's converter,
``pa.array``): for random proto3 schemas (nested and repeated messages, maps, enums,
``oneof``s, ``optional`` fields, ``Timestamp`` / ``Duration`` / wrapper types) and random
messages, and for messages written with an older or otherwise different version of the
schema, the Arrow arrays are equal. No broker: an in-process registry
(``MockSchemaRegistryClient``). Seeded."""

from __future__ import annotations

import random
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="needs the spark extra")

import pyarrow as pa

from kontrakt.registry import MockSchemaRegistryClient, Schema
from kontrakt.serde import MessageField
from kontrakt.spark._columns import RowDecoder, column_decoder, row_decoder
from kontrakt.spark._fieldplan import FieldPlan
from kontrakt.spark._proto_columns import ProtoColumnDecoder
from tests.spark.test_spark_json_columns import FakeChunk
from tests.spark.test_spark_mapping import _proto_descriptor

_SCALARS = ["int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64",
            "sfixed32", "sfixed64", "float", "double", "bool", "string", "bytes"]
_WKT = {"google.protobuf.Timestamp": "google/protobuf/timestamp.proto",
        "google.protobuf.Duration": "google/protobuf/duration.proto",
        "google.protobuf.StringValue": "google/protobuf/wrappers.proto",
        "google.protobuf.Int64Value": "google/protobuf/wrappers.proto"}


class _Gen:
    """Random proto3 files (``M0`` first, the record type) and messages of them."""

    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)
        self.messages: list[str] = []
        self.count = 0

    def field_type(self, depth: int) -> str:
        r = self.r
        pick = r.random()
        if pick < 0.55 or depth <= 0:
            return r.choice(_SCALARS)
        if pick < 0.7:
            return "Color"
        if pick < 0.85:
            return r.choice(list(_WKT))
        return self.message(depth - 1)

    def message(self, depth: int) -> str:
        name = f"M{self.count}"
        self.count += 1
        lines = []
        number = 1
        for i in range(self.r.randrange(1, 6)):
            kind = self.r.choice(["plain", "plain", "repeated", "map", "optional", "oneof"])
            if kind == "map":
                key = self.r.choice(["string", "int32", "int64", "bool", "uint64"])
                value = self.field_type(depth)
                lines.append(f"  map<{key}, {value}> f{i} = {number};")
            elif kind == "oneof":
                lines.append(f"  oneof o{i} {{ {self.field_type(depth)} f{i} = {number}; "
                             f"{self.field_type(depth)} g{i} = {number + 1}; }}")
                number += 1
            else:
                label = {"plain": "", "repeated": "repeated ", "optional": "optional "}[kind]
                ftype = self.field_type(depth)
                if label == "optional " and ftype not in [*_SCALARS, "Color"]:
                    label = ""
                lines.append(f"  {label}{ftype} f{i} = {number};")
            number += 1
        self.messages.append(f"message {name} {{\n" + "\n".join(lines) + "\n}")
        return name

    def text(self, depth: int) -> str:
        self.message(depth)
        imports = "".join(f'import "{f}";\n' for f in sorted(set(_WKT.values())))
        # M0 is the first message of the file: the record type.
        first = next(m for m in self.messages if m.startswith("message M0 "))
        rest = [m for m in self.messages if m is not first]
        return (f'syntax = "proto3";\npackage gen;\n{imports}'
                f"enum Color {{ RED = 0; GREEN = 1; BLUE = 2; }}\n"
                + "\n".join([first, *rest]))

    def scalar(self, ftype: str) -> Any:
        r = self.r
        if ftype in ("int32", "sint32", "sfixed32"):
            return r.choice([0, -1, 2**31 - 1, -(2**31), r.randrange(-999, 999)])
        if ftype in ("int64", "sint64", "sfixed64"):
            return r.choice([0, -1, 2**63 - 1, -(2**63), 2**40])
        if ftype in ("uint32", "fixed32"):
            return r.choice([0, 2**32 - 1, 7])
        if ftype in ("uint64", "fixed64"):
            return r.choice([0, 2**64 - 1, 2**63, 9])
        if ftype in ("float", "double"):
            return r.choice([0.0, -2.5, 1e30, r.random()])
        if ftype == "bool":
            return r.random() < 0.5
        if ftype == "string":
            return r.choice(["", "a", "é€\U0001f600"])
        return r.choice([b"", b"\x00\xff"])

    def fill(self, msg: Any) -> None:
        for f in msg.DESCRIPTOR.fields:
            if self.r.random() < 0.25:
                continue
            if f.containing_oneof is not None and msg.WhichOneof(f.containing_oneof.name):
                continue
            self.set(msg, f)

    def one(self, f: Any) -> Any:
        """A value for one item of ``f`` (None for a message: filled in place)."""
        if f.message_type is not None:
            return None
        if f.enum_type is not None:
            return self.r.choice([0, 1, 2, 7])  # 7: a number the enum does not name
        return self.scalar(_type_name(f))

    def set(self, msg: Any, f: Any) -> None:
        wkt = f.message_type.full_name if f.message_type is not None else None
        is_map = f.message_type is not None and f.message_type.GetOptions().map_entry
        if is_map:
            container = getattr(msg, f.name)
            kf, vf = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
            for _ in range(self.r.randrange(3)):
                key = self.one(kf)
                if vf.message_type is not None:
                    self.message_value(container[key], vf.message_type.full_name)
                else:
                    container[key] = self.one(vf)
        elif _repeated(f):
            container = getattr(msg, f.name)
            for _ in range(self.r.randrange(3)):
                if f.message_type is not None:
                    self.message_value(container.add(), wkt)
                else:
                    container.append(self.one(f))
        elif f.message_type is not None:
            sub = getattr(msg, f.name)
            sub.SetInParent()
            self.message_value(sub, wkt)
        else:
            setattr(msg, f.name, self.one(f))

    def message_value(self, sub: Any, full_name: str | None) -> None:
        if full_name in ("google.protobuf.Timestamp", "google.protobuf.Duration"):
            sign = -1 if full_name.endswith("Duration") and self.r.random() < 0.5 else 1
            sub.seconds = sign * self.r.choice([0, 1, 1_700_000_000, 86_400 * 3])
            sub.nanos = sign * self.r.choice([0, 999, 123_456_789])
            if full_name.endswith("Timestamp") and self.r.random() < 0.2:
                sub.seconds = -5  # before 1970
        elif full_name in _WKT:
            sub.value = "w" if full_name.endswith("StringValue") else 42
        else:
            self.fill(sub)


def _type_name(f: Any) -> str:
    names = {1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64",
             7: "fixed32", 8: "bool", 9: "string", 12: "bytes", 13: "uint32", 15: "sfixed32",
             16: "sfixed64", 17: "sint32", 18: "sint64"}
    return names[f.type]


def _repeated(f: Any) -> bool:
    flag = getattr(f, "is_repeated", None)
    return bool(flag) if flag is not None else f.label == 3


def _register(client: Any, subject: str, text: str) -> bytes:
    sid = client.register_schema(subject, Schema(text, "PROTOBUF"))
    return b"\0" + sid.to_bytes(4, "big") + b"\0"


def _decoders(client: Any, subject: str) -> tuple[RowDecoder, Any]:
    plan = FieldPlan("protobuf", client.get_latest_version(subject).schema)
    data_type = plan.spark_type()
    return (RowDecoder(row_decoder(plan, client), data_type),
            column_decoder(plan, client, data_type))


def _messages(gen: _Gen, text: str, prefix: bytes, n: int) -> list[bytes | None]:
    from google.protobuf.message_factory import GetMessageClass

    cls = GetMessageClass(_proto_descriptor(text))
    out: list[bytes | None] = []
    for _ in range(n):
        if gen.r.random() < 0.1:
            out.append(None)
            continue
        msg = cls()
        gen.fill(msg)
        out.append(prefix + msg.SerializeToString())
    return out


@pytest.mark.parametrize("seed", range(16))
def test_random_schemas_decode_as_the_row_path_does(seed: int) -> None:
    gen = _Gen(seed)
    text = gen.text(2)
    with MockSchemaRegistryClient({"url": "mock://"}) as client:
        prefix = _register(client, "p-value", text)
        old, new = _decoders(client, "p-value")
        assert isinstance(new, ProtoColumnDecoder)
        payloads = _messages(gen, text, prefix, 40)
        chunk = FakeChunk(payloads)
        want, want_errors = old.decode(chunk, MessageField.VALUE)
        got, errors = new.decode(chunk, MessageField.VALUE)
        assert not want_errors and not errors
        assert got.equals(want), (text, got.to_pylist(), want.to_pylist())
        assert new.fallbacks == 0, text
        assert new.decode_payloads(payloads).equals(want)


V1 = """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Order {
  int64 id = 1;
  string name = 2;
  Kind kind = 3;
  repeated Line lines = 4;
  google.protobuf.Timestamp at = 5;
  int32 dropped = 6;
}
message Line { string sku = 1; int32 qty = 2; }
enum Kind { SHOP = 0; WEB = 1; }
"""
# v2 adds fields (one optional), drops one, adds an enum value, a field to Line and a map.
V2 = """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Order {
  int64 id = 1;
  string name = 2;
  Kind kind = 3;
  repeated Line lines = 4;
  google.protobuf.Timestamp at = 5;
  optional double total = 7;
  map<string, Line> extra = 8;
}
message Line { string sku = 1; int32 qty = 2; string note = 3; }
enum Kind { SHOP = 0; WEB = 1; APP = 2; }
"""
# The same names with other types: no filler, the row path decodes these batches.
V_OTHER = V1.replace("string name = 2;", "int64 name = 2;")


def test_older_writer_versions_decode_in_the_readers_shape() -> None:
    with MockSchemaRegistryClient({"url": "mock://"}) as client:
        p1 = _register(client, "o-value", V1)
        p2 = _register(client, "o-value", V2)
        old, new = _decoders(client, "o-value")
        gen = _Gen(7)
        payloads = [*_messages(gen, V1, p1, 30), *_messages(gen, V2, p2, 30)]
        gen.r.shuffle(payloads)
        chunk = FakeChunk(payloads)
        want, want_errors = old.decode(chunk, MessageField.VALUE)
        got, errors = new.decode(chunk, MessageField.VALUE)
        assert not want_errors and not errors and new.fallbacks == 0
        assert got.equals(want)
        assert {"dropped"}.isdisjoint(want.type.names) if hasattr(want.type, "names") \
            else True


def test_a_writer_field_of_another_type_takes_the_row_path() -> None:
    with MockSchemaRegistryClient({"url": "mock://"}) as client:
        other = b"\0" + client.register_schema("x-other", Schema(V_OTHER, "PROTOBUF")
                                               ).to_bytes(4, "big") + b"\0"
        p1 = _register(client, "x-value", V1)
        old, new = _decoders(client, "x-value")
        gen = _Gen(3)
        payloads = [*_messages(gen, V1, p1, 5), *_messages(gen, V_OTHER, other, 5)]
        chunk = FakeChunk(payloads)
        want, want_errors = old.decode(chunk, MessageField.VALUE)
        got, errors = new.decode(chunk, MessageField.VALUE)
        assert new.fallbacks == 1
        assert got.equals(want) and errors.keys() == want_errors.keys()


def test_bad_payloads_get_their_own_errors() -> None:
    with MockSchemaRegistryClient({"url": "mock://"}) as client:
        p1 = _register(client, "b-value", V1)
        _, new = _decoders(client, "b-value")
        payloads = _messages(_Gen(1), V1, p1, 6)
        payloads[0] = p1 + b"\xff\xff"  # does not parse
        payloads[2] = b"\x07nope"  # not framed
        payloads[3] = b"\0\0\0\x7f\x7f\0"  # an id the registry does not have
        got, errors = new.decode(FakeChunk(payloads), MessageField.VALUE)
        assert sorted(errors) == [0, 2, 3]
        assert got.to_pylist()[0] is None and got.to_pylist()[2] is None


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_decoders_run_as_arrow_udfs_over_columns_of_framed_bytes(
        spark: Any, client: Any, registry_url: str, topic_name: str) -> None:
    """The embedded registry and the shared session: a DataFrame that already holds
    Confluent-framed JSON and Protobuf bytes (as read from files) is decoded by ``arrow_udf``
    functions that wrap ``decode_payloads``."""
    import json

    from google.protobuf.message_factory import GetMessageClass
    from pyspark.sql.functions import arrow_udf

    doc = {"type": "object", "properties": {"id": {"type": "integer"},
                                            "tags": {"type": "array",
                                                     "items": {"type": "string"}}}}
    json_id = client.register_schema(f"{topic_name}-json", Schema(json.dumps(doc), "JSON"))
    proto_prefix = _register(client, f"{topic_name}-proto", V1)
    plans = [FieldPlan(fmt, client.get_latest_version(f"{topic_name}-{name}").schema)
             for fmt, name in (("json", "json"), ("protobuf", "proto"))]
    types = [p.spark_type() for p in plans]
    url = registry_url

    def udf(plan: FieldPlan, data_type: Any) -> Any:
        def decode(payloads: pa.Array) -> pa.Array:
            from kontrakt.registry import SchemaRegistryClient
            from kontrakt.spark._columns import column_decoder

            with SchemaRegistryClient({"url": url}) as c:
                decoder: Any = column_decoder(plan, c, data_type)
                return decoder.decode_payloads(payloads.to_pylist())
        return arrow_udf(decode, data_type)

    order = GetMessageClass(_proto_descriptor(V1))
    rows = [(b"\0" + json_id.to_bytes(4, "big") + json.dumps({"id": i, "tags": ["t"] * i}
                                                              ).encode(),
             proto_prefix + order(id=i, name=f"n{i}", kind=i % 2).SerializeToString())
            for i in range(3)]
    df = spark.createDataFrame([*rows, (None, None)], "j binary, p binary")
    out = df.select(udf(plans[0], types[0])("j").alias("j"),
                    udf(plans[1], types[1])("p").alias("p")).collect()
    assert [None if r.j is None else tuple(r.j) for r in out] == [
        (0, []), (1, ["t"]), (2, ["t", "t"]), None]
    assert [None if r.p is None else (r.p.id, r.p.name, r.p.kind) for r in out] == [
        (0, "n0", "SHOP"), (1, "n1", "WEB"), (2, "n2", "SHOP"), None]


FLAT_V1 = """syntax = "proto3";
package flat;
message Order {
  int64 id = 1; string name = 2; Kind kind = 3; sint32 delta = 4; bytes raw = 5;
  bool paid = 6; uint64 big = 7; float ratio = 8;
}
enum Kind { SHOP = 0; WEB = 1; }
"""
# v2 adds an optional field and an enum value; a v1 writer lacks the field (null).
FLAT_V2 = FLAT_V1.replace("float ratio = 8;", "float ratio = 8; optional double total = 9;"
                          ).replace("WEB = 1;", "WEB = 1; APP = 2;")


def test_flat_messages_of_one_frame_are_filled_a_field_at_a_time() -> None:
    """Batches of one frame (schema id, first message), no null, of a reader with scalar and
    enum fields only, take the flat filler (the frames checked and stripped by Arrow
    kernels): the same arrays as the row path; a batch of two frames or with a null takes
    the filler a record. The chunk's values are never made a list of Python bytes."""
    from kontrakt.spark._arrow import Chunk
    from kontrakt.spark._batches import RecordColumns

    def columns(payloads: list[bytes | None]) -> Chunk:
        n = len(payloads)
        ints = pa.array(range(n), pa.int64())
        return Chunk.of_columns(RecordColumns(
            ints, ints, pa.array([0] * n, pa.int32()), pa.nulls(n, pa.binary()),
            pa.array(payloads, pa.binary()), None), "f", 0)

    with MockSchemaRegistryClient({"url": "mock://"}) as client:
        p1 = _register(client, "f-value", FLAT_V1)
        p2 = _register(client, "f-value", FLAT_V2)
        old, new = _decoders(client, "f-value")
        assert isinstance(new, ProtoColumnDecoder)
        gen = _Gen(5)
        v1 = [p for p in _messages(gen, FLAT_V1, p1, 60) if p is not None]
        v2 = [p for p in _messages(gen, FLAT_V2, p2, 60) if p is not None]
        for payloads, flat in ((v1, True), (v2, True), ([*v1[:20], *v2[:20]], False),
                               ([*v2[:20], None], False)):
            chunk = columns(payloads)
            got, errors = new.decode(chunk, MessageField.VALUE)
            want, want_errors = old.decode(FakeChunk(payloads), MessageField.VALUE)
            assert not errors and not want_errors and new.fallbacks == 0
            assert got.equals(want), (got.to_pylist()[:3], want.to_pylist()[:3])
            assert "values" not in chunk._lists  # the filler had the array
            assert (new._flat(pa.array(payloads, pa.binary())) is not None) is flat
        assert set(new._flat_fillers) == {int.from_bytes(p[1:5], "big") for p in (p1, p2)}
