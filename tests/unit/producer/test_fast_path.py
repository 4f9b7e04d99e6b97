"""The inlined send fast paths (AsyncProducer.send, Producer.send) against the reference
encoder and kafka-python's partitioner, without a broker."""

from __future__ import annotations

import asyncio
import random
import threading
import time
import warnings
from typing import Any

import pytest

with warnings.catch_warnings():
    # kafka-python's package import loads its JSON schemas with a deprecated importlib API.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.partitioner.default import murmur2 as kafka_murmur2

from kontrakt.clients.producer import AsyncProducer, Producer, RecordFuture, _stage
from kontrakt.clients.producer._batch import ProducerBatch
from kontrakt.clients.producer._partitioner import PARTITION_HASH_BY_LENGTH, murmur2
from kontrakt.errors import KafkaTimeoutError
from kontrakt.protocol.records import RecordBatch, RecordBatchBuilder
from tests.unit.producer.offline import offline_producer

PARTITIONS = 6


def _async_producer(**kwargs: Any) -> AsyncProducer:
    return offline_producer(PARTITIONS, **kwargs)


def _sync_producer(**kwargs: Any) -> Producer:
    p = object.__new__(Producer)
    p._async = _async_producer(_threaded=True, **kwargs)
    return p


def _records(n: int, seed: int) -> list[tuple[bytes, bytes]]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        klen = rnd.choice([0, 1, 3, 10, 17, 63, 64, 100])
        vlen = rnd.choice([0, 5, 100, 1000, 5000])
        out.append((rnd.randbytes(klen), b"%d" % i + rnd.randbytes(vlen)))
    return out


def _check(p: AsyncProducer, records: list[tuple[bytes, bytes]],
           futs: list[RecordFuture]) -> None:
    # Every record went to kafka-python's partition for its key, at the index its future
    # says, and every batch is byte-identical to the reference builder's.
    for (key, _), fut in zip(records, futs, strict=True):
        assert fut._batch.partition == (kafka_murmur2(key) & 0x7FFFFFFF) % PARTITIONS
    by_batch: dict[int, list[int]] = {}
    for i, fut in enumerate(futs):
        by_batch.setdefault(id(fut._batch), []).append(i)
    batches: list[ProducerBatch] = [b for q in p._acc.queues.values() for b in q]
    assert sum(b.record_count for b in batches) == len(records)
    for b in batches:
        idx = by_batch[id(b)]
        assert [futs[i]._index for i in idx] == list(range(len(idx)))
        assert len(idx) == 1 or b.size_in_bytes <= p._acc.batch_size
        ref = RecordBatchBuilder(max_batch_size=1 << 30)
        for i in idx:
            ref.append(futs[i].metadata().timestamp, records[i][0], records[i][1])
        assert b.size_in_bytes == ref.size_in_bytes
        blob = b.encode(5, 1, False)
        assert blob == ref.build(producer_id=5, producer_epoch=1)
        got = RecordBatch.from_bytes(blob).records()
        assert [(r.key, r.value) for r in got] == [records[i] for i in idx]
    assert p._acc.used == sum(b.size_in_bytes - 61 for b in batches)


@pytest.mark.parametrize("batch_size", [1000, 16384, 200_000])
def test_async_send_fast_path_matches_reference(batch_size: int) -> None:
    p = _async_producer(batch_size=batch_size)
    records = _records(1500, batch_size)

    async def main() -> list[RecordFuture]:
        return [await p.send("t", v, k) for k, v in records]

    futs = asyncio.run(main())
    _check(p, records, futs)


@pytest.mark.parametrize("batch_size", [1000, 16384, 200_000])
def test_sync_send_fast_path_matches_reference(batch_size: int) -> None:
    p = _sync_producer(batch_size=batch_size)
    records = _records(1500, batch_size + 1)
    futs = [p.send("t", v, k) for k, v in records]
    _check(p._async, records, futs)


