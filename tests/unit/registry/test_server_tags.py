"""The embedded registry server's tags endpoint (``POST /subjects/{s}/versions/{v}/tags``),
``contextPrefix`` on ``GET /contexts``, and DEK subjects across contexts, through kontrakt's
sync and async registry clients and raw HTTP.

confluent-kafka's ``SchemaRegistryClient`` (2.16.1) has no method for the tags endpoint nor
a context prefix on ``get_contexts``, so kontrakt's clients and httpx drive them here; its
``DekRegistryClient`` is driven against the server in tests/interop/test_encrypt_confluent.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from kontrakt.registry import AsyncSchemaRegistryClient, Schema, SchemaRegistryClient
from kontrakt.registry._errors import InvalidSchemaError
from kontrakt.registry._models import Metadata, RuleSet
from kontrakt.registry.server import RegistryServer

PERSON = json.dumps({"type": "record", "name": "Person", "namespace": "com.acme", "fields": [
    {"name": "id", "type": "int"},
    {"name": "ssn", "type": "string"},
    {"name": "home", "type": ["null", {"type": "record", "name": "Address", "fields": [
        {"name": "street", "type": "string", "confluent:tags": ["LOCATION"]}]}],
     "default": None}]})


def field(path: str, *tags: str, kind: str = "SR_FIELD") -> dict[str, Any]:
    return {"entity": {"entityPath": path, "entityType": kind}, "tags": list(tags)}


@pytest.fixture
def srv() -> Iterator[RegistryServer]:
    with RegistryServer() as server:
        yield server


@pytest.fixture
def client(srv: RegistryServer) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient({"url": srv.url}) as c:
        yield c


def _fields(schema_str: str) -> dict[str, Any]:
    out = {}
    schema = json.loads(schema_str)
    out["Person"] = schema.get("confluent:tags")
    for f in schema["fields"]:
        out[f["name"]] = f.get("confluent:tags")
    street = schema["fields"][2]["type"][1]["fields"][0]
    out["street"] = street.get("confluent:tags")
    return out


def test_tags_are_added_and_removed_as_new_versions(client: SchemaRegistryClient) -> None:
    client.register_schema("people-value", Schema(PERSON, "AVRO", rule_set=RuleSet(
        domain_rules=({"name": "keep", "kind": "CONDITION", "type": "CEL", "expr": "true"},))))
    got = client.modify_schema_tags(
        "people-value", 1, {"com.acme.Person.ssn": ["PII"], ".com.acme.Person.id": ["KEY"]})
    assert got.version == 2 and got.subject == "people-value"
    tags = _fields(got.schema.schema_str)
    assert (tags["ssn"], tags["id"], tags["street"]) == (["PII"], ["KEY"], ["LOCATION"])
    assert got.schema.rule_set is not None and got.schema.rule_set.domain_rules[0]["name"] == \
        "keep"  # carried forward from the previous version
    # records by full name; the entries naming one entity (with or without a leading ".")
    # merge; removing the last tag drops the key
    got = client.modify_schema_tags("people-value", "latest", [
        field("com.acme.Person", "SENSITIVE", kind="SR_RECORD"),
        field("com.acme.Address.street", "GEO"), field(".com.acme.Address.street", "GEO")],
        tags_to_remove={"com.acme.Address.street": ["LOCATION"], "com.acme.Person.id": ["KEY"]})
    tags = _fields(got.schema.schema_str)
    assert (got.version, tags["Person"], tags["street"], tags["id"], tags["ssn"]) == (
        3, ["SENSITIVE"], ["GEO"], None, ["PII"])
    assert client.get_versions("people-value") == [1, 2, 3]
    # nothing to change: the same version back
    assert client.modify_schema_tags("people-value", 3, {}).version == 3


def test_new_version_metadata_and_rules(client: SchemaRegistryClient) -> None:
    client.register_schema("people-value", Schema(PERSON, "AVRO", rule_set=RuleSet(
        domain_rules=({"name": "a", "kind": "CONDITION", "type": "CEL", "expr": "true"},
                      {"name": "b", "kind": "CONDITION", "type": "CEL", "expr": "true"}))))
    with pytest.raises(InvalidSchemaError) as info:
        client.modify_schema_tags("people-value", 1, {"com.acme.Person.ssn": ["PII"]},
                                  new_version=5)
    assert info.value.error_code == 42201
    got = client.modify_schema_tags(
        "people-value", 1, {"com.acme.Person.ssn": ["PII"]}, new_version=2,
        metadata=Metadata(properties={"owner": "team-a"}),
        rules_to_merge=RuleSet(domain_rules=(
            {"name": "c", "kind": "CONDITION", "type": "CEL", "expr": "true"},)),
        rules_to_remove=["a"])
    assert got.version == 2
    assert got.schema.metadata is not None and got.schema.metadata.properties == {
        "owner": "team-a", "confluent:version": "2"}
    assert got.schema.rule_set is not None
    assert [r["name"] for r in got.schema.rule_set.domain_rules] == ["b", "c"]


def test_bad_requests_are_refused(srv: RegistryServer, client: SchemaRegistryClient) -> None:
    client.register_schema("people-value", Schema(PERSON, "AVRO"))
    client.register_schema("proto-value", Schema(
        'syntax = "proto3"; message M { string a = 1; }', "PROTOBUF"))
    with pytest.raises(InvalidSchemaError, match=r"No field 'com\.acme\.Person\.nope'"):
        client.modify_schema_tags("people-value", 1, {"com.acme.Person.nope": ["PII"]})
    with pytest.raises(InvalidSchemaError, match=r"No field 'M\.b'"):
        client.modify_schema_tags("proto-value", 1, {"M.b": ["PII"]})
    url = f"{srv.url}/subjects/people-value/versions/1/tags"
    for body, status in (([], 422), ({"tagsToAdd": [{"entity": {}, "tags": ["x"]}]}, 422),
                         ({"tagsToAdd": [field("com.acme.Person.id", "x", kind="SR_X")]}, 422),
                         ({"newVersion": "2"}, 422), ({"rulesToRemove": "a"}, 422)):
        assert httpx.post(url, json=body, timeout=10).status_code == status, body
    missing = httpx.post(f"{srv.url}/subjects/nobody/versions/1/tags", json={}, timeout=10)
    assert (missing.status_code, missing.json()["error_code"]) == (404, 40401)
    assert client.get_versions("people-value") == [1]  # nothing registered by refusals


def test_context_prefix_filters_the_contexts(srv: RegistryServer,
                                             client: SchemaRegistryClient) -> None:
    for context in ("team-a", "team-b", "other"):
        client.register_schema(f":.{context}:s-value", Schema(PERSON, "AVRO"))
    assert client.get_contexts() == [".", ".other", ".team-a", ".team-b"]
    assert client.get_contexts(context_prefix=".team") == [".team-a", ".team-b"]
    assert client.get_contexts(context_prefix=".team", limit=1) == [".team-a"]

    async def run() -> list[str]:
        async with AsyncSchemaRegistryClient({"url": srv.url}) as aclient:
            got = await aclient.get_contexts(context_prefix=".o")
            tagged = await aclient.modify_schema_tags(
                ":.other:s-value", 1, {"com.acme.Person.ssn": ["PII"]})
            assert tagged.version == 2
            return got

    assert asyncio.run(run()) == [".other"]


def test_dek_subjects_qualified_with_the_default_context(srv: RegistryServer) -> None:
    """``:.:s`` and ``s`` name one DEK, as in Confluent's DEK registry; another context's
    subject has DEKs of its own."""
    base = f"{srv.url}/dek-registry/v1/keks"
    assert httpx.post(base, json={"name": "k", "kmsType": "local-kms", "kmsKeyId": "x"},
                      timeout=10).status_code == 200
    made = httpx.post(f"{base}/k/deks/:.:s-value", json={
        "subject": ":.:s-value", "encryptedKeyMaterial": "AAAA"}, timeout=10)
    assert made.status_code == 200 and made.json()["subject"] == "s-value"
    assert httpx.get(f"{base}/k/deks/s-value", timeout=10).json()["encryptedKeyMaterial"] == \
        "AAAA"
    again = httpx.post(f"{base}/k/deks", json={"subject": "s-value",
                                               "encryptedKeyMaterial": "BBBB"}, timeout=10)
    assert again.status_code == 409
    other = httpx.post(f"{base}/k/deks", json={"subject": ":.ctx:s-value",
                                               "encryptedKeyMaterial": "CCCC"}, timeout=10)
    assert other.status_code == 200
    assert httpx.get(f"{base}/k/deks", timeout=10).json() == [":.ctx:s-value", "s-value"]


ORDER_JSON = json.dumps({"type": "object", "title": "Order", "properties": {
    "id": {"type": "integer"},
    "customer": {"type": "object", "properties": {
        "name": {"type": "string"},
        "address": {"type": "object", "properties": {
            "city": {"type": "string", "confluent:tags": ["LOCATION"]}}}}},
    "lines": {"type": "array", "items": {"type": "object", "properties": {
        "sku": {"type": "string"}}}},
    "payment": {"oneOf": [{"type": "string"}, {"type": "object", "properties": {
        "card": {"type": "string"}}}]},
    "geo.zone": {"type": "string"}},
    "definitions": {"Note": {"type": "object", "properties": {"text": {"type": "string"}}}}})


def test_json_schema_tags_at_confluent_paths(client: SchemaRegistryClient) -> None:
    """Paths as Confluent's JsonSchemaUtils reads them: type words, property names (dotted
    ones too), array items, a oneOf branch by its sorted index (the object sorts before the
    string), definitions, and the object itself as an SR_RECORD."""
    client.register_schema("orders-value", Schema(ORDER_JSON, "JSON"))
    got = client.modify_schema_tags("orders-value", 1, [
        field("object.customer.object.name", "PII"),
        field("object.customer.object.address.object.city", "GEO"),
        field("object.lines.array.object.sku", "PRODUCT"),
        field("object.payment.oneof.0.object.card", "PCI"),
        field("object.geo.zone", "GEO"),
        field("object.definitions.Note.object.text", "FREE"),
        field("object.customer.object", "PERSON", kind="SR_RECORD")])
    schema = json.loads(got.schema.schema_str)
    customer = schema["properties"]["customer"]
    assert got.version == 2 and got.schema.schema_type == "JSON"
    assert customer["confluent:tags"] == ["PERSON"]
    assert customer["properties"]["name"]["confluent:tags"] == ["PII"]
    assert customer["properties"]["address"]["properties"]["city"]["confluent:tags"] == [
        "LOCATION", "GEO"]
    assert schema["properties"]["lines"]["items"]["properties"]["sku"]["confluent:tags"] == [
        "PRODUCT"]
    assert schema["properties"]["payment"]["oneOf"][1]["properties"]["card"][
        "confluent:tags"] == ["PCI"]
    assert schema["properties"]["geo.zone"]["confluent:tags"] == ["GEO"]
    assert schema["definitions"]["Note"]["properties"]["text"]["confluent:tags"] == ["FREE"]
    got = client.modify_schema_tags("orders-value", 2, {}, tags_to_remove={
        "object.customer.object.address.object.city": ["LOCATION", "GEO"],
        "object.customer.object.name": ["PII"]})
    customer = json.loads(got.schema.schema_str)["properties"]["customer"]
    assert "confluent:tags" not in customer["properties"]["name"]
    assert "confluent:tags" not in customer["properties"]["address"]["properties"]["city"]
    assert customer["confluent:tags"] == ["PERSON"]
    for path in ("object.nope", "object.customer.object.nope", "array.x", "object.payment.oneof.5",
                 "customer.object.name"):
        with pytest.raises(InvalidSchemaError, match="No matching path") as info:
            client.modify_schema_tags("orders-value", 3, {path: ["X"]})
        assert info.value.error_code == 42201
    assert client.get_versions("orders-value") == [1, 2, 3]


ORDER_PROTO = """syntax = "proto3";
package com.acme;

