"""Spark source read throughput: binary reads and Avro decoded into structs, side by side.

Setup: a Tansu broker and the embedded Schema Registry are started; two topics with
``--partitions`` partitions get ``--records`` records each (written once with
confluent-kafka): raw 60-byte values, and Confluent-framed Avro ``Order`` records
(id long, customer string, qty int, price double, note [null, string]). A ``local[2]``
SparkSession then reads, ``--rounds`` times interleaved (best round counts):

* ``binary count``: ``value.format=binary``, ``count()``;
* ``avro count``: ``value.format=avro``, ``count()``;
* ``avro sum(qty)``: ``value.format=avro``, ``sum(value.qty)`` (checked against the sum
  written); ``json sum(qty)`` / ``protobuf sum(qty)``: the same records as JSON Schema and
  Protobuf (two more topics).

Every read produces all columns (the data-source API has no column pruning), so count()
measures the whole read. Figures are rows/s of the whole query, wall clock. With ``--cpu``
each query's CPU time is printed too, split by process (from /proc: the Tansu broker, the
Spark JVM, its Python workers, this driver process) as ns a row: on a shared machine the
figures that say where a read's time goes.

``--task`` measures one Spark task instead, in this process and without Spark: the
reader's ``read_range`` over one partition's whole range (consumer, columns, decoding,
the Arrow record batches Spark would receive) for binary, Avro, JSON and Protobuf, best of
``--rounds``, as ns a record of wall clock and of this process's CPU time (all its
threads; with ``--cpu`` the broker's as well): the figures to compare code changes by on
a shared machine (no JVM, no scheduling).

``--write-task`` measures one sink task the same way: ``_ProduceTask.produce`` over
Arrow record batches of 10,000 rows (Spark's ``arrow.maxRecordsPerBatch``, built before
the clock starts) into a topic of ``--partitions`` partitions, flushed and every record
checked: ``binary`` (60-byte values, the bulk append), ``binary send`` (the same
through ``Producer.send`` record by record), ``avro`` (the ``Order`` struct column
encoded column-wise) and ``avro rows`` (the same through the row path: ``Row`` -> dict
-> ``AvroSerializer``, and ``send``); ``json`` and ``json rows`` likewise for the
``Order`` JSON Schema derived from the column (``JSONSerializer``, validating each
document, on the row path).

``--write`` measures Spark writes instead (``local[2]``, ``spark.range`` split in 2
partitions, a fresh topic of ``--partitions`` partitions each round): ``binary write``
(60-byte values) and ``avro write`` (the ``Order`` struct built by the JVM, encoded by
the sink), rows/s of the whole ``save()``.

Run:  .venv/bin/python benchmarks/spark.py [--records 500000] [--partitions 2] [--rounds 3] [--cpu]
      .venv/bin/python benchmarks/spark.py --write [--records 500000] [--partitions 2]
      .venv/bin/python benchmarks/spark.py --task [--records 200000] [--partitions 1]
      .venv/bin/python benchmarks/spark.py --write-task [--records 200000] [--partitions 2]
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kontrakt.registry import Schema, SchemaRegistryClient
from kontrakt.registry.server import RegistryServer
from kontrakt.testing import TansuBroker

ROOT = str(Path(__file__).resolve().parent.parent)

ORDER = ('{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}, '
         '{"name": "customer", "type": "string"}, {"name": "qty", "type": "int"}, '
         '{"name": "price", "type": "double"}, {"name": "note", "type": ["null", "string"]}]}')


def produce(bootstrap: str, topic: str, partitions: int, values: Callable[[int], bytes],
            count: int) -> None:
    import confluent_kafka

    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                                  "batch.num.messages": 10000, "batch.size": 1_000_000})
    for i in range(count):
        value = values(i)
        while True:
            try:
                p.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
    if p.flush(120):
        raise RuntimeError("records left unsent")


def avro_values(schema_id: int) -> Callable[[int], bytes]:
    import json

    from fastavro import parse_schema, schemaless_writer

    parsed = parse_schema(json.loads(ORDER))
    prefix = b"\0" + schema_id.to_bytes(4, "big")

    def value(i: int) -> bytes:
        out = io.BytesIO()
        out.write(prefix)
        schemaless_writer(out, parsed, {"id": i, "customer": f"customer-{i % 1000}",
                                        "qty": i % 7, "price": i * 0.25,
                                        "note": None if i % 3 else "gift wrap"})
        return out.getvalue()
    return value


ORDER_JSON = ('{"type": "object", "properties": {"id": {"type": "integer"}, "customer": '
              '{"type": "string"}, "qty": {"type": "integer"}, "price": {"type": "number"}, '
              '"note": {"type": ["null", "string"]}}}')
ORDER_PROTO = ('syntax = "proto3"; message Order { int64 id = 1; string customer = 2; '
               'int32 qty = 3; double price = 4; optional string note = 5; }')


def json_or_proto_values(fmt: str, schema_id: int) -> Callable[[int], bytes]:
    """The Order records as Confluent-framed JSON (compact) or Protobuf (message 0)."""
    import json

    prefix = b"\0" + schema_id.to_bytes(4, "big")
    if fmt == "json":
        return lambda i: prefix + json.dumps(
            {"id": i, "customer": f"customer-{i % 1000}", "qty": i % 7, "price": i * 0.25,
             "note": None if i % 3 else "gift wrap"}, separators=(",", ":")).encode()
    from google.protobuf.message_factory import GetMessageClass

    from kontrakt.spark._fieldplan import proto_file

    cls = GetMessageClass(proto_file(ORDER_PROTO, ()).message_types_by_name["Order"])
    return lambda i: prefix + b"\0" + cls(
        id=i, customer=f"customer-{i % 1000}", qty=i % 7, price=i * 0.25,
        **({} if i % 3 else {"note": "gift wrap"})).SerializeToString()


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_times() -> dict[int, tuple[int, str, float]]:
    """Every process's (parent pid, command name, CPU seconds: its own and its reaped
    children's) from /proc."""
    out: dict[int, tuple[int, str, float]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        # utime, stime, cutime, cstime: fields 14-17 of stat(5), 11-14 after the comm
        ticks = sum(int(x) for x in fields[11:15])
        out[int(name)] = (int(fields[1]), comm, ticks / _TICK)
    return out


def cpu_split(broker_pid: int) -> dict[str, float]:
    """CPU seconds so far of this benchmark's processes by role: ``broker`` (Tansu and
    its children), ``jvm`` (the Spark JVM), ``python workers`` (the JVM's Python
    descendants: daemon, workers, planner runners) and ``driver`` (this process: the
    PySpark driver and the in-process registry). A process that exited counts in its
    parent's reaped children's time, so differences of two calls are exact."""
    procs = _proc_times()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in procs.items():
        children.setdefault(ppid, []).append(pid)

    def tree(root: int) -> list[int]:
        todo, seen = [root], []
        while todo:
            pid = todo.pop()
            seen.append(pid)
            todo += children.get(pid, [])
        return seen

    split = {"broker": 0.0, "jvm": 0.0, "python workers": 0.0, "driver": 0.0}
    me = os.getpid()
    broker = set(tree(broker_pid))
    for pid in broker:
        split["broker"] += procs.get(pid, (0, "", 0.0))[2]
    for pid in tree(me):
        if pid in broker:
            continue
        ppid, comm, cpu = procs[pid]
        if pid == me:
            # the reaped children of the driver are the JVM's launcher scripts
            split["driver"] += cpu
        elif comm == "java":
            # its own threads only; its Python descendants are counted below
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            fields = stat[stat.rindex(")") + 2:].split()
            own = (int(fields[11]) + int(fields[12])) / _TICK
            split["jvm"] += own
            split["python workers"] += cpu - own
        elif comm.startswith("python"):
            split["python workers"] += cpu
        else:
            split["jvm"] += cpu  # launcher shells
    return split


def session() -> Any:
    from pyspark.sql import SparkSession

    from kontrakt.spark import register

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    # The Python workers must import this checkout's kontrakt, not an installed one.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    spark = (SparkSession.builder.master("local[2]").appName("kontrakt-bench")
             .config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.pyspark.python", sys.executable)
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.driver.memory", "1g")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def task_rates(bootstrap: str, registry: str, topics: dict[str, tuple[str, str]],
               rounds: int, broker_pid: int | None = None) -> None:
    """One task's ``read_range`` per (name: (topic, value format)), in this process."""
    from kontrakt.spark._options import parse_options
    from kontrakt.spark._plan import plan_ranges, with_topics
    from kontrakt.spark._source import resolve_plans
    from kontrakt.spark._task import read_range

    for name, (topic, fmt) in topics.items():
        opts = with_topics(parse_options({
            "kafka.bootstrap.servers": bootstrap, "schema.registry.url": registry,
            "subscribe": topic, "value.format": fmt}))
        key, value = resolve_plans(opts)
        rng = plan_ranges(opts)[0]
        best = cpu = broker_cpu = float("inf")
        for _ in range(rounds):
            b0 = cpu_split(broker_pid)["broker"] if broker_pid else 0.0
            t = time.perf_counter()
            c = time.process_time()
            rows = sum(b.num_rows for b in read_range(opts, key, value, rng))
            cpu = min(cpu, time.process_time() - c)
            if broker_pid:
                broker_cpu = min(broker_cpu, cpu_split(broker_pid)["broker"] - b0)
            took = time.perf_counter() - t
            if rows != rng.end - rng.start:
                raise RuntimeError(f"{name}: {rows} rows, expected {rng.end - rng.start}")
            best = min(best, took)
        # CPU time (this process, all threads: the consumer's loop thread too) is what a
        # shared machine's load distorts least.
        print(f"  task {name:8s} {rows / best:10,.0f} rows/s wall  {best / rows * 1e9:7,.0f} "
              f"ns/row wall  {cpu / rows * 1e9:7,.0f} ns/row CPU" + (
                  f" (broker {broker_cpu / rows * 1e9:,.0f})" if broker_pid else "")
              + f"  ({rows:,} rows, load "
              f"{os.getloadavg()[0]:.1f})", flush=True)


