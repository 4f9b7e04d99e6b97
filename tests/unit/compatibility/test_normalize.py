"""normalize_schema: equivalent schemas give one canonical text; different ones do not."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from kontrakt.registry.compatibility import check_compatibility, normalize_schema


@dataclass
class S:
    schema_str: str
    schema_type: str | None = None
    references: list[Any] = field(default_factory=list)


AVRO_A = json.dumps({
    "type": "record", "name": "User", "namespace": "acme",
    "fields": [
        {"name": "id", "type": {"type": "long"}},
        {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []},
        {"name": "born", "type": {"type": "int", "logicalType": "date"}, "doc": "birthday"},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        {"name": "other", "type": ["null", "Kind"], "default": None},
    ],
})
# Same schema: other key order, whitespace, full names instead of a namespace attribute.
AVRO_B = """
{ "fields": [
    {"type": "long", "name": "id"},
    {"default": [], "name": "tags", "type": {"items": "string", "type": "array"}},
    {"doc": "birthday", "type": {"logicalType": "date", "type": "int"}, "name": "born"},
    {"name": "kind", "type": {"symbols": ["A", "B"], "name": "acme.Kind", "type": "enum"}},
    {"name": "other", "type": ["null", "acme.Kind"], "default": null}
  ],
  "name": "acme.User", "type": "record" }
"""


def test_avro_equivalent_forms_normalize_identically() -> None:
    a, b = normalize_schema(S(AVRO_A)), normalize_schema(S(AVRO_B))
    assert a == b
    parsed = json.loads(a)
    assert parsed["name"] == "acme.User" and "namespace" not in parsed
    assert parsed["fields"][0]["type"] == "long"
    assert parsed["fields"][1]["default"] == []  # defaults are kept
    assert parsed["fields"][2]["type"] == {"type": "int", "logicalType": "date"}
    assert parsed["fields"][4]["type"] == ["null", "acme.Kind"]  # second use by name
    # The canonical form is itself a valid, equivalent schema.
    assert normalize_schema(S(a)) == a
    assert check_compatibility(S(a), [S(AVRO_A)], "FULL").is_compatible


@pytest.mark.parametrize("change", [
    ('"A", "B"', '"B", "A"'),        # enum symbol order matters
    ('"default": []', '"default": ["x"]'),
    ('"long"', '"int"'),
])
def test_avro_different_schemas_normalize_differently(change: tuple[str, str]) -> None:
    other = AVRO_A.replace(*change)
    assert other != AVRO_A
    assert normalize_schema(S(other)) != normalize_schema(S(AVRO_A))


def test_json_schema_sorted_keys() -> None:
    a = '{"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "integer"}}}'
    b = '{"properties":{"a":{"type":"integer"},"b":{"type":"string"}},"type":"object"}'
    na, nb = normalize_schema(S(a, "JSON")), normalize_schema(S(b, "JSON"))
    assert na == nb == b
    assert normalize_schema(S('{"type": "string"}', "JSON")) != na


PROTO_A = """
syntax = "proto3";
// a comment
package acme.v1;
import "google/protobuf/timestamp.proto";
import "google/protobuf/any.proto";
option java_package = "x";
option go_package = "y";
message Order {
    int32 qty = 2;   string id = 1;
    oneof pay { string card = 3; }
    google.protobuf.Timestamp at = 4;
}
"""
PROTO_B = """syntax="proto3";package acme.v1;
import "google/protobuf/any.proto";import "google/protobuf/timestamp.proto";
option go_package="y";option java_package="x";
message Order{string id=1;int32 qty=2;google.protobuf.Timestamp at=4;oneof pay{string card=3;}}
"""


def test_protobuf_canonical_formatting() -> None:
    a, b = normalize_schema(S(PROTO_A, "PROTOBUF")), normalize_schema(S(PROTO_B, "PROTOBUF"))
    assert a == b
    assert a.index("string id = 1;") < a.index("int32 qty = 2;") < a.index("oneof pay")
    assert normalize_schema(S(a, "PROTOBUF")) == a
    changed = PROTO_B.replace("int32 qty=2", "int64 qty=2")
    assert normalize_schema(S(changed, "PROTOBUF")) != a
