"""The calls users of confluent-kafka, aiokafka and kafka-python make, on Tansu, over the
blocking and asyncio consumers: each works with the peer's meaning, or fails at once naming
Kontrakt's equivalent.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

import pytest

from kontrakt._types import OFFSET_BEGINNING, TopicPartition
from kontrakt.clients import AsyncKafkaClient
from kontrakt.clients.consumer import AsyncConsumer, Consumer
from kontrakt.clients.producer import Producer
from kontrakt.errors import (
    ConfigError,
    IllegalStateError,
    InvalidArgumentError,
    KafkaConnectionError,
    KafkaError,
)
from kontrakt.protocol.records import RecordBatchBuilder
from kontrakt.testing import TansuBroker
from tests.integration.raw_ops import produce
from tests.integration.test_consumer_close import FORMS, Driver, _config
from tests.integration.test_groups import _fill

pytestmark = [pytest.mark.integration, pytest.mark.also_on_cluster, pytest.mark.timeout(90)]

BOTH = ["Consumer", "AsyncConsumer"]


async def _fill_one_by_one(bs: str, topic: str, partition: int, count: int) -> None:
    """Records in batches of one: Tansu answers ListOffsets LATEST right only for those."""
    async with AsyncKafkaClient(bootstrap_servers=bs) as client:
        for i in range(count):
            b = RecordBatchBuilder()
            b.append(None, None, f"{partition}-{i}".encode())
            assert (await produce(client, topic, partition, b.build())).error_code == 0


async def _values(d: Driver, count: int) -> list[bytes]:
    return [r.value for r in await d.consume(count)]


@pytest.mark.parametrize("form", BOTH)
def test_confluent_assignment_calls(tansu_broker: TansuBroker, topic_name: str,
                                    form: str) -> None:
    """TopicPartition(t, p, offset) in assign / seek, lists in pause / resume / position,
    incremental_assign / incremental_unassign / unassign, get_watermark_offsets."""
    tansu_broker.create_topic(topic_name, 2)
    bs = tansu_broker.bootstrap_servers
    tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)

    async def main() -> None:
        await _fill(bs, topic_name, 1, 10)
        await _fill_one_by_one(bs, topic_name, 1, 10)
        d = Driver(form, bootstrap_servers=bs, fetch_max_wait_ms=100)
        try:
            await d.call("assign", [TopicPartition(topic_name, 0, 7)])
            assert await _values(d, 3) == [b"0-7", b"0-8", b"0-9"]
            assert await d.call("position", [tp0]) == [TopicPartition(topic_name, 0, 10)]
            assert (await d.call("position", [tp0]))[0].offset == 10
            assert await d.call("position", tp0) == 10
            await d.call("incremental_assign", [TopicPartition(topic_name, 1, OFFSET_BEGINNING)])
            assert await d.call("assignment") == {tp0, tp1}
            assert await _values(d, 10) == [f"1-{i}".encode() for i in range(10)]
            await d.call("pause", [tp0, tp1])
            assert await d.call("paused") == {tp0, tp1}
            await d.call("resume", [tp1])
            assert await d.call("paused") == {tp0}
            await d.call("seek", TopicPartition(topic_name, 1, 8))
            assert await _values(d, 2) == [b"1-8", b"1-9"]
            assert await d.call("get_watermark_offsets", tp1) == (0, 10)
            assert (await d.call("get_watermark_offsets", tp1, cached=True))[1] == 10
            await d.call("incremental_unassign", [tp0])
            assert await d.call("assignment") == {tp1}
            await d.call("unassign")
            assert await d.call("assignment") == set()
            with pytest.raises(TypeError, match="TopicPartition"):
                await d.call("pause", ["not-a-partition"])
        finally:
            await d.call("close")

    asyncio.run(main())


@pytest.mark.parametrize("form", BOTH)
def test_a_caret_topic_is_a_regex_as_in_confluent_kafka(tansu_broker: TansuBroker,
                                                        topic_name: str, form: str) -> None:
    """subscribe(["^prefix.*"]) matches topics from their start; plain names stay names."""
    a, b, other = f"{topic_name}-a", f"{topic_name}-b", f"x{topic_name}"
    for t in (a, b, other):
        tansu_broker.create_topic(t, 1)
    bs = tansu_broker.bootstrap_servers

    async def main() -> None:
        for t in (a, b, other):
            await _fill(bs, t, 1, 2)
        d = Driver(form, **_config(bs, topic_name, metadata_max_age_ms=500))
        try:
            await d.call("subscribe", [f"^{topic_name}-[ab]"])
            got = {r.topic for r in await d.consume(4)}
            assert got == {a, b}
            assert await d.call("subscription") == set()  # a pattern subscription
            with pytest.raises(InvalidArgumentError, match="regular expression"):
                await d.call("subscribe", ["^bad("])
        finally:
            await d.call("close")

    asyncio.run(main())


@pytest.mark.parametrize("form", FORMS)
def test_aiokafka_and_kafka_python_calls(tansu_broker: TansuBroker, topic_name: str,
                                         form: str) -> None:
    """Topics as positional arguments, getone(), seek_to_committed(), metrics(), stop();
    commit(offsets=[TopicPartition(t, p, offset)]) as in confluent-kafka."""
    tansu_broker.create_topic(topic_name, 1)
    bs = tansu_broker.bootstrap_servers
    tp = TopicPartition(topic_name, 0)

    async def main() -> None:
        await _fill(bs, topic_name, 1, 6)
        consumer = FORMS[form](topic_name, **_config(bs, topic_name, enable_auto_commit=False))
        d = Driver.__new__(Driver)
        d.consumer, d.is_async = consumer, form.startswith("Async")
        try:
            assert await d.call("subscription") == {topic_name}
            first = await d.call("getone")
            assert first.value == b"0-0"
            with pytest.raises(InvalidArgumentError, match="pause"):
                await d.call("getone", tp)
            rest = await _values(d, 5)
            assert rest == [f"0-{i}".encode() for i in range(1, 6)]
            m = await d.call("metrics")
            assert m["records-consumed-total"] == 6
            assert m["bytes-consumed-total"] > 6 * 3
            assert m["partitions"][str(tp)]["records-lag"] == 0
            assert await d.call("getmany", timeout_ms=50) == {}
            with pytest.raises(InvalidArgumentError, match="pause"):
                await d.call("getmany", tp, timeout_ms=50)
            await d.call("commit", offsets=[TopicPartition(topic_name, 0, 2)])
            assert await d.call("committed", tp) == 2  # one partition: its offset
            assert await d.call("seek_to_committed") == {tp: 2}
            assert await d.call("position", tp) == 2
            assert (await d.call("getone")).value == b"0-2"
        finally:
            await d.call("stop")
        with pytest.raises(IllegalStateError):
            await d.call("getone")

    asyncio.run(main())


def test_topics_in_the_constructor_need_a_group() -> None:
    with pytest.raises(ConfigError, match="assign"):
        Consumer("orders", bootstrap_servers="127.0.0.1:1")
    with pytest.raises(TypeError, match="topic names"):
        AsyncConsumer("orders", 7, bootstrap_servers="127.0.0.1:1", group_id="g")


def test_consumer_group_metadata_fences_offsets_in_a_transaction(
        tansu_broker: TansuBroker, topic_name: str) -> None:
    """KIP-447: send_offsets_to_transaction(offsets, consumer.consumer_group_metadata())
    commits with the member's generation."""
    tansu_broker.create_topic(topic_name, 1)
    bs = tansu_broker.bootstrap_servers
    tp = TopicPartition(topic_name, 0)
    asyncio.run(_fill(bs, topic_name, 1, 4))
    with Consumer(**_config(bs, topic_name, enable_auto_commit=False)) as consumer:
        with Consumer(bootstrap_servers=bs) as groupless, \
                pytest.raises(ConfigError, match=r"group.id"):
            groupless.consumer_group_metadata()
        consumer.subscribe([topic_name])
        records = consumer.consume(4, timeout=20)
        assert len(records) == 4
        meta = consumer.consumer_group_metadata()
        assert meta.group_id == f"g-{topic_name}" and meta.generation_id >= 0
        assert meta.member_id
        with Producer(bootstrap_servers=bs, transactional_id=f"{topic_name}-tx") as p:
            p.init_transactions()
            p.begin_transaction()
            p.send_offsets_to_transaction({tp: 4}, meta)
            p.commit_transaction()
        om = consumer.committed([tp], timeout=10)[tp]
        assert om is not None and om.offset == 4


