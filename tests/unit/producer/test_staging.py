"""Staged keyed records (KeyedStage): hashed in bulk, placed in send order, and every way a
stage settles -- without a broker. The sender's linger-driven settling and close() are
covered against Tansu in tests/integration/test_producer.py."""

from __future__ import annotations

import asyncio
import random
import warnings
from typing import Any

import pytest

with warnings.catch_warnings():
    # kafka-python's package import loads its JSON schemas with a deprecated importlib API.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.partitioner.default import murmur2 as kafka_murmur2

from kontrakt.clients.producer import AsyncProducer, Producer, RecordFuture
from kontrakt.clients.producer._batch import StagedChunk
from kontrakt.clients.producer._partitioner import _lane_remainders, murmur2_partitions
from kontrakt.clients.producer._producer import _TopicParts
from kontrakt.errors import IllegalStateError, KafkaError
from kontrakt.protocol.messages import MetadataResponse
from kontrakt.protocol.records import RecordBatch
from tests.unit.producer.offline import offline_producer, sync_over


def _producer(partitions: int = 3, **kwargs: Any) -> AsyncProducer:
    return offline_producer(partitions, **kwargs)


def _expected(key: bytes, n: int) -> int:
    return (kafka_murmur2(key) & 0x7FFFFFFF) % n


def _sent_in(p: AsyncProducer, partition: int) -> list[tuple[bytes | None, bytes | None]]:
    out = []
    for b in p._acc.queues[("t", partition)]:
        out += [(r.key, r.value) for r in RecordBatch.from_bytes(b.encode(1, 0, False)).records()]
    return out


@pytest.mark.parametrize("count", [0, 1, 7, 8, 9, 300, 2000])
def test_bulk_partitions_equal_kafka_pythons_for_every_key_length(count: int) -> None:
    rnd = random.Random(count)
    mixed = [rnd.randbytes(rnd.choice([0, 1, 2, 3, 4, 5, 10, 36, 63, 64, 200]))
             for _ in range(count)]
    same = [rnd.randbytes(13) for _ in range(count)]
    for keys in (mixed, same):
        for n in (1, 2, 6, 7, 1000):
            assert murmur2_partitions(keys, n) == [_expected(k, n) for k in keys]


def test_lane_remainders_divide_every_31_bit_value_exactly() -> None:
    # The bulk partitioner takes hashes modulo the partition count 64-bit lane by lane with
    # a multiplication and a shift; the edges of the range and of each divisor's multiples
    # are where such a division is off by one if its constants are.
    rnd = random.Random(5)
    top = (1 << 31) - 1
    for divisor in [*range(1, 1100), 4096, 65_537, (1 << 20) + 1, 999_983, top - 1, top]:
        values = [0, 1, divisor - 1, divisor, divisor + 1, top, top - 1,
                  top - top % divisor, top - top % divisor - 1,
                  *(rnd.randrange(1 << 31) for _ in range(8))]
        values = [v for v in values if 0 <= v <= top]
        lanes = int.from_bytes(b"".join(v.to_bytes(8, "little") for v in values), "little")
        got = _lane_remainders(lanes, len(values), divisor)
        assert [int.from_bytes(got.to_bytes(8 * len(values), "little")[8 * i:8 * i + 8],
                               "little") for i in range(len(values))] == \
            [v % divisor for v in values], divisor


def test_staged_records_stay_in_send_order_with_the_topics_other_records() -> None:
    p = _producer(batch_size=600)
    stage = p._topics["t"].stage
    sent: list[tuple[bytes, bytes]] = []

    async def main() -> list[RecordFuture]:
        futs = []
        for i in range(62):
            key, value = b"k%d" % (i % 4), b"v%d" % i
            if i % 7 == 3:  # a record the fast path does not take: the stage settles first
                futs.append(await p.send("t", value, key, headers=[("h", b"")]))
                assert not stage.keys
            elif i % 11 == 5:
                futs.append(await p.send("t", value, key, timestamp_ms=1_700_000_000_000))
            else:
                futs.append(await p.send("t", value, key))
            sent.append((key, value))
        return futs

    futs = asyncio.run(main())
    assert stage.keys  # the last records are still staged
    for (key, _), fut in zip(sent, futs, strict=True):
        assert fut._batch.partition == _expected(key, 3)
    assert not stage.keys
    for part in range(3):
        expected = [kv for kv in sent if _expected(kv[0], 3) == part]
        assert _sent_in(p, part) == expected


