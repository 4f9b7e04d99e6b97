"""The producer idioms users write, side by side in one run against one Tansu broker.

Each idiom sends N records (100-byte values, 10-byte keys) to a fresh 6-partition topic,
acks=all, linger 5 ms, and is timed from the first send until every record is acknowledged:

- async ``flush``: ``await send(...)`` for each, then ``await flush()`` (the reference);
- async ``gather``: the futures ``send`` returns, then ``await asyncio.gather(*futs)``;
- async ``wait``: ``await asyncio.wait(futs)``;
- async ``as_completed``: ``for f in asyncio.as_completed(futs): await f``;
- async ``await each``: ``for f in futs: await f``;
- async ``done callbacks``: ``fut.add_done_callback(cb)`` on each, then ``flush()``;
- async ``flush + results``: the futures kept, ``await flush()``, then ``f.result()`` of
  each (every record's metadata without asyncio's machinery);
- sync ``flush``, sync ``produce + poll`` (confluent-kafka's idiom with ``on_delivery``);
- confluent-kafka's ``produce + poll`` with ``on_delivery``, the peer of the row above,
  and aiokafka ``gather``, the same idiom on aiokafka, when they are installed.

Ratios are to async ``flush`` of the same round; sync ``produce + poll`` is also given
against confluent-kafka's.

Usage (from the repository root)::

    .venv/bin/python benchmarks/idioms.py [--records 200000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kontrakt.clients.producer import AsyncProducer, Producer
from kontrakt.testing import TansuBroker

VALUE = b"v" * 100
PARTITIONS = 6
LINGER_MS = 5


def _keys(n: int) -> list[bytes]:
    return [b"%010d" % i for i in range(n)]


async def _flush(p: AsyncProducer, topic: str, keys: list[bytes]) -> None:
    for k in keys:
        await p.send(topic, VALUE, k)
    await p.flush()


async def _gather(p: AsyncProducer, topic: str, keys: list[bytes]) -> None:
    futs = [await p.send(topic, VALUE, k) for k in keys]
    await asyncio.gather(*futs)


async def _wait(p: AsyncProducer, topic: str, keys: list[bytes]) -> None:
    futs = [await p.send(topic, VALUE, k) for k in keys]
    done, pending = await asyncio.wait(futs)
    assert not pending and len(done) == len(keys)


async def _as_completed(p: AsyncProducer, topic: str, keys: list[bytes]) -> None:
    futs = [await p.send(topic, VALUE, k) for k in keys]
    for f in asyncio.as_completed(futs):
        await f


async def _await_each(p: AsyncProducer, topic: str, keys: list[bytes]) -> None:
    futs = [await p.send(topic, VALUE, k) for k in keys]
    for f in futs:
        await f


async def _flush_results(p: AsyncProducer, topic: str, keys: list[bytes]) -> None:
    # Every record's metadata without asyncio's machinery: flush, then read the
    # (resolved) futures.
    futs = [await p.send(topic, VALUE, k) for k in keys]
    await p.flush()
    offsets = [f.result().offset for f in futs]
    assert len(offsets) == len(keys)


async def _callbacks(p: AsyncProducer, topic: str, keys: list[bytes]) -> None:
    seen: list[Any] = []
    for k in keys:
        (await p.send(topic, VALUE, k)).add_done_callback(seen.append)
    await p.flush()
    assert len(seen) == len(keys)


ASYNC: dict[str, Callable[[AsyncProducer, str, list[bytes]], Awaitable[None]]] = {
    "async flush": _flush, "async gather": _gather, "async wait": _wait,
    "async as_completed": _as_completed, "async await each": _await_each,
    "async done callbacks": _callbacks, "async flush + results": _flush_results,
}


def run_async(bs: str, topic: str, n: int, idiom: str) -> float:
    keys = _keys(n)

    async def run() -> float:
        async with AsyncProducer(bootstrap_servers=bs, acks="all", linger_ms=LINGER_MS) as p:
            await p.send_and_wait(topic, b"warm-up")
            t0 = time.perf_counter()
            await ASYNC[idiom](p, topic, keys)
            return time.perf_counter() - t0

    return asyncio.run(run())


def sync_flush(bs: str, topic: str, n: int) -> float:
    keys = _keys(n)
    with Producer(bootstrap_servers=bs, acks="all", linger_ms=LINGER_MS) as p:
        p.send_and_wait(topic, b"warm-up")
        t0 = time.perf_counter()
        for k in keys:
            p.send(topic, VALUE, k)
        p.flush()
        return time.perf_counter() - t0


def sync_produce_poll(bs: str, topic: str, n: int) -> float:
    keys = _keys(n)
    delivered = [0]

    def on_delivery(err: Any, md: Any) -> None:
        delivered[0] += 1

    with Producer(bootstrap_servers=bs, acks="all", linger_ms=LINGER_MS) as p:
        p.send_and_wait(topic, b"warm-up")
        t0 = time.perf_counter()
        for i, k in enumerate(keys):
            p.produce(topic, VALUE, k, on_delivery=on_delivery)
            if not i % 1000:
                p.poll(0)
        p.flush()
        elapsed = time.perf_counter() - t0
    assert delivered[0] == n, delivered
    return elapsed


def confluent_produce_poll(bs: str, topic: str, n: int) -> float:
    """confluent-kafka's own idiom, as sync_produce_poll runs it (the peer of that row)."""
    import confluent_kafka

    keys = _keys(n)
    delivered = [0]

    def on_delivery(err: Any, md: Any) -> None:
        delivered[0] += 1

    p = confluent_kafka.Producer({"bootstrap.servers": bs, "acks": "all",
                                  "linger.ms": LINGER_MS,
                                  "queue.buffering.max.messages": 1_000_000})
    p.produce(topic, b"warm-up")
    p.flush(10)
    t0 = time.perf_counter()
    for i, k in enumerate(keys):
        p.produce(topic, VALUE, k, on_delivery=on_delivery)
        if not i % 1000:
            p.poll(0)
    left = p.flush(60)
    elapsed = time.perf_counter() - t0
    assert left == 0 and delivered[0] == n, (left, delivered)
    return elapsed


