"""Protobuf schemas as serialized descriptors: the descriptor printer and the registry's use of it.

The printer (``kontrakt.registry._proto_text``) is checked by round trip through protoc:
text -> descriptor -> printed text -> descriptor must give the same descriptor, and the
printed text must be accepted by the compatibility engine. The registry must accept the
base64 ``FileDescriptorProto`` form Confluent's serializers send, keep it as text, give it
the id of the equivalent text, and hand it back with ``format=serialized``.
"""

from __future__ import annotations

import base64
import importlib.resources
import json
import os
import random
import sys
import tempfile
from collections.abc import Mapping
from typing import Any

import pytest
from google.protobuf import descriptor_pb2

from kontrakt.registry import Schema, SchemaReference
from kontrakt.registry._errors import InvalidSchemaError
from kontrakt.registry._mock import MockSchemaRegistryClient
from kontrakt.registry._proto_text import (
    decode_descriptor,
    default_json_name,
    descriptor_to_proto_text,
)
from kontrakt.registry.compatibility import normalize_schema
from kontrakt.registry.compatibility._proto_parser import parse_proto_schema
from kontrakt.registry.server import RegistryApp, RegistryState, _validate

# protoc (grpcio-tools) is the oracle of every round trip here.
protoc: Any = pytest.importorskip("grpc_tools.protoc")
_INCLUDE = str(importlib.resources.files("grpc_tools") / "_proto")


