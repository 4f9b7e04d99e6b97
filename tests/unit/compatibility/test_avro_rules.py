"""Avro rules, table-driven, each checked in both directions (BACKWARD and FORWARD)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from kontrakt.errors import ConfigError
from kontrakt.registry.compatibility import (
    CompatibilityLevel,
    InvalidCompatibilityLevelError,
    SchemaParseError,
    UnresolvedReferenceError,
    UnsupportedSchemaError,
    check_compatibility,
)
from tests.unit.compatibility._helpers import Ref, error_types
from tests.unit.compatibility._helpers import Schema as S


def rec(*fields: dict[str, Any], name: str = "User", **extra: Any) -> str:
    return json.dumps({"type": "record", "name": name, "fields": list(fields), **extra})


def f(name: str, type_: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **extra}


def errors(old: str, new: str, level: str) -> set[str]:
    return error_types(S(new), [S(old)], level)


OK: set[str] = set()
# (id, old, new, backward errors, forward errors) -- an empty set means compatible.
CASES = [
    ("add field with default", rec(f("a", "int")), rec(f("a", "int"), f("b", "string", default="")),
     OK, OK),
    ("add field without default", rec(f("a", "int")), rec(f("a", "int"), f("b", "string")),
     {"READER_FIELD_MISSING_DEFAULT_VALUE"}, OK),
    ("remove field without default", rec(f("a", "int"), f("b", "string")), rec(f("a", "int")),
     OK, {"READER_FIELD_MISSING_DEFAULT_VALUE"}),
    ("remove field with default", rec(f("a", "int"), f("b", "long", default=1)),
     rec(f("a", "int")), OK, OK),
    ("promote int to long", rec(f("a", "int")), rec(f("a", "long")), OK, {"TYPE_MISMATCH"}),
    ("promote int to float", rec(f("a", "int")), rec(f("a", "float")), OK, {"TYPE_MISMATCH"}),
    ("promote int to double", rec(f("a", "int")), rec(f("a", "double")), OK, {"TYPE_MISMATCH"}),
    ("promote long to float", rec(f("a", "long")), rec(f("a", "float")), OK, {"TYPE_MISMATCH"}),
    ("promote long to double", rec(f("a", "long")), rec(f("a", "double")), OK,
     {"TYPE_MISMATCH"}),
    ("promote float to double", rec(f("a", "float")), rec(f("a", "double")), OK,
     {"TYPE_MISMATCH"}),
    ("string to bytes", rec(f("a", "string")), rec(f("a", "bytes")), OK, OK),
    ("int to string", rec(f("a", "int")), rec(f("a", "string")), {"TYPE_MISMATCH"},
     {"TYPE_MISMATCH"}),
    ("boolean to int", rec(f("a", "boolean")), rec(f("a", "int")), {"TYPE_MISMATCH"},
     {"TYPE_MISMATCH"}),
    ("enum symbol added",
     rec(f("e", {"type": "enum", "name": "E", "symbols": ["A", "B"]})),
     rec(f("e", {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]})),
     OK, {"MISSING_ENUM_SYMBOLS"}),
    ("enum symbol added, old reader has enum default",
     rec(f("e", {"type": "enum", "name": "E", "symbols": ["A", "B"], "default": "A"})),
     rec(f("e", {"type": "enum", "name": "E", "symbols": ["A", "B", "C"], "default": "A"})),
     OK, OK),
    ("enum symbol removed",
     rec(f("e", {"type": "enum", "name": "E", "symbols": ["A", "B"]})),
     rec(f("e", {"type": "enum", "name": "E", "symbols": ["A"]})),
     {"MISSING_ENUM_SYMBOLS"}, OK),
    ("enum symbol removed, new reader has enum default",
     rec(f("e", {"type": "enum", "name": "E", "symbols": ["A", "B"]})),
     rec(f("e", {"type": "enum", "name": "E", "symbols": ["A"], "default": "A"})),
     OK, OK),
    ("record renamed without alias", rec(f("a", "int")), rec(f("a", "int"), name="Person"),
     {"NAME_MISMATCH"}, {"NAME_MISMATCH"}),
    ("record renamed with alias", rec(f("a", "int")),
     rec(f("a", "int"), name="Person", aliases=["User"]), OK, {"NAME_MISMATCH"}),
    ("namespace changed, same name", rec(f("a", "int"), namespace="a.b"),
     rec(f("a", "int"), namespace="c.d"), OK, OK),
    ("field renamed with alias", rec(f("a", "int")), rec(f("b", "int", aliases=["a"])),
     OK, {"READER_FIELD_MISSING_DEFAULT_VALUE"}),
    ("field renamed without alias", rec(f("a", "int")), rec(f("b", "int")),
     {"READER_FIELD_MISSING_DEFAULT_VALUE"}, {"READER_FIELD_MISSING_DEFAULT_VALUE"}),
    ("fixed size changed",
     rec(f("x", {"type": "fixed", "name": "X", "size": 4})),
     rec(f("x", {"type": "fixed", "name": "X", "size": 8})),
     {"FIXED_SIZE_MISMATCH"}, {"FIXED_SIZE_MISMATCH"}),
    ("fixed renamed",
     rec(f("x", {"type": "fixed", "name": "X", "size": 4})),
     rec(f("x", {"type": "fixed", "name": "Y", "size": 4})),
     {"NAME_MISMATCH"}, {"NAME_MISMATCH"}),
    ("union branch added", rec(f("u", ["null", "string"])),
     rec(f("u", ["null", "string", "int"])), OK, {"MISSING_UNION_BRANCH"}),
    ("union branches reordered", rec(f("u", ["null", "string"])),
     rec(f("u", ["string", "null"])), OK, OK),
    ("type made nullable", rec(f("u", "string")), rec(f("u", ["null", "string"])),
     OK, {"TYPE_MISMATCH"}),
    ("union narrowed to one type", rec(f("u", ["null", "string"])), rec(f("u", "string")),
     {"TYPE_MISMATCH"}, OK),
    ("union branch promoted", rec(f("u", ["null", "int"])), rec(f("u", ["null", "long"])),
     OK, {"MISSING_UNION_BRANCH"}),
    ("array items promoted", rec(f("a", {"type": "array", "items": "int"})),
     rec(f("a", {"type": "array", "items": "long"})), OK, {"TYPE_MISMATCH"}),
    ("map values changed", rec(f("m", {"type": "map", "values": "string"})),
     rec(f("m", {"type": "map", "values": "int"})), {"TYPE_MISMATCH"}, {"TYPE_MISMATCH"}),
    ("array to map", rec(f("a", {"type": "array", "items": "int"})),
     rec(f("a", {"type": "map", "values": "int"})), {"TYPE_MISMATCH"}, {"TYPE_MISMATCH"}),
    ("logical type added (underlying type decides)", rec(f("d", "int")),
     rec(f("d", {"type": "int", "logicalType": "date"})), OK, OK),
    ("decimal precision changed (underlying type decides, as in Java)",
     rec(f("d", {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2})),
     rec(f("d", {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2})),
     OK, OK),
    ("recursive type: field with default added",
     rec(f("v", "int"), f("next", ["null", "Node"], default=None), name="Node"),
     rec(f("v", "int"), f("next", ["null", "Node"], default=None), f("w", "int", default=0),
         name="Node"), OK, OK),
    ("recursive type: field without default added",
     rec(f("v", "int"), f("next", ["null", "Node"], default=None), name="Node"),
     rec(f("v", "int"), f("next", ["null", "Node"], default=None), f("w", "int"),
         name="Node"), {"READER_FIELD_MISSING_DEFAULT_VALUE"}, OK),
    ("nested record field type changed",
     rec(f("addr", {"type": "record", "name": "Addr", "fields": [f("zip", "int")]})),
     rec(f("addr", {"type": "record", "name": "Addr", "fields": [f("zip", "string")]})),
     {"TYPE_MISMATCH"}, {"TYPE_MISMATCH"}),
    ("named type referenced twice, changed once for both",
     rec(f("a", {"type": "enum", "name": "E", "symbols": ["A"]}), f("b", "E")),
     rec(f("a", {"type": "enum", "name": "E", "symbols": ["A", "B"]}), f("b", "E")),
     OK, {"MISSING_ENUM_SYMBOLS"}),
    ("top-level primitive promoted", '"int"', '"long"', OK, {"TYPE_MISMATCH"}),
    ("top-level record to primitive", rec(f("a", "int")), '"string"', {"TYPE_MISMATCH"},
     {"TYPE_MISMATCH"}),
]


@pytest.mark.parametrize(("old", "new", "backward", "forward"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rule_both_directions(old: str, new: str, backward: set[str], forward: set[str]) -> None:
    assert errors(old, new, "BACKWARD") == backward
    assert errors(old, new, "FORWARD") == forward
    assert errors(old, new, "FULL") == backward | forward
    assert check_compatibility(S(new), [S(old)], "NONE").is_compatible


def test_messages_say_what_where_and_which_version() -> None:
    old = rec(f("a", "int"))
    new = rec(f("a", "int"), f("b", "string"))
    result = check_compatibility(S(new), [S(old)], "BACKWARD")
    assert not result.is_compatible
    first = result.messages[0]
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in first
    assert "'b'" in first and "/fields/1" in first
    assert "{oldSchemaVersion: 1}" in result.messages
    assert "{compatibility: 'BACKWARD'}" in result.messages
    (issue,) = result.incompatibilities
    assert (issue.path, issue.old_version, issue.direction) == ("/fields/1", 1, "BACKWARD")


def test_nested_path_is_reported() -> None:
    old = rec(f("x", "int"), f("addr", {"type": "record", "name": "A",
                                        "fields": [f("zip", "int"), f("c", "int")]}))
    new = rec(f("x", "int"), f("addr", {"type": "record", "name": "A",
                                        "fields": [f("zip", "int"), f("c", "boolean")]}))
    (issue,) = check_compatibility(S(new), [S(old)]).incompatibilities
    assert issue.path == "/fields/1/type/fields/1/type"


V1 = rec(f("a", "int"))
V2 = rec(f("a", "int"), f("b", "string", default="x"))
V3 = rec(f("a", "int"), f("b", "string"))


def test_transitive_checks_every_version_non_transitive_only_the_newest() -> None:
    assert check_compatibility(S(V3), [S(V1), S(V2)], "BACKWARD").is_compatible
    result = check_compatibility(S(V3), [S(V1), S(V2)], "BACKWARD_TRANSITIVE")
    assert not result.is_compatible
    assert [i.old_version for i in result.incompatibilities] == [1]
    assert "{oldSchemaVersion: 1}" in result.messages


def test_forward_transitive() -> None:
    w1 = rec(f("a", "int"), f("b", "string"))
    w2 = rec(f("a", "int"), f("b", "string", default=""))
    w3 = rec(f("a", "int"))
    assert check_compatibility(S(w3), [S(w1), S(w2)], "FORWARD").is_compatible
    assert not check_compatibility(S(w3), [S(w1), S(w2)], "FORWARD_TRANSITIVE").is_compatible
    assert check_compatibility(S(w3), [S(w1), S(w2)], "FULL").is_compatible
    assert not check_compatibility(S(w3), [S(w1), S(w2)], "FULL_TRANSITIVE").is_compatible


def test_version_attribute_is_used_in_messages() -> None:
    @dataclass
    class Versioned(S):
        version: int = 0

    old = Versioned(V1, version=7)
    result = check_compatibility(S(V3), [old], "BACKWARD")
    assert result.incompatibilities[0].old_version == 7
    assert "{oldSchemaVersion: 7}" in result.messages


def test_no_previous_schemas_is_compatible_but_new_schema_is_parsed() -> None:
    assert check_compatibility(S(V1), [], "FULL_TRANSITIVE").is_compatible
    with pytest.raises(SchemaParseError):
        check_compatibility(S('{"type": "record"}'), [], "NONE")


@pytest.mark.parametrize("level", ["backward", "Full_Transitive", CompatibilityLevel.FORWARD])
def test_levels_accept_names_and_members(level: Any) -> None:
    assert check_compatibility(S(V2), [S(V1)], level).is_compatible


@pytest.mark.parametrize("level", ["SIDEWAYS", "", 3])
def test_bad_level_is_a_config_error(level: Any) -> None:
    with pytest.raises(InvalidCompatibilityLevelError) as info:
        check_compatibility(S(V2), [S(V1)], level)
    assert isinstance(info.value, ConfigError)


def test_unknown_schema_type_is_refused() -> None:
    with pytest.raises(UnsupportedSchemaError):
        check_compatibility(S(V1, schema_type="XML"), [S(V1)])


def test_different_schema_types_are_incompatible() -> None:
    result = check_compatibility(S('{"type": "object"}', schema_type="JSON"), [S(V1)])
    assert not result.is_compatible
    assert result.incompatibilities[0].error_type == "SCHEMA_TYPE_MISMATCH"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("{not json", "not valid JSON"),
        ('{"type": "record", "name": "R", "fields": [{"name": "a", "type": "Nope"}]}',
         "unknown type 'Nope'"),
        ('{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"},'
         ' {"name": "a", "type": "int"}]}', "duplicate field name"),
        ('{"type": "enum", "name": "E", "symbols": ["A"], "default": "B"}', "enum default"),
        ('[["null"], "int"]', "union may not immediately contain another union"),
        ('["int", "int"]', "duplicate type"),
        ('{"type": "fixed", "name": "F", "size": -1}', "fixed size"),
        ('{"type": "record", "name": "1bad", "fields": []}', "invalid name"),
        ('{"type": "array"}', "no 'items'"),
    ],
)
def test_parse_errors_are_clear(text: str, needle: str) -> None:
    with pytest.raises(SchemaParseError, match=needle):
        check_compatibility(S(text), [], "NONE")


ADDRESS = json.dumps({"type": "record", "name": "Address", "namespace": "acme",
                      "fields": [f("zip", "string")]})


def test_references_are_resolved_through_lookup() -> None:
    ref = Ref("acme.Address", "address-value", 1)
    old = S(rec(f("addr", "acme.Address")), references=[ref])
    new = S(rec(f("addr", "acme.Address"), f("n", "int")), references=[ref])
    calls: list[Ref] = []

    def lookup(r: Any) -> S:
        calls.append(r)
        return S(ADDRESS)

    result = check_compatibility(new, [old], "BACKWARD", lookup=lookup)
    assert {i.error_type for i in result.incompatibilities} == {
        "READER_FIELD_MISSING_DEFAULT_VALUE"}
    assert calls and calls[0] is ref
    with pytest.raises(UnresolvedReferenceError, match="no lookup"):
        check_compatibility(new, [old], "BACKWARD")

    def broken(r: Any) -> S:
        raise KeyError(r.name)

    with pytest.raises(UnresolvedReferenceError, match=r"acme\.Address"):
        check_compatibility(new, [old], "BACKWARD", lookup=broken)


def test_a_registry_client_can_serve_references() -> None:
    @dataclass
    class Registered:
        schema: S

    class Client:
        def __init__(self) -> None:
            self.calls: list[tuple[str, int]] = []

        def get_version(self, subject_name: str, version: int) -> Registered:
            self.calls.append((subject_name, version))
            return Registered(S(ADDRESS))

    ref = Ref("acme.Address", "address-value", 3)
    old = S(rec(f("addr", "acme.Address")), references=[ref])
    new = S(rec(f("addr", "acme.Address"), f("n", "int", default=0)), references=[ref])
    client = Client()
    assert check_compatibility(new, [old], "FULL", lookup=client).is_compatible
    assert client.calls[0] == ("address-value", 3)
