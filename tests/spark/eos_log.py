"""What a read_committed consumer sees of a topic, computed from the log itself.

Tansu writes transactions' commit and abort markers and hides open transactions (last
stable offset), but does not report aborted transactions in Fetch responses, so no client
can leave aborted records out against it (TEST-BROKERS.md); librdkafka's mock cluster
filters nothing under read_committed and does not store offsets sent in a transaction.
So the exactly-once tests read every batch (read_uncommitted) and apply the markers the
way a read_committed consumer does with Kafka's aborted-transactions list: a producer's
transactional records count once that producer's next marker is COMMIT.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from kontrakt.clients import AsyncKafkaClient
from kontrakt.protocol.messages import FetchRequest
from kontrakt.protocol.records import ControlRecordType, iter_batches, parse_control_record


@dataclass
class LogView:
    """Values by fate: ``committed`` (what read_committed shows, in log order per
    partition), ``aborted``, and ``open`` (in a transaction with no marker yet)."""

    committed: list[bytes | None] = field(default_factory=list)
    aborted: list[bytes | None] = field(default_factory=list)
    open: list[bytes | None] = field(default_factory=list)


def read_log(bootstrap: str, topic: str) -> LogView:
    """Every partition of ``topic`` up to its high watermark, sorted by fate."""
    return asyncio.run(_read(bootstrap, topic))


async def _read(bootstrap: str, topic: str) -> LogView:
    view = LogView()
    async with AsyncKafkaClient(bootstrap_servers=bootstrap) as client:
        info = (await client.refresh_metadata([topic])).topics[topic]
        for partition in sorted(info.partitions):
            pending: dict[int, list[bytes | None]] = {}
            offset, end = 0, None
            for _ in range(1000):  # bounded: each round moves past at least one batch
                if end is not None and offset >= end:
                    break
                req = FetchRequest(
                    max_wait_ms=50, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                    topics=[FetchRequest.FetchTopic(
                        topic=topic, topic_id=info.topic_id,
                        partitions=[FetchRequest.FetchTopic.FetchPartition(
                            partition=partition, fetch_offset=offset,
                            partition_max_bytes=1 << 20)])])
                resp = await client.request(req, node=info.partitions[partition].leader)
                part = resp.responses[0].partitions[0]
                end = part.high_watermark
                for batch in iter_batches(part.records or b""):
                    if batch.last_offset < offset:
                        continue
                    offset = batch.last_offset + 1
                    if batch.is_control:
                        kind = parse_control_record(batch.records()[0]).type
                        done = pending.pop(batch.producer_id, [])
                        (view.committed if kind == ControlRecordType.COMMIT
                         else view.aborted).extend(done)
                    elif batch.is_transactional:
                        pending.setdefault(batch.producer_id, []).extend(
                            r.value for r in batch.records())
                    else:
                        view.committed.extend(r.value for r in batch.records())
            else:
                raise AssertionError(f"{topic}/{partition}: the log did not end")
            for values in pending.values():
                view.open.extend(values)
    return view