def compile_files(files: Mapping[str, str], main: str) -> Any:
    """Compile ``main`` (with ``files`` importable) and return its FileDescriptorProto."""
    with tempfile.TemporaryDirectory(prefix="kontrakt-test-proto-") as tmp:
        for name, text in files.items():
            path = os.path.join(tmp, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
        out = os.path.join(tmp, "out.pb")
        rc = protoc.main(["protoc", f"-I{tmp}", f"-I{_INCLUDE}",
                          f"--descriptor_set_out={out}", main])
        assert rc == 0, f"protoc refused:\n{files[main]}"
        with open(out, "rb") as fh:
            return descriptor_pb2.FileDescriptorSet.FromString(fh.read()).file[0]


def without_default_json_names(fdp: Any) -> Any:
    """A copy with json_name cleared where it is protoc's default (generated code omits it)."""
    copy = descriptor_pb2.FileDescriptorProto()
    copy.CopyFrom(fdp)

    def clear(fields: Any) -> None:
        for f in fields:
            if f.json_name == default_json_name(f.name):
                f.ClearField("json_name")

    def walk(msgs: Any) -> None:
        for m in msgs:
            clear(m.field)
            clear(m.extension)
            walk(m.nested_type)

    walk(copy.message_type)
    clear(copy.extension)
    return copy


def round_trip(files: Mapping[str, str], main: str) -> tuple[Any, str]:
    """text -> descriptor -> text -> descriptor; asserts the descriptors are equal."""
    original = compile_files(files, main)
    text = descriptor_to_proto_text(original)
    again = compile_files({**files, main: text}, main)
    assert again == original, f"round trip changed the descriptor; printed:\n{text}"
    # Printing is a fixed point: equal descriptors print equal text.
    assert descriptor_to_proto_text(again) == text
    return original, text


def b64(fdp: Any) -> str:
    return base64.standard_b64encode(fdp.SerializeToString()).decode("ascii")


# ---------------------------------------------------------------- sample files
PROTO3 = """
syntax = "proto3";
package shop.v1;
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/struct.proto";
import "google/protobuf/any.proto";
import "google/protobuf/empty.proto";
import public "google/protobuf/wrappers.proto";
option java_package = "com.example.shop";
option java_outer_classname = "ShopProto";
option java_multiple_files = true;
option go_package = "example.com/shop;shop";
option csharp_namespace = "Shop.V1";
option optimize_for = CODE_SIZE;
// Comments are not part of a descriptor.
message Order {
  string id = 1;
  optional int64 qty = 2;                       // proto3 optional: a synthetic oneof
  repeated string tags = 3 [packed = false];
  map<string, Line> lines = 4;
  oneof payment {
    string card = 5;
    Cash cash = 6;
  }
  message Line {
    string sku = 1;
    Status status = 2;
    map<int32, string> attrs = 3;
    message Note { string text = 1; }
    repeated Note notes = 4;
  }
  enum Status {
    STATUS_UNSPECIFIED = 0;
    OK = 1;
    GONE = 2 [deprecated = true];
  }
  google.protobuf.Timestamp at = 7;
  google.protobuf.StringValue note = 8;
  optional string json_x = 9 [json_name = "jx"];
  reserved 15, 16 to 20, 1000 to max;
  reserved "legacy", "older";
  message Cash { double amount = 1; }
  Status status = 10 [deprecated = true];
  repeated Line items = 11;
  optional Line maybe = 12;
  oneof other { bytes raw = 13; google.protobuf.Duration wait = 14; }
  map<string, Status> by_name = 21;
  repeated int32 packed_ints = 22;
  google.protobuf.Struct extra = 23;
  google.protobuf.Any any = 24;
  sint32 s32 = 25; sint64 s64 = 26; fixed32 f32 = 27; fixed64 f64 = 28;
  sfixed32 sf32 = 29; sfixed64 sf64 = 30; float fl = 31; uint32 u32 = 32; uint64 u64 = 33;
  bool flag = 34;
}
enum Kind {
  option allow_alias = true;
  KIND_UNSPECIFIED = 0;
  A = 1;
  ALSO_A = 1;
  reserved 7, 10 to 20, 100 to max;
  reserved "OLD";
}
service Shop {
  option deprecated = true;
  rpc Place(Order) returns (Order);
  rpc Watch(google.protobuf.Empty) returns (stream Order);
  rpc Upload(stream Order) returns (google.protobuf.Empty) {
    option idempotency_level = IDEMPOTENT;
  }
  rpc Chat(stream Order) returns (stream Order);
}
"""

PROTO2 = r"""
syntax = "proto2";
package legacy;
option java_package = "com.example.legacy";
option cc_enable_arenas = true;
message Record {
  option deprecated = true;
  required string name = 1 [default = "a \"quoted\"\n\tname \\ ok"];
  optional int32 n = 2 [default = -5, deprecated = true];
  repeated int32 r = 3 [packed = true];
  optional double d = 4 [default = inf];
  optional float f = 5 [default = -inf];
  optional double nan_d = 6 [default = nan];
  optional double e = 7 [default = 1.5e+100];
  optional bytes b = 8 [default = "\001\377x\"y"];
  optional Color c = 9 [default = GREEN];
  optional bool yes = 10 [default = true];
  optional string unicode = 11 [default = "h\u00e9llo \u6f22"];
  optional uint64 big = 12 [default = 18446744073709551615];
  map<string, Inner> m = 13;
  message Inner { optional int32 x = 1; }
  oneof choice { string s = 14; Inner i = 15; }
  optional group Grp = 16 { optional int32 g = 17; repeated string h = 18; }
  extensions 100 to 199;
  extensions 1000 to max;
  reserved 20, 21 to 25, 500 to 600;
  reserved "old";
  enum Color { RED = 0; GREEN = 1; }
  map<int64, Color> m2 = 19;
  message After { optional string a = 1; }
  extend Record { optional string nested_ext = 101; }
}
enum Top { A = 0; B = 1; }
extend Record {
  optional int32 ext1 = 102;
  repeated string ext2 = 103;
}
"""

CUSTOM_OPTION_DEFS = """
syntax = "proto3";
package opts;
import "google/protobuf/descriptor.proto";
extend google.protobuf.FieldOptions { string sensitive = 50001; }
extend google.protobuf.MessageOptions { int32 version = 50002; repeated string owners = 50003; }
message Holder { int32 a = 1; }
"""

DEP = """
syntax = "proto3";
package dep.v1;
message Money { string currency = 1; int64 units = 2; }
enum Level { LEVEL_UNSPECIFIED = 0; HIGH = 1; }
"""

USES_DEP = """
syntax = "proto3";
package app;
import "dep/money.proto";
message Invoice {
  dep.v1.Money total = 1;
  repeated dep.v1.Money parts = 2;
  map<string, dep.v1.Money> by_currency = 3;
  dep.v1.Level level = 4;
  Invoice parent = 5;  // recursion
}
"""

# Nested names that shadow outer ones: fully qualified printing must keep them apart.
SHADOWING = """
syntax = "proto3";
package a.b;
message b { int32 x = 1; }
message Outer {
  message b { string y = 1; }
  b inner = 1;
  .a.b.b outer = 2;
  message Outer { Outer self = 1; }
}
"""

PROTO2_ONEOF_AND_REQUIRED = """
syntax = "proto2";
message A {
  required int32 id = 1;
  oneof v { int32 i = 2; string s = 3; B b = 4; }
  optional B after = 5;
  message B { required string k = 1; }
  oneof w { bytes raw = 6; }
}
"""

EMPTY_MESSAGES = """
syntax = "proto3";
message Empty {}
message Holder { Empty e = 1; message Nested {} }
enum Solo { SOLO_UNSPECIFIED = 0; }
"""

SAMPLES: dict[str, tuple[dict[str, str], str]] = {
    "proto3": ({"shop.proto": PROTO3}, "shop.proto"),
    "proto2": ({"legacy.proto": PROTO2}, "legacy.proto"),
    "custom-option-definitions": ({"opts.proto": CUSTOM_OPTION_DEFS}, "opts.proto"),
    "imports": ({"dep/money.proto": DEP, "invoice.proto": USES_DEP}, "invoice.proto"),
    "public-and-weak-imports": ({
        "dep/money.proto": DEP,
        "mid.proto": 'syntax = "proto3";\nimport public "dep/money.proto";\n'
                     'message Mid { dep.v1.Money m = 1; }\n',
        "top.proto": 'syntax = "proto3";\nimport "mid.proto";\nimport weak "dep/money.proto";\n'
                     "message Top { Mid mid = 1; dep.v1.Money via_public = 2; }\n",
    }, "top.proto"),
    "shadowing": ({"s.proto": SHADOWING}, "s.proto"),
    "proto2-oneofs": ({"p.proto": PROTO2_ONEOF_AND_REQUIRED}, "p.proto"),
    "empty-messages": ({"e.proto": EMPTY_MESSAGES}, "e.proto"),
}
# The compatibility engine refuses proto2 groups by design (UnsupportedSchemaError).
_HAS_GROUPS = {"proto2"}


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_printer_round_trip(sample: str) -> None:
    files, main = SAMPLES[sample]
    original, text = round_trip(files, main)
    assert text.startswith(f'syntax = "{original.syntax or "proto2"}";')
    assert "//" not in text
    if sample in _HAS_GROUPS:
        return
    # The compatibility engine parses the printed text, with the imports as references.
    refs = [(name, src) for name, src in files.items() if name != main]
    parsed = parse_proto_schema(text, refs)
    assert {t.name for t in parsed.file.types} == (
        {m.name for m in original.message_type} | {e.name for e in original.enum_type})


def test_printer_output_is_readable_proto() -> None:
    _, text = round_trip(*SAMPLES["proto3"])
    lines = text.splitlines()
    assert lines[:3] == ['syntax = "proto3";', "package shop.v1;",
                         'import "google/protobuf/timestamp.proto";']
    assert 'import public "google/protobuf/wrappers.proto";' in lines
    assert 'option java_package = "com.example.shop";' in lines
    assert "option optimize_for = CODE_SIZE;" in lines
    assert "  optional int64 qty = 2;" in lines  # the synthetic oneof is not printed
    assert not any("_qty" in line for line in lines)
    assert "  map<string, .shop.v1.Order.Line> lines = 4;" in lines
    assert not any("LinesEntry" in line for line in lines)  # map entries become map<K, V>
    assert '  optional string json_x = 9 [json_name = "jx"];' in lines
    assert "  reserved 15, 16 to 20, 1000 to max;" in lines
    assert "  rpc Watch(.google.protobuf.Empty) returns (stream .shop.v1.Order);" in lines
    _, legacy = round_trip(*SAMPLES["proto2"])
    assert "  optional group Grp = 16 {" in legacy.splitlines()
    assert "  required string name = 1 " in legacy


def _random_proto(rnd: random.Random) -> str:
    """A random but valid proto3 or proto2 file: nesting, maps, oneofs, enums, labels."""
    proto3 = rnd.random() < 0.6
    scalars = ["int32", "int64", "uint32", "sint64", "fixed32", "sfixed64", "bool", "string",
               "bytes", "double", "float"]
    lines = [f'syntax = "{"proto3" if proto3 else "proto2"}";', "package rnd.p;",
             'import "google/protobuf/timestamp.proto";']
    counter = iter(range(10**6))

    def enum(depth: int) -> list[str]:
        name = f"E{next(counter)}"
        pad = "  " * depth
        out = [f"{pad}enum {name} {{"] + [f"{pad}  {name}_V{i} = {i};"
                                          for i in range(rnd.randrange(1, 4))]
        return [*out, f"{pad}}}"]

    def message(depth: int, known: list[str]) -> tuple[str, list[str]]:
        name = f"M{next(counter)}"
        pad = "  " * depth
        body: list[list[str]] = []  # blocks, shuffled below
        types = list(known)
        if depth < 3:
            for _ in range(rnd.randrange(0, 3)):
                if rnd.random() < 0.6:
                    inner, block = message(depth + 1, types)
                    types.append(f"{name}.{inner}")
                    body.append(block)
                else:
                    body.append(enum(depth + 1))
        number = 1
        for _ in range(rnd.randrange(1, 8)):
            kind = rnd.random()
            ftype = rnd.choice([*scalars, "google.protobuf.Timestamp", *types])
            fname = f"f_{number}_{rnd.choice(['a', 'b_c', 'dd'])}"
            if kind < 0.15:
                value = rnd.choice(scalars + types)
                body.append([f"{pad}  map<string, {value}> {fname} = {number};"])
            elif kind < 0.3:
                members = []
                for _ in range(rnd.randrange(1, 3)):
                    members.append(f"{pad}    {rnd.choice(scalars)} {fname}_{number} = {number};")
                    number += 1
                number -= 1
                body.append([f"{pad}  oneof o_{number} {{", *members, f"{pad}  }}"])
            else:
                labels = ["repeated", "optional", ""] if proto3 else ["repeated", "optional"]
                label = rnd.choice(labels)
                body.append([f"{pad}  {label + ' ' if label else ''}{ftype} {fname} = {number};"])
            number += 1
        if rnd.random() < 0.3:
            body.append([f"{pad}  reserved {number + 5}, {number + 10} to {number + 20};"])
        rnd.shuffle(body)  # declaration order must survive whatever it is
        return name, [f"{pad}message {name} {{", *(x for b in body for x in b), f"{pad}}}"]

    top: list[str] = []
    for _ in range(rnd.randrange(1, 4)):
        _, block = message(0, [])
        top += block
    if rnd.random() < 0.5:
        top += enum(0)
    return "\n".join(lines + top) + "\n"


@pytest.mark.parametrize("seed", range(12))
def test_printer_round_trip_random_files(seed: int) -> None:
    text = _random_proto(random.Random(seed))
    _, printed = round_trip({"r.proto": text}, "r.proto")
    parse_proto_schema(printed)
    assert normalize_schema(Schema(printed, "PROTOBUF"))


def test_generated_class_descriptor_round_trip() -> None:
    # What the serializers register: the generated module's serialized_pb (no json_name).
    from google.protobuf import timestamp_pb2, wrappers_pb2

    for mod in (timestamp_pb2, wrappers_pb2):
        fdp = descriptor_pb2.FileDescriptorProto.FromString(mod.DESCRIPTOR.serialized_pb)
        text = descriptor_to_proto_text(fdp)
        again = compile_files({mod.DESCRIPTOR.name: text}, mod.DESCRIPTOR.name)
        assert without_default_json_names(again) == without_default_json_names(fdp)


# ---------------------------------------------------------------- base64 recognition
def test_decode_descriptor_recognises_only_base64() -> None:
    fdp = compile_files({"dep/money.proto": DEP}, "dep/money.proto")
    assert decode_descriptor(b64(fdp)) == fdp
    assert decode_descriptor("  " + b64(fdp) + "\n") == fdp
    assert decode_descriptor(DEP) is None
    assert decode_descriptor('syntax = "proto3"; message M {}') is None
    assert decode_descriptor("abc") is None  # base64 alphabet but not base64 (length)


@pytest.mark.parametrize("bad", [
    "AAAA",                                              # field number 0: not a descriptor
    base64.b64encode(b"\x0a\xff\x01").decode(),          # truncated length-delimited field
    base64.b64encode(b"\x0a\x05x.pro").decode(),         # only a name: declares nothing
])
def test_decode_descriptor_refuses_bad_descriptors(bad: str) -> None:
    with pytest.raises(InvalidSchemaError) as info:
        decode_descriptor(bad)
    assert (info.value.http_status_code, info.value.error_code) == (422, 42201)


def test_printer_refuses_editions() -> None:
    fdp = descriptor_pb2.FileDescriptorProto(name="e.proto", syntax="editions")
    fdp.message_type.add(name="M")
    with pytest.raises(InvalidSchemaError, match="editions"):
        descriptor_to_proto_text(fdp)


# ---------------------------------------------------------------- the registry
@pytest.fixture
def app() -> RegistryApp:
    return RegistryApp(RegistryState())


def call(app: RegistryApp, method: str, path: str, body: Any = None, query: str = ""
         ) -> tuple[int, Any]:
    raw = json.dumps(body).encode() if body is not None else None
    return app.handle(method, path, query, raw)


def register(app: RegistryApp, subject: str, schema: str, refs: list[dict[str, Any]] | None = None,
             query: str = "") -> tuple[int, Any]:
    body: dict[str, Any] = {"schema": schema, "schemaType": "PROTOBUF"}
    if refs:
        body["references"] = refs
    return call(app, "POST", f"/subjects/{subject}/versions", body, query)


def test_registry_stores_descriptor_as_text_and_serves_both_forms(app: RegistryApp) -> None:
    files, main = SAMPLES["proto3"]
    fdp = compile_files(files, main)
    status, out = register(app, "shop-value", b64(fdp))
    assert status == 200, out
    sid = out["id"]
    status, got = call(app, "GET", f"/schemas/ids/{sid}")
    assert status == 200 and got["schemaType"] == "PROTOBUF"
    assert got["schema"] == descriptor_to_proto_text(fdp)
    # format=serialized: the stored text compiled back, as base64 FileDescriptorProto.
    status, ser = call(app, "GET", f"/schemas/ids/{sid}", query="format=serialized")
    assert status == 200
    back = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(ser["schema"]))
    assert back.name == "default"
    back.name = fdp.name
    assert back == fdp
    for path in (f"/schemas/ids/{sid}/schema", "/subjects/shop-value/versions/1/schema",
                 "/subjects/shop-value/versions/latest/schema"):
        status, raw = call(app, "GET", path, query="format=serialized")
        assert (status, raw) == (200, ser["schema"]), path
        assert call(app, "GET", path) == (200, got["schema"])
    status, version = call(app, "GET", "/subjects/shop-value/versions/1",
                           query="format=serialized")
    assert status == 200 and version["schema"] == ser["schema"] and version["id"] == sid
    # Other format names give the text, as in Confluent; other schema types are untouched.
    assert call(app, "GET", f"/schemas/ids/{sid}", query="format=resolved")[1] == got
    status, avro = call(app, "POST", "/subjects/a/versions", {"schema": '"string"'})
    assert call(app, "GET", f"/schemas/ids/{avro['id']}",
                query="format=serialized")[1]["schema"] == '"string"'