def _check_unkeyed(p: AsyncProducer, values: list[bytes], futs: list[RecordFuture]) -> None:
    # Every batch holds its records in send order, byte-identical to the reference
    # builder's, and the futures' indexes and the buffer accounting agree.
    placed = [f._batch for f in futs]  # (a look at a staged record settles its stage)
    batches: list[ProducerBatch] = [b for q in p._acc.queues.values() for b in q]
    assert sum(b.record_count for b in batches) == len(values)
    assert {id(b) for b in placed} == {id(b) for b in batches}
    by_batch: dict[int, list[int]] = {}
    for i, fut in enumerate(futs):
        by_batch.setdefault(id(fut._batch), []).append(i)
    for b in batches:
        idx = by_batch[id(b)]
        assert idx == sorted(idx)
        assert [futs[i]._index for i in idx] == list(range(len(idx)))
        ref = RecordBatchBuilder(max_batch_size=1 << 30)
        for i in idx:
            ref.append(futs[i].metadata().timestamp, None, values[i])
        blob = b.encode(5, 1, False)
        assert blob == ref.build(producer_id=5, producer_epoch=1)
        assert [(r.key, r.value) for r in RecordBatch.from_bytes(blob).records()] == \
            [(None, values[i]) for i in idx]
    assert p._acc.used == sum(b.size_in_bytes - 61 for b in batches)


def _check_sticky(futs: list[RecordFuture], values: list[bytes], batch_size: int) -> None:
    # KIP-480: the sticky partition moves on only where a record would open a new batch
    # (the batch before it holds it no more).
    for i in range(1, len(futs)):
        before, now = futs[i - 1]._batch, futs[i]._batch
        if now.partition != before.partition:
            assert before.size_in_bytes + len(values[i]) + 12 > batch_size, i


