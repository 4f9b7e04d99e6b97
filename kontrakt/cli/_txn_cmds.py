"""``kontrakt transactions``: what ``kafka-transactions.sh`` does (list, describe,
describe-producers, find-hanging, abort, force-terminate) and fencing (KIP-618).

The commands that change the cluster (``abort``, ``fence``, ``force-terminate``) say what
they would do and change nothing unless ``--execute`` is given, as ``groups
reset-offsets``.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import click

from kontrakt._types import TopicPartition
from kontrakt.cli._admin import _TIMEOUT, DRY_RUN, _admin, _emit, _or_dash
from kontrakt.cli._common import CliError, Connection, connection_options, reported

__all__ = ["transactions"]

def _when(ms: int) -> str:
    """Broker wall-clock ms as UTC ISO 8601, ``-`` for the -1 of "none"."""
    if ms < 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec="milliseconds")


def _partitions(admin: Any, topic: str, partitions: tuple[int, ...]) -> list[TopicPartition]:
    """The partitions asked for, else every partition of the topic."""
    if partitions:
        return [TopicPartition(topic, p) for p in partitions]
    described = admin.describe_topics([topic], timeout=_TIMEOUT)[topic]
    return [TopicPartition(topic, p.partition) for p in described.partitions]


@click.group()
def transactions() -> None:
    """List, describe, find hanging and abort transactions; fence producers."""


@transactions.command("list")
@connection_options
@click.option("--state", "states", multiple=True, metavar="STATE",
              help="Only transactions in this state (e.g. Ongoing), repeatable.")
@click.option("--producer-id", "producer_ids", multiple=True, type=int, metavar="ID",
              help="Only this producer's transaction, repeatable.")
@click.option("--duration-filter", "duration_ms", type=click.IntRange(min=0), default=None,
              metavar="MS", help="Only transactions open longer than MS (brokers with "
              "ListTransactions v1+).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@reported
def transactions_list(conn: Connection, states: tuple[str, ...],
                      producer_ids: tuple[int, ...], duration_ms: int | None,
                      as_json: bool) -> None:
    """The transactional ids every broker's transaction coordinator knows, with their
    producer ids and states."""
    with _admin(conn) as admin:
        listing = admin.list_transactions(states=states or None,
                                          producer_ids=producer_ids or None,
                                          duration_filter_ms=duration_ms, timeout=_TIMEOUT)
    data = [{"transactional_id": t.transactional_id, "producer_id": t.producer_id,
             "state": t.state} for t in listing]
    _emit(data, as_json, [f"{t['transactional_id']}  producer {t['producer_id']}  "
                          f"{t['state']}" for t in data])


@transactions.command("describe")
@connection_options
@click.argument("transactional_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@reported
def transactions_describe(conn: Connection, transactional_id: str, as_json: bool) -> None:
    """A transactional id as its coordinator describes it: state, producer id and epoch,
    timeout, when the open transaction began and its partitions."""
    with _admin(conn) as admin:
        d = admin.describe_transactions([transactional_id], timeout=_TIMEOUT)[
            transactional_id]
    parts = [f"{tp.topic}-{tp.partition}" for tp in
             sorted(d.topic_partitions, key=lambda t: (t.topic, t.partition))]
    data = {"transactional_id": d.transactional_id, "coordinator": d.coordinator_id,
            "state": d.state, "producer_id": d.producer_id,
            "producer_epoch": d.producer_epoch,
            "transaction_timeout_ms": d.transaction_timeout_ms,
            "transaction_start_time_ms": d.transaction_start_time_ms, "partitions": parts}
    lines = [f"transaction {d.transactional_id}  coordinator {d.coordinator_id}  "
             f"state {d.state}",
             f"  producer {d.producer_id}  epoch {d.producer_epoch}  timeout "
             f"{d.transaction_timeout_ms} ms  started {_when(d.transaction_start_time_ms)}",
             f"  partitions {', '.join(parts) or '-'}"]
    _emit(data, as_json, lines)


@transactions.command("producers")
@connection_options
@click.argument("topic")
@click.option("-p", "--partition", "partitions", multiple=True,
              type=click.IntRange(min=0), help="Only this partition, repeatable (default: "
              "every partition).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@reported
def transactions_producers(conn: Connection, topic: str, partitions: tuple[int, ...],
                           as_json: bool) -> None:
    """The active (idempotent or transactional) producers of a topic's partitions, as
    their leaders know them (kafka-transactions.sh describe-producers). A producer with a
    transaction start offset has an open transaction there."""
    with _admin(conn) as admin:
        tps = _partitions(admin, topic, partitions)
        states = admin.describe_producers(tps, timeout=_TIMEOUT)
    data = [{"topic": tp.topic, "partition": tp.partition, "producer_id": s.producer_id,
             "producer_epoch": s.producer_epoch, "last_sequence": s.last_sequence,
             "last_timestamp": s.last_timestamp, "coordinator_epoch": s.coordinator_epoch,
             "transaction_start_offset": None if s.current_transaction_start_offset < 0
             else s.current_transaction_start_offset}
            for tp in sorted(states, key=lambda t: t.partition) for s in states[tp]]
    lines = [f"{r['topic']}-{r['partition']}  producer {r['producer_id']}  epoch "
             f"{r['producer_epoch']}  coordinator epoch {r['coordinator_epoch']}  "
             f"last sequence {r['last_sequence']}  last write {_when(r['last_timestamp'])}  "
             f"transaction start {_or_dash(r['transaction_start_offset'])}" for r in data]
    _emit(data, as_json, lines or [f"no active producers on {topic}"])


@transactions.command("find-hanging")
@connection_options
@click.option("--broker", "brokers", multiple=True, type=int, metavar="ID",
              help="Look at the partitions with a replica on this broker, repeatable.")
@click.option("-t", "--topic", default=None, help="Look at this topic's partitions.")
@click.option("-p", "--partition", "partitions", multiple=True,
              type=click.IntRange(min=0), help="Only this partition of --topic, repeatable.")
@click.option("--max-transaction-timeout", "max_ms", type=click.IntRange(min=0),
              default=900000, show_default=True, metavar="MS",
              help="The brokers' transaction.max.timeout.ms: an open transaction older "
                   "than this should have been ended by its coordinator.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@reported
def transactions_find_hanging(conn: Connection, brokers: tuple[int, ...],
                              topic: str | None, partitions: tuple[int, ...], max_ms: int,
                              as_json: bool) -> None:
    """Open transactions that their coordinators do not know, which keep a partition's
    last stable offset from moving (kafka-transactions.sh find-hanging; default: every
    partition of every topic). Abort each with `transactions abort`."""
    if brokers and topic is not None:
        raise CliError("give --broker or --topic, not both")
    if partitions and topic is None:
        raise CliError("--partition needs --topic")
    with _admin(conn) as admin:
        tps = _partitions(admin, topic, partitions) if topic is not None else None
        hanging = admin.find_hanging_transactions(
            tps, broker_ids=brokers or None, max_transaction_timeout_ms=max_ms,
            timeout=_TIMEOUT)
    data = [{"topic": h.topic_partition.topic, "partition": h.topic_partition.partition,
             "producer_id": h.producer_id, "producer_epoch": h.producer_epoch,
             "coordinator_epoch": h.coordinator_epoch,
             "start_offset": h.current_transaction_start_offset,
             "last_timestamp": h.last_timestamp} for h in hanging]
    lines = [f"{r['topic']}-{r['partition']}  producer {r['producer_id']}  epoch "
             f"{r['producer_epoch']}  coordinator epoch {r['coordinator_epoch']}  "
             f"start offset {r['start_offset']}  last write {_when(r['last_timestamp'])}"
             for r in data]
    _emit(data, as_json, lines or ["no hanging transactions"])


@transactions.command("abort")
@connection_options
@click.option("-t", "--topic", required=True, help="The partition's topic.")
@click.option("-p", "--partition", required=True, type=click.IntRange(min=0))
@click.option("--start-offset", type=click.IntRange(min=0), default=None, metavar="OFFSET",
              help="The open transaction that starts at this offset (its producer and "
                   "epochs are looked up on the partition's leader).")
@click.option("--producer-id", type=click.IntRange(min=0), default=None, metavar="ID",
              help="The producer whose transaction to abort (with --producer-epoch and "
                   "--coordinator-epoch).")
@click.option("--producer-epoch", type=click.IntRange(0, 2**15 - 1), default=None,
              metavar="EPOCH")
@click.option("--coordinator-epoch", type=click.IntRange(-1, 2**31 - 1), default=None,
              metavar="EPOCH")
@click.option("--execute", is_flag=True,
              help="Really abort it (without it the command only shows what it would do).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@reported
def transactions_abort(conn: Connection, topic: str, partition: int,
                       start_offset: int | None, producer_id: int | None,
                       producer_epoch: int | None, coordinator_epoch: int | None,
                       execute: bool, as_json: bool) -> None:
    """Abort a hanging transaction on one partition by writing an abort marker there
    (kafka-transactions.sh abort; needs CLUSTER_ACTION permission). Name it by --start-offset
    or by --producer-id, --producer-epoch and --coordinator-epoch. A dry run unless
    --execute is given."""
    from kontrakt.clients.admin import AbortTransactionSpec

    by_producer = (producer_id, producer_epoch, coordinator_epoch)
    if (start_offset is None) == all(x is None for x in by_producer):
        raise CliError("give --start-offset, or --producer-id with --producer-epoch and "
                       "--coordinator-epoch (one of the two)")
    tp = TopicPartition(topic, partition)
    where = f"{topic}-{partition}"
    with _admin(conn) as admin:
        if start_offset is None:
            if any(x is None for x in by_producer):
                raise CliError("--producer-id needs --producer-epoch and --coordinator-epoch "
                               "(see `kontrakt transactions producers`)")
            assert producer_id is not None and producer_epoch is not None
            assert coordinator_epoch is not None
            spec = AbortTransactionSpec(tp, producer_id, producer_epoch, coordinator_epoch)
        else:
            found = [s for s in admin.describe_producers([tp], timeout=_TIMEOUT)[tp]
                     if s.current_transaction_start_offset == start_offset]
            if len(found) != 1:
                raise CliError(f"{len(found) or 'no'} open transactions start at offset "
                               f"{start_offset} on {where}" + (
                                   ": name one with --producer-id" if found else ""))
            s = found[0]
            spec = AbortTransactionSpec(tp, s.producer_id, s.producer_epoch,
                                        s.coordinator_epoch)
        if execute:
            admin.abort_transaction(spec, timeout=_TIMEOUT)
    what = (f"producer {spec.producer_id} (epoch {spec.producer_epoch}, coordinator epoch "
            f"{spec.coordinator_epoch}) on {where}")
    _emit({"topic": topic, "partition": partition, "producer_id": spec.producer_id,
           "producer_epoch": spec.producer_epoch,
           "coordinator_epoch": spec.coordinator_epoch, "executed": execute}, as_json,
          [f"aborted the transaction of {what}"] if execute else
          [f"would abort the transaction of {what}", DRY_RUN])


def _fence(conn: Connection, ids: list[str], execute: bool, as_json: bool,
           verb: str) -> None:
    if not execute:
        _emit({"transactional_ids": ids, "executed": False}, as_json,
              [f"would {verb} {tid}: its producer is fenced and its open transaction "
               "aborted" for tid in ids] + [DRY_RUN])
        return
    with _admin(conn) as admin:
        done = admin.fence_producers(ids, timeout=_TIMEOUT)
    data = [{"transactional_id": tid, "producer_id": done[tid].producer_id,
             "producer_epoch": done[tid].producer_epoch} for tid in ids]
    _emit({"transactional_ids": ids, "executed": True, "fenced": data}, as_json,
          [f"{verb}d {r['transactional_id']}: producer {r['producer_id']} now at epoch "
           f"{r['producer_epoch']}" for r in data])


@transactions.command("fence")
@connection_options
@click.argument("transactional_ids", nargs=-1, required=True)
@click.option("--execute", is_flag=True,
              help="Really fence them (without it the command only shows what it would do).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@reported
def transactions_fence(conn: Connection, transactional_ids: tuple[str, ...], execute: bool,
                       as_json: bool) -> None:
    """Fence the producers of transactional ids: each id's coordinator bumps its epoch,
    aborting any open transaction, and a producer still using the id fails on its next
    write (KIP-618; needs WRITE on each id). A dry run unless --execute is given."""
    ids = list(dict.fromkeys(transactional_ids))
    _fence(conn, ids, execute, as_json, "fence")


@transactions.command("force-terminate")
@connection_options
@click.argument("transactional_id")
@click.option("--execute", is_flag=True,
              help="Really abort it (without it the command only shows what it would do).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@reported
def transactions_force_terminate(conn: Connection, transactional_id: str, execute: bool,
                                 as_json: bool) -> None:
    """Abort the ongoing transaction of a transactional id its coordinator knows, whatever
    its producer does (kafka-transactions.sh force-terminate, KIP-939): the same as
    `fence` for one id. A dry run unless --execute is given."""
    _fence(conn, [transactional_id], execute, as_json, "force-terminate")