def test_done_leaves_the_stage_and_looking_at_a_record_settles_it() -> None:
    p = _producer()
    stage = p._topics["t"].stage

    async def main() -> list[RecordFuture]:
        return [await p.send("t", b"v%d" % i, b"key-%d" % i) for i in range(5)]

    futs = asyncio.run(main())
    assert all(type(f._head) is StagedChunk for f in futs)
    assert not any(f.done() for f in futs)
    assert "pending" in repr(futs[0])
    assert len(stage.keys) == 5
    assert futs[2]._batch.partition == _expected(b"key-2", 3)  # settles the whole chunk
    assert not stage.keys
    assert [f._batch.partition for f in futs] == [_expected(b"key-%d" % i, 3) for i in range(5)]
    for f in futs:
        assert f._batch.record_count > f._index >= 0


# 20 records of mixed sizes settle record by record; 100 of one size in bulk.
@pytest.mark.parametrize(("count", "key"), [(20, b"key-%d"), (100, b"key-%03d")])
def test_callbacks_added_while_staged_run_once_when_their_batch_completes(
        count: int, key: bytes) -> None:
    p = _producer(batch_size=100_000)
    stage = p._topics["t"].stage
    calls: list[tuple[int, int]] = []

    async def main() -> list[RecordFuture]:
        futs = []
        for i in range(count):
            f = await p.send("t", b"v%03d" % i, key % i)
            f.add_done_callback(lambda fut, i=i: calls.append((i, fut.metadata().offset)))
            futs.append(f)
        return futs

    futs = asyncio.run(main())
    assert len(stage.keys) == count  # adding callbacks did not settle the stage
    p._acc.settle(stage)
    batches = {id(f._batch): f._batch for f in futs}
    assert len(batches) == 3
    for b in batches.values():
        b.complete(100 * b.partition)
        b.complete(5)  # resolved once only
    assert sorted(calls) == sorted((i, 100 * f._batch.partition + f._index)
                                   for i, f in enumerate(futs))


def test_stage_settles_at_its_chunk_size_and_wakes_the_sender_for_full_batches() -> None:
    p = _producer(batch_size=1000)
    stage = p._topics["t"].stage
    sender = p._sender

    async def main() -> None:
        for i in range(4000):
            await p.send("t", b"x" * 100, b"%06d" % i)

    asyncio.run(main())
    # Linger wake at the first record, then one urgent wake per settled chunk that filled
    # a batch: 127 bytes reserved a record, 128 KiB a chunk.
    assert sender.wakes[0] is False  # type: ignore[attr-defined]
    assert stage.limit == 131072 // 127 + 1
    settles = 4000 // (stage.limit + 1)
    assert settles == 3
    assert sender.wakes.count(True) == settles  # type: ignore[attr-defined]
    assert len(stage.keys) == 4000 - settles * (stage.limit + 1)


def test_a_partition_count_change_places_staged_records_by_the_old_count() -> None:
    p = _producer(partitions=2)
    keys = [b"key-%d" % i for i in range(50)]

    async def main() -> list[RecordFuture]:
        return [await p.send("t", b"v", k) for k in keys]

    futs = asyncio.run(main())
    stage = p._topics["t"].stage
    assert len(stage.keys) == 50
    info = _TopicParts.of(p._acc, "t", [0, 1, 2, 3], [0, 1, 2, 3], p._cluster.version)
    assert info.stage is stage and stage.count == 4 and not stage.keys
    assert [f._batch.partition for f in futs] == [_expected(k, 2) for k in keys]


def _metadata(partitions: int) -> MetadataResponse:
    b = MetadataResponse.MetadataResponseBroker
    t = MetadataResponse.MetadataResponseTopic
    part = t.MetadataResponsePartition
    return MetadataResponse(brokers=[b(node_id=1, host="127.0.0.1", port=9)], topics=[
        t(error_code=0, name="t", partitions=[
            part(error_code=0, partition_index=i, leader_id=1, replica_nodes=[1],
                 isr_nodes=[1]) for i in range(partitions)])])