def write_task_rates(broker: Any, registry: str, n: int, partitions: int,
                     rounds: int) -> None:
    """One sink task's ``produce`` per case, in this process (see the module docstring)."""
    import pyarrow as pa
    from pyspark.sql.types import BinaryType, StructField, StructType

    from kontrakt.spark import _encoders, _writer
    from kontrakt.spark._arrow import arrow_type
    from kontrakt.spark._json_types import json_mapping
    from kontrakt.spark._options import parse_options
    from kontrakt.spark._types import avro_mapping

    order = avro_mapping(ORDER).data_type
    order_json = json_mapping(ORDER_JSON).data_type
    step = 10_000
    cases: dict[str, tuple[str, Any]] = {
        "binary": ("binary", BinaryType()), "binary send": ("binary", BinaryType()),
        "avro": ("avro", order), "avro rows": ("avro", order),
        "json": ("json", order_json), "json rows": ("json", order_json)}
    column_encoder = _encoders.avro_column_encoder
    json_encoder = _encoders.json_column_encoder
    bulk = _writer.bulk_partitioner
    for name, (fmt, data_type) in cases.items():
        schema = StructType([StructField("value", data_type)])
        if fmt == "binary":
            values: list[Any] = [b"%060d" % i for i in range(n)]
        else:
            values = [{"id": i, "customer": f"customer-{i % 1000}", "qty": i % 7,
                       "price": i * 0.25, "note": None if i % 3 else "gift wrap"}
                      for i in range(n)]
        kind = arrow_type(data_type)
        batches = [pa.RecordBatch.from_arrays([pa.array(values[i:i + step], kind)],
                                              schema=pa.schema([("value", kind)]))
                   for i in range(0, n, step)]
        best = cpu = float("inf")
        _encoders.avro_column_encoder = (  # type: ignore[assignment]
            (lambda *args: None) if name == "avro rows" else column_encoder)
        _encoders.json_column_encoder = (  # type: ignore[assignment]
            (lambda *args: None) if name == "json rows" else json_encoder)
        _writer.bulk_partitioner = (  # type: ignore[assignment]
            (lambda kafka: False) if name in ("binary send", "avro rows", "json rows")
            else bulk)
        for _ in range(rounds):
            topic = f"bench-write-{uuid.uuid4().hex[:8]}"
            broker.create_topic(topic, partitions)
            opts = parse_options({"kafka.bootstrap.servers": broker.bootstrap_servers,
                                  "schema.registry.url": registry, "topic": topic,
                                  "value.format": fmt}, write=True)
            key, value = _writer.plan_write(opts, schema)  # registers the derived schema
            task = _writer._ProduceTask(opts, key, value, schema)
            t = time.perf_counter()
            c = time.process_time()
            written = task.produce(iter(batches)).records
            cpu = min(cpu, time.process_time() - c)
            best = min(best, time.perf_counter() - t)
            if written != n:
                raise RuntimeError(f"{name}: {written} records, expected {n}")
        print(f"  write {name:9s} {n / best:10,.0f} rows/s wall  {best / n * 1e9:7,.0f} "
              f"ns/row wall  {cpu / n * 1e9:7,.0f} ns/row CPU  ({n:,} rows, load "
              f"{os.getloadavg()[0]:.1f})", flush=True)
    _encoders.avro_column_encoder = column_encoder
    _encoders.json_column_encoder = json_encoder
    _writer.bulk_partitioner = bulk


