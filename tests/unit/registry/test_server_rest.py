"""The embedded registry server over raw HTTP: Confluent's paths, shapes and error codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from kontrakt.registry.server import CONTENT_TYPE, RegistryServer


def avro(name: str, *fields: tuple[str, Any]) -> str:
    return json.dumps({"type": "record", "name": name,
                       "fields": [{"name": n, "type": t} for n, t in fields]})


def _lenient(new: Any, previous: Any, level: str, lookup: Any) -> tuple[bool, list[str]]:
    return True, []


@pytest.fixture
def srv() -> Iterator[RegistryServer]:
    with RegistryServer(compatibility_checker=_lenient) as server:
        yield server


@pytest.fixture
def http(srv: RegistryServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=srv.url, timeout=10) as client:
        yield client


def err(resp: httpx.Response) -> tuple[int, int]:
    assert resp.headers["content-type"] == CONTENT_TYPE
    return resp.status_code, resp.json()["error_code"]


def register(http: httpx.Client, subject: str, schema: str, **extra: Any) -> httpx.Response:
    return http.post(f"/subjects/{subject}/versions", json={"schema": schema, **extra})


def test_register_get_and_id_reuse_across_subjects(http: httpx.Client) -> None:
    s = avro("A", ("a", "int"))
    r1 = register(http, "a-value", s)
    assert r1.status_code == 200 and r1.headers["content-type"] == CONTENT_TYPE
    sid = r1.json()["id"]
    # Same schema, different whitespace and key order, other subject: same id.
    same = json.dumps({"name": "A", "fields": [{"type": "int", "name": "a"}], "type": "record"},
                      indent=2)
    assert register(http, "b-value", same).json()["id"] == sid
    # Registering again in the same subject does not make a new version.
    assert register(http, "a-value", s).json() == r1.json()
    assert http.get("/subjects/a-value/versions").json() == [1]
    other = register(http, "a-value", avro("A", ("a", "int"), ("b", "string")))
    assert other.json()["id"] != sid and other.json()["version"] == 2
    got = http.get(f"/schemas/ids/{sid}").json()
    assert got["schema"] == s and "schemaType" not in got
    assert http.get(f"/schemas/ids/{sid}/schema").json() == s
    assert http.get(f"/schemas/ids/{sid}/subjects").json() == ["a-value", "b-value"]
    assert http.get(f"/schemas/ids/{sid}/versions").json() == [
        {"subject": "a-value", "version": 1}, {"subject": "b-value", "version": 1}]
    latest = http.get("/subjects/a-value/versions/latest").json()
    assert (latest["version"], latest["subject"]) == (2, "a-value")
    assert http.get("/subjects/a-value/versions/-1").json() == latest
    assert http.get("/subjects").json() == ["a-value", "b-value"]
    assert http.get("/subjects", params={"subjectPrefix": "b"}).json() == ["b-value"]
    assert set(http.get("/schemas/types").json()) == {"AVRO", "JSON", "PROTOBUF"}
    lookup = http.post("/subjects/b-value", json={"schema": s}).json()
    assert (lookup["id"], lookup["version"]) == (sid, 1)


def test_empty_metadata_and_rule_members_are_the_same_as_missing(http: httpx.Client) -> None:
    """Confluent's clients send ``"sensitive": []``, ``"tags": {}`` and empty rule lists
    (confluent-kafka's lookups of a schema registered without them got 404): the identity
    reads an empty member as a missing one, as Confluent's models do, and ``sensitive`` as a
    set; a real difference still makes another schema."""
    s = avro("M", ("a", "int"))
    meta = {"properties": {"owner": "team-a"}, "sensitive": ["b", "a"]}
    rules = {"domainRules": [{"name": "r", "kind": "CONDITION", "type": "CEL",
                              "mode": "WRITE", "expr": "message.a > 0"}]}
    first = register(http, "m-value", s, metadata=meta, ruleSet=rules).json()
    padded_meta = {**meta, "tags": {}, "sensitive": ["a", "b", "a"]}
    padded_rules = {**rules, "migrationRules": [], "encodingRules": []}
    lookup = http.post("/subjects/m-value", json={"schema": s, "metadata": padded_meta,
                                                  "ruleSet": padded_rules})
    assert lookup.status_code == 200, lookup.text
    assert lookup.json()["id"] == first["id"]
    again = register(http, "m-value", s, metadata=padded_meta, ruleSet=padded_rules).json()
    assert again == first
    plain = register(http, "p-value", s).json()
    assert register(http, "p-value", s, metadata={"sensitive": [], "tags": {}},
                    ruleSet={"domainRules": []}).json() == plain
    other = register(http, "m-value", s, metadata={"properties": {"owner": "team-b"}}).json()
    assert other["id"] != first["id"]


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("GET", "/subjects/none/versions", None, 404, 40401),
        ("GET", "/subjects/none/versions/1", None, 404, 40401),
        ("DELETE", "/subjects/none", None, 404, 40401),
        ("GET", "/schemas/ids/999", None, 404, 40403),
        ("GET", "/subjects/s/versions/99", None, 404, 40402),
        ("GET", "/subjects/s/versions/abc", None, 422, 42202),
        ("GET", "/subjects/s/versions/0", None, 422, 42202),
        ("GET", "/subjects/s/versions/2147483648", None, 422, 42202),
        ("DELETE", "/subjects/s/versions/1.5", None, 422, 42202),
        ("POST", "/subjects/s/versions", b"{not json", 400, 400),
        ("POST", "/subjects/s/versions", {"schema": "not json"}, 422, 42201),
        ("POST", "/subjects/s/versions", {"schema": "{\"type\": \"nope\"}"}, 422, 42201),
        ("POST", "/subjects/s/versions", {"schema": "{}", "schemaType": "XML"}, 422, 42201),
        ("POST", "/subjects/s/versions", {"schema": ""}, 422, 42201),
        ("POST", "/subjects/s/versions", {"schema": "{\"type\": 12}", "schemaType": "JSON"},
         422, 42201),
        ("POST", "/subjects/s/versions",
         {"schema": "message M { int32 a = ; }", "schemaType": "PROTOBUF"}, 422, 42201),
        ("POST", "/subjects/s/versions",
         {"schema": "\"int\"", "references": [{"name": "x", "subject": "gone", "version": 1}]},
         422, 42201),
        ("POST", "/subjects/s", {"schema": avro("Other", ("z", "int"))}, 404, 40403),
        ("POST", "/subjects/none", {"schema": "\"int\""}, 404, 40401),
        ("PUT", "/config", {"compatibility": "SIDEWAYS"}, 422, 42203),
        ("PUT", "/config/s", {"compatibility": 7}, 422, 42203),
        ("PUT", "/mode", {"mode": "WRITEONLY"}, 422, 42204),
        ("GET", "/config/s", None, 404, 40408),
        ("GET", "/mode/s", None, 404, 40409),
        ("GET", "/no/such/path", None, 404, 404),
        ("PUT", "/subjects", None, 405, 405),
        ("POST", "/compatibility/subjects/s/versions/7", {"schema": "\"int\""}, 404, 40402),
        ("POST", "/compatibility/subjects/s/versions/x", {"schema": "\"int\""}, 422, 42202),
    ],
)
def test_error_codes(http: httpx.Client, method: str, path: str, body: Any, status: int,
                     code: int) -> None:
    assert register(http, "s", avro("S", ("a", "int"))).status_code == 200
    if isinstance(body, bytes):
        resp = http.request(method, path, content=body, headers={"Content-Type": CONTENT_TYPE})
    else:
        resp = http.request(method, path, json=body)
    assert err(resp) == (status, code), resp.text
    assert isinstance(resp.json()["message"], str) and resp.json()["message"]


def test_soft_and_permanent_delete_rules(http: httpx.Client) -> None:
    sid1 = register(http, "d", avro("D", ("a", "int"))).json()["id"]
    register(http, "d", avro("D", ("a", "int"), ("b", "int")))
    assert err(http.delete("/subjects/d/versions/1?permanent=true")) == (404, 40407)
    assert http.delete("/subjects/d/versions/1").json() == 1
    assert err(http.delete("/subjects/d/versions/1")) == (404, 40406)
    assert http.get("/subjects/d/versions").json() == [2]
    assert http.get("/subjects/d/versions", params={"deleted": "true"}).json() == [1, 2]
    assert http.get("/subjects/d/versions", params={"deleted_only": "true"}).json() == [1]
    assert err(http.get("/subjects/d/versions/1")) == (404, 40402)
    assert http.get("/subjects/d/versions/1", params={"deleted": "true"}).json()["id"] == sid1
    # Soft-deleted schemas stay readable by id (deserializers depend on it).
    assert http.get(f"/schemas/ids/{sid1}").status_code == 200
    assert http.delete("/subjects/d/versions/1?permanent=true").json() == 1
    assert err(http.delete("/subjects/d?permanent=true")) == (404, 40405)
    assert http.delete("/subjects/d").json() == [2]
    assert err(http.delete("/subjects/d")) == (404, 40404)
    assert http.get("/subjects").json() == []
    assert http.get("/subjects", params={"deleted": "true"}).json() == ["d"]
    assert http.delete("/subjects/d", params={"permanent": "true"}).json() == [2]
    assert http.get("/subjects", params={"deleted": "true"}).json() == []
    assert err(http.get(f"/schemas/ids/{sid1}")) == (404, 40403)
    # Versions continue after the last one ever registered, ids are never reused.
    again = register(http, "d", avro("D", ("q", "int"))).json()
    assert again["version"] == 1 and again["id"] > sid1


def test_references_and_refusing_to_delete_referenced(http: httpx.Client) -> None:
    inner = json.dumps({"type": "record", "name": "Inner", "namespace": "x",
                        "fields": [{"name": "v", "type": "int"}]})
    register(http, "inner", inner)
    outer = json.dumps({"type": "record", "name": "Outer",
                        "fields": [{"name": "i", "type": "x.Inner"}]})
    refs = [{"name": "x.Inner", "subject": "inner", "version": 1}]
    # Without the reference, the named type is unknown: invalid.
    assert err(register(http, "outer", outer)) == (422, 42201)
    oid = register(http, "outer", outer, references=refs).json()["id"]
    assert http.get("/subjects/inner/versions/1/referencedby").json() == [oid]
    assert http.get(f"/schemas/ids/{oid}").json()["references"] == refs
    assert err(http.delete("/subjects/inner/versions/1")) == (422, 42206)
    assert err(http.delete("/subjects/inner")) == (422, 42206)
    http.delete("/subjects/outer")
    assert http.delete("/subjects/inner").json() == [1]


def test_json_and_protobuf_with_references(http: httpx.Client) -> None:
    js = json.dumps({"type": "object", "properties": {"a": {"type": "string"}}})
    r = register(http, "j", js, schemaType="JSON").json()
    assert http.get(f"/schemas/ids/{r['id']}").json()["schemaType"] == "JSON"
    dep = 'syntax = "proto3";\npackage p;\nmessage Dep { string s = 1; }\n'
    register(http, "dep.proto", dep, schemaType="PROTOBUF")
    main = ('syntax = "proto3";\npackage p;\nimport "dep.proto";\n'
            "import \"google/protobuf/timestamp.proto\";\n"
            "message Main { Dep d = 1; google.protobuf.Timestamp t = 2; }\n")
    refs = [{"name": "dep.proto", "subject": "dep.proto", "version": 1}]
    assert err(register(http, "main", main, schemaType="PROTOBUF")) == (422, 42201)
    ok = register(http, "main", main, schemaType="PROTOBUF", references=refs)
    assert ok.status_code == 200, ok.text


def test_config_and_mode(http: httpx.Client, srv: RegistryServer) -> None:
    assert http.get("/config").json() == {"compatibilityLevel": "BACKWARD"}
    assert http.put("/config", json={"compatibility": "full"}).json() == {"compatibility": "FULL"}
    assert http.get("/config").json()["compatibilityLevel"] == "FULL"
    assert http.put("/config/s", json={"compatibility": "NONE"}).json()["compatibility"] == "NONE"
    assert http.get("/config/s").json()["compatibilityLevel"] == "NONE"
    assert http.get("/config/t", params={"defaultToGlobal": "true"}).json()[
        "compatibilityLevel"] == "FULL"
    assert http.delete("/config/s").json()["compatibilityLevel"] == "NONE"
    assert http.delete("/config").json()["compatibilityLevel"] == "FULL"
    assert http.get("/config").json()["compatibilityLevel"] == "BACKWARD"
    register(http, "m", avro("M", ("a", "int")))
    assert http.get("/mode").json() == {"mode": "READWRITE"}
    assert http.put("/mode", json={"mode": "READONLY"}).json() == {"mode": "READONLY"}
    assert err(register(http, "m", avro("M", ("b", "int")))) == (422, 42205)
    assert err(http.delete("/subjects/m")) == (422, 42205)
    # Reads still work in READONLY.
    assert http.get("/subjects/m/versions").json() == [1]
    http.put("/mode", json={"mode": "READWRITE"})
    http.put("/mode/m", json={"mode": "READONLY"})
    assert err(register(http, "m", avro("M", ("b", "int")))) == (422, 42205)
    assert register(http, "other", avro("M", ("b", "int"))).status_code == 200
    assert http.delete("/mode/m").json() == {"mode": "READONLY"}
    # IMPORT needs an empty registry unless forced, then accepts given ids and versions.
    assert err(http.put("/mode", json={"mode": "IMPORT"})) == (422, 42205)
    assert http.put("/mode?force=true", json={"mode": "IMPORT"}).json() == {"mode": "IMPORT"}
    imp = register(http, "imp", avro("I", ("a", "int")), id=500, version=7).json()
    assert (imp["id"], imp["version"]) == (500, 7)


def test_compatibility_endpoint_and_enforcement() -> None:
    calls: list[tuple[int, str]] = []

    def checker(new: Any, previous: list[Any], level: str, lookup: Any
                ) -> tuple[bool, list[str]]:
        calls.append((len(previous), level))
        ok = "bad" not in new.schema_str
        return ok, [] if ok else ["field bad breaks readers"]

    with RegistryServer(compatibility_checker=checker) as srv, \
            httpx.Client(base_url=srv.url) as http:
        register(http, "c", avro("C", ("a", "int")))
        register(http, "c", avro("C", ("a", "int"), ("b", "int")))
        bad = avro("C", ("bad", "int"))
        r = register(http, "c", bad)
        # Confluent's current server answers 40901 (older ones said 409).
        assert err(r) == (409, 40901) and "field bad breaks readers" in r.json()["message"]
        v = http.post("/compatibility/subjects/c/versions/latest?verbose=true",
                      json={"schema": bad}).json()
        assert v == {"is_compatible": False, "messages": ["field bad breaks readers"]}
        assert http.post("/compatibility/subjects/c/versions/1",
                         json={"schema": avro("C", ("z", "int"))}).json() == {
            "is_compatible": True}
        # Non-transitive levels compare with the latest version only, transitive with all.
        calls.clear()
        register(http, "c", avro("C", ("x", "int")))
        assert calls == [(1, "BACKWARD")]
        http.put("/config/c", json={"compatibility": "FULL_TRANSITIVE"})
        calls.clear()
        register(http, "c", avro("C", ("y", "int")))
        assert calls == [(3, "FULL_TRANSITIVE")]
        http.put("/config/c", json={"compatibility": "NONE"})
        calls.clear()
        assert register(http, "c", bad).status_code == 200
        assert calls == []


def test_refuses_to_claim_a_level_it_cannot_check(monkeypatch: pytest.MonkeyPatch) -> None:
    # The engine module missing: registration of a second version must fail, not pass.
    monkeypatch.setitem(sys.modules, "kontrakt.registry.compatibility", None)
    with RegistryServer() as srv, httpx.Client(base_url=srv.url) as http:
        assert register(http, "u", avro("U", ("a", "int"))).status_code == 200
        r = register(http, "u", avro("U", ("a", "int"), ("b", "int")))
        assert err(r) == (422, 42290) and "cannot be checked" in r.json()["message"]
        r = http.post("/compatibility/subjects/u/versions/latest", json={"schema": "\"int\""})
        assert err(r) == (422, 42290)
        http.put("/config/u", json={"compatibility": "NONE"})
        assert register(http, "u", avro("U", ("a", "int"), ("b", "int"))).status_code == 200


def test_engine_errors_are_refusals_too() -> None:
    def broken(new: Any, previous: Any, level: str, lookup: Any) -> tuple[bool, list[str]]:
        from kontrakt.registry.server._state import default_compatibility_checker
        return default_compatibility_checker(new, [object()], level, lookup)

    with RegistryServer(compatibility_checker=broken) as srv, \
            httpx.Client(base_url=srv.url) as http:
        register(http, "e", avro("E", ("a", "int")))
        assert err(register(http, "e", avro("E", ("b", "int")))) == (422, 42290)


def test_contexts(http: httpx.Client) -> None:
    a = register(http, ":.team:orders", avro("O", ("a", "int"))).json()
    b = register(http, "orders", avro("P", ("a", "int"))).json()
    # Ids are per context: both start at 1.
    assert a["id"] == b["id"] == 1
    assert http.get("/contexts").json() == [".", ".team"]
    assert http.get("/subjects").json() == [":.team:orders", "orders"]
    got = http.get("/schemas/ids/1", params={"subject": ":.team:orders"}).json()
    assert "\"O\"" in got["schema"]
    assert "\"P\"" in http.get("/schemas/ids/1").json()["schema"]


def test_file_storage_survives_restart(tmp_path: Any) -> None:
    path = str(tmp_path / "reg.json")
    with RegistryServer(storage=path) as srv, httpx.Client(base_url=srv.url) as http:
        sid = register(http, "keep", avro("K", ("a", "int"))).json()["id"]
        http.put("/config/keep", json={"compatibility": "NONE"})
        http.delete("/subjects/keep/versions/1")
        register(http, "keep", avro("K", ("b", "int")))
    with RegistryServer(storage=path) as srv, httpx.Client(base_url=srv.url) as http:
        assert http.get(f"/schemas/ids/{sid}").status_code == 200
        assert http.get("/subjects/keep/versions").json() == [2]
        assert http.get("/subjects/keep/versions", params={"deleted": "true"}).json() == [1, 2]
        assert http.get("/config/keep").json()["compatibilityLevel"] == "NONE"
        assert register(http, "new", avro("N", ("a", "int"))).json()["id"] == sid + 2


def test_cli_serves_and_keeps_state(tmp_path: Any) -> None:
    storage = str(tmp_path / "cli.json")
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kontrakt.registry.server", "--port", "0",
         "--storage", storage], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        assert proc.stdout is not None
        # The CLI binds before announcing, so the printed URL (real port) is ready to use.
        line = proc.stdout.readline()
        assert line.startswith("kontrakt registry listening on http://127.0.0.1:"), line
        url = line.rsplit(" ", 1)[1].strip()
        assert httpx.post(url + "/subjects/cli/versions", json={"schema": "\"int\""}).json()[
            "id"] == 1
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    with open(storage, encoding="utf-8") as fh:
        ops = [json.loads(line) for line in fh.read().splitlines()[1:]]
    assert {"op": "version", "ctx": ".", "subject": "cli", "version": 1, "id": 1,
            "deleted": False} in ops


def test_normalize_gives_equivalent_schemas_one_id(http: httpx.Client) -> None:
    a = json.dumps({"type": "record", "name": "N", "namespace": "ns",
                    "fields": [{"name": "a", "type": {"type": "int"}}]})
    b = json.dumps({"type": "record", "name": "ns.N",
                    "fields": [{"name": "a", "type": "int"}]})
    first = http.post("/subjects/n/versions?normalize=true", json={"schema": a}).json()
    second = http.post("/subjects/n/versions?normalize=true", json={"schema": b}).json()
    assert first == second
    # Without normalize the two spellings are different schemas.
    other = register(http, "m", a).json()["id"]
    assert register(http, "m2", b).json()["id"] != other


def _named_definitions(node: Any, out: list[str]) -> list[str]:
    """Full names of the named types a decoded (canonical) Avro schema defines, in order."""
    if isinstance(node, list):
        for branch in node:
            _named_definitions(branch, out)
    elif isinstance(node, dict):
        if node.get("type") in ("record", "enum", "fixed"):
            out.append(node["name"])
        for field in node.get("fields", ()):
            _named_definitions(field["type"], out)
        for key in ("items", "values"):
            if key in node:
                _named_definitions(node[key], out)
    return out


def test_resolved_format_writes_avro_references_into_the_schema(http: httpx.Client) -> None:
    import io

    import fastavro

    money = json.dumps({"type": "record", "name": "Money", "namespace": "shop.common",
                        "fields": [{"name": "amount", "type": "long"},
                                   {"name": "currency", "type": {
                                       "type": "enum", "name": "Currency",
                                       "symbols": ["EUR", "USD"]}}]})
    item = json.dumps({"type": "record", "name": "Item", "namespace": "shop.catalog",
                       "fields": [{"name": "price", "type": "shop.common.Money"},
                                  {"name": "tags", "type": {"type": "array",
                                                            "items": "string"}}]})
    order = json.dumps({"type": "record", "name": "Order", "namespace": "shop",
                        "fields": [{"name": "items", "type": {"type": "array",
                                                              "items": "shop.catalog.Item"}},
                                   {"name": "total", "type": "shop.common.Money"},
                                   {"name": "fallback",
                                    "type": ["null", "shop.common.Currency"]}]})
    money_ref = {"name": "shop.common.Money", "subject": "money", "version": 1}
    item_ref = {"name": "shop.catalog.Item", "subject": "item", "version": 1}
    register(http, "money", money)
    register(http, "item", item, references=[money_ref])
    oid = register(http, "order", order, references=[item_ref, money_ref]).json()["id"]

    answer = http.get("/subjects/order/versions/1", params={"format": "resolved"}).json()
    assert answer["id"] == oid and answer["references"] == [item_ref, money_ref]
    resolved = json.loads(answer["schema"])
    # Each named type is written once, where it is first used, and by name after that.
    assert _named_definitions(resolved, []) == [
        "shop.Order", "shop.catalog.Item", "shop.common.Money", "shop.common.Currency"]
    # It stands alone: an Avro library needs no references to read it, and it writes the
    # same bytes as the stored schema with its references.
    standalone = fastavro.parse_schema(resolved)
    named: dict[str, Any] = {}
    fastavro.parse_schema(json.loads(money), named_schemas=named)
    fastavro.parse_schema(json.loads(item), named_schemas=named)
    with_refs = fastavro.parse_schema(json.loads(order), named_schemas=named)
    record = {"items": [{"price": {"amount": 5, "currency": "USD"}, "tags": ["a", "b"]}],
              "total": {"amount": 5, "currency": "USD"}, "fallback": "EUR"}
    outputs = []
    for parsed in (standalone, with_refs):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, record)
        outputs.append(buf.getvalue())
    assert outputs[0] == outputs[1]

    # The same answer by id; without the format (or with another one) the stored text.
    by_id = http.get(f"/schemas/ids/{oid}", params={"format": "RESOLVED"}).json()
    assert json.loads(by_id["schema"]) == resolved
    assert http.get(f"/schemas/ids/{oid}").json()["schema"] == order
    assert http.get("/subjects/order/versions/1",
                    params={"format": "default"}).json()["schema"] == order
    # A schema without references comes back whole too; other schema types ignore it.
    plain = http.get("/subjects/money/versions/latest", params={"format": "resolved"}).json()
    assert _named_definitions(json.loads(plain["schema"]), []) == [
        "shop.common.Money", "shop.common.Currency"]
    js = json.dumps({"type": "object"})
    register(http, "j", js, schemaType="JSON")
    assert http.get("/subjects/j/versions/1",
                    params={"format": "resolved"}).json()["schema"] == js


def test_schema_listing_guid_ids_max_id_and_negative_versions(http: httpx.Client) -> None:
    """GET /schemas, /schemas/guids/{guid}/ids, fetchMaxId, deletedAsNegative, deletedOnly
    and DELETE /mode, in the shapes of Confluent's SchemasResource and its clients."""
    a1 = register(http, "a-value", avro("A", ("a", "int"))).json()
    a2 = register(http, "a-value", avro("A", ("b", "int"))).json()
    b1 = register(http, "b-value", avro("B", ("a", "int"))).json()
    register(http, ":.ctx:c", avro("C", ("a", "int")))
    listed = http.get("/schemas").json()
    assert [(s["subject"], s["version"], s["id"]) for s in listed] == [
        (":.ctx:c", 1, 1), ("a-value", 1, a1["id"]), ("a-value", 2, a2["id"]),
        ("b-value", 1, b1["id"])]
    assert listed[1]["schema"] == avro("A", ("a", "int")) and listed[1]["guid"] == a1["guid"]
    latest = http.get("/schemas", params={"subjectPrefix": "a", "latestOnly": "true"}).json()
    assert [(s["subject"], s["version"]) for s in latest] == [("a-value", 2)]
    page = http.get("/schemas", params={"offset": 1, "limit": 2}).json()
    assert [(s["subject"], s["version"]) for s in page] == [("a-value", 1), ("a-value", 2)]
    assert len(http.get("/schemas", params={"limit": 0}).json()) == 4

    assert http.get(f"/schemas/guids/{a2['guid']}/ids").json() == [
        {"context": ".", "id": a2["id"]}]
    assert err(http.get("/schemas/guids/nope/ids")) == (404, 40403)
    got = http.get(f"/schemas/ids/{a1['id']}", params={"fetchMaxId": "true"}).json()
    assert got["maxId"] == b1["id"] and "maxId" not in http.get(f"/schemas/ids/{a1['id']}").json()

    http.delete("/subjects/a-value/versions/1")
    assert http.get("/schemas").json()[1]["version"] == 2
    assert len(http.get("/schemas", params={"deleted": "true"}).json()) == 4
    assert http.get("/subjects/a-value/versions", params={
        "deleted": "true", "deletedAsNegative": "true"}).json() == [-1, 2]
    assert http.get("/subjects/a-value/versions", params={"deleted": "true"}).json() == [1, 2]
    for name in ("deletedOnly", "deleted_only"):
        assert http.get("/subjects/a-value/versions", params={name: "true"}).json() == [1]
    http.delete("/subjects/b-value")
    assert http.get("/subjects", params={"deletedOnly": "true"}).json() == ["a-value",
                                                                           "b-value"]

    http.put("/mode", json={"mode": "READONLY"})
    assert http.delete("/mode").json() == {"mode": "READONLY"}
    assert http.get("/mode").json() == {"mode": "READWRITE"}


def test_delete_context_only_when_empty(http: httpx.Client, tmp_path: Any) -> None:
    """DELETE /contexts/{context}: 204 when empty; the default context and contexts still
    holding (even soft-deleted) subjects are refused; unknown ones are 404."""
    register(http, ":.team:s", avro("S", ("a", "int")))
    assert err(http.delete("/contexts/.team")) == (422, 42205)
    http.delete("/subjects/:.team:s")
    assert err(http.delete("/contexts/.team")) == (422, 42205)
    http.delete("/subjects/:.team:s", params={"permanent": "true"})
    resp = http.delete("/contexts/.team")
    assert resp.status_code == 204 and resp.content == b""
    assert "content-type" not in resp.headers
    assert err(http.delete("/contexts/.team")) == (404, 404)
    assert err(http.delete("/contexts/%2E")) == (422, 42205)  # "." itself
    # The connection stays usable after a bodiless answer.
    assert http.get("/contexts").json() == ["."]


def test_server_metadata_endpoints(http: httpx.Client) -> None:
    """GET /v1/metadata/id and /v1/metadata/version answer in Confluent's shapes."""
    from kontrakt import __version__

    got = http.get("/v1/metadata/id")
    assert got.status_code == 200
    assert got.json()["id"] == ""
    assert got.json()["scope"]["path"] == []
    assert got.json()["scope"]["clusters"]["schema-registry-cluster"]
    assert http.get("/v1/metadata/version").json() == {"version": __version__, "commitId": ""}
    assert http.post("/v1/metadata/id", json={}).status_code == 405
