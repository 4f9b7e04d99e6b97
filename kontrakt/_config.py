"""One configuration model for every client.

Clients accept ``config`` as a mapping with Kafka property names (``"bootstrap.servers"``,
``"linger.ms"``) and/or keyword options with snake_case names (``bootstrap_servers=``,
``linger_ms=``). Each client declares which :class:`Option` objects it understands; unknown
keys raise :class:`~kontrakt.errors.ConfigError` naming close matches. Secret options never
appear in ``repr`` or logs.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kontrakt._aliases import resolve_alias
from kontrakt.errors import ConfigError

__all__ = [
    "COMMON_OPTIONS",
    "SECURITY_OPTIONS",
    "ClientConfig",
    "Option",
    "options",
]


# Converters take the value and how to show it in an error: its repr, or for a secret
# option only its type (a mistyped password must not end up in a traceback or a log).


def _to_int(name: str, value: Any, shown: str) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"{name} must be an integer, got {shown}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise ConfigError(f"{name} must be an integer, got {shown}")


def _to_bool(name: str, value: Any, shown: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError(f"{name} must be true or false, got {shown}")


def _to_str(name: str, value: Any, shown: str) -> str:
    if isinstance(value, str):
        return value
    raise ConfigError(f"{name} must be a string, got {shown}")


def _to_servers(name: str, value: Any, shown: str) -> tuple[str, ...]:
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",")]
    elif isinstance(value, Iterable):
        items = [str(v).strip() for v in value]
    else:
        raise ConfigError(f"{name} must be 'host:port[,host:port...]' or a list, got {shown}")
    items = [v for v in items if v]
    if not items:
        raise ConfigError(f"{name} is empty: give at least one host:port")
    for item in items:
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ConfigError(f"{name}: {item!r} is not host:port")
        if not 0 < int(port) < 65536:
            raise ConfigError(f"{name}: the port of {item!r} must be in 1..65535")
    return tuple(items)


_CONVERTERS: dict[str, Callable[[str, Any, str], Any]] = {
    "int": _to_int,
    "bool": _to_bool,
    "str": _to_str,
    "servers": _to_servers,
    "any": lambda _n, v, _s: v,
}


@dataclass(frozen=True, slots=True)
class Option:
    """One configuration option.

    Attributes:
        name: the Kafka property name, e.g. ``"request.timeout.ms"``.
        kind: ``int``, ``bool``, ``str``, ``servers`` or ``any``.
        default: value when not given (None means unset).
        choices: allowed values (compared case-insensitively for strings).
        minimum: smallest allowed value for ints.
        secret: hide the value in ``repr`` and in error messages.
        doc: what it does.
    """

    name: str
    kind: str
    default: Any = None
    choices: tuple[Any, ...] | None = None
    minimum: int | None = None
    secret: bool = False
    doc: str = ""

    @property
    def attr(self) -> str:
        """The snake_case keyword name (``request_timeout_ms``)."""
        return self.name.replace(".", "_").replace("-", "_")

    def convert(self, value: Any) -> Any:
        """Validate and convert a user-given value.

        Raises:
            ConfigError: wrong type, value not among ``choices``, or below ``minimum``.
        """
        if value is None:
            return None
        shown = (f"a value of type {type(value).__name__} (not shown: {self.name} is secret)"
                 if self.secret else repr(value))
        out = _CONVERTERS[self.kind](self.name, value, shown)
        if self.choices is not None:
            norm = out.lower() if isinstance(out, str) else out
            allowed = [c.lower() if isinstance(c, str) else c for c in self.choices]
            if norm not in allowed:
                raise ConfigError(f"{self.name} must be one of {list(self.choices)}, got {shown}")
            out = self.choices[allowed.index(norm)]
        if self.minimum is not None and isinstance(out, int) and out < self.minimum:
            raise ConfigError(f"{self.name} must be >= {self.minimum}, got {shown}")
        return out


def options(*opts: Option) -> dict[str, Option]:
    """Index options by property name."""
    return {o.name: o for o in opts}


COMMON_OPTIONS = options(
    Option("bootstrap.servers", "servers", doc="host:port of one or more brokers to start from"),
    Option("client.id", "str", "kontrakt", doc="name sent to brokers in every request"),
    Option("request.timeout.ms", "int", 30000, minimum=1,
           doc="how long to wait for a broker's response"),
    Option("socket.connection.setup.timeout.ms", "int", 10000, minimum=1,
           doc="how long a TCP/TLS connect plus handshake may take"),
    Option("connections.max.idle.ms", "int", 540000, minimum=1,
           doc="close connections idle for longer than this"),
    Option("metadata.max.age.ms", "int", 300000, minimum=1,
           doc="refresh cluster metadata at least this often"),
    Option("retry.backoff.ms", "int", 100, minimum=0, doc="first wait before a retry"),
    Option("retry.backoff.max.ms", "int", 1000, minimum=0, doc="longest wait between retries"),
    Option("reconnect.backoff.ms", "int", 50, minimum=0, doc="first wait before reconnecting"),
    Option("reconnect.backoff.max.ms", "int", 1000, minimum=0,
           doc="longest wait before reconnecting to a broker"),
    Option("max.in.flight.requests.per.connection", "int", 5, minimum=1,
           doc="requests sent on one connection before waiting for responses"),
    Option("receive.message.max.bytes", "int", 100_000_000, minimum=1024,
           doc="largest response frame accepted from a broker"),
    Option("api.version.request", "bool", True,
           doc="negotiate API versions with ApiVersions (always on; kept for compatibility)"),
)

SECURITY_OPTIONS = options(
    Option("security.protocol", "str", "PLAINTEXT",
           choices=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")),
    Option("ssl.ca.location", "str", doc="CA bundle (PEM) to verify brokers with"),
    Option("ssl.certificate.location", "str", doc="client certificate (PEM)"),
    Option("ssl.key.location", "str", doc="client private key (PEM)"),
    Option("ssl.key.password", "str", secret=True, doc="password of the private key"),
    Option("ssl.endpoint.identification.algorithm", "str", "https", choices=("https", "none"),
           doc="'https' checks the broker's host name against its certificate"),
    Option("ssl.context", "any", doc="a ready ssl.SSLContext; overrides the ssl.* files"),
    Option("sasl.mechanism", "str", "PLAIN",
           choices=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")),
    Option("sasl.username", "str"),
    Option("sasl.password", "str", secret=True),
    Option("sasl.scram.tokenauth", "bool", False,
           doc="SCRAM login with a delegation token (user: the token id, password: the "
               "base64 of its HMAC); Java's ScramLoginModule tokenauth option"),
    # SASL/GSSAPI (Kerberos; the kontrakt[gssapi] extra; librdkafka's names)
    Option("sasl.kerberos.service.name", "str", "kafka",
           doc="Kerberos service name of the brokers: the client asks for tickets to "
               "<service>/<broker host>"),
    Option("sasl.kerberos.principal", "str",
           doc="the client's Kerberos principal (default: the ticket cache's, or the "
               "keytab's first)"),
    Option("sasl.kerberos.keytab", "str",
           doc="keytab file to log in from (default: the ticket cache, or the keytab "
               "KRB5_CLIENT_KTNAME names)"),
    # SASL/OAUTHBEARER (librdkafka's names; see docs/security.md)
    Option("sasl.oauthbearer.method", "str", "default", choices=("default", "oidc"),
           doc="'oidc': fetch tokens from sasl.oauthbearer.token.endpoint.url (client "
               "credentials); 'default': oauth_cb, or the unsecured JWT for development"),
    Option("sasl.oauthbearer.token.endpoint.url", "str",
           doc="the OAuth/OIDC token endpoint (method oidc)"),
    Option("sasl.oauthbearer.client.id", "str", doc="client id at the token endpoint"),
    Option("sasl.oauthbearer.client.secret", "str", secret=True,
           doc="client secret at the token endpoint"),
    Option("sasl.oauthbearer.scope", "str", doc="scope asked of the token endpoint"),
    Option("sasl.oauthbearer.extensions", "str",
           doc="SASL extensions sent to the broker (KIP-342): key=value,key2=value2"),
    Option("sasl.oauthbearer.config", "str",
           doc="passed to oauth_cb; for the unsecured JWT: principal=... [scope=a,b] "
               "[lifeSeconds=3600] [principalClaimName=sub] [scopeClaimName=scope] "
               "[extension_NAME=value]"),
    Option("enable.sasl.oauthbearer.unsecure.jwt", "bool", False,
           doc="allow the unsecured JWT (alg none) token for development brokers"),
    Option("oauth_cb", "any",
           doc="token provider: oauth_cb(sasl.oauthbearer.config) -> (token, expiry in "
               "epoch seconds[, principal, extensions]); plain or async"),
)


class ClientConfig(Mapping[str, Any]):
    """A validated configuration: a read-only mapping by property name, and attribute
    access by snake_case name (``cfg.request_timeout_ms``).

    Args:
        allowed: the options this client understands.
        config: Kafka property names to values (``{"bootstrap.servers": "..."}``).
        **kwargs: the same options with snake_case names; these win over ``config``.

    Raises:
        ConfigError: an unknown key (with close matches), a bad value, or a key given twice
            with different values.
    """

    __slots__ = ("_allowed", "_values")

    def __init__(self, allowed: Mapping[str, Option], config: Mapping[str, Any] | None = None,
                 **kwargs: Any) -> None:
        by_attr = {o.attr: o for o in allowed.values()}
        values: dict[str, Any] = {name: o.default for name, o in allowed.items()}
        given: dict[str, Any] = {}
        for key, value in (config or {}).items():
            opt = allowed.get(key) or by_attr.get(key)
            if opt is None:
                found = _alias(key, value, allowed)
                if found is None:
                    continue
                opt, value = found
            given[opt.name] = value
        for key, value in kwargs.items():
            opt = by_attr.get(key) or allowed.get(key)
            if opt is None:
                found = _alias(key, value, allowed)
                if found is None:
                    continue
                opt, value = found
            if opt.name in given and given[opt.name] != value:
                raise ConfigError(f"{opt.name} given twice with different values")
            given[opt.name] = value
        for name, value in given.items():
            values[name] = allowed[name].convert(value)
        self._allowed = dict(allowed)
        self._values = values

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Any:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __getattr__(self, attr: str) -> Any:
        name = attr.replace("_", ".")
        try:
            return self._values[name]
        except KeyError:
            for opt in self._allowed.values():
                if opt.attr == attr:
                    return self._values[opt.name]
        raise AttributeError(attr)

    def require(self, name: str) -> Any:
        """The value of ``name``; raises ConfigError when it is unset."""
        value = self._values.get(name)
        if value is None:
            raise ConfigError(f"{name} is required")
        return value

    def __repr__(self) -> str:
        shown = {
            k: ("***" if self._allowed[k].secret and v is not None else v)
            for k, v in self._values.items()
            if v != self._allowed[k].default
        }
        return f"ClientConfig({shown!r})"


def _alias(key: str, value: Any, allowed: Mapping[str, Option]) -> tuple[Option, Any] | None:
    """Another client's name for one of ``allowed`` (see :mod:`kontrakt._aliases`): the
    option and the value converted; None for a no-op value to ignore.

    Raises:
        ConfigError: an unknown key (naming close matches), a refused one (saying why).
    """
    found = resolve_alias(key, value, allowed)
    if found is False:
        raise ConfigError(_unknown(key, allowed))
    if found is None or found is True:
        return None
    name, converted = found
    return allowed[name], converted


def _unknown(key: str, allowed: Mapping[str, Option]) -> str:
    names = list(allowed) + [o.attr for o in allowed.values()]
    close = difflib.get_close_matches(key, names, n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return f"unknown configuration key {key!r}{hint}"
