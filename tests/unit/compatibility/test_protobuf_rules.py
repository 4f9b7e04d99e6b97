"""Protobuf rules (Confluent's difference types), table-driven, both directions."""

from __future__ import annotations

from typing import Any

import pytest

from kontrakt.registry.compatibility import (
    SchemaParseError,
    UnresolvedReferenceError,
    UnsupportedSchemaError,
    check_compatibility,
)
from tests.unit.compatibility._helpers import Ref, Schema, error_types, schemas_of

S = schemas_of("PROTOBUF")


def proto(body: str, *, package: str = "acme.v1", syntax: str = "proto3",
          head: str = "") -> str:
    return f'syntax = "{syntax}";\npackage {package};\n{head}\n{body}\n'


def errors(old: str, new: str, level: str, lookup: Any = None,
           refs: list[Ref] | None = None) -> set[str]:
    refs = refs or []
    return error_types(S(new, references=refs), [S(old, references=refs)], level, lookup=lookup)


BASE = "message Order { string id = 1; int32 qty = 2; }"
OK: set[str] = set()
CASES = [
    ("field added", proto(BASE), proto("message Order { string id = 1; int32 qty = 2;"
                                       " bool gift = 3; }"), OK, OK),
    ("field renamed", proto(BASE), proto("message Order { string id = 1; int32 count = 2; }"),
     OK, OK),
    ("int32 to int64 (same wire group)", proto(BASE),
     proto("message Order { string id = 1; int64 qty = 2; }"), OK, OK),
    ("int32 to uint64 and bool group", proto(BASE),
     proto("message Order { string id = 1; bool qty = 2; }"), OK, OK),
    ("int32 to sint32 (zigzag)", proto(BASE),
     proto("message Order { string id = 1; sint32 qty = 2; }"),
     {"FIELD_SCALAR_KIND_CHANGED"}, {"FIELD_SCALAR_KIND_CHANGED"}),
    ("string to bytes", proto(BASE), proto("message Order { bytes id = 1; int32 qty = 2; }"),
     OK, OK),
    ("fixed32 to sfixed32", proto("message M { fixed32 a = 1; }"),
     proto("message M { sfixed32 a = 1; }"), OK, OK),
    ("fixed32 to fixed64", proto("message M { fixed32 a = 1; }"),
     proto("message M { fixed64 a = 1; }"),
     {"FIELD_SCALAR_KIND_CHANGED"}, {"FIELD_SCALAR_KIND_CHANGED"}),
    ("float to double", proto("message M { float a = 1; }"),
     proto("message M { double a = 1; }"),
     {"FIELD_SCALAR_KIND_CHANGED"}, {"FIELD_SCALAR_KIND_CHANGED"}),
    ("int32 to enum (same wire group)", proto("message M { int32 a = 1; }"),
     proto("message M { E a = 1; enum E { Z = 0; } }"), OK, OK),
    ("scalar to message", proto("message M { string a = 1; message N { string x = 1; } }"),
     proto("message M { N a = 1; message N { string x = 1; } }"),
     {"FIELD_KIND_CHANGED"}, {"FIELD_KIND_CHANGED"}),
    ("map value type changed", proto("message M { map<string, int32> a = 1; }"),
     proto("message M { map<string, string> a = 1; }"),
     {"FIELD_SCALAR_KIND_CHANGED"}, {"FIELD_SCALAR_KIND_CHANGED"}),
    ("map to scalar", proto("message M { map<string, int32> a = 1; }"),
     proto("message M { string a = 1; }"), {"FIELD_KIND_CHANGED"}, {"FIELD_KIND_CHANGED"}),
    ("message type renamed", proto("message M { A a = 1; } message A { int32 x = 1; }"),
     proto("message M { B a = 1; } message B { int32 x = 1; }"),
     {"FIELD_NAMED_TYPE_CHANGED", "MESSAGE_REMOVED"}, {"FIELD_NAMED_TYPE_CHANGED",
                                                       "MESSAGE_REMOVED"}),
    ("nested message field changed incompatibly",
     proto("message M { N n = 1; message N { int32 x = 1; } }"),
     proto("message M { N n = 1; message N { string x = 1; } }"),
     {"FIELD_SCALAR_KIND_CHANGED", "FIELD_NAMED_TYPE_CHANGED"},
     {"FIELD_SCALAR_KIND_CHANGED", "FIELD_NAMED_TYPE_CHANGED"}),
    ("package changed (not on the wire)", proto(BASE), proto(BASE, package="acme.v2"), OK, OK),
    ("message removed", proto(BASE + " message Extra { int32 a = 1; }"), proto(BASE),
     {"MESSAGE_REMOVED"}, OK),
    ("messages reordered", proto(BASE + " message Extra { int32 a = 1; }"),
     proto("message Extra { int32 a = 1; } " + BASE), OK, OK),
    ("enum constant added", proto("message M { E e = 1; } enum E { A = 0; }"),
     proto("message M { E e = 1; } enum E { A = 0; B = 1; }"), OK, OK),
    ("required field added (proto2)",
     proto("message M { optional string a = 1; }", syntax="proto2"),
     proto("message M { optional string a = 1; required int32 b = 2; }", syntax="proto2"),
     {"REQUIRED_FIELD_ADDED"}, {"REQUIRED_FIELD_REMOVED"}),
    ("optional field added (proto2)",
     proto("message M { optional string a = 1; }", syntax="proto2"),
     proto("message M { optional string a = 1; optional int32 b = 2; }", syntax="proto2"),
     OK, OK),
    ("one field moved into a new oneof", proto("message M { string a = 1; int32 b = 2; }"),
     proto("message M { int32 b = 2; oneof x { string a = 1; } }"), OK, OK),
    ("two fields moved into one oneof", proto("message M { string a = 1; int32 b = 2; }"),
     proto("message M { oneof x { string a = 1; int32 b = 2; } }"),
     {"MULTIPLE_FIELDS_MOVED_TO_ONEOF"}, OK),
    ("field moved into an existing oneof",
     proto("message M { string a = 1; oneof x { int32 b = 2; } }"),
     proto("message M { oneof x { string a = 1; int32 b = 2; } }"),
     {"FIELD_MOVED_TO_EXISTING_ONEOF"}, OK),
    ("oneof member added", proto("message M { oneof x { string a = 1; } }"),
     proto("message M { oneof x { string a = 1; int32 b = 2; } }"),
     OK, {"ONEOF_FIELD_REMOVED"}),
    ("repeated string label change", proto("message M { string a = 1; }"),
     proto("message M { repeated string a = 1; }"), OK, OK),
    ("repeated numeric label change (Kontrakt: packed encoding)",
     proto("message M { int32 a = 1; }"), proto("message M { repeated int32 a = 1; }"),
     {"FIELD_NUMERIC_LABEL_CHANGED"}, {"FIELD_NUMERIC_LABEL_CHANGED"}),
]


