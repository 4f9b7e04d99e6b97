"""``kontrakt topics``, ``kontrakt groups`` and ``kontrakt cluster``: cluster administration.

``groups reset-offsets`` is a dry run unless ``--execute`` is given (as Kafka's own
``kafka-consumer-groups.sh``), and refuses to move the offsets of a group that has members;
so is ``cluster unregister-broker``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

import click

from kontrakt._types import TopicPartition
from kontrakt.cli._common import (
    EXIT_INPUT,
    CliError,
    Connection,
    connection_options,
    parse_pairs,
    reported,
)

__all__ = ["cluster", "groups", "topics"]

_TIMEOUT = 30.0

# Names --type and --state accept (any case); UNKNOWN is what a broker's answer may say.
_GROUP_TYPES = ("classic", "consumer", "share", "streams")
_GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty",
                 "Assigning", "Reconciling", "NotReady")


@contextmanager
def _admin(conn: Connection) -> Iterator[Any]:
    from kontrakt.clients.admin import AdminClient

    with AdminClient(conn.client_config()) as admin:
        yield admin


def _emit(data: Any, as_json: bool, lines: list[str]) -> None:
    if as_json:
        click.echo(json.dumps(data, indent=2, default=str))
    else:
        for line in lines:
            click.echo(line)


# ------------------------------------------------------------------------------- topics
@click.group()
def topics() -> None:
    """List, describe, create, delete and configure topics."""


@topics.command("list")
@connection_options
@click.option("--internal", is_flag=True, help="Include internal topics.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@reported
def topics_list(conn: Connection, internal: bool, as_json: bool) -> None:
    """List the topics, one per line."""
    with _admin(conn) as admin:
        names = sorted(admin.list_topics(include_internal=internal, timeout=_TIMEOUT))
    _emit(names, as_json, names)


@topics.command("describe")
@connection_options
@click.argument("names", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@reported
def topics_describe(conn: Connection, names: tuple[str, ...], as_json: bool) -> None:
    """Partitions (leader, replicas, in-sync replicas), end offsets and the non-default
    configs of each topic."""
    from kontrakt.clients.admin import ConfigResource, ConfigResourceType, OffsetSpec

    with _admin(conn) as admin:
        described = admin.describe_topics(list(names), timeout=_TIMEOUT)
        specs = {TopicPartition(t, p.partition): OffsetSpec.latest()
                 for t, d in described.items() for p in d.partitions}
        ends = admin.list_offsets(specs, timeout=_TIMEOUT) if specs else {}
        configs = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, t) for t in names], timeout=_TIMEOUT)
    data = []
    lines = []
    for name in names:
        d = described[name]
        entries: dict[str, Any] = next((v for k, v in configs.items() if k.name == name), {})
        changed = {k: e.value for k, e in sorted(entries.items())
                   if not e.is_default and not e.is_sensitive}
        parts = [{"partition": p.partition, "leader": p.leader, "replicas": list(p.replicas),
                  "isr": list(p.isr),
                  "end_offset": ends[TopicPartition(name, p.partition)].offset}
                 for p in d.partitions]
        data.append({"topic": name, "topic_id": str(d.topic_id), "partitions": parts,
                     "configs": changed})
        lines.append(f"topic {name}  id {d.topic_id}  partitions {len(parts)}")
        for p in parts:
            lines.append(f"  partition {p['partition']:>3}  leader {p['leader']}  "
                         f"replicas {p['replicas']}  isr {p['isr']}  end {p['end_offset']}")
        for key, value in changed.items():
            lines.append(f"  config {key}={value}")
    _emit(data, as_json, lines)


@topics.command("create")
@connection_options
@click.argument("name")
@click.option("-p", "--partitions", type=int, default=1, show_default=True)
@click.option("--replication-factor", "replication", type=int, default=-1,
              help="Replicas per partition (default: the broker's).")
@click.option("-c", "--topic-config", "configs", multiple=True, metavar="KEY=VALUE",
              help="A topic config, repeatable.")
@click.option("--if-not-exists", is_flag=True, help="Succeed when the topic exists.")
@reported
def topics_create(conn: Connection, name: str, partitions: int, replication: int,
                  configs: tuple[str, ...], if_not_exists: bool) -> None:
    """Create a topic."""
    from kontrakt.clients.admin import NewTopic
    from kontrakt.errors import TopicAlreadyExistsError

    topic = NewTopic(name, partitions, replication, config=parse_pairs(configs, "--topic-config"))
    with _admin(conn) as admin:
        try:
            admin.create_topics([topic], timeout=_TIMEOUT)
        except TopicAlreadyExistsError:
            if not if_not_exists:
                raise
            click.echo(f"topic {name} exists")
            return
    click.echo(f"created topic {name} ({partitions} partitions)")


@topics.command("delete")
@connection_options
@click.argument("names", nargs=-1, required=True)
@reported
def topics_delete(conn: Connection, names: tuple[str, ...]) -> None:
    """Delete topics (and every record in them)."""
    with _admin(conn) as admin:
        admin.delete_topics(list(names), timeout=_TIMEOUT)
    for name in names:
        click.echo(f"deleted topic {name}")


@topics.command("alter")
@connection_options
@click.argument("name")
@click.option("-c", "--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Set a topic config, repeatable.")
@click.option("--delete", "deletes", multiple=True, metavar="KEY",
              help="Reset a topic config to its default, repeatable.")
@reported
def topics_alter(conn: Connection, name: str, sets: tuple[str, ...],
                 deletes: tuple[str, ...]) -> None:
    """Change a topic's configs (incrementally: the others are kept)."""
    from kontrakt.clients.admin import (
        AlterConfigOp,
        AlterConfigOpType,
        ConfigResource,
        ConfigResourceType,
    )

    ops = [AlterConfigOp(k, v) for k, v in parse_pairs(sets, "--set").items()]
    ops += [AlterConfigOp(k, None, AlterConfigOpType.DELETE) for k in deletes]
    if not ops:
        raise CliError("nothing to change: give --set KEY=VALUE or --delete KEY")
    with _admin(conn) as admin:
        admin.incremental_alter_configs({ConfigResource(ConfigResourceType.TOPIC, name): ops},
                                        timeout=_TIMEOUT)
    click.echo(f"altered topic {name}: {len(ops)} config(s)")


