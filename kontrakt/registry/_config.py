"""Configuration of the registry clients, with confluent-kafka-python's property names."""

from __future__ import annotations

import difflib
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from kontrakt.clients._net.security import load_client_certificate
from kontrakt.errors import ConfigError

__all__ = ["RegistryClientConfig", "parse_config"]

_KEYS = (
    "url", "basic.auth.user.info", "basic.auth.credentials.source", "sasl.username",
    "sasl.password", "bearer.auth.credentials.source", "bearer.auth.token",
    "bearer.auth.logical.cluster", "bearer.auth.identity.pool.id", "bearer.auth.client.id",
    "bearer.auth.client.secret", "bearer.auth.scope", "bearer.auth.issuer.endpoint.url",
    "ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
    "proxy", "timeout", "connect.timeout.ms", "total.timeout.ms", "max.retries",
    "retries.wait.ms", "retries.max.wait.ms",
    "cache.capacity", "cache.latest.ttl.sec", "cache.negative.ttl.sec",
)


@dataclass(frozen=True, slots=True)
class RegistryClientConfig:
    """Validated client settings (secrets are kept out of ``repr``)."""

    urls: tuple[str, ...]
    basic_auth: tuple[str, str] | None = field(default=None, repr=False)
    bearer_source: str | None = None
    bearer_token: str | None = field(default=None, repr=False)
    logical_cluster: str | None = None
    identity_pool: str | None = None
    oauth_client_id: str | None = None
    oauth_client_secret: str | None = field(default=None, repr=False)
    oauth_scope: str | None = None
    oauth_endpoint: str | None = None
    verify: ssl.SSLContext | bool = True
    proxy: str | None = None
    #: seconds to wait for each read or write of an attempt (``timeout``)
    timeout: float = 30.0
    #: seconds to open a connection (TCP and TLS), per attempt (``connect.timeout.ms``)
    connect_timeout: float = 10.0
    #: seconds one REST call may take in all: attempts, backoff sleeps, fail-over
    #: (``total.timeout.ms``)
    total_timeout: float = 30.0
    max_retries: int = 3
    retries_wait_ms: int = 1000
    retries_max_wait_ms: int = 20000
    cache_capacity: int = 1000
    cache_latest_ttl_sec: float | None = None
    cache_negative_ttl_sec: float = 1.0


def _number(conf: dict[str, Any], key: str, default: float | None, minimum: float = 0
            ) -> float | None:
    raw = conf.get(key)
    if raw is None:
        return default
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        raise ConfigError(f"{key} must be a number, not {type(raw).__name__}")
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{key} must be a number, got {raw!r}") from None
    if value < minimum:
        raise ConfigError(f"{key} must be >= {minimum}, got {raw!r}")
    return value


def _ssl_context(conf: dict[str, Any]) -> ssl.SSLContext | bool:
    ca = conf.get("ssl.ca.location")
    cert = conf.get("ssl.certificate.location")
    key = conf.get("ssl.key.location")
    password = conf.get("ssl.key.password")
    if ca is None and cert is None and key is None:
        return True
    if key is not None and cert is None:
        raise ConfigError("ssl.certificate.location is required with ssl.key.location")
    try:
        ctx = ssl.create_default_context(cafile=ca) if ca else ssl.create_default_context()
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load the TLS CA bundle ssl.ca.location={ca!r}: "
                          f"{exc.strerror or exc}") from None
    if cert is not None:
        load_client_certificate(ctx, str(cert), None if key is None else str(key),
                                None if password is None else str(password))
    return ctx


_USERINFO = re.compile(r"^((?:[a-zA-Z][a-zA-Z0-9+.-]*:)?//)?[^/?#]*@")


def _redacted(url: str) -> str:
    """``url`` without the credentials it may carry (``https://user:pass@host``)."""
    return _USERINFO.sub(lambda m: (m.group(1) or "") + "***@", url, count=1)


