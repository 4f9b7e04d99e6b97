"""Transactional producer against Tansu: commit, abort, fencing, offsets in a transaction.

Tansu hides an open transaction's records from read_committed fetches (last stable offset)
and writes commit/abort markers; it does not report aborted transactions in Fetch responses
(TEST-BROKERS.md), so aborts are checked by their control marker, not by a filtering reader.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kontrakt._types import TopicPartition
from kontrakt.clients import AsyncKafkaClient
from kontrakt.clients.producer import AsyncProducer, Producer
from kontrakt.errors import (
    ConfigError,
    IllegalStateError,
    TransactionAbortableError,
    TransactionFatalError,
)
from kontrakt.protocol.messages import FetchRequest, OffsetFetchRequest
from kontrakt.protocol.records import ControlRecordType, iter_batches, parse_control_record
from kontrakt.testing import TansuBroker

pytestmark = [pytest.mark.integration, pytest.mark.also_on_cluster]


async def read_log(bs: str, topic: str, isolation: int) -> tuple[int, list[Any]]:
    """(last stable offset, [(is_control, values or control type)]) of partition 0."""
    async with AsyncKafkaClient(bootstrap_servers=bs) as client:
        info = (await client.refresh_metadata([topic])).topics[topic]
        req = FetchRequest(max_wait_ms=50, min_bytes=1, max_bytes=1 << 20,
                           isolation_level=isolation, topics=[FetchRequest.FetchTopic(
                               topic=topic, topic_id=info.topic_id, partitions=[
                                   FetchRequest.FetchTopic.FetchPartition(
                                       partition=0, fetch_offset=0,
                                       partition_max_bytes=1 << 20)])])
        resp = await client.request(req, node=info.partitions[0].leader)
    part = resp.responses[0].partitions[0]
    out: list[Any] = []
    for batch in iter_batches(part.records or b""):
        assert batch.is_transactional
        if batch.is_control:
            out.append(("marker", parse_control_record(batch.records()[0]).type))
        else:
            out.append(("data", [r.value for r in batch.records()]))
    return part.last_stable_offset, out


def test_commit_and_abort(tansu_broker: TansuBroker, topic_name: str) -> None:
    tansu_broker.create_topic(topic_name, 1)
    bs = tansu_broker.bootstrap_servers

    async def main() -> None:
        async with AsyncProducer(bootstrap_servers=bs,
                                 transactional_id=f"{topic_name}-tx") as p:
            await p.init_transactions()
            with pytest.raises(IllegalStateError, match="begin_transaction"):
                await p.send(topic_name, b"outside", partition=0)
            p.begin_transaction()
            with pytest.raises(IllegalStateError, match="already open"):
                p.begin_transaction()
            for i in range(5):
                await p.send(topic_name, b"c%d" % i, partition=0)
            await p.flush()
            lso, seen = await read_log(bs, topic_name, 1)
            assert (lso, seen) == (0, [])  # open: hidden from read_committed
            await p.commit_transaction()
            lso, seen = await read_log(bs, topic_name, 1)
            assert lso == 6
            assert seen == [("data", [b"c%d" % i for i in range(5)]),
                            ("marker", ControlRecordType.COMMIT)]

            # Abort with records already written, and one never sent.
            p.begin_transaction()
            sent = [await p.send(topic_name, b"a%d" % i, partition=0) for i in range(3)]
            await p.flush()
            late = await p.send(topic_name, b"never", partition=0)
            await p.abort_transaction()
            assert all(f.exception() is None for f in sent)
            assert isinstance(late.exception(), TransactionAbortableError)
            _, seen = await read_log(bs, topic_name, 0)
            assert seen[-2:] == [("data", [b"a0", b"a1", b"a2"]),
                                 ("marker", ControlRecordType.ABORT)]

            # An empty transaction commits without touching the coordinator.
            p.begin_transaction()
            await p.commit_transaction()

    asyncio.run(main())


def test_a_new_instance_fences_the_old_one(tansu_broker: TansuBroker, topic_name: str) -> None:
    tansu_broker.create_topic(topic_name, 1)
    bs = tansu_broker.bootstrap_servers
    tx = f"{topic_name}-tx"

    async def main() -> None:
        old = AsyncProducer(bootstrap_servers=bs, transactional_id=tx)
        await old.start()
        try:
            old.begin_transaction()
            await old.send_and_wait(topic_name, b"old", partition=0)
            async with AsyncProducer(bootstrap_servers=bs, transactional_id=tx) as new:
                new.begin_transaction()
                await new.send_and_wait(topic_name, b"new", partition=0)
                await new.commit_transaction()
            with pytest.raises((TransactionFatalError, TransactionAbortableError)):
                await old.send_and_wait(topic_name, b"zombie", partition=0)
                await old.commit_transaction()
        finally:
            await old.close()

    asyncio.run(main())
    _, seen = asyncio.run(read_log(bs, topic_name, 1))
    assert ("data", [b"new"]) in seen and ("data", [b"zombie"]) not in seen


def test_offsets_in_a_transaction_sync(tansu_broker: TansuBroker, topic_name: str) -> None:
    tansu_broker.create_topic(topic_name, 1)
    bs = tansu_broker.bootstrap_servers
    group = f"{topic_name}-group"
    delivered: list[Any] = []
    with Producer(bootstrap_servers=bs, transactional_id=f"{topic_name}-tx") as p:
        p.init_transactions()
        p.begin_transaction()
        p.produce(topic_name, b"out", partition=0, on_delivery=lambda e, m: delivered.append(e))
        p.send_offsets_to_transaction({TopicPartition(topic_name, 0): 42}, group)
        p.commit_transaction()
    assert delivered == [None]

    async def committed() -> int:
        async with AsyncKafkaClient(bootstrap_servers=bs) as client:
            node = await client.coordinator(group, "group")
            resp = await client.request(OffsetFetchRequest(
                group_id=group, topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
                    name=topic_name, partition_indexes=[0])]), node=node, version=7)
            return int(resp.topics[0].partitions[0].committed_offset)

    assert asyncio.run(committed()) == 42


def test_transactional_config() -> None:
    with pytest.raises(ConfigError, match=r"transactional\.id"):
        AsyncProducer(bootstrap_servers="127.0.0.1:9", transactional_id="x", acks=1)
    with pytest.raises(ConfigError, match=r"transactional\.id"):
        AsyncProducer(bootstrap_servers="127.0.0.1:9", transactional_id="x",
                      enable_idempotence=False)
    p = AsyncProducer(bootstrap_servers="127.0.0.1:9")
    with pytest.raises(IllegalStateError, match=r"transactional\.id"):
        p.begin_transaction()


def test_flush_and_metadata_outside_a_transaction(tansu_broker: TansuBroker,
                                                  topic_name: str) -> None:
    tansu_broker.create_topic(topic_name, 2)

    async def main() -> None:
        async with AsyncProducer(bootstrap_servers=tansu_broker.bootstrap_servers,
                                 transactional_id=f"{topic_name}-tx") as p:
            await p.flush()
            assert await p.partitions_for(topic_name) == [0, 1]
            with pytest.raises(IllegalStateError, match="begin_transaction"):
                await p.send_batch(p.create_batch(), topic_name, partition=0)

    asyncio.run(main())


def test_transaction_blocks_commit_or_abort(tansu_broker: TansuBroker, topic_name: str) -> None:
    tansu_broker.create_topic(topic_name, 1)
    bs = tansu_broker.bootstrap_servers

    class Boom(Exception):
        pass

    async def main() -> None:
        async with AsyncProducer(bootstrap_servers=bs,
                                 transactional_id=f"{topic_name}-tx") as p:
            async with p.transaction():
                for i in range(3):
                    await p.send(topic_name, b"c%d" % i, partition=0)
            with pytest.raises(Boom):
                async with p.transaction():
                    await p.send_and_wait(topic_name, b"a0", partition=0)
                    late = await p.send(topic_name, b"never", partition=0)
                    raise Boom
            assert isinstance(late.exception(), TransactionAbortableError)
            # The producer is ready for the next transaction.
            async with p.transaction():
                await p.send(topic_name, b"after", partition=0)

    asyncio.run(main())
    _, seen = asyncio.run(read_log(bs, topic_name, 0))
    assert seen == [("data", [b"c0", b"c1", b"c2"]), ("marker", ControlRecordType.COMMIT),
                    ("data", [b"a0"]), ("marker", ControlRecordType.ABORT),
                    ("data", [b"after"]), ("marker", ControlRecordType.COMMIT)]


def test_sync_transaction_block_runs_callbacks_and_aborts_on_error(
        tansu_broker: TansuBroker, topic_name: str) -> None:
    tansu_broker.create_topic(topic_name, 1)
    bs = tansu_broker.bootstrap_servers
    delivered: list[tuple[Any, Any]] = []
    with Producer(bootstrap_servers=bs, transactional_id=f"{topic_name}-tx") as p:
        with p.transaction():
            p.produce(topic_name, b"kept", partition=0,
                      on_delivery=lambda e, m: delivered.append((e, m.offset)))
        assert delivered == [(None, 0)]
        with pytest.raises(KeyError), p.transaction():
            p.produce(topic_name, b"dropped", partition=0,
                      on_delivery=lambda e, m: delivered.append((e, None)))
            raise KeyError("in the block")
        assert len(delivered) == 2
        assert isinstance(delivered[1][0], TransactionAbortableError)
        with pytest.raises(IllegalStateError, match="already open"), p.transaction():
            p.begin_transaction()
    # The aborted record was never sent: its transaction left nothing in the log.
    _, seen = asyncio.run(read_log(bs, topic_name, 0))
    assert seen == [("data", [b"kept"]), ("marker", ControlRecordType.COMMIT)]


def test_a_failed_commit_in_a_transaction_block_aborts_before_raising(
        tansu_broker: TansuBroker, topic_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Tansu gives no way to make a transaction's record fail on demand, so the commit's
    # failure is injected; the abort that follows is real.
    tansu_broker.create_topic(topic_name, 1)
    bs = tansu_broker.bootstrap_servers

    async def failing_commit(self: AsyncProducer, timeout: float | None = None) -> None:
        await self.flush()
        raise TransactionAbortableError("a record of the transaction failed")

    async def main() -> None:
        async with AsyncProducer(bootstrap_servers=bs,
                                 transactional_id=f"{topic_name}-tx") as p:
            with monkeypatch.context() as m:
                m.setattr(AsyncProducer, "commit_transaction", failing_commit)
                with pytest.raises(TransactionAbortableError, match="record of the"):
                    async with p.transaction():
                        await p.send(topic_name, b"x", partition=0)
            async with p.transaction():
                await p.send(topic_name, b"y", partition=0)

    asyncio.run(main())
    _, seen = asyncio.run(read_log(bs, topic_name, 0))
    assert seen == [("data", [b"x"]), ("marker", ControlRecordType.ABORT),
                    ("data", [b"y"]), ("marker", ControlRecordType.COMMIT)]


def test_a_purge_in_a_transaction_makes_it_abortable(tansu_broker: TansuBroker,
                                                     topic_name: str) -> None:
    tansu_broker.create_topic(topic_name, 1)
    bs = tansu_broker.bootstrap_servers

    async def main() -> None:
        async with AsyncProducer(bootstrap_servers=bs, linger_ms=30_000,
                                 transactional_id=f"{topic_name}-tx") as p:
            p.begin_transaction()
            fut = await p.send(topic_name, b"purged", partition=0)
            assert p.purge() == 1
            assert "purged" in str(fut.exception())
            with pytest.raises(TransactionAbortableError):
                await p.commit_transaction()
            await p.abort_transaction()
            async with p.transaction():
                await p.send(topic_name, b"next", partition=0)

    asyncio.run(main())
    _, seen = asyncio.run(read_log(bs, topic_name, 1))
    assert seen == [("data", [b"next"]), ("marker", ControlRecordType.COMMIT)]
