"""Child process of ``test_decompression_bombs.py``: a consumer fed decompression bombs by
the crafted broker, with its peak RSS measured in a process of its own.

Run as ``python -m tests.unit.consumer.bomb_child SPEC.json``; prints a JSON report. The
spec names, per partition, a file holding that partition's log (concatenated batches) and
where its bomb sits. Partition 0 has no bomb: it warms the consumer up (and holds a batch of
text just within the limit) before the peak RSS is measured over the bomb partitions.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
from typing import Any

from kontrakt._types import TopicPartition
from kontrakt.clients.consumer import AsyncConsumer
from kontrakt.errors import CorruptRecordError
from kontrakt.protocol.messages import FetchResponse
from kontrakt.protocol.records import iter_batches
from tests._crafted_broker import FakeBroker
from tests.unit.bombs import rss_growth, rss_mark

TOPIC = "bombs"


def _serve(logs: list[list[tuple[int, bytes]]]) -> Any:
    """Answer each fetch with the partition's batches from the fetch offset on."""
    async def handle(version: int, req: Any) -> Any:
        R = FetchResponse.FetchableTopicResponse
        P = R.PartitionData
        parts = []
        for t in req.topics:
            for p in t.partitions:
                log = logs[p.partition]
                end = log[-1][0] if log else 0
                blobs = [blob for nxt, blob in log if nxt > p.fetch_offset]
                if not blobs:
                    await asyncio.sleep(0.02)
                parts.append(P(partition_index=p.partition, error_code=0, high_watermark=end,
                               last_stable_offset=end, log_start_offset=0,
                               records=b"".join(blobs)))
        return FetchResponse(session_id=0, responses=[R(topic=TOPIC, partitions=parts)])
    return handle


async def _consume(c: AsyncConsumer, tp: TopicPartition, until: int
                   ) -> tuple[list[int], CorruptRecordError | None]:
    """Offsets handed out until ``until`` is reached or the partition raises (bounded)."""
    got: list[int] = []
    for _ in range(300):
        try:
            batch = await c.getmany(timeout=0.2)
        except CorruptRecordError as exc:
            return got, exc
        got.extend(r.offset for recs in batch.values() for r in recs)
        if got and got[-1] + 1 >= until:
            break
    return got, None


async def main(spec: dict[str, Any]) -> dict[str, Any]:
    logs = []
    for part in spec["partitions"]:
        with open(part["path"], "rb") as f:
            data = f.read()
        logs.append([(b.next_offset, b.raw()) for b in iter_batches(data, check_crcs=False)])
    report: dict[str, Any] = {"cases": []}
    async with FakeBroker({TOPIC: len(logs)}, {1: _serve(logs)}) as broker:  # noqa: SIM117
        async with AsyncConsumer(bootstrap_servers=broker.bootstrap,
                                 max_partition_fetch_bytes=spec["max_partition_fetch_bytes"],
                                 fetch_max_wait_ms=50, max_poll_records=100_000) as c:
            warm = TopicPartition(TOPIC, 0)
            c.assign([warm])
            c.seek(warm, 0)
            got, err = await _consume(c, warm, logs[0][-1][0])
            report["warm_up"] = {"records": len(got), "error": repr(err) if err else None}
            gc.collect()
            mark = rss_mark()
            for i, part in enumerate(spec["partitions"][1:], start=1):
                tp = TopicPartition(TOPIC, i)
                c.assign([tp])
                c.seek(tp, 0)
                bomb = part["bomb_offset"]
                end = logs[i][-1][0]
                got, err = await _consume(c, tp, end)
                case: dict[str, Any] = {"before": got, "error": None}
                if err is not None:
                    case["error"] = {"type": type(err).__name__,
                                     "is_corrupt_record_error": True,
                                     "where": [err.topic, err.partition, err.offset],
                                     "limit": getattr(err, "limit", None)}
                    # The position stays on the bad batch: what a commit would send.
                    case["position"] = c._subs.state(tp).position.offset  # type: ignore[union-attr]
                    again = await _consume(c, tp, end)
                    case["raised_again"] = again[1] is not None and not again[0]
                    c.seek(tp, bomb + 1)
                    after: tuple[list[int], CorruptRecordError | None] = ([], None)
                    if bomb + 1 < end:
                        after = await _consume(c, tp, end)
                    case["after"] = after[0]
                    case["after_error"] = repr(after[1]) if after[1] else None
                report["cases"].append(case)
            report["rss_growth"] = rss_growth(mark)
    return report


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(json.dumps(asyncio.run(main(json.load(f)))))
