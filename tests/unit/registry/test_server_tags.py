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
    with pytest.raises(InvalidSchemaError, match="AVRO schemas only"):
        client.modify_schema_tags("proto-value", 1, {"M.a": ["PII"]})
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
