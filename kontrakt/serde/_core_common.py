"""What the serializer and deserializer cores share: their configuration, and the marker of
a cache miss.

:class:`CoreConfig` reads the options both cores take (latest version, subject name
strategy) and sets up data-contract rules; :data:`MISS` is what a core's cached path returns
when the registry must be consulted first (the shells in :mod:`kontrakt.serde._shells` test
for it). :data:`ToDict` and :data:`FromDict` name the converters a format's constructor takes.
"""

from __future__ import annotations

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


class _Miss:
    """Returned by the cached paths when the registry must be consulted first."""

    __slots__ = ()


MISS: Any = _Miss()
