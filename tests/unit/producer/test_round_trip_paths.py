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


def _check_listed(acc: RecordAccumulator, step: str) -> None:
    """Every queue holding batches is listed in ``acc.queued`` (as itself): the drain walks
    only those, so one left out would hold its batches back until their delivery timeout."""
    for tp, dq in acc.queues.items():
        if dq:
            assert acc.queued.get(tp) is dq, \
                f"after {step}: {tp} holds {len(dq)} batch(es) but is not listed"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("held", ["none", "muted", "leaderless"])
@pytest.mark.parametrize("seed", range(6))
def test_every_way_into_a_queue_lists_it_for_the_drain(seed: int, held: str) -> None:
    """Random interleavings of every way a batch enters or leaves a partition's queue --
    staged keyed records settling (record by record, in bulk runs of one size or of mixed
    sizes), staged keyless records settling into the sticky partition, appends with headers,
    appends to a chosen partition, send_batch, drains (forced, or only what is ready), and
    the answers: success, a resend, a split of a batch refused as too large, expiry and a
    purge -- leave every queue that holds batches listed for the drain; in the end every
    record resolves, and no batch is taken by a drain while it is already in flight.
    ``held``: the drain also leaves batches queued behind one in flight of their partition
    (max.in.flight 1 without idempotence: muted partitions), or behind a leader that comes
    and goes."""
    import random

    rnd = random.Random(seed)
    p = offline_producer(5, batch_size=2048, linger_ms=60_000)
    acc = p._acc
    stage = p._topics["t"].stage
    s = _sender(acc)
    dark: set[int] = set()  # partitions without a leader now
    if held == "muted":
        s.settings.max_in_flight = 1
    elif held == "leaderless":
        s.client.cluster.leader_for = lambda topic, partition: -1 if partition in dark else 1
    futures: list[Any] = []
    flying: dict[int, ProducerBatch] = {}
    ops = ["keyed"] * 30 + ["keyless"] * 10 + ["headers", "partition", "whole", "settle"] * 3 \
        + ["drain"] * 6 + ["answer"] * 8 + ["expire", "purge", "leader"]

    def drain(force: bool) -> None:
        s.closing = force
        by_node, _wake_at, missing, _more = s._drain(0.0)
        assert dark or not missing
        for b in by_node.get(1, []):
            if held == "muted":
                assert not any(f.partition == b.partition for f in flying.values())
            assert id(b) not in flying, "a batch in flight was taken again"
            flying[id(b)] = b

    def answer() -> None:
        b = flying.pop(rnd.choice(list(flying)))
        s._muted.discard((b.topic, b.partition))  # as every outcome does (BatchOutcomes)
        r = rnd.random()
        if r < 0.3:
            b.retry_at = 0.0
            acc.reenqueue(b)
        elif r < 0.55 and b.builder is None and b.count >= 2:
            assert acc.split_and_reenqueue(b) is not None
        else:
            b.complete(0)

    async def main() -> None:
        for step in range(1500):
            op = rnd.choice(ops)
            if op == "keyed":
                # Runs of one size (uniform bulk settles) or of many (mixed, and record by
                # record for chunks below _BULK_MIN).
                n = rnd.choice([1, 3, 40, 70])
                size = rnd.choice([None, 8, 30])
                for _ in range(n):
                    v = b"v" * (size if size is not None else rnd.randrange(1, 60))
                    futures.append(await p.send("t", v, b"k%d" % rnd.randrange(50)))
            elif op == "keyless":
                for _ in range(rnd.choice([1, 40])):
                    futures.append(await p.send("t", b"x" * rnd.randrange(1, 40)))
            elif op == "headers":
                futures.append(await p.send("t", b"h", b"k", headers=[("h", b"1")]))
            elif op == "partition":
                futures.append(await p.send("t", b"p" * 100, partition=rnd.randrange(5)))
            elif op == "whole":
                builder = p.create_batch()
                builder.append(0, b"k", b"w", None)
                futures.append(await p.send_batch(builder, "t", partition=rnd.randrange(5)))
            elif op == "settle":
                acc.settle(stage)
            elif op == "drain":
                drain(rnd.random() < 0.7)
            elif op == "answer" and flying:
                answer()
            elif op == "expire" and rnd.random() < 0.2:
                for b in acc.expire(float("inf")):
                    b.complete(-1, -1, ProduceError("expired"))
            elif op == "purge" and rnd.random() < 0.2:
                for b in acc.abort_all():
                    b.complete(-1, -1, ProduceError("purged"))
            elif op == "leader" and held == "leaderless":
                dark.symmetric_difference_update({rnd.randrange(5)})
            _check_listed(acc, f"step {step} ({op})")
        # The end: everything left goes out and is answered.
        dark.clear()
        acc.settle(stage)
        for _ in range(10_000):
            if not acc.incomplete:
                break
            drain(True)
            _check_listed(acc, "a final drain")
            for b in list(flying.values()):
                s._muted.discard((b.topic, b.partition))
                b.complete(0)
            flying.clear()
        assert not acc.incomplete, f"{len(acc.incomplete)} batch(es) never drained"
        assert all(f.done() for f in futures)

    asyncio.run(main())


@pytest.mark.timeout(60)
def test_caller_threads_appending_while_another_thread_drains_lose_no_batch() -> None:
    """A sync producer's callers append (staged keyed and keyless records, appends with
    headers, to chosen partitions) on four threads while another thread drains and answers,
    as the I/O thread does: every queue holding batches stays listed, and once the callers
    are done every record is drained and resolved."""
    import random
    import threading

    from kontrakt.clients.producer import Producer

    sync = object.__new__(Producer)
    sync._async = offline_producer(7, batch_size=1024, linger_ms=60_000, _threaded=True)
    acc = sync._async._acc
    s = _sender(acc)
    futures: list[Any] = []
    stop = threading.Event()
    errors: list[BaseException] = []

    def caller(seed: int) -> None:
        rnd = random.Random(seed)
        mine = []
        try:
            for i in range(3000):
                r = rnd.random()
                if r < 0.5:
                    mine.append(sync.send("t", b"v" * rnd.randrange(1, 80), b"k%d" % i))
                elif r < 0.8:
                    mine.append(sync.send("t", b"x" * rnd.randrange(1, 80)))
                elif r < 0.9:
                    mine.append(sync.send("t", b"h", b"k", headers=[("h", b"1")]))
                else:
                    mine.append(sync.send("t", b"p" * 50, partition=rnd.randrange(7)))
        except BaseException as exc:  # reported by the test's thread
            errors.append(exc)
        futures.extend(mine)

    def io() -> None:
        rnd = random.Random(99)
        try:
            while True:
                last = stop.is_set()
                s.closing = last or rnd.random() < 0.5
                by_node, _wake_at, _missing, _more = s._drain(0.0)
                with acc.lock:
                    _check_listed(acc, "a drain")
                for b in by_node.get(1, []):
                    if rnd.random() < 0.2 and not last:
                        b.retry_at = 0.0
                        acc.reenqueue(b)
                    else:
                        b.complete(0)
                if last and not acc.incomplete and not any(
                        st.keys for st in acc.stages.values()):
                    return
        except BaseException as exc:
            errors.append(exc)

    callers = [threading.Thread(target=caller, args=(n,)) for n in range(4)]
    drainer = threading.Thread(target=io)
    drainer.start()
    for t in callers:
        t.start()
    for t in callers:
        t.join(30)
    stop.set()
    drainer.join(30)
    assert not errors, errors
    assert not drainer.is_alive(), "batches left undrained"
    assert len(futures) == 4 * 3000
    assert all(f.done() and f.exception() is None for f in futures)
