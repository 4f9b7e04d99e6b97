"""One configuration mechanism for every component: option tables.

Each component declares its options once, as :class:`Option` rows (name, type, default,
bounds, choices, aliases, doc, secret flag) gathered in a table, and parses what the user
gave against it: the Kafka clients through :class:`ClientConfig` (Kafka property names
and/or snake_case keywords, peers' names via :mod:`kontrakt._aliases`), the Schema Registry
client, the registry-bound serdes and the Spark data source through :class:`OptionTable`.
Each component then builds its own frozen typed settings from the parsed values
(``ClientSettings``, ``ProducerSettings``, ``RegistryClientConfig``, ``SourceOptions``).

Unknown keys raise :class:`~kontrakt.errors.ConfigError` naming close matches; a bad value
raises it with ``.option`` set to the option's name. Each table keeps the wording its users
have always seen (its :class:`Style`). Secret options never appear in ``repr``, logs or
error messages. :func:`option_tables` lists every table, for the configuration reference.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kontrakt._aliases import resolve_alias
from kontrakt._config_reference import option_tables
from kontrakt.errors import ConfigError

__all__ = [
    "COMMON_OPTIONS",
    "KAFKA_STYLE",
    "SECURITY_OPTIONS",
    "ClientConfig",
    "Option",
    "OptionTable",
    "Style",
    "option_tables",
    "options",
]


class _Invalid(Exception):
    """A converter's complaint about a value: what it must be (``"an integer"``); the
    table's :class:`Style` turns it into the ConfigError's message."""

    def __init__(self, expect: str, wrong_type: bool = False) -> None:
        super().__init__(expect)
        self.expect = expect
        #: the value is not even of a type that could be converted (a dict for a number)
        self.wrong_type = wrong_type


def _to_int(value: Any) -> int:
    if isinstance(value, bool):
        raise _Invalid("an integer", True)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise _Invalid("an integer", not isinstance(value, str))


def _to_number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise _Invalid("a number", True)
    try:
        return float(value)
    except ValueError:
        raise _Invalid("a number") from None


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise _Invalid("true or false", not isinstance(value, str))


def _to_flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise _Invalid("a bool", True)


def _to_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    raise _Invalid("a string", True)


def _to_callable(value: Any) -> Any:
    if callable(value):
        return value
    raise _Invalid("callable", True)


def _to_mapping(value: Any) -> Any:
    if isinstance(value, Mapping):
        return value
    raise _Invalid("a dict", True)


def _to_servers(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",")]
    elif isinstance(value, Iterable):
        items = [str(v).strip() for v in value]
    else:
        raise _Invalid("'host:port[,host:port...]' or a list", True)
    items = [v for v in items if v]
    if not items:
        raise _Invalid("")  # worded by _servers_error
    for item in items:
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise _Invalid(f": {item!r} is not host:port")
        if not 0 < int(port) < 65536:
            raise _Invalid(f": the port of {item!r} must be in 1..65535")
    return tuple(items)


_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def _to_duration(value: Any) -> float:
    """Seconds from ``15m``, ``30s`` or ``500ms`` (a bare number is milliseconds, as Spark
    reads ``maxTriggerDelay``)."""
    found = re.fullmatch(r"\s*(\d+)\s*(ms|s|min|m|h|d)?\s*", str(value).lower())
    if found is None:
        raise _Invalid("a duration such as 15m, 30s or 500ms")
    return int(found.group(1)) * _DURATION_UNITS[found.group(2) or "ms"]


#: The value types an option can have, by ``Option.kind``. ``text`` takes any value as its
#: ``str()``; ``flag`` is a bool that must be a real bool; ``number`` is a float.
KINDS: dict[str, Callable[[Any], Any]] = {
    "int": _to_int,
    "number": _to_number,
    "bool": _to_bool,
    "flag": _to_flag,
    "str": _to_str,
    "text": str,
    "servers": _to_servers,
    "duration": _to_duration,
    "callable": _to_callable,
    "mapping": _to_mapping,
    "any": lambda v: v,
}


@dataclass(frozen=True, slots=True)
class Style:
    """How a table words its errors. Each component had its own words before the tables
    were shared, and users and tests rely on them, so a table keeps them.

    Templates are ``str.format`` strings. ``invalid`` and ``wrong_type`` get ``name`` (the
    option), ``key`` (as the user wrote it), ``owner``, ``expect`` (``"an integer"``),
    ``shown`` (the value's repr, or for a secret only its type) and ``type``; ``unknown``
    gets ``key``, ``owner`` and ``hint``.

    Attributes:
        invalid: a bad value.
        wrong_type: a value of a type that cannot be converted (default: ``invalid``).
        unknown: a key the table does not have.
        hint: appended to ``unknown`` when there are close matches (``{close}``).
        close_n: how many close matches to name.
        close_sep: how they are joined.
        close_repr: quote them (``'linger.ms'``) or not.
        choices: the ``expect`` of an option with choices (``{choices}``: a list, or
            ``{joined}``: comma-separated).
        minimum: the ``expect`` of a value below the minimum.
        maximum: the ``expect`` of a value above the maximum.
    """

    invalid: str = "{name} must be {expect}, got {shown}"
    wrong_type: str | None = None
    unknown: str = "unknown configuration key {key!r}{hint}"
    hint: str = "; did you mean {close}?"
    close_n: int = 3
    close_sep: str = ", "
    close_repr: bool = True
    choices: str = "one of {choices}"
    minimum: str = ">= {minimum}"
    maximum: str = "<= {maximum}"

    def unknown_key(self, key: str, candidates: Iterable[str], owner: str = "") -> str:
        """The message for an unknown ``key``, naming close matches among ``candidates``."""
        close = difflib.get_close_matches(key, list(candidates), n=self.close_n, cutoff=0.6)
        shown = [repr(c) if self.close_repr else c for c in close]
        hint = self.hint.format(close=self.close_sep.join(shown)) if close else ""
        return self.unknown.format(key=key, owner=owner, hint=hint)


#: The Kafka clients' words (``linger.ms must be >= 0, got -1``).
KAFKA_STYLE = Style()


@dataclass(frozen=True, slots=True)
class Option:
    """One configuration option.

    Attributes:
        name: the property name, e.g. ``"request.timeout.ms"``.
        kind: the value type, a key of :data:`KINDS`: ``int``, ``number``, ``bool``,
            ``flag``, ``str``, ``text``, ``servers``, ``duration``, ``callable``,
            ``mapping`` or ``any``.
        default: value when not given (None means unset).
        choices: allowed values (compared case-insensitively for strings).
        minimum: smallest allowed value for numbers.
        secret: hide the value in ``repr`` and in error messages.
        doc: what it does.
        maximum: largest allowed value for numbers.
        aliases: other names the table accepts for this option.
        expect: how an error words what the value must be, for every failure (overrides
            the kind's and the bounds' wording, e.g. ``"a positive integer"``).
    """

    name: str
    kind: str
    default: Any = None
    choices: tuple[Any, ...] | None = None
    minimum: int | float | None = None
    secret: bool = False
    doc: str = ""
    maximum: int | float | None = None
    aliases: tuple[str, ...] = ()
    expect: str | None = None

    @property
    def attr(self) -> str:
        """The snake_case keyword name (``request_timeout_ms``)."""
        return self.name.replace(".", "_").replace("-", "_")

    def convert(self, value: Any, style: Style = KAFKA_STYLE, *, key: str | None = None,
                owner: str = "") -> Any:
        """Validate and convert a user-given value.

        Args:
            value: as given; None means unset and is returned as is.
            style: how the error is worded (the option's table's).
            key: the key as the user wrote it (default ``name``).
            owner: the component, for styles that name it.

        Raises:
            ConfigError: wrong type, value not among ``choices``, or out of bounds; its
                ``option`` is this option's name.
        """
        if value is None:
            return None
        try:
            out = KINDS[self.kind](value)
            if self.choices is not None:
                norm = out.lower() if isinstance(out, str) else out
                allowed = [c.lower() if isinstance(c, str) else c for c in self.choices]
                if norm not in allowed:
                    raise _Invalid(style.choices.format(
                        choices=list(self.choices),
                        joined=", ".join(str(c) for c in self.choices)))
                out = self.choices[allowed.index(norm)]
            if isinstance(out, (int, float)) and not isinstance(out, bool):
                if self.minimum is not None and out < self.minimum:
                    raise _Invalid(style.minimum.format(minimum=self.minimum))
                if self.maximum is not None and out > self.maximum:
                    raise _Invalid(style.maximum.format(maximum=self.maximum))
        except _Invalid as bad:
            raise ConfigError(self._message(bad, value, style, key, owner),
                              option=self.name) from None
        return out

    def _message(self, bad: _Invalid, value: Any, style: Style, key: str | None,
                 owner: str) -> str:
        shown = (f"a value of type {type(value).__name__} (not shown: {self.name} is secret)"
                 if self.secret else repr(value))
        if self.kind == "servers" and self.expect is None and not bad.wrong_type:
            if not bad.expect:
                return f"{self.name} is empty: give at least one host:port"
            return f"{self.name}{bad.expect}"
        template = style.wrong_type if bad.wrong_type and style.wrong_type else style.invalid
        return template.format(name=self.name, key=self.name if key is None else key,
                               owner=owner, expect=self.expect or bad.expect, shown=shown,
                               type=type(value).__name__)


def options(*opts: Option) -> dict[str, Option]:
    """Index options by property name."""
    return {o.name: o for o in opts}


@dataclass(frozen=True)
class OptionTable:
    """A component's options and how it words errors about them.

    Args:
        component: what the options configure (``"schema registry client"``); the key of
            the table in :func:`option_tables`.
        options: the options by name.
        style: the wording of errors.
        fold_case: keys are matched case-insensitively (Spark's options).
    """

    component: str
    options: Mapping[str, Option]
    style: Style = KAFKA_STYLE
    fold_case: bool = False
    _index: dict[str, Option] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, Option] = {}
        for opt in self.options.values():
            for name in (opt.name, *opt.aliases):
                index[name.lower() if self.fold_case else name] = opt
        object.__setattr__(self, "_index", index)

    def find(self, key: str) -> Option | None:
        """The option ``key`` names (by name or alias), or None."""
        return self._index.get(key.lower() if self.fold_case else key)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.find(key) is not None

    def unknown(self, key: str, owner: str = "") -> ConfigError:
        """The error for a key the table does not have, naming close matches."""
        names = sorted(self._index) if self.fold_case else list(self._index)
        return ConfigError(self.style.unknown_key(key, names, owner), option=key)

    def convert(self, key: str, value: Any, owner: str = "") -> Any:
        """``value`` of option ``key`` validated and converted (None stays None).

        Raises:
            ConfigError: unknown key or bad value.
        """
        opt = self.find(key)
        if opt is None:
            raise self.unknown(key, owner)
        return opt.convert(value, self.style, key=key, owner=owner)

    def value(self, given: Mapping[str, Any], key: str, owner: str = "") -> Any:
        """Option ``key``'s value in ``given`` (looked up by name; with ``fold_case``,
        ``given`` must have lower-case keys) converted, or its default when absent."""
        opt = self.find(key)
        assert opt is not None, key
        lookup = opt.name.lower() if self.fold_case else opt.name
        raw = given.get(lookup)
        if raw is None:
            return opt.default
        return opt.convert(raw, self.style, key=lookup, owner=owner)

    def parse(self, given: Mapping[str, Any], owner: str = "") -> dict[str, Any]:
        """Every option's value by name: the converted given value, else (not given, or
        given as None) the default.

        Raises:
            ConfigError: an unknown key (naming close matches) or a bad value.
        """
        out = {name: opt.default for name, opt in self.options.items()}
        for key, value in given.items():
            opt = self.find(key)
            if opt is None:
                raise self.unknown(key, owner)
            if value is not None:
                out[opt.name] = opt.convert(value, self.style, key=key, owner=owner)
        return out


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
    Option("metadata.recovery.strategy", "str", "rebootstrap",
           choices=("none", "rebootstrap"),
           doc="what to do when no known broker can give metadata (KIP-899, KIP-1102): "
               "'rebootstrap' (Kafka 4.x's default) loads metadata from bootstrap.servers "
               "again (resolving the names anew) and uses the brokers it names; 'none' "
               "keeps retrying the known brokers"),
    Option("metadata.recovery.rebootstrap.trigger.ms", "int", 300000, minimum=0,
           doc="with metadata.recovery.strategy=rebootstrap: rebootstrap when no known "
               "broker has given metadata for this long while metadata was wanted"),
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
           choices=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
           doc="how to talk to brokers: TLS (SSL), SASL authentication, both, or neither"),
    Option("ssl.ca.location", "str", doc="CA bundle (PEM) to verify brokers with"),
    Option("ssl.certificate.location", "str", doc="client certificate (PEM)"),
    Option("ssl.key.location", "str", doc="client private key (PEM)"),
    Option("ssl.key.password", "str", secret=True, doc="password of the private key"),
    Option("ssl.endpoint.identification.algorithm", "str", "https", choices=("https", "none"),
           doc="'https' checks the broker's host name against its certificate"),
    Option("ssl.context", "any", doc="a ready ssl.SSLContext; overrides the ssl.* files"),
    Option("sasl.mechanism", "str", "PLAIN",
           choices=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI"),
           doc="the SASL mechanism (security.protocol SASL_PLAINTEXT or SASL_SSL)"),
    Option("sasl.username", "str", doc="user name for PLAIN and SCRAM"),
    Option("sasl.password", "str", secret=True, doc="password for PLAIN and SCRAM"),
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
        # snake_case keywords and declared aliases (peers' names come from _aliases)
        by_attr = {name: o for o in allowed.values() for name in (o.attr, *o.aliases)}
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
        raise ConfigError(_unknown(key, allowed), option=key)
    if found is None or found is True:
        return None
    name, converted = found
    return allowed[name], converted


def _unknown(key: str, allowed: Mapping[str, Option]) -> str:
    return KAFKA_STYLE.unknown_key(key, list(allowed) + [o.attr for o in allowed.values()])
