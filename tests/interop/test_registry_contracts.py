"""Data contracts on the embedded registry, driven by confluent-kafka's SchemaRegistryClient.

Confluent's server applies a config's ``defaultMetadata`` / ``overrideMetadata`` /
``defaultRuleSet`` / ``overrideRuleSet`` at registration, carries the previous version's
metadata and rule set forward to a registration that has none, and keeps the
``confluent:version`` property at the version written. These tests hold the embedded server
to that, through Confluent's own client (which caches the schema the server answers).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

ck = pytest.importorskip("confluent_kafka.schema_registry")
from confluent_kafka.schema_registry import (  # noqa: E402
    Metadata,
    MetadataProperties,
    MetadataTags,
    Rule,
    RuleKind,
    RuleMode,
    RuleSet,
    Schema,
    SchemaRegistryClient,
    ServerConfig,
)

from kontrakt.registry.server import RegistryServer  # noqa: E402
from kontrakt.registry.server._contracts import merge_metadata, merge_rule_sets  # noqa: E402

pytestmark = pytest.mark.interop


def _avro(*fields: str) -> str:
    return json.dumps({"type": "record", "name": "R", "fields": [
        {"name": f, "type": "int", "default": 0} for f in fields]})


def _rule(name: str, expr: str) -> Rule:
    return Rule(name=name, doc=None, kind=RuleKind.CONDITION, mode=RuleMode.WRITE, type="CEL",
                tags=None, params=None, expr=expr, on_success=None, on_failure=None,
                disabled=None)


def _props(**props: str) -> Metadata:
    return Metadata(tags=None, properties=MetadataProperties(props), sensitive=None)


@pytest.fixture
def srv() -> Iterator[RegistryServer]:
    with RegistryServer() as server:
        yield server


@pytest.fixture
def sr(srv: RegistryServer) -> Iterator[Any]:
    client = SchemaRegistryClient({"url": srv.url, "max.retries": 0})
    yield client
    client.close() if hasattr(client, "close") else None


def _version(srv: RegistryServer, subject: str, version: str = "latest") -> dict[str, Any]:
    got = httpx.get(f"{srv.url}/subjects/{subject}/versions/{version}", timeout=10)
    got.raise_for_status()
    out: dict[str, Any] = got.json()
    return out


def test_config_defaults_and_overrides_apply_at_registration(srv: RegistryServer, sr: Any
                                                              ) -> None:
    subject = "orders-value"
    sr.set_config(subject, ServerConfig(
        default_metadata=Metadata(tags=MetadataTags({"R.a": ["PII"]}),
                                  properties=MetadataProperties({"owner": "team-a",
                                                                 "tier": "gold"}),
                                  sensitive=["ssn"]),
        override_metadata=_props(tier="platinum"),
        default_rule_set=RuleSet(migration_rules=None,
                                 domain_rules=[_rule("positive", "message.a > 0"),
                                               _rule("named", "message.b > 0")]),
        override_rule_set=RuleSet(migration_rules=None,
                                  domain_rules=[_rule("positive", "message.a > 1")])))
    full = sr.register_schema_full_response(subject, Schema(
        _avro("a", "b"), "AVRO", metadata=_props(owner="team-b", region="eu")))
    stored = _version(srv, subject)
    # override > the schema's own > default, key by key; sensitive is a union.
    assert stored["metadata"] == {"tags": {"R.a": ["PII"]}, "properties": {
        "owner": "team-b", "tier": "platinum", "region": "eu"}, "sensitive": ["ssn"]}
    # Rules merge by name: the default's "named", then the override's "positive".
    assert [(r["name"], r["expr"]) for r in stored["ruleSet"]["domainRules"]] == [
        ("named", "message.b > 0"), ("positive", "message.a > 1")]
    # The registration's answer carries what was stored: Confluent's client caches it.
    assert full.schema.metadata.properties.properties["tier"] == "platinum"
    assert sr.get_schema(full.schema_id).metadata.properties.properties["region"] == "eu"
    # Registering the same request again finds the stored version: no version 2.
    assert sr.register_schema(subject, Schema(_avro("a", "b"), "AVRO",
                                              metadata=_props(owner="team-b", region="eu"))
                              ) == full.schema_id
    assert sr.get_versions(subject) == [1]


def test_previous_contract_is_carried_forward(srv: RegistryServer, sr: Any) -> None:
    subject = "carry-value"
    rules = RuleSet(migration_rules=None, domain_rules=[_rule("positive", "message.a > 0")])
    v1 = sr.register_schema(subject, Schema(_avro("a"), "AVRO", metadata=_props(major="1"),
                                            rule_set=rules))
    # v2 names neither metadata nor rules: it inherits v1's.
    v2 = sr.register_schema_full_response(subject, Schema(_avro("a", "b"), "AVRO"))
    stored = _version(srv, subject, "2")
    assert stored["metadata"] == {"properties": {"major": "1"}}
    assert [r["name"] for r in stored["ruleSet"]["domainRules"]] == ["positive"]
    assert v2.schema.metadata.properties.properties == {"major": "1"}
    # Re-sending v1's text without its contract finds v1, not a third version.
    assert sr.register_schema(subject, Schema(_avro("a"), "AVRO")) == v1
    assert sr.get_versions(subject) == [1, 2]
    # A lookup without the contract finds the version that carries it.
    fresh = SchemaRegistryClient({"url": srv.url})
    try:
        assert fresh.lookup_schema(subject, Schema(_avro("a", "b"), "AVRO")).version == 2
    finally:
        fresh.close()
    # A registration with metadata of its own replaces the carried metadata wholesale.
    sr.register_schema(subject, Schema(_avro("a", "b", "c"), "AVRO",
                                       metadata=_props(major="2")))
    assert _version(srv, subject)["metadata"] == {"properties": {"major": "2"}}


def test_confluent_version_follows_the_version_written(srv: RegistryServer) -> None:
    subject = "pinned-value"
    url = f"{srv.url}/subjects/{subject}/versions"
    body = {"schema": _avro("a"), "version": 1}
    assert httpx.post(url, json=body, timeout=10).status_code == 200
    assert _version(srv, subject)["metadata"] == {"properties": {"confluent:version": "1"}}
    # An optimistic writer that lost the race names a taken version: refused, as Confluent.
    stale = httpx.post(url, json={"schema": _avro("a", "b"), "version": 1}, timeout=10)
    assert (stale.status_code, stale.json()["error_code"]) == (422, 42201)
    assert "expected 2" in stale.json()["message"]
    # Later versions carry the property forward, kept at the version written.
    assert httpx.post(url, json={"schema": _avro("a", "b")}, timeout=10).status_code == 200
    assert _version(srv, subject)["metadata"] == {"properties": {"confluent:version": "2"}}


def test_import_mode_takes_contracts_as_sent(srv: RegistryServer, sr: Any) -> None:
    subject = "imported-value"
    sr.set_config(subject, ServerConfig(override_metadata=_props(owner="x")))
    httpx.put(f"{srv.url}/mode/{subject}", json={"mode": "IMPORT"}, timeout=10)
    got = httpx.post(f"{srv.url}/subjects/{subject}/versions",
                     json={"schema": _avro("a"), "id": 50, "version": 3}, timeout=10)
    assert got.status_code == 200, got.text
    assert "metadata" not in _version(srv, subject)


def test_merge_rules() -> None:
    """The merge functions alone (what the server tests above exercise through HTTP)."""
    assert merge_metadata(None, {"properties": {"a": "1"}}) == {"properties": {"a": "1"}}
    assert merge_metadata({"sensitive": ["b", "a"]}, {"sensitive": ["a", "c"]}) == {
        "sensitive": ["a", "b", "c"]}
    old = {"domainRules": [{"name": "x"}, {"name": "y", "v": 1}],
           "migrationRules": [{"name": "m"}]}
    new = {"domainRules": [{"name": "y", "v": 2}]}
    assert merge_rule_sets(old, new) == {"migrationRules": [{"name": "m"}],
                                         "domainRules": [{"name": "x"}, {"name": "y", "v": 2}]}
    assert merge_rule_sets(old, None) is old