def test_descriptor_and_equivalent_text_share_an_id(app: RegistryApp) -> None:
    files, main = SAMPLES["proto3"]
    fdp = compile_files(files, main)
    sid = register(app, "from-descriptor", b64(fdp))[1]["id"]
    # The original text (comments, relative names, other layout) is the same schema.
    assert register(app, "from-text", PROTO3)[1]["id"] == sid
    assert register(app, "printed", descriptor_to_proto_text(fdp))[1]["id"] == sid
    # Looking the text up under the descriptor's subject finds it, and the reverse.
    status, found = call(app, "POST", "/subjects/from-descriptor",
                         {"schema": PROTO3, "schemaType": "PROTOBUF"})
    assert status == 200 and (found["id"], found["version"]) == (sid, 1)
    status, found = call(app, "POST", "/subjects/from-text",
                         {"schema": b64(fdp), "schemaType": "PROTOBUF"})
    assert status == 200 and found["id"] == sid
    # Registering the same descriptor again is not a new version.
    assert register(app, "from-descriptor", b64(fdp))[1]["version"] == 1
    # A different schema is a different id.
    changed = PROTO3.replace("bool flag = 34;", "bool flag = 34; int32 more = 35;")
    assert register(app, "other", changed)[1]["id"] != sid


def test_descriptor_with_references(app: RegistryApp) -> None:
    dep = compile_files({"dep/money.proto": DEP}, "dep/money.proto")
    uses = compile_files({"dep/money.proto": DEP, "invoice.proto": USES_DEP}, "invoice.proto")
    dep_id = register(app, "dep-money", b64(dep))[1]["id"]
    # The import must be given as a reference, whatever the form.
    assert register(app, "invoice", b64(uses))[1]["error_code"] == 42201
    refs = [{"name": "dep/money.proto", "subject": "dep-money", "version": 1}]
    status, out = register(app, "invoice", b64(uses), refs)
    assert status == 200, out
    assert register(app, "invoice-text", USES_DEP, refs)[1]["id"] == out["id"]
    status, ser = call(app, "GET", f"/schemas/ids/{out['id']}", query="format=serialized")
    back = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(ser["schema"]))
    assert list(back.dependency) == ["dep/money.proto"]
    assert ser["references"] == refs
    back.name = uses.name
    assert back == uses
    assert call(app, "GET", "/subjects/dep-money/versions/1",
                query="format=serialized")[1]["id"] == dep_id


