"""The sync forms do what their async forms do (issue 21's parity gaps), against real brokers.

- ``Producer.send_offsets_to_transaction(..., timeout)`` bounds its coordinator requests by
  ``timeout`` (it used to drop it and wait request.timeout.ms). The librdkafka mock cluster
  answers AddOffsetsToTxn with injected retriable errors (``push_request_errors``), so the
  call keeps retrying until a bound stops it.
- ``Consumer.last_stable_offset`` and ``Consumer.partitions_for_topic`` exist and answer as
  the AsyncConsumer's do (Tansu keeps the last stable offset of a partition).
- The async forms take the timeouts the sync ones do (``AsyncProducer.send_and_wait`` and
  ``list_topics``), bounded as asked while the mock's brokers answer slowly (``set_rtt``);
  ``AsyncProducer.closed`` and ``KafkaClient.coordinator(refresh=True)`` exist as their
  other forms' do.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kontrakt._types import TopicPartition
from kontrakt.clients import AsyncSerializingProducer, KafkaClient, SerializingProducer
from kontrakt.clients.consumer import Consumer
from kontrakt.clients.producer import AsyncProducer, Producer
from kontrakt.errors import KafkaTimeoutError, TransactionAbortableError
from kontrakt.serde import StringSerializer
from kontrakt.testing import MockCluster, TansuBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

ADD_OFFSETS_TO_TXN = 25
COORDINATOR_LOAD_IN_PROGRESS = 14


def test_send_offsets_to_transaction_keeps_its_timeout(mock_cluster: MockCluster,
                                                        topic_name: str) -> None:
    mock_cluster.create_topic(topic_name, 1)
    with Producer(bootstrap_servers=mock_cluster.bootstrap_servers,
                  transactional_id=f"{topic_name}-tx", request_timeout_ms=20000,
                  retry_backoff_ms=20, retry_backoff_max_ms=100) as p:
        p.init_transactions(10)
        p.begin_transaction()
        p.send_and_wait(topic_name, b"out", partition=0, timeout=10)
        mock_cluster.push_request_errors(ADD_OFFSETS_TO_TXN, [COORDINATOR_LOAD_IN_PROGRESS] * 500)
        start = time.monotonic()
        with pytest.raises(TransactionAbortableError) as info:
            p.send_offsets_to_transaction({TopicPartition(topic_name, 0): 1},
                                          f"{topic_name}-g", 0.5)
        took = time.monotonic() - start
        mock_cluster.clear_request_errors(ADD_OFFSETS_TO_TXN)
        assert isinstance(info.value.__cause__, KafkaTimeoutError)
        assert "the call's timeout" in str(info.value)
        # Well under request.timeout.ms (20 s): the 0.5 s bound was kept.
        assert took < 5.0, took
        p.abort_transaction(10)


def test_sync_consumer_has_last_stable_offset_and_partitions_for_topic(
        tansu_broker: TansuBroker, topic_name: str) -> None:
    tansu_broker.create_topic(topic_name, 2)
    bs = tansu_broker.bootstrap_servers
    tp = TopicPartition(topic_name, 0)
    with Producer(bootstrap_servers=bs) as p:
        for i in range(3):
            p.send_and_wait(topic_name, b"v%d" % i, partition=0, timeout=10)
    with Consumer(bootstrap_servers=bs, auto_offset_reset="earliest",
                  fetch_max_wait_ms=50) as c:
        assert c.partitions_for_topic(topic_name) == {0, 1}
        assert c.partitions_for_topic(f"{topic_name}-missing") is None
        c.assign([tp])
        assert c.last_stable_offset(tp) is None  # nothing fetched yet
        got = c.consume(3, timeout=10)
        assert [r.offset for r in got] == [0, 1, 2]
        assert c.last_stable_offset(tp) == 3
        assert c.highwater(tp) == 3


def test_async_producer_waits_take_a_timeout(mock_cluster: MockCluster,
                                             topic_name: str) -> None:
    mock_cluster.create_topic(topic_name, 1)

    async def main() -> None:
        p = AsyncProducer(bootstrap_servers=mock_cluster.bootstrap_servers)
        assert p.closed is False
        async with p:
            await p.send_and_wait(topic_name, b"warm", timeout=10)
            assert topic_name in await p.list_topics(timeout=10)
            mock_cluster.set_rtt(-1, 3000)
            try:
                for call in (p.send_and_wait(topic_name, b"slow", timeout=0.3),
                             p.list_topics(timeout=0.3)):
                    start = time.monotonic()
                    with pytest.raises(KafkaTimeoutError, match=r"timeout 0\.3s"):
                        await call
                    assert time.monotonic() - start < 2.0
            finally:
                mock_cluster.set_rtt(-1, 0)
            await p.flush(10)  # the slow record was still delivered
        assert p.closed is True

    asyncio.run(main())


def test_sync_kafka_client_coordinator_refresh(mock_cluster: MockCluster,
                                               topic_name: str) -> None:
    group = f"{topic_name}-g"
    with KafkaClient(bootstrap_servers=mock_cluster.bootstrap_servers) as client:
        first = client.coordinator(group)
        mock_cluster.coordinator_set("group", group, first % 3 + 1)
        assert client.coordinator(group) == first  # cached
        assert client.coordinator(group, refresh=True) == first % 3 + 1


def test_record_metadata_carries_the_serialized_sizes(mock_cluster: MockCluster,
                                                      topic_name: str) -> None:
    """Every send path fills serialized_key_size / serialized_value_size (-1 for None):
    staged records (bytes key and value, settled one by one and in bulk), records with
    headers, a partition or a None key or value, send_and_wait, and the sync produce()'s
    delivery callbacks."""
    mock_cluster.create_topic(topic_name, 3)
    bs = mock_cluster.bootstrap_servers
    cases = [(b"k" * (i % 7), b"v" * (i * 13 % 300)) for i in range(600)]

    async def main() -> list[tuple[int, int]]:
        got: list[tuple[int, int]] = []
        async with AsyncProducer(bootstrap_servers=bs, linger_ms=5) as p:
            futs = [await p.send(topic_name, v, k) for k, v in cases]  # staged, in bulk
            futs.append(await p.send(topic_name, b"abc", None))
            futs.append(await p.send(topic_name, None, b"key", partition=1))
            futs.append(await p.send(topic_name, b"vv", b"kkkk", headers=[("h", b"1")]))
            for fut in futs:
                md = await fut
                got.append((md.serialized_key_size, md.serialized_value_size))
            md = await p.send_and_wait(topic_name, b"12345", b"12", timeout=10)
            got.append((md.serialized_key_size, md.serialized_value_size))
        return got

    got = asyncio.run(main())
    assert got == [(len(k), len(v)) for k, v in cases] + [(-1, 3), (3, -1), (4, 2), (2, 5)]

    # Callbacks run batch by batch (partition order), not in send order: each one compares
    # with its own record's sizes.
    seen: list[tuple[tuple[int, int], tuple[int, int]]] = []

    def expect(sizes: tuple[int, int]) -> Any:
        return lambda err, md: seen.append(
            (sizes, (md.serialized_key_size, md.serialized_value_size)))

    with Producer(bootstrap_servers=bs) as p:
        for k, v in cases[:50]:
            p.produce(topic_name, v, k, on_delivery=expect((len(k), len(v))))
        p.produce(topic_name, None, b"kk", partition=0, on_delivery=expect((2, -1)))
        md = p.send(topic_name, b"value", b"k").result(10)
        assert (md.serialized_key_size, md.serialized_value_size) == (1, 5)
        p.flush(10)
    assert len(seen) == 51
    assert [want for want, _ in seen] == [got for _, got in seen]


def test_serializing_producers_say_whether_they_are_closed(mock_cluster: MockCluster) -> None:
    bs = mock_cluster.bootstrap_servers
    p = SerializingProducer(bootstrap_servers=bs, value_serializer=StringSerializer())
    assert p.closed is False
    p.close()
    assert p.closed is True

    async def main() -> None:
        ap = AsyncSerializingProducer(bootstrap_servers=bs)
        async with ap:
            assert ap.closed is False
        assert ap.closed is True

    asyncio.run(main())
