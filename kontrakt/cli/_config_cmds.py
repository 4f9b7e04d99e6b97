"""``kontrakt configs``: resetting configs to their defaults, as ``kafka-configs.sh --alter
--delete-config`` does. ``reset`` is a dry run unless ``--execute`` is given, as ``groups
reset-offsets``.
"""

from __future__ import annotations

import click

from kontrakt.cli._admin import _TIMEOUT, DRY_RUN, _admin, _emit
from kontrakt.cli._common import Connection, connection_options, reported

__all__ = ["configs"]

# --type names (kafka-configs.sh's entity types, singular) -> ConfigResourceType names.
_TYPES = {"topic": "TOPIC", "broker": "BROKER", "broker-logger": "BROKER_LOGGER",
          "group": "GROUP", "client-metrics": "CLIENT_METRICS"}


@click.group()
def configs() -> None:
    """Reset the configs of topics, brokers, groups and other resources."""


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