@pytest.mark.parametrize("form", BOTH)
def test_stats_cb_gets_librdkafka_shaped_json(tansu_broker: TansuBroker, topic_name: str,
                                              form: str) -> None:
    tansu_broker.create_topic(topic_name, 1)
    bs = tansu_broker.bootstrap_servers
    reports: list[dict[str, Any]] = []

    async def main() -> None:
        await _fill(bs, topic_name, 1, 5)
        d = Driver(form, bootstrap_servers=bs, fetch_max_wait_ms=100, client_id="cid",
                   stats_cb=lambda s: reports.append(json.loads(s)),
                   statistics_interval_ms=50)
        try:
            await d.call("assign", [TopicPartition(topic_name, 0, 0)])
            await d.consume(5)
            deadline = time.monotonic() + 10
            while not reports or reports[-1]["rxmsgs"] < 5:
                assert time.monotonic() < deadline, reports[-1:]
                await asyncio.sleep(0.05)
        finally:
            await d.call("close")

    asyncio.run(main())
    last = reports[-1]
    assert last["type"] == "consumer" and last["client_id"] == "cid"
    part = last["topics"][topic_name]["partitions"]["0"]
    assert part["app_offset"] == 5 and part["hi_offset"] == 5 and part["consumer_lag"] == 0
    count = len(reports)
    time.sleep(0.2)
    assert len(reports) == count  # stopped by close()


