"""A batch the broker refuses as too large (MESSAGE_TOO_LARGE) is split and its halves sent
(KIP-126); a record refused alone fails alone, its neighbours delivered.

Against librdkafka's mock cluster, which cannot enforce a size: its refusals are injected
(``push_request_errors``), scripted as Kafka would answer for a limit the refused batches
pass and the delivered ones do not (see each test). Tansu 0.6 does not enforce one either:
it takes a topic's ``max.message.bytes`` at CreateTopics and writes larger batches anyway
(``test_tansu_ignores_max_message_bytes`` documents it).

After each scenario the partition's log is read raw: every record once, in send order, in
batches of the sizes the splits made.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kontrakt.clients import AsyncKafkaClient
from kontrakt.clients.producer import AsyncProducer, Producer
from kontrakt.errors import RecordTooLargeError
from kontrakt.protocol.errors import MessageTooLargeError
from kontrakt.protocol.messages import CreateTopicsRequest
from kontrakt.protocol.records import RecordBatchBuilder, iter_batches
from kontrakt.testing import MockCluster, TansuBroker
from tests.integration.raw_ops import fetch, leader, produce

pytestmark = pytest.mark.integration

PRODUCE = 0
MESSAGE_TOO_LARGE = 10
FAST: dict[str, Any] = {"retry_backoff_ms": 10, "retry_backoff_max_ms": 50,
                        "reconnect_backoff_ms": 10, "reconnect_backoff_max_ms": 50}
#: every record lingers into one batch per partition until the flush
HOLD: dict[str, Any] = {"linger_ms": 60_000, **FAST}


async def log_batches(bootstrap: str, topic: str, partition: int
                      ) -> list[tuple[Any, list[bytes | None]]]:
    """The partition's batches from offset 0 to its end: (batch header, its values)."""
    out: list[tuple[Any, list[bytes | None]]] = []
    offset = 0
    async with AsyncKafkaClient(bootstrap_servers=bootstrap) as client:
        for _ in range(100):  # the mock answers a fetch with one batch
            part, _ = await fetch(client, topic, partition, offset)
            batches = list(iter_batches(part.records or b""))
            if not batches:
                break
            for b in batches:
                out.append((b, [r.value for r in b.records()]))
                offset = b.base_offset + b.last_offset_delta + 1
            if offset >= part.high_watermark:
                break
    return out


def produce_requests(mc: MockCluster) -> int:
    return sum(1 for r in mc.get_requests() if r.api_key == PRODUCE)


@pytest.mark.parametrize(("idempotent", "codec"), [(True, "none"), (False, "none"),
                                                   (True, "gzip")])
def test_a_refused_batch_is_delivered_in_halves_once_in_order(
        mock_cluster: MockCluster, topic_name: str, idempotent: bool, codec: str) -> None:
    """200 records in one batch; the broker refuses it once (as for a limit between its size
    and half of it): its halves go out next, and every record lands once,
    in order, at the offsets its future reports."""
    mock_cluster.create_topic(topic_name, 1)

    async def main() -> None:
        async with AsyncProducer(bootstrap_servers=mock_cluster.bootstrap_servers,
                                 enable_idempotence=idempotent, compression_type=codec,
                                 **HOLD) as p:
            await p.send_and_wait(topic_name, b"warm-up", partition=0)
            values = [b"v%03d-" % i + b"x" * 90 for i in range(200)]
            futs = [await p.send(topic_name, v, partition=0) for v in values]
            mock_cluster.start_request_tracking()
            mock_cluster.push_request_errors(PRODUCE, [MESSAGE_TOO_LARGE])
            await asyncio.wait_for(p.flush(), 10)
            requests = produce_requests(mock_cluster)
            offsets = [(await f).offset for f in futs]
            assert p.metrics()["record-error-total"] == 0
            assert p._acc.used == 0  # the halves gave back the whole batch's buffer charge
        assert requests == 3  # refused, then one request per half
        assert offsets == list(range(1, 201))
        batches = await log_batches(mock_cluster.bootstrap_servers, topic_name, 0)
        # Halves by bytes: 101 and 99 records (offset deltas from 64 on take two bytes).
        assert [len(vs) for _, vs in batches] == [1, 101, 99]
        assert [v for _, vs in batches[1:] for v in vs] == values
        first, second = batches[1][0], batches[2][0]
        if idempotent:
            # The halves take the refused batch's sequence range, in order (as the Java
            # client's split does): the batches after them keep theirs.
            assert first.producer_id == second.producer_id == batches[0][0].producer_id
            assert (first.base_sequence, second.base_sequence) == (1, 102)
        else:
            assert first.base_sequence == second.base_sequence == -1
        assert first.max_timestamp <= second.base_timestamp + 1000

    asyncio.run(main())
    mock_cluster.stop_request_tracking()