@topics.command("partitions")
@connection_options
@click.argument("name")
@click.argument("count", type=int)
@reported
def topics_partitions(conn: Connection, name: str, count: int) -> None:
    """Grow a topic to COUNT partitions (Kafka cannot shrink one)."""
    from kontrakt.clients.admin import NewPartitions

    with _admin(conn) as admin:
        admin.create_partitions([NewPartitions(name, count)], timeout=_TIMEOUT)
    click.echo(f"topic {name} now has {count} partitions")


# ------------------------------------------------------------------------------- groups
@click.group()
def groups() -> None:
    """List groups; describe (with lag), delete consumer groups and reset their offsets."""


@groups.command("list")
@connection_options
@click.option("--type", "types", multiple=True, metavar="TYPE",
              type=click.Choice(_GROUP_TYPES, case_sensitive=False),
              help="Only groups of this type (classic, consumer, share, streams), repeatable; "
                   "brokers with ListGroups v5+ (Kafka 3.8).")
@click.option("--state", "states", multiple=True, metavar="STATE",
              type=click.Choice(_GROUP_STATES, case_sensitive=False),
              help="Only groups in this state (e.g. Stable, Empty), repeatable; brokers with "
                   "ListGroups v4+.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@reported
def groups_list(conn: Connection, types: tuple[str, ...], states: tuple[str, ...],
                as_json: bool) -> None:
    """List the groups of every type (consumer groups of both protocols, share, streams,
    Connect's), with their states and types."""
    with _admin(conn) as admin:
        listing = admin.list_groups(types=types or None, states=states or None,
                                    timeout=_TIMEOUT)
    data = [{"group": g.group_id, "state": g.state.value, "type": g.type.value,
             "protocol_type": g.protocol_type} for g in listing]
    _emit(data, as_json, [f"{g['group']}  {g['state']}  {g['type'].lower()}" for g in data])


def _lag_rows(admin: Any, group: str) -> list[dict[str, Any]]:
    from kontrakt.clients.admin import OffsetSpec

    committed = {tp: om for tp, om in
                 admin.list_consumer_group_offsets(group, timeout=_TIMEOUT).items()
                 if om is not None}
    ends = admin.list_offsets({tp: OffsetSpec.latest() for tp in committed},
                              timeout=_TIMEOUT) if committed else {}
    rows = []
    for tp in sorted(committed, key=lambda t: (t.topic, t.partition)):
        end = ends[tp].offset
        rows.append({"topic": tp.topic, "partition": tp.partition,
                     "committed": committed[tp].offset, "end": end,
                     "lag": max(end - committed[tp].offset, 0)})
    return rows


@groups.command("describe")
@connection_options
@click.argument("group")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@reported
def groups_describe(conn: Connection, group: str, as_json: bool) -> None:
    """A group's state, members and, per partition, its committed offset, the end offset
    and the lag between them."""
    with _admin(conn) as admin:
        d = admin.describe_consumer_groups([group], timeout=_TIMEOUT)[group]
        rows = _lag_rows(admin, group)
    if d.state.value in ("Dead", "Unknown") and not rows:
        raise CliError(f"group {group!r} not found (no members and no committed offsets)")
    members = [{"member_id": m.member_id, "client_id": m.client_id, "host": m.host,
                "partitions": [f"{tp.topic}-{tp.partition}"
                               for tp in m.assignment.topic_partitions]} for m in d.members]
    # The protocol: "Classic", or "Consumer" for a KIP-848 group (with its epoch).
    data = {"group": group, "type": d.type.value, "group_epoch": d.group_epoch,
            "state": d.state.value, "assignor": d.partition_assignor,
            "members": members, "offsets": rows, "total_lag": sum(r["lag"] for r in rows)}
    epoch = "" if d.group_epoch is None else f" epoch {d.group_epoch}"
    lines = [f"group {group}  {d.type.value.lower()} protocol{epoch}  state {d.state.value}  "
             f"members {len(members)}  total lag {data['total_lag']}"]
    lines += [f"  member {m['member_id']} ({m['client_id']}@{m['host']}): "
              f"{', '.join(m['partitions']) or '-'}" for m in members]
    lines += [f"  {r['topic']}-{r['partition']}  committed {r['committed']}  end {r['end']}  "
              f"lag {r['lag']}" for r in rows]
    _emit(data, as_json, lines)


@groups.command("delete")
@connection_options
@click.argument("names", nargs=-1, required=True)
@reported
def groups_delete(conn: Connection, names: tuple[str, ...]) -> None:
    """Delete consumer groups (they must have no members)."""
    with _admin(conn) as admin:
        admin.delete_consumer_groups(list(names), timeout=_TIMEOUT)
    for name in names:
        click.echo(f"deleted group {name}")


def _parse_datetime(text: str) -> int:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(f"--to-datetime needs an ISO 8601 time (2026-11-26T10:00:00Z), "
                       f"got {text!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return int(when.timestamp() * 1000)


@groups.command("reset-offsets")
@connection_options
@click.argument("group")
@click.option("-t", "--topic", "topics_", multiple=True, required=True,
              help="A topic whose offsets to move (every partition), repeatable.")
@click.option("--to-earliest", is_flag=True, help="Move to each partition's first offset.")
@click.option("--to-latest", is_flag=True, help="Move to each partition's end.")
@click.option("--to-datetime", default=None, metavar="ISO-TIME",
              help="Move to the first offset at or after this time (UTC if no zone).")
@click.option("--shift-by", type=int, default=None, metavar="N",
              help="Move each committed offset by N (negative: back), within the log.")
@click.option("--execute", is_flag=True,
              help="Really move them (without it the command only shows the plan).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@reported
def groups_reset(conn: Connection, group: str, topics_: tuple[str, ...], to_earliest: bool,
                 to_latest: bool, to_datetime: str | None, shift_by: int | None,
                 execute: bool, as_json: bool) -> None:
    """Move a group's committed offsets. A dry run unless --execute is given."""
    from kontrakt.clients.admin import OffsetShift, OffsetSpec

    chosen = [n for n, on in (("--to-earliest", to_earliest), ("--to-latest", to_latest),
                              ("--to-datetime", to_datetime is not None),
                              ("--shift-by", shift_by is not None)) if on]
    if len(chosen) != 1:
        raise CliError("give exactly one of --to-earliest, --to-latest, --to-datetime, "
                       f"--shift-by (got {', '.join(chosen) or 'none'})")
    target: OffsetSpec | OffsetShift
    if to_earliest:
        target = OffsetSpec.earliest()
    elif to_latest:
        target = OffsetSpec.latest()
    elif to_datetime is not None:
        target = OffsetSpec.for_timestamp(_parse_datetime(to_datetime))
    else:
        assert shift_by is not None
        target = OffsetShift(shift_by)
    with _admin(conn) as admin:
        described = admin.describe_topics(list(topics_), timeout=_TIMEOUT)
        tps = [TopicPartition(t, p.partition) for t, d in described.items()
               for p in d.partitions]
        current = admin.list_consumer_group_offsets(group, tps, timeout=_TIMEOUT)
        if execute:
            d = admin.describe_consumer_groups([group], timeout=_TIMEOUT)[group]
            if d.members:
                raise CliError(f"group {group!r} has {len(d.members)} active member(s): stop "
                               "its consumers first (offsets of a live group would be "
                               "overwritten by their next commit)", EXIT_INPUT)
        # The lookups, the clamping to the log and the commit are the admin client's
        # (as kafka-consumer-groups.sh, --shift-by fails a partition with no committed
        # offset).
        plan = admin.reset_group_offsets(group, dict.fromkeys(tps, target),
                                         dry_run=not execute, timeout=_TIMEOUT)
        rows = [{"topic": tp.topic, "partition": tp.partition,
                 "current": current[tp].offset if current.get(tp) is not None else None,
                 "new": plan[tp]} for tp in sorted(plan, key=lambda t: (t.topic, t.partition))]
    lines = [f"{r['topic']}-{r['partition']}  {r['current']} -> {r['new']}" for r in rows]
    lines.append("offsets moved" if execute else "dry run: nothing changed (add --execute)")
    _emit({"group": group, "executed": execute, "offsets": rows}, as_json, lines)


# ------------------------------------------------------------------------------ cluster
@click.group(invoke_without_command=True)
@connection_options
@click.option("--api-versions", is_flag=True, help="Also list the APIs and versions "
              "the first broker supports.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
@reported
def cluster(ctx: click.Context, conn: Connection, api_versions: bool, as_json: bool) -> None:
    """The cluster id, the controller, the brokers and (optionally) their API versions;
    `cluster quorum` describes the KRaft metadata quorum."""
    if ctx.invoked_subcommand is not None:
        # The subcommand has its own options: ones given here would be silently unused.
        given = [max(p.opts, key=len) for p in ctx.command.params if p.name and
                 ctx.get_parameter_source(p.name) is click.core.ParameterSource.COMMANDLINE]
        if given:
            raise CliError(f"give {', '.join(given)} after the subcommand "
                           f"(kontrakt cluster {ctx.invoked_subcommand} ...)")
        return
    with _admin(conn) as admin:
        started = time.monotonic()
        d = admin.describe_cluster(timeout=_TIMEOUT)
        rtt_ms = (time.monotonic() - started) * 1000
        versions: dict[str, Any] = {}
        if api_versions:
            versions = _api_versions(conn)
    data: dict[str, Any] = {
        "cluster_id": d.cluster_id,
        "controller": d.controller.id if d.controller else None,
        "brokers": [{"id": n.id, "host": n.host, "port": n.port, "rack": n.rack}
                    for n in d.nodes]}
    if api_versions:
        data["api_versions"] = versions
    lines = [f"cluster {d.cluster_id}  controller {data['controller']}  "
             f"({rtt_ms:.0f} ms)"]
    lines += [f"  broker {n.id}  {n.host}:{n.port}" + (f"  rack {n.rack}" if n.rack else "")
              for n in d.nodes]
    lines += [f"  api {name}  v{v['min']}..v{v['max']}" for name, v in versions.items()]
    _emit(data, as_json, lines)


@cluster.command("quorum")
@connection_options
@click.option("--replication", is_flag=True,
              help="Also a row per voter and observer: log end offset, lag behind the "
                   "leader, last fetch and last caught-up times.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (always with every "
              "replica).")
@reported
def cluster_quorum(conn: Connection, replication: bool, as_json: bool) -> None:
    """The KRaft metadata quorum: its leader, epoch, high watermark, voters and observers
    (kafka-metadata-quorum.sh describe --status, or --replication)."""
    with _admin(conn) as admin:
        q = admin.describe_metadata_quorum(timeout=_TIMEOUT)
    data = quorum_data(q)
    lines = [f"leader {q.leader_id}  epoch {q.leader_epoch}  high watermark "
             f"{q.high_watermark}",
             f"max follower lag {_or_dash(data['max_follower_lag'])}  max follower lag time "
             f"{_or_dash(data['max_follower_lag_time_ms'])} ms",
             f"voters {[r['id'] for r in data['voters']]}  observers "
             f"{[r['id'] for r in data['observers']]}"]
    if replication:
        for r in data["voters"] + data["observers"]:
            lines.append(f"  {r['status']:<8} {r['id']:>5}  log end {r['log_end_offset']}  "
                         f"lag {_or_dash(r['lag'])}  last fetch "
                         f"{_or_dash(r['last_fetch_timestamp'])}  last caught up "
                         f"{_or_dash(r['last_caught_up_timestamp'])}")
    _emit(data, as_json, lines)


@cluster.command("unregister-broker")
@connection_options
@click.argument("broker_id", type=click.IntRange(0, 2**31 - 1))
@click.option("--execute", is_flag=True, help="Really unregister it (without it the "
              "command only shows what it would do).")
@reported
def cluster_unregister_broker(conn: Connection, broker_id: int, execute: bool) -> None:
    """Remove the registration of a broker retired for good from a KRaft cluster
    (kafka-cluster.sh unregister). Its partition replicas are not moved: reassign them
    first. A dry run unless --execute is given."""
    if not execute:
        click.echo(f"would unregister broker {broker_id}")
        click.echo("dry run: nothing changed (add --execute)")
        return
    with _admin(conn) as admin:
        admin.unregister_broker(broker_id, timeout=_TIMEOUT)
    click.echo(f"unregistered broker {broker_id}")


def _or_dash(value: Any) -> str:
    return "-" if value is None else str(value)


def quorum_data(q: Any) -> dict[str, Any]:
    """A QuorumInfo as JSON-able data, with the lags kafka-metadata-quorum.sh shows: each
    replica's log end offset behind the leader's, and the slowest voter's (None where the
    leader is not among the voters or a time is unknown)."""
    leader = next((r for r in q.voters if r.replica_id == q.leader_id), None)

    def row(r: Any, status: str) -> dict[str, Any]:
        return {"id": r.replica_id, "status": status,
                "directory_id": None if r.replica_directory_id is None
                else str(r.replica_directory_id),
                "log_end_offset": r.log_end_offset,
                "lag": None if leader is None or r.log_end_offset < 0
                else leader.log_end_offset - r.log_end_offset,
                "last_fetch_timestamp": r.last_fetch_timestamp,
                "last_caught_up_timestamp": r.last_caught_up_timestamp}

    voters = [row(r, "leader" if r is leader else "follower") for r in q.voters]
    observers = [row(r, "observer") for r in q.observers]
    lag = lag_ms = None
    if leader is not None:
        slowest = min(q.voters, key=lambda r: r.log_end_offset)
        lag = leader.log_end_offset - slowest.log_end_offset
        if slowest is leader:
            lag_ms = 0
        elif leader.last_caught_up_timestamp is not None and \
                slowest.last_caught_up_timestamp is not None:
            lag_ms = leader.last_caught_up_timestamp - slowest.last_caught_up_timestamp
    return {"leader_id": q.leader_id, "leader_epoch": q.leader_epoch,
            "high_watermark": q.high_watermark, "max_follower_lag": lag,
            "max_follower_lag_time_ms": lag_ms, "voters": voters, "observers": observers,
            "nodes": {str(n.node_id): [{"name": e.name, "host": e.host, "port": e.port}
                                       for e in n.endpoints] for n in q.nodes.values()}}


def _api_versions(conn: Connection) -> dict[str, Any]:
    import asyncio

    from kontrakt.clients import AsyncKafkaClient
    from kontrakt.protocol.messages import ApiVersionsRequest

    async def ask() -> Any:
        async with AsyncKafkaClient(conn.client_config()) as client:
            return await client.request(ApiVersionsRequest(
                client_software_name="kontrakt-cli", client_software_version="1"))

    from kontrakt.protocol.spec import registry

    known = registry()
    resp = asyncio.run(ask())
    return {(known[a.api_key].name if a.api_key in known else f"Api{a.api_key}"): {
        "key": a.api_key, "min": a.min_version, "max": a.max_version} for a in resp.api_keys}
