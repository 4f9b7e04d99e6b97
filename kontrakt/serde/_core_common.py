"""What the serializer and deserializer cores share: their configuration, and the marker of
a cache miss.

:class:`CoreConfig` reads the options both cores take (latest version, subject name
strategy) and sets up data-contract rules; :data:`MISS` is what a core's cached path returns
when the registry must be consulted first (the shells in :mod:`kontrakt.serde._shells` test
for it). :data:`ToDict` and :data:`FromDict` name the converters a format's constructor takes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from kontrakt.errors import ConfigError
from kontrakt.serde._conf import parse_conf
from kontrakt.serde._context import SerializationContext
from kontrakt.serde.rules import RuleRegistry, configure_registry

__all__ = ["MISS", "CoreConfig", "FromDict", "ToDict"]


#: ``(obj, ctx) -> dict``: application object to what the format's codec writes.
ToDict = Callable[[Any, SerializationContext | None], Any]
#: ``(decoded, ctx) -> obj``: what the format's codec read to an application object.
FromDict = Callable[[Any, SerializationContext | None], Any]


class CoreConfig:
    """What both cores read from their configuration: the latest-version options and the
    subject name strategy."""

    extra_defaults: Mapping[str, Any] = {}
    #: the registry ``format`` to ask for when fetching schemas (Protobuf: ``"serialized"``).
    fetch_format: str | None = None

    def __init__(self, conf: Mapping[str, Any] | None, defaults: Mapping[str, Any],
                 owner: str) -> None:
        c = parse_conf(conf, {**defaults, **self.extra_defaults}, owner)
        self.conf = c
        self.owner = owner
        self.use_latest: bool = c["use.latest.version"]
        self.latest_metadata: Mapping[str, str] | None = c["use.latest.with.metadata"]
        self.strategy: Callable[..., str | None] = c["subject.name.strategy"]
        self.record_name: str | None = None
        self.zigzag = True
        self.rule_registry = RuleRegistry.get_global_instance()
        #: the registry client's ``cache.latest.ttl.sec`` (None: latest versions are kept)
        self.latest_ttl: float | None = None
        #: with use.latest.version / with.metadata and a TTL: the monotonic time at which
        #: what was resolved from a latest version is forgotten (None: nothing expires)
        self.stale_at: float | None = None

    def use_rules(self, registry: RuleRegistry | None, rule_conf: Mapping[str, Any] | None,
                  client: Any) -> None:
        """Run data-contract rules with ``registry`` (default: the process-wide one), handing
        its executors and actions the client's config and ``rule_conf``."""
        if registry is not None and not isinstance(registry, RuleRegistry):
            raise ConfigError(f"{self.owner}: rule_registry must be a RuleRegistry, got "
                              f"{type(registry).__name__}")
        if rule_conf is not None and not isinstance(rule_conf, Mapping):
            raise ConfigError(f"{self.owner}: rule_conf must be a dict, got {rule_conf!r}")
        if registry is not None:
            self.rule_registry = registry
        configure_registry(self.rule_registry, client, rule_conf)
        # Every format's constructor passes its client here: the one place to learn how
        # long the client reuses a latest version, so that a serde does not keep one longer.
        ttl = getattr(client, "latest_cache_ttl", None)
        if isinstance(ttl, (int, float)) and not isinstance(ttl, bool) and ttl > 0:
            self.latest_ttl = float(ttl)

    def expire_latest(self) -> None:
        """Start the clock of a resolution made from a latest version: it is forgotten
        ``latest_ttl`` seconds from now (call after caching it)."""
        if self.latest_ttl is None:
            return
        deadline = time.monotonic() + self.latest_ttl
        stale_at = self.stale_at
        if stale_at is None or deadline < stale_at:
            self.stale_at = deadline

    def is_stale(self) -> bool:
        """Whether the latest versions resolved so far are due to be asked for again; if so,
        forget them (:meth:`forget_latest`) and return True."""
        stale_at = self.stale_at
        if stale_at is None or time.monotonic() < stale_at:
            return False
        # The deadline is dropped before the caches: a resolution cached meanwhile by
        # another thread either lands in the emptied caches with its own deadline set
        # after this, or is dropped with them.
        self.stale_at = None
        self.forget_latest()
        return True

    def forget_latest(self) -> None:
        """Drop what was resolved from latest versions (the core's caches)."""
        raise NotImplementedError


class _Miss:
    """Returned by the cached paths when the registry must be consulted first."""

    __slots__ = ()


MISS: Any = _Miss()
