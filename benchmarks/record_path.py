"""A fixed produce workload through the record path, without a broker, for instruction counts.

Records go through ``AsyncProducer.send`` (or produce()'s path) into the accumulator of an
offline producer (``tests/unit/producer/offline.py``); a fake sender then seals, encodes
(v2 batch bytes) and completes every batch, so that futures, callbacks and delivery
reports run as they do behind a broker. The clock is replaced by a counter, the random
partition choices are seeded and the hash seed is fixed by the caller, so two runs of the
same tree execute the same instructions: run it under callgrind to compare two commits on a
loaded machine, where wall-clock figures are noise::

    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=cg.out \\
        .venv/bin/python benchmarks/record_path.py callbacks 20000 [ROOT]

ROOT (default: this repository) is the tree whose ``kontrakt`` is measured, so an older
commit's tree (``git archive``) runs the same workload. Idioms: ``flush`` (await send, then
flush), ``callbacks`` (add_done_callback on each future), ``gather``, ``wait``,
``as_completed`` and ``await_each`` (asyncio's ways of waiting on the futures, pending when
waited on: the fake sender completes them on the loop's next turn), ``gather_done``
(asyncio.gather of futures already resolved), ``produce`` (a sync produce() with a delivery
callback, then poll()), ``sync`` (a sync Producer's send()), ``results`` and
``sync_results`` (the futures of an async or sync producer kept, then each one's
``result()`` once all are resolved),
``mixed`` (unkeyed records, headers, explicit partitions and timestamps, None keys and
values, long values: the general append paths). Subtract a run with 0 records to leave the
start-up out.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import sys
import time
from pathlib import Path
from typing import Any

VALUE = b"v" * 100
PARTITIONS = 6


def _fixed_clock() -> None:
    # Builtin iterators (lazy, as cheap as the real clock to read), the same every run.
    start = 850_000_000_000_000  # 1.7e9 s in steps of 2 us
    time.time = map((2e-6).__mul__, itertools.count(start)).__next__  # type: ignore
    time.time_ns = itertools.count(start * 2000, 2000).__next__  # type: ignore


def _drain(p: Any) -> int:
    """The fake sender: take, encode and complete every batch (offsets per partition)."""
    acc = p._acc
    with acc.lock:
        acc.settle_all_locked()
    sizes = 0
    offsets: dict[tuple[str, int], int] = {}
    for tp, dq in list(acc.queues.items()):
        while dq:
            b = dq.popleft()
            b.sealed = True
            sizes += len(b.encode(1000, 0, False))
            base = offsets.get(tp, 0)
            offsets[tp] = base + b.record_count
            b.complete(base)
    return sizes


async def _run(idiom: str, n: int) -> int:
    from offline import offline_producer  # tests/unit/producer/offline.py

    p = offline_producer(PARTITIONS, _threaded=idiom in ("produce", "sync", "sync_results"))
    keys = [b"%010d" % i for i in range(n)]
    seen: list[Any] = []
    total = 0
    if idiom == "flush":
        for k in keys:
            await p.send("t", VALUE, k)
        total = _drain(p)
    elif idiom == "callbacks":
        for k in keys:
            (await p.send("t", VALUE, k)).add_done_callback(seen.append)
        total = _drain(p)
        assert len(seen) == n
    elif idiom in ("gather", "wait", "as_completed", "await_each"):
        # The sends outrun the broker: the futures are still pending when they are
        # waited on, and the fake sender completes their batches on the loop's next turn.
        futs = [await p.send("t", VALUE, k) for k in keys]
        drained: list[int] = []
        asyncio.get_running_loop().call_soon(lambda: drained.append(_drain(p)))
        if idiom == "gather":
            seen = await asyncio.gather(*futs)
        elif idiom == "wait":
            done, _ = await asyncio.wait(futs) if futs else (set(), set())
            seen = [f.result() for f in done]
        elif idiom == "as_completed":
            seen = [await f for f in asyncio.as_completed(futs)]
        else:
            seen = [await f for f in futs]
        await asyncio.sleep(0)  # the drain ran (0 records: nothing awaited it)
        assert len(seen) == n
        total = drained[0]
    elif idiom == "gather_done":
        # Every record was acknowledged before gather looks at its future.
        futs = [await p.send("t", VALUE, k) for k in keys]
        total = _drain(p)
        seen = await asyncio.gather(*futs)
        assert len(seen) == n
    elif idiom == "produce":
        # A sync Producer's produce() with a callback, then its poll() (offline.sync_over).
        from offline import sync_over

        delivered: list[Any] = []
        sync = sync_over(p)

        def on_delivery(err: Any, md: Any) -> None:
            delivered.append(md)

        for k in keys:
            sync.produce("t", VALUE, k, on_delivery=on_delivery)
        total = _drain(p)
        sync.poll(0)
        assert len(delivered) == n, len(delivered)
    elif idiom == "sync":
        # A sync Producer's send() on the caller's thread (its I/O thread is not needed
        # for appends: the producer is built around the offline core, as unit tests do).
        from kontrakt.clients.producer import Producer

        sync = object.__new__(Producer)
        sync._async = p  # type: ignore[attr-defined]
        for k in keys:
            sync.send("t", VALUE, k)
        total = _drain(p)
    elif idiom in ("results", "sync_results"):
        # The futures kept, every batch completed, then each future's result() (the
        # metadata of every record without asyncio's machinery; kafka-python's idiom).
        if idiom == "results":
            futs = [await p.send("t", VALUE, k) for k in keys]
        else:
            from offline import sync_over

            sync = sync_over(p)
            futs = [sync.send("t", VALUE, k) for k in keys]
        total = _drain(p)
        seen = [f.result() for f in futs]
        assert len(seen) == n
    elif idiom == "mixed":
        long_value = b"w" * 300
        for i, k in enumerate(keys):
            r = i % 5
            if r == 0:
                await p.send("t", VALUE)
            elif r == 1:
                await p.send("t", None, k, headers=[("h", b"x"), ("n", None)])
            elif r == 2:
                await p.send("t", long_value, k, partition=i % PARTITIONS)
            elif r == 3:
                await p.send("t", VALUE, None, timestamp_ms=1_700_000_000_000 + i)
            else:
                await p.send("t", VALUE, k)
        total = _drain(p)
    else:
        raise SystemExit(f"unknown idiom {idiom!r}")
    return total


def main() -> None:
    idiom = sys.argv[1] if len(sys.argv) > 1 else "callbacks"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    root = Path(sys.argv[3]) if len(sys.argv) > 3 else Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root))
    sys.path.insert(1, str(root / "tests" / "unit" / "producer"))
    _fixed_clock()
    random.seed(0)  # the sticky partitioner's choices
    import kontrakt.clients.producer  # noqa: F401 - imported before the clock is read

    print(idiom, n, asyncio.run(_run(idiom, n)))


if __name__ == "__main__":
    main()
