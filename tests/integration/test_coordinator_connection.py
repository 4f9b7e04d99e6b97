"""Group requests use a connection of their own to the coordinator (Tansu).

A broker answers one connection's requests in order. With the fetcher's long-poll Fetch
(``fetch.max.wait.ms``, nothing new to return) outstanding on the connection to the same
broker, a commit sent on that connection would wait out the long poll; on the coordinator's
dedicated connection it is answered at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from kontrakt._types import OffsetAndMetadata, TopicPartition
from kontrakt.clients import AsyncKafkaClient
from kontrakt.clients.client import COORDINATOR_ID_BASE
from kontrakt.clients.consumer import AsyncConsumer
from kontrakt.protocol.records import RecordBatchBuilder
from kontrakt.testing import TansuBroker
from tests.integration.raw_ops import produce

pytestmark = pytest.mark.integration

LONG_POLL_MS = 2000
RECORDS = 10


async def _fill(bootstrap: str, topic: str) -> None:
    async with AsyncKafkaClient(bootstrap_servers=bootstrap) as client:
        b = RecordBatchBuilder()
        for i in range(RECORDS):
            b.append(None, None, f"v{i}".encode())
        assert (await produce(client, topic, 0, b.build())).error_code == 0


async def _until(condition: Callable[[], bool], what: str, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


def test_commit_is_not_queued_behind_a_long_poll_fetch(tansu_broker: TansuBroker,
                                                       topic_name: str) -> None:
    tansu_broker.create_topic(topic_name, 1)
    bs = tansu_broker.bootstrap_servers
    tp = TopicPartition(topic_name, 0)

    async def main() -> None:
        await _fill(bs, topic_name)
        async with AsyncConsumer(bootstrap_servers=bs, group_id=f"g-{topic_name}",
                                 session_timeout_ms=1000, heartbeat_interval_ms=200,
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 fetch_max_wait_ms=LONG_POLL_MS) as c:
            c.subscribe([topic_name])
            seen: list[int] = []
            deadline = time.monotonic() + 20
            while len(seen) < RECORDS:
                assert time.monotonic() < deadline, f"stalled after {seen}"
                for recs in (await c.getmany(timeout=0.5)).values():
                    seen.extend(r.offset for r in recs)
            assert seen == list(range(RECORDS))
            client = c._client
            leader = client.cluster.leader_for(topic_name, 0)
            fetch_conn = await client.connection(leader)
            # Caught up: the fetcher's next Fetch is held by the broker for the long poll.
            await _until(lambda: fetch_conn.in_flight > 0, "an outstanding Fetch")
            polled_at = time.monotonic()
            coordinator_conn = await client.coordinator_connection(f"g-{topic_name}")
            assert coordinator_conn is not fetch_conn
            assert coordinator_conn.node_id == COORDINATOR_ID_BASE - leader
            started = time.monotonic()
            await c.commit({tp: OffsetAndMetadata(RECORDS)})
            took = time.monotonic() - started
            # The long poll was still outstanding when the commit was answered.
            still_polling = fetch_conn.in_flight > 0
            assert time.monotonic() - polled_at < LONG_POLL_MS / 1000
            assert still_polling
            assert took < LONG_POLL_MS / 1000 / 2, f"commit took {took:.3f} s"
            assert (await c.committed({tp}))[tp] is not None
            assert (await c.committed({tp}))[tp].offset == RECORDS  # type: ignore[union-attr]

    asyncio.run(main())
