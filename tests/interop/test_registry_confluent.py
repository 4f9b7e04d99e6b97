"""Kontrakt's embedded registry driven by confluent-kafka's own SchemaRegistryClient."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

ck = pytest.importorskip("confluent_kafka.schema_registry")
from confluent_kafka.schema_registry import (  # noqa: E402
    Schema,
    SchemaReference,
    SchemaRegistryClient,
    SchemaRegistryError,
)
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402

from kontrakt.registry.server import Authenticator, RegistryServer  # noqa: E402

pytestmark = pytest.mark.interop


def rec(name: str, *fields: tuple[str, Any]) -> str:
    return json.dumps({"type": "record", "name": name, "fields": [
        {"name": n, "type": t, **({"default": d} if d is not None else {})}
        for n, t, d in ((f[0], f[1], f[2] if len(f) > 2 else None) for f in fields)]})


@pytest.fixture
def srv() -> Iterator[RegistryServer]:
    with RegistryServer() as server:
        yield server


@pytest.fixture
def sr(srv: RegistryServer) -> Iterator[Any]:
    client = SchemaRegistryClient({"url": srv.url, "max.retries": 0})
    yield client
    client.close() if hasattr(client, "close") else None


def code_of(exc: pytest.ExceptionInfo[SchemaRegistryError]) -> tuple[int, int]:
    return exc.value.http_status_code, exc.value.error_code


def test_register_get_lookup_versions(sr: Any) -> None:
    s1 = Schema(rec("User", ("name", "string")), "AVRO")
    sid = sr.register_schema("users-value", s1)
    assert sr.register_schema("users-value", s1) == sid
    assert sr.get_schema(sid).schema_str == s1.schema_str
    got = sr.lookup_schema("users-value", s1)
    assert (got.schema_id, got.version, got.subject) == (sid, 1, "users-value")
    s2 = Schema(rec("User", ("name", "string"), ("age", "int", 0)), "AVRO")
    full = sr.register_schema_full_response("users-value", s2)
    assert full.version == 2
    assert sr.get_versions("users-value") == [1, 2]
    latest = sr.get_latest_version("users-value")
    assert (latest.version, latest.schema_id) == (2, full.schema_id)
    assert sr.get_version("users-value", 1).schema_id == sid
    assert sr.get_subjects() == ["users-value"]
    assert sorted(sr.get_schema_types()) == ["AVRO", "JSON", "PROTOBUF"]
    assert sr.get_subjects_by_schema_id(sid) == ["users-value"]
    versions = sr.get_schema_versions(sid)
    assert [(v.subject, v.version) for v in versions] == [("users-value", 1)]
    # Same schema in another subject reuses the id.
    assert sr.register_schema("other-value", s1) == sid
    with pytest.raises(SchemaRegistryError) as info:
        sr.get_schema(9999)
    assert code_of(info) == (404, 40403)
    with pytest.raises(SchemaRegistryError) as info:
        sr.lookup_schema("users-value", Schema(rec("Nope", ("x", "int")), "AVRO"))
    assert code_of(info) == (404, 40403)
    with pytest.raises(SchemaRegistryError) as info:
        sr.get_version("users-value", 42)
    assert code_of(info) == (404, 40402)
    with pytest.raises(SchemaRegistryError) as info:
        sr.get_latest_version("ghost")
    assert code_of(info) == (404, 40401)


def test_invalid_input_codes(sr: Any) -> None:
    with pytest.raises(SchemaRegistryError) as info:
        sr.register_schema("bad", Schema("{not avro", "AVRO"))
    assert code_of(info) == (422, 42201)
    with pytest.raises(SchemaRegistryError) as info:
        sr.register_schema("bad", Schema('{"type": 5}', "JSON"))
    assert code_of(info) == (422, 42201)
    with pytest.raises(SchemaRegistryError) as info:
        sr.register_schema("bad", Schema("message {", "PROTOBUF"))
    assert code_of(info) == (422, 42201)
    with pytest.raises(SchemaRegistryError) as info:
        sr.set_compatibility(level="SOMETIMES")
    assert code_of(info) == (422, 42203)
    with pytest.raises(SchemaRegistryError) as info:
        sr.update_global_mode("SLEEPY")
    assert code_of(info) == (422, 42204)
    sr.register_schema("ok", Schema('"int"', "AVRO"))
    with pytest.raises(SchemaRegistryError) as info:
        sr.get_version("ok", 0)
    assert code_of(info) == (422, 42202)


def test_deletes(sr: Any) -> None:
    sr.register_schema("d", Schema(rec("D", ("a", "int")), "AVRO"))
    assert sr.set_compatibility("d", "NONE") == {"compatibility": "NONE"}
    sr.register_schema("d", Schema(rec("D", ("b", "int")), "AVRO"))
    with pytest.raises(SchemaRegistryError) as info:
        sr.delete_version("d", 1, permanent=True)
    assert code_of(info) == (404, 40407)
    assert sr.delete_version("d", 1) == 1
    assert sr.get_versions("d") == [2]
    assert sr.get_versions("d", deleted=True) == [1, 2]
    assert sr.delete_version("d", 1, permanent=True) == 1
    with pytest.raises(SchemaRegistryError) as info:
        sr.delete_subject("d", permanent=True)
    assert code_of(info) == (404, 40405)
    assert sr.delete_subject("d") == [2]
    assert sr.get_subjects() == []
    assert sr.get_subjects(deleted=True) == ["d"]
    assert sr.delete_subject("d", permanent=True) == [2]
    with pytest.raises(SchemaRegistryError) as info:
        sr.delete_subject("d")
    assert code_of(info) == (404, 40401)


def test_config_compatibility_and_mode(sr: Any) -> None:
    assert sr.get_compatibility() == "BACKWARD"
    # confluent-kafka hands back the PUT body as is (Confluent's server answers the same).
    assert sr.set_compatibility(level="FULL") == {"compatibility": "FULL"}
    assert sr.get_config().compatibility_level.value == "FULL"
    sr.register_schema("c", Schema(rec("C", ("a", "int")), "AVRO"))
    assert sr.set_compatibility("c", "BACKWARD") == {"compatibility": "BACKWARD"}
    assert sr.get_config("c").compatibility_level.value == "BACKWARD"
    ok = Schema(rec("C", ("a", "int"), ("b", "int", 0)), "AVRO")
    breaking = Schema(rec("C", ("a", "int"), ("b", "int")), "AVRO")
    assert sr.test_compatibility("c", ok) is True
    assert sr.test_compatibility("c", breaking) is False
    assert sr.test_compatibility("c", breaking, version=1, verbose=True) is False
    assert sr.test_compatibility_all_versions("c", ok) is True
    with pytest.raises(SchemaRegistryError) as info:
        sr.register_schema("c", breaking)
    assert code_of(info) == (409, 40901)  # Confluent's current server's code
    assert sr.delete_config("c").compatibility_level.value == "BACKWARD"
    assert sr.get_global_mode() == "READWRITE"
    assert sr.update_global_mode("READONLY") == "READONLY"
    with pytest.raises(SchemaRegistryError) as info:
        sr.register_schema("c", ok)
    assert code_of(info) == (422, 42205)
    assert sr.update_global_mode("READWRITE") == "READWRITE"
    assert sr.update_mode("c", "READONLY") == "READONLY"
    assert sr.get_mode("c") == "READONLY"
    assert sr.delete_mode("c") == "READONLY"
    assert sr.get_contexts() == ["."]


def test_references(sr: Any) -> None:
    inner = Schema(json.dumps({"type": "record", "name": "Addr", "namespace": "x",
                               "fields": [{"name": "city", "type": "string"}]}), "AVRO")
    sr.register_schema("addr", inner)
    outer = Schema(json.dumps({"type": "record", "name": "Person", "namespace": "x",
                               "fields": [{"name": "home", "type": "x.Addr"}]}), "AVRO",
                   references=[SchemaReference("x.Addr", "addr", 1)])
    oid = sr.register_schema("person", outer)
    got = sr.get_schema(oid)
    assert [(r.name, r.subject, r.version) for r in got.references] == [("x.Addr", "addr", 1)]
    assert sr.get_referenced_by("addr", 1) == [oid]
    with pytest.raises(SchemaRegistryError) as info:
        sr.delete_subject("addr")
    assert code_of(info) == (422, 42206)


def test_confluent_avro_serde_round_trip(sr: Any) -> None:
    schema = rec("Event", ("id", "long"), ("kind", "string"))
    ser = AvroSerializer(sr, schema)
    de = AvroDeserializer(sr)
    ctx = SerializationContext("events", MessageField.VALUE)
    data = ser({"id": 5, "kind": "click"}, ctx)
    assert data[0] == 0 and int.from_bytes(data[1:5], "big") == sr.get_latest_version(
        "events-value").schema_id
    assert de(data, ctx) == {"id": 5, "kind": "click"}


def test_json_protobuf_and_metadata(sr: Any) -> None:
    js = Schema(json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}}),
                "JSON")
    jid = sr.register_schema("j-value", js)
    assert sr.get_schema(jid).schema_type == "JSON"
    dep = Schema('syntax = "proto3";\npackage p;\nmessage Dep { string s = 1; }\n', "PROTOBUF")
    sr.register_schema("dep.proto", dep)
    main = Schema('syntax = "proto3";\npackage p;\nimport "dep.proto";\n'
                  "message Main { Dep d = 1; }\n", "PROTOBUF",
                  references=[SchemaReference("dep.proto", "dep.proto", 1)])
    mid = sr.register_schema("main-value", main)
    got = sr.get_schema(mid)
    assert got.schema_type == "PROTOBUF" and got.references[0].name == "dep.proto"
    meta = ck.Metadata(tags=None, properties=ck.MetadataProperties({"owner": "ops"}),
                       sensitive=None)
    tagged = Schema(rec("T", ("a", "int")), "AVRO", metadata=meta)
    tid = sr.register_schema("t-value", tagged)
    found = sr.get_latest_with_metadata("t-value", {"owner": "ops"})
    assert found.schema_id == tid
    with pytest.raises(SchemaRegistryError) as info:
        sr.get_latest_with_metadata("t-value", {"owner": "dev"})
    assert code_of(info) == (404, 40403)


@pytest.fixture(scope="module")
def tls_cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make a test certificate")
    path = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", "key.pem", "-out", "cert.pem"],
                   cwd=path, check=True, capture_output=True, timeout=60)
    return str(path / "cert.pem"), str(path / "key.pem")


def test_confluent_client_authenticates_with_basic_and_bearer_credentials_over_tls(
        tls_cert: tuple[str, str]) -> None:
    auth = Authenticator(users={"app": ("pw", "read-write")}, tokens={"ro": "read-only"})
    tls = RegistryServer.tls_context(*tls_cert)
    ca = {"ssl.ca.location": tls_cert[0]}
    with RegistryServer(auth=auth, ssl_context=tls) as srv, \
            SchemaRegistryClient({"url": srv.url, "basic.auth.user.info": "app:pw",
                                  "max.retries": 0, **ca}) as rw, \
            SchemaRegistryClient({"url": srv.url, "max.retries": 0, **ca,
                                  "bearer.auth.credentials.source": "STATIC_TOKEN",
                                  "bearer.auth.token": "ro",
                                  "bearer.auth.logical.cluster": "lsrc-1",
                                  "bearer.auth.identity.pool.id": "pool-1"}) as ro, \
            SchemaRegistryClient({"url": srv.url, "max.retries": 0, **ca}) as anonymous:
        assert srv.url.startswith("https://")
        sid = rw.register_schema("a-value", Schema(rec("A", ("a", "int")), "AVRO"))
        assert ro.get_schema(sid).schema_str == rec("A", ("a", "int"))
        with pytest.raises(SchemaRegistryError) as info:
            ro.register_schema("a-value", Schema(rec("A", ("b", "int")), "AVRO"))
        assert code_of(info) == (403, 40301)
        with pytest.raises(SchemaRegistryError) as info:
            anonymous.get_subjects()
        assert code_of(info)[0] == 401
