"""Metadata and rule sets a registration ends up with, as Confluent's server decides them.

A subject's (or the global) config may carry ``defaultMetadata`` / ``defaultRuleSet`` and
``overrideMetadata`` / ``overrideRuleSet``. On registration the schema's own metadata and
rule set (or, when the request has none, the previous live version's: contracts are carried
forward) are merged between the two: ``override ⊕ (specific ⊕ default)``, the right-hand
side losing where both hold a key. ``confluent:version`` in the properties follows the
version being written when the request named a version or the merged metadata already
holds the property, so optimistic writers can pin it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["CONFLUENT_VERSION", "has_defaults_or_overrides", "merge_metadata",
           "merge_rule_sets", "populate"]

#: The metadata property that names the version a schema was registered as.
CONFLUENT_VERSION = "confluent:version"

_RULE_KINDS = ("migrationRules", "domainRules", "encodingRules")
_CONFIG_KEYS = ("defaultMetadata", "overrideMetadata", "defaultRuleSet", "overrideRuleSet")

Json = dict[str, Any]


def has_defaults_or_overrides(config: Mapping[str, Any]) -> bool:
    """Whether ``config`` holds metadata or rule-set defaults or overrides."""
    return any(config.get(k) for k in _CONFIG_KEYS)


def merge_metadata(old: Json | None, new: Json | None) -> Json | None:
    """``new`` laid over ``old``: tags and properties key by key (``new`` wins), ``sensitive``
    as a set union. Either side missing gives the other."""
    if old is None:
        return new
    if new is None:
        return old
    out: Json = {}
    for member in ("tags", "properties"):
        merged = {**(old.get(member) or {}), **(new.get(member) or {})}
        if merged:
            out[member] = merged
    sensitive = sorted({*(old.get("sensitive") or ()), *(new.get("sensitive") or ())})
    if sensitive:
        out["sensitive"] = sensitive
    return out


def merge_rule_sets(old: Json | None, new: Json | None) -> Json | None:
    """``new`` laid over ``old`` per rule kind: ``old``'s rules whose names ``new`` does not
    use, then ``new``'s rules in order. Either side missing gives the other."""
    if old is None:
        return new
    if new is None:
        return old
    out: Json = {}
    for kind in _RULE_KINDS:
        old_rules = old.get(kind) or []
        new_rules = new.get(kind) or []
        if not old_rules:
            merged = new_rules
        elif not new_rules:
            merged = old_rules
        else:
            names = {r.get("name") for r in new_rules if isinstance(r, dict)}
            merged = [r for r in old_rules
                      if not (isinstance(r, dict) and r.get("name") in names)] + new_rules
        if merged:
            out[kind] = merged
    return out


def _with_version(metadata: Json | None, version: int) -> Json:
    return merge_metadata(metadata, {"properties": {CONFLUENT_VERSION: str(version)}}) or {}


def populate(config: Mapping[str, Any], metadata: Json | None, rule_set: Json | None,
             previous: tuple[Json | None, Json | None] | None, new_version: int | None,
             version_requested: bool) -> tuple[Json | None, Json | None]:
    """The metadata and rule set a registration (or a lookup, ``new_version=None``) stores.

    Args:
        config: the config in scope for the subject (its defaults and overrides apply).
        metadata, rule_set: what the request carries (``None`` when it has none).
        previous: the latest live version's metadata and rule set, ``None`` for a new
            subject; used where the request carries none.
        new_version: the version being registered, or ``None`` for a lookup (then
            ``confluent:version`` is left as it is).
        version_requested: the request named a version.
    """
    specific_meta = metadata if metadata is not None else (previous[0] if previous else None)
    specific_rules = rule_set if rule_set is not None else (previous[1] if previous else None)
    meta = merge_metadata(merge_metadata(config.get("defaultMetadata"), specific_meta),
                          config.get("overrideMetadata"))
    rules = merge_rule_sets(merge_rule_sets(config.get("defaultRuleSet"), specific_rules),
                            config.get("overrideRuleSet"))
    if new_version is not None and (
            version_requested or CONFLUENT_VERSION in ((meta or {}).get("properties") or {})):
        meta = _with_version(meta, new_version)
    return meta, rules
