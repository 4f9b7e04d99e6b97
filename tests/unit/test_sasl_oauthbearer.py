"""OAUTHBEARER message shapes and option checks (the exchange itself is tested end to end in
tests/integration/test_sasl_oauthbearer.py)."""

from __future__ import annotations

import json
import time

import pytest

from kontrakt._oauth import jwt_claims, parse_token_response, unsecured_jwt
from kontrakt.clients import AsyncKafkaClient
from kontrakt.clients._net.oauth import client_initial_response, parse_extensions
from kontrakt.errors import ConfigError

SASL = {"bootstrap.servers": "127.0.0.1:9", "security.protocol": "SASL_SSL",
        "sasl.mechanism": "OAUTHBEARER"}


def test_client_initial_response_is_rfc7628() -> None:
    # RFC 7628 section 4.1's shape (without host/port, as Kafka's client sends it), with
    # KIP-342 extensions as further key=value pairs.
    assert client_initial_response("vF9dft4qmT", {}) == b"n,,\x01auth=Bearer vF9dft4qmT\x01\x01"
    assert client_initial_response("t", {"b": "2", "a": "1"}) == (
        b"n,,\x01auth=Bearer t\x01a=1\x01b=2\x01\x01")


def test_extensions_are_checked() -> None:
    assert parse_extensions("logicalCluster=lkc-1, identityPoolId=pool-2", where="x") == {
        "logicalCluster": "lkc-1", "identityPoolId": "pool-2"}
    for bad in ("auth=x", "a1=b", "novalue", "a=\x00"):
        with pytest.raises(ConfigError):
            parse_extensions(bad, where="sasl.oauthbearer.extensions")


def test_token_lifetime_from_expires_in_or_exp_claim() -> None:
    now = 1_000_000.0
    t = parse_token_response(json.dumps({"access_token": "abc", "expires_in": 60}).encode(),
                             now=now)
    assert (t.lifetime, t.expires_at, t.principal) == (60.0, now + 60, None)
    jws = unsecured_jwt("alice", life_seconds=90, now=now)
    assert jwt_claims(jws.value) == {"sub": "alice", "iat": 1_000_000, "exp": 1_000_090}
    t = parse_token_response(json.dumps({"access_token": jws.value}).encode(), now=now + 30)
    assert (t.lifetime, t.principal) == (60.0, "alice")
    # An exp rounded down ends the token before expires_in says: the earlier one holds.
    t = parse_token_response(json.dumps({"access_token": jws.value, "expires_in": 90}).encode(),
                             now=now + 0.5)
    assert t.lifetime == 89.5
    with pytest.raises(ValueError, match="access_token"):
        parse_token_response(b'{"token": "x"}')
    assert "abc" not in repr(parse_token_response(b'{"access_token": "abc"}'))


@pytest.mark.parametrize(("options", "message"), [
    ({}, "needs a token source"),
    ({"sasl.oauthbearer.method": "oidc"}, "needs sasl.oauthbearer.token.endpoint.url, "
     "sasl.oauthbearer.client.id, sasl.oauthbearer.client.secret"),
    ({"sasl.oauthbearer.method": "oidc", "oauth_cb": lambda s: ("t", time.time())},
     "not both"),
    ({"oauth_cb": "not callable"}, "must be callable"),
    ({"enable.sasl.oauthbearer.unsecure.jwt": True}, "needs principal"),
    ({"enable.sasl.oauthbearer.unsecure.jwt": True,
      "sasl.oauthbearer.config": "principal=a lifetime=3"}, "unknown setting 'lifetime'"),
    ({"oauth_cb": lambda s: ("t", 1), "sasl.oauthbearer.extensions": "auth=x"}, "not 'auth'"),
])
def test_misconfigurations_are_named(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        AsyncKafkaClient({**SASL, **options})
