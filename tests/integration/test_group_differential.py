"""Consumer groups and their commits on Tansu (session.timeout.ms 2000: Tansu holds a JoinGroup
about 1 s, see TEST-BROKERS.md)."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import pytest

from kontrakt._types import TopicPartition
from kontrakt.clients import AsyncKafkaClient
from kontrakt.clients.consumer import Consumer
from kontrakt.protocol.records import RecordBatchBuilder
from kontrakt.testing import TansuBroker
from tests.integration.raw_ops import produce

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

PARTS = 4
PREFILL = 80  # records per partition before the members start
SESSION_MS = 2000


def _value(p: int, off: int) -> bytes:
    return b"%d-%d" % (p, off)


async def _prefill(bootstrap: str, topic: str) -> None:
    async with AsyncKafkaClient(bootstrap_servers=bootstrap) as client:
        for p in range(PARTS):
            off = 0
            while off < PREFILL:
                # Two batches: a produce takes Tansu ~30 ms.
                n = min(PREFILL - off, PREFILL // 2 + p)
                b = RecordBatchBuilder()
                for j in range(off, off + n):
                    b.append(0, None, _value(p, j))
                part = await produce(client, topic, p, b.build())
                assert part.error_code == 0, part
                off += n


@pytest.mark.parametrize(("how", "commit"), [("assign", "commit"),
                                              ("subscribe", "commit_async")])
def test_auto_commit_does_not_undo_an_explicit_commit(tansu_broker: TansuBroker, how: str,
                                                      commit: str) -> None:
    """commit() says every record handed out is processed: a timed auto commit before the
    next poll must not commit the first record of the latest poll again (which moved the
    committed offset back, and those records were read twice after a rebalance)."""
    topic = f"group-differential-{random.Random().getrandbits(40):x}"
    tansu_broker.create_topic(topic, PARTS)
    asyncio.run(_prefill(tansu_broker.bootstrap_servers, topic))
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=tansu_broker.bootstrap_servers, group_id=f"g-{topic}",
                  session_timeout_ms=SESSION_MS, heartbeat_interval_ms=100,
                  auto_offset_reset="earliest", auto_commit_interval_ms=50,
                  fetch_max_wait_ms=50) as c:
        if how == "assign":
            c.assign([tp])
        else:
            c.subscribe([topic])
        got: list[int] = []
        deadline = time.monotonic() + 10
        while len(got) < 10:
            assert time.monotonic() < deadline, got
            got.extend(r.offset for r in c.getmany(0.2, max_records=10 - len(got)).get(tp, []))
        position = c.position(tp)
        if commit == "commit":
            c.commit(timeout=10)
        else:
            c.commit_async().result(10)
        assert c.committed(tp, timeout=10) == position
        time.sleep(0.3)  # timed auto commits, no poll
        assert c.committed(tp, timeout=10) == position


def test_close_after_a_lost_assignment_neither_revokes_nor_commits(
        tansu_broker: TansuBroker) -> None:
    """A member that stopped calling the consumer for max.poll.interval.ms loses its
    partitions; the on_partitions_lost call waits for its next call. When that call is
    close(), the partitions are lost once: close() neither commits them (the group has
    moved on) nor calls on_partitions_revoked for them afterwards."""
    topic = f"group-differential-{random.Random().getrandbits(40):x}"
    tansu_broker.create_topic(topic, PARTS)
    asyncio.run(_prefill(tansu_broker.bootstrap_servers, topic))
    group = f"g-{topic}"
    events: list[tuple[str, int]] = []

    class Listener:
        def on_partitions_assigned(self, parts: set[TopicPartition]) -> None:
            events.append(("assigned", len(parts)))

        def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
            events.append(("revoked", len(parts)))

        def on_partitions_lost(self, parts: set[TopicPartition]) -> None:
            events.append(("lost", len(parts)))

    c: Consumer[Any, Any] = Consumer(
        bootstrap_servers=tansu_broker.bootstrap_servers, group_id=group,
        session_timeout_ms=SESSION_MS, heartbeat_interval_ms=100, max_poll_interval_ms=1000,
        auto_offset_reset="earliest", auto_commit_interval_ms=600_000, fetch_max_wait_ms=50)
    try:
        c.subscribe([topic], listener=Listener())
        deadline = time.monotonic() + 10
        n = 0
        while n < 10:
            assert time.monotonic() < deadline, events
            n += len(c.consume(10, 0.2))
        time.sleep(1.5)  # no call: max.poll.interval.ms passes
    finally:
        c.close(timeout=10)
    assert events == [("assigned", PARTS), ("lost", PARTS)]
    with Consumer(bootstrap_servers=tansu_broker.bootstrap_servers, group_id=group,
                  enable_auto_commit=False) as other:
        got = other.committed([TopicPartition(topic, p) for p in range(PARTS)], timeout=10)
    assert all(om is None for om in got.values()), got
