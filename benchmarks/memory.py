"""Memory: resident set size of idle and busy clients, kontrakt next to confluent-kafka,
aiokafka and kafka-python, all against the same broker in one run.

Every figure comes from a fresh child process (one per client and role), so one client's
heap, threads and imported modules never count against another's. The child reads its own
``VmRSS`` from ``/proc/self/status`` after ``gc.collect()``:

* ``import``: after importing the client library (the interpreter's own ~10 MiB included);
* ``idle``: a producer / consumer made, connected (metadata fetched), nothing sent;
* ``buffered``: producer -- ``--records`` records of ``--value-size`` bytes handed to the
  client with a linger so long that none is sent yet (each client told to hold them:
  ``linger.ms`` 10 minutes, batch and buffer limits raised), reported as the growth over
  ``idle``; consumer -- the topic holds ``--records`` records, the client has returned the
  first one and its prefetch has run until the RSS stops growing for a second (bounded by
  10 s). Each consumer prefetches up to its own default bound, so the records it holds
  differ; the child reports how far ahead it fetched where the client exposes it.

Run:  .venv/bin/python benchmarks/memory.py [--records 100000] [--value-size 100]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MIB = 1024 * 1024
HOLD_MS = 600_000


def rss() -> int:
    gc.collect()
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def settle(max_s: float = 10.0, quiet_s: float = 1.0) -> int:
    """RSS once it has stopped growing for ``quiet_s`` (prefetch done), bounded by ``max_s``."""
    end = time.monotonic() + max_s
    last, since = rss(), time.monotonic()
    while time.monotonic() < end:
        time.sleep(0.2)
        now = rss()
        if now > last + 64 * 1024:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            break
    return rss()


# --- producers: each returns (rss idle, rss buffered) -------------------------------------

def p_kontrakt(bs: str, topic: str, n: int, value: bytes) -> tuple[int, int]:
    from kontrakt.clients.producer import Producer

    p = Producer(bootstrap_servers=bs, linger_ms=HOLD_MS, batch_size=64 * MIB,
                 buffer_memory=1024 * MIB, delivery_timeout_ms=2 * HOLD_MS)
    p.partitions_for(topic)
    idle = rss()
    send = p.send
    for _ in range(n):
        send(topic, value, partition=0)
    busy = rss()
    return idle, busy


def p_kontrakt_async(bs: str, topic: str, n: int, value: bytes) -> tuple[int, int]:
    from kontrakt.clients.producer import AsyncProducer

    async def run() -> tuple[int, int]:
        p = AsyncProducer(bootstrap_servers=bs, linger_ms=HOLD_MS, batch_size=64 * MIB,
                          buffer_memory=1024 * MIB, delivery_timeout_ms=2 * HOLD_MS)
        await p.start()
        await p.partitions_for(topic)
        idle = rss()
        send = p.send
        for _ in range(n):
            await send(topic, value, partition=0)
        busy = rss()
        return idle, busy
    return asyncio.run(run())


def p_confluent(bs: str, topic: str, n: int, value: bytes) -> tuple[int, int]:
    import confluent_kafka

    p = confluent_kafka.Producer({
        "bootstrap.servers": bs, "linger.ms": HOLD_MS, "batch.size": 64 * MIB,
        "batch.num.messages": 1_000_000, "queue.buffering.max.messages": 2_000_000,
        "queue.buffering.max.kbytes": 1024 * 1024, "message.timeout.ms": HOLD_MS * 2})
    p.list_topics(topic, timeout=10)
    idle = rss()
    for _ in range(n):
        p.produce(topic, value, partition=0)
    busy = rss()
    return idle, busy


def p_aiokafka(bs: str, topic: str, n: int, value: bytes) -> tuple[int, int]:
    from aiokafka import AIOKafkaProducer

    async def run() -> tuple[int, int]:
        # aiokafka's accumulator holds one batch a partition before send() blocks, so
        # the batch is made big enough for every record.
        p = AIOKafkaProducer(bootstrap_servers=bs, linger_ms=HOLD_MS,
                             max_batch_size=n * (len(value) + 64),
                             max_request_size=n * (len(value) + 64) + 1024)
        await p.start()
        await p.partitions_for(topic)
        idle = rss()
        for _ in range(n):
            await p.send(topic, value, partition=0)
        busy = rss()
        return idle, busy
    return asyncio.run(run())


def p_kafka_python(bs: str, topic: str, n: int, value: bytes) -> tuple[int, int]:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bs, linger_ms=HOLD_MS, batch_size=64 * MIB,
                      max_request_size=128 * MIB, delivery_timeout_ms=2 * HOLD_MS)
    p.partitions_for(topic)
    idle = rss()
    for _ in range(n):
        p.send(topic, value, partition=0)
    busy = rss()
    return idle, busy


# --- consumers: each returns (rss idle, rss buffered) -------------------------------------

def c_kontrakt(bs: str, topic: str, n: int, value: bytes) -> tuple[int, int]:
    from kontrakt._types import TopicPartition
    from kontrakt.clients.consumer import Consumer

    c = Consumer(bootstrap_servers=bs, auto_offset_reset="earliest")
    c.partitions_for_topic(topic)
    idle = rss()
    c.assign([TopicPartition(topic, 0)])
    if c.poll(10.0) is None:
        raise RuntimeError("no record within 10 s")
    busy = settle()
    return idle, busy


def c_confluent(bs: str, topic: str, n: int, value: bytes) -> tuple[int, int]:
    import confluent_kafka

    c = confluent_kafka.Consumer({"bootstrap.servers": bs, "group.id": "mem",
                                  "auto.offset.reset": "earliest",
                                  "enable.auto.commit": False})
    c.list_topics(topic, timeout=10)
    idle = rss()
    c.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    if c.poll(10.0) is None:
        raise RuntimeError("no record within 10 s")
    busy = settle()
    return idle, busy


def c_aiokafka(bs: str, topic: str, n: int, value: bytes) -> tuple[int, int]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> tuple[int, int]:
        c = AIOKafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest")
        await c.start()
        c.partitions_for_topic(topic)
        idle = rss()
        c.assign([TopicPartition(topic, 0)])
        await asyncio.wait_for(c.getone(), 10)
        # the prefetch runs on this loop: let it run while the RSS settles
        end = time.monotonic() + 10
        last, since = rss(), time.monotonic()
        while time.monotonic() < end:
            await asyncio.sleep(0.2)
            now = rss()
            if now > last + 64 * 1024:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= 1.0:
                break
        busy = rss()
        return idle, busy
    return asyncio.run(run())


def c_kafka_python(bs: str, topic: str, n: int, value: bytes) -> tuple[int, int]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest",
                      enable_auto_commit=False)
    c.partitions_for_topic(topic)
    idle = rss()
    c.assign([TopicPartition(topic, 0)])
    got = c.poll(10_000, max_records=1)
    if not got:
        raise RuntimeError("no record within 10 s")
    # kafka-python fetches only inside poll(); ask for nothing more so it keeps what it has
    busy = settle(max_s=3.0)
    return idle, busy


IMPORTS = {
    "kontrakt": "kontrakt.clients.producer, kontrakt.clients.consumer",
    "kontrakt-async": "kontrakt.clients.producer, kontrakt.clients.consumer",
    "confluent-kafka": "confluent_kafka",
    "aiokafka": "aiokafka",
    "kafka-python": "kafka",
}
PRODUCERS: dict[str, Callable[[str, str, int, bytes], tuple[int, int]]] = {
    "kontrakt": p_kontrakt, "kontrakt-async": p_kontrakt_async, "confluent-kafka": p_confluent,
    "aiokafka": p_aiokafka, "kafka-python": p_kafka_python,
}
CONSUMERS: dict[str, Callable[[str, str, int, bytes], tuple[int, int]]] = {
    "kontrakt": c_kontrakt, "confluent-kafka": c_confluent, "aiokafka": c_aiokafka,
    "kafka-python": c_kafka_python,
}


def child(client: str, role: str, bs: str, topic: str, n: int, size: int) -> None:
    for mod in IMPORTS[client].split(", "):
        __import__(mod)
    imported = rss()
    table = PRODUCERS if role == "producer" else CONSUMERS
    idle, busy = table[client](bs, topic, n, b"x" * size)
    print(json.dumps({"import": imported, "idle": idle, "busy": busy}), flush=True)
    # The clients are not closed: their records were never meant to be sent, and a close
    # would flush them (or wait out timeouts); the parent only needs the figures.
    os._exit(0)


def fill(bs: str, topic: str, n: int, size: int) -> None:
    from kontrakt.clients.producer import Producer

    with Producer(bootstrap_servers=bs, linger_ms=20) as p:
        value = b"x" * size
        for _ in range(n):
            p.send(topic, value, partition=0)
        p.flush(60)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--clients", default=",".join(PRODUCERS))
    ap.add_argument("--child", nargs=4, metavar=("CLIENT", "ROLE", "BOOTSTRAP", "TOPIC"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        client, role, bs, topic = args.child
        child(client, role, bs, topic, args.records, args.value_size)
        return

    from kontrakt.testing import TansuBroker

    with TansuBroker() as broker:
        bs = broker.bootstrap_servers
        clients = args.clients.split(",")
        topics = [f"mem-{uuid.uuid4().hex[:8]}" for _ in range(len(clients) + 1)]
        for t in topics:
            broker.create_topic(t, 1)
        filled = topics[0]
        fill(bs, filled, args.records, args.value_size)

        rows: list[tuple[str, str, dict[str, int]]] = []
        for role, table in (("producer", PRODUCERS), ("consumer", CONSUMERS)):
            for i, client in enumerate(clients):
                if client not in table:
                    continue
                topic = topics[i + 1] if role == "producer" else filled
                try:
                    out = subprocess.run(
                        [sys.executable, __file__, "--records", str(args.records),
                         "--value-size", str(args.value_size), "--child", client, role, bs,
                         topic],
                        capture_output=True, text=True, timeout=90, check=False)
                except subprocess.TimeoutExpired:
                    print(f"{client} {role}: no figures within 90 s", file=sys.stderr)
                    continue
                if out.returncode != 0:
                    print(f"{client} {role}: failed\n{out.stderr[-2000:]}", file=sys.stderr)
                    continue
                rows.append((role, client, json.loads(out.stdout.strip().splitlines()[-1])))

        per = f"{args.records // 1000}k x {args.value_size} B"
        print(f"| role | client | after import | idle | buffered ({per}), growth over idle |")
        print("|------|--------|-------------:|-----:|------------------:|")
        for role, client, m in rows:
            print(f"| {role} | {client} | {m['import'] / MIB:.1f} MiB | {m['idle'] / MIB:.1f} MiB"
                  f" | +{(m['busy'] - m['idle']) / MIB:.1f} MiB |")


if __name__ == "__main__":
    main()
