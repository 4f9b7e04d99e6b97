"""Kafka accepts any sequence from a producer it holds no state for (ProducerStateManager:
no epoch yet). So when a batch comes back with a retriable error while the next one of its
partition is already on the way to such a broker, the next is written and the resend of
the first is refused with OUT_OF_ORDER_SEQUENCE_NUMBER, every time. A partition's first
batch under a producer id therefore goes alone; and should a broker lose a producer's state
later (Kafka drops it after producer.id.expiration.ms, or with the producer's batches), a
batch so overtaken fails at once. Neither test broker can be made to do this on cue (the
mock does not check sequences; Tansu and the in-process Cluster write what they accept in
order), so the broker here is a crafted peer (tests/_crafted_broker.py) that answers as
Kafka would.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from kontrakt.clients.producer import AsyncProducer
from kontrakt.errors import ProduceError
from kontrakt.protocol.messages import InitProducerIdResponse, ProduceResponse
from kontrakt.protocol.records import RecordBatch
from tests._crafted_broker import CraftedBroker

_Topic = ProduceResponse.TopicProduceResponse
_Partition = _Topic.PartitionProduceResponse
NOT_ENOUGH_REPLICAS, OUT_OF_ORDER = 19, 45


class _KafkaLikePartition:
    """One partition's sequence check, as Kafka's (any first sequence from a producer it
    holds no state for), with the Produce request number ``refuse`` held a little and then
    refused with a retriable error, the broker dropping every producer's state then."""

    def __init__(self, refuse: int) -> None:
        self.log: list[tuple[int, int, int]] = []  # (producer id, first, last sequence)
        self.refuse = refuse
        #: the log entries from here on are the producers' state
        self.state_from = 0
        self.produce_ids: list[int] = []
        #: (producer id, first sequence) of each Produce request, in the order they came
        self.requests: list[tuple[int, int]] = []

    async def produce(self, version: int, req: Any) -> Any:
        data = req.topic_data[0].partition_data[0]
        batch = RecordBatch(bytes(data.records))
        pid, first = batch.producer_id, batch.base_sequence
        last = first + batch.records_count - 1
        refused = len(self.produce_ids) == self.refuse
        self.produce_ids.append(pid)
        self.requests.append((pid, first))
        if refused:
            # Held a little (a batch sent behind it is then on the wire), then refused
            # without being written.
            self.state_from = len(self.log)
            await asyncio.sleep(0.2)
        mine = [(f, la) for p, f, la in self.log[self.state_from:] if p == pid]
        if refused:
            code = NOT_ENOUGH_REPLICAS
        elif mine and first != mine[-1][1] + 1:
            code = OUT_OF_ORDER
        else:
            code = 0
            self.log.append((pid, first, last))
        offset = len(self.log) - 1 if code == 0 else -1
        return ProduceResponse(responses=[_Topic(
            name=req.topic_data[0].name, topic_id=req.topic_data[0].topic_id,
            partition_responses=[_Partition(
                index=data.index, error_code=code, base_offset=offset)])])


def _init_producer_id() -> Any:
    ids = iter(range(7000, 7100))

    def init_producer_id(version: int, req: Any) -> Any:
        return InitProducerIdResponse(error_code=0, producer_id=next(ids), producer_epoch=0)
    return init_producer_id


def test_a_partitions_first_batch_goes_alone() -> None:
    # The first batch is refused while the second is sent: on a broker without the
    # producer's state the second would be written first. It waits instead, and the two
    # land in send order under one producer id.
    part = _KafkaLikePartition(refuse=0)

    async def main() -> None:
        broker = CraftedBroker({0: part.produce, 22: _init_producer_id()}, topics={"t": 1})
        async with broker, AsyncProducer(
                bootstrap_servers=broker.bootstrap, linger_ms=0, retry_backoff_ms=10,
                request_timeout_ms=4000, delivery_timeout_ms=8000) as p:
            first = await p.send("t", b"first", partition=0)
            await asyncio.sleep(0.05)  # its request is out: the next would go in another
            second = await p.send("t", b"second", partition=0)
            third = await p.send("t", b"third", partition=0)
            done, _ = await asyncio.wait((first, second, third), timeout=6)
            assert len(done) == 3
            assert [f.result().offset for f in (first, second, third)] == [0, 1, 2]
        # The refused request's resend came next, before anything of "second".
        assert part.requests[1] == part.requests[0]
        assert len(set(part.produce_ids)) == 1

    asyncio.run(main())


def test_a_batch_overtaken_by_its_later_sequences_fails_instead_of_resending_forever(
        ) -> None:
    # Past a partition's first batch, batches go in a pipeline. The broker drops the
    # producer's state as it refuses "first", so "second", on the wire behind it, is
    # written; "first" can then neither be written in order nor resent forever.
    part = _KafkaLikePartition(refuse=1)

    async def main() -> None:
        broker = CraftedBroker({0: part.produce, 22: _init_producer_id()}, topics={"t": 1})
        async with broker, AsyncProducer(
                bootstrap_servers=broker.bootstrap, linger_ms=0, retry_backoff_ms=10,
                request_timeout_ms=4000, delivery_timeout_ms=8000) as p:
            await (await p.send("t", b"warm", partition=0))
            first = await p.send("t", b"first", partition=0)
            await asyncio.sleep(0.05)  # its request is out: the next goes in another
            second = await p.send("t", b"second", partition=0)
            started = time.monotonic()
            done, _ = await asyncio.wait((first, second), timeout=6)
            assert len(done) == 2, "a batch was still being resent"
            assert time.monotonic() - started < 3
            assert second.result().offset == 1
            err = first.exception()
            assert isinstance(err, ProduceError)
            assert "cannot be written in order" in str(err)
            assert "OUT_OF_ORDER_SEQUENCE_NUMBER" in str(err)
            # The producer goes on with a new producer id, from sequence 0.
            third = await p.send("t", b"third", partition=0)
            assert (await asyncio.wait_for(third, 5)).offset == 2
        # "second" (sequence 2) came before the resend of "first" (sequence 1).
        assert [seq for _, seq in part.requests[1:3]] == [1, 2]
        assert part.produce_ids[-1] != part.produce_ids[0]
        assert part.log[-1][1] == 0

    asyncio.run(main())