def test_the_send_fast_path_sees_a_metadata_update_at_once() -> None:
    # The fast path reads its topics from a dict the cluster empties on every metadata
    # update (no version check per record): records sent after the topic grew go by the
    # new partition count, through the fast path again.
    p = offline_producer(1)
    p._topics.clear()
    p._cluster.update(_metadata(2), all_topics=True)

    async def send(keys: list[bytes]) -> list[RecordFuture]:
        return [await p.send("t", b"v", k) for k in keys]

    first = [b"a-%d" % i for i in range(40)]
    second = [b"b-%d" % i for i in range(40)]
    futs = asyncio.run(send(first))
    assert "t" in p._fast_topics
    p._cluster.update(_metadata(3), all_topics=True)
    assert "t" not in p._fast_topics
    futs += asyncio.run(send(second))
    assert "t" in p._fast_topics
    assert [f._batch.partition for f in futs] == \
        [_expected(k, 2) for k in first] + [_expected(k, 3) for k in second]


def test_buffer_memory_counts_staged_records_until_they_are_encoded() -> None:
    p = _producer(batch_size=100_000)
    acc = p._acc

    async def main() -> None:
        for i in range(100):
            await p.send("t", b"v" * 50, b"k%03d" % i)

    asyncio.run(main())
    assert acc.used == 100 * (4 + 50 + 21)  # reserved: key + value + RECORD_OVERHEAD
    acc.settle(p._topics["t"].stage)
    assert acc.used == sum(b.size_in_bytes - 61 for q in acc.queues.values() for b in q)
    assert acc.used < 100 * (4 + 50 + 21)


def test_abort_all_takes_staged_records_too() -> None:
    p = _producer()

    async def main() -> list[RecordFuture]:
        return [await p.send("t", b"v", b"k%d" % i) for i in range(10)]

    futs = asyncio.run(main())
    aborted = p._acc.abort_all()
    assert sum(b.record_count for b in aborted) == 10
    for b in aborted:
        b.complete(-1, -1, IllegalStateError("closed"))
    assert all(f.done() and isinstance(f.exception(), IllegalStateError) for f in futs)


def test_sync_send_counts_staged_records_and_stops_staging_once_closed() -> None:
    p = object.__new__(Producer)
    p._async = _producer(_threaded=True, batch_size=200)
    for i in range(7):
        p.send("t", b"v", b"k%d" % i)
    assert len(p) == 7
    acc = p._async._acc
    with acc.lock:
        acc.close_locked()  # what close() does, as another thread may be sending
    with pytest.raises(IllegalStateError, match="closed"):
        for i in range(50):  # until a record needs a new batch
            p.send("t", b"v", b"late-%d" % i)
    assert not p._async._topics["t"].stage.keys


def test_records_at_the_stage_size_limit_take_the_general_path() -> None:
    # A keyed record is staged only while key and value together stay under _fast_limit
    # (their length varints then fit the settle's tables); _stage itself checks, for the
    # sync send(), produce() and the async send() alike.
    p = object.__new__(Producer)
    p._async = a = _producer(_threaded=True, batch_size=1 << 20)
    a._fast_topics["t"] = a._topics["t"].stage.offer
    limit = a._fast_limit
    stage = a._topics["t"].stage
    under = p.send("t", b"v" * (limit - 11), b"k" * 10)
    assert type(under._head) is StagedChunk and len(stage.keys) == 1
    at = p.send("t", b"v" * (limit - 10), b"k" * 10)  # (settles the stage first)
    assert type(at._head) is not StagedChunk and not stage.keys
    p.produce("t", b"v" * (limit - 10), b"k" * 10)
    assert not stage.keys

    async def main() -> tuple[RecordFuture, RecordFuture]:
        b = _producer(batch_size=1 << 20)
        b._fast_topics["t"] = b._topics["t"].stage.offer
        return (await b.send("t", b"v" * (limit - 11), b"k" * 10),
                await b.send("t", b"v" * (limit - 10), b"k" * 10))

    staged, general = asyncio.run(main())
    # A staged record keeps its time.time() stamp (an async producer's future may point
    # at its batch once placed); a record taking the general path is stamped in ms.
    assert type(staged._timestamp) is float and type(general._timestamp) is int


