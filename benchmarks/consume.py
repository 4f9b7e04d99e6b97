"""Consume throughput and group start time: kontrakt next to confluent-kafka, aiokafka and
kafka-python, all reading the same records from the same broker in one run.

Setup: a Tansu broker is started (or ``--bootstrap`` is used), one topic with
``--partitions`` partitions gets ``--records`` records of ``--value-size`` bytes, or of sizes
drawn evenly from a range with ``--value-size MIN-MAX`` (seeded, so every run writes the same
sizes; real payloads vary, and the decoder's runs of one size do not apply then), written once
with confluent-kafka, no compression. Then every contender reads the whole topic
from the beginning with manual assignment, no group, ``--rounds`` times interleaved; the best
round counts. Group start = ``subscribe()`` -> first record, with the same session timeout.

Run:  .venv/bin/python benchmarks/consume.py [--records 200000] [--value-size 100|50-150]
          [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kontrakt._types import TopicPartition
from kontrakt.clients.consumer import AsyncConsumer, Consumer
from kontrakt.testing import TansuBroker


def _sizes(spec: str) -> tuple[int, int]:
    """``--value-size``: ``N`` or ``MIN-MAX`` bytes."""
    low, _, high = spec.partition("-")
    return int(low), int(high or low)


def produce(bootstrap: str, topic: str, count: int, sizes: tuple[int, int]) -> None:
    import random

    import confluent_kafka

    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                                  "batch.num.messages": 10000, "batch.size": 1_000_000})
    pick = random.Random(23).randint
    low, high = sizes
    values = [b"x" * n for n in range(high + 1)]
    for i in range(count):
        value = values[low if low == high else pick(low, high)]
        while True:
            try:
                p.produce(topic, value, partition=i % PARTITIONS)
                break
            except BufferError:
                p.poll(0.05)
    p.flush(60)


PARTITIONS = 4


def k_sync_poll(bs: str, topic: str, n: int) -> None:
    with Consumer(bootstrap_servers=bs, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        got = 0
        poll = c.poll
        while got < n:
            if poll(5.0) is None:
                raise RuntimeError("stalled")
            got += 1


def k_sync_getmany(bs: str, topic: str, n: int) -> None:
    with Consumer(bootstrap_servers=bs, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        got = 0
        while got < n:
            for recs in c.getmany(5.0, 10000).values():
                got += len(recs)


def k_async_poll(bs: str, topic: str, n: int) -> None:
    async def main() -> None:
        async with AsyncConsumer(bootstrap_servers=bs, auto_offset_reset="earliest") as c:
            c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
            got = 0
            while got < n:
                if await c.poll(5.0) is None:
                    raise RuntimeError("stalled")
                got += 1
    asyncio.run(main())


def k_async_getmany(bs: str, topic: str, n: int) -> None:
    async def main() -> None:
        async with AsyncConsumer(bootstrap_servers=bs, auto_offset_reset="earliest") as c:
            c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
            got = 0
            while got < n:
                for recs in (await c.getmany(5.0, 10000)).values():
                    got += len(recs)
    asyncio.run(main())


def confluent(bs: str, topic: str, n: int, tuned: bool = False) -> None:
    import confluent_kafka

    conf = {"bootstrap.servers": bs, "group.id": "bench-" + uuid.uuid4().hex,
            "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    if tuned:
        conf["fetch.queue.backoff.ms"] = 1
    c = confluent_kafka.Consumer(conf)
    c.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = 0
    while got < n:
        msgs = c.consume(10000, 5.0)
        got += sum(1 for m in msgs if m.error() is None)
    c.close()


def aiokafka_getmany(bs: str, topic: str, n: int) -> None:
    import aiokafka

    async def main() -> None:
        c = aiokafka.AIOKafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest",
                                      enable_auto_commit=False)
        await c.start()
        try:
            c.assign([aiokafka.TopicPartition(topic, p) for p in range(PARTITIONS)])
            for p in range(PARTITIONS):
                c.seek(aiokafka.TopicPartition(topic, p), 0)
            got = 0
            while got < n:
                for recs in (await c.getmany(timeout_ms=5000, max_records=10000)).values():
                    got += len(recs)
        finally:
            await c.stop()
    asyncio.run(main())


def kafka_python(bs: str, topic: str, n: int) -> None:
    import kafka

    c = kafka.KafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest",
                            enable_auto_commit=False)
    c.assign([kafka.TopicPartition(topic, p) for p in range(PARTITIONS)])
    c.seek_to_beginning()
    got = 0
    while got < n:
        for recs in c.poll(timeout_ms=5000, max_records=10000).values():
            got += len(recs)
    c.close()


def group_start_kontrakt(bs: str, topic: str, session_ms: int) -> float:
    with Consumer(bootstrap_servers=bs, group_id="gs-" + uuid.uuid4().hex,
                  auto_offset_reset="earliest", session_timeout_ms=session_ms,
                  heartbeat_interval_ms=max(100, session_ms // 10)) as c:
        t0 = time.perf_counter()
        c.subscribe([topic])
        if c.poll(60) is None:
            raise RuntimeError("no record")
        return time.perf_counter() - t0


def group_start_confluent(bs: str, topic: str, session_ms: int) -> float:
    import confluent_kafka

    c = confluent_kafka.Consumer({
        "bootstrap.servers": bs, "group.id": "gs-" + uuid.uuid4().hex,
        "auto.offset.reset": "earliest", "session.timeout.ms": session_ms,
        "heartbeat.interval.ms": max(100, session_ms // 10)})
    t0 = time.perf_counter()
    c.subscribe([topic])
    while True:
        m = c.poll(60)
        if m is not None and m.error() is None:
            break
    took = time.perf_counter() - t0
    c.close()
    return took


def main() -> None:
    global PARTITIONS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap")
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--value-size", default="100", help="N or MIN-MAX bytes")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--session-timeout-ms", type=int, default=2000)
    args = ap.parse_args()
    PARTITIONS = args.partitions
    broker = None
    bs = args.bootstrap
    topic = "bench-consume-" + uuid.uuid4().hex[:8]
    if bs is None:
        broker = TansuBroker().start()
        bs = broker.bootstrap_servers
        broker.create_topic(topic, PARTITIONS)
    else:
        import confluent_kafka.admin as cadmin

        a = cadmin.AdminClient({"bootstrap.servers": bs})
        a.create_topics([cadmin.NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    try:
        produce(bs, topic, args.records, _sizes(args.value_size))
        contenders: dict[str, Callable[[str, str, int], None]] = {
            "kontrakt sync poll()": k_sync_poll,
            "kontrakt sync getmany()": k_sync_getmany,
            "kontrakt async poll()": k_async_poll,
            "kontrakt async getmany()": k_async_getmany,
            "confluent-kafka consume()": confluent,
            "confluent-kafka consume(), fetch.queue.backoff.ms=1":
                lambda b, t, n: confluent(b, t, n, tuned=True),
            "aiokafka getmany()": aiokafka_getmany,
            "kafka-python poll()": kafka_python,
        }
        best: dict[str, float] = {}
        for _ in range(args.rounds):
            for name, fn in contenders.items():
                t0 = time.perf_counter()
                fn(bs, topic, args.records)
                took = time.perf_counter() - t0
                best[name] = min(best.get(name, took), took)
        print(f"{args.records} records x {args.value_size} B, {PARTITIONS} partitions, "
              f"best of {args.rounds}")
        print(f"| {'client':<52} | {'records/s':>10} | {'vs aiokafka':>11} "
              f"| {'vs confluent tuned':>18} |")
        print(f"|{'-' * 54}|{'-' * 12}:|{'-' * 12}:|{'-' * 19}:|")
        aio = args.records / best["aiokafka getmany()"]
        tuned = args.records / best["confluent-kafka consume(), fetch.queue.backoff.ms=1"]
        for name, took in best.items():
            rate = args.records / took
            print(f"| {name:<52} | {rate:>10,.0f} | {rate / aio:>10.2f}x "
                  f"| {rate / tuned:>17.2f}x |")
        ks = [group_start_kontrakt(bs, topic, args.session_timeout_ms) for _ in range(2)]
        cs = [group_start_confluent(bs, topic, args.session_timeout_ms) for _ in range(2)]
        print(f"group start (subscribe -> first record, session.timeout.ms="
              f"{args.session_timeout_ms}): kontrakt {min(ks):.2f} s, "
              f"confluent-kafka {min(cs):.2f} s")
    finally:
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