def spark_writes(broker: Any, registry: str, n: int, partitions: int, rounds: int) -> None:
    """``save()`` rows/s through Spark, best of ``rounds`` (see the module docstring)."""
    from pyspark.sql import functions as F

    spark = session()
    ids = spark.range(0, n, 1, 2)
    cases = {
        "binary write": ("binary", ids.select(
            F.lpad(F.col("id").cast("string"), 60, "0").cast("binary").alias("value"))),
        "avro write": ("avro", ids.select(F.struct(
            F.col("id"), F.concat(F.lit("customer-"), (F.col("id") % 1000).cast("string"))
            .alias("customer"), (F.col("id") % 7).cast("int").alias("qty"),
            (F.col("id") * 0.25).alias("price"),
            F.when(F.col("id") % 3 == 0, F.lit("gift wrap")).alias("note")).alias("value"))),
    }
    best: dict[str, float] = {}
    for r in range(rounds):
        for name, (fmt, frame) in cases.items():
            topic = f"bench-write-{uuid.uuid4().hex[:8]}"
            broker.create_topic(topic, partitions)
            if fmt == "avro":
                with SchemaRegistryClient({"url": registry}) as client:
                    client.register_schema(f"{topic}-value", Schema(ORDER, "AVRO"))
            t = time.perf_counter()
            (frame.write.format("kontrakt").mode("append")
             .option("kafka.bootstrap.servers", broker.bootstrap_servers)
             .option("schema.registry.url", registry).option("topic", topic)
             .option("value.format", fmt).save())
            rate = n / (time.perf_counter() - t)
            best[name] = max(best.get(name, 0.0), rate)
            print(f"round {r + 1}: {name:14s} {rate:12,.0f} rows/s (load "
                  f"{os.getloadavg()[0]:.1f})", flush=True)
    spark.stop()
    print(f"\nbest of {rounds}, {n:,} rows, {partitions} partitions, local[2]:")
    for name, rate in best.items():
        print(f"  {name:14s} {rate:12,.0f} rows/s")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--task", action="store_true",
                    help="one task's read_range in this process, without Spark")
    ap.add_argument("--write", action="store_true", help="Spark writes instead of reads")
    ap.add_argument("--cpu", action="store_true",
                    help="print each read query's CPU seconds by process (broker, JVM, "
                         "Python workers, driver) as ns a row")
    ap.add_argument("--write-task", action="store_true",
                    help="one sink task's produce in this process, without Spark")
    args = ap.parse_args()
    n = args.records
    from pyspark.sql import functions as F

    broker = TansuBroker().start()
    try:
        with RegistryServer() as registry:
            if args.write_task:
                write_task_rates(broker, registry.url, n, args.partitions, args.rounds)
                return
            if args.write:
                spark_writes(broker, registry.url, n, args.partitions, args.rounds)
                return
            tag = uuid.uuid4().hex[:8]
            raw, orders = f"bench-raw-{tag}", f"bench-avro-{tag}"
            for topic in (raw, orders):
                broker.create_topic(topic, args.partitions)
            with SchemaRegistryClient({"url": registry.url}) as client:
                sid = client.register_schema(f"{orders}-value", Schema(ORDER, "AVRO"))
            t = time.perf_counter()
            produce(broker.bootstrap_servers, raw, args.partitions,
                    lambda i: b"%060d" % i, n)
            produce(broker.bootstrap_servers, orders, args.partitions, avro_values(sid), n)
            others = {}  # json / protobuf: the same Order records
            for fmt, text, kind in (("json", ORDER_JSON, "JSON"),
                                    ("protobuf", ORDER_PROTO, "PROTOBUF")):
                others[fmt] = topic = f"bench-{fmt}-{tag}"
                broker.create_topic(topic, args.partitions)
                with SchemaRegistryClient({"url": registry.url}) as client:
                    fid = client.register_schema(f"{topic}-value", Schema(text, kind))
                produce(broker.bootstrap_servers, topic, args.partitions,
                        json_or_proto_values(fmt, fid), n)
            print(f"produced 2 x {n:,} records in {time.perf_counter() - t:.1f} s",
                  flush=True)
            if args.task:
                task_rates(broker.bootstrap_servers, registry.url,
                           {"binary": (raw, "binary"), "avro": (orders, "avro"),
                            "json": (others["json"], "json"),
                            "protobuf": (others["protobuf"], "protobuf")}, args.rounds,
                           broker.pid if args.cpu else None)
                return
            spark = session()

            def load(topic: str, fmt: str) -> Any:
                return (spark.read.format("kontrakt")
                        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
                        .option("schema.registry.url", registry.url)
                        .option("subscribe", topic).option("value.format", fmt).load())

            expected_qty = sum(i % 7 for i in range(n))

            def decoded_sum(topic: str, fmt: str) -> int:
                got = load(topic, fmt).agg(F.sum("value.qty")).collect()[0][0]
                if got != expected_qty:
                    raise RuntimeError(f"sum(qty) = {got}, expected {expected_qty}")
                return n

            def avro_sum() -> int:
                return decoded_sum(orders, "avro")

            cases: dict[str, Callable[[], int]] = {
                "binary count": lambda: load(raw, "binary").count(),
                "avro count": lambda: load(orders, "avro").count(),
                "avro sum(qty)": avro_sum,
                "json sum(qty)": lambda: decoded_sum(others["json"], "json"),
                "protobuf sum(qty)": lambda: decoded_sum(others["protobuf"], "protobuf"),
            }
            best: dict[str, float] = {}
            for r in range(args.rounds):
                for name, run in cases.items():
                    before = cpu_split(broker.pid) if args.cpu else {}
                    t = time.perf_counter()
                    rows = run()
                    rate = rows / (time.perf_counter() - t)
                    if args.cpu:
                        after = cpu_split(broker.pid)
                        parts = {k: (after[k] - before.get(k, 0.0)) / n * 1e9 for k in after}
                        print(f"round {r + 1}: {name:14s} CPU ns/row: " + ", ".join(
                            f"{k} {v:,.0f}" for k, v in parts.items())
                            + f", total {sum(parts.values()):,.0f} (load "
                            f"{os.getloadavg()[0]:.1f})", flush=True)
                    if rows != n:
                        raise RuntimeError(f"{name}: {rows} rows, expected {n}")
                    best[name] = max(best.get(name, 0.0), rate)
                    print(f"round {r + 1}: {name:14s} {rate:12,.0f} rows/s", flush=True)
            spark.stop()
            print(f"\nbest of {args.rounds}, {n:,} records, {args.partitions} partitions, "
                  "local[2]:")
            for name, rate in best.items():
                print(f"  {name:14s} {rate:12,.0f} rows/s")
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