@pytest.mark.parametrize(("count", "key"), [(30, b"key-%d"), (100, b"key-%03d")])
def test_sync_produce_callbacks_wait_with_the_stage_and_survive_a_raising_one(
        count: int, key: bytes) -> None:
    p = sync_over(_producer(_threaded=True))
    acc = p._async._acc
    got: list[tuple[int, Any, Any]] = []

    def callback(i: int) -> Any:
        def cb(err: Any, md: Any) -> None:
            got.append((i, err, md))
            if i == 10:
                raise ValueError("a callback failed")
        return cb

    keys = [key % i for i in range(count)]
    for i, k in enumerate(keys):
        p.produce("t", b"v%03d" % i, k, on_delivery=callback(i))
    stage = p._async._topics["t"].stage
    assert len(stage.keys) == count  # the callbacks did not settle anything
    acc.settle(stage)
    for q in acc.queues.values():
        for b in list(q):
            b.complete(100 * b.partition)
    with pytest.raises(ValueError, match="a callback failed"):
        p.poll(0)
    p.poll(0)
    assert sorted(i for i, _, _ in got) == list(range(count))  # each exactly once
    offsets: dict[int, list[int]] = {}
    for i, err, md in got:
        assert err is None
        assert md.partition == _expected(keys[i], 3)
        offsets.setdefault(md.partition, []).append(md.offset)
    for part, offs in offsets.items():  # in send order within each partition
        assert sorted(offs) == list(range(100 * part, 100 * part + len(offs)))
    by_key = {i: md for i, _, md in got}
    for part in offsets:
        sent = [i for i in range(count) if _expected(keys[i], 3) == part]
        assert [by_key[i].offset for i in sent] == sorted(offsets[part])


def test_send_batch_goes_after_the_topics_staged_records() -> None:
    p = _producer(partitions=1)

    async def main() -> None:
        for i in range(5):
            await p.send("t", b"staged-%d" % i, b"k%d" % i)
        batch = p.create_batch()
        batch.append(1_700_000_000_000, b"k", b"direct", None)
        await p.send_batch(batch, "t", partition=0)

    asyncio.run(main())
    assert [v for _, v in _sent_in(p, 0)] == [b"staged-%d" % i for i in range(5)] + [b"direct"]


def _batches_of(p: AsyncProducer, partitions: int) -> list[list[tuple[Any, ...]]]:
    return [[(b"".join(b.parts), b.count, b.size, b.base_timestamp, b.max_timestamp, b.sealed)
             for b in p._acc.queues[("t", part)]] for part in range(partitions)]


@pytest.mark.parametrize(("partitions", "batch_size", "key_len", "value_len"), [
    (1, 1000, 10, 100), (6, 16384, 10, 100), (7, 300, 0, 0), (3, 1_000_000, 4, 3),
    (5, 2000, 40, 70), (2, 100_000, 1, 1),
    # more partitions than a chunk has records for: empty and one-record partitions
    (300, 16384, 10, 100),
    # tiny records in one huge batch: offset deltas past the prefix tables (cut to 1000)
    (1, 1_000_000, 2, 2),
    # mixed sizes (_settle_mixed in bulk): lengths drawn from these ranges, across the
    # one-byte / two-byte varint edges of lengths and offset deltas
    (6, 16384, (10, 11), (40, 200)), (1, 1000, (0, 70), (0, 70)),
    (2, 300_000, (60, 70), (0, 3000)), (4, 1_000_000, (1, 3), (5, 9))])
