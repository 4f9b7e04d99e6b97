"""Configuration of the registry clients, with confluent-kafka-python's property names."""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from kontrakt._config import Option, OptionTable, Style, options
from kontrakt.clients._net.security import tls_context
from kontrakt.errors import ConfigError

__all__ = ["REGISTRY_TABLE", "RegistryClientConfig", "parse_config"]

#: The registry client's words (``max.retries must be a number, not dict``).
REGISTRY_STYLE = Style(invalid="{name} must be {expect}, got {shown}",
                       wrong_type="{name} must be {expect}, not {type}",
                       unknown="unknown Schema Registry client property {key!r}{hint}",
                       close_repr=False)

REGISTRY_TABLE = OptionTable("schema registry client", options(
    Option("url", "any", doc="one or more comma-separated registry URLs (required)"),
    Option("basic.auth.user.info", "text", secret=True,
           doc="'username:password' for HTTP basic authentication"),
    Option("basic.auth.credentials.source", "text",
           doc="URL (credentials in the url), USER_INFO or SASL_INHERIT"),
    Option("sasl.username", "text", doc="user name with SASL_INHERIT"),
    Option("sasl.password", "text", secret=True, doc="password with SASL_INHERIT"),
    Option("bearer.auth.credentials.source", "text", doc="STATIC_TOKEN or OAUTHBEARER"),
    Option("bearer.auth.token", "text", secret=True, doc="the token with STATIC_TOKEN"),
    Option("bearer.auth.logical.cluster", "text", doc="target-sr-cluster header"),
    Option("bearer.auth.identity.pool.id", "text", doc="Confluent-Identity-Pool-Id header"),
    Option("bearer.auth.client.id", "text", doc="OAuth client id (OAUTHBEARER)"),
    Option("bearer.auth.client.secret", "text", secret=True,
           doc="OAuth client secret (OAUTHBEARER)"),
    Option("bearer.auth.scope", "text", doc="OAuth scope (OAUTHBEARER)"),
    Option("bearer.auth.issuer.endpoint.url", "text", doc="OAuth token endpoint (OAUTHBEARER)"),
    Option("ssl.ca.location", "text", doc="CA bundle (PEM) to verify the registry with"),
    Option("ssl.certificate.location", "text", doc="client certificate (PEM)"),
    Option("ssl.key.location", "text", doc="client private key (PEM)"),
    Option("ssl.key.password", "text", secret=True, doc="password of the private key"),
    Option("proxy", "text", doc="HTTP(S) proxy URL"),
    Option("timeout", "number", 30.0, minimum=0,
           doc="seconds to wait for each read or write of an attempt"),
    Option("connect.timeout.ms", "number", 10_000, minimum=1,
           doc="ms to open a connection (TCP and TLS), per attempt"),
    Option("total.timeout.ms", "number", 30_000, minimum=1,
           doc="ms one REST call may take in all: attempts, backoff sleeps, fail-over"),
    Option("max.retries", "number", 3, minimum=0, doc="retries of a failed REST call"),
    Option("retries.wait.ms", "number", 1000, minimum=0, doc="first wait before a retry"),
    Option("retries.max.wait.ms", "number", 20000, minimum=0,
           doc="longest wait between retries"),
    Option("cache.capacity", "number", 1000, minimum=1, doc="schemas kept per cache"),
    Option("cache.latest.ttl.sec", "number", None, minimum=0,
           doc="seconds a latest-version answer is cached (unset: until evicted)"),
    Option("cache.negative.ttl.sec", "number", 1.0, minimum=0,
           doc="seconds a not-found answer is cached"),
), REGISTRY_STYLE)
_KEYS = tuple(REGISTRY_TABLE.options)


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


def _ssl_context(conf: Mapping[str, Any]) -> ssl.SSLContext | bool:
    ca, cert, key = conf["ssl.ca.location"], conf["ssl.certificate.location"], \
        conf["ssl.key.location"]
    if ca is None and cert is None and key is None:
        return True
    if key is not None and cert is None:
        raise ConfigError("ssl.certificate.location is required with ssl.key.location",
                          option="ssl.certificate.location")
    return tls_context(ca=ca, cert=cert, key=key, password=conf["ssl.key.password"])


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
    given: dict[str, Any] = dict(config or {})
    for name, value in options.items():
        given[name.replace("_", ".")] = value
    conf = REGISTRY_TABLE.parse(given)
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

    def opt(key: str) -> str | None:
        v: str | None = conf[key]
        return v

    return RegistryClientConfig(
        urls=tuple(urls), basic_auth=basic, bearer_source=bearer,
        bearer_token=opt("bearer.auth.token"), logical_cluster=opt("bearer.auth.logical.cluster"),
        identity_pool=opt("bearer.auth.identity.pool.id"),
        oauth_client_id=opt("bearer.auth.client.id"),
        oauth_client_secret=opt("bearer.auth.client.secret"),
        oauth_scope=opt("bearer.auth.scope"), oauth_endpoint=opt("bearer.auth.issuer.endpoint.url"),
        verify=_ssl_context(conf), proxy=opt("proxy"), timeout=float(conf["timeout"]),
        connect_timeout=conf["connect.timeout.ms"] / 1000.0,
        total_timeout=conf["total.timeout.ms"] / 1000.0,
        max_retries=int(conf["max.retries"]), retries_wait_ms=int(conf["retries.wait.ms"]),
        retries_max_wait_ms=int(conf["retries.max.wait.ms"]),
        cache_capacity=int(conf["cache.capacity"]),
        cache_latest_ttl_sec=conf["cache.latest.ttl.sec"],
        cache_negative_ttl_sec=float(conf["cache.negative.ttl.sec"]),
    )
