"""The client's own work per round trip of an awaited single send, for measuring under
callgrind or strace (wall-clock latency is meaningless on a busy machine; instructions and
system calls per round trip are not).

Sends ``N`` records one at a time, each awaited (``Producer.send_and_wait`` for ``sync``,
``await AsyncProducer.send_and_wait`` for ``async``), after 20 warm-up sends, to topic
``roundtrip`` (6 partitions, created when missing) of a broker running in another process.
Two runs with different ``N`` give the cost per round trip by difference. Prints the
voluntary context switches per round trip of the process's threads.

Usage (from the repository root; the broker: ``python -m kontrakt.testing --broker tansu
--port 39217``)::

    PYTHONHASHSEED=0 valgrind --tool=callgrind .venv/bin/python \\
        benchmarks/produce_roundtrip.py sync|async N 127.0.0.1:39217
    PYTHONHASHSEED=0 strace -f -c .venv/bin/python benchmarks/produce_roundtrip.py ...
"""

from __future__ import annotations

import asyncio
import glob
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kontrakt import AdminClient
from kontrakt.clients.admin import NewTopic
from kontrakt.clients.producer import AsyncProducer, Producer
from kontrakt.errors import TopicAlreadyExistsError

TOPIC = "roundtrip"
VALUE = b"v" * 100
WARM_UP = 20


def _switches() -> int:
    total = 0
    for path in glob.glob("/proc/self/task/*/status"):
        with open(path) as f:
            for line in f:
                if line.startswith("voluntary_ctxt_switches"):
                    total += int(line.split()[1])
    return total


def main() -> None:
    mode, n, bootstrap = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        try:
            admin.create_topics([NewTopic(TOPIC, 6, 1)])
        except TopicAlreadyExistsError:
            pass
    if mode == "sync":
        with Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=5) as p:
            for i in range(WARM_UP):
                p.send_and_wait(TOPIC, VALUE, b"%010d" % i)
            before = _switches()
            for i in range(n):
                p.send_and_wait(TOPIC, VALUE, b"%010d" % i)
            after = _switches()
    else:
        async def run() -> tuple[int, int]:
            async with AsyncProducer(bootstrap_servers=bootstrap, acks="all",
                                     linger_ms=5) as p:
                for i in range(WARM_UP):
                    await p.send_and_wait(TOPIC, VALUE, b"%010d" % i)
                before = _switches()
                for i in range(n):
                    await p.send_and_wait(TOPIC, VALUE, b"%010d" % i)
                return before, _switches()
        before, after = asyncio.run(run())
    print(f"{mode}: {n} round trips, {(after - before) / n:.2f} voluntary context switches "
          "each")


if __name__ == "__main__":
    main()