@pytest.mark.parametrize("bad", [
    "AAAA",
    base64.b64encode(b"\x0a\xff\x01").decode(),
    base64.b64encode(b"\x0a\x05x.pro").decode(),
    "not a schema!",
])
def test_registry_refuses_bad_descriptors_with_42201(app: RegistryApp, bad: str) -> None:
    status, out = register(app, "s", bad)
    assert (status, out["error_code"]) == (422, 42201)
    assert out["message"]


def test_registry_refuses_descriptor_protoc_rejects(app: RegistryApp) -> None:
    fdp = descriptor_pb2.FileDescriptorProto(name="x.proto", syntax="proto3")
    msg = fdp.message_type.add(name="M")
    msg.field.add(name="a", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
                  type_name=".nowhere.Missing",
                  label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    status, out = register(app, "s", b64(fdp))
    assert (status, out["error_code"]) == (422, 42201)
    assert "Missing" in out["message"]


def test_compatibility_between_text_and_descriptor_versions(app: RegistryApp) -> None:
    v1 = 'syntax = "proto3";\npackage c;\nmessage E { string id = 1; }\n'
    v2 = 'syntax = "proto3";\npackage c;\nmessage E { string id = 1; int64 at = 2; }\n'
    bad = 'syntax = "proto3";\npackage c;\nmessage E { int32 id = 1; }\n'
    assert register(app, "c", v1)[0] == 200
    fdp2 = compile_files({"c.proto": v2}, "c.proto")
    status, out = register(app, "c", b64(fdp2))
    assert (status, out["version"]) == (200, 2)
    fbad = compile_files({"c.proto": bad}, "c.proto")
    status, out = register(app, "c", b64(fbad))
    assert (status, out["error_code"]) == (409, 40901)
    status, out = call(app, "POST", "/compatibility/subjects/c/versions/latest",
                       {"schema": b64(fdp2), "schemaType": "PROTOBUF"})
    assert (status, out) == (200, {"is_compatible": True})
    # normalize=true takes descriptors too
    status, out = register(app, "n", b64(fdp2), query="normalize=true")
    assert status == 200, out


def test_serialized_format_without_grpcio_tools(app: RegistryApp,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    sid = register(app, "s", DEP)[1]["id"]
    simple = compile_files({"c.proto": 'syntax = "proto3";\nmessage C { int32 a = 1; }\n'},
                           "c.proto")
    _validate._compile_protobuf_cached.cache_clear()
    monkeypatch.setitem(sys.modules, "grpc_tools", None)  # import grpc_tools -> ImportError
    try:
        assert call(app, "GET", f"/schemas/ids/{sid}")[1]["schema"] == DEP
        status, out = call(app, "GET", f"/schemas/ids/{sid}", query="format=serialized")
        assert status == 501 and "grpcio-tools" in out["message"]
        # Descriptors are still accepted (parsed by the protobuf runtime, printed as text).
        status, out = register(app, "t", b64(simple))
        assert status == 200, out
        assert call(app, "GET", f"/schemas/ids/{out['id']}")[1]["schema"] == (
            descriptor_to_proto_text(simple))
    finally:
        _validate._compile_protobuf_cached.cache_clear()


def test_mock_client_accepts_descriptors_and_fetches_serialized() -> None:
    fdp = compile_files({"dep/money.proto": DEP}, "dep/money.proto")
    client = MockSchemaRegistryClient()
    # A second client on the same registry: the first one caches what it registered.
    reader = MockSchemaRegistryClient(state=client.app.state)
    try:
        sid = client.register_schema("m", Schema(b64(fdp), "PROTOBUF"))
        assert client.register_schema("m2", Schema(DEP, "PROTOBUF")) == sid
        assert reader.get_schema(sid).schema_str == descriptor_to_proto_text(fdp)
        ser = reader.get_schema(sid, fmt="serialized").schema_str
        back = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(ser))
        back.name = fdp.name
        assert back == fdp
        assert reader.get_latest_version("m", fmt="serialized").schema.schema_str == ser
        ref = SchemaReference("dep/money.proto", "m", 1)
        uses = compile_files({"dep/money.proto": DEP, "invoice.proto": USES_DEP},
                             "invoice.proto")
        assert client.register_schema("inv", Schema(b64(uses), "PROTOBUF", [ref])) > sid
    finally:
        client.close()
        reader.close()
