"""An idempotent batch whose later sequences the broker wrote first fails at once.

Kafka accepts any sequence from a producer it holds no state for (ProducerStateManager:
no epoch yet), so when a producer's first batch of a partition comes back with a
retriable error while its second is already on the way, the second is written and the
resend of the first is refused with OUT_OF_ORDER_SEQUENCE_NUMBER, every time. Neither test
broker can be made to do this on cue (the mock does not check sequences; Tansu and the
in-process Cluster write what they accept in order), so the broker here is a crafted peer
(tests/_crafted_broker.py) that answers as Kafka would.
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
    """One partition's sequence check, as Kafka's for a producer without state, and the
    first write refused once with a retriable error."""

    def __init__(self) -> None:
        self.log: list[tuple[int, int, int]] = []  # (producer id, first, last sequence)
        self.refused_first = False
        self.produce_ids: list[int] = []

    async def produce(self, version: int, req: Any) -> Any:
        data = req.topic_data[0].partition_data[0]
        batch = RecordBatch(bytes(data.records))
        pid, first = batch.producer_id, batch.base_sequence
        last = first + batch.records_count - 1
        self.produce_ids.append(pid)
        mine = [(f, la) for p, f, la in self.log if p == pid]
        if not self.refused_first:
            # The first request: held a little (the second is then on the wire behind it),
            # then refused without being written.
            self.refused_first = True
            await asyncio.sleep(0.2)
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


def test_a_batch_overtaken_by_its_later_sequences_fails_instead_of_resending_forever(
        ) -> None:
    part = _KafkaLikePartition()
    ids = iter(range(7000, 7100))

    def init_producer_id(version: int, req: Any) -> Any:
        return InitProducerIdResponse(error_code=0, producer_id=next(ids), producer_epoch=0)

    async def main() -> None:
        broker = CraftedBroker({0: part.produce, 22: init_producer_id}, topics={"t": 1})
        async with broker, AsyncProducer(
                bootstrap_servers=broker.bootstrap, linger_ms=0, retry_backoff_ms=10,
                request_timeout_ms=4000, delivery_timeout_ms=8000) as p:
            first = await p.send("t", b"first", partition=0)
            await asyncio.sleep(0.05)  # its request is out: the next goes in another
            second = await p.send("t", b"second", partition=0)
            started = time.monotonic()
            done, _ = await asyncio.wait((first, second), timeout=6)
            assert len(done) == 2, "a batch was still being resent"
            assert time.monotonic() - started < 3
            assert second.result().offset == 0
            err = first.exception()
            assert isinstance(err, ProduceError)
            assert "cannot be written in order" in str(err)
            assert "OUT_OF_ORDER_SEQUENCE_NUMBER" in str(err)
            # The producer goes on with a new producer id, from sequence 0.
            third = await p.send("t", b"third", partition=0)
            assert (await asyncio.wait_for(third, 5)).offset == 1
        assert part.produce_ids[-1] != part.produce_ids[0]
        assert part.log[-1][1] == 0

    asyncio.run(main())
