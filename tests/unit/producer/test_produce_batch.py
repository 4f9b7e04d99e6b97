"""produce_batch(): the records a list of messages gives are the ones the same sends give.

Run offline (``offline.py``): the records stay in their batches and stages, where they are
compared with what a twin producer's send()/produce() calls made of the same messages.
"""

from __future__ import annotations

import asyncio
import random
import time
import warnings
from typing import Any

import pytest

with warnings.catch_warnings():
    # kafka-python's package import loads its JSON schemas with a deprecated importlib API.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.partitioner.default import murmur2 as kafka_murmur2

from kontrakt.clients.producer import AsyncProducer, _batch_api
from kontrakt.clients.producer._stage import KeyedStage
from kontrakt.errors import (
    IllegalStateError,
    InvalidMessageError,
    KafkaTimeoutError,
    RecordTooLargeError,
)
from kontrakt.protocol.records import RecordBatch
from tests.unit.producer.offline import offline_producer, sync_over

Records = dict[int, list[tuple[Any, ...]]]


def _records(p: AsyncProducer, partitions: int) -> Records:
    """Each partition's records (key, value, headers, timestamp if given) in order, every
    stage settled first."""
    for stage in p._acc.stages.values():
        p._acc.settle(stage)
    out: Records = {}
    for part in range(partitions):
        got: list[tuple[Any, ...]] = []
        for b in p._acc.queues.get(("t", part), ()):
            for r in RecordBatch.from_bytes(b.encode(1, 0, False)).records():
                ts = r.timestamp if r.timestamp < 1_000_000_000_000 else None
                got.append((r.key, r.value, tuple(r.headers), ts))
        out[part] = got
    return out


def _sent(messages: list[dict[str, Any]], partitions: int, seed: int, **kw: Any) -> Records:
    """What send() of each message, in order, puts into a fresh producer's partitions."""
    random.seed(seed)  # the sticky partitioner's choices
    p = offline_producer(partitions, **kw)

    async def main() -> None:
        for m in messages:
            part = m.get("partition")
            await p.send("t", m.get("value"), m.get("key"),
                         partition=None if part is None or part < 0 else part,
                         timestamp_ms=m.get("timestamp") or None, headers=m.get("headers"))

    asyncio.run(main())
    return _records(p, partitions)


def _batched(messages: list[dict[str, Any]], partitions: int, seed: int,
             **kw: Any) -> tuple[int, Records]:
    random.seed(seed)
    p = offline_producer(partitions, **kw)
    n = asyncio.run(p.produce_batch("t", messages))
    return n, _records(p, partitions)


def _keyed(n: int, sizes: bool = False) -> list[dict[str, Any]]:
    rnd = random.Random(n)
    return [{"key": (b"key-%d" if sizes else b"key-%04d") % rnd.randrange(10_000),
             "value": b"v" * (rnd.randrange(1, 200) if sizes else 40)} for _ in range(n)]


def _mixed() -> list[dict[str, Any]]:
    """Bulk runs broken by every kind of message the bulk path does not take."""
    out: list[dict[str, Any]] = []
    for i in range(1500):
        j = i % 97
        if j == 3:
            out.append({"key": b"k%d" % i, "value": None})  # a tombstone
        elif j == 7:
            out.append({"value": b"h%d" % i, "key": b"k", "headers": [("h", b"x")]})
        elif j == 11:
            out.append({"value": b"p%d" % i, "partition": i % 3})
        elif j == 13:
            out.append({"value": b"t%d" % i, "key": b"k%d" % i, "timestamp": 1000 + i})
        elif j == 17:
            out.append({"value": bytearray(b"ba%d" % i), "key": memoryview(b"mk")})
        elif 20 <= j < 40:
            out.append({"value": b"u%d" % i})  # a run without keys, between keyed ones
        else:
            out.append({"value": b"v%d" % i, "key": b"k%d" % (i % 31)})
    return out


@pytest.mark.parametrize(("case", "partitions"), [
    ("keyed", 3), ("keyed-sizes", 5), ("keyless", 4), ("mixed", 3), ("one-message", 3)])