def test_error_cb_and_logger_hear_the_consumers_background_failures(
        tansu_broker_factory: Any, tansu_broker: TansuBroker, topic_name: str) -> None:
    """With the broker gone, the metadata loop's failures reach error_cb (as KafkaError)
    and the given logger; another consumer's records do not."""
    broker = tansu_broker_factory()
    broker.create_topic(topic_name, 1)
    errors: list[BaseException] = []
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    app_log = logging.getLogger(f"app.{topic_name}")
    app_log.addHandler(Keep())
    app_log.propagate = False
    app_log.setLevel(logging.DEBUG)
    other_errors: list[BaseException] = []
    # Records below the kontrakt loggers' level are never made: enable the fetcher's.
    fetcher_log = logging.getLogger("kontrakt.consumer.fetcher")
    level = fetcher_log.level
    fetcher_log.setLevel(logging.DEBUG)
    try:
        _run_until_errors(broker, tansu_broker, topic_name, errors, app_log, other_errors)
    finally:
        fetcher_log.setLevel(level)
    assert all(isinstance(e, KafkaError) for e in errors)
    assert any("fetch from node" in r.getMessage() for r in seen)
    assert other_errors == []


def _run_until_errors(broker: TansuBroker, tansu_broker: TansuBroker, topic_name: str,
                      errors: list[BaseException], app_log: logging.Logger,
                      other_errors: list[BaseException]) -> None:
    with Consumer(bootstrap_servers=broker.bootstrap_servers, metadata_max_age_ms=100,
                  reconnect_backoff_max_ms=100, error_cb=errors.append,
                  logger=app_log) as consumer, \
            Consumer(bootstrap_servers=tansu_broker.bootstrap_servers,
                     error_cb=other_errors.append) as other:
        other.list_topics()
        consumer.assign([TopicPartition(topic_name, 0)])
        consumer.poll(0.5)
        broker.stop()
        deadline = time.monotonic() + 20
        while not errors:
            assert time.monotonic() < deadline
            consumer.poll(0.1)


