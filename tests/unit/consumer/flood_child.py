"""Child process of ``test_decoded_memory.py``: a consumer fed record floods (batches that
decode to far more memory than they take on the wire) by the crafted broker, its peak RSS
measured in a process of its own.

Run as ``python -m tests.unit.consumer.flood_child SPEC.json``; prints a JSON report. The
spec names two partition logs (files of concatenated batches): partition 0 warms the
consumer up, partition 1 is the flood, served whole in one response (as a hostile broker
may). The application first takes nothing for a while, then drains in steps of
``drain_step`` records, checking that the offsets run in order without a gap, and keeps no
record: what stays in memory is the consumer's.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
from typing import Any

from kontrakt._types import TopicPartition
from kontrakt.clients.consumer import AsyncConsumer
from kontrakt.protocol.records import CompressionType, compress, iter_batches
from kontrakt.protocol.records._builder import frame_batch
from tests._crafted_broker import FakeBroker
from tests.unit.bombs import _varint, rss_growth, rss_mark
from tests.unit.consumer.bomb_child import _serve

TOPIC = "bombs"  # the topic bomb_child's broker serves
TS = 1_700_000_000_000


def tiny_records(count: int, first_delta: int = 0) -> bytes:
    """``count`` minimal v2 records (no key, value or headers: 7-9 bytes each)."""
    out = bytearray()
    tail = b"\x01\x01\x00"  # key -1, value -1, no headers
    for i in range(first_delta, first_delta + count):
        body = b"\x00\x00" + _varint(i) + tail  # attributes, timestamp delta, offset delta
        out += _varint(len(body))
        out += body
    return bytes(out)


def value_records(count: int, value_size: int) -> bytes:
    """``count`` v2 records, each with a ``value_size``-byte value of zeros."""
    value = bytes(value_size)
    out = bytearray()
    for i in range(count):
        body = b"\x00\x00" + _varint(i) + b"\x01" + _varint(value_size) + value + b"\x00"
        out += _varint(len(body))
        out += body
    return bytes(out)


def batch(codec: str, records: bytes, count: int, base_offset: int) -> bytes:
    """A valid compressed v2 batch around ``count`` encoded ``records``."""
    ct = CompressionType[codec.upper()]
    return frame_batch(compress(ct, records), count, TS, TS, codec=ct, compressed=True,
                       base_offset=base_offset)


async def _wait_parked(c: AsyncConsumer) -> None:
    """Until the flood's response is decoded or its decoding waits for buffer space
    (bounded: 30 s)."""
    fetcher = c._fetcher
    for _ in range(3000):
        space = getattr(fetcher, "_space", None)
        parked = space is not None and bool(getattr(space, "_waiters", None))
        if fetcher.fetches >= 2 and (parked or not fetcher._decoding):
            return
        await asyncio.sleep(0.01)


async def main(spec: dict[str, Any]) -> dict[str, Any]:
    logs = []
    for path in spec["logs"]:
        with open(path, "rb") as f:
            data = f.read()
        logs.append([(b.next_offset, b.raw()) for b in iter_batches(data, check_crcs=False)])
    end = logs[1][-1][0]
    report: dict[str, Any] = {}
    async with FakeBroker({TOPIC: 2}, {1: _serve(logs)}) as broker:  # noqa: SIM117
        async with AsyncConsumer(bootstrap_servers=broker.bootstrap,
                                 max_partition_fetch_bytes=spec["partition_fetch"],
                                 queued_max_messages_kbytes=spec["cap_kib"],
                                 fetch_max_wait_ms=50, max_poll_records=1_000_000) as c:
            warm = TopicPartition(TOPIC, 0)
            c.assign([warm])
            c.seek(warm, 0)
            got = 0
            for _ in range(200):
                got += sum(len(r) for r in (await c.getmany(timeout=0.2)).values())
                if got >= logs[0][-1][0]:
                    break
            report["warm_up"] = got
            tp = TopicPartition(TOPIC, 1)
            c.assign([tp])
            c.seek(tp, 0)
            gc.collect()
            mark = rss_mark()
            fetches = c._fetcher.fetches
            # A stalled application: nothing is taken until the flood is decoded, or its
            # decoding waits for room.
            for _ in range(3000):
                if c._fetcher.fetches > fetches:
                    break
                await asyncio.sleep(0.01)
            await _wait_parked(c)
            report["stalled_rss_growth"] = rss_growth(mark)
            report["stalled_buffered"] = c._buffer.total_bytes
            # Then a slow one: a step of records at a time, every offset checked.
            expected = 0
            in_order = True
            most = 0
            for _ in range(100_000):
                step = await c.getmany(timeout=2.0, max_records=spec["drain_step"])
                for recs in step.values():
                    for r in recs:
                        in_order = in_order and r.offset == expected
                        expected = r.offset + 1
                del step
                most = max(most, c._buffer.total_bytes)
                if expected >= end:
                    break
                await asyncio.sleep(0)
            report.update(delivered=expected, in_order=in_order, most_buffered=most,
                          position=(await c.position(tp)), rss_growth=rss_growth(mark))
    return report


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(json.dumps(asyncio.run(main(json.load(f)))))
