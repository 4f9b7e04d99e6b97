"""The Kontrakt source and sink on ``local-cluster[2,1,1024]``: two executor JVMs started by
the driver, each with its own Python workers. Run by ``test_spark_cluster`` in its own
interpreter (one SparkContext per process, and the tests' ``local[2]`` session may be live
in theirs).

Usage: ``python cluster_job.py BOOTSTRAP REGISTRY_URL TOPIC CHECKPOINT_DIR``. Prints one JSON
line: the driver JVM's pid, the executor JVM pids that ran the write, the batch read and
the streaming read, and the ids each read gave back.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

ROWS = 200
PARTITIONS = 2


def executor_jvm_pid() -> int:
    """The pid of the executor JVM this Python worker serves (its nearest ancestor running
    CoarseGrainedExecutorBackend), or -1 if there is none (e.g. in a local[*] driver)."""
    pid = os.getpid()
    for _ in range(8):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"CoarseGrainedExecutorBackend" in f.read():
                    return pid
            with open(f"/proc/{pid}/stat") as f:
                # The command may hold spaces and parentheses: the fields after its last ")".
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return -1
        if pid <= 1:
            return -1
    return -1


def _wait_for_executors(spark: Any, n: int, timeout: float) -> None:
    """Block until ``n`` executors have registered (they start after the SparkContext):
    tasks given out before would all go to the first one."""
    sc = spark.sparkContext._jsc.sc()
    deadline = time.monotonic() + timeout
    # getExecutorMemoryStatus counts the driver's block manager too.
    while sc.getExecutorMemoryStatus().size() < n + 1:
        if time.monotonic() > deadline:
            raise TimeoutError(f"fewer than {n} executors registered within {timeout}s")
        time.sleep(0.2)


def main(bootstrap: str, registry_url: str, topic: str, checkpoint: str) -> dict[str, Any]:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    from kontrakt.spark import register

    spark = (SparkSession.builder.master("local-cluster[2,1,1024]")
             .appName("kontrakt-local-cluster")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.pyspark.python", sys.executable)
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.sql.shuffle.partitions", "2")
             # no pandas here: plain (pickled) Python UDFs, without a warning each time
             .config("spark.sql.execution.pythonUDF.arrow.enabled", "false")
             .getOrCreate())
    try:
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        _wait_for_executors(spark, 2, 120)
        jvm = F.udf(executor_jvm_pid, LongType()).asNondeterministic()
        opts = {"kafka.bootstrap.servers": bootstrap, "schema.registry.url": registry_url,
                "key.format": "string", "value.format": "avro"}

        # The sink: 2 tasks (one per executor, both being free), each record carrying the
        # executor JVM that wrote it in a header.
        rows = (spark.range(0, ROWS, numPartitions=PARTITIONS)
                .select(F.col("id").cast("string").alias("key"),
                        F.struct(F.col("id"), F.concat(F.lit("n"), F.col("id")).alias("name"))
                        .alias("value"),
                        F.array(F.struct(F.lit("jvm").alias("key"),
                                         jvm().cast("string").cast("binary").alias("value")))
                        .alias("headers")))
        rows.write.format("kontrakt").options(**opts).option("topic", topic) \
            .mode("append").save()

        # A batch read: one task per Kafka partition.
        read = (spark.read.format("kontrakt").options(**opts).option("subscribe", topic)
                .option("includeHeaders", "true").load()
                .select(F.col("value.id").alias("id"), "headers", jvm().alias("jvm")).collect())

        # A streaming read, availableNow, into the memory sink.
        query = (spark.readStream.format("kontrakt").options(**opts)
                 .option("subscribe", topic).load()
                 .select(F.col("value.id").alias("id"), jvm().alias("jvm"))
                 .writeStream.format("memory").queryName("cluster_stream")
                 .option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        query.awaitTermination(180)
        if query.isActive:
            query.stop()
            raise TimeoutError("the availableNow query did not end within 180s")
        if query.exception() is not None:
            raise RuntimeError(f"the stream failed: {query.exception()}")
        streamed = spark.table("cluster_stream").collect()
        driver = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
        return {
            "driver_jvm": int(driver),
            "write_jvms": sorted({int(bytes(h.value)) for r in read for h in r.headers}),
            "read_jvms": sorted({r.jvm for r in read}),
            "read_ids": sorted(r.id for r in read),
            "stream_jvms": sorted({r.jvm for r in streamed}),
            "stream_ids": sorted(r.id for r in streamed),
        }
    finally:
        spark.stop()


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:5])), flush=True)
