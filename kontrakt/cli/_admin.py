"""``kontrakt topics`` and ``kontrakt groups``: topic and group administration, and the
helpers every administration command shares (``_admin``, ``_emit``, ``_TIMEOUT``).

``groups reset-offsets`` and ``topics move-replica`` are dry runs unless ``--execute`` is
given (as Kafka's own ``kafka-consumer-groups.sh``); ``reset-offsets`` refuses to move the
offsets of a group that has members.
"""

from __future__ import annotations

import json
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

__all__ = ["groups", "topics"]

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


#: the last line of a command that changes nothing without --execute
DRY_RUN = "dry run: nothing changed (add --execute)"


def _or_dash(value: Any) -> str:
    return "-" if value is None else str(value)


def _opt_list(values: tuple[int, ...] | None) -> list[int] | None:
    return None if values is None else list(values)


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
@click.option("--elr", is_flag=True, help="Also each partition's eligible leader replicas "
              "and last known ELR (KIP-966: brokers with DescribeTopicPartitions, Kafka "
              "3.8+; '-' from older ones).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@reported
def topics_describe(conn: Connection, names: tuple[str, ...], elr: bool,
                    as_json: bool) -> None:
    """Partitions (leader, replicas, in-sync replicas), end offsets and the non-default
    configs of each topic."""
    from kontrakt.clients.admin import ConfigResource, ConfigResourceType, OffsetSpec

    with _admin(conn) as admin:
        # From brokers with DescribeTopicPartitions (Kafka 3.8+) it carries the ELR; from
        # older ones (Metadata) the ELR columns are None.
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
                 | ({"elr": _opt_list(p.eligible_leader_replicas),
                     "last_known_elr": _opt_list(p.last_known_elr)} if elr else {})
                 for p in d.partitions]
        data.append({"topic": name, "topic_id": str(d.topic_id), "partitions": parts,
                     "configs": changed})
        lines.append(f"topic {name}  id {d.topic_id}  partitions {len(parts)}")
        for p in parts:
            lines.append(f"  partition {p['partition']:>3}  leader {p['leader']}  "
                         f"replicas {p['replicas']}  isr {p['isr']}  end {p['end_offset']}"
                         + (f"  elr {_or_dash(p['elr'])}  last known elr "
                            f"{_or_dash(p['last_known_elr'])}" if elr else ""))
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


def _replicas(admin: Any, name: str, partitions: tuple[int, ...]) -> list[Any]:
    """Every replica of the topic's partitions (those asked for, else all)."""
    from kontrakt.clients.admin import TopicPartitionReplica

    described = admin.describe_topics([name], timeout=_TIMEOUT)[name]
    known = {p.partition: p for p in described.partitions}
    missing = sorted(set(partitions) - set(known))
    if missing:
        raise CliError(f"topic {name} has no partition {missing[0]} "
                       f"({len(known)} partitions)")
    return [TopicPartitionReplica(name, p, broker)
            for p in sorted(partitions or known) for broker in known[p].replicas]


