"""The share consumer's acknowledgement commit callback on the librdkafka mock cluster:
``set_acknowledgement_commit_callback(cb)``, called with each partition's acknowledged
offsets and the broker's error (or None) once the broker answered them; on the caller's
thread in poll() / commit_sync() / close() for ShareConsumer, on the loop for
AsyncShareConsumer.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable

import pytest

from kontrakt import Producer, TopicPartition
from kontrakt.clients.share import AcknowledgeType, AsyncShareConsumer, ShareConsumer
from kontrakt.errors import KafkaError
from kontrakt.protocol.errors import InvalidRecordStateError
from kontrakt.testing import MockCluster

pytestmark = pytest.mark.integration

TOPIC = "jobs"

Call = tuple[int, dict[TopicPartition, set[int]], "KafkaError | None"]


def _cluster(factory: Callable[..., MockCluster], partitions: int, records: int, *,
             lock_ms: int | None = None) -> MockCluster:
    cluster = factory(1)
    cluster.create_topic(TOPIC, partitions, 1)
    cluster.sharegroup_auto_offset_reset(True)
    cluster.sharegroup_heartbeat_interval_ms(200)
    if lock_ms is not None:
        cluster.sharegroup_record_lock_duration_ms(lock_ms)
    with Producer(bootstrap_servers=cluster.bootstrap_servers) as producer:
        for i in range(records):
            producer.send(TOPIC, value=str(i).encode(), partition=i % partitions)
        producer.flush(10)
    return cluster


def test_sync_callback_reports_every_acknowledged_offset_once_on_the_callers_thread(
        mock_cluster_factory: Callable[..., MockCluster]) -> None:
    # Implicit mode, 4 records a poll: most acknowledgements ride on the next fetches and
    # are reported by a later poll(); the last ones by commit_sync(). Broken variants
    # tried: the fetch path not reporting (offsets acknowledged by fetches missing); the
    # callback run on the loop thread (thread check fails).
    cluster = _cluster(mock_cluster_factory, 2, 20)
    calls: list[Call] = []
    with ShareConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id="g",
                       max_poll_records=4) as consumer:
        consumer.set_acknowledgement_commit_callback(
            lambda offsets, error: calls.append((threading.get_ident(), offsets, error)))
        consumer.subscribe([TOPIC])
        seen: list[tuple[int, int]] = []
        deadline = time.monotonic() + 15
        while len(seen) < 20 and time.monotonic() < deadline:
            seen.extend((r.partition, r.offset) for r in consumer.poll(0.5))
        assert len(seen) == 20
        by_polls = len(calls)
        assert by_polls > 0
        assert consumer.commit_sync(5)
    assert {ident for ident, _, _ in calls} == {threading.get_ident()}
    assert all(error is None and len(offsets) == 1 for _, offsets, error in calls)
    reported = Counter((tp.partition, o) for _, offsets, _ in calls
                       for tp, os in offsets.items() for o in os)
    assert reported == Counter(seen)


def test_async_callback_runs_on_the_loop_and_reports_the_brokers_error(
        mock_cluster_factory: Callable[..., MockCluster]) -> None:
    # Explicit mode: the broker refuses the first ShareAcknowledge (INVALID_RECORD_STATE,
    # injected) and the callback gets that error with the offsets it carried; the records
    # come again (the mock frees them) and everything acknowledged later is taken (None).
    # Broken variant tried: a ShareAcknowledge's top-level error not reported (the first
    # call says None).
    cluster = _cluster(mock_cluster_factory, 1, 6)

    async def main() -> list[tuple[bool, dict[TopicPartition, set[int]], KafkaError | None]]:
        calls: list[tuple[bool, dict[TopicPartition, set[int]], KafkaError | None]] = []
        loop = asyncio.get_running_loop()

        def callback(offsets: dict[TopicPartition, set[int]], error: KafkaError | None) -> None:
            calls.append((asyncio.get_running_loop() is loop, offsets, error))

        async with AsyncShareConsumer(bootstrap_servers=cluster.bootstrap_servers,
                                      group_id="g", max_poll_records=3,
                                      share_acknowledgement_mode="explicit") as consumer:
            consumer.set_acknowledgement_commit_callback(callback)
            consumer.subscribe(TOPIC)
            first = await consumer.poll(5)
            assert [r.offset for r in first] == [0, 1, 2]
            for r in first:
                consumer.acknowledge(r, AcknowledgeType.REJECT if r.offset == 1
                                     else AcknowledgeType.ACCEPT)
            cluster.push_request_errors(79, [InvalidRecordStateError.code])  # ShareAcknowledge
            results = await consumer.commit_sync(5)
            assert isinstance(results[TopicPartition(TOPIC, 0)], InvalidRecordStateError)
            assert len(calls) == 1
            rest: list[int] = []
            deadline = time.monotonic() + 10
            while 5 not in rest and time.monotonic() < deadline:
                for r in await consumer.poll(0.5):
                    rest.append(r.offset)
                    consumer.acknowledge(r)
            assert await consumer.commit_sync(5) == {TopicPartition(TOPIC, 0): None}
        return calls

    calls = asyncio.run(main())
    assert all(on_loop for on_loop, _, _ in calls)
    tp = TopicPartition(TOPIC, 0)
    assert calls[0][1] == {tp: {0, 1, 2}}
    assert isinstance(calls[0][2], InvalidRecordStateError)
    assert all(error is None for _, _, error in calls[1:])
    assert {o for _, offsets, _ in calls[1:] for o in offsets[tp]} == set(range(6))


def test_a_failing_callback_loses_no_records(
        mock_cluster_factory: Callable[..., MockCluster]) -> None:
    # ShareConsumer: the callback's exception comes out of the next poll() before it
    # fetches, so no record a fetch brought is dropped with it; AsyncShareConsumer raises
    # it from the next call. Broken variant tried: the sync callbacks run after the
    # fetch too (the records of that poll are lost with the exception; values missing).
    cluster = _cluster(mock_cluster_factory, 1, 12)
    failures = 0

    def flaky(offsets: dict[TopicPartition, set[int]], error: KafkaError | None) -> None:
        nonlocal failures
        failures += 1
        if failures <= 2:
            raise RuntimeError("callback failed")

    seen: list[int] = []
    raised = 0
    with ShareConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id="g",
                       max_poll_records=3) as consumer:
        consumer.set_acknowledgement_commit_callback(flaky)
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 15
        while len(seen) < 12 and time.monotonic() < deadline:
            try:
                seen.extend(r.offset for r in consumer.poll(0.5))
            except RuntimeError:
                raised += 1
    assert sorted(seen) == list(range(12)) and raised == 2

    async def main() -> None:
        async with AsyncShareConsumer(bootstrap_servers=cluster.bootstrap_servers,
                                      group_id="g2") as consumer:
            consumer.set_acknowledgement_commit_callback(flaky)
            consumer.subscribe(TOPIC)
            assert await consumer.poll(5)
            with pytest.raises(RuntimeError, match="callback failed"):
                await consumer.commit_sync(5)  # the next call raises it
                await consumer.poll(0.1)

    failures = 0
    asyncio.run(main())
