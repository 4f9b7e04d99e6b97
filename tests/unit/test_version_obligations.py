"""What a request version obliges the client to do, checked against a crafted broker that
keys its behaviour on the version as Kafka does.

Neither test broker behaves as these versions' Kafka does here (librdkafka's mock and Tansu
have no tiered storage), so the peer is :class:`FakeBroker` with crafted answers.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kontrakt._types import TopicPartition
from kontrakt.clients.consumer import AsyncConsumer
from kontrakt.protocol.messages import ListOffsetsResponse
from tests._crafted_broker import FakeBroker

TOPIC = "tiered"
TP0 = TopicPartition(TOPIC, 0)
_REQUEST_TIMED_OUT = 7
#: how long the crafted leader's lookup in remote storage takes (ms)
_REMOTE_LOOKUP_MS = 100


async def _tiered_list_offsets(version: int, req: Any) -> Any:
    """A Kafka 4 leader of a tiered topic (KIP-1075): a timestamp lookup goes to remote
    storage and is answered when it is done or the request's timeout_ms is over, whichever
    comes first; before v10 the broker's own timeout applies."""
    timeout_ms = req.timeout_ms if version >= 10 else 30_000
    T = ListOffsetsResponse.ListOffsetsTopicResponse
    P = T.ListOffsetsPartitionResponse
    await asyncio.sleep(min(timeout_ms, _REMOTE_LOOKUP_MS) / 1000)
    timed_out = timeout_ms < _REMOTE_LOOKUP_MS
    return ListOffsetsResponse(topics=[T(name=t.name, partitions=[
        P(partition_index=p.partition_index,
          error_code=_REQUEST_TIMED_OUT if timed_out else 0,
          offset=-1 if timed_out else 42, timestamp=-1 if timed_out else p.timestamp,
          leader_epoch=0)
        for p in t.partitions]) for t in req.topics])


def test_list_offsets_v10_gives_the_leader_time_for_a_remote_lookup() -> None:
    # ListOffsets v10 carries timeout_ms; a consumer that leaves it 0 has every lookup in
    # remote storage time out at once, and retries it until its own timeout.
    async def main() -> None:
        async with FakeBroker({TOPIC: 1}, {2: _tiered_list_offsets},
                              versions={2: (1, 10)}) as broker:
            async with AsyncConsumer(bootstrap_servers=broker.bootstrap) as c:
                found = await c.offsets_for_times({TP0: 1_000}, timeout=3)
            sent = [(v, m) for k, v, m in broker.requests if k == 2]
        result = found[TP0]
        assert result is not None and result.offset == 42
        assert sent and all(v == 10 and m.timeout_ms > _REMOTE_LOOKUP_MS for v, m in sent)

    asyncio.run(main())
