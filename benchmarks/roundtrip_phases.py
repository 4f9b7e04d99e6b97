"""Where the wall time of an awaited single send goes: the broker's share and the client's.

Two measurements against one broker running in another process (``python -m
kontrakt.testing --broker tansu --port 39217``):

``phases``
    ``N`` sync ``Producer.send_and_wait`` round trips with timestamps taken at the
    hand-overs: the caller's eventfd write (``HandOver.wake``), the I/O thread's
    ``HandOver._woken``, the request's socket write, the answer's ``buffer_updated``,
    ``ProducerBatch.complete`` and the selector's ``select``. Prints the median of each
    phase. The wrappers that take the timestamps cost ~0.3 us each.

``side``
    ``N`` round trips each, in one process: a captured Produce request replayed on a
    blocking socket (idempotence off, so the broker takes the same bytes again: the floor
    of broker and kernel), kontrakt sync and async ``send_and_wait``, and confluent-kafka's
    ``produce()`` + ``flush()``. Prints p50, p10 and the process's CPU a round trip.

Records: 10-byte keys, 100-byte values, acks=all, to topic ``phases`` (6 partitions,
created when missing). Wall-clock figures need a quiet machine. Usage (from the repository
root)::

    .venv/bin/python benchmarks/roundtrip_phases.py phases|side [N] [127.0.0.1:39217]
    taskset -c 1 .venv/bin/python benchmarks/roundtrip_phases.py side   # one CPU
"""

from __future__ import annotations

import asyncio
import asyncio.selector_events
import bisect
import selectors
import socket
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path
from time import perf_counter_ns
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kontrakt import AdminClient
from kontrakt.clients._net.framing import KafkaProtocol
from kontrakt.clients.admin import NewTopic
from kontrakt.clients.producer import AsyncProducer, Producer
from kontrakt.clients.producer._batch import ProducerBatch
from kontrakt.clients.producer._handover import HandOver
from kontrakt.errors import TopicAlreadyExistsError

TOPIC = "phases"
VALUE = b"v" * 100
WARM_UP = 50


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def _stamp(events: list[tuple[str, int]], cls: Any, name: str, tag: str,
           after: bool = False) -> Callable[[], None]:
    """Wrap ``cls.name`` to append (tag, now) before (or after) each call; returns the undo."""
    orig = getattr(cls, name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if not after:
            events.append((tag, perf_counter_ns()))
        result = orig(*args, **kwargs)
        if after:
            events.append((tag, perf_counter_ns()))
        return result

    setattr(cls, name, wrapped)
    return lambda: setattr(cls, name, orig)


def phases(bootstrap: str, n: int) -> None:
    events: list[tuple[str, int]] = []
    transport = asyncio.selector_events._SelectorSocketTransport  # type: ignore[attr-defined]
    undo = [
        _stamp(events, HandOver, "wake", "wake"),
        _stamp(events, HandOver, "_woken", "woken"),
        _stamp(events, transport, "write", "write"),
        _stamp(events, KafkaProtocol, "buffer_updated", "answer"),
        _stamp(events, ProducerBatch, "complete", "complete"),
        _stamp(events, ProducerBatch, "complete", "completed", after=True),
        _stamp(events, selectors.EpollSelector, "select", "select"),
        _stamp(events, selectors.EpollSelector, "select", "selected", after=True),
    ]
    spans: list[tuple[int, int]] = []
    try:
        with Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=5) as p:
            for i in range(WARM_UP):
                p.send_and_wait(TOPIC, VALUE, b"%010d" % i)
            events.clear()
            for i in range(n):
                t0 = perf_counter_ns()
                p.send_and_wait(TOPIC, VALUE, b"%010d" % i)
                spans.append((t0, perf_counter_ns()))
    finally:
        for u in undo:
            u()
    events.sort(key=lambda e: e[1])
    times = [t for _, t in events]
    rows: list[dict[str, list[int]]] = []
    for t0, t1 in spans:
        seen: dict[str, list[int]] = {"start": [t0], "end": [t1]}
        for tag, t in events[bisect.bisect_left(times, t0):bisect.bisect_right(times, t1)]:
            seen.setdefault(tag, []).append(t)
        if all(k in seen for k in ("wake", "woken", "write", "answer", "complete",
                                   "completed", "selected")):
            rows.append(seen)
    # The I/O thread's next select after complete(): when it gives the GIL up.
    selects = [t for tag, t in events if tag == "select"]

    def gil_free(r: dict[str, list[int]]) -> int:
        done = r["completed"][0]
        i = bisect.bisect_left(selects, done)
        return selects[i] - done if i < len(selects) else 0

    def selector_to_answer(r: dict[str, list[int]]) -> int:
        answer = r["answer"][0]
        before = [t for t in r["selected"] if t < answer]
        return answer - before[-1] if before else 0

    steps: list[tuple[str, Callable[[dict[str, list[int]]], int]]] = [
        ("caller: send_and_wait up to the eventfd write",
         lambda r: r["wake"][0] - r["start"][0]),
        ("eventfd write -> the I/O thread runs _woken", lambda r: r["woken"][0] - r["wake"][0]),
        ("the pass: drain, frame, CRC, socket write", lambda r: r["write"][0] - r["woken"][0]),
        ("broker: request written -> answer read", lambda r: r["answer"][0] - r["write"][0]),
        ("selector returns -> buffer_updated", selector_to_answer),
        ("answer read -> complete()", lambda r: r["complete"][0] - r["answer"][0]),
        ("complete() (wakes the caller)", lambda r: r["completed"][0] - r["complete"][0]),
        ("complete() returns -> the caller returns",
         lambda r: r["end"][0] - r["completed"][0]),
        ("complete() returns -> the I/O thread's next select", gil_free),
        ("round trip", lambda r: r["end"][0] - r["start"][0]),
    ]
    print(f"{len(rows)} of {n} round trips with every stamp; medians, us")
    for label, step in steps:
        print(f"  {label:52s} {_median([step(r) / 1e3 for r in rows]):7.1f}")


