"""``kontrakt configs``: listing the resources that have configs (KIP-1142), describing a
resource's configs (as ``kafka-configs.sh --describe``, ``--all``) and resetting them to
their defaults (as ``kafka-configs.sh --alter --delete-config``). ``reset`` is a dry run
unless ``--execute`` is given, as ``groups reset-offsets``.
"""

from __future__ import annotations

from typing import Any

import click

from kontrakt.cli._admin import _TIMEOUT, DRY_RUN, _admin, _emit
from kontrakt.cli._common import Connection, connection_options, reported

__all__ = ["configs"]

# --type names (kafka-configs.sh's entity types, singular) -> ConfigResourceType names.
_TYPES = {"topic": "TOPIC", "broker": "BROKER", "broker-logger": "BROKER_LOGGER",
          "group": "GROUP", "client-metrics": "CLIENT_METRICS"}


@click.group()
def configs() -> None:
    """List, describe and reset the configs of topics, brokers, groups and other
    resources."""


#: what a sensitive config's value is shown as (brokers send none; never echo one)
MASKED = "(sensitive)"


@configs.command("list-resources")
@connection_options
@click.option("--type", "types", multiple=True, type=click.Choice(list(_TYPES)),
              help="Only resources of this type, repeatable (brokers before Kafka 4.1 list "
                   "client-metrics resources only).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@reported
def configs_list_resources(conn: Connection, types: tuple[str, ...], as_json: bool) -> None:
    """The resources that have configs, one "TYPE NAME" per line (KIP-1142; Kafka 3.7+):
    client-metrics subscriptions and groups too, which nothing else lists."""
    names = {v: k for k, v in _TYPES.items()}
    with _admin(conn) as admin:
        found = admin.list_config_resources([_TYPES[t] for t in dict.fromkeys(types)],
                                            timeout=_TIMEOUT)
    data = [{"type": names.get(r.restype.name, r.restype.name.lower()), "name": r.name}
            for r in found]
    _emit(data, as_json, [f"{r['type']} {r['name']}" for r in data])


@configs.command("describe")
@connection_options
@click.argument("resource_type", metavar="TYPE", type=click.Choice(list(_TYPES)))
@click.argument("name")
@click.option("--all", "show_all", is_flag=True, help="Every config, defaults included "
              "(without it: only those set at the resource itself).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@reported
def configs_describe(conn: Connection, resource_type: str, name: str, show_all: bool,
                     as_json: bool) -> None:
    """The configs of the resource TYPE NAME (a broker by its id, "" for the cluster-wide
    broker default): key, value, where the value comes from, and whether it is read-only.
    Sensitive values are never shown. As kafka-configs.sh --describe (--all)."""
    from kontrakt.clients.admin import ConfigResource, ConfigResourceType
    from kontrakt.clients.admin._configs import own_source

    resource = ConfigResource(ConfigResourceType[_TYPES[resource_type]], name)
    with _admin(conn) as admin:
        described = _describe(admin, resource)
    own = own_source(resource)
    rows: list[dict[str, Any]] = [
        {"key": k, "value": None if e.is_sensitive else e.value, "source": e.source.name,
         "read_only": e.is_read_only, "sensitive": e.is_sensitive}
        for k, e in sorted(described.items()) if show_all or e.source is own]
    lines = [f"{r['key']}={MASKED if r['sensitive'] else r['value'] or ''}  {r['source']}"
             + ("  read-only" if r["read_only"] else "") for r in rows] or [
        f"{resource_type} {name} has no configs of its own (--all shows every config)"]
    _emit({"type": resource_type, "name": name, "configs": rows}, as_json, lines)


def _describe(admin: Any, resource: Any) -> dict[str, Any]:
    """The resource's described configs. A missing topic fails at once: DescribeConfigs'
    UNKNOWN_TOPIC_OR_PARTITION is retriable, and the admin client would retry it for the
    whole timeout, whereas Metadata (describe_topics) reports it as final."""
    from kontrakt.clients.admin import ConfigResourceType
    from kontrakt.protocol.errors import TopicAuthorizationFailedError

    if resource.restype is ConfigResourceType.TOPIC:
        try:
            admin.describe_topics([resource.name], timeout=_TIMEOUT)
        except TopicAuthorizationFailedError:
            pass  # DESCRIBE_CONFIGS may be granted without DESCRIBE: ask anyway
    described: dict[str, Any] = admin.describe_configs([resource], timeout=_TIMEOUT)[resource]
    return described


@configs.command("reset")
@connection_options
@click.argument("resource_type", metavar="TYPE", type=click.Choice(list(_TYPES)))
@click.argument("name")
@click.option("-k", "--key", "keys", multiple=True, metavar="KEY",
              help="A config to reset, repeatable (default: every config set at the "
                   "resource itself).")
@click.option("--execute", is_flag=True,
              help="Really reset them (without it the command only shows what it would do).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@reported
def configs_reset(conn: Connection, resource_type: str, name: str, keys: tuple[str, ...],
                  execute: bool, as_json: bool) -> None:
    """Set configs of the resource TYPE NAME (a broker by its id, "" for the cluster-wide
    broker default) back to their defaults: the value then comes from the next level down
    (a topic's from the brokers' settings). A dry run unless --execute is given."""
    from kontrakt.clients.admin import ConfigResource, ConfigResourceType
    from kontrakt.clients.admin._configs import own_source

    resource = ConfigResource(ConfigResourceType[_TYPES[resource_type]], name)
    wanted = list(dict.fromkeys(keys))
    with _admin(conn) as admin:
        described = admin.describe_configs([resource], timeout=_TIMEOUT)[resource]
        own = own_source(resource)
        if not wanted:
            wanted = sorted(k for k, e in described.items() if e.source is own)
        current = {k: (None if described.get(k) is None or described[k].is_sensitive
                       else described[k].value) for k in wanted}
        shown = {k: "not described" if k not in described else "sensitive"
                 if described[k].is_sensitive else f"now {described[k].value}"
                 for k in wanted}
        if execute and wanted:
            wanted = list(admin.reset_configs({resource: wanted}, timeout=_TIMEOUT)[resource])
    data = {"type": resource_type, "name": name, "executed": execute,
            "configs": [{"key": k, "value": current.get(k)} for k in wanted]}
    verb = "reset" if execute else "would reset"
    lines = [f"{verb} {k} ({shown.get(k, 'not described')})" for k in wanted] or [
        f"{resource_type} {name} has no configs of its own to reset"]
    if not execute and wanted:
        lines.append(DRY_RUN)
    _emit(data, as_json, lines)
