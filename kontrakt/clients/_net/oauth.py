"""SASL/OAUTHBEARER (RFC 7628, KIP-255) with SASL extensions (KIP-342), and where its
tokens come from: an ``oauth_cb`` callback (as confluent-kafka's), the OIDC
client-credentials flow (``sasl.oauthbearer.method=oidc``, librdkafka's options), or
librdkafka's unsecured JWT for development brokers.

Tokens are cached per client and fetched again once 80% of their lifetime has passed
(:mod:`kontrakt._oauth`, shared with the Schema Registry client), so every login and
re-authentication (KIP-368) carries a token with time left.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import httpx

from kontrakt._oauth import (
    OAuthToken,
    TokenCache,
    client_credentials_request,
    jwt_claims,
    parse_token_response,
    unsecured_jwt,
)
from kontrakt.clients._net.security import SaslAuthenticationError, _authenticate, _handshake
from kontrakt.errors import ConfigError, KafkaConnectionError, KontraktError

if TYPE_CHECKING:
    from kontrakt.clients._net.connection import BrokerConnection

__all__ = ["OAuthBearerAuthenticator", "build_oauthbearer", "client_initial_response",
           "parse_extensions"]

_EXTENSION_KEY = re.compile(r"^[A-Za-z]+$")
_EXTENSION_VALUE = re.compile(r"^[\x21-\x7E \t\r\n]*$")

#: fetches a new token and the extensions its source adds (the cache decides when)
TokenFetch = Callable[[], Awaitable[tuple[OAuthToken, dict[str, str]]]]

def parse_extensions(text: str | None, *, where: str) -> dict[str, str]:
    """``key=value,key2=value2`` (librdkafka's ``sasl.oauthbearer.extensions``) as a dict,
    checked as KIP-342 requires (keys of letters, not ``auth``; printable values).

    Raises:
        ConfigError: a malformed pair, key or value.
    """
    out: dict[str, str] = {}
    for pair in (text or "").split(","):
        if not pair.strip():
            continue
        key, sep, value = pair.strip().partition("=")
        if not sep:
            raise ConfigError(f"{where}: {pair.strip()!r} is not key=value")
        out[key] = value
    check_extensions(out, where=where)
    return out


def check_extensions(extensions: Mapping[str, str], *, where: str) -> None:
    """Raise ConfigError unless every SASL extension is valid per KIP-342 / RFC 7628."""
    for key, value in extensions.items():
        if not isinstance(key, str) or not _EXTENSION_KEY.match(key) or key == "auth":
            raise ConfigError(f"{where}: SASL extension name {key!r} must be letters only "
                              "and not 'auth'")
        if not isinstance(value, str) or not _EXTENSION_VALUE.match(value):
            raise ConfigError(f"{where}: the value of SASL extension {key!r} must be "
                              "printable ASCII")


def client_initial_response(token: str, extensions: Mapping[str, str]) -> bytes:
    """RFC 7628 section 3.1: ``n,,`` then ``auth=Bearer <token>`` and the extensions as
    key=value pairs, each ended by 0x01, and a final 0x01."""
    pairs = [f"auth=Bearer {token}", *(f"{k}={v}" for k, v in sorted(extensions.items()))]
    return ("n,,\x01" + "".join(p + "\x01" for p in pairs) + "\x01").encode()


class OAuthBearerAuthenticator:
    """SASL/OAUTHBEARER: one client initial response carrying the bearer token.

    Args:
        fetch: coroutine function returning a new (token, extensions from the source).
        extensions: SASL extensions for every login (``sasl.oauthbearer.extensions``).
        source: what the tokens come from, for messages (never a secret).
    """

    mechanism = "OAUTHBEARER"

    def __init__(self, fetch: TokenFetch, extensions: Mapping[str, str],
                 source: str) -> None:
        self._fetch = fetch
        self.extensions = dict(extensions)
        self.source = source
        self._cache = TokenCache()
        self._cache_extensions: dict[str, str] = {}
        self._fetching: asyncio.Future[OAuthToken] | None = None
        #: tokens fetched so far (for tests and diagnostics)
        self.fetches = 0

    def __repr__(self) -> str:
        return f"OAuthBearerAuthenticator({self.source})"

    async def token(self) -> OAuthToken:
        """The cached token, or a new one once 80% of its lifetime has passed; concurrent
        callers share one fetch.

        Raises:
            SaslAuthenticationError: the source refused (e.g. the token endpoint rejects
                the client credentials) or returned something that is not a token.
            KafkaConnectionError: the token endpoint could not be reached.
        """
        fresh = self._cache.fresh()
        if fresh is not None:
            return fresh
        fetching = self._fetching
        if fetching is None or fetching.done():
            fetching = self._fetching = asyncio.ensure_future(self._refresh())
        token: OAuthToken = await asyncio.shield(fetching)
        return token

    def _forget(self, token: OAuthToken) -> None:
        # A refused token is not offered again (revoked, or expired early): the next login
        # fetches a new one.
        if self._cache.token is token:
            self._cache.drop()

    async def _refresh(self) -> OAuthToken:
        token, extensions = await self._fetch()
        self.fetches += 1
        self._cache.store(token)
        self._cache_extensions = extensions
        return token

    async def authenticate(self, conn: BrokerConnection) -> int:
        """Log in on ``conn`` with the current token; returns the session lifetime in ms
        the broker set (0: none).

        Raises:
            SaslAuthenticationError: the broker refused the mechanism or the token.
        """
        token = await self.token()
        extensions = {**self._cache_extensions, **self.extensions}
        await _handshake(conn, self.mechanism, None)
        try:
            reply, lifetime = await _authenticate(
                conn, self.mechanism, None, client_initial_response(token.value, extensions))
        except SaslAuthenticationError:
            self._forget(token)
            raise
        if reply:
            self._forget(token)
            # RFC 7628 3.2.2: an error challenge; the client answers 0x01 and the server
            # then fails the exchange (Kafka: SASL_AUTHENTICATION_FAILED).
            status = _error_status(reply)
            try:
                await _authenticate(conn, self.mechanism, None, b"\x01")
            except SaslAuthenticationError as exc:
                raise SaslAuthenticationError(
                    f"{exc} (token from {self.source}; server status {status})",
                    broker=conn.address, mechanism=self.mechanism) from None
            raise SaslAuthenticationError(
                f"SASL OAUTHBEARER token refused (server status {status}; token from "
                f"{self.source})", broker=conn.address, mechanism=self.mechanism)
        return lifetime


def _error_status(reply: bytes) -> str:
    try:
        data = json.loads(reply)
        return str(data.get("status", "unknown")) if isinstance(data, dict) else "unknown"
    except ValueError:
        return "unreadable"


def build_oauthbearer(cfg: Mapping[str, Any]) -> OAuthBearerAuthenticator:
    """The OAUTHBEARER authenticator the ``sasl.oauthbearer.*`` / ``oauth_cb`` options
    configure.

    Raises:
        ConfigError: options missing or contradicting each other.
    """
    extensions = parse_extensions(cfg.get("sasl.oauthbearer.extensions"),
                                  where="sasl.oauthbearer.extensions")
    callback = cfg.get("oauth_cb")
    if cfg.get("sasl.oauthbearer.method") == "oidc":
        if callback is not None:
            raise ConfigError("set either oauth_cb or sasl.oauthbearer.method=oidc, not both")
        missing = [k for k in ("sasl.oauthbearer.token.endpoint.url",
                               "sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret")
                   if not cfg.get(k)]
        if missing:
            raise ConfigError(f"sasl.oauthbearer.method=oidc needs {', '.join(missing)}")
        url = cfg["sasl.oauthbearer.token.endpoint.url"]
        return OAuthBearerAuthenticator(
            _oidc_fetch(url, cfg["sasl.oauthbearer.client.id"],
                        cfg["sasl.oauthbearer.client.secret"], cfg.get("sasl.oauthbearer.scope"),
                        timeout=cfg["socket.connection.setup.timeout.ms"] / 1000),
            extensions, f"token endpoint {url} as client {cfg['sasl.oauthbearer.client.id']!r}")
    config_str = cfg.get("sasl.oauthbearer.config") or ""
    if callback is not None:
        if not callable(callback):
            raise ConfigError("oauth_cb must be callable")
        name = getattr(callback, "__qualname__", type(callback).__name__)
        return OAuthBearerAuthenticator(_callback_fetch(callback, config_str), extensions,
                                        f"oauth_cb {name}")
    if not cfg.get("enable.sasl.oauthbearer.unsecure.jwt"):
        raise ConfigError(
            "sasl.mechanism=OAUTHBEARER needs a token source: oauth_cb, or "
            "sasl.oauthbearer.method=oidc with sasl.oauthbearer.token.endpoint.url, "
            ".client.id and .client.secret (or, for development brokers only, "
            "enable.sasl.oauthbearer.unsecure.jwt=true with sasl.oauthbearer.config)")
    make, unsecured_ext = _unsecured(config_str)
    check_extensions(unsecured_ext, where="sasl.oauthbearer.config")

    async def fetch() -> tuple[OAuthToken, dict[str, str]]:
        return make(), unsecured_ext

    return OAuthBearerAuthenticator(fetch, extensions, "the unsecured JWT")


def _oidc_fetch(url: str, client_id: str, secret: str, scope: str | None, *,
                timeout: float) -> TokenFetch:
    async def fetch() -> tuple[OAuthToken, dict[str, str]]:
        headers, body = client_credentials_request(client_id, secret, scope)
        try:
            async with httpx.AsyncClient(timeout=timeout) as http:
                resp = await http.post(url, headers=headers, content=body)
        except httpx.HTTPError as exc:
            raise KafkaConnectionError(
                f"OAuth token endpoint {url} unreachable: {type(exc).__name__}: {exc}") from None
        if resp.status_code in (400, 401, 403):
            # invalid_client / unauthorized_client: the same credentials fail every time.
            raise SaslAuthenticationError(
                f"OAuth token endpoint {url} refused client {client_id!r}: HTTP "
                f"{resp.status_code} {_oauth_error(resp.content)}", mechanism="OAUTHBEARER")
        if resp.status_code != 200:
            raise KafkaConnectionError(
                f"OAuth token endpoint {url} answered HTTP {resp.status_code}")
        try:
            return parse_token_response(resp.content), {}
        except ValueError as exc:
            raise SaslAuthenticationError(
                f"OAuth token endpoint {url} sent no usable token: {exc}",
                mechanism="OAUTHBEARER") from None

    return fetch


def _oauth_error(body: bytes) -> str:
    """The ``error`` of an OAuth error answer (RFC 6749 5.2), never the rest of the body."""
    try:
        data = json.loads(body)
    except ValueError:
        return "(no OAuth error in the answer)"
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        return f"({data['error']})"
    return "(no OAuth error in the answer)"


def _callback_fetch(callback: Callable[..., Any], config_str: str) -> TokenFetch:
    async def fetch() -> tuple[OAuthToken, dict[str, str]]:
        try:
            if inspect.iscoroutinefunction(callback):
                result = await callback(config_str)
            else:
                # A plain callback may block (an HTTP call): keep it off the I/O loop.
                result = await asyncio.get_running_loop().run_in_executor(
                    None, callback, config_str)
                if inspect.isawaitable(result):
                    result = await result
        except KontraktError:
            raise
        except Exception as exc:
            # Perhaps the identity provider is down: retried like an unreachable broker.
            raise KafkaConnectionError(
                f"oauth_cb raised {type(exc).__name__}: {exc}") from exc
        return _token_from_callback(result)

    return fetch


def _token_from_callback(result: Any) -> tuple[OAuthToken, dict[str, str]]:
    if not isinstance(result, tuple) or len(result) not in (2, 4):
        raise ConfigError("oauth_cb must return (token, expiry epoch seconds) or "
                          "(token, expiry, principal, extensions)")
    value, expiry = result[0], result[1]
    if not isinstance(value, str) or not value:
        raise ConfigError("oauth_cb returned a token that is not a non-empty string")
    if isinstance(expiry, bool) or not isinstance(expiry, (int, float)):
        raise ConfigError("oauth_cb returned an expiry that is not a number of epoch seconds")
    principal = result[2] if len(result) == 4 else None
    extensions = dict(result[3] or {}) if len(result) == 4 else {}
    check_extensions(extensions, where="oauth_cb")
    now = time.time()
    if principal is None:
        try:
            sub = jwt_claims(value).get("sub")
            principal = sub if isinstance(sub, str) else None
        except ValueError:
            principal = None
    return OAuthToken(value, float(expiry), float(expiry) - now, principal), extensions


def _unsecured(config_str: str) -> tuple[Callable[[], OAuthToken], dict[str, str]]:
    """librdkafka's unsecured-JWT settings: space-separated name=value pairs."""
    settings: dict[str, str] = {}
    extensions: dict[str, str] = {}
    for item in config_str.split():
        name, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"sasl.oauthbearer.config: {item!r} is not name=value")
        if name.startswith("extension_"):
            extensions[name[len("extension_"):]] = value
        elif name in ("principal", "principalClaimName", "scope", "scopeClaimName",
                      "lifeSeconds"):
            settings[name] = value
        else:
            raise ConfigError(f"sasl.oauthbearer.config: unknown setting {name!r} (known: "
                              "principal, principalClaimName, scope, scopeClaimName, "
                              "lifeSeconds, extension_NAME)")
    if not settings.get("principal"):
        raise ConfigError("sasl.oauthbearer.config needs principal=... for the unsecured JWT")
    try:
        life = float(settings.get("lifeSeconds", "3600"))
    except ValueError:
        raise ConfigError("sasl.oauthbearer.config: lifeSeconds must be a number") from None
    scope = [s for s in settings.get("scope", "").split(",") if s]

    def make() -> OAuthToken:
        return unsecured_jwt(settings["principal"],
                             principal_claim=settings.get("principalClaimName", "sub"),
                             scope=scope, scope_claim=settings.get("scopeClaimName", "scope"),
                             life_seconds=life)

    return make, extensions
