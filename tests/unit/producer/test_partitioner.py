"""Partitioners: murmur2 parity with kafka-python (oracle), sticky, round-robin, callables."""

from __future__ import annotations

import itertools
import random
import warnings
from collections import Counter
from typing import Any

import pytest

with warnings.catch_warnings():
    # kafka-python's package import loads its JSON schemas with a deprecated importlib API.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.partitioner.default import DefaultPartitioner as KafkaPythonPartitioner
    from kafka.partitioner.default import murmur2 as kp_murmur2

from kontrakt.clients.producer import (
    AsyncProducer,
    DefaultPartitioner,
    RoundRobinPartitioner,
    murmur2,
    murmur2_partition,
)
from kontrakt.clients.producer._partitioner import HASH_BY_LENGTH, key_hash
from kontrakt.clients.producer._producer import _TopicParts

PARTITION_COUNTS = [1, 2, 3, 6, 7, 12, 50, 1000]


def _random_keys(n: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(rng.choice([0, 1, 2, 3, 4, 5, 8, 10, 13, 16, 36, 63, 64, 65, 200]))
            for _ in range(n)]


class _OracleCluster:
    """The three calls kafka-python's DefaultPartitioner makes on its cluster metadata."""

    def __init__(self, count: int) -> None:
        self.count = count

    def topics(self) -> set[str]:
        return {"t"}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return set(range(self.count))

    def available_partitions_for_topic(self, topic: str) -> set[int]:
        return set(range(self.count))


def _producer(partitioner: Any = "default") -> tuple[AsyncProducer, _TopicParts]:
    p = AsyncProducer(bootstrap_servers="127.0.0.1:9", partitioner=partitioner)
    return p, p._topic_parts("t") or _fake_topic(p, 6)


def _fake_topic(p: AsyncProducer, n: int, available: list[int] | None = None) -> _TopicParts:
    info = _TopicParts.of(p._acc, "t", list(range(n)),
                          list(range(n)) if available is None else available, p._cluster.version)
    p._topics["t"] = info
    # Drive the record path without a broker: no sender runs, batches just accumulate.
    p._ok = True
    return info


def test_murmur2_equals_kafka_python_on_10000_random_keys() -> None:
    keys = _random_keys(10_000, 1)
    for k in keys:
        ours = murmur2(k)
        assert -(2**31) <= ours < 2**31
        assert ours & 0xFFFFFFFF == kp_murmur2(k) & 0xFFFFFFFF, k
        assert key_hash(k) == ours & 0xFFFFFFFF
    # Every generated per-length function is exercised, including the generic path.
    assert {len(k) for k in keys} >= {0, 1, 2, 3, 63, 64, 200}
    assert len(HASH_BY_LENGTH) == 64


@pytest.mark.parametrize("count", PARTITION_COUNTS)
def test_default_partition_equals_kafka_python(count: int) -> None:
    oracle = KafkaPythonPartitioner()
    all_parts = list(range(count))
    p, _ = _producer()
    info = _fake_topic(p, count)
    ours_default = DefaultPartitioner()
    for k in _random_keys(10_000, count):
        expected = oracle.partition("t", k, k, b"v", b"v", _OracleCluster(count))
        assert murmur2_partition(k, count) == expected
        assert ours_default(k, all_parts, all_parts) == expected
        # The producer's own (inlined) choice, through its record path.
        fut = p._append("t", b"v", k, None, 0, None, None)
        assert fut._batch.partition == expected, k
    assert info.count == count


def test_known_java_vectors() -> None:
    # Values of Utils.murmur2 / Utils.toPositive from the Java client's tests.
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(b"abc") == 479470107


def test_sticky_null_keys_stay_until_the_batch_is_full_then_move() -> None:
    p = AsyncProducer(bootstrap_servers="127.0.0.1:9", batch_size=2000)
    _fake_topic(p, 6)
    parts = [p._append("t", b"x" * 100, None, None, 0, None, None)._batch.partition
             for _ in range(200)]
    runs = [parts[0]]
    for a, b in itertools.pairwise(parts):
        if a != b:
            runs.append(b)
    # ~15 records fill a 2000-byte batch: one partition per batch, then a different one.
    assert 8 <= len(runs) <= 30
    assert all(a != b for a, b in itertools.pairwise(runs))
    counts = Counter(parts)
    assert max(counts.values()) < 200
    # Each batch holds records of one sticky run only (the switch happens on a new batch).
    for q in p._acc.queues.values():
        for batch in q:
            assert batch.count <= 20


def test_sticky_prefers_available_partitions() -> None:
    p = AsyncProducer(bootstrap_servers="127.0.0.1:9", batch_size=500)
    _fake_topic(p, 6, available=[2, 4])
    parts = {p._append("t", b"x" * 100, None, None, 0, None, None)._batch.partition
             for _ in range(100)}
    assert parts == {2, 4}


def test_round_robin_cycles_available_partitions() -> None:
    p = AsyncProducer(bootstrap_servers="127.0.0.1:9", partitioner="round_robin")
    _fake_topic(p, 4, available=[0, 1, 3])
    parts = [p._append("t", b"v", b"same-key", None, 0, None, None)._batch.partition
             for _ in range(9)]
    assert parts == [0, 1, 3] * 3
    rr = RoundRobinPartitioner()
    assert [rr(None, [0, 1, 2], [0, 1, 2]) for _ in range(4)] == [0, 1, 2, 0]
    assert [rr(b"k", [0, 1, 2], []) for _ in range(2)] == [1, 2]


def test_user_callable_gets_key_all_and_available() -> None:
    seen: list[tuple[bytes | None, list[int], list[int]]] = []

    def pick(key: bytes | None, all_parts: list[int], available: list[int]) -> int:
        seen.append((key, list(all_parts), list(available)))
        return all_parts[-1]

    p = AsyncProducer(bootstrap_servers="127.0.0.1:9", partitioner=pick)
    _fake_topic(p, 3, available=[0, 2])
    assert p._append("t", b"v", b"k", None, 0, None, None)._batch.partition == 2
    assert p._append("t", b"v", None, None, 0, None, None)._batch.partition == 2
    assert seen == [(b"k", [0, 1, 2], [0, 2]), (None, [0, 1, 2], [0, 2])]


def test_user_callable_returning_a_bad_partition_is_an_error() -> None:
    from kontrakt.errors import KafkaError

    p = AsyncProducer(bootstrap_servers="127.0.0.1:9", partitioner=lambda k, a, v: 99)
    _fake_topic(p, 3)
    with pytest.raises(KafkaError, match="partition 99"):
        p._append("t", b"v", b"k", None, 0, None, None)


def test_explicit_partition_wins() -> None:
    p, _ = _producer()
    _fake_topic(p, 6)
    assert p._append("t", b"v", b"k", 4, 0, None, None)._batch.partition == 4
    with pytest.raises(TypeError, match="partition"):
        p._append("t", b"v", b"k", -1, 0, None, None)
