"""Our .proto parser against protoc (grpcio-tools) as an oracle.

Each file is compiled by protoc into a descriptor set; every message's fields (name, number,
label, type name, oneof) must match what our parser read, and protoc must reject what we reject.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import grpc_tools
import pytest
from google.protobuf import descriptor_pb2
from grpc_tools import protoc

from kontrakt.registry.compatibility._proto_parser import (
    SCALARS,
    ProtoEnum,
    ProtoMessage,
    parse_proto_schema,
    resolve_type,
)
from kontrakt.registry.compatibility._result import SchemaParseError

SCHEMAS = Path(__file__).resolve().parents[3] / "schemas"
WELL_KNOWN = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
_TYPE_NAMES = {v: k.lower()[5:] for k, v in descriptor_pb2.FieldDescriptorProto.Type.items()}

SAMPLES = {
    "nested.proto": """
        syntax = "proto3";
        package acme.v1;
        import "google/protobuf/timestamp.proto";
        message Order {
          string id = 1;
          repeated int64 qty = 2;
          google.protobuf.Timestamp at = 3;
          map<string, Item> items = 4;
          oneof pay { string card = 5; bytes token = 6; }
          Status status = 7;
          optional sint32 delta = 8;
          message Item { fixed64 sku = 1; Order.Status st = 2; }
          enum Status { UNKNOWN = 0; OK = 1; }
          reserved 9 to 11, 20;
          reserved "old";
        }
        message Other { .acme.v1.Order.Item item = 1; double d = 2; }
    """,
    "legacy.proto": """
        syntax = "proto2";
        package legacy;
        message M {
          required string a = 1;
          optional int32 b = 2 [default = 7];
          repeated float c = 3 [packed = true];
          extensions 100 to 199;
          message N { optional bool flag = 1; }
          optional N n = 4;
        }
        extend M { optional string ext = 100; }
    """,
}


def _protoc(tmp_path: Path, files: dict[str, str]) -> descriptor_pb2.FileDescriptorSet | None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    out = tmp_path / "out.pb"
    code = protoc.main(["protoc", f"-I{tmp_path}", f"-I{WELL_KNOWN}", "--include_imports",
                        f"--descriptor_set_out={out}", *files])
    if code != 0:
        return None
    fds = descriptor_pb2.FileDescriptorSet()
    fds.ParseFromString(out.read_bytes())
    return fds


def _ours(msg: ProtoMessage, schema: Any) -> dict[int, tuple[str, str, str, str]]:
    out = {}
    members = [(f, "") for f in msg.fields] + [(f, o.name) for o in msg.oneofs for f in o.fields]
    for f, oneof in members:
        if f.key_type:
            kind = "message"  # protoc models a map as a repeated synthetic entry message
        elif f.type in SCALARS:
            kind = f.type
        else:
            full = resolve_type(schema, f.type, msg.full_name)
            kind = "enum" if isinstance(schema.types.get(full), ProtoEnum) else "message"
        repeated = f.label == "repeated" or bool(f.key_type)
        out[f.tag] = (f.name, kind, "repeated" if repeated else "single", oneof)
    return out


def _theirs(msg: descriptor_pb2.DescriptorProto) -> dict[int, tuple[str, str, str, str]]:
    out = {}
    for f in msg.field:
        oneof = ""
        if f.HasField("oneof_index") and not f.proto3_optional:
            oneof = msg.oneof_decl[f.oneof_index].name
        label = "repeated" if f.label == f.LABEL_REPEATED else "single"
        out[f.number] = (f.name, _TYPE_NAMES[f.type], label, oneof)
    return out


def _walk(messages: Any, prefix: str) -> dict[str, descriptor_pb2.DescriptorProto]:
    found = {}
    for m in messages:
        name = f"{prefix}.{m.name}" if prefix else m.name
        if not m.options.map_entry:
            found[name] = m
            found.update(_walk(m.nested_type, name))
    return found


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_fields_match_protoc(tmp_path: Path, name: str) -> None:
    text = SAMPLES[name]
    fds = _protoc(tmp_path, {name: text})
    assert fds is not None, "protoc rejected a sample"
    (own,) = [f for f in fds.file if f.name == name]
    theirs = _walk(own.message_type, own.package)
    schema = parse_proto_schema(text)
    ours = {k: v for k, v in schema.types.items() if isinstance(v, ProtoMessage)}
    assert set(ours) == set(theirs)
    for full, msg in ours.items():
        assert _ours(msg, schema) == _theirs(theirs[full]), full


def test_example_schema_folder_compiles_with_protoc(tmp_path: Path) -> None:
    files = {p.relative_to(SCHEMAS).as_posix(): p.read_text() for p in SCHEMAS.rglob("*.proto")}
    assert files
    assert _protoc(tmp_path, files) is not None
    refs = [(n, t) for n, t in files.items() if n != "payment-value.proto"]
    schema = parse_proto_schema(files["payment-value.proto"], refs)
    assert "acme.payments.v1.Payment" in schema.types


@pytest.mark.parametrize("bad", [
    'syntax = "proto3"; message M { string a = 1 }',
    'syntax = "proto3"; message M { string a = 1; int32 b = 1; }',
    'syntax = "proto3"; message M { Missing a = 1; }',
    'syntax = "proto3"; message M { string a = 0; }',
])
def test_protoc_and_we_both_reject(tmp_path: Path, bad: str) -> None:
    assert _protoc(tmp_path, {"bad.proto": bad}) is None
    with pytest.raises(SchemaParseError):
        parse_proto_schema(bad)