@pytest.mark.parametrize("uniform", [False, True])
@pytest.mark.parametrize("batch_size", [1000, 16384])
def test_unkeyed_records_fill_sticky_batches_as_the_reference(
        batch_size: int, uniform: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # produce(topic, value) without a key: staged, then written into the sticky partition's
    # batches a run at a time (values of one length, or of many: the two run writers), the
    # general path for values too long for the stage, all as the reference builder writes.
    rnd = random.Random(batch_size)
    if uniform:
        values = [b"%05d:" % i + rnd.randbytes(60) for i in range(1500)]
    else:
        values = [b"%d:" % i + rnd.randbytes(rnd.choice([0, 5, 100, 900, 5000]))
                  for i in range(1500)]
    staged: list[int] = []
    real = _stage._settle_keyless

    def counted(acc: Any, stage: Any, chunk: Any, vals: list[bytes], stamps: Any) -> Any:
        staged.append(len(vals))
        return real(acc, stage, chunk, vals, stamps)

    monkeypatch.setattr(_stage, "_settle_keyless", counted)
    sync = _sync_producer(batch_size=batch_size)
    futs = [sync.send("t", v) for v in values]
    _check_unkeyed(sync._async, values, futs)
    _check_sticky(futs, values, batch_size)
    p = _async_producer(batch_size=batch_size)

    async def main() -> list[RecordFuture]:
        return [await p.send("t", v) for v in values]

    futs = asyncio.run(main())
    _check_unkeyed(p, values, futs)
    _check_sticky(futs, values, batch_size)
    # most records of both producers were staged
    assert sum(staged) > len(values) * (1.9 if uniform else 1.5)


def test_unkeyed_records_staged_while_the_clock_steps_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Send times out of order within a staged chunk: each record keeps its own timestamp
    # (those before the batch's first take the general encoding), bytes as the reference.
    base = time.time()
    sent = [base + (i % 7) * 0.003 - (i % 3) * 0.002 for i in range(400)]
    p = _sync_producer(batch_size=4000)
    values = [b"first"] + [b"v%03d" % i for i in range(400)]
    futs = [p.send("t", values[0])]  # the topic's first record takes the general path
    stamps = iter(sent)
    monkeypatch.setattr(_stage, "_time", lambda: next(stamps))
    futs += [p.send("t", v) for v in values[1:]]
    _check_unkeyed(p._async, values, futs)
    assert [f.metadata().timestamp for f in futs[1:]] == [int(t * 1000) for t in sent]


def test_unkeyed_and_keyed_records_alternating_keep_their_order() -> None:
    # A stage holds records of one kind: each record of the other kind settles it first, so
    # every partition's records stay in send order.
    p = _sync_producer(batch_size=16384)
    futs = [p.send("t", b"v%d" % i, None if i % 3 else b"k%d" % (i % 5)) for i in range(300)]
    placed = [(f._batch, f._index) for f in futs]
    queued = {id(b): n for q in p._async._acc.queues.values() for n, b in enumerate(q)}
    last: dict[int, tuple[int, int]] = {}
    for batch, index in placed:
        at = (queued[id(batch)], index)  # where in its partition the record went
        assert at > last.get(batch.partition, (-1, -1))
        last[batch.partition] = at
    for i, f in enumerate(futs):
        if i % 3 == 0:
            assert f._batch.partition == (kafka_murmur2(b"k%d" % (i % 5)) & 0x7FFFFFFF) % 6


def test_unkeyed_records_after_staged_keyed_ones_keep_their_order() -> None:
    # A keyed record staged before an unkeyed one of the same topic goes into its batch
    # first (a stage holds records of one kind: the unkeyed one takes the general path,
    # which settles the stage), and the unkeyed ones around it share a sticky partition.
    p = _sync_producer(batch_size=16384)
    first = [p.send("t", b"unkeyed-%d" % i) for i in range(5)]
    keyed = p.send("t", b"keyed", b"k")
    later = p.send("t", b"unkeyed-5")
    part = later._batch.partition
    if keyed._batch.partition == part:
        assert keyed._batch is later._batch and keyed._index < later._index
    assert all(f._batch.partition == part for f in first)  # one sticky partition


def test_fast_path_respects_buffer_memory() -> None:
    p = _sync_producer(buffer_memory=5000, batch_size=1000, max_block_ms=10)
    acc = p._async._acc
    with pytest.raises(KafkaTimeoutError, match=r"buffer\.memory"):
        for _ in range(200):
            p.send("t", b"x" * 100, b"k")
            assert acc.used <= 5000
    assert acc.used > 5000 - 120


@pytest.mark.parametrize("key", [None, b"k"])
def test_produce_waits_for_buffer_memory_then_raises(key: bytes | None) -> None:
    # produce() appends through the core directly; a full buffer takes the waiting path
    # (max.block.ms), which raises, and nothing past the limit was taken.
    p = _sync_producer(buffer_memory=5000, batch_size=1000, max_block_ms=10)
    acc = p._async._acc
    delivered: list[Any] = []
    with pytest.raises(KafkaTimeoutError, match=r"buffer\.memory"):
        for _ in range(200):
            p.produce("t", b"x" * 100, key, on_delivery=lambda e, m: delivered.append(m))
            assert acc.used <= 5000
    assert acc.used > 5000 - 120


def test_partition_hash_matches_kafka_python() -> None:
    rnd = random.Random(7)
    for n in range(80):
        for _ in range(100):
            key = rnd.randbytes(n)
            expected = kafka_murmur2(key)
            assert murmur2(key) & 0xFFFFFFFF == expected & 0xFFFFFFFF
            if n < 64:
                assert PARTITION_HASH_BY_LENGTH[n](key) == expected & 0x7FFFFFFF


def test_the_sticky_partition_of_a_settling_stage_is_one_it_has() -> None:
    # A stage places its records by the partition count they were sent under; a sticky
    # partition past it (the topic made again with fewer partitions) is not taken.
    p = _sync_producer(batch_size=16384)
    p.send("t", b"v")  # the topic's metadata, and a sticky partition
    core = p._async
    core._default.current["t"] = 5
    assert core._acc.sticky("t", -1, PARTITIONS) == 5
    assert {core._acc.sticky("t", -1, 2) for _ in range(50)} <= {0, 1}
    assert {core._acc.sticky("t", 1, 2) for _ in range(50)} == {0}
    moved = {core._acc.sticky("t", 3, PARTITIONS) for _ in range(200)}
    assert 3 not in moved and len(moved) > 1


def test_unkeyed_records_move_on_to_any_partition_of_the_topic() -> None:
    # Where the sticky partition's batch is full, a settling stage moves its records on to
    # any of the topic's partitions (KIP-480), whatever the full batch's record count: here
    # two records a batch, six partitions.
    random.seed(3)  # the sticky partitioner's choices
    p = _async_producer(batch_size=1000)
    values = [b"%04d" % i + b"x" * 396 for i in range(400)]

    async def main() -> list[RecordFuture]:
        return [await p.send("t", v) for v in values]

    futs = asyncio.run(main())
    assert {f._batch.partition for f in futs} == set(range(PARTITIONS))


def test_unkeyed_records_settle_behind_a_send_batch_in_their_sticky_partition() -> None:
    # A batch from send_batch (sealed, its records in its builder) ends the sticky
    # partition's queue: the records staged after it move on to another partition.
    random.seed(4)
    p = _async_producer(batch_size=16384)
    stage = p._topics["t"].stage

    async def main() -> list[RecordFuture]:
        futs = [await p.send("t", b"a%d" % i) for i in range(5)]
        p._acc.settle(stage)
        sticky = p._default.current["t"]
        builder = p.create_batch()
        builder.append(0, None, b"whole", None)
        futs.append(await p.send_batch(builder, "t", partition=sticky))
        futs += [await p.send("t", b"b%d" % i) for i in range(5)]
        p._acc.settle(stage)
        return futs

    futs = asyncio.run(main())
    assert not stage.keys
    moved = {f._batch.partition for f in futs[6:]}
    assert len(moved) == 1 and moved != {futs[0]._batch.partition}


def test_unkeyed_records_move_on_when_no_partition_has_a_leader() -> None:
    # No partition available (no leader known, e.g. while its broker restarts): the sticky
    # partition moves on among all of the topic's partitions, never past them.
    from kontrakt.clients.producer._producer import _TopicParts

    random.seed(5)
    p = _async_producer(batch_size=1000)
    p._topics["t"] = _TopicParts.of(p._acc, "t", list(range(PARTITIONS)), [],
                                    p._cluster.version)
    values = [b"%04d" % i + b"x" * 40 for i in range(400)]

    async def main() -> list[RecordFuture]:
        futs = [await p.send("t", v) for v in values]
        p._acc.settle(p._topics["t"].stage)
        return futs

    futs = asyncio.run(main())
    assert {f._batch.partition for f in futs} == set(range(PARTITIONS))


def test_a_send_blocked_on_a_full_buffer_goes_on_once_a_batch_completes() -> None:
    # Completing a batch wakes the threads waiting for buffer memory (it notifies only
    # when one waits: the count of waiters must see them).
    p = _sync_producer(buffer_memory=5000, batch_size=1000, max_block_ms=10_000)
    acc = p._async._acc
    futs = []
    while acc.used + 200 < acc.buffer_memory:
        futs.append(p.send("t", b"x" * 100, partition=0))
    done = threading.Event()

    def blocked() -> None:
        for _ in range(3):
            p.send("t", b"y" * 100, partition=0)
        done.set()

    t = threading.Thread(target=blocked, daemon=True)
    t.start()
    deadline = time.monotonic() + 5
    while not acc.memory_waiters and time.monotonic() < deadline:
        time.sleep(0.001)
    assert acc.memory_waiters == 1
    assert not done.is_set()
    started = time.monotonic()
    first = futs[0]._batch
    acc.queues[("t", 0)].remove(first)
    first.complete(0)
    assert done.wait(5)
    assert time.monotonic() - started < 2  # woken, not timed out (max.block.ms is 10 s)
    t.join(5)
    assert acc.memory_waiters == 0
