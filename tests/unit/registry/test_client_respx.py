"""The registry clients against respx-mocked answers in Confluent's documented shapes."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import httpx
import pytest
import respx

from kontrakt.registry import (
    AsyncSchemaRegistryClient,
    IncompatibleSchemaError,
    InvalidSchemaError,
    RegistryConnectionError,
    Schema,
    SchemaRegistryClient,
    SchemaRegistryError,
    SubjectNotFoundError,
    error_from_response,
)

URL = "http://registry.test:8081"
CT = {"Content-Type": "application/vnd.schemaregistry.v1+json"}


def reply(status: int, body: Any) -> httpx.Response:
    return httpx.Response(status, content=json.dumps(body).encode(), headers=CT)


def client(**extra: Any) -> SchemaRegistryClient:
    conf = {"url": URL, "max.retries": 2, "retries.wait.ms": 1, "retries.max.wait.ms": 2}
    conf.update(extra)
    return SchemaRegistryClient(conf)


@respx.mock
def test_request_shapes_and_headers() -> None:
    route = respx.post(f"{URL}/subjects/my%2Fsubject/versions").mock(
        return_value=reply(200, {"id": 7}))
    with client() as c:
        schema = Schema('{"type":"string"}', references=[])
        assert c.register_schema("my/subject", schema, normalize_schemas=True) == 7
    req = route.calls.last.request
    assert req.url.params["normalize"] == "true"
    assert req.headers["content-type"] == "application/vnd.schemaregistry.v1+json"
    assert "application/vnd.schemaregistry.v1+json" in req.headers["accept"]
    assert json.loads(req.content) == {"schema": '{"type":"string"}'}


@respx.mock
def test_response_shapes_parsed() -> None:
    respx.get(f"{URL}/schemas/ids/3").mock(return_value=reply(200, {
        "schema": "syntax = \"proto3\";", "schemaType": "PROTOBUF",
        "references": [{"name": "a.proto", "subject": "a", "version": 2}]}))
    respx.get(f"{URL}/subjects/s/versions/latest").mock(return_value=reply(200, {
        "subject": "s", "id": 3, "version": 4, "schema": "\"int\""}))
    respx.get(f"{URL}/config").mock(return_value=reply(200, {"compatibilityLevel": "FULL"}))
    respx.post(url__startswith=f"{URL}/compatibility/subjects/s/versions/latest").mock(
        return_value=reply(200, {"is_compatible": False, "messages": ["m1"]}))
    with client() as c:
        s = c.get_schema(3)
        assert s.schema_type == "PROTOBUF" and s.references[0].version == 2
        latest = c.get_latest_version("s")
        assert (latest.schema_id, latest.version, latest.subject) == (3, 4, "s")
        assert c.get_compatibility() == "FULL"
        assert c.test_compatibility("s", Schema('"int"')) is False
        assert c.test_compatibility_verbose("s", Schema('"int"')).messages == ("m1",)


@pytest.mark.parametrize(
    ("status", "body", "cls", "code"),
    [
        (404, {"error_code": 40401, "message": "Subject 'x' not found."}, SubjectNotFoundError,
         40401),
        (409, {"error_code": 409, "message": "incompatible"}, IncompatibleSchemaError, 409),
        (409, {"error_code": 40901, "message": "incompatible"}, IncompatibleSchemaError, 40901),
        (422, {"error_code": 42201, "message": "Invalid schema"}, InvalidSchemaError, 42201),
        (401, {"error_code": 40101, "message": "Unauthorized"}, SchemaRegistryError, 40101),
        (400, "<html>bad gateway thing</html>", SchemaRegistryError, -1),
    ],
)
def test_error_bodies(status: int, body: Any, cls: type[SchemaRegistryError], code: int) -> None:
    with respx.mock:
        content = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        route = respx.get(f"{URL}/subjects/x/versions").mock(
            return_value=httpx.Response(status, content=content))
        with client() as c, pytest.raises(cls) as info:
            c.get_versions("x")
        assert route.call_count == 1  # 4xx: never retried
    assert (info.value.http_status_code, info.value.error_code) == (status, code)
    assert type(error_from_response(status, body)) is cls


@respx.mock
def test_retries_on_429_and_5xx_then_succeeds() -> None:
    route = respx.get(f"{URL}/subjects").mock(side_effect=[
        reply(429, {"error_code": 429, "message": "slow down"}),
        reply(503, {"error_code": 50003, "message": "forwarding"}),
        reply(200, ["a"]),
    ])
    with client() as c:
        assert c.get_subjects() == ["a"]
    assert route.call_count == 3


@respx.mock
def test_retries_exhausted_raises_last_error() -> None:
    route = respx.get(f"{URL}/subjects").mock(
        return_value=reply(500, {"error_code": 50001, "message": "store"}))
    with client() as c, pytest.raises(SchemaRegistryError) as info:
        c.get_subjects()
    assert route.call_count == 3 and info.value.error_code == 50001


@respx.mock
def test_connection_errors_retried_then_typed() -> None:
    route = respx.get(f"{URL}/subjects").mock(side_effect=httpx.ConnectError("refused"))
    with client() as c, pytest.raises(RegistryConnectionError):
        c.get_subjects()
    assert route.call_count == 3


@respx.mock
def test_basic_auth_from_url_and_user_info() -> None:
    route = respx.get(f"{URL}/subjects").mock(return_value=reply(200, []))
    with SchemaRegistryClient({"url": "http://us%40r:p%3Ass@registry.test:8081"}) as c:
        c.get_subjects()
    expected = "Basic " + base64.b64encode(b"us@r:p:ss").decode()
    assert route.calls.last.request.headers["authorization"] == expected
    with client(**{"basic.auth.user.info": "a:b",
                   "basic.auth.credentials.source": "USER_INFO"}) as c:
        c.get_subjects()
    assert route.calls.last.request.headers["authorization"] == (
        "Basic " + base64.b64encode(b"a:b").decode())


@respx.mock
def test_static_bearer_token() -> None:
    route = respx.get(f"{URL}/subjects").mock(return_value=reply(200, []))
    with client(**{"bearer.auth.credentials.source": "STATIC_TOKEN",
                   "bearer.auth.token": "tok", "bearer.auth.logical.cluster": "lsrc-1",
                   "bearer.auth.identity.pool.id": "pool-9"}) as c:
        c.get_subjects()
    h = route.calls.last.request.headers
    assert (h["authorization"], h["target-sr-cluster"], h["confluent-identity-pool-id"]) == (
        "Bearer tok", "lsrc-1", "pool-9")


@respx.mock
def test_oauth_client_credentials_fetched_once_and_refreshed() -> None:
    tokens = iter(["t1", "t2"])
    token_route = respx.post("https://idp.test/token").mock(side_effect=lambda req: reply(
        200, {"access_token": next(tokens), "expires_in": 3600}))
    route = respx.get(f"{URL}/subjects").mock(return_value=reply(200, []))
    with client(**{"bearer.auth.credentials.source": "OAUTHBEARER",
                   "bearer.auth.client.id": "cid", "bearer.auth.client.secret": "sec",
                   "bearer.auth.scope": "sr", "bearer.auth.issuer.endpoint.url":
                   "https://idp.test/token", "bearer.auth.logical.cluster": "lsrc"}) as c:
        c.get_subjects()
        c.get_subjects()
        assert token_route.call_count == 1
        assert route.calls.last.request.headers["authorization"] == "Bearer t1"
        form = token_route.calls.last.request.content.decode()
        assert "grant_type=client_credentials" in form and "scope=sr" in form
        assert token_route.calls.last.request.headers["authorization"] == (
            "Basic " + base64.b64encode(b"cid:sec").decode())
        c._core._token.refresh_at = 0.0  # as if 80% of the lifetime had passed
        c.get_subjects()
        assert token_route.call_count == 2
        assert route.calls.last.request.headers["authorization"] == "Bearer t2"


@respx.mock
def test_failover_on_connection_error() -> None:
    respx.get("http://down.test/subjects").mock(side_effect=httpx.ConnectError("down"))
    up = respx.get(f"{URL}/subjects").mock(return_value=reply(200, ["x"]))
    with SchemaRegistryClient({"url": f"http://down.test,{URL}", "max.retries": 0}) as c:
        assert c.get_subjects() == ["x"]
    assert up.call_count == 1


def test_async_client_same_behaviour() -> None:
    async def main() -> None:
        with respx.mock:
            route = respx.get(f"{URL}/schemas/ids/1").mock(side_effect=[
                reply(502, {"error_code": 502, "message": "gw"}),
                reply(200, {"schema": "\"int\""}),
            ])
            respx.get(f"{URL}/subjects/nope/versions").mock(
                return_value=reply(404, {"error_code": 40401, "message": "nope"}))
            async with AsyncSchemaRegistryClient(
                    {"url": URL, "retries.wait.ms": 1, "retries.max.wait.ms": 2}) as c:
                assert (await c.get_schema(1)).schema_str == '"int"'
                assert (await c.get_schema(1)).schema_str == '"int"'
                assert route.call_count == 2
                with pytest.raises(SubjectNotFoundError):
                    await c.get_versions("nope")

    asyncio.run(main())
