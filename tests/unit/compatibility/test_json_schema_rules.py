"""JSON Schema rules (Confluent's difference types), table-driven, both directions."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kontrakt.registry.compatibility import (
    SchemaParseError,
    UnresolvedReferenceError,
    UnsupportedSchemaError,
    check_compatibility,
)
from tests.unit.compatibility._helpers import Ref, Schema, error_types, schemas_of

S = schemas_of("JSON")


def obj(props: dict[str, Any], *, required: list[str] | None = None, **extra: Any) -> str:
    body: dict[str, Any] = {"type": "object", "properties": props, **extra}
    if required:
        body["required"] = required
    return json.dumps(body)


def errors(old: str, new: str, level: str, policy: str = "strict") -> set[str]:
    return error_types(S(new), [S(old)], level, policy=policy)


STR = {"type": "string"}
INT = {"type": "integer"}
CLOSED: dict[str, Any] = {"additionalProperties": False}
OK: set[str] = set()
# (id, old, new, backward errors, forward errors)
CASES = [
    ("open model: property added", obj({"a": STR}), obj({"a": STR, "b": INT}),
     {"PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"}, OK),
    ("open model: property with empty schema added", obj({"a": STR}), obj({"a": STR, "b": {}}),
     OK, OK),
    ("closed model: optional property added", obj({"a": STR}, **CLOSED),
     obj({"a": STR, "b": INT}, **CLOSED), OK, {"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"}),
    ("closed model: required property added", obj({"a": STR}, **CLOSED),
     obj({"a": STR, "b": INT}, required=["b"], **CLOSED),
     {"REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"},
     {"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"}),
    ("closed model: required property with default added", obj({"a": STR}, **CLOSED),
     obj({"a": STR, "b": {"type": "integer", "default": 0}}, required=["b"], **CLOSED),
     OK, {"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"}),
    ("partially open: added property covered",
     obj({"a": STR}, additionalProperties=STR), obj({"a": STR, "b": STR}, additionalProperties=STR),
     OK, OK),
    ("partially open: added property not covered",
     obj({"a": STR}, additionalProperties=STR), obj({"a": STR, "b": INT}, additionalProperties=STR),
     {"PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "TYPE_CHANGED"},
     {"PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "TYPE_CHANGED"}),
    ("pattern properties cover added property",
     obj({"a": STR}, patternProperties={"^x_": INT}),
     obj({"a": STR, "x_n": INT}, patternProperties={"^x_": INT}), OK, OK),
    ("existing property made required", obj({"a": STR}), obj({"a": STR}, required=["a"]),
     {"REQUIRED_ATTRIBUTE_ADDED"}, OK),
    ("existing property made required with default", obj({"a": STR}),
     obj({"a": {"type": "string", "default": ""}}, required=["a"]), OK, OK),
    ("additionalProperties false -> true", obj({"a": STR}, **CLOSED), obj({"a": STR}),
     OK, {"ADDITIONAL_PROPERTIES_REMOVED"}),
    ("additionalProperties schema added", obj({"a": STR}), obj({"a": STR},
                                                               additionalProperties=STR),
     {"ADDITIONAL_PROPERTIES_NARROWED"}, OK),
    ("integer to number", json.dumps(INT), '{"type": "number"}', OK, {"TYPE_NARROWED"}),
    ("string to integer", json.dumps(STR), json.dumps(INT), {"TYPE_CHANGED"}, {"TYPE_CHANGED"}),
    ("string made nullable", json.dumps(STR), '{"type": ["string", "null"]}',
     OK, {"TYPE_CHANGED"}),
    ("enum extended", '{"enum": ["a", "b"]}', '{"enum": ["a", "b", "c"]}',
     OK, {"ENUM_ARRAY_NARROWED"}),
    ("typed enum narrowed", '{"type": "string", "enum": ["a", "b"]}',
     '{"type": "string", "enum": ["a"]}', {"COMBINED_TYPE_SUBSCHEMAS_CHANGED"}, OK),
    ("type list extended", '{"type": ["string", "null"]}',
     '{"type": ["string", "null", "integer"]}', OK, {"SUM_TYPE_NARROWED"}),
    ("type list changed", '{"type": ["string", "null"]}', '{"type": ["string", "integer"]}',
     {"COMBINED_TYPE_SUBSCHEMAS_CHANGED"}, {"COMBINED_TYPE_SUBSCHEMAS_CHANGED"}),
    ("enum next to a type removed", '{"type": "string", "enum": ["red"]}',
     '{"type": "string"}', OK, {"TYPE_CHANGED"}),
    ("enum changed", '{"enum": ["a", "b"]}', '{"enum": ["a", "c"]}',
     {"ENUM_ARRAY_CHANGED"}, {"ENUM_ARRAY_CHANGED"}),
    ("maxLength increased", '{"type": "string", "maxLength": 5}',
     '{"type": "string", "maxLength": 9}', OK, {"MAX_LENGTH_DECREASED"}),
    ("minLength added", json.dumps(STR), '{"type": "string", "minLength": 1}',
     {"MIN_LENGTH_ADDED"}, OK),
    ("pattern added", json.dumps(STR), '{"type": "string", "pattern": "^a"}',
     {"PATTERN_ADDED"}, OK),
    ("pattern changed", '{"type": "string", "pattern": "^a"}',
     '{"type": "string", "pattern": "^b"}', {"PATTERN_CHANGED"}, {"PATTERN_CHANGED"}),
    ("maximum decreased", '{"type": "number", "maximum": 10}',
     '{"type": "number", "maximum": 5}', {"MAXIMUM_DECREASED"}, OK),
    ("minimum removed", '{"type": "number", "minimum": 1}', '{"type": "number"}',
     OK, {"MINIMUM_ADDED"}),
    ("exclusiveMinimum increased", '{"type": "number", "exclusiveMinimum": 1}',
     '{"type": "number", "exclusiveMinimum": 2}', {"EXCLUSIVE_MINIMUM_INCREASED"}, OK),
    ("draft-4 boolean exclusiveMaximum", '{"type": "number", "maximum": 5}',
     '{"type": "number", "maximum": 5, "exclusiveMaximum": true}',
     {"EXCLUSIVE_MAXIMUM_ADDED"}, {"MAXIMUM_ADDED"}),
    ("multipleOf reduced", '{"type": "number", "multipleOf": 4}',
     '{"type": "number", "multipleOf": 2}', OK, {"MULTIPLE_OF_EXPANDED"}),
    ("multipleOf changed", '{"type": "number", "multipleOf": 3}',
     '{"type": "number", "multipleOf": 2}', {"MULTIPLE_OF_CHANGED"}, {"MULTIPLE_OF_CHANGED"}),
    ("oneOf branch added", '{"oneOf": [{"type": "string"}, {"type": "integer"}]}',
     '{"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "boolean"}]}',
     OK, {"SUM_TYPE_NARROWED"}),
    ("oneOf branch changed", '{"oneOf": [{"type": "string"}, {"type": "integer"}]}',
     '{"oneOf": [{"type": "string"}, {"type": "boolean"}]}',
     {"COMBINED_TYPE_SUBSCHEMAS_CHANGED"}, {"COMBINED_TYPE_SUBSCHEMAS_CHANGED"}),
    ("allOf narrowed (fewer constraints)",
     '{"allOf": [{"type": "string"}, {"maxLength": 4}]}', '{"allOf": [{"type": "string"}]}',
     OK, {"PRODUCT_TYPE_EXTENDED"}),
    ("oneOf to anyOf", '{"oneOf": [{"type": "string"}, {"type": "integer"}]}',
     '{"anyOf": [{"type": "string"}, {"type": "integer"}]}', OK, {"COMBINED_TYPE_CHANGED"}),
    ("anyOf to allOf", '{"anyOf": [{"type": "string"}, {"type": "integer"}]}',
     '{"allOf": [{"type": "string"}, {"type": "integer"}]}',
     {"COMBINED_TYPE_CHANGED"}, OK),
    ("not narrowed", '{"not": {"type": "string"}}', '{"not": {"type": ["string", "null"]}}',
     {"NOT_TYPE_EXTENDED"}, OK),
    ("const changed", '{"const": 1}', '{"const": 2}', {"CONST_CHANGED"}, {"CONST_CHANGED"}),
    ("array items narrowed", '{"type": "array", "items": {"type": "number"}}',
     '{"type": "array", "items": {"type": "integer"}}', {"TYPE_NARROWED"}, OK),
    ("maxItems removed", '{"type": "array", "maxItems": 3}', '{"type": "array"}',
     OK, {"MAX_ITEMS_ADDED"}),
    ("uniqueItems added", '{"type": "array"}', '{"type": "array", "uniqueItems": true}',
     {"UNIQUE_ITEMS_ADDED"}, OK),
    ("draft-07 tuple: item added to closed tuple",
     '{"type": "array", "items": [{"type": "string"}], "additionalItems": false}',
     '{"type": "array", "items": [{"type": "string"}, {"type": "integer"}],'
     ' "additionalItems": false}', OK, {"ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL"}),
    ("2020-12 tuple: item added to open tuple",
     '{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "array",'
     ' "prefixItems": [{"type": "string"}]}',
     '{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "array",'
     ' "prefixItems": [{"type": "string"}, {"type": "integer"}]}',
     {"ITEM_ADDED_TO_OPEN_CONTENT_MODEL"}, OK),
    ("2020-12 items false closes the tuple",
     '{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "array",'
     ' "prefixItems": [{"type": "string"}], "items": false}',
     '{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "array",'
     ' "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false}',
     OK, {"ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL"}),
    ("$ref target changed",
     '{"definitions": {"n": {"type": "integer"}}, "type": "object",'
     ' "properties": {"a": {"$ref": "#/definitions/n"}}}',
     '{"definitions": {"n": {"type": "string"}}, "type": "object",'
     ' "properties": {"a": {"$ref": "#/definitions/n"}}}', {"TYPE_CHANGED"}, {"TYPE_CHANGED"}),
    ("2020-12 $defs target widened",
     '{"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": {"n":'
     ' {"type": "integer"}}, "$ref": "#/$defs/n"}',
     '{"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": {"n":'
     ' {"type": "number"}}, "$ref": "#/$defs/n"}', OK, {"TYPE_NARROWED"}),
    ("format added (Kontrakt extension)", json.dumps(STR),
     '{"type": "string", "format": "email"}', {"FORMAT_ADDED"}, OK),
    ("annotations only", '{"type": "string", "title": "a", "description": "x"}',
     '{"type": "string", "title": "b", "description": "y", "default": "z"}', OK, OK),
    ("anything to empty schema", json.dumps(STR), "{}", OK, {"TYPE_CHANGED"}),
    ("false to anything", "false", json.dumps(STR), OK, {"TYPE_CHANGED"}),
]


@pytest.mark.parametrize(("old", "new", "backward", "forward"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rule_both_directions(old: str, new: str, backward: set[str], forward: set[str]) -> None:
    assert errors(old, new, "BACKWARD") == backward
    assert errors(old, new, "FORWARD") == forward
    assert errors(old, new, "FULL") == backward | forward


def prop1(**combiner: Any) -> str:
    return json.dumps({"type": "object", "properties": {"prop1": combiner}})


NUM = {"type": "number"}
BOOL = {"type": "boolean"}
SHORT = {"maxLength": 8}
# Changing the combiner (Confluent's CombinedSchemaDiff). The criterion change is
# COMBINED_TYPE_EXTENDED (compatible) when the update is anyOf, when both sides are singletons,
# when a singleton becomes oneOf, or when an allOf becomes a singleton; otherwise
# COMBINED_TYPE_CHANGED. Fewer subschemas are named after the ORIGINAL criterion
# (PRODUCT_TYPE_NARROWED, compatible, for an allOf; SUM_TYPE_NARROWED for anyOf/oneOf), more
# after the update's. The subschemas must then still match one to one (maximum matching).
COMBINER_CASES = [
    # Confluent: EXTENDED + PRODUCT_TYPE_NARROWED, compatible (dropping a conjunct accepts
    # more). Back: a singleton anyOf to a 2-conjunct allOf is COMBINED_TYPE_CHANGED.
    ("allOf to anyOf with fewer subschemas", prop1(allOf=[STR, SHORT]), prop1(anyOf=[STR]),
     OK, {"COMBINED_TYPE_CHANGED"}),
    # Confluent: the same for oneOf (an allOf becoming a singleton is EXTENDED).
    ("allOf to oneOf with fewer subschemas", prop1(allOf=[STR, SHORT]), prop1(oneOf=[STR]),
     OK, {"COMBINED_TYPE_CHANGED"}),
    # Confluent: a 3-conjunct allOf down to a oneOf of one of them: still EXTENDED.
    ("allOf of three to oneOf of one", prop1(allOf=[STR, SHORT, {"minLength": 1}]),
     prop1(oneOf=[STR]), OK, {"COMBINED_TYPE_CHANGED"}),
    # Confluent: EXTENDED + PRODUCT_TYPE_NARROWED, but the one left matches no conjunct:
    # COMBINED_TYPE_SUBSCHEMAS_CHANGED.
    ("allOf to oneOf with fewer, none matching", prop1(allOf=[STR, SHORT]),
     prop1(oneOf=[BOOL]), {"COMBINED_TYPE_SUBSCHEMAS_CHANGED"}, {"COMBINED_TYPE_CHANGED"}),
    # Confluent: a singleton allOf to oneOf is EXTENDED + SUM_TYPE_EXTENDED; back, a 2-branch
    # oneOf to a singleton allOf is CHANGED (only an allOf may shrink to a singleton).
    ("allOf to oneOf with more subschemas", prop1(allOf=[NUM]), prop1(oneOf=[NUM, STR]),
     OK, {"COMBINED_TYPE_CHANGED"}),
    # Confluent: to anyOf is always EXTENDED; same size, nothing else.
    ("allOf to anyOf, same subschemas", prop1(allOf=[STR, SHORT]), prop1(anyOf=[STR, SHORT]),
     OK, {"COMBINED_TYPE_CHANGED"}),
    # Confluent: EXTENDED + SUM_TYPE_NARROWED (an alternative dropped), incompatible; back,
    # a singleton anyOf to oneOf is EXTENDED + SUM_TYPE_EXTENDED.
    ("oneOf to anyOf with fewer subschemas", prop1(oneOf=[NUM, STR]), prop1(anyOf=[STR]),
     {"SUM_TYPE_NARROWED"}, OK),
    # Confluent: an anyOf of two to a oneOf is COMBINED_TYPE_CHANGED (oneOf rejects data
    # matching both); back, to anyOf is EXTENDED.
    ("anyOf to oneOf with fewer subschemas", prop1(anyOf=[NUM, STR]), prop1(oneOf=[STR]),
     {"COMBINED_TYPE_CHANGED"}, OK),
    # Confluent: a oneOf branch added is SUM_TYPE_EXTENDED; removed, SUM_TYPE_NARROWED.
    ("oneOf member added", prop1(oneOf=[STR]), prop1(oneOf=[STR, NUM]),
     OK, {"SUM_TYPE_NARROWED"}),
    ("oneOf member removed", prop1(oneOf=[STR, NUM, BOOL]), prop1(oneOf=[STR, BOOL]),
     {"SUM_TYPE_NARROWED"}, OK),
]


@pytest.mark.parametrize(("old", "new", "backward", "forward"),
                         [c[1:] for c in COMBINER_CASES], ids=[c[0] for c in COMBINER_CASES])
def test_combiner_changes_as_confluent(old: str, new: str, backward: set[str],
                                       forward: set[str]) -> None:
    assert errors(old, new, "BACKWARD") == backward
    assert errors(old, new, "FORWARD") == forward
    assert errors(old, new, "FULL") == backward | forward


def obj2020(props: dict[str, Any], *, required: list[str] | None = None, **extra: Any) -> str:
    body = json.loads(obj(props, required=required, **extra))
    return json.dumps({"$schema": "https://json-schema.org/draft/2020-12/schema", **body})


SEALED: dict[str, Any] = {"unevaluatedProperties": False}
STRINGS: dict[str, Any] = {"unevaluatedProperties": STR}
# unevaluatedProperties (U) decides the content model where additionalProperties (A) is
# absent: open when U is absent or true, closed when U is false, partially open when U is a
# schema; A, when present, takes precedence. This is how Confluent's current ArraySchemaDiff
# treats unevaluatedItems next to items (isOpenContentModel / schemaFromPartiallyOpenContentModel
# "A is missing and U ..."); its ObjectSchemaDiff counterpart for unevaluatedProperties was not
# in the sources read, so the object rule and the UNEVALUATED_PROPERTIES_* names follow the
# array one. Before, Kontrakt took such an object as open.
UNEVALUATED_CASES = [
    # Closed by U false: an optional property added is OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_
    # CONTENT_MODEL (compatible); back, removing it from a closed model is not.
    ("U false: optional property added", obj2020({"a": STR}, **SEALED),
     obj2020({"a": STR, "b": INT}, **SEALED), OK,
     {"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"}),
    ("U false: required property added", obj2020({"a": STR}, **SEALED),
     obj2020({"a": STR, "b": INT}, required=["b"], **SEALED),
     {"REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"},
     {"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"}),
    # Partially open by a U schema: the schema must cover the property added or removed.
    ("U schema: added property covered", obj2020({"a": STR}, **STRINGS),
     obj2020({"a": STR, "b": STR}, **STRINGS), OK, OK),
    ("U schema: added property not covered", obj2020({"a": STR}, **STRINGS),
     obj2020({"a": STR, "b": INT}, **STRINGS),
     {"PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "TYPE_CHANGED"},
     {"PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "TYPE_CHANGED"}),
    # U true is an open model: as without it.
    ("U true: property added to an open model",
     obj2020({"a": STR}, unevaluatedProperties=True),
     obj2020({"a": STR, "b": INT}, unevaluatedProperties=True),
     {"PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"}, OK),
    # A schema wins over U false: the model is partially open by A.
    ("A schema next to U false", obj2020({"a": STR}, additionalProperties=STR, **SEALED),
     obj2020({"a": STR, "b": STR}, additionalProperties=STR, **SEALED), OK, OK),
    # U itself changing: false added closes the model (UNEVALUATED_PROPERTIES_REMOVED), a
    # schema added narrows it (UNEVALUATED_PROPERTIES_NARROWED); the reverse is compatible.
    ("U false added", obj2020({"a": STR}), obj2020({"a": STR}, **SEALED),
     {"UNEVALUATED_PROPERTIES_REMOVED"}, OK),
    ("U schema added", obj2020({"a": STR}), obj2020({"a": STR}, **STRINGS),
     {"UNEVALUATED_PROPERTIES_NARROWED"}, OK),
    ("U schema to false", obj2020({"a": STR}, **STRINGS), obj2020({"a": STR}, **SEALED),
     {"UNEVALUATED_PROPERTIES_REMOVED"}, OK),
    # Before draft 2019-09 the keyword is not JSON Schema (Confluent's draft-7 loader leaves it
    # unprocessed): the model stays open.
    ("draft-07 ignores U", obj({"a": STR}, **SEALED), obj({"a": STR, "b": INT}, **SEALED),
     {"PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"}, OK),
]


@pytest.mark.parametrize(("old", "new", "backward", "forward"),
                         [c[1:] for c in UNEVALUATED_CASES],
                         ids=[c[0] for c in UNEVALUATED_CASES])
def test_unevaluated_properties_content_models(old: str, new: str, backward: set[str],
                                               forward: set[str]) -> None:
    assert errors(old, new, "BACKWARD") == backward
    assert errors(old, new, "FORWARD") == forward
    assert errors(old, new, "FULL") == backward | forward


def test_unevaluated_properties_change_before_2019_is_refused() -> None:
    # Draft 7 does not define the keyword; Kontrakt refuses to judge a change to it rather
    # than answer "compatible" (as for the other keywords it does not model).
    with pytest.raises(UnsupportedSchemaError, match="unevaluatedProperties"):
        check_compatibility(S(obj({"a": STR}, **SEALED)), [S(obj({"a": STR}))])


def test_lenient_policy_allows_adding_properties_to_open_models() -> None:
    old, new = obj({"a": STR}), obj({"a": STR, "b": INT})
    assert errors(old, new, "BACKWARD", "strict") == {"PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"}
    assert errors(old, new, "BACKWARD", "lenient") == set()
    # ... but not incompatible type changes.
    assert errors(obj({"a": STR}), obj({"a": INT}), "BACKWARD", "lenient") == {"TYPE_CHANGED"}


def test_recursive_schema_terminates() -> None:
    tree = ('{"definitions": {"n": {"type": "object", "properties": {"v": {"type": "%s"},'
            ' "kids": {"type": "array", "items": {"$ref": "#/definitions/n"}}}}},'
            ' "$ref": "#/definitions/n"}')
    assert errors(tree % "integer", tree % "integer", "FULL") == set()
    assert errors(tree % "integer", tree % "number", "BACKWARD") == set()
    assert errors(tree % "integer", tree % "number", "FORWARD") == {"TYPE_NARROWED"}


def test_paths_point_at_the_change() -> None:
    result = check_compatibility(S(obj({"a": STR, "b": INT})), [S(obj({"a": STR}))])
    (issue,) = result.incompatibilities
    assert issue.path == "#/properties/b"
    assert "#/properties/b" in result.messages[0]


def test_unmodelled_keyword_change_is_refused() -> None:
    old = '{"type": "object", "propertyNames": {"maxLength": 3}}'
    new = '{"type": "object", "propertyNames": {"maxLength": 5}}'
    with pytest.raises(UnsupportedSchemaError, match="propertyNames"):
        check_compatibility(S(new), [S(old)])
    # Unchanged, it is fine.
    assert check_compatibility(S(old), [S(old)]).is_compatible


def test_external_references() -> None:
    addr = {1: '{"type": "object", "properties": {"zip": {"type": "integer"}}}',
            2: '{"type": "object", "properties": {"zip": {"type": "string"}}}'}
    text = '{"type": "object", "properties": {"a": {"$ref": "address.json"}}}'
    old = S(text, references=[Ref("address.json", "address-value", 1)])
    new = S(text, references=[Ref("address.json", "address-value", 2)])

    def lookup(r: Any) -> Schema:
        return S(addr[r.version])

    assert check_compatibility(old, [old], lookup=lookup).is_compatible
    result = check_compatibility(new, [old], lookup=lookup)
    assert [i.error_type for i in result.incompatibilities] == ["TYPE_CHANGED"]
    assert result.incompatibilities[0].path == "#/properties/a/properties/zip"
    with pytest.raises(UnresolvedReferenceError):
        check_compatibility(S('{"$ref": "missing.json"}'), [])


@pytest.mark.parametrize(
    ("text", "exc"),
    [("{", SchemaParseError), ('{"type": "strnig"}', SchemaParseError),
     ('{"$ref": "#/definitions/x"}', UnresolvedReferenceError),
     ('{"$schema": "http://example.com/my-dialect"}', UnsupportedSchemaError),
     ('{"type": "string", "maxLength": -1}', SchemaParseError)],
)
def test_parse_errors(text: str, exc: type[Exception]) -> None:
    with pytest.raises(exc):
        check_compatibility(S(text), [], "NONE")