def test_a_batch_puts_each_record_where_the_same_sends_put_it(case: str,
                                                              partitions: int) -> None:
    """Partitions (murmur2 of the key, or the sticky one), order within each partition,
    headers and explicit timestamps: all as send() of each message in turn gives them."""
    messages = {
        "keyed": lambda: _keyed(6000),
        "keyed-sizes": lambda: _keyed(3000, sizes=True),
        "keyless": lambda: [{"value": b"x%d" % i} for i in range(5000)],
        "mixed": _mixed,
        "one-message": lambda: [{"key": b"only", "value": b"one"}],
    }[case]()
    kw = {"batch_size": 16_384}
    n, got = _batched([dict(m) for m in messages], partitions, 7, **kw)
    assert n == len(messages)
    assert got == _sent(messages, partitions, 7, **kw)
    assert sum(map(len, got.values())) == len(messages)


def test_a_batch_stages_a_chunk_at_a_time_with_one_clock_read_each(
        monkeypatch: pytest.MonkeyPatch) -> None:
    p = offline_producer(3, batch_size=1 << 20, buffer_memory=1 << 26)
    reads = 0
    real = _batch_api._time

    def counted() -> float:
        nonlocal reads
        reads += 1
        return real()

    monkeypatch.setattr(_batch_api, "_time", counted)
    settled: list[int] = []
    settle = p._acc.settle

    def spy(stage: KeyedStage) -> None:
        settled.append(len(stage.keys))
        settle(stage)

    monkeypatch.setattr(p._acc, "settle", spy)
    messages = _keyed(10_000)
    assert asyncio.run(p.produce_batch("t", messages)) == 10_000
    limit = KeyedStage.limit_for(len(b"key-0000") + 40 + 21)
    assert reads <= 10_000 // limit + 2
    # Each full chunk settles at the size offer() settles a stage at.
    assert settled and set(settled[:-1]) <= {limit + 1}
    assert sum(map(len, _records(p, 3).values())) == 10_000


@pytest.mark.parametrize(("messages", "index", "match"), [
    ({"value": b"x"}, -1, "must be a list"),
    ([{"value": b"a"}, (b"v", b"k")], 1, "must be a dict"),
    ([{"value": b"a"}, {"value": b"b", "vlaue": b"c"}], 1, "unknown field.*vlaue"),
    ([{"value": b"a", "key": b"k"}, {"value": "text"}], 1, "'value' must be bytes"),
    ([{"value": b"a"}, {"value": b"b", "key": 5}], 1, "'key' must be bytes"),
    ([{"value": b"a"}, {"value": b"b", "partition": "1"}], 1, "'partition'"),
    ([{"value": b"a"}, {"value": b"b", "timestamp": 1.5}], 1, "'timestamp'"),
    ([{"value": b"a"}, {"value": b"b", "callback": 3}], 1, "'callback'"),
    ([{"value": b"a"}, {"value": b"b", "headers": [("h", "text")]}], 1, "'headers'"),
])
def test_a_malformed_message_raises_before_anything_is_queued(messages: Any, index: int,
                                                              match: str) -> None:
    p = offline_producer(3)

    async def main() -> None:
        await p.send("t", b"before", b"k")  # staged: must survive the failed call
        with pytest.raises(InvalidMessageError, match=match) as info:
            await p.produce_batch("t", messages)
        assert info.value.index == index
        assert isinstance(info.value, TypeError)  # what confluent-kafka raises

    asyncio.run(main())
    got = [r for rs in _records(p, 3).values() for r in rs]
    assert got == [(b"k", b"before", (), None)]


@pytest.mark.parametrize("form", ["async", "sync"])
def test_a_full_buffer_waits_max_block_ms_and_marks_what_it_could_not_queue(
        form: str) -> None:
    """As send() would, the call waits for room up to max.block.ms (nothing drains the
    offline producer's buffer); the messages queued before are kept, in order, and the
    count says how many; every message from the first that found no room gets '_error'."""
    p = offline_producer(3, buffer_memory=20_000, batch_size=4096, max_block_ms=200,
                         _threaded=form == "sync")
    messages = [{"key": b"k%d" % i, "value": b"v" * 50} for i in range(2000)]
    t0 = time.monotonic()
    if form == "sync":
        n = sync_over(p).produce_batch("t", messages)
    else:
        n = asyncio.run(p.produce_batch("t", messages))
    assert 0.15 < time.monotonic() - t0 < 5
    assert 0 < n < 2000
    assert p._acc.used <= 20_000
    assert all("_error" not in m for m in messages[:n])
    assert all(isinstance(m["_error"], KafkaTimeoutError) for m in messages[n:])
    got = _records(p, 3)
    assert sum(map(len, got.values())) == n
    expected = _sent(messages[:n], 3, 0, buffer_memory=1 << 25, batch_size=4096)
    assert {part: [r[:2] for r in rs] for part, rs in got.items()} == \
        {part: [r[:2] for r in rs] for part, rs in expected.items()}


