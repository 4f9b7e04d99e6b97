"""What a request version obliges the client to do, checked against crafted brokers that
key their behaviour on the version as Kafka does.

Neither test broker behaves as these versions' Kafka does here (librdkafka's mock and Tansu
have no tiered storage; the mock names a follower to fetch from whatever offset is asked,
Tansu none), so the peers are :class:`FakeBroker` instances with crafted answers.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kontrakt._types import TopicPartition
from kontrakt.clients.admin import AsyncAdminClient, OffsetSpec
from kontrakt.clients.consumer import AsyncConsumer
from kontrakt.errors import UnsupportedVersionError
from kontrakt.protocol.messages import FetchResponse, ListOffsetsResponse, MetadataResponse
from kontrakt.protocol.records import RecordBatchBuilder
from tests._crafted_broker import CraftedBroker, FakeBroker

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


def test_fetch_v11_follows_the_named_replica_and_comes_back_when_it_is_behind() -> None:
    # Fetch v11 (KIP-392): a consumer with client.rack is named a replica to read from by
    # the partition's leader, which answers it no records meanwhile. Kafka names a
    # replica only for an offset that replica has; when the replica is behind the consumer
    # (OFFSET_OUT_OF_RANGE there) the consumer goes back to the leader, which as the
    # Java client does is no reason to reset the position.
    log = [f"v{i}".encode() for i in range(10)]
    follower_end = 5  # the follower has offsets 0-4

    def records(start: int, end: int) -> bytes:
        b = RecordBatchBuilder(base_offset=start)
        for i in range(start, end):
            b.append(1_700_000_000_000 + i, None, log[i])
        return b.build()

    def answer(req: Any, serve: Any) -> Any:
        R = FetchResponse.FetchableTopicResponse
        return FetchResponse(responses=[R(topic=t.topic, partitions=[
            R.PartitionData(partition_index=p.partition, high_watermark=len(log),
                            log_start_offset=0, **serve(p.fetch_offset))
            for p in t.partitions]) for t in req.topics])

    def leader_fetch(version: int, req: Any) -> Any:
        def serve(offset: int) -> dict[str, Any]:
            if version >= 11 and req.rack_id and offset < follower_end:
                return {"error_code": 0, "preferred_read_replica": 2, "records": b""}
            return {"error_code": 0, "records": records(offset, len(log))}
        return answer(req, serve)

    def follower_fetch(version: int, req: Any) -> Any:
        def serve(offset: int) -> dict[str, Any]:
            if offset >= follower_end:
                return {"error_code": 1, "records": b""}  # OFFSET_OUT_OF_RANGE
            return {"error_code": 0, "records": records(offset, follower_end)}
        return answer(req, serve)

    def earliest(version: int, req: Any) -> Any:
        T = ListOffsetsResponse.ListOffsetsTopicResponse
        return ListOffsetsResponse(topics=[T(name=t.name, partitions=[
            T.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=0,
                                           offset=0, timestamp=-1, leader_epoch=0)
            for p in t.partitions]) for t in req.topics])

    async def main() -> None:
        leader = FakeBroker({TOPIC: 1}, {1: leader_fetch, 2: earliest})
        follower = FakeBroker({TOPIC: 1}, {1: follower_fetch})
        async with leader, follower:
            def metadata(version: int, req: Any) -> Any:
                mr = MetadataResponse
                t_ = mr.MetadataResponseTopic
                return mr(brokers=[
                    mr.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=leader.port),
                    mr.MetadataResponseBroker(node_id=2, host="127.0.0.1",
                                              port=follower.port)],
                    cluster_id="crafted", controller_id=1, topics=[t_(
                        error_code=0, name=TOPIC, topic_id=leader.topic_ids[TOPIC],
                        partitions=[t_.MetadataResponsePartition(
                            error_code=0, partition_index=0, leader_id=1, leader_epoch=0,
                            replica_nodes=[1, 2], isr_nodes=[1, 2])])])
            leader.handlers[3] = follower.handlers[3] = metadata
            async with AsyncConsumer(bootstrap_servers=leader.bootstrap, client_rack="r1",
                                     auto_offset_reset="earliest") as c:
                c.assign([TP0])
                got: list[bytes] = []
                loop = asyncio.get_running_loop()
                end = loop.time() + 5
                while len(got) < len(log) and loop.time() < end:
                    for recs in (await c.getmany(timeout=0.1)).values():
                        got.extend(r.value for r in recs)
                position = await c.position(TP0)
            resets = [m for k, _v, m in leader.requests if k == 2]
            asked_follower = [m for k, _v, m in follower.requests if k == 1]
        assert got == log and position == len(log)
        assert asked_follower, "the named replica was never asked"
        assert len(resets) == 1, "the follower being behind reset the position"

    asyncio.run(main())


def test_admin_max_timestamp_lookup_needs_list_offsets_v7() -> None:
    # -3 (max timestamp, KIP-734) means something from ListOffsets v7 on; a broker that
    # offers no more than v6 takes it for a time and answers the partition's first offset.
    def old_broker(version: int, req: Any) -> Any:
        assert version <= 6
        T = ListOffsetsResponse.ListOffsetsTopicResponse
        return ListOffsetsResponse(topics=[T(name=t.name, partitions=[
            T.ListOffsetsPartitionResponse(
                partition_index=p.partition_index, error_code=0,
                offset=100 if p.timestamp == -1 else 0,
                timestamp=-1 if p.timestamp == -1 else 1_700_000_000_000, leader_epoch=0)
            for p in t.partitions]) for t in req.topics])

    async def main() -> None:
        broker = CraftedBroker({2: old_broker}, topics={TOPIC: 1}, max_versions={2: 6})
        async with broker, AsyncAdminClient({"bootstrap.servers": broker.bootstrap}) as a:
            out = await a.list_offsets({TP0: OffsetSpec.max_timestamp()},
                                       return_exceptions=True, timeout=5)
            latest = await a.list_offsets({TP0: OffsetSpec.latest()}, timeout=5)
        assert isinstance(out[TP0], UnsupportedVersionError), out[TP0]
        assert latest[TP0].offset == 100

    asyncio.run(main())
