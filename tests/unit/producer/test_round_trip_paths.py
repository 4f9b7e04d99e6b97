"""The paths of an awaited single send trimmed for its round trip (issue 23, round 5), without a
broker: the sender's drain walks only the queues listed as holding batches, an awaited
send_and_wait waits on its batch directly, and buffer memory is told to an AsyncProducer
only once a send waits for it."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from types import SimpleNamespace
from typing import Any

import pytest

from kontrakt.clients.producer._accumulator import RecordAccumulator
from kontrakt.clients.producer._batch import ProducerBatch
from kontrakt.clients.producer._sender import Sender
from kontrakt.errors import ProduceError
from kontrakt.protocol.records import CompressionType, RecordBatchBuilder
from tests.unit.producer.offline import offline_producer

PARTITIONS = 40


def _acc() -> RecordAccumulator:
    return RecordAccumulator(batch_size=16_384, linger=60.0, buffer_memory=1 << 24,
                             compression=CompressionType.NONE, compression_level=None,
                             delivery_timeout=120.0, threaded=False,
                             wakeup=lambda *a, **k: None)


def _sender(acc: RecordAccumulator) -> Any:
    """A Sender's drain state around ``acc``: every partition led by broker 1, nothing in
    flight, no idempotence; ``closing`` makes every queued batch ready."""
    s = Sender.__new__(Sender)
    s.acc = acc
    s.client = SimpleNamespace(cluster=SimpleNamespace(
        brokers={1: object()}, leader_for=lambda topic, partition: 1))
    s.settings = SimpleNamespace(max_in_flight=1000, message_max_bytes=1 << 24)
    s.idem = None
    s.txn = None
    s._in_flight = defaultdict(int)
    s._muted = set()
    s.closing = True
    return s


def _drained(s: Any) -> list[tuple[str, int]]:
    by_node, _wake_at, missing, _more = s._drain(0.0)
    assert not missing
    return sorted((b.topic, b.partition) for b in by_node.get(1, []))


def test_the_drain_finds_batches_however_they_were_queued() -> None:
    """Batches queued by an append, by append_batch and by a resend (reenqueue, also into a
    queue an earlier drain emptied and unlisted) are all taken, one per partition per
    drain, and the queues emptied leave the list."""
    acc = _acc()
    acc.queues_for("t", PARTITIONS)
    s = _sender(acc)
    assert _drained(s) == []
    appended = acc.append("t", 7, 0, b"k", b"v", None, 40)
    builder = RecordBatchBuilder()
    builder.append(0, b"k", b"v", None)
    whole = acc.append_batch("t", 31, builder, builder.size_in_bytes)
    assert whole is not None
    assert _drained(s) == [("t", 7), ("t", 31)]
    assert acc.queued == {}  # both queues emptied: unlisted
    # A resend goes back into its (empty, unlisted) queue, and the next drain takes it.
    acc.reenqueue(appended._batch)
    acc.reenqueue(whole)
    acc.append("t", 12, 0, b"k", b"v", None, 40)
    assert _drained(s) == [("t", 7), ("t", 12), ("t", 31)]
    # Two batches in one partition: one a drain, the queue stays listed until empty.
    first = acc.append("t", 3, 0, b"k", b"v" * 10_000, None, 10_040)._batch
    second = acc.append("t", 3, 0, b"k", b"v" * 10_000, None, 10_040)._batch
    assert first is not second
    assert _drained(s) == [("t", 3)]
    assert ("t", 3) in acc.queued
    assert _drained(s) == [("t", 3)]
    assert _drained(s) == [] and acc.queued == {}
    # Every batch was taken exactly once.
    assert all(not dq for dq in acc.queues.values())


def test_an_awaited_send_and_wait_resolves_with_its_batch() -> None:
    p = offline_producer(3)

    async def run() -> None:
        loop = asyncio.get_running_loop()
        p._sender.loop = loop  # type: ignore[union-attr]  # the stand-in sender's loop
        task = asyncio.ensure_future(p.send_and_wait("t", b"v", partition=1))
        await asyncio.sleep(0)
        assert not task.done()  # waits for the batch, unsent (no broker)
        (batch,) = p._acc.queues[("t", 1)]
        assert batch.urgent
        loop.call_soon(batch.complete, 41)
        md = await asyncio.wait_for(task, 5)
        assert (md.topic, md.partition, md.offset) == ("t", 1, 41)
        failing = asyncio.ensure_future(p.send_and_wait("t", b"w", partition=2))
        await asyncio.sleep(0)
        (batch,) = p._acc.queues[("t", 2)]
        loop.call_soon(batch.complete, -1, -1, ProduceError("refused"))
        with pytest.raises(ProduceError, match="refused"):
            await asyncio.wait_for(failing, 5)
        # A cancelled waiter leaves the record to its batch: the next waiter still gets it.
        cancelled = asyncio.ensure_future(p.send_and_wait("t", b"x", partition=0))
        await asyncio.sleep(0)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        (batch,) = p._acc.queues[("t", 0)]
        assert not batch.done
        batch.complete(9)

    asyncio.run(run())


def test_an_async_send_waiting_for_buffer_memory_is_woken_by_a_completed_batch() -> None:
    """The accumulator tells an AsyncProducer of freed memory only once a send waited for
    it (its on_memory is set then): the send then goes on as soon as a batch completes,
    long before max.block.ms."""
    p = offline_producer(1, buffer_memory=4096, batch_size=1024, max_block_ms=20_000)
    assert p._acc.on_memory is None

    async def run() -> None:
        loop = asyncio.get_running_loop()
        while p._append("t", b"x" * 200, None, 0, 0, None, None) is not None:
            assert p._acc.used < 8192
        first: ProducerBatch = p._acc.queues[("t", 0)][0]
        task = asyncio.ensure_future(p.send("t", b"y" * 200, partition=0))
        await asyncio.sleep(0)
        assert not task.done()
        assert p._acc.on_memory is not None
        loop.call_soon(first.complete, 5)
        fut = await asyncio.wait_for(task, 2)
        assert fut._batch is not first

    asyncio.run(run())


def test_send_and_wait_after_waiting_for_memory_still_sends_its_batch_at_once() -> None:
    """A send_and_wait that had to wait for buffer memory appends its record as a plain send
    (_send_slow); its wait then makes the batch urgent and wakes the sender, as a waited-on
    batch must not linger (linger.ms is a minute here)."""
    p = offline_producer(1, buffer_memory=4096, batch_size=1024, max_block_ms=20_000,
                         linger_ms=60_000)

    async def run() -> None:
        loop = asyncio.get_running_loop()
        p._sender.loop = loop  # type: ignore[union-attr]  # the stand-in sender's loop
        while p._append("t", b"x" * 200, None, 0, 0, None, None) is not None:
            assert p._acc.used < 8192
        queue = p._acc.queues[("t", 0)]
        first: ProducerBatch = queue[0]
        task = asyncio.ensure_future(p.send_and_wait("t", b"y" * 200, partition=0))
        await asyncio.sleep(0)
        assert not task.done()
        loop.call_soon(first.complete, 5)
        queue.popleft()  # (as the sender would have taken it)
        for _ in range(10):
            await asyncio.sleep(0)
        assert not task.done()
        last = queue[-1]
        assert last.urgent, "the waited-on batch lingers"
        last.complete(70)
        md = await asyncio.wait_for(task, 5)
        assert md.offset >= 70

    asyncio.run(run())