def test_bulk_settling_writes_what_settling_record_by_record_writes(
        monkeypatch: pytest.MonkeyPatch, partitions: int, batch_size: int,
        key_len: int | tuple[int, int], value_len: int | tuple[int, int]) -> None:
    # A chunk of 32 records or more settles in bulk (_settle_uniform when its keys share a
    # length and its values share one, else _settle_mixed); with _BULK_MIN out of reach,
    # record by record (_settle_each). Both must give the same batches, byte for byte, the
    # same placements and the same buffer accounting, through the cases the bulk paths
    # hand back to the record-by-record one: batch boundaries, sealed batches, timestamp
    # jumps past one varint byte, a clock stepping back, offset deltas past the prefix
    # table; and a peer's decoder must read back what was sent.
    from kontrakt.clients.producer import _records, _stage
    from kontrakt.protocol.records._builder import frame_batch

    rnd = random.Random(partitions * 7919 + batch_size)
    n = 5000
    if partitions == 1 and batch_size == 1_000_000:
        monkeypatch.setattr(_records, "_PREFIX_COUNTS", 1000)

    def length(spec: int | tuple[int, int]) -> int:
        return spec if isinstance(spec, int) else rnd.randrange(*spec)

    keys = [rnd.randbytes(length(key_len)) for _ in range(n)]
    values = [rnd.randbytes(length(value_len)) for _ in range(n)]
    # The clock as send() reads it (time.time(), seconds) and the milliseconds the records
    # must carry: mostly a few records a millisecond, now and then a jump past what a
    # one-byte timestamp delta holds, and a few steps back (a chunk with one settles record
    # by record). Within a millisecond the seconds grow, from just past its start to just
    # before its end.
    stamps = []
    clock_values = []
    now = 1_700_000_000_000
    within = 0.001
    for _ in range(n):
        r = rnd.random()
        if r < 0.01:
            now += rnd.randrange(64, 400)
        elif r < 0.0115:
            now -= rnd.randrange(1, 40)
        elif r < 0.2:
            now += 1
        else:
            within = min(within + 0.05, 0.999)
        if r < 0.2:
            within = 0.001
        stamps.append(now)
        clock_values.append((now + within) / 1000)
    assert [int(t * 1000) for t in clock_values] == stamps
    seals = {rnd.randrange(n) for _ in range(30)}

    in_bulk = []
    def counting(bulk: Any) -> Any:
        def counted(self: Any, stage: Any, chunk: Any, partitions: list[int],
                    *rest: Any) -> Any:
            in_bulk.append(len(partitions))
            return bulk(self, stage, chunk, partitions, *rest)
        return counted

    for name in ("_settle_uniform", "_settle_mixed"):
        monkeypatch.setattr(_stage, name, counting(getattr(_stage, name)))

    def run(bulk: bool) -> tuple[Any, ...]:
        monkeypatch.setattr(_stage, "_BULK_MIN", 32 if bulk else 1 << 30)
        clock = iter(clock_values)
        monkeypatch.setattr(_stage, "_time", lambda: next(clock))
        p = _producer(partitions, batch_size=batch_size)
        stage = p._topics["t"].stage

        async def main() -> list[RecordFuture]:
            # An open batch in partition 0 before anything is staged.
            await p.send("t", b"x", b"y", partition=0, timestamp_ms=stamps[0])
            futs = []
            for i in range(n):
                futs.append(await p.send("t", values[i], keys[i]))
                if i in seals:  # as the sender would: settle, take a partition's batch
                    p._acc.settle(stage)
                    dq = p._acc.queues[("t", i % partitions)]
                    if dq:
                        dq[-1].sealed = True
            p._acc.settle(stage)
            return futs

        futs = asyncio.run(main())
        placements = [(f._batch.partition, f._index) for f in futs]
        assert [f.metadata().timestamp for f in futs] == stamps
        return _batches_of(p, partitions), placements, p._acc.used

    bulk = run(True)
    # Most records went in bulk, some record by record (the clock's steps back).
    assert n / 2 < sum(in_bulk) < n - 32, sum(in_bulk)
    each = run(False)
    assert bulk[0] == each[0]
    assert bulk[1] == each[1]
    assert bulk[2] == each[2]
    # And the batches hold what was sent: a peer's decoder reads every record back, in send
    # order in its key's partition, with its timestamp.
    from kafka.record.default_records import DefaultRecordBatch

    got: list[list[tuple[bytes | None, bytes | None, int]]] = []
    for part, batches in enumerate(bulk[0]):
        records = []
        for body, count, _, base, high, _ in batches:
            blob = frame_batch(body, count, base, high)
            records += [(r.key, r.value, r.timestamp) for r in DefaultRecordBatch(blob)]
        got.append(records[1:] if part == 0 else records)
    for part in range(partitions):
        assert got[part] == [(keys[i], values[i], stamps[i]) for i in range(n)
                             if _expected(keys[i], partitions) == part]


def test_prefix_tables_start_over_past_their_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    # Bulk settling keeps record prefixes per (key length, value length); a small budget
    # makes the tables start over often, and the bytes stay those of record-by-record
    # settling.
    from kontrakt.clients.producer import _records, _stage

    monkeypatch.setattr(_records, "_PREFIX_BUDGET", 40)
    monkeypatch.setattr(_stage, "_time", lambda: 1_700_000_000.0005)

    def run(bulk: bool) -> tuple[Any, int]:
        monkeypatch.setattr(_stage, "_BULK_MIN", 32 if bulk else 1 << 30)
        p = _producer(4, batch_size=20_000)

        async def main() -> None:
            for shape in range(12):  # more shapes than the tables keep, too
                for i in range(200):
                    await p.send("t", b"v" * (10 + shape), b"%08d" % i)
                p._acc.settle(p._topics["t"].stage)

        asyncio.run(main())
        return _batches_of(p, 4), len(p._acc.prefixes)

    (bulk, shapes), (each, _) = run(True), run(False)
    assert bulk == each
    assert shapes == 1  # the last settle found the budget spent and started over