def aiokafka_gather(bs: str, topic: str, n: int) -> float:
    from aiokafka import AIOKafkaProducer

    keys = _keys(n)

    async def run() -> float:
        p = AIOKafkaProducer(bootstrap_servers=bs, acks="all", linger_ms=LINGER_MS)
        await p.start()
        try:
            await p.send_and_wait(topic, b"warm-up")
            t0 = time.perf_counter()
            futs = [await p.send(topic, VALUE, k) for k in keys]
            await asyncio.gather(*futs)
            return time.perf_counter() - t0
        finally:
            await p.stop()

    return asyncio.run(run())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3, help="best of this many runs")
    ap.add_argument("--aiokafka-records", type=int, default=50_000,
                    help="records for aiokafka's (slower) round")
    args = ap.parse_args()
    runners: dict[str, Callable[[str, str, int], float]] = {
        name: (lambda bs, t, n, name=name: run_async(bs, t, n, name)) for name in ASYNC}
    runners["sync flush"] = sync_flush
    runners["sync produce + poll"] = sync_produce_poll
    try:
        import confluent_kafka  # noqa: F401
        runners["confluent produce + poll"] = confluent_produce_poll
    except ImportError:
        pass
    try:
        import aiokafka  # noqa: F401
        runners["aiokafka gather"] = aiokafka_gather
    except ImportError:
        pass
    best: dict[str, float] = {}
    with TansuBroker() as broker:
        bs = broker.bootstrap_servers
        for rnd in range(args.rounds):
            for name, fn in runners.items():
                n = args.aiokafka_records if name.startswith("aiokafka") else args.records
                topic = f"idioms-{uuid.uuid4().hex[:8]}"
                broker.create_topic(topic, PARTITIONS)
                rate = n / fn(bs, topic, n)
                best[name] = max(best.get(name, 0.0), rate)
                print(f"round {rnd + 1} {name:24s} {rate:>10,.0f} rec/s", flush=True)
    ref = best["async flush"]
    print(f"\nbest of {args.rounds} ({args.records} records; ratio to async flush)")
    for name, rate in best.items():
        print(f"{name:24s} {rate:>10,.0f} rec/s  {rate / ref:5.2f}x")
    if "confluent produce + poll" in best:
        print("sync produce + poll / confluent-kafka's: "
              f"{best['sync produce + poll'] / best['confluent produce + poll']:.2f}x")


if __name__ == "__main__":
    main()
