"""``kontrakt cluster``: the cluster's brokers and API versions, the KRaft metadata quorum
(``kafka-metadata-quorum.sh describe``), adding and removing its voters (KIP-853, as
``kafka-metadata-quorum.sh add-controller|remove-controller``) and unregistering a retired
broker (``kafka-cluster.sh unregister``). The changes are dry runs unless ``--execute`` is
given.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import click

from kontrakt.cli._admin import _TIMEOUT, DRY_RUN, _admin, _emit, _or_dash
from kontrakt.cli._common import CliError, Connection, connection_options, reported

__all__ = ["cluster"]


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
    `cluster quorum` describes the KRaft metadata quorum, `add-voter` and `remove-voter`
    change its voters."""
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
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@reported
def cluster_unregister_broker(conn: Connection, broker_id: int, execute: bool,
                              as_json: bool) -> None:
    """Remove the registration of a broker retired for good from a KRaft cluster
    (kafka-cluster.sh unregister). Its partition replicas are not moved: reassign them
    first. A dry run unless --execute is given."""
    if execute:
        with _admin(conn) as admin:
            admin.unregister_broker(broker_id, timeout=_TIMEOUT)
    _emit({"broker": broker_id, "executed": execute}, as_json,
          [f"unregistered broker {broker_id}"] if execute
          else [f"would unregister broker {broker_id}", DRY_RUN])


def _directory_id(text: str) -> uuid.UUID:
    try:
        directory = uuid.UUID(text)
    except ValueError:
        raise CliError(f"--directory-id needs a UUID (see: kontrakt cluster quorum --json), "
                       f"got {text!r}") from None
    if directory.int == 0:
        raise CliError("--directory-id cannot be the zero UUID")
    return directory


def _endpoint(text: str) -> Any:
    """``NAME://HOST:PORT`` (an IPv6 host in brackets) as a RaftVoterEndpoint."""
    from kontrakt.clients.admin import RaftVoterEndpoint

    name, sep, address = text.partition("://")
    host, colon, port = address.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not name or not colon or not host or not port.isdigit() \
            or not 0 < int(port) <= 65535:
        raise CliError(f"--endpoint needs LISTENER://HOST:PORT (e.g. CONTROLLER://c3:9093), "
                       f"got {text!r}")
    return RaftVoterEndpoint(name, host, int(port))


_VOTER_ID = click.IntRange(0, 2**31 - 1)
_DIRECTORY_HELP = ("The directory id of the controller's metadata log directory (its "
                   "meta.properties; `cluster quorum --json` lists those of the voters and "
                   "observers).")


@cluster.command("add-voter")
@connection_options
@click.argument("voter_id", metavar="CONTROLLER_ID", type=_VOTER_ID)
@click.option("--directory-id", required=True, metavar="UUID", help=_DIRECTORY_HELP)
@click.option("--endpoint", "endpoints", multiple=True, required=True,
              metavar="LISTENER://HOST:PORT",
              help="A controller listener of the new voter, repeatable (at least one).")
@click.option("--cluster-id", default=None, help="Refuse the change on any other cluster.")
@click.option("--execute", is_flag=True, help="Really add it (without it the command only "
              "shows what it would do).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@reported
def cluster_add_voter(conn: Connection, voter_id: int, directory_id: str,
                      endpoints: tuple[str, ...], cluster_id: str | None, execute: bool,
                      as_json: bool) -> None:
    """Add a controller to the KRaft voter set (KIP-853, kraft.version 1; Kafka 3.9+), as
    kafka-metadata-quorum.sh add-controller. It must already run as an observer that has
    caught up with the metadata log. A dry run unless --execute is given."""
    directory = _directory_id(directory_id)
    listeners = [_endpoint(e) for e in endpoints]
    if execute:
        with _admin(conn) as admin:
            admin.add_raft_voter(voter_id, directory, listeners, cluster_id=cluster_id,
                                 timeout=_TIMEOUT)
    shown = ", ".join(f"{e.name}://{e.host}:{e.port}" for e in listeners)
    what = f"voter {voter_id} (directory {directory}) at {shown}"
    _emit({"voter": voter_id, "directory_id": str(directory),
           "endpoints": [{"name": e.name, "host": e.host, "port": e.port} for e in listeners],
           "cluster_id": cluster_id, "executed": execute}, as_json,
          [f"added {what}"] if execute else [f"would add {what}", DRY_RUN])


@cluster.command("remove-voter")
@connection_options
@click.argument("voter_id", metavar="CONTROLLER_ID", type=_VOTER_ID)
@click.option("--directory-id", required=True, metavar="UUID", help=_DIRECTORY_HELP)
@click.option("--cluster-id", default=None, help="Refuse the change on any other cluster.")
@click.option("--execute", is_flag=True, help="Really remove it (without it the command "
              "only shows what it would do).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@reported
def cluster_remove_voter(conn: Connection, voter_id: int, directory_id: str,
                         cluster_id: str | None, execute: bool, as_json: bool) -> None:
    """Remove a controller from the KRaft voter set (KIP-853, kraft.version 1; Kafka
    3.9+), as kafka-metadata-quorum.sh remove-controller. A dry run unless --execute is
    given."""
    directory = _directory_id(directory_id)
    if execute:
        with _admin(conn) as admin:
            admin.remove_raft_voter(voter_id, directory, cluster_id=cluster_id,
                                    timeout=_TIMEOUT)
    what = f"voter {voter_id} (directory {directory})"
    _emit({"voter": voter_id, "directory_id": str(directory), "cluster_id": cluster_id,
           "executed": execute}, as_json,
          [f"removed {what}"] if execute else [f"would remove {what}", DRY_RUN])


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