def test_prefix_tables_grown_in_pieces_hold_each_records_own_prefix() -> None:
    # The tables are grown a range of offset deltas at a time, by maps; each entry must be
    # the record's bytes before its key, after the header count of the record before, and
    # the running sizes must count the prefixes alone -- across the offset delta where the
    # varint takes a second byte, and however the growth is cut into pieces.
    from kontrakt.clients.producer._records import _PREFIX_COUNTS, _grow_prefixes
    from kontrakt.protocol.records._model import encode_varint

    rng = random.Random(7)
    for _ in range(60):
        delta = rng.randrange(64)
        kb = encode_varint(rng.randrange(300))
        rest = rng.randrange(1, 5000)
        cuts = rng.choice([[300], [63, 64, 65, 300], [64, 300], [65, 300],
                           sorted({rng.randrange(1, 300) for _ in range(3)} | {300})])
        prefixes: list[bytes] = []
        sizes = [0]
        for upto in cuts:
            _grow_prefixes(prefixes, sizes, delta, upto, kb, rest)
        total = 0
        for count, entry in enumerate(prefixes):
            ob = encode_varint(count)
            body = 1 + len(encode_varint(delta)) + len(ob) + rest  # attributes .. headers
            prefix = encode_varint(body) + b"\x00" + encode_varint(delta) + ob + kb
            assert entry == b"\x00" + prefix, (delta, count)
            total += len(prefix)
            assert sizes[count + 1] == total, (delta, count)
        assert len(prefixes) == cuts[-1] < _PREFIX_COUNTS


@pytest.mark.parametrize("seed", range(12))
def test_produce_callbacks_report_each_records_place_in_its_batch(seed: int) -> None:
    # A random mix on one topic of produce() with callbacks (keyed and unkeyed: staged;
    # with headers or a partition: appended alone), produce() without one and send(), in
    # chunks below and above the bulk settle's minimum; batches then succeed (some with
    # a LogAppendTime) or fail, and some callbacks raise. Each callback must run exactly
    # once, with the offset, timestamp and sizes of its record as the batch holds it.
    rng = random.Random(seed)
    partitions = rng.choice([1, 3, 6])
    p = sync_over(_producer(partitions, _threaded=True,
                            batch_size=rng.choice([300, 2000, 16384])))
    acc = p._async._acc
    got: dict[bytes, list[tuple[Any, Any]]] = {}
    raising: set[bytes] = set()
    with_callback: set[bytes] = set()

    def callback(value: bytes) -> Any:
        def cb(err: Any, md: Any) -> None:
            got.setdefault(value, []).append((err, md))
            if value in raising:
                raise ValueError(value)
        return cb

    count = rng.choice([5, 31, 40, 300, 2500])
    for i in range(count):
        value = b"r%05d" % i + b"v" * rng.choice([0, 5, 90])
        key = b"k%d" % rng.randrange(50) if rng.random() < 0.8 else None
        kind = rng.random()
        if kind < 0.15:
            p.send("t", value, key)
            continue
        if kind < 0.25:
            p.produce("t", value, key)
            continue
        with_callback.add(value)
        if rng.random() < 0.05:
            raising.add(value)
        if kind < 0.3:
            p.produce("t", value, key, headers=[("h", b"x")], on_delivery=callback(value))
        elif kind < 0.35:
            p.produce("t", value, key, partition=rng.randrange(partitions),
                      on_delivery=callback(value))
        else:
            p.produce("t", value, key, on_delivery=callback(value))
    with acc.lock:
        acc.settle_all_locked()
    # Where each record is, read off the batches' bytes; then each batch's outcome.
    placed: dict[bytes, tuple[int, int, int, int, int]] = {}
    for part in range(partitions):
        base = 0
        for whole in list(acc.queues.get(("t", part), ())):
            blob = whole.encode(1, 0, False)
            # Some batches are split (as when a broker refuses one as too large): each
            # callback must go with its record into its part.
            parts = acc.split_and_reenqueue(whole) if rng.random() < 0.15 else None
            for b in parts or [whole]:
                base = _complete(b, blob if parts is None else b.encode(1, 0, False), base,
                                 rng, placed, part)
    for _ in range(len(raising) + 1):
        try:
            p.poll(0)
            break
        except ValueError:
            pass
    assert p.poll(0) == 0
    assert set(got) == with_callback
    for value, calls in got.items():
        assert len(calls) == 1, value
        err, md = calls[0]
        part, offset, ts, ksize, vsize = placed[value]
        assert (md.topic, md.partition, md.offset, md.timestamp, md.serialized_key_size,
                md.serialized_value_size) == ("t", part, offset, ts, ksize, vsize), value
        assert (err is None) == (offset >= 0)


