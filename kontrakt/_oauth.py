"""OAuth 2 token handling shared by the Kafka clients (SASL/OAUTHBEARER) and the Schema
Registry client (``bearer.auth.credentials.source=OAUTHBEARER``), without I/O.

The client-credentials request (RFC 6749 section 4.4) is built by
:func:`client_credentials_request` and its answer read by :func:`parse_token_response`;
the callers only send it (httpx, sync or async). Tokens are refreshed at 80% of their
lifetime, as librdkafka and Confluent's clients do, so that no login or request carries a
token about to expire. :func:`unsecured_jwt` makes librdkafka's development-only unsecured
JWS (RFC 7515 appendix A.5).
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

__all__ = [
    "REFRESH_AT",
    "OAuthToken",
    "TokenCache",
    "client_credentials_request",
    "jwt_claims",
    "parse_token_response",
    "unsecured_jwt",
]

#: fraction of a token's lifetime after which a new one is fetched
REFRESH_AT = 0.8
#: lifetime assumed for a token whose answer and claims say none (Confluent's default)
DEFAULT_LIFETIME = 300.0


@dataclass(frozen=True, slots=True)
class OAuthToken:
    """An access token and when it expires.

    Attributes:
        value: the token (never shown in repr).
        expires_at: expiry in seconds since the epoch.
        lifetime: seconds it was valid for when received.
        principal: the ``sub`` claim when the token is a readable JWT, else None.
    """

    value: str = field(repr=False)
    expires_at: float
    lifetime: float
    principal: str | None = None


@dataclass(slots=True)
class TokenCache:
    """The current token and when to refresh it (``time.monotonic()`` seconds)."""

    token: OAuthToken | None = None
    refresh_at: float = 0.0

    @property
    def value(self) -> str:
        return self.token.value if self.token is not None else ""

    def fresh(self) -> OAuthToken | None:
        """The cached token unless it is due for refresh."""
        if self.token is None or time.monotonic() >= self.refresh_at:
            return None
        return self.token

    def drop(self) -> None:
        """Forget the token (the server refused it): the next use fetches another."""
        self.token = None

    def store(self, token: OAuthToken) -> None:
        self.token = token
        self.refresh_at = time.monotonic() + REFRESH_AT * max(0.0, token.lifetime)


def _q(value: str) -> str:
    return quote(value, safe="")


def client_credentials_request(client_id: str, client_secret: str, scope: str | None = None
                               ) -> tuple[dict[str, str], bytes]:
    """Headers and form body of a client-credentials token request (POST to the token
    endpoint). The client authenticates with HTTP basic (``client_secret_basic``)."""
    form = {"grant_type": "client_credentials"}
    if scope:
        form["scope"] = scope
    basic = base64.b64encode(f"{_q(client_id)}:{_q(client_secret)}".encode()).decode()
    headers = {"Content-Type": "application/x-www-form-urlencoded",
               "Accept": "application/json", "Authorization": f"Basic {basic}"}
    return headers, "&".join(f"{_q(k)}={_q(v)}" for k, v in form.items()).encode()


def jwt_claims(token: str) -> dict[str, Any]:
    """The claims of a JWT, read without checking its signature (only to learn ``exp`` and
    ``sub``: the server validates the token).

    Raises:
        ValueError: not a JWT with a JSON object payload.
    """
    parts = token.split(".")
    if len(parts) != 3:
        raise ValueError("not a JWT (expected three dot-separated parts)")
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"JWT payload is not base64url JSON: {exc}") from None
    if not isinstance(claims, dict):
        raise ValueError("JWT payload is not a JSON object")
    return claims


def parse_token_response(body: bytes, *, now: float | None = None) -> OAuthToken:
    """The token in a token endpoint's JSON answer.

    The lifetime is the shorter of ``expires_in`` and the JWT's ``exp`` claim (either when
    only one is there), else :data:`DEFAULT_LIFETIME`.

    Raises:
        ValueError: the body is not JSON with a string ``access_token`` (the message never
            contains the token).
    """
    now = time.time() if now is None else now
    data = json.loads(body)
    if not isinstance(data, Mapping) or not isinstance(data.get("access_token"), str):
        raise ValueError("token response has no access_token")
    value = data["access_token"]
    try:
        claims: dict[str, Any] = jwt_claims(value)
    except ValueError:
        claims = {}
    lifetimes = []
    if data.get("expires_in") is not None:
        lifetimes.append(float(data["expires_in"]))
    if isinstance(claims.get("exp"), (int, float)):
        # Identity providers round exp down to a second: the earlier of the two holds.
        lifetimes.append(float(claims["exp"]) - now)
    lifetime = min(lifetimes) if lifetimes else DEFAULT_LIFETIME
    sub = claims.get("sub")
    return OAuthToken(value, now + lifetime, lifetime, sub if isinstance(sub, str) else None)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsecured_jwt(principal: str, *, principal_claim: str = "sub", scope: list[str] | None = None,
                  scope_claim: str = "scope", life_seconds: float = 3600,
                  now: float | None = None) -> OAuthToken:
    """An unsecured JWS (``alg: none``) for development brokers that accept them (Kafka's
    ``OAuthBearerUnsecuredValidatorCallbackHandler``); never for production."""
    now = time.time() if now is None else now
    claims: dict[str, Any] = {principal_claim: principal, "iat": int(now),
                              "exp": int(now + life_seconds)}
    if scope:
        claims[scope_claim] = scope
    value = ".".join([_b64url(b'{"alg":"none"}'),
                      _b64url(json.dumps(claims, separators=(",", ":")).encode()), ""])
    return OAuthToken(value, now + life_seconds, float(life_seconds), principal)
