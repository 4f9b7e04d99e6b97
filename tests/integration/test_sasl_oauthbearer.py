"""SASL/OAUTHBEARER end to end: OIDC client credentials, oauth_cb, the unsecured JWT.

No test broker speaks OAUTHBEARER (TEST-BROKERS.md), so the broker's side is the test's
``_sasl_proxy.SaslProxy`` in front of Tansu, with a validator written here that checks each
token as a Kafka broker's JWT validator does (signature against the test's public key with
``joserfc``, an independent JOSE implementation; issuer, audience, expiry). The token
endpoint is an HTTP server on loopback, also written here, that issues RS256 JWTs signed
with an RSA key this test makes with ``cryptography``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
import traceback
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import RSAKey

from kontrakt import AsyncKafkaClient, AsyncProducer, Consumer, Producer, TopicPartition
from kontrakt.clients._net.security import SaslAuthenticationError
from kontrakt.errors import ConfigError
from kontrakt.protocol.messages import MetadataRequest
from kontrakt.testing import TansuBroker, free_port
from tests.integration._sasl_proxy import SaslProxy

pytestmark = pytest.mark.integration

CLIENT_ID = "kafka-app"
CLIENT_SECRET = "S3CRET-oidc-5a1f"
ISSUER = "http://127.0.0.1/test-idp"
AUDIENCE = "kafka"


def _rsa_key() -> RSAKey:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return RSAKey.import_key(pem)


class TokenEndpoint:
    """An OAuth 2 token endpoint (client credentials, client_secret_basic) on loopback.

    Attributes:
        lifetime: seconds each issued token is valid for (``exp`` and ``expires_in``).
        issued: the ``jti`` of every token issued.
        requests: the form of every token request.
    """

    def __init__(self, key: RSAKey) -> None:
        self.key = key
        self.lifetime = 3600.0
        self.issued: list[str] = []
        self.requests: list[dict[str, list[str]]] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                form = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
                endpoint.requests.append(form)
                scheme, _, creds = (self.headers.get("Authorization") or "").partition(" ")
                cid, _, secret = base64.b64decode(creds).decode().partition(":")
                if scheme != "Basic" or (unquote(cid), unquote(secret)) != (CLIENT_ID,
                                                                           CLIENT_SECRET):
                    return self._answer(401, {"error": "invalid_client"})
                if form.get("grant_type") != ["client_credentials"]:
                    return self._answer(400, {"error": "unsupported_grant_type"})
                now = time.time()
                jti = f"t{len(endpoint.issued) + 1}"
                endpoint.issued.append(jti)
                claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": unquote(cid), "jti": jti,
                          "scope": form.get("scope", [""])[0], "iat": int(now),
                          "exp": int(now + endpoint.lifetime)}
                token = jwt.encode({"alg": "RS256", "kid": "test"}, claims, endpoint.key)
                self._answer(200, {"access_token": token, "token_type": "Bearer",
                                   "expires_in": endpoint.lifetime})

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/token"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


class Validator:
    """The broker's token check: RS256 signature by the test's key, issuer, audience,
    expiry; unsecured (alg none) tokens only when ``allow_unsecured``."""

    def __init__(self, key: RSAKey) -> None:
        self.key = key
        self.allow_unsecured = False
        self.seen: list[dict[str, Any]] = []

    def __call__(self, token: str, extensions: dict[str, str]) -> tuple[str, int]:
        header = json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
        if header.get("alg") == "none":
            if not self.allow_unsecured:
                raise ValueError("unsecured tokens are not accepted")
            claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
        else:
            try:
                decoded = jwt.decode(token, self.key, algorithms=["RS256"])
                jwt.JWTClaimsRegistry(iss={"essential": True, "value": ISSUER},
                                      aud={"essential": True, "value": AUDIENCE},
                                      exp={"essential": True}).validate(decoded.claims)
            except (JoseError, ValueError) as exc:
                raise ValueError(f"invalid token: {exc}") from None
            claims = decoded.claims
        if claims["exp"] <= time.time():
            raise ValueError("expired token")
        self.seen.append(claims)
        return str(claims["sub"]), int(claims["exp"] * 1000)


@pytest.fixture(scope="module")
def key() -> RSAKey:
    return _rsa_key()


@pytest.fixture
def idp(key: RSAKey) -> Iterator[TokenEndpoint]:
    endpoint = TokenEndpoint(key)
    try:
        yield endpoint
    finally:
        endpoint.close()


@pytest.fixture
def broker(key: RSAKey) -> Iterator[tuple[SaslProxy, Validator]]:
    port = free_port("127.0.0.1")
    validator = Validator(key)
    with TansuBroker(advertised_port=port) as tansu:
        tansu.create_topic("oauth-t", 1)
        proxy = SaslProxy(port, ("127.0.0.1", tansu.port), oauth=validator)
        try:
            yield proxy, validator
        finally:
            proxy.close()


def _oidc(proxy: SaslProxy, idp: TokenEndpoint, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": proxy.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.token.endpoint.url": idp.url,
            "sasl.oauthbearer.client.id": CLIENT_ID,
            "sasl.oauthbearer.client.secret": CLIENT_SECRET,
            "sasl.oauthbearer.scope": "kafka.write", **extra}


def test_oidc_client_credentials_records_flow(broker: tuple[SaslProxy, Validator],
                                              idp: TokenEndpoint) -> None:
    proxy, validator = broker
    conf = _oidc(proxy, idp, **{
        "sasl.oauthbearer.extensions": "logicalCluster=lkc-1,identityPoolId=pool-2"})
    with Producer(conf) as producer:
        md = producer.send_and_wait("oauth-t", b"over-oidc")
    with Consumer({**conf, "group.id": None}) as consumer:
        tp = TopicPartition("oauth-t", 0)
        consumer.assign([tp])
        consumer.seek(tp, md.offset)
        deadline, record = time.monotonic() + 15, None
        while record is None and time.monotonic() < deadline:
            record = consumer.poll(1.0)
    assert record is not None and record.value == b"over-oidc"
    # Bootstrap and broker connections of each client logged in with the client's token,
    # fetched once per client.
    assert len(proxy.logins) >= 4
    assert {(x.mechanism, x.principal) for x in proxy.logins} == {("OAUTHBEARER", CLIENT_ID)}
    assert all(x.extensions == {"logicalCluster": "lkc-1", "identityPoolId": "pool-2"}
               for x in proxy.logins)
    assert len(idp.issued) == 2
    assert all(r["scope"] == ["kafka.write"] for r in idp.requests)
    assert {c["jti"] for c in validator.seen} == set(idp.issued)


def test_token_is_refreshed_at_80_percent_of_its_lifetime(
        broker: tuple[SaslProxy, Validator], idp: TokenEndpoint) -> None:
    """A token of 2 s: a connection made 1.7 s later (past 80%, before expiry) logs in
    with a new one."""
    proxy, validator = broker
    idp.lifetime = 2.0

    async def main() -> None:
        async with AsyncKafkaClient(_oidc(proxy, idp)) as client:
            meta = await client.request(MetadataRequest(topics=None), node=-1)
            assert len(idp.issued) == 1
            first = time.monotonic()
            await client.request(MetadataRequest(topics=[]), node=-1)  # same connection
            assert len(idp.issued) == 1
            await asyncio.sleep(max(0.0, first + 1.7 - time.monotonic()))
            await client.request(MetadataRequest(topics=[]), node=meta.brokers[0].node_id)
            assert len(idp.issued) == 2

    asyncio.run(main())
    # (The bootstrap connection also re-authenticates before its session, bounded by the
    # token's expiry, ends.)
    seen = [c["jti"] for c in validator.seen]
    assert set(seen) == {"t1", "t2"} and seen == sorted(seen)


def test_wrong_client_secret_fails_at_once(broker: tuple[SaslProxy, Validator],
                                           idp: TokenEndpoint) -> None:
    proxy, _ = broker
    conf = {**_oidc(proxy, idp), "sasl.oauthbearer.client.secret": "S3CRET-wrong"}
    start = time.monotonic()
    with pytest.raises(SaslAuthenticationError) as info, Producer(conf) as producer:
        producer.send_and_wait("oauth-t", b"x")
    assert time.monotonic() - start < 5.0
    assert len(idp.requests) == 1  # not retried
    text = "".join(traceback.format_exception(info.value))
    assert f"{idp.url} refused client {CLIENT_ID!r}: HTTP 401 (invalid_client)" in str(info.value)
    assert "S3CRET" not in text and info.value.mechanism == "OAUTHBEARER"


def test_oauth_cb_sync_and_async(broker: tuple[SaslProxy, Validator], key: RSAKey) -> None:
    proxy, _ = broker
    calls: list[str] = []

    def make(config_str: str) -> tuple[str, float, str, dict[str, str]]:
        calls.append(config_str)
        exp = time.time() + 600
        token = jwt.encode({"alg": "RS256"}, {"iss": ISSUER, "aud": AUDIENCE, "sub": "cb-user",
                                              "exp": int(exp)}, key)
        return token, exp, "cb-user", {"traceId": "abc"}

    async def make_async(config_str: str) -> tuple[str, float]:
        token, exp, _, _ = make(config_str)
        return token, exp

    for cb in (make, make_async):
        conf = {"bootstrap.servers": proxy.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "OAUTHBEARER", "oauth_cb": cb,
                "sasl.oauthbearer.config": "audience=kafka"}
        with Producer(conf) as producer:
            producer.send_and_wait("oauth-t", b"cb")
    assert calls == ["audience=kafka", "audience=kafka"]
    assert {x.principal for x in proxy.logins} == {"cb-user"}
    assert {"traceId": "abc"} in [x.extensions for x in proxy.logins]


def test_token_the_broker_refuses_fails_at_once(broker: tuple[SaslProxy, Validator]) -> None:
    """A token signed by another key: the broker's error challenge, the client's 0x01, then
    SASL_AUTHENTICATION_FAILED, in one login."""
    proxy, _ = broker
    other = _rsa_key()

    def forged(_: str) -> tuple[str, float]:
        exp = time.time() + 600
        return jwt.encode({"alg": "RS256"}, {"iss": ISSUER, "aud": AUDIENCE, "sub": "eve",
                                             "exp": int(exp)}, other), exp

    conf = {"bootstrap.servers": proxy.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "oauth_cb": forged}
    start = time.monotonic()
    with pytest.raises(SaslAuthenticationError, match="server status invalid_token"), \
            Producer(conf) as producer:
        producer.send_and_wait("oauth-t", b"x")
    assert time.monotonic() - start < 5.0
    assert len(proxy.refusals) == 1 and not proxy.logins


def test_unsecured_jwt_for_development(broker: tuple[SaslProxy, Validator]) -> None:
    proxy, validator = broker
    conf = {"bootstrap.servers": proxy.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER"}
    with pytest.raises(ConfigError, match=r"enable\.sasl\.oauthbearer\.unsecure\.jwt"):
        Producer(conf)
    validator.allow_unsecured = True
    conf.update({"enable.sasl.oauthbearer.unsecure.jwt": True, "sasl.oauthbearer.config":
                 "principal=admin scope=read,write lifeSeconds=120 extension_traceId=7"})
    with Producer(conf) as producer:
        producer.send_and_wait("oauth-t", b"dev")
    claims = validator.seen[-1]
    assert claims["sub"] == "admin" and claims["scope"] == ["read", "write"]
    assert 110 <= claims["exp"] - claims["iat"] <= 120
    assert proxy.logins[-1].extensions == {"traceId": "7"}


def test_tokens_refreshed_while_connected(broker: tuple[SaslProxy, Validator],
                                          idp: TokenEndpoint) -> None:
    """Tokens of 3 s; the broker ends each session when its token expires (as Kafka does
    for OAUTHBEARER with connections.max.reauth.ms): over 6 s of producing, the producer
    re-authenticates in band with new tokens on the connections it has; none is opened
    again or closed for a lapsed session, and every record is acknowledged in order."""
    proxy, validator = broker
    idp.lifetime = 3.0

    async def main() -> list[int]:
        producer = AsyncProducer(_oidc(proxy, idp), linger_ms=5)
        try:
            await producer.start()
            offsets = [(await producer.send_and_wait("oauth-t", b"warm-up")).offset]
            accepted = proxy.accepted
            deadline = time.monotonic() + 6.0
            while time.monotonic() < deadline:
                futures = [await producer.send("oauth-t", b"r") for _ in range(10)]
                offsets += [m.offset for m in await asyncio.gather(*futures)]
            assert proxy.accepted == accepted, "a connection was opened again"
        finally:
            await producer.close()
        return offsets

    offsets = asyncio.run(main())
    assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))
    assert proxy.expired == 0
    assert len(idp.issued) >= 2
    reauths = [x for x in proxy.logins if x.reauthentication]
    assert reauths, proxy.logins
    # Logins after the first token's 80% carried the new tokens.
    assert len({c["jti"] for c in validator.seen}) == len(idp.issued)