@topics.command("log-dirs")
@connection_options
@click.argument("name")
@click.option("-p", "--partition", "partitions", multiple=True, type=click.IntRange(min=0),
              help="Only this partition, repeatable (default: every partition).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@reported
def topics_log_dirs(conn: Connection, name: str, partitions: tuple[int, ...],
                    as_json: bool) -> None:
    """The log directory of each replica of a topic on its broker, and the one it is
    moving to (see `topics move-replica`), with how far each lags the log end."""
    with _admin(conn) as admin:
        replicas = _replicas(admin, name, partitions)
        dirs = admin.describe_replica_log_dirs(replicas, timeout=_TIMEOUT)
    data = [{"topic": r.topic, "partition": r.partition, "broker": r.broker_id,
             "log_dir": d.current_replica_log_dir, "offset_lag": d.current_replica_offset_lag,
             "future_log_dir": d.future_replica_log_dir,
             "future_offset_lag": d.future_replica_offset_lag}
            for r, d in ((r, dirs[r]) for r in replicas)]
    lines = [f"{r['topic']}-{r['partition']}  broker {r['broker']}  dir "
             f"{r['log_dir'] or '-'}  lag {r['offset_lag']}" + (
                 f"  moving to {r['future_log_dir']} (lag {r['future_offset_lag']})"
                 if r["future_log_dir"] else "") for r in data]
    _emit(data, as_json, lines)


@topics.command("move-replica")
@connection_options
@click.argument("name")
@click.option("-p", "--partition", required=True, type=click.IntRange(min=0))
@click.option("--broker", "broker_id", required=True, type=click.IntRange(min=0),
              help="The broker whose replica to move.")
@click.option("--to-dir", required=True, metavar="PATH",
              help="The log directory of that broker to move it to (absolute path).")
@click.option("--execute", is_flag=True,
              help="Really move it (without it the command only shows what it would do).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@reported
def topics_move_replica(conn: Connection, name: str, partition: int, broker_id: int,
                        to_dir: str, execute: bool, as_json: bool) -> None:
    """Move a partition's replica to another log directory of its broker (as
    kafka-reassign-partitions.sh with log_dirs, KIP-113): the broker copies it in the
    background and switches over once it has caught up; follow it with `topics log-dirs`.
    A dry run unless --execute is given."""
    from kontrakt.clients.admin import TopicPartitionReplica

    replica = TopicPartitionReplica(name, partition, broker_id)
    with _admin(conn) as admin:
        d = admin.describe_replica_log_dirs([replica], timeout=_TIMEOUT)[replica]
        if d.current_replica_log_dir is None:
            raise CliError(f"broker {broker_id} holds no replica of {name}-{partition}")
        if execute:
            admin.alter_replica_log_dirs({replica: to_dir}, timeout=_TIMEOUT)
    what = f"{name}-{partition} on broker {broker_id} from {d.current_replica_log_dir} to " \
        f"{to_dir}"
    _emit({"topic": name, "partition": partition, "broker": broker_id,
           "log_dir": d.current_replica_log_dir, "to_dir": to_dir, "executed": execute},
          as_json, [f"moving {what} (see: kontrakt topics log-dirs {name})"] if execute
          else [f"would move {what}", DRY_RUN])


# ------------------------------------------------------------------------------- groups
@click.group()
def groups() -> None:
    """List groups; describe them (consumer groups with lag, share groups), delete consumer
    groups and reset their offsets."""


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
    """A consumer group's state, members and, per partition, its committed offset, the end
    offset and the lag between them; a share group's (KIP-932) state, epochs, assignor and
    members with their partitions."""
    from kontrakt.clients.admin import ConsumerGroupType

    with _admin(conn) as admin:
        # ListGroups names a group's type (v5+; before, its protocol type says "share"):
        # a share group is described with ShareGroupDescribe, as the consumer-group APIs
        # answer GROUP_ID_NOT_FOUND for it.
        listed = next((g for g in admin.list_groups(timeout=_TIMEOUT)
                       if g.group_id == group), None)
        if listed is not None and (listed.type is ConsumerGroupType.SHARE
                                   or listed.protocol_type == "share"):
            share = admin.describe_share_groups([group], timeout=_TIMEOUT)[group]
            _emit_share_group(share, as_json)
            return
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


def _emit_share_group(d: Any, as_json: bool) -> None:
    members = [{"member_id": m.member_id, "client_id": m.client_id, "host": m.host,
                "rack": m.rack_id, "member_epoch": m.member_epoch,
                "subscription": list(m.subscription),
                "partitions": [f"{tp.topic}-{tp.partition}"
                               for tp in m.assignment.topic_partitions]} for m in d.members]
    data = {"group": d.group_id, "type": "Share", "state": d.state.value,
            "group_epoch": d.group_epoch,
            "target_assignment_epoch": d.target_assignment_epoch,
            "assignor": d.partition_assignor,
            "coordinator": None if d.coordinator is None else d.coordinator.id,
            "members": members}
    lines = [f"group {d.group_id}  share group epoch {d.group_epoch}  assignment epoch "
             f"{d.target_assignment_epoch}  assignor {d.partition_assignor or '-'}  state "
             f"{d.state.value}  members {len(members)}"]
    lines += [f"  member {m['member_id']} ({m['client_id']}@{m['host']}) epoch "
              f"{m['member_epoch']}  subscribed {', '.join(m['subscription']) or '-'}: "
              f"{', '.join(m['partitions']) or '-'}" for m in members]
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
    lines.append("offsets moved" if execute else DRY_RUN)
    _emit({"group": group, "executed": execute, "offsets": rows}, as_json, lines)