def test_producer_on_delivery_and_stats_cb_from_config(tansu_broker: TansuBroker,
                                                       topic_name: str) -> None:
    """confluent-kafka's config callbacks on the blocking Producer: on_delivery for
    produce() calls without one, stats_cb with the records sent."""
    tansu_broker.create_topic(topic_name, 1)
    delivered: list[tuple[BaseException | None, int]] = []
    reports: list[dict[str, Any]] = []
    with Producer({"bootstrap.servers": tansu_broker.bootstrap_servers,
                   "on_delivery": lambda err, md: delivered.append((err, md.offset)),
                   "stats_cb": lambda s: reports.append(json.loads(s)),
                   "statistics.interval.ms": 50}) as p:
        for i in range(3):
            p.produce(topic_name, f"v{i}".encode())
        own: list[int] = []
        p.produce(topic_name, b"v3", on_delivery=lambda err, md: own.append(md.offset))
        p.flush(10)
        deadline = time.monotonic() + 10
        while not reports or reports[-1]["txmsgs"] < 4:
            assert time.monotonic() < deadline, reports[-1:]
            p.poll(0.05)
        assert p.send(topic_name, b"v4").get(timeout=10).offset == 4  # kafka-python's get
    assert delivered == [(None, 0), (None, 1), (None, 2)] and own == [3]
    assert reports[-1]["type"] == "producer" and reports[-1]["txmsg_bytes"] > 0


def test_producer_stop_is_close(tansu_broker: TansuBroker, topic_name: str) -> None:
    """aiokafka's AIOKafkaProducer.stop(): delivers what is buffered, then closes."""
    tansu_broker.create_topic(topic_name, 1)
    from kontrakt.clients.producer import AsyncProducer

    async def main() -> None:
        p = AsyncProducer(bootstrap_servers=tansu_broker.bootstrap_servers, linger_ms=1000)
        await p.start()
        fut = await p.send(topic_name, b"v")
        await p.stop()
        assert fut.done() and (await fut).offset == 0
        with pytest.raises(IllegalStateError):
            await p.send(topic_name, b"late")

    asyncio.run(main())
    sync = Producer(bootstrap_servers=tansu_broker.bootstrap_servers, linger_ms=1000)
    fut = sync.send(topic_name, b"w")
    sync.stop()
    assert fut.result(0).offset == 1


def test_producer_error_cb_hears_failed_requests(tansu_broker_factory: Any,
                                                 topic_name: str) -> None:
    """With the broker gone, each failed produce request (retried, logged only at DEBUG)
    reaches error_cb; the record fails after delivery.timeout.ms as before."""
    broker = tansu_broker_factory()
    broker.create_topic(topic_name, 1)
    errors: list[BaseException] = []
    with Producer(bootstrap_servers=broker.bootstrap_servers, error_cb=errors.append,
                  linger_ms=0, request_timeout_ms=500, delivery_timeout_ms=3000,
                  reconnect_backoff_max_ms=100) as p:
        assert p.send_and_wait(topic_name, b"first").offset == 0
        broker.stop()
        fut = p.send(topic_name, b"lost")
        with pytest.raises(KafkaError):
            fut.result(10)
    assert errors and all(isinstance(e, KafkaError) for e in errors), errors
    assert any(isinstance(e, KafkaConnectionError) for e in errors), errors


@pytest.mark.parametrize("form", BOTH)
def test_a_negative_timeout_waits_without_limit_as_in_librdkafka(
        tansu_broker: TansuBroker, topic_name: str, form: str) -> None:
    """poll(-1) / consume(n, -1) on a consumer that has not started yet wait for its start
    and a record (they returned nothing at once before)."""
    tansu_broker.create_topic(topic_name, 1)
    bs = tansu_broker.bootstrap_servers

    async def main() -> None:
        await _fill(bs, topic_name, 1, 3)
        for call, args in (("poll", (-1,)), ("consume", (2, -1))):
            d = Driver(form, bootstrap_servers=bs, auto_offset_reset="earliest")
            try:
                await d.call("assign", [TopicPartition(topic_name, 0)])
                got = await asyncio.wait_for(d.call(call, *args), 20)
                assert got, call
            finally:
                await d.call("close")

    asyncio.run(main())