@pytest.mark.parametrize(("old", "new", "backward", "forward"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rule_both_directions(old: str, new: str, backward: set[str], forward: set[str]) -> None:
    assert errors(old, new, "BACKWARD") == backward
    assert errors(old, new, "FORWARD") == forward
    assert errors(old, new, "FULL_TRANSITIVE") == backward | forward


M = "message M {{ {} }}"
# Oneof membership (Confluent's current MessageSchemaDiff): every field is compared by number
# across the whole message. A oneof whose existing members come from more than one original
# group (one group per original oneof, one per original top-level field; new fields do not
# count) makes fields exclusive that old data may hold together: MULTIPLE_FIELDS_MOVED_TO_ONEOF
# when several of them were top-level, else FIELD_MOVED_TO_EXISTING_ONEOF. A member gone from
# the message is ONEOF_FIELD_REMOVED unless its whole oneof was deleted (no member left
# anywhere, ONEOF_REMOVED only); a member moved to top level is ONEOF_FIELD_MOVED_TO_TOP_LEVEL
# (compatible). Before, Kontrakt matched oneofs by name only and answered "compatible" to the
# first four cases.
ONEOF_CASES = [
    # b leaves x for y, where c is: b and c were independent. Back: a and b meet again in x.
    ("field moved between oneofs",
     proto(M.format("oneof x { string a = 1; string b = 2; } oneof y { int32 c = 3; }")),
     proto(M.format("oneof x { string a = 1; } oneof y { string b = 2; int32 c = 3; }")),
     {"FIELD_MOVED_TO_EXISTING_ONEOF"}, {"FIELD_MOVED_TO_EXISTING_ONEOF"}),
    # x is deleted, its member a joins y: a and c were independent. Back: splitting y into x
    # and y only relaxes the exclusion.
    ("field moved into an existing oneof from a deleted one",
     proto(M.format("oneof x { string a = 1; } oneof y { int32 c = 3; }")),
     proto(M.format("oneof y { string a = 1; int32 c = 3; }")),
     {"FIELD_MOVED_TO_EXISTING_ONEOF"}, OK),
    ("oneofs merged under a new name",
     proto(M.format("oneof x { string a = 1; } oneof y { int32 c = 3; }")),
     proto(M.format("oneof z { string a = 1; int32 c = 3; }")),
     {"FIELD_MOVED_TO_EXISTING_ONEOF"}, OK),
    # x renamed y and b dropped: b is lost (x is not deleted as a whole, a survives). Back: b
    # is a new member of x (ONEOF_FIELD_ADDED).
    ("oneof member dropped while the oneof is renamed",
     proto(M.format("oneof x { string a = 1; string b = 2; }")),
     proto(M.format("oneof y { string a = 1; }")), {"ONEOF_FIELD_REMOVED"}, OK),
    # A oneof deleted with all its members is ONEOF_REMOVED only (like removing fields).
    ("whole oneof deleted",
     proto(M.format("int32 k = 9; oneof x { string a = 1; string b = 2; }")),
     proto(M.format("int32 k = 9;")), OK, OK),
    ("oneof renamed, members kept",
     proto(M.format("oneof x { string a = 1; string b = 2; }")),
     proto(M.format("oneof y { string a = 1; string b = 2; }")), OK, OK),
    # Renaming cannot hide a type change: a is compared by number.
    ("oneof renamed and a member's type changed",
     proto(M.format("oneof x { string a = 1; int32 b = 2; }")),
     proto(M.format("oneof y { string a = 1; sint32 b = 2; }")),
     {"FIELD_SCALAR_KIND_CHANGED"}, {"FIELD_SCALAR_KIND_CHANGED"}),
    # Out of the oneof is compatible; into one that holds another old member is not.
    ("member moved out to top level",
     proto(M.format("oneof x { string a = 1; string b = 2; }")),
     proto(M.format("string a = 1; oneof x { string b = 2; }")),
     OK, {"FIELD_MOVED_TO_EXISTING_ONEOF"}),
    # One top-level field into a new oneof with a new field: one group, compatible. Back, x
    # goes away but a survives, so n is a member removed.
    ("field and a new member into a new oneof",
     proto(M.format("string a = 1; string b = 2;")),
     proto(M.format("string a = 1; oneof x { string b = 2; int32 n = 5; }")),
     OK, {"ONEOF_FIELD_REMOVED"}),
    # A oneof member removed / added keeps its plain rule under the new comparison.
    ("oneof member removed", proto(M.format("oneof x { string a = 1; int32 b = 2; }")),
     proto(M.format("oneof x { string a = 1; }")), {"ONEOF_FIELD_REMOVED"}, OK),
]


@pytest.mark.parametrize(("old", "new", "backward", "forward"),
                         [c[1:] for c in ONEOF_CASES], ids=[c[0] for c in ONEOF_CASES])
def test_oneof_membership_as_confluent(old: str, new: str, backward: set[str],
                                       forward: set[str]) -> None:
    assert errors(old, new, "BACKWARD") == backward
    assert errors(old, new, "FORWARD") == forward
    assert errors(old, new, "FULL_TRANSITIVE") == backward | forward


def test_oneof_paths_name_the_oneof() -> None:
    old = proto(M.format("oneof x { string a = 1; string b = 2; } oneof y { int32 c = 3; }"))
    new = proto(M.format("oneof y { string b = 2; int32 c = 3; }"))
    result = check_compatibility(S(new), [S(old)], "BACKWARD")
    assert [(i.error_type, i.path) for i in result.incompatibilities] == [
        ("FIELD_MOVED_TO_EXISTING_ONEOF", "#/M/y"), ("ONEOF_FIELD_REMOVED", "#/M/x/1")]


def test_package_change_with_qualified_names_is_compatible() -> None:
    # Confluent's current SchemaDiff lists PACKAGE_CHANGED among the compatible changes (names
    # are not on the wire; older releases did not): fully qualified references to the
    # message's own nested types follow the package and compare by local name.
    body = ("message T {{ string s = 1; .{pkg}.T.Status st = 2; {pkg}.U u = 3; "
            "message Status {{ string s = 1; }} }} message U {{ int32 x = 1; }}")
    old = proto(body.format(pkg="foo"), package="foo")
    new = proto(body.format(pkg="bar"), package="bar")
    assert check_compatibility(S(new), [S(old)], "FULL_TRANSITIVE").is_compatible
    changed = proto(body.format(pkg="bar").replace("int32 x", "string x"), package="bar")
    assert errors(old, changed, "BACKWARD") == {"FIELD_SCALAR_KIND_CHANGED",
                                                 "FIELD_NAMED_TYPE_CHANGED"}


COMMON_V1 = 'syntax = "proto3"; package acme.common; message Money { int64 cents = 1; }'
COMMON_V2 = 'syntax = "proto3"; package acme.common; message Money { string cents = 1; }'


def test_imports_through_references_and_well_known_types() -> None:
    head = 'import "acme/common.proto";\nimport "google/protobuf/timestamp.proto";'
    body = "message Order { acme.common.Money total = 1; google.protobuf.Timestamp at = 2; }"
    texts = {1: COMMON_V1, 2: COMMON_V2}
    old = S(proto(body, head=head), references=[Ref("acme/common.proto", "common", 1)])
    new = S(proto(body, head=head), references=[Ref("acme/common.proto", "common", 2)])

    def lookup(r: Any) -> Schema:
        return S(texts[r.version])

    assert check_compatibility(old, [old], "FULL", lookup=lookup).is_compatible
    result = check_compatibility(new, [old], "BACKWARD", lookup=lookup)
    assert {i.error_type for i in result.incompatibilities} == {
        "FIELD_SCALAR_KIND_CHANGED", "FIELD_NAMED_TYPE_CHANGED"}
    with pytest.raises(UnresolvedReferenceError, match="no lookup"):
        check_compatibility(new, [old], "BACKWARD")
    with pytest.raises(UnresolvedReferenceError, match=r"acme/common\.proto"):
        check_compatibility(S(proto(body, head=head)), [], "NONE")


def test_options_comments_reserved_services_parse() -> None:
    text = proto(
        """
        option java_package = "com.acme";   // trailing comment
        /* block
           comment */
        message M {
          option (my.opt).deep = { a: 1 b: "x" };
          reserved 3, 5 to 9, 100 to max;
          reserved "old";
          string a = 1 [deprecated = true, json_name = "A"];
          map<string, N> m = 2;
          message N { enum K { option allow_alias = true; X = 0; Y = 0; } K k = 1; }
        }
        service Orders { rpc Get (M) returns (stream M) { option deprecated = true; } }
        """,
        head='import "google/protobuf/descriptor.proto";',
    )
    assert check_compatibility(S(text), [S(text)], "FULL").is_compatible


@pytest.mark.parametrize(
    ("text", "exc", "needle"),
    [
        (proto("message M { string a = 1 }"), SchemaParseError, "line"),
        (proto("message M { Nope a = 1; }"), UnresolvedReferenceError, "Nope"),
        (proto("message M { string a = 1; int32 b = 1; }"), SchemaParseError, "used twice"),
        (proto("message M { string a = 0; }"), SchemaParseError, "field number"),
        (proto("message M { optional group G = 1 { optional int32 x = 2; } }",
               syntax="proto2"), UnsupportedSchemaError, "group"),
        ('syntax = "proto4";', SchemaParseError, "syntax"),
        ('edition = "2023";', UnsupportedSchemaError, "editions"),
        (proto("message M { string a = 1;"), SchemaParseError, "not closed"),
    ],
)
def test_parse_errors(text: str, exc: type[Exception], needle: str) -> None:
    with pytest.raises(exc, match=needle):
        check_compatibility(S(text), [], "NONE")


def test_imported_type_compared_by_local_name_across_packages() -> None:
    dep_v1 = 'syntax = "proto3"; package a.b; message Outer { message Home { int32 id = 1; } }'
    dep_v2 = 'syntax = "proto3"; package c.d; message Outer { message Home { string id = 1; } }'
    deps = {"dep1.proto": dep_v1, "dep2.proto": dep_v2}
    old = S('syntax = "proto3"; import "dep1.proto"; message T { .a.b.Outer.Home h = 1; }',
            references=[Ref("dep1.proto", "dep1", 1)])
    new = S('syntax = "proto3"; import "dep2.proto"; message T { .c.d.Outer.Home h = 1; }',
            references=[Ref("dep2.proto", "dep2", 1)])

    def lookup(r: Any) -> Schema:
        return S(deps[r.name])

    result = check_compatibility(new, [old], "BACKWARD", lookup=lookup)
    assert [(i.error_type, i.path) for i in result.incompatibilities] == [
        ("FIELD_SCALAR_KIND_CHANGED", "#/Outer/Home/1"), ("FIELD_NAMED_TYPE_CHANGED", "#/T/1")]
    deps["dep2.proto"] = dep_v2.replace("string id", "int64 id")
    assert check_compatibility(new, [old], "FULL", lookup=lookup).is_compatible
