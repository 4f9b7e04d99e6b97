"""The exactly-once sink (``exactlyOnce=true``) against Tansu, driven the way Spark drives
it: tasks' ``write`` (here ``produce`` with the task's query id, batch id and partition id,
which ``write`` takes from Spark's TaskContext), then the driver-side ``commit``; crashes are
the calls that never happen. A real Spark run with a task that kills its own worker is in
test_spark_stream_restart.py.

Broker: Tansu, the faithful one for what is checked here: it hides open transactions
(last stable offset), writes commit/abort markers, fences older epochs and stores offsets
sent in a transaction (librdkafka's mock cluster does not store those, and filters nothing
under read_committed). Tansu does not report aborted transactions in Fetch responses, so
what a read_committed consumer sees is computed from the log's markers (eos_log.py).
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pyspark", reason="needs the spark extra")

import pyarrow as pa
from pyspark.sql.types import BinaryType, StructField, StructType

from kontrakt.clients.producer import Producer
from kontrakt.errors import ConfigError, TransactionAbortableError, TransactionFatalError
from kontrakt.spark._fieldplan import FieldPlan
from kontrakt.spark._options import parse_options
from kontrakt.spark._sink_txn import TaskShare
from kontrakt.spark._writer import KontraktCommitMessage, KontraktStreamWriter
from kontrakt.testing import TansuBroker
from tests.spark.eos_log import read_log

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

QUERY = "5f0c6c1e-query"
SCHEMA = StructType([StructField("value", BinaryType(), True)])


def _writer(broker: TansuBroker, topic: str) -> KontraktStreamWriter:
    """A fresh stream writer, as each run of a query (each driver) gets."""
    opts = parse_options({"kafka.bootstrap.servers": broker.bootstrap_servers,
                          "topic": topic, "exactlyOnce": "true",
                          "kafkaConsumer.pollTimeoutMs": "20000"}, write=True)
    return KontraktStreamWriter(opts, FieldPlan("binary"), FieldPlan("binary"), SCHEMA)


def _rows(batch: int, task: int, n: int = 5) -> list[bytes]:
    return [b"b%d-t%d-%d" % (batch, task, i) for i in range(n)]


def _task(writer: KontraktStreamWriter, batch: int, task: int) -> KontraktCommitMessage:
    rows = pa.RecordBatch.from_arrays([pa.array(_rows(batch, task), pa.binary())], ["value"])
    return writer.produce(iter([rows]), TaskShare(QUERY, batch, task))


def test_a_micro_batch_replayed_after_a_crash_is_written_once(
        tansu_broker: TansuBroker, topic_name: str) -> None:
    """A crash between the tasks' end and the batch commit leaves nothing visible and the
    replay writes the batch; a crash after the batch commit but before Spark records the
    batch as done makes the replay write nothing."""
    tansu_broker.create_topic(topic_name, 2)
    bs = tansu_broker.bootstrap_servers
    first = _writer(tansu_broker, topic_name)
    messages = [_task(first, 0, t) for t in (0, 1)]
    assert all(m.records == 5 and m.transaction is not None for m in messages)
    assert read_log(bs, topic_name).committed == []  # not before the driver-side commit
    first.commit(list(messages), 0)
    batch0 = sorted(_rows(0, 0) + _rows(0, 1))
    assert sorted(read_log(bs, topic_name).committed) == batch0

    # Micro-batch 1: both tasks finish, then the driver dies before commit().
    for t in (0, 1):
        _task(first, 1, t)
    view = read_log(bs, topic_name)
    assert sorted(view.committed) == batch0
    assert sorted(view.open) == sorted(_rows(1, 0) + _rows(1, 1))

    # The restarted query replays micro-batch 1: each task fences the one before it.
    second = _writer(tansu_broker, topic_name)
    replay = [_task(second, 1, t) for t in (0, 1)]
    second.commit(list(replay), 1)
    batch1 = sorted(_rows(1, 0) + _rows(1, 1))
    view = read_log(bs, topic_name)
    assert sorted(view.committed) == sorted(batch0 + batch1)
    assert sorted(view.aborted) == batch1 and view.open == []

    # Commit ran, but the driver died before Spark wrote its commit log: replayed again,
    # every task finds its marker and writes nothing.
    third = _writer(tansu_broker, topic_name)
    again = [_task(third, 1, t) for t in (0, 1)]
    assert [(m.records, m.transaction) for m in again] == [(0, None), (0, None)]
    third.commit(list(again), 1)
    # The next micro-batch is written as usual.
    third.commit([_task(third, 2, 0)], 2)
    view = read_log(bs, topic_name)
    assert sorted(view.committed) == sorted(batch0 + batch1 + _rows(2, 0))
    assert view.open == []


def test_a_retried_task_fences_the_attempt_before_it(tansu_broker: TansuBroker,
                                                     topic_name: str) -> None:
    """The first attempt's transaction is aborted when the retry starts, and a first
    attempt that is still alive (a zombie) can neither write nor commit any more."""
    tansu_broker.create_topic(topic_name, 1)
    bs = tansu_broker.bootstrap_servers
    writer = _writer(tansu_broker, topic_name)
    txn_id = TaskShare(QUERY, 0, 0).transactional_id("kontrakt-sink")
    zombie = Producer({"bootstrap.servers": bs, "transactional.id": txn_id})
    try:
        zombie.init_transactions(10)
        zombie.begin_transaction()
        zombie.send(topic_name, b"zombie-1", partition=0)
        zombie.flush(10)
        retry = _task(writer, 0, 0)
        with pytest.raises((TransactionFatalError, TransactionAbortableError)):
            zombie.send(topic_name, b"zombie-2", partition=0).result(10)
            zombie.commit_transaction(10)
    finally:
        zombie.close(5)
    writer.commit([retry], 0)
    view = read_log(bs, topic_name)
    assert sorted(view.committed) == sorted(_rows(0, 0))
    assert view.aborted == [b"zombie-1"] and view.open == []


def test_abort_ends_the_finished_tasks_transactions(tansu_broker: TansuBroker,
                                                    topic_name: str) -> None:
    """When Spark aborts a micro-batch, the finished tasks' records are aborted at once
    (not left open until transaction.timeout.ms, holding read_committed readers back)."""
    tansu_broker.create_topic(topic_name, 1)
    writer = _writer(tansu_broker, topic_name)
    writer.abort([_task(writer, 0, 0), None], 0)
    view = read_log(tansu_broker.bootstrap_servers, topic_name)
    assert view.committed == [] and view.open == [] and sorted(view.aborted) == _rows(0, 0)


def test_a_batch_write_commits_every_task_at_the_end(spark: Any, tansu_broker: TansuBroker,
                                                     topic_name: str) -> None:
    """A batch write with exactlyOnce: each of the 3 tasks writes in a transaction of its
    own, and the job's commit commits them all (nothing is left open)."""
    tansu_broker.create_topic(topic_name, 2)
    rows = [(b"k%d" % i, b"v%d" % i) for i in range(30)]
    (spark.createDataFrame(rows, "key binary, value binary").repartition(3)
     .write.format("kontrakt")
     .option("kafka.bootstrap.servers", tansu_broker.bootstrap_servers)
     .option("topic", topic_name).option("exactlyOnce", "true").mode("append").save())
    view = read_log(tansu_broker.bootstrap_servers, topic_name)
    assert sorted(view.committed) == sorted(v for _, v in rows)
    assert view.open == [] and view.aborted == []


@pytest.mark.parametrize(("options", "message"), [
    ({"exactlyOnce": "true"}, "exactlyOnce=true needs the 'topic' option"),
    ({"topic": "t", "exactlyOnce": "yes"}, "'exactlyonce' must be true or false"),
    ({"topic": "t", "kafka.transactional.id": "x"}, "'kafka.transactional.id' is not"),
    ({"topic": "t", "transactionalIdPrefix": " "}, "'transactionalIdPrefix' must not be"),
])
def test_bad_exactly_once_options(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_options({"kafka.bootstrap.servers": "127.0.0.1:9", **options}, write=True)


def test_exactly_once_is_for_writes() -> None:
    with pytest.raises(ConfigError, match="'exactlyOnce' is for writes only"):
        parse_options({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t",
                       "exactlyOnce": "true"})
