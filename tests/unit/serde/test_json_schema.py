from __future__ import annotations

import asyncio
import json
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kontrakt.errors import ConfigError, ValueDeserializationError, ValueSerializationError
from kontrakt.registry import (
    AsyncMockSchemaRegistryClient,
    MockSchemaRegistryClient,
    Schema,
    SchemaReference,
)
from kontrakt.serde import (
    AsyncJSONDeserializer,
    AsyncJSONSerializer,
    JSONDeserializer,
    JSONSerializer,
    MessageField,
    SerializationContext,
    record_subject_name_strategy,
)
from kontrakt.serde._jsonvalidate import compile_validator

ORDER = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order", "type": "object",
    "properties": {
        "id": {"type": "string", "minLength": 1, "maxLength": 8, "pattern": "^[a-z0-9]+$"},
        "qty": {"type": "integer", "minimum": 1, "exclusiveMaximum": 100},
        "price": {"type": "number", "exclusiveMinimum": 0},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        "status": {"enum": ["new", "paid", 3, None]},
        "kind": {"const": "order"},
        "meta": {"type": "object", "additionalProperties": {"type": ["string", "null"]}},
        "ref": {"$ref": "#/definitions/Ref"},
        "either": {"anyOf": [{"type": "boolean"}, {"type": "integer", "maximum": 5}]},
        "one": {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 2}]},
        "nope": {"not": {"type": "string"}},
    },
    "required": ["id", "qty"],
    "additionalProperties": False,
    "definitions": {"Ref": {"type": "object", "properties": {"n": {"type": "integer"}},
                            "required": ["n"], "additionalProperties": False}},
}
CTX = SerializationContext("orders", MessageField.VALUE)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-200, 200) | st.floats(-200, 200)
    | st.sampled_from(["", "a1", "order", "new", "paid", "ABC", "abcdefghij"]),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(["n", "x", "id"]), inner, max_size=3),
    max_leaves=8)
orders = st.fixed_dictionaries(
    {}, optional={k: json_values for k in
                  [*ORDER["properties"], "extra"]})  # type: ignore[index]


@settings(max_examples=200, deadline=None)
@given(orders)
def test_compiled_validator_agrees_with_jsonschema(doc: dict[str, Any]) -> None:
    check = compile_validator(ORDER)
    assert check is not None
    expected = jsonschema.Draft7Validator(ORDER).is_valid(doc)
    assert (check(doc) is None) == expected, (doc, check(doc))


def test_unsupported_keywords_fall_back() -> None:
    assert compile_validator({"type": "object", "patternProperties": {"x": {}}}) is None
    assert compile_validator({"$schema": "http://json-schema.org/draft-04/schema#"}) is None
    assert compile_validator({"type": "integer"}) is not None
    # and the serializer still validates through jsonschema
    registry = MockSchemaRegistryClient({"url": "mock://j"})
    schema = json.dumps({"type": "object", "title": "P",
                         "patternProperties": {"^n": {"type": "integer"}}})
    ser = JSONSerializer(schema, registry)
    assert ser({"n1": 1}, CTX) is not None
    with pytest.raises(ValueSerializationError, match="n1"):
        ser({"n1": "x"}, CTX)


@pytest.fixture()
def registry() -> MockSchemaRegistryClient:
    return MockSchemaRegistryClient({"url": "mock://json"})


def test_round_trip_bytes(registry: MockSchemaRegistryClient) -> None:
    ser = JSONSerializer(json.dumps(ORDER), registry)
    value = {"id": "a1", "qty": 2, "price": 1.5, "tags": ["é"], "ref": {"n": 1}}
    data = ser(value, CTX)
    assert data is not None
    assert data[5:] == b'{"id":"a1","qty":2,"price":1.5,"tags":["\xc3\xa9"],"ref":{"n":1}}'
    assert JSONDeserializer(None, schema_registry_client=registry)(data, CTX) == value
    assert JSONDeserializer(json.dumps(ORDER))(data, CTX) == value  # no registry needed


def test_validation_errors(registry: MockSchemaRegistryClient) -> None:
    ser = JSONSerializer(json.dumps(ORDER), registry)
    with pytest.raises(ValueSerializationError, match="qty"):
        ser({"id": "a1", "qty": 0}, CTX)
    assert JSONSerializer(json.dumps(ORDER), registry, conf={"validate": False})(
        {"id": "A", "qty": 0}, CTX) is not None
    data = JSONSerializer(json.dumps(ORDER), registry, conf={"validate": False})(
        {"id": "a", "qty": 1000}, CTX)
    where = SerializationContext("orders", MessageField.VALUE, partition=0, offset=5)
    with pytest.raises(ValueDeserializationError, match="offset 5"):
        JSONDeserializer(None, schema_registry_client=registry)(data, where)
    assert JSONDeserializer(None, schema_registry_client=registry,
                            conf={"validate": False})(data, where)["qty"] == 1000
    with pytest.raises(ValueDeserializationError):
        JSONDeserializer(None, schema_registry_client=registry)(data[:-3], where)


def test_refs_across_subjects(registry: MockSchemaRegistryClient) -> None:
    address = {"type": "object", "properties": {"city": {"type": "string"}},
               "required": ["city"]}
    registry.register_schema("address", Schema(json.dumps(address), "JSON"))
    person = {"title": "Person", "type": "object",
              "properties": {"home": {"$ref": "address.json"}}}
    schema = Schema(json.dumps(person), "JSON", [SchemaReference("address.json", "address", 1)])
    ser = JSONSerializer(schema, registry, conf={
        "subject.name.strategy": record_subject_name_strategy})
    data = ser({"home": {"city": "Oslo"}}, CTX)
    assert registry.get_latest_version("Person").schema.references[0].subject == "address"
    assert JSONDeserializer(None, schema_registry_client=registry)(data, CTX) == {
        "home": {"city": "Oslo"}}
    with pytest.raises(ValueSerializationError, match="city"):
        ser({"home": {}}, CTX)


def test_config_errors(registry: MockSchemaRegistryClient) -> None:
    with pytest.raises(ConfigError, match="validate"):
        JSONSerializer(json.dumps(ORDER), registry, conf={"validat": True})
    with pytest.raises(ConfigError):
        JSONDeserializer(None)


def test_async() -> None:
    async def main() -> None:
        registry = AsyncMockSchemaRegistryClient({"url": "mock://ajson"})
        data = await AsyncJSONSerializer(json.dumps(ORDER), registry)({"id": "x", "qty": 1}, CTX)
        de = AsyncJSONDeserializer(None, schema_registry_client=registry)
        assert await de(data, CTX) == {"id": "x", "qty": 1}
    asyncio.run(main())
