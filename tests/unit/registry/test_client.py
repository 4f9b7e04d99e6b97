"""Kontrakt's registry clients against the embedded server: API, caching, coalescing, outage."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from kontrakt.errors import ConfigError
from kontrakt.registry import (
    AsyncMockSchemaRegistryClient,
    AsyncSchemaRegistryClient,
    CompatibilityLevel,
    IncompatibleSchemaError,
    InvalidCompatibilityLevelError,
    InvalidSchemaError,
    InvalidVersionError,
    Metadata,
    MockSchemaRegistryClient,
    ReferenceExistsError,
    RegistryConnectionError,
    Schema,
    SchemaNotFoundError,
    SchemaReference,
    SchemaRegistryClient,
    SchemaVersion,
    ServerConfig,
    SubjectNotFoundError,
    SubjectNotSoftDeletedError,
    VersionNotFoundError,
)
from kontrakt.registry.server import RegistryServer


def avro(name: str, *fields: str) -> Schema:
    return Schema(json.dumps({"type": "record", "name": name,
                              "fields": [{"name": f, "type": "int", "default": 0}
                                         for f in fields]}))


def fast(url: str, **extra: Any) -> dict[str, Any]:
    return {"url": url, "max.retries": 1, "retries.wait.ms": 1, "retries.max.wait.ms": 5,
            "timeout": 5, **extra}


@pytest.fixture
def srv() -> Iterator[RegistryServer]:
    with RegistryServer() as server:
        yield server


def test_whole_api_sync(srv: RegistryServer) -> None:
    from kontrakt.registry import SchemaRegistryClient

    with SchemaRegistryClient(fast(srv.url)) as c:
        s1, s2 = avro("A", "a"), avro("A", "a", "b")
        sid = c.register_schema("t-value", s1)
        assert c.register_schema("t-value", s1) == sid
        full = c.register_schema_full_response("t-value", s2)
        assert full.version == 2 and full.subject == "t-value"
        assert c.get_schema(sid) == s1
        assert c.get_schema_types() and "AVRO" in c.get_schema_types()
        assert c.get_subjects() == ["t-value"]
        assert c.get_versions("t-value") == [1, 2]
        latest = c.get_latest_version("t-value")
        assert (latest.version, latest.schema_id, latest.schema) == (2, full.schema_id, s2)
        assert c.get_version("t-value", 1).schema_id == sid
        assert c.lookup_schema("t-value", s1).version == 1
        assert c.get_subjects_by_schema_id(sid) == ["t-value"]
        assert c.get_schema_versions(sid) == [SchemaVersion("t-value", 1)]
        assert c.get_compatibility() == "BACKWARD"
        assert c.get_compatibility("t-value") == "BACKWARD"  # falls back to global
        assert c.set_compatibility("t-value", "full") == "FULL"
        assert c.get_config("t-value").compatibility_level is CompatibilityLevel.FULL
        cfg = c.set_config(config=ServerConfig(compatibility=CompatibilityLevel.NONE))
        assert cfg.compatibility is CompatibilityLevel.NONE
        assert c.delete_config("t-value").compatibility_level is CompatibilityLevel.FULL
        assert c.test_compatibility("t-value", avro("A", "a", "b", "c")) is True
        assert c.test_compatibility_all_versions("t-value", avro("Z")) is True
        assert c.get_global_mode() == "READWRITE"
        assert c.update_mode("t-value", "READONLY") == "READONLY"
        assert c.get_mode("t-value") == "READONLY"
        assert c.delete_mode("t-value") == "READONLY"
        assert c.get_contexts() == ["."]
        with pytest.raises(InvalidVersionError):
            c.get_version("t-value", "first")
        with pytest.raises(VersionNotFoundError):
            c.get_version("t-value", 9)
        with pytest.raises(InvalidCompatibilityLevelError):
            c.set_compatibility(level="LOOSE")
        with pytest.raises(InvalidSchemaError):
            c.register_schema("bad", Schema("{"))
        assert c.delete_version("t-value", 1) == 1
        assert c.get_versions("t-value", deleted=True) == [1, 2]
        with pytest.raises(SubjectNotSoftDeletedError):
            c.delete_subject("t-value", permanent=True)
        assert c.delete_subject("t-value") == [2]
        assert c.delete_subject("t-value", permanent=True) == [1, 2]
        with pytest.raises(SubjectNotFoundError):
            c.get_latest_version("t-value")


def test_references_metadata_and_incompatible(srv: RegistryServer) -> None:
    from kontrakt.registry import SchemaRegistryClient

    with SchemaRegistryClient(fast(srv.url)) as c:
        inner = Schema(json.dumps({"type": "record", "name": "Inner", "namespace": "n",
                                   "fields": [{"name": "v", "type": "int"}]}))
        c.register_schema("inner", inner)
        ref = SchemaReference("n.Inner", "inner", 1)
        outer = Schema(json.dumps({"type": "record", "name": "Outer",
                                   "fields": [{"name": "i", "type": "n.Inner"}]}),
                       references=[ref],
                       metadata=Metadata(properties={"owner": "team-a", "v": "1"}))
        oid = c.register_schema("outer", outer)
        assert c.get_schema(oid).references == (ref,)
        assert c.get_referenced_by("inner", 1) == [oid]
        assert c.get_latest_with_metadata("outer", {"owner": "team-a"}).schema_id == oid
        with pytest.raises(SchemaNotFoundError):
            c.get_latest_with_metadata("outer", {"owner": "team-b"})
        with pytest.raises(ReferenceExistsError):
            c.delete_subject("inner")
        # An incompatible change (new field without default, BACKWARD) is refused by the engine.
        c.register_schema("evolve", avro("E", "a"))
        breaking = Schema(json.dumps({"type": "record", "name": "E", "fields": [
            {"name": "a", "type": "int", "default": 0}, {"name": "b", "type": "string"}]}))
        with pytest.raises(IncompatibleSchemaError) as info:
            c.register_schema("evolve", breaking)
        assert info.value.http_status_code == 409
        result = c.test_compatibility_verbose("evolve", breaking)
        assert not result.is_compatible and result.messages


def test_caching_counts_requests(srv: RegistryServer) -> None:
    from kontrakt.registry import SchemaRegistryClient

    with SchemaRegistryClient(fast(srv.url)) as c:
        sid = c.register_schema("c", avro("C", "a"))
        before = srv.app.request_count
        for _ in range(5):
            c.register_schema("c", avro("C", "a"))
            c.get_schema(sid)
            c.lookup_schema("c", avro("C", "a"))
            c.get_version("c", 1)
            c.get_latest_version("c")
        # register and get_schema: answered from what register cached; lookup, version and
        # latest: one request each, then cached.
        assert srv.app.request_count - before == 3
        # A write through the client drops the subject's latest entry.
        c.register_schema("c", avro("C", "a", "b"))
        assert c.get_latest_version("c").version == 2


def test_latest_ttl_and_negative_cache(srv: RegistryServer) -> None:
    from kontrakt.registry import SchemaRegistryClient

    with SchemaRegistryClient(fast(srv.url, **{"cache.latest.ttl.sec": 0.05,
                                               "cache.negative.ttl.sec": 30})) as c, \
            SchemaRegistryClient(fast(srv.url)) as other:
        with pytest.raises(SubjectNotFoundError):
            c.get_latest_version("n")
        other.register_schema("n", avro("N", "a"))
        before = srv.app.request_count
        # "Not found" is remembered (no request) until this client writes.
        with pytest.raises(SubjectNotFoundError):
            c.get_latest_version("n")
        assert srv.app.request_count == before
        c.register_schema("unrelated", avro("U", "a"))
        assert c.get_latest_version("n").version == 1
        other.register_schema("n", avro("N", "a", "b"))
        deadline = 200
        while c.get_latest_version("n").version != 2:
            deadline -= 1
            assert deadline > 0, "latest TTL never expired"
            threading.Event().wait(0.01)


def test_fifty_concurrent_sync_lookups_make_one_request(srv: RegistryServer) -> None:
    from kontrakt.registry import SchemaRegistryClient

    with SchemaRegistryClient(fast(srv.url)) as writer:
        sid = writer.register_schema("z", avro("Z", "a"))
    with SchemaRegistryClient(fast(srv.url)) as c:
        # Hold the server so that all 50 callers are in flight together.
        gate = threading.Event()
        entered = threading.Event()
        real = srv.app.handle

        def slow(*args: Any) -> Any:
            entered.set()
            gate.wait(10)
            return real(*args)

        srv.app.handle = slow  # type: ignore[method-assign]
        before = srv.app.request_count
        results: list[Schema] = []
        threads = [threading.Thread(target=lambda: results.append(c.get_schema(sid)))
                   for _ in range(50)]
        for t in threads:
            t.start()
        assert entered.wait(10)
        # Every thread has either joined the flight or is about to; let them all arrive.
        for _ in range(200):
            if len(c._flights) == 1 and sum(t.is_alive() for t in threads) == 50:
                break
            threading.Event().wait(0.005)
        gate.set()
        for t in threads:
            t.join(10)
        srv.app.handle = real  # type: ignore[method-assign]
        assert len(results) == 50 and all(r == results[0] for r in results)
        assert srv.app.request_count - before == 1


def test_fifty_concurrent_async_lookups_make_one_request(srv: RegistryServer) -> None:
    from kontrakt.registry import SchemaRegistryClient

    with SchemaRegistryClient(fast(srv.url)) as writer:
        sid = writer.register_schema("z", avro("Z", "a"))

    async def main() -> None:
        async with AsyncSchemaRegistryClient(fast(srv.url)) as c:
            before = srv.app.request_count
            got = await asyncio.gather(*(c.get_schema(sid) for _ in range(50)))
            assert len(set(got)) == 1
            assert srv.app.request_count - before == 1
            # Failures are shared too, as fresh exceptions.
            errs = await asyncio.gather(*(c.get_schema(404) for _ in range(50)),
                                        return_exceptions=True)
            assert all(isinstance(e, SchemaNotFoundError) for e in errs)
            assert len({id(e) for e in errs}) == 50
            assert srv.app.request_count - before == 2

    asyncio.run(main())


def test_outage_does_not_stop_known_ids() -> None:
    from kontrakt.registry import SchemaRegistryClient

    server = RegistryServer().start()
    url = server.url
    c = SchemaRegistryClient(fast(url))
    try:
        s = avro("O", "a")
        sid = c.register_schema("o-value", s)
        reg = c.lookup_schema("o-value", s)
        assert c.get_schema(sid) == s
        server.stop()
        # The registry is down: serializer/deserializer paths still answer from cache.
        for _ in range(3):
            assert c.get_schema(sid) == s
            assert c.register_schema("o-value", s) == sid
            assert c.lookup_schema("o-value", s) == reg
        with pytest.raises(RegistryConnectionError):
            c.get_schema(sid + 1)
    finally:
        c.close()
        server.stop()


def test_failover_to_second_url(srv: RegistryServer) -> None:
    from kontrakt.registry import SchemaRegistryClient

    dead = RegistryServer().start()
    dead_url = dead.url
    dead.stop()
    with SchemaRegistryClient(fast(f"{dead_url},{srv.url}")) as c:
        assert c.register_schema("f", avro("F", "a")) == 1
        attempts = c.requests_sent
        # The good URL is remembered: no more attempts on the dead one.
        c.get_versions("f")
        assert c.requests_sent == attempts + 1


def test_async_whole_flow_and_mock(srv: RegistryServer) -> None:
    async def main() -> None:
        async with AsyncSchemaRegistryClient(url=srv.url) as c:
            sid = await c.register_schema("a", avro("A", "x"))
            assert (await c.get_latest_version("a")).schema_id == sid
            assert await c.get_subjects() == ["a"]
            assert await c.delete_subject("a") == [1]
        m = AsyncMockSchemaRegistryClient()
        assert await m.register_schema("m", avro("M", "a")) == 1
        assert (await m.lookup_schema("m", avro("M", "a"))).version == 1
        await m.close()

    asyncio.run(main())


def test_mock_client_same_rules() -> None:
    m = MockSchemaRegistryClient({"url": "mock://anything"})
    sid = m.register_schema("s", avro("S", "a"))
    assert m.get_schema(sid) == avro("S", "a")
    with pytest.raises(SubjectNotFoundError):
        m.get_versions("missing")
    with pytest.raises(InvalidSchemaError):
        m.register_schema("s", Schema("{}", "PROTOBUF"))
    shared = MockSchemaRegistryClient(state=m.app.state)
    assert shared.get_subjects() == ["s"]


def test_config_validation() -> None:
    from kontrakt.registry import SchemaRegistryClient

    with pytest.raises(ConfigError, match="did you mean url"):
        SchemaRegistryClient({"urls": "http://x"})
    with pytest.raises(ConfigError, match="url is required"):
        SchemaRegistryClient({})
    with pytest.raises(ConfigError, match="invalid registry url"):
        SchemaRegistryClient({"url": "ftp://x"})
    with pytest.raises(ConfigError, match="username:password"):
        SchemaRegistryClient({"url": "http://x", "basic.auth.user.info": "nopass"})
    with pytest.raises(ConfigError, match="only one"):
        SchemaRegistryClient({"url": "http://u:p@x", "basic.auth.user.info": "a:b"})
    with pytest.raises(ConfigError, match=r"max\.retries"):
        SchemaRegistryClient({"url": "http://x", "max.retries": "many"})
    with pytest.raises(ConfigError, match="OAUTHBEARER needs"):
        SchemaRegistryClient({"url": "http://x", "bearer.auth.credentials.source": "OAUTHBEARER"})
    c = SchemaRegistryClient(url="http://u:secret@x", max_retries=0)
    assert "secret" not in repr(c) and "secret" not in repr(c._core.config)
    c.close()


def test_real_engine_with_references_and_versions_in_messages(srv: RegistryServer) -> None:
    from kontrakt.registry import SchemaRegistryClient

    with SchemaRegistryClient(fast(srv.url)) as c:
        inner = Schema(json.dumps({"type": "record", "name": "Inner", "namespace": "n",
                                   "fields": [{"name": "v", "type": "int"}]}))
        c.register_schema("inner", inner)
        ref = [SchemaReference("n.Inner", "inner", 1)]

        def outer(*extra: dict[str, Any]) -> Schema:
            fields = [{"name": "i", "type": "n.Inner"}, *extra]
            return Schema(json.dumps({"type": "record", "name": "Outer", "fields": fields}),
                          references=ref)

        c.register_schema("outer", outer())
        # A compatible evolution of a schema with references: checked, accepted.
        v2 = c.register_schema_full_response("outer", outer({"name": "x", "type": "int",
                                                             "default": 1}))
        assert v2.version == 2
        bad = outer({"name": "x", "type": "int", "default": 1}, {"name": "y", "type": "int"})
        res = c.test_compatibility_verbose("outer", bad)
        assert not res.is_compatible
        assert any("2" in m for m in res.messages)
        with pytest.raises(IncompatibleSchemaError):
            c.register_schema("outer", bad)


def test_clients_share_the_default_tls_context() -> None:
    """Clients without ssl.* options share one verifying context a process: httpx would load
    the CA bundle for each (~50 ms of CPU), and a Spark task opens a client per range."""
    import ssl

    clients = [SchemaRegistryClient({"url": "http://127.0.0.1:1"}) for _ in range(2)]
    aclient = AsyncSchemaRegistryClient({"url": "http://127.0.0.1:1"})
    try:
        contexts = [c._http._transport._pool._ssl_context  # type: ignore[attr-defined]
                    for c in (*clients, aclient)]
        assert contexts[0] is contexts[1] is contexts[2]
        assert contexts[0].verify_mode == ssl.CERT_REQUIRED and contexts[0].check_hostname
    finally:
        for c in clients:
            c.close()
        asyncio.run(aclient.close())
