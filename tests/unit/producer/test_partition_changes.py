"""Records without a key after their topic's partition count changed (a topic deleted and
made again with fewer partitions, or grown), without a broker: every path places them
among the partitions the topic has now."""

from __future__ import annotations

import asyncio
import random
import uuid
from typing import Any

import pytest

from kontrakt.clients.cluster import PartitionInfo, TopicInfo
from kontrakt.clients.producer import AsyncProducer, RecordFuture
from tests.unit.producer.offline import offline_producer


def set_partitions(p: AsyncProducer, count: int, leaderless: tuple[int, ...] = ()) -> None:
    """A metadata update: topic "t" has ``count`` partitions now (those in ``leaderless``
    without a leader)."""
    cluster = p._cluster
    parts = {i: PartitionInfo("t", i, -1 if i in leaderless else 1, 0, (1,), (1,), (), 0)
             for i in range(count)}
    cluster.topics["t"] = TopicInfo("t", uuid.uuid4(), False, parts, 0)
    cluster.version += 1
    for listener in cluster.on_update:
        listener()


#: ways an unkeyed record takes the general path (the stage declines it), and the staged
#: one: (value, send() keyword arguments)
WAYS: dict[str, tuple[Any, dict[str, Any]]] = {
    "headers": (b"v", {"headers": [("h", b"1")]}),
    "null value": (None, {}),
    "long value": (b"v" * 9000, {}),
    "staged": (b"v", {}),
}


@pytest.mark.parametrize("way", list(WAYS))
@pytest.mark.parametrize("seed", range(3))
def test_unkeyed_records_after_the_topic_shrank_go_to_its_partitions(way: str,
                                                                     seed: int) -> None:
    # The sticky partition of 6 was 2..5; the topic is made again with 2 partitions: the
    # next unkeyed record goes to 0 or 1 (not to a partition the topic no longer has,
    # where it would wait for a leader until delivery.timeout.ms).
    random.seed(seed)
    p = offline_producer(6, batch_size=1000)
    set_partitions(p, 6)
    value, kw = WAYS[way]

    async def main() -> tuple[int, RecordFuture]:
        sticky = -1
        for _ in range(200):
            fut = await p.send("t", b"x" * 100, headers=[("h", b"1")])
            sticky = fut.metadata().partition
            if sticky >= 2:
                break
        set_partitions(p, 2)
        return sticky, await p.send("t", value, **kw)

    sticky, fut = asyncio.run(main())
    assert sticky >= 2
    assert fut.metadata().partition in (0, 1)
    assert p._default.current["t"] in (0, 1)
