"""metrics() of ShareConsumer / AsyncShareConsumer after known traffic on the librdkafka mock
cluster: exact counts where the traffic fixes them, and every name on docs/metrics.md."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kontrakt import Producer
from kontrakt.clients.share import AcknowledgeType, AsyncShareConsumer, ShareConsumer
from kontrakt.protocol.errors import InvalidRecordStateError
from kontrakt.testing import MockCluster

pytestmark = pytest.mark.integration

TOPIC = "jobs"
METRICS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def _assert_documented(metrics: dict[str, Any]) -> None:
    page = METRICS_PAGE.read_text(encoding="utf-8")
    missing = sorted(name for name in metrics if f"`{name}`" not in page)
    assert not missing, f"metrics missing from docs/metrics.md: {missing}"


def _cluster(factory: Callable[..., MockCluster], records: int) -> MockCluster:
    cluster = factory(1)
    cluster.create_topic(TOPIC, 1, 1)
    cluster.sharegroup_auto_offset_reset(True)
    cluster.sharegroup_heartbeat_interval_ms(200)
    with Producer(bootstrap_servers=cluster.bootstrap_servers) as producer:
        for i in range(records):
            producer.send(TOPIC, value=b"%03d" % i)
        producer.flush(10)
    return cluster


def test_share_consumer_metrics_after_known_traffic(
        mock_cluster_factory: Callable[..., MockCluster]) -> None:
    # 10 records of 3-byte values, accepted implicitly 4 a poll: 10 handed out, 10 record
    # acknowledgements sent and none refused. Broken variant tried: acknowledgements
    # counted per request (3, not 10).
    cluster = _cluster(mock_cluster_factory, 10)
    with ShareConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id="g",
                       max_poll_records=4) as consumer:
        before = consumer.metrics()
        assert before["records-consumed-total"] == 0 and before["last-poll-seconds-ago"] is None
        consumer.subscribe([TOPIC])
        got = 0
        deadline = time.monotonic() + 10
        while got < 10 and time.monotonic() < deadline:
            batch = consumer.poll(0.5)
            got += len(batch)
            assert consumer.metrics()["records-consumed-total"] == got
        assert consumer.commit_sync(5)
        m = consumer.metrics()
    _assert_documented(m)
    assert got == 10
    assert m["records-consumed-total"] == 10
    assert m["acknowledgements-send-total"] == 10
    assert m["acknowledgements-error-total"] == 0
    assert m["fetch-total"] >= 1 and m["fetch-latency-max"] > 0
    assert m["bytes-consumed-total"] >= 10 * 3 and m["fetch-size-max"] > 0
    assert m["records-per-request-max"] >= 4 and m["records-per-request-avg"] > 0
    assert m["heartbeat-total"] >= 1 and m["last-heartbeat-seconds-ago"] is not None
    assert m["rebalance-total"] == 1 and m["assigned-partitions"] == 1
    assert m["time-between-poll-max"] > 0 and m["last-poll-seconds-ago"] >= 0


def test_async_share_consumer_counts_refused_acknowledgements(
        mock_cluster_factory: Callable[..., MockCluster]) -> None:
    # The broker refuses one ShareAcknowledge carrying 3 acknowledgements (injected
    # INVALID_RECORD_STATE): 3 errors. Broken variant tried: errors counted per partition
    # (1, not 3).
    cluster = _cluster(mock_cluster_factory, 3)

    async def main() -> dict[str, Any]:
        async with AsyncShareConsumer(bootstrap_servers=cluster.bootstrap_servers,
                                      group_id="g",
                                      share_acknowledgement_mode="explicit") as consumer:
            consumer.subscribe(TOPIC)
            records = []
            deadline = time.monotonic() + 10
            while len(records) < 3 and time.monotonic() < deadline:
                records.extend(await consumer.poll(0.5))
            for r in records:
                consumer.acknowledge(r, AcknowledgeType.ACCEPT)
            cluster.push_request_errors(79, [InvalidRecordStateError.code])
            await consumer.commit_sync(5)
            return consumer.metrics()

    m = asyncio.run(main())
    _assert_documented(m)
    assert m["acknowledgements-send-total"] == 3
    assert m["acknowledgements-error-total"] == 3
    assert m["records-consumed-total"] == 3