// An order: comments and layout survive the rewrite.
message Order {
  int64 id = 1;
  Customer customer = 2 [deprecated = true];
  message Customer {
    string name = 1; // the customer's name
    string ssn = 2;
    oneof contact {
      string email = 3;
      string phone = 4;
    }
  }
}
"""


def test_protobuf_tags_on_nested_fields_and_messages(client: SchemaRegistryClient) -> None:
    """Paths as Confluent's ProtobufSchemaUtils reads them: messages from the top level
    without the package, a oneof member by name or through its oneof; tags land in
    ``(confluent.field_meta)`` / ``(confluent.message_meta)`` and the meta import is added."""
    client.register_schema("orders-value", Schema(ORDER_PROTO, "PROTOBUF"))
    got = client.modify_schema_tags("orders-value", 1, [
        field("Order.Customer.ssn", "PII"), field(".Order.Customer.ssn", "SSN"),
        field("Order.Customer.contact.email", "PII"), field("Order.Customer.phone", "PII"),
        field("Order.Customer", "PERSON", kind="SR_RECORD")])
    assert got.version == 2
    text = got.schema.schema_str
    assert 'import "confluent/meta.proto";' in text
    assert "// An order: comments and layout survive the rewrite." in text
    assert "Customer customer = 2 [deprecated = true];" in text
    assert 'string ssn = 2 [(confluent.field_meta) = { tags: ["PII", "SSN"] }];' in text
    assert 'string email = 3 [(confluent.field_meta) = { tags: ["PII"] }];' in text
    assert 'string phone = 4 [(confluent.field_meta) = { tags: ["PII"] }];' in text
    assert 'option (confluent.message_meta) = { tags: ["PERSON"] };' in text
    assert "string name = 1; // the customer's name" in text
    got = client.modify_schema_tags("orders-value", 2, {"Order.Customer.name": ["PII"]},
                                    tags_to_remove={"Order.Customer.ssn": ["PII"],
                                                    "Order.Customer.contact.phone": ["PII"]})
    text = got.schema.schema_str
    assert 'string ssn = 2 [(confluent.field_meta) = { tags: ["SSN"] }];' in text
    assert "string phone = 4;" in text
    assert ('string name = 1 [(confluent.field_meta) = { tags: ["PII"] }]; '
            "// the customer's name") in text
    got = client.modify_schema_tags("orders-value", 3, {}, tags_to_remove=[
        field("Order.Customer", "PERSON", kind="SR_RECORD")])
    assert "message_meta" not in got.schema.schema_str
    for path in ("Order.nope", "Order.Customer.other.email", "com.acme.Order.id", "id"):
        with pytest.raises(InvalidSchemaError, match="No field") as info:
            client.modify_schema_tags("orders-value", 4, {path: ["X"]})
        assert info.value.error_code == 42201
    assert client.get_versions("orders-value") == [1, 2, 3, 4]


def test_protobuf_meta_option_entries_are_merged() -> None:
    """A field's meta option written as an aggregate or as ``.tags`` sub-options is read as
    one; its other entries (doc, params) stay, and other options are untouched."""
    from kontrakt.registry.server._tags_proto import retag_proto

    text = ('syntax = "proto3";\nimport "confluent/meta.proto";\nmessage M {\n'
            '  option (confluent.message_meta).doc = "m";\n'
            '  string a = 1 [json_name = "x", (confluent.field_meta) = {doc: "d", '
            'params: [{key: "k", value: "v"}] tags: "T1"}, (confluent.field_meta).tags = "T2"];\n'
            "}\n")
    out = retag_proto(text, {("SR_FIELD", "M.a"): ["T3"], ("SR_RECORD", "M"): ["R"]},
                      {("SR_FIELD", "M.a"): ["T1"]})
    assert ('string a = 1 [json_name = "x", (confluent.field_meta) = { doc: "d" params: '
            '[{key: "k", value: "v"}] tags: ["T2", "T3"] }];') in out
    assert 'option (confluent.message_meta) = { doc: "m" tags: ["R"] };' in out
    assert out.count("confluent/meta.proto") == 1


def _cel_rules() -> Any:
    pytest.importorskip("celpy")
    from kontrakt.serde.rules import RuleRegistry
    from kontrakt.serde.rules.cel import CelFieldExecutor

    rules = RuleRegistry()
    rules.register_executor(CelFieldExecutor())
    return rules


def _merged_rules() -> RuleSet:
    """A write-side and a read-side CEL_FIELD transform, each on a tag only the endpoint
    adds, so that each runs only if the tagged schema is what the serdes see."""
    return RuleSet(domain_rules=(
        {"name": "mark", "kind": "TRANSFORM", "mode": "WRITE", "type": "CEL_FIELD",
         "tags": ["ZONE"], "expr": "value + '!'"},
        {"name": "mask", "kind": "TRANSFORM", "mode": "READ", "type": "CEL_FIELD",
         "tags": ["PII"], "expr": "'***'"}))


def test_protobuf_tags_from_the_endpoint_drive_cel_field_rules(
        client: SchemaRegistryClient) -> None:
    """End to end: a schema tagged through the endpoint (with rules merged into the new
    version) compiles in kontrakt's Protobuf serdes, the serializer (latest version, class
    generated from the untagged schema) applies the WRITE rule to the field tagged
    ZONE, and the deserializer (writer schema by id) the READ rule to the one tagged
    PII."""
    pytest.importorskip("google.protobuf")
    pytest.importorskip("grpc_tools")
    from google.protobuf.message_factory import GetMessageClass

    from kontrakt.serde import MessageField, SerializationContext
    from kontrakt.serde._proto_schema import new_pool, proto_text_to_files
    from kontrakt.serde.protobuf import ProtobufDeserializer, ProtobufSerializer

    rules = _cel_rules()
    client.register_schema("orders-value", Schema(ORDER_PROTO, "PROTOBUF"))
    client.modify_schema_tags("orders-value", 1, {
        "Order.Customer.name": ["ZONE"], "Order.Customer.contact.email": ["PII"]},
        rules_to_merge=_merged_rules())
    pool = new_pool()
    for fdp in proto_text_to_files("orders.proto", {"orders.proto": ORDER_PROTO}):
        pool.Add(fdp)
    order_cls = GetMessageClass(pool.FindMessageTypeByName("com.acme.Order"))
    order = order_cls(id=7)
    order.customer.name = "Lyon"
    order.customer.email = "a@example.com"
    order.customer.ssn = "123"
    ctx = SerializationContext("orders", MessageField.VALUE)
    data = ProtobufSerializer(order_cls, client, conf={
        "use.latest.version": True, "auto.register.schemas": False}, rule_registry=rules)(
        order, ctx)
    assert int.from_bytes(data[1:5], "big") == client.get_latest_version("orders-value").schema_id
    plain = ProtobufDeserializer(order_cls)(data, ctx)  # no registry: no rules
    assert (plain.customer.name, plain.customer.email) == ("Lyon!", "a@example.com")
    got = ProtobufDeserializer(order_cls, schema_registry_client=client,
                               rule_registry=rules)(data, ctx)
    assert (got.customer.name, got.customer.email, got.customer.ssn) == ("Lyon!", "***", "123")


def test_json_tags_from_the_endpoint_drive_cel_field_rules(client: SchemaRegistryClient) -> None:
    """The JSON Schema twin of the Protobuf test above: nested properties tagged through
    the endpoint, rules merged in, WRITE and READ CEL_FIELD transforms applied by kontrakt's
    JSON serdes."""
    from kontrakt.serde import MessageField, SerializationContext
    from kontrakt.serde.json_schema import JSONDeserializer, JSONSerializer

    rules = _cel_rules()
    client.register_schema("orders-value", Schema(ORDER_JSON, "JSON"))
    client.modify_schema_tags("orders-value", 1, {
        "object.customer.object.name": ["ZONE"],
        "object.customer.object.address.object.city": ["PII"]},
        rules_to_merge=_merged_rules())
    ctx = SerializationContext("orders", MessageField.VALUE)
    value = {"id": 7, "customer": {"name": "Ann", "address": {"city": "Lyon"}}}
    data = JSONSerializer(None, client, conf={
        "use.latest.version": True, "auto.register.schemas": False}, rule_registry=rules)(
        value, ctx)
    assert json.loads(data[5:])["customer"] == {"name": "Ann!", "address": {"city": "Lyon"}}
    got = JSONDeserializer(None, schema_registry_client=client, rule_registry=rules)(data, ctx)
    assert got["customer"] == {"name": "Ann!", "address": {"city": "***"}}


def test_protobuf_scanner_skips_what_is_not_a_field() -> None:
    """Enums (with value options), maps, reserved ranges, nested extends and services are
    stepped over; a tag with a quote is written escaped and read back as it was."""
    from kontrakt.registry.server._tags_proto import retag_proto

    text = ('syntax = "proto2";\npackage p;\nimport "google/protobuf/descriptor.proto";\n'
            "message M {\n  enum E { A = 0; B = 1 [deprecated = true]; }\n"
            "  map<string, int32> counts = 1;\n  reserved 5 to 7;\n"
            "  extend google.protobuf.FieldOptions { optional int32 weight = 50001; }\n"
            "  optional E kind = 2 [default = B];\n}\n"
            "service S { rpc Get (M) returns (M) { option deprecated = true; } }\n")
    out = retag_proto(text, {("SR_FIELD", "M.counts"): ['say "hi"'],
                             ("SR_FIELD", "M.kind"): ["K"]}, {})
    assert ('map<string, int32> counts = 1 [(confluent.field_meta) = '
            '{ tags: ["say \\"hi\\""] }];') in out
    assert 'optional E kind = 2 [default = B, (confluent.field_meta) = { tags: ["K"] }];' in out
    assert 'import "google/protobuf/descriptor.proto";\nimport "confluent/meta.proto";' in out
    again = retag_proto(out, {}, {("SR_FIELD", "M.counts"): ['say "hi"']})
    assert "map<string, int32> counts = 1;" in again
    for path in ("M.E", "M.weight", "S.Get"):
        with pytest.raises(InvalidSchemaError):
            retag_proto(text, {("SR_FIELD", path): ["X"]}, {})


def test_tags_make_a_new_protobuf_identity_with_the_meta_extension_imported() -> None:
    """With a module declaring ``confluent.field_meta`` imported into the default descriptor
    pool (confluent-kafka's meta_pb2, as earlier tests in the same process do), the option
    parses as a known extension instead of unknown fields: two versions that differ only in
    their tags must still be two schemas (the suite failed this way once run in one worker
    after confluent-kafka's Protobuf serdes)."""
    pytest.importorskip("confluent_kafka.schema_registry.confluent.meta_pb2")
    pytest.importorskip("grpc_tools")
    from kontrakt.registry.server._validate import canonical_protobuf

    def text(tags: str) -> str:
        return ('syntax = "proto3";\nimport "confluent/meta.proto";\nmessage M {\n'
                f'  string a = 1 [(confluent.field_meta) = {{ tags: [{tags}] }}];\n}}\n')

    assert canonical_protobuf(text('"PII"'), []) != canonical_protobuf(text('"SSN"'), [])
