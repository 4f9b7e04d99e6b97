"""A Spark driver of its own, started as a separate process by test_spark_stream_restart.py
so that the test can kill it (the shared in-process session cannot be killed).

``python -m tests.spark.stream_driver MODE JSON``:

* ``parquet``: a ``kontrakt`` stream (``maxOffsetsPerTrigger``) into a parquet sink with a
  checkpoint, ``trigger(availableNow=True)``; with ``result`` set, the parquet table read
  back by Spark (which keeps to the sink's commit log) is written there as JSON.
* ``eos``: a ``kontrakt`` stream into the exactly-once ``kontrakt`` sink on ``local[2,2]``
  (a task may fail once), through :class:`CrashOnceSource`, whose first attempt of
  partition 0 kills its own Python worker after writing its share.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceStreamWriter
from pyspark.sql.types import StructType

from kontrakt.spark._source import KontraktDataSource
from kontrakt.spark._writer import KontraktCommitMessage, KontraktStreamWriter


class CrashOnceWriter(KontraktStreamWriter):
    """The kontrakt stream writer, except that the first attempt of partition 0 writes its
    share (transaction open, every record acknowledged) and then kills its Python worker
    before it can report: Spark retries the task."""

    def write(self, iterator: Any) -> KontraktCommitMessage:
        message = super().write(iterator)
        ctx = TaskContext.get()
        if ctx is not None and ctx.partitionId() == 0 and ctx.attemptNumber() == 0:
            os._exit(3)
        return message


class CrashOnceSource(KontraktDataSource):
    """``kontrakt`` with :class:`CrashOnceWriter` as its stream writer."""

    @classmethod
    def name(cls) -> str:
        return "kontrakt_crash_once"

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        w = super().streamWriter(schema, overwrite)
        assert isinstance(w, KontraktStreamWriter)
        return CrashOnceWriter(w.opts, w.key, w.value, w.schema)


def _session(master: str) -> Any:
    from pyspark.sql import SparkSession

    from kontrakt.spark import register

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    spark = (SparkSession.builder.master(master).appName("kontrakt-stream-driver")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.pyspark.python", sys.executable)
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.driver.memory", "768m")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def _source(spark: Any, args: dict[str, Any]) -> Any:
    reader = (spark.readStream.format("kontrakt")
              .option("kafka.bootstrap.servers", args["bootstrap"])
              .option("subscribe", args["topic"])
              .option("kafkaConsumer.pollTimeoutMs", "20000"))
    if args.get("max_offsets"):
        reader = reader.option("maxOffsetsPerTrigger", str(args["max_offsets"]))
    return reader.load()


def run_parquet(args: dict[str, Any]) -> None:
    spark = _session("local[2]")
    df = _source(spark, args).select("partition", "offset", "value")
    query = (df.writeStream.format("parquet").option("path", args["out"])
             .option("checkpointLocation", args["checkpoint"])
             .trigger(availableNow=True).start())
    query.awaitTermination()
    if args.get("result"):
        rows = spark.read.parquet(args["out"]).select("partition", "offset").collect()
        with open(args["result"], "w") as f:
            json.dump([[r.partition, r.offset] for r in rows], f)
    spark.stop()


def run_eos(args: dict[str, Any]) -> None:
    spark = _session("local[2,2]")  # a failed task is tried again once
    spark.dataSource.register(CrashOnceSource)
    df = _source(spark, args).select("value")
    query = (df.writeStream.format("kontrakt_crash_once")
             .option("kafka.bootstrap.servers", args["bootstrap"])
             .option("topic", args["target"]).option("exactlyOnce", "true")
             .option("checkpointLocation", args["checkpoint"])
             .trigger(availableNow=True).start())
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    {"parquet": run_parquet, "eos": run_eos}[sys.argv[1]](json.loads(sys.argv[2]))