def test_a_sync_producers_delivery_callbacks_follow_the_split(mock_cluster: MockCluster,
                                                              topic_name: str) -> None:
    """produce(on_delivery=...) of keyed records (placed in their batch in bulk): each
    callback runs once, with its record's offset, when its half is delivered."""
    mock_cluster.create_topic(topic_name, 1)
    seen: list[tuple[Any, Any]] = []
    with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **HOLD) as p:
        p.send(topic_name, b"warm-up", partition=0).result(10)
        for i in range(120):
            p.produce(topic_name, b"v%03d" % i, b"k%d" % i,
                      on_delivery=lambda err, md: seen.append((err, md)))
        mock_cluster.push_request_errors(PRODUCE, [MESSAGE_TOO_LARGE])
        assert p.flush(10) == 0
    assert [err for err, _ in seen] == [None] * 120
    assert [md.offset for _, md in seen] == list(range(1, 121))
    # The sizes follow the record into its half too.
    assert [(md.serialized_key_size, md.serialized_value_size) for _, md in seen] == [
        (len(b"k%d" % i), 4) for i in range(120)]
    batches = asyncio.run(log_batches(mock_cluster.bootstrap_servers, topic_name, 0))
    assert [len(vs) for _, vs in batches] == [1, 64, 56]  # halves by bytes


def test_a_lone_oversized_record_fails_alone(mock_cluster: MockCluster, topic_name: str) -> None:
    """Seven records, the fourth 50 kB, the others 10 bytes, in one batch; the broker
    refuses every batch holding the large one (a limit between 50 kB and 10 bytes):

    1. all seven: refused, split by bytes into [0-3] and [4-6];
    2. [0-3]: refused, split into [0-2] and [3];
    3. [0-2]: written;  4. [3]: refused alone: it fails, RecordTooLargeError;
    5. [4-6]: written.
    (Idempotent: the halves go out one at a time, in sequence order, so the script is
    exact.)"""
    mock_cluster.create_topic(topic_name, 1)

    async def main() -> None:
        async with AsyncProducer(bootstrap_servers=mock_cluster.bootstrap_servers,
                                 **HOLD) as p:
            await p.send_and_wait(topic_name, b"warm-up", partition=0)
            values = [b"small-%d" % i if i != 3 else b"L" * 50_000 for i in range(7)]
            futs = [await p.send(topic_name, v, partition=0) for v in values]
            mock_cluster.start_request_tracking()
            mock_cluster.push_request_errors(PRODUCE, [MESSAGE_TOO_LARGE, MESSAGE_TOO_LARGE,
                                                       0, MESSAGE_TOO_LARGE, 0])
            await asyncio.wait_for(p.flush(), 10)
            assert produce_requests(mock_cluster) == 5
            for i, f in enumerate(futs):
                if i == 3:
                    with pytest.raises(RecordTooLargeError, match="refused a record") as info:
                        await f
                    assert isinstance(info.value.__cause__, MessageTooLargeError)
                else:
                    assert (await f).offset >= 1
            assert p.metrics()["record-error-total"] == 1
            # The producer goes on (with a new producer id: the refused record's sequence
            # number was never written).
            assert (await p.send_and_wait(topic_name, b"later", partition=0)).offset == 7
        batches = await log_batches(mock_cluster.bootstrap_servers, topic_name, 0)
        assert [vs for _, vs in batches] == [[b"warm-up"], values[:3], values[4:], [b"later"]]

    asyncio.run(main())
    mock_cluster.stop_request_tracking()


def test_a_batch_built_by_the_caller_is_not_split(mock_cluster: MockCluster,
                                                  topic_name: str) -> None:
    """send_batch's batch is the caller's unit: refused, it fails whole, with the broker's
    error as the cause, and the producer goes on."""
    mock_cluster.create_topic(topic_name, 1)

    async def main() -> None:
        async with AsyncProducer(bootstrap_servers=mock_cluster.bootstrap_servers,
                                 **FAST) as p:
            builder = p.create_batch()
            for i in range(10):
                builder.append(int(time.time() * 1000), None, b"v%d" % i)
            mock_cluster.push_request_errors(PRODUCE, [MESSAGE_TOO_LARGE])
            fut = await p.send_batch(builder, topic_name, partition=0)
            with pytest.raises(RecordTooLargeError, match="built by the caller") as info:
                await fut
            assert isinstance(info.value.__cause__, MessageTooLargeError)
            assert (await p.send_and_wait(topic_name, b"later", partition=0)).offset == 0

    asyncio.run(main())


def test_tansu_ignores_max_message_bytes(tansu_broker: TansuBroker, topic_name: str) -> None:
    """Documents why the split tests script their refusals: Tansu 0.6 accepts a topic's
    max.message.bytes and then writes a batch 20 times larger (and has no broker-wide
    limit option)."""
    async def main() -> None:
        async with AsyncKafkaClient(bootstrap_servers=tansu_broker.bootstrap_servers) as c:
            topic = CreateTopicsRequest.CreatableTopic
            resp = await c.request(CreateTopicsRequest(timeout_ms=10_000, topics=[topic(
                name=topic_name, num_partitions=1, replication_factor=1,
                configs=[topic.CreatableTopicConfig(name="max.message.bytes", value="1024")])]))
            assert resp.topics[0].error_code == 0
            await leader(c, topic_name, 0)
            builder = RecordBatchBuilder()
            for _ in range(200):
                builder.append(int(time.time() * 1000), b"k", b"x" * 100)
            batch = builder.build()
            assert len(batch) > 20 * 1024
            assert (await produce(c, topic_name, 0, batch)).error_code == 0

    asyncio.run(main())
