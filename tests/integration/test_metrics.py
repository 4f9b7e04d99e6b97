"""metrics() of the consumer and the admin client after known traffic against Tansu: counts
of records, fetches, commits, rebalances, lag and requests, and broker errors by name. Every
name a client returns must be on the documentation's metrics page (docs/metrics.md)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kontrakt._types import TopicPartition
from kontrakt.clients import (
    AdminClient,
    AsyncAdminClient,
    AsyncConsumer,
    Consumer,
    KafkaClient,
    Producer,
)
from kontrakt.clients.admin import NewTopic
from kontrakt.errors import KafkaTimeoutError, TopicAlreadyExistsError
from kontrakt.protocol.messages import CreateTopicsRequest, MetadataRequest
from kontrakt.testing import MockCluster, TansuBroker

METRICS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def _assert_documented(metrics: dict[str, Any]) -> None:
    page = METRICS_PAGE.read_text(encoding="utf-8")
    missing = sorted(name for name in metrics if f"`{name}`" not in page)
    assert not missing, f"metrics missing from docs/metrics.md: {missing}"

pytestmark = pytest.mark.integration


def _produce(bootstrap: str, topic: str, values: list[bytes], partition: int) -> None:
    with Producer(bootstrap_servers=bootstrap, linger_ms=0) as p:
        for v in values:
            p.send(topic, v, partition=partition)
        assert p.flush(10) == 0
        _assert_documented(p.metrics())


def test_consumer_metrics_after_known_traffic(tansu_broker: TansuBroker, topic_name: str
                                              ) -> None:
    """12 records in two partitions consumed by a group member, one explicit commit; then
    5 more fetched but not polled show up as lag."""
    bs = tansu_broker.bootstrap_servers
    tansu_broker.create_topic(topic_name, 2)
    _produce(bs, topic_name, [b"a%02d" % i for i in range(7)], 0)
    _produce(bs, topic_name, [b"b%02d" % i for i in range(5)], 1)
    with Consumer(bootstrap_servers=bs, group_id=topic_name, auto_offset_reset="earliest",
                  enable_auto_commit=False, session_timeout_ms=2000) as c:
        c.subscribe([topic_name])
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < 12 and time.monotonic() < deadline:
            got.extend(c.consume(12 - len(got), timeout=1.0))
        assert len(got) == 12
        m = c.metrics()
        assert m["records-consumed-total"] == 12
        assert m["records-consumed-rate"] > 0
        assert m["bytes-consumed-total"] > 12 * 3
        assert m["fetch-total"] >= 1 and m["fetch-rate"] > 0
        assert 0 < m["fetch-latency-avg"] <= m["fetch-latency-max"]
        assert m["fetch-size-max"] > 12 * 3 / 2  # at least one partition's records in one
        assert m["assigned-partitions"] == 2
        assert m["rebalance-total"] == 1
        assert m["records-lag-max"] == 0
        assert m["commit-total"] == 0 and m["commit-latency-avg"] == 0.0
        c.commit()
        m = c.metrics()
        assert m["commit-total"] == 1
        assert 0 < m["commit-latency-avg"] == m["commit-latency-max"]

        # Fetched in the background, not polled: the position stays, the end moves.
        _produce(bs, topic_name, [b"c%02d" % i for i in range(5)], 0)
        deadline = time.monotonic() + 15
        while c.metrics()["records-lag-max"] != 5 and time.monotonic() < deadline:
            time.sleep(0.05)  # the background fetch has no event to wait on from here
        m = c.metrics()
        assert m["records-lag-max"] == 5
        assert m["partitions"][str(TopicPartition(topic_name, 0))]["records-lag"] == 5
        assert m["partitions"][str(TopicPartition(topic_name, 1))]["records-lag"] == 0
        assert m["records-consumed-total"] == 12
        _assert_documented(m)


def test_stats_cb_carries_the_consumer_metrics_in_librdkafkas_names(
        tansu_broker: TansuBroker, topic_name: str) -> None:
    """stats_cb's JSON after known traffic: per partition ``rxmsgs`` / ``rxbytes`` (received
    from the broker) and ``consumer_lag``, the group's ``cgrp.rebalance_cnt``; records
    fetched but not polled count as received and as lag, not as consumed."""
    bs = tansu_broker.bootstrap_servers
    tansu_broker.create_topic(topic_name, 2)
    _produce(bs, topic_name, [b"a%02d" % i for i in range(7)], 0)
    _produce(bs, topic_name, [b"b%02d" % i for i in range(5)], 1)
    reports: list[dict[str, Any]] = []
    arrived = threading.Condition()

    def stats_cb(doc: str) -> None:
        with arrived:
            reports.append(json.loads(doc))
            arrived.notify_all()

    def report_where(check: Any, timeout: float = 15.0) -> dict[str, Any]:
        with arrived:
            assert arrived.wait_for(lambda: bool(reports) and check(reports[-1]), timeout), \
                reports[-1:]
            return reports[-1]

    def partitions(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
        parts: dict[str, dict[str, Any]] = doc["topics"][topic_name]["partitions"]
        return parts

    with Consumer(bootstrap_servers=bs, group_id=topic_name, auto_offset_reset="earliest",
                  enable_auto_commit=False, session_timeout_ms=2000, stats_cb=stats_cb,
                  statistics_interval_ms=50) as c:
        c.subscribe([topic_name])
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < 12 and time.monotonic() < deadline:
            got.extend(c.consume(12 - len(got), timeout=1.0))
        assert len(got) == 12
        doc = report_where(lambda d: d["rxmsgs"] == 12)
        p0, p1 = partitions(doc)["0"], partitions(doc)["1"]
        assert (p0["rxmsgs"], p1["rxmsgs"]) == (7, 5)
        assert p0["rxbytes"] > 7 * 3 and p1["rxbytes"] > 5 * 3
        # Every fetch was consumed to its end: the partitions' bytes add up to the total.
        assert p0["rxbytes"] + p1["rxbytes"] == doc["rxmsg_bytes"]
        assert (p0["consumer_lag"], p1["consumer_lag"]) == (0, 0)
        assert doc["cgrp"] == {"join_state": "steady", "rebalance_cnt": 1,
                               "assignment_size": 2}

        # Fetched in the background, not polled: received and lagging, not consumed.
        _produce(bs, topic_name, [b"c%02d" % i for i in range(5)], 0)
        doc = report_where(lambda d: partitions(d)["0"]["consumer_lag"] == 5
                           and partitions(d)["0"]["rxmsgs"] == 12)
        assert doc["rxmsgs"] == 12 and partitions(doc)["1"]["rxmsgs"] == 5
        assert c.metrics()["records-lag-max"] == 5


def test_async_consumer_metrics_without_a_group(tansu_broker: TansuBroker, topic_name: str
                                                ) -> None:
    """AsyncConsumer.metrics() returns the same names; no group: no rebalance, no commit."""
    bs = tansu_broker.bootstrap_servers
    tansu_broker.create_topic(topic_name, 1)
    _produce(bs, topic_name, [b"x%d" % i for i in range(4)], 0)

    async def main() -> dict[str, Any]:
        async with AsyncConsumer(bootstrap_servers=bs, auto_offset_reset="earliest") as c:
            c.assign([TopicPartition(topic_name, 0)])
            got = 0
            deadline = time.monotonic() + 15
            while got < 4 and time.monotonic() < deadline:
                got += sum(len(v) for v in (await c.getmany(timeout=0.5)).values())
            assert got == 4
            return c.metrics()

    m = asyncio.run(main())
    assert m["records-consumed-total"] == 4
    assert m["fetch-total"] >= 1 and m["fetch-latency-max"] > 0
    assert m["rebalance-total"] == 0 and m["commit-total"] == 0
    assert m["records-lag-max"] == 0


def _admin_traffic(admin: Any, topic: str) -> None:
    admin.create_topics([NewTopic(topic, num_partitions=1)])
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic(topic, num_partitions=1)])


async def _async_admin_traffic(admin: AsyncAdminClient, topic: str) -> None:
    await admin.create_topics([NewTopic(topic, num_partitions=1)])
    with pytest.raises(TopicAlreadyExistsError):
        await admin.create_topics([NewTopic(topic, num_partitions=1)])


@pytest.mark.parametrize("form", ["AdminClient", "AsyncAdminClient"])
def test_admin_metrics_count_requests_and_broker_errors(tansu_broker: TansuBroker,
                                                        topic_name: str, form: str) -> None:
    """Two CreateTopics requests for one topic: one created, one TOPIC_ALREADY_EXISTS."""
    bs = tansu_broker.bootstrap_servers
    if form == "AdminClient":
        with AdminClient(bootstrap_servers=bs) as admin:
            assert admin.metrics()["request-total"] == 0
            _admin_traffic(admin, topic_name)
            m = admin.metrics()
    else:
        async def main() -> dict[str, Any]:
            async with AsyncAdminClient(bootstrap_servers=bs) as admin:
                assert admin.metrics()["request-total"] == 0
                await _async_admin_traffic(admin, topic_name)
                return admin.metrics()
        m = asyncio.run(main())
    assert m["requests-by-api"] == {"CreateTopics": 2}
    assert m["request-total"] == m["response-total"] == 2
    assert m["request-rate"] > 0
    assert 0 < m["request-latency-avg"] <= m["request-latency-max"]
    assert m["request-error-total"] == 0
    assert m["errors-by-name"] == {"TOPIC_ALREADY_EXISTS": 1}
    assert m["error-total"] == 1 and m["error-rate"] > 0
    _assert_documented(m)


def test_kafka_client_metrics_count_requests_by_api(tansu_broker: TansuBroker,
                                                    topic_name: str) -> None:
    """The low-level client's requests, by API: two CreateTopics (the second refused with
    TOPIC_ALREADY_EXISTS), a coordinator lookup, the metadata refreshes."""
    def create() -> int:
        req = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name=topic_name, num_partitions=1, replication_factor=1)], timeout_ms=10000)
        return int(client.request(req).topics[0].error_code)

    with KafkaClient(bootstrap_servers=tansu_broker.bootstrap_servers) as client:
        assert client.metrics()["request-total"] == 0
        assert create() == 0
        assert create() == TopicAlreadyExistsError.code
        client.coordinator(topic_name)
        client.refresh_metadata([topic_name])
        m = client.metrics()
    apis = m["apis"]
    assert apis["CreateTopics"]["request-total"] == apis["CreateTopics"]["response-total"] == 2
    assert apis["CreateTopics"]["error-total"] == 1
    assert m["errors-by-name"]["TOPIC_ALREADY_EXISTS"] == 1
    assert apis["FindCoordinator"]["response-total"] >= 1
    assert apis["Metadata"]["response-total"] >= 1
    assert m["request-total"] == sum(a["request-total"] for a in apis.values())
    assert m["response-total"] == m["request-total"] and m["request-error-total"] == 0
    assert m["request-rate"] > 0 and m["error-total"] >= 1
    for a in apis.values():
        assert 0 < a["request-latency-avg"] <= a["request-latency-max"]
    assert m["request-latency-max"] == max(a["request-latency-max"] for a in apis.values())
    _assert_documented(m)
    _assert_documented(apis["CreateTopics"])


def test_kafka_client_metrics_count_a_request_without_response(
        mock_cluster_factory: Callable[..., MockCluster]) -> None:
    """A request the broker does not answer in time counts as a request error of its API
    (librdkafka's mock cluster delays its responses on demand; Tansu cannot)."""
    mc = mock_cluster_factory(1)
    with KafkaClient(bootstrap_servers=mc.bootstrap_servers) as client:
        client.refresh_metadata()
        before = client.metrics()["apis"]["Metadata"]
        mc.set_rtt(1, 3000)
        with pytest.raises(KafkaTimeoutError):
            client.request(MetadataRequest(topics=None), node=1, timeout=0.3)
        mc.set_rtt(1, 0)
        after = client.metrics()["apis"]["Metadata"]
    assert after["request-error-total"] == before["request-error-total"] + 1
    assert after["request-total"] >= before["request-total"] + 1
