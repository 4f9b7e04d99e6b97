"""Producer throughput and latency: kontrakt (sync and async) vs confluent-kafka, aiokafka and
kafka-python, all against the same Tansu broker in one process run.

Throughput: N records (100-byte values, 10-byte keys) to a fresh 6-partition topic, acks=all,
linger 5 ms, each client's default batch size unless ``--batch-size`` is given, timed from the
first send to the end of flush. Latency: sequential awaited single sends (send, then wait for
the acknowledgement), p50/p99, in interleaved rounds; each client keeps its best round.

The ``*-batch`` clients queue the same records through ``produce_batch`` (confluent-kafka's
vectorised produce and kontrakt's, sync and async), BATCH_CALL message dicts a call.

Usage (from the repository root)::

    .venv/bin/python benchmarks/produce.py [--records 200000] [--rounds 2]
        [--latency 500] [--latency-rounds 3] [--codecs none,lz4,zstd]
        [--clients kontrakt-sync,...]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kontrakt.clients.producer import AsyncProducer, Producer
from kontrakt.testing import TansuBroker

VALUE = b"v" * 100
PARTITIONS = 6
LINGER_MS = 5
#: messages a produce_batch call takes (the batch idioms)
BATCH_CALL = 1000


def _keys(n: int) -> list[bytes]:
    return [b"%010d" % i for i in range(n)]


# --- kontrakt -------------------------------------------------------------------------------

def kontrakt_sync(bs: str, topic: str, n: int, codec: str, batch: int | None) -> float:
    keys = _keys(n)
    extra = {"batch_size": batch} if batch else {}
    with Producer(bootstrap_servers=bs, acks="all", linger_ms=LINGER_MS,
                  compression_type=codec, **extra) as p:
        p.send_and_wait(topic, b"warm-up")
        send = p.send
        t0 = time.perf_counter()
        for k in keys:
            send(topic, VALUE, k)
        p.flush()
        return time.perf_counter() - t0


def kontrakt_async(bs: str, topic: str, n: int, codec: str, batch: int | None) -> float:
    keys = _keys(n)
    extra = {"batch_size": batch} if batch else {}

    async def run() -> float:
        async with AsyncProducer(bootstrap_servers=bs, acks="all", linger_ms=LINGER_MS,
                                 compression_type=codec, **extra) as p:
            await p.send_and_wait(topic, b"warm-up")
            send = p.send
            t0 = time.perf_counter()
            for k in keys:
                await send(topic, VALUE, k)
            await p.flush()
            return time.perf_counter() - t0

    return asyncio.run(run())


def _messages(n: int) -> list[list[dict[str, bytes]]]:
    """The same records as message dicts, in produce_batch calls of BATCH_CALL (built before
    the clock starts, as a pipeline hands them over)."""
    msgs = [{"key": k, "value": VALUE} for k in _keys(n)]
    return [msgs[i:i + BATCH_CALL] for i in range(0, n, BATCH_CALL)]


def kontrakt_sync_batch(bs: str, topic: str, n: int, codec: str, batch: int | None) -> float:
    calls = _messages(n)
    extra = {"batch_size": batch} if batch else {}
    with Producer(bootstrap_servers=bs, acks="all", linger_ms=LINGER_MS,
                  compression_type=codec, **extra) as p:
        p.send_and_wait(topic, b"warm-up")
        produce_batch = p.produce_batch
        t0 = time.perf_counter()
        for messages in calls:
            produce_batch(topic, messages)
        p.flush()
        dt = time.perf_counter() - t0
    assert not any("_error" in m for c in calls for m in c)
    return dt


def kontrakt_async_batch(bs: str, topic: str, n: int, codec: str, batch: int | None) -> float:
    calls = _messages(n)
    extra = {"batch_size": batch} if batch else {}

    async def run() -> float:
        async with AsyncProducer(bootstrap_servers=bs, acks="all", linger_ms=LINGER_MS,
                                 compression_type=codec, **extra) as p:
            await p.send_and_wait(topic, b"warm-up")
            produce_batch = p.produce_batch
            t0 = time.perf_counter()
            for messages in calls:
                await produce_batch(topic, messages)
            await p.flush()
            return time.perf_counter() - t0

    dt = asyncio.run(run())
    assert not any("_error" in m for c in calls for m in c)
    return dt


def kontrakt_sync_latency(bs: str, topic: str, n: int) -> list[float]:
    out = []
    with Producer(bootstrap_servers=bs, acks="all", linger_ms=LINGER_MS) as p:
        p.send_and_wait(topic, b"warm-up")
        for i in range(n):
            t0 = time.perf_counter()
            p.send_and_wait(topic, VALUE, b"%010d" % i)
            out.append(time.perf_counter() - t0)
    return out


def kontrakt_async_latency(bs: str, topic: str, n: int) -> list[float]:
    async def run() -> list[float]:
        out = []
        async with AsyncProducer(bootstrap_servers=bs, acks="all", linger_ms=LINGER_MS) as p:
            await p.send_and_wait(topic, b"warm-up")
            for i in range(n):
                t0 = time.perf_counter()
                await p.send_and_wait(topic, VALUE, b"%010d" % i)
                out.append(time.perf_counter() - t0)
        return out

    return asyncio.run(run())


# --- confluent-kafka ------------------------------------------------------------------------

def _confluent_producer(bs: str, topic: str, codec: str, batch: int | None) -> Any:
    """A confluent-kafka producer as the throughput runs use it, warmed up on ``topic``."""
    import confluent_kafka

    conf: dict[str, Any] = {"bootstrap.servers": bs, "acks": "all", "linger.ms": LINGER_MS,
                            "compression.type": codec, "queue.buffering.max.messages": 1000000}
    if batch:
        conf["batch.size"] = batch
    p = confluent_kafka.Producer(conf)
    p.produce(topic, b"warm-up")
    p.flush(10)
    return p


def confluent(bs: str, topic: str, n: int, codec: str, batch: int | None) -> float:
    keys = _keys(n)
    p = _confluent_producer(bs, topic, codec, batch)
    produce, poll = p.produce, p.poll
    t0 = time.perf_counter()
    for i, k in enumerate(keys):
        produce(topic, VALUE, k)
        if i % 1000 == 0:
            poll(0)
    left = p.flush(60)
    dt = time.perf_counter() - t0
    assert left == 0, left
    return dt


def confluent_batch(bs: str, topic: str, n: int, codec: str, batch: int | None) -> float:
    calls = _messages(n)
    p = _confluent_producer(bs, topic, codec, batch)
    produce_batch, poll = p.produce_batch, p.poll
    t0 = time.perf_counter()
    for messages in calls:
        queued = produce_batch(topic, messages)
        assert queued == len(messages), queued
        poll(0)
    left = p.flush(60)
    dt = time.perf_counter() - t0
    assert left == 0, left
    return dt


def confluent_latency(bs: str, topic: str, n: int) -> list[float]:
    import confluent_kafka

    p = confluent_kafka.Producer({"bootstrap.servers": bs, "acks": "all",
                                  "linger.ms": LINGER_MS})
    p.produce(topic, b"warm-up")
    p.flush(10)
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        p.produce(topic, VALUE, b"%010d" % i)
        p.flush(10)
        out.append(time.perf_counter() - t0)
    return out


# --- aiokafka -------------------------------------------------------------------------------

def aiokafka(bs: str, topic: str, n: int, codec: str, batch: int | None) -> float:
    from aiokafka import AIOKafkaProducer

    keys = _keys(n)
    extra = {"max_batch_size": batch} if batch else {}

    async def run() -> float:
        p = AIOKafkaProducer(bootstrap_servers=bs, acks="all", linger_ms=LINGER_MS,
                             compression_type=None if codec == "none" else codec, **extra)
        await p.start()
        try:
            await p.send_and_wait(topic, b"warm-up")
            send = p.send
            t0 = time.perf_counter()
            for k in keys:
                await send(topic, VALUE, key=k)
            await p.flush()
            return time.perf_counter() - t0
        finally:
            await p.stop()

    return asyncio.run(run())


def aiokafka_latency(bs: str, topic: str, n: int) -> list[float]:
    from aiokafka import AIOKafkaProducer

    async def run() -> list[float]:
        p = AIOKafkaProducer(bootstrap_servers=bs, acks="all", linger_ms=LINGER_MS)
        await p.start()
        out = []
        try:
            await p.send_and_wait(topic, b"warm-up")
            for i in range(n):
                t0 = time.perf_counter()
                await p.send_and_wait(topic, VALUE, key=b"%010d" % i)
                out.append(time.perf_counter() - t0)
        finally:
            await p.stop()
        return out

    return asyncio.run(run())


# --- kafka-python ---------------------------------------------------------------------------

def kafka_python(bs: str, topic: str, n: int, codec: str, batch: int | None) -> float:
    from kafka import KafkaProducer

    keys = _keys(n)
    extra = {"batch_size": batch} if batch else {}
    p = KafkaProducer(bootstrap_servers=bs, acks="all", linger_ms=LINGER_MS,
                      compression_type=None if codec == "none" else codec, **extra)
    try:
        p.send(topic, b"warm-up").get(10)
        send = p.send
        t0 = time.perf_counter()
        for k in keys:
            send(topic, VALUE, key=k)
        p.flush()
        return time.perf_counter() - t0
    finally:
        p.close()


def kafka_python_latency(bs: str, topic: str, n: int) -> list[float]:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bs, acks="all", linger_ms=LINGER_MS)
    out = []
    try:
        p.send(topic, b"warm-up").get(10)
        for i in range(n):
            t0 = time.perf_counter()
            p.send(topic, VALUE, key=b"%010d" % i).get(10)
            out.append(time.perf_counter() - t0)
    finally:
        p.close()
    return out


THROUGHPUT: dict[str, Callable[[str, str, int, str, int | None], float]] = {
    "kontrakt-sync": kontrakt_sync,
    "kontrakt-async": kontrakt_async,
    "confluent-kafka": confluent,
    "aiokafka": aiokafka,
    "kafka-python": kafka_python,
    # produce_batch, BATCH_CALL messages a call
    "kontrakt-sync-batch": kontrakt_sync_batch,
    "kontrakt-async-batch": kontrakt_async_batch,
    "confluent-batch": confluent_batch,
}
LATENCY: dict[str, Callable[[str, str, int], list[float]]] = {
    "kontrakt-sync": kontrakt_sync_latency,
    "kontrakt-async": kontrakt_async_latency,
    "confluent-kafka": confluent_latency,
    "aiokafka": aiokafka_latency,
    "kafka-python": kafka_python_latency,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=2, help="best of this many runs")
    ap.add_argument("--latency", type=int, default=500, help="sequential sends (0: skip)")
    ap.add_argument("--latency-rounds", type=int, default=3,
                    help="latency runs per client, interleaved; each keeps its best p50")
    ap.add_argument("--codecs", default="none,lz4,zstd")
    ap.add_argument("--clients", default=",".join(THROUGHPUT))
    ap.add_argument("--batch-size", type=int, default=None,
                    help="batch size for every client (default: each client's own)")
    args = ap.parse_args()
    clients = args.clients.split(",")
    codecs = args.codecs.split(",")
    with TansuBroker() as broker:
        bs = broker.bootstrap_servers

        def fresh() -> str:
            name = f"bench-{uuid.uuid4().hex[:8]}"
            broker.create_topic(name, PARTITIONS)
            return name

        results: dict[tuple[str, str], float] = {}
        for codec in codecs:
            for _ in range(args.rounds):
                for name in clients:
                    try:
                        dt = THROUGHPUT[name](bs, fresh(), args.records, codec, args.batch_size)
                    except Exception as exc:  # a peer without the codec's library
                        print(f"{name:16} {codec:5} n/a ({type(exc).__name__}: {exc})"[:150],
                              flush=True)
                        continue
                    rate = args.records / dt
                    print(f"{name:16} {codec:5} {rate:12,.0f} records/s", flush=True)
                    results[(name, codec)] = max(results.get((name, codec), 0.0), rate)
        print("\nthroughput, records/s (best of rounds)")
        header = f"{'codec':6}" + "".join(f"{c:>21}" for c in clients)
        print(header)
        for codec in codecs:
            row = f"{codec:6}" + "".join(
                f"{results[(c, codec)]:21,.0f}" if (c, codec) in results else f"{'n/a':>21}"
                for c in clients)
            print(row)
        for codec in codecs:
            for k in ("kontrakt-sync", "kontrakt-async", "kontrakt-sync-batch",
                      "kontrakt-async-batch"):
                peers = ("confluent-kafka", "confluent-batch") if k.endswith("-batch") \
                    else ("confluent-kafka", "aiokafka", "kafka-python")
                for peer in peers:
                    if (k, codec) in results and (peer, codec) in results:
                        print(f"{codec:5} {k} / {peer}: "
                              f"{results[(k, codec)] / results[(peer, codec)]:.2f}x")
        if args.latency:
            # produce_batch has no latency idiom: the per-record clients are measured.
            clients = [c for c in clients if c in LATENCY]
            # Interleaved rounds, like the throughput runs: a client that drew a busy
            # moment of the (shared) machine gets another chance.
            best: dict[str, tuple[float, float]] = {}
            for _ in range(args.latency_rounds):
                for name in clients:
                    q = statistics.quantiles(LATENCY[name](bs, fresh(), args.latency), n=100)
                    print(f"{name:16} p50 {q[49] * 1000:7.2f}   p99 {q[98] * 1000:7.2f}",
                          flush=True)
                    if name not in best or q[49] < best[name][0]:
                        best[name] = (q[49], q[98])
            print(f"\nlatency of awaited single sends, ms (p50 / p99 of the round with the "
                  f"best p50 of {args.latency_rounds})")
            for name, (p50, p99) in best.items():
                print(f"{name:16} p50 {p50 * 1000:7.2f}   p99 {p99 * 1000:7.2f}")
            for k in ("kontrakt-sync", "kontrakt-async"):
                if k in best and "confluent-kafka" in best:
                    print(f"{k} / confluent-kafka p50: "
                          f"{best[k][0] / best['confluent-kafka'][0]:.2f}x")


if __name__ == "__main__":
    main()