def test_a_record_too_large_alone_gets_an_error_and_the_others_go() -> None:
    p = offline_producer(3, message_max_bytes=5000)
    messages = [{"key": b"a", "value": b"1"}, {"key": b"b", "value": b"x" * 10_000},
                {"key": b"c", "value": b"3"}]
    assert asyncio.run(p.produce_batch("t", messages)) == 2
    assert isinstance(messages[1]["_error"], RecordTooLargeError)
    assert "_error" not in messages[0] and "_error" not in messages[2]
    got = sorted(r[:2] for rs in _records(p, 3).values() for r in rs)
    assert got == [(b"a", b"1"), (b"c", b"3")]


def test_dict_subclasses_are_messages_too() -> None:
    """confluent-kafka takes any dict (PyDict_Check); so does produce_batch."""
    from collections import OrderedDict

    p = offline_producer(3)
    messages = [{"key": b"a", "value": b"1"}, OrderedDict(key=b"b", value=b"2")]
    assert asyncio.run(p.produce_batch("t", messages)) == 2
    assert sorted(r[:2] for rs in _records(p, 3).values() for r in rs) == \
        [(b"a", b"1"), (b"b", b"2")]


def test_a_message_queued_on_a_retry_loses_its_old_error() -> None:
    p = offline_producer(3)
    messages = [{"key": b"a", "value": b"1", "_error": KafkaTimeoutError("earlier")}]
    assert asyncio.run(p.produce_batch("t", messages)) == 1
    assert messages == [{"key": b"a", "value": b"1"}]


def test_a_closed_producer_raises_and_queues_nothing() -> None:
    p = offline_producer(3)
    p._closed = True
    p._stop_fast_paths()
    messages = [{"key": b"a", "value": b"1"}]
    with pytest.raises(IllegalStateError, match="closed"):
        asyncio.run(p.produce_batch("t", messages))
    assert "_error" not in messages[0]


def test_async_callbacks_run_once_each_with_their_records_metadata() -> None:
    p = offline_producer(3)
    seen: list[tuple[Any, Any]] = []
    own: list[Any] = []
    messages: list[dict[str, Any]] = [{"key": b"k%d" % i, "value": b"v"} for i in range(100)]
    messages[50]["callback"] = lambda err, md: own.append((err, md))

    async def main() -> None:
        assert await p.produce_batch("t", messages,
                                     on_delivery=lambda e, md: seen.append((e, md))) == 100
        for stage in p._acc.stages.values():
            p._acc.settle(stage)
        for q in list(p._acc.queues.values()):
            for i, b in enumerate(q):
                b.complete(1000 * (i + 1))
        await asyncio.sleep(0)

    asyncio.run(main())
    assert len(seen) == 99 and len(own) == 1
    assert all(err is None for err, _ in seen + own)
    mds = [md for _, md in seen + own]
    assert len({(md.partition, md.offset) for md in mds}) == 100
    assert own[0][1].partition == _partition_of(b"k50", 3)


def _partition_of(key: bytes, n: int) -> int:
    return int((kafka_murmur2(key) & 0x7FFFFFFF) % n)



def test_sync_produce_batch_callbacks_run_from_poll() -> None:
    p = sync_over(offline_producer(3, _threaded=True, batch_size=2000))
    seen: list[Any] = []
    # Value i + 1 bytes long: each callback's metadata names its message.
    messages = [{"key": b"k%d" % i, "value": b"v" * (i + 1)} for i in range(300)]
    assert p.produce_batch("t", messages, on_delivery=lambda e, md: seen.append((e, md))) \
        == 300
    acc = p._async._acc
    for stage in acc.stages.values():
        acc.settle(stage)
    for q in list(acc.queues.values()):
        for i, b in enumerate(q):
            b.complete(10_000 * i)
    assert not seen  # only poll() runs them, on the caller's thread
    assert p.poll(0) == 300
    assert sorted(md.serialized_value_size for _, md in seen) == list(range(1, 301))
    for err, md in seen:
        assert err is None
        assert md.partition == _partition_of(b"k%d" % (md.serialized_value_size - 1), 3)
    assert len({(md.partition, md.offset) for _, md in seen}) == 300