def _complete(b: Any, blob: bytes, base: int, rng: random.Random,
              placed: dict[bytes, tuple[int, int, int, int, int]], part: int) -> int:
    """Complete batch ``b`` (bytes ``blob``) at ``base``: failed, with a LogAppendTime, or
    plainly, at random; note where each of its records is (``placed``: value -> partition,
    offset, timestamp, key size, value size). Returns the next batch's base offset."""
    records = list(RecordBatch.from_bytes(blob).records())
    for r in records:
        assert r.value is not None
        placed[r.value] = (part, base + r.offset, r.timestamp,
                           -1 if r.key is None else len(r.key), len(r.value))
    outcome = rng.random()
    if outcome < 0.1:
        b.complete(-1, -1, KafkaError("batch failed"))
        for r in records:
            assert r.value is not None
            placed[r.value] = (part, -1, *placed[r.value][2:])
    elif outcome < 0.2:
        for r in records:
            assert r.value is not None
            placed[r.value] = (*placed[r.value][:2], 1_234_567, *placed[r.value][3:])
        b.complete(base, 1_234_567)
    else:
        b.complete(base)
    return base + len(records) + 7


@pytest.mark.parametrize("seed", range(8))
def test_result_of_each_staged_record_is_its_place_in_its_batch(seed: int) -> None:
    # Futures of staged records (keyed and unkeyed, sync and async producers), read once
    # every batch is resolved: result() -- twice, the first read of a chunk listing its
    # placements -- gives the record's offset, timestamp and sizes as its batch holds
    # them, or raises its batch's error.
    rng = random.Random(seed)
    partitions = rng.choice([1, 3, 6])
    threaded = seed % 2 == 0
    core = _producer(partitions, _threaded=threaded, batch_size=rng.choice([300, 2000, 16384]))
    futs: dict[bytes, RecordFuture] = {}

    async def send_all() -> None:
        for i in range(rng.choice([5, 31, 40, 300, 2500])):
            value = b"r%05d" % i + b"v" * rng.choice([0, 5, 90])
            key = b"k%d" % rng.randrange(50) if rng.random() < 0.7 else None
            futs[value] = (sync_over(core).send("t", value, key) if threaded
                           else await core.send("t", value, key))

    asyncio.run(send_all())
    acc = core._acc
    with acc.lock:
        acc.settle_all_locked()
    placed: dict[bytes, Any] = {}
    for part in range(partitions):
        base = 0
        for b in list(acc.queues.get(("t", part), ())):
            records = list(RecordBatch.from_bytes(b.encode(1, 0, False)).records())
            outcome = rng.random()
            append_time = 1_234_567 if outcome > 0.85 else -1
            err = KafkaError("batch failed") if outcome < 0.1 else None
            for r in records:
                assert r.value is not None
                placed[r.value] = err or (
                    "t", part, base + r.offset, append_time if append_time >= 0 else r.timestamp,
                    -1 if r.key is None else len(r.key), len(r.value))
            if err is not None:
                b.complete(-1, -1, err)
            else:
                b.complete(base, append_time)
            base += len(records) + 3
    order = list(futs)
    rng.shuffle(order)
    for _ in range(2):
        for value in order:
            expected = placed[value]
            if isinstance(expected, KafkaError):
                with pytest.raises(KafkaError) as info:
                    futs[value].result()
                assert info.value is expected
            else:
                md = futs[value].result()
                assert (md.topic, md.partition, md.offset, md.timestamp,
                        md.serialized_key_size, md.serialized_value_size) == expected, value