def _captured_request(bootstrap: str) -> bytes:
    """The bytes of one Produce request of a producer without idempotence."""
    frames: list[bytes] = []
    transport = asyncio.selector_events._SelectorSocketTransport  # type: ignore[attr-defined]
    orig = transport.write

    def spy(self: Any, data: Any) -> None:
        frames.append(bytes(data))
        orig(self, data)

    transport.write = spy
    try:
        with Producer(bootstrap_servers=bootstrap, acks="all",
                      enable_idempotence=False) as p:
            p.send_and_wait(TOPIC, VALUE, b"k")
            frames.clear()
            p.send_and_wait(TOPIC, VALUE, b"k")
    finally:
        transport.write = orig
    frame = frames[-1]
    assert struct.unpack(">h", frame[4:6])[0] == 0, "not a Produce request"
    return frame


def _report(name: str, samples: list[float], cpu: float) -> None:
    samples.sort()
    print(f"{name:16s} p50 {samples[len(samples) // 2] * 1e6:7.1f} us   "
          f"p10 {samples[len(samples) // 10] * 1e6:7.1f}   "
          f"CPU {cpu / len(samples) * 1e6:6.1f} us a round trip")


def side(bootstrap: str, n: int) -> None:
    import confluent_kafka

    frame = _captured_request(bootstrap)
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port))) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def replay() -> None:
            sock.sendall(frame)
            size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
            sock.recv(size, socket.MSG_WAITALL)

        for _ in range(WARM_UP):
            replay()
        samples = []
        cpu = time.process_time()
        for _ in range(n):
            t0 = time.perf_counter()
            replay()
            samples.append(time.perf_counter() - t0)
        _report("raw socket", samples, time.process_time() - cpu)

    with Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=5) as p:
        for i in range(WARM_UP):
            p.send_and_wait(TOPIC, VALUE, b"%010d" % i)
        samples = []
        cpu = time.process_time()
        for i in range(n):
            t0 = time.perf_counter()
            p.send_and_wait(TOPIC, VALUE, b"%010d" % i)
            samples.append(time.perf_counter() - t0)
        _report("kontrakt sync", samples, time.process_time() - cpu)

    async def run_async() -> None:
        async with AsyncProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5) as ap:
            for i in range(WARM_UP):
                await ap.send_and_wait(TOPIC, VALUE, b"%010d" % i)
            samples = []
            cpu = time.process_time()
            for i in range(n):
                t0 = time.perf_counter()
                await ap.send_and_wait(TOPIC, VALUE, b"%010d" % i)
                samples.append(time.perf_counter() - t0)
            _report("kontrakt async", samples, time.process_time() - cpu)

    asyncio.run(run_async())

    cp = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                   "linger.ms": 5})
    for i in range(WARM_UP):
        cp.produce(TOPIC, VALUE, b"%010d" % i)
        cp.flush(10)
    samples = []
    cpu = time.process_time()
    for i in range(n):
        t0 = time.perf_counter()
        cp.produce(TOPIC, VALUE, b"%010d" % i)
        cp.flush(10)
        samples.append(time.perf_counter() - t0)
    _report("confluent-kafka", samples, time.process_time() - cpu)


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "phases"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    bootstrap = sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1:39217"
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        try:
            admin.create_topics([NewTopic(TOPIC, 6, 1)])
        except TopicAlreadyExistsError:
            pass
    if mode == "phases":
        phases(bootstrap, n)
    elif mode == "side":
        side(bootstrap, n)
    else:
        raise SystemExit(f"unknown mode {mode!r}: phases or side")


if __name__ == "__main__":
    main()