def parse_config(config: Mapping[str, Any] | None, options: Mapping[str, Any]
                 ) -> RegistryClientConfig:
    """Validate a client configuration.

    Args:
        config: confluent-style properties (``"url"``, ``"basic.auth.user.info"``, ...).
        options: the same as snake_case keywords (``basic_auth_user_info=``); they win.

    Returns:
        The validated settings.

    Raises:
        ConfigError: unknown key (with close matches), missing or malformed ``url``, bad
            numbers, conflicting credentials or unreadable TLS files.
    """
    conf: dict[str, Any] = dict(config or {})
    for name, value in options.items():
        conf[name.replace("_", ".")] = value
    for key in conf:
        if key not in _KEYS:
            near = difflib.get_close_matches(key, _KEYS, n=3)
            hint = f"; did you mean {', '.join(near)}?" if near else ""
            raise ConfigError(f"unknown Schema Registry client property {key!r}{hint}")
    raw_url = conf.get("url")
    if not isinstance(raw_url, str) or not raw_url.strip():
        raise ConfigError("url is required: one or more comma-separated registry URLs")
    urls: list[str] = []
    userinfo: tuple[str, str] | None = None
    for part in raw_url.split(","):
        part = part.strip().rstrip("/")
        split = urlsplit(part)
        if split.scheme not in ("http", "https") or not split.hostname:
            raise ConfigError(f"invalid registry url {_redacted(part)!r}: "
                              "expected http(s)://host[:port]")
        try:
            port = split.port
        except ValueError:  # out of range, or not a number
            port = -1
        if port is not None and not 0 < port < 65536:
            raise ConfigError(f"invalid registry url {_redacted(part)!r}: the port must be a "
                              "number in 1..65535")
        if split.username is not None and userinfo is None:
            userinfo = (unquote(split.username), unquote(split.password or ""))
        netloc = split.hostname + (f":{port}" if port else "")
        urls.append(urlunsplit((split.scheme, netloc, split.path, "", "")))
    source = str(conf.get("basic.auth.credentials.source") or "").upper() or None
    basic: tuple[str, str] | None = None
    user_info = conf.get("basic.auth.user.info")
    if source not in (None, "URL", "USER_INFO", "SASL_INHERIT"):
        raise ConfigError("basic.auth.credentials.source must be URL, USER_INFO or SASL_INHERIT")
    if source == "SASL_INHERIT":
        if not conf.get("sasl.username"):
            raise ConfigError("SASL_INHERIT needs sasl.username and sasl.password")
        basic = (str(conf["sasl.username"]), str(conf.get("sasl.password") or ""))
    elif user_info is not None and source != "URL":
        if userinfo is not None:
            raise ConfigError("basic.auth.user.info given together with credentials in the url;"
                              " keep only one")
        user, sep, pw = str(user_info).partition(":")
        if not sep:
            raise ConfigError("basic.auth.user.info must be 'username:password'")
        basic = (user, pw)
    elif source == "USER_INFO":
        raise ConfigError("basic.auth.credentials.source USER_INFO needs basic.auth.user.info")
    else:
        basic = userinfo
    bearer = str(conf.get("bearer.auth.credentials.source") or "").upper() or None
    if bearer not in (None, "STATIC_TOKEN", "OAUTHBEARER"):
        raise ConfigError("bearer.auth.credentials.source must be STATIC_TOKEN or OAUTHBEARER")
    if bearer and basic:
        raise ConfigError("basic and bearer authentication cannot both be configured")
    if bearer == "STATIC_TOKEN" and not conf.get("bearer.auth.token"):
        raise ConfigError("STATIC_TOKEN needs bearer.auth.token")
    if bearer == "OAUTHBEARER":
        for need in ("bearer.auth.client.id", "bearer.auth.client.secret",
                     "bearer.auth.issuer.endpoint.url"):
            if not conf.get(need):
                raise ConfigError(f"OAUTHBEARER needs {need}")
    max_retries = _number(conf, "max.retries", 3)
    wait = _number(conf, "retries.wait.ms", 1000)
    max_wait = _number(conf, "retries.max.wait.ms", 20000)
    capacity = _number(conf, "cache.capacity", 1000, minimum=1)
    timeout = _number(conf, "timeout", 30.0)
    connect_ms = _number(conf, "connect.timeout.ms", 10_000, minimum=1)
    total_ms = _number(conf, "total.timeout.ms", 30_000, minimum=1)
    assert max_retries is not None and wait is not None and max_wait is not None
    assert capacity is not None and timeout is not None
    assert connect_ms is not None and total_ms is not None
    neg = _number(conf, "cache.negative.ttl.sec", 1.0)

    def opt(key: str) -> str | None:
        v = conf.get(key)
        return str(v) if v is not None else None

    return RegistryClientConfig(
        urls=tuple(urls), basic_auth=basic, bearer_source=bearer,
        bearer_token=opt("bearer.auth.token"), logical_cluster=opt("bearer.auth.logical.cluster"),
        identity_pool=opt("bearer.auth.identity.pool.id"),
        oauth_client_id=opt("bearer.auth.client.id"),
        oauth_client_secret=opt("bearer.auth.client.secret"),
        oauth_scope=opt("bearer.auth.scope"), oauth_endpoint=opt("bearer.auth.issuer.endpoint.url"),
        verify=_ssl_context(conf), proxy=opt("proxy"), timeout=timeout,
        connect_timeout=connect_ms / 1000.0, total_timeout=total_ms / 1000.0,
        max_retries=int(max_retries), retries_wait_ms=int(wait),
        retries_max_wait_ms=int(max_wait), cache_capacity=int(capacity),
        cache_latest_ttl_sec=_number(conf, "cache.latest.ttl.sec", None),
        cache_negative_ttl_sec=neg if neg is not None else 1.0,
    )
