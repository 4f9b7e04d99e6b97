"""The cluster validated by the peers: confluent-kafka, kafka-python and aiokafka produce
(idempotent where they can) and consume against it, commit with metadata, and join one
mixed group together with a Kontrakt consumer; Kontrakt reads and checks what they wrote."""

from __future__ import annotations

import asyncio
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from kontrakt import Consumer, Producer
from kontrakt._types import TopicPartition as TP
from kontrakt.testing import Cluster

with warnings.catch_warnings():
    # kafka-python's import loads JSON schemas with a deprecated importlib API.
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

import aiokafka
import confluent_kafka

pytestmark = pytest.mark.interop

N = 50  # records per producer


def _values(tag: str) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(N)]


def _produce_confluent(bs: str, topic: str) -> None:
    p = confluent_kafka.Producer({"bootstrap.servers": bs, "enable.idempotence": True,
                                  "linger.ms": 20, "log_level": 3})
    for v in _values("confluent"):
        p.produce(topic, v, key=v)
    assert p.flush(20) == 0


def _produce_kafka_python(bs: str, topic: str) -> None:
    p = kafka.KafkaProducer(bootstrap_servers=bs, linger_ms=20)
    for v in _values("kafka-python"):
        p.send(topic, v, key=v)
    p.flush(20)
    p.close(5)


def _produce_aiokafka(bs: str, topic: str) -> None:
    async def main() -> None:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=bs, enable_idempotence=True,
                                      linger_ms=20)
        await p.start()
        try:
            batch = [await p.send(topic, v, key=v) for v in _values("aiokafka")]
            await asyncio.gather(*batch)
        finally:
            await p.stop()

    asyncio.run(main())


def _consume_all(bs: str, topic: str, n: int, **config: Any) -> list[Any]:
    out: list[Any] = []
    with Consumer(bootstrap_servers=bs, auto_offset_reset="earliest", **config) as c:
        c.subscribe([topic]) if "group_id" in config else c.assign(
            [TP(topic, p) for p in range(3)])
        deadline = time.monotonic() + 20
        while len(out) < n and time.monotonic() < deadline:
            r = c.poll(0.5)
            if r is not None:
                out.append(r)
    return out


def test_peer_producers_write_what_kontrakt_reads(cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic, partitions=3)
    bs = cluster.bootstrap_servers
    for produce in (_produce_confluent, _produce_kafka_python, _produce_aiokafka):
        produce(bs, topic)
    records = _consume_all(bs, topic, 3 * N)
    got = sorted(r.value for r in records)
    assert got == sorted(_values("confluent") + _values("kafka-python") + _values("aiokafka"))
    # Every partition's records have consecutive offsets 0..end-1 and end offsets agree.
    ends = cluster.end_offsets(topic)
    for p in range(3):
        offsets = sorted(r.offset for r in records if r.partition == p)
        assert offsets == list(range(ends[p]))
    c = confluent_kafka.Consumer({"bootstrap.servers": bs, "group.id": "wm", "log_level": 3})
    try:
        assert [c.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), 10)
                for p in range(3)] == [(0, e) for e in ends]
    finally:
        c.close()


def test_peer_consumers_read_kontrakt_records_and_commit_metadata(cluster: Cluster,
                                                                   topic: str) -> None:
    cluster.create_topic(topic, partitions=1)
    bs = cluster.bootstrap_servers
    with Producer(bootstrap_servers=bs, linger_ms=20) as p:
        for v in _values("k"):
            p.send(topic, v, partition=0)
        p.flush(10)
    tp = confluent_kafka.TopicPartition(topic, 0)

    c = confluent_kafka.Consumer({"bootstrap.servers": bs, "group.id": "g-ck",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                  "log_level": 3})
    try:
        c.subscribe([topic])
        seen = []
        deadline = time.monotonic() + 20
        while len(seen) < N and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                seen.append(m.value())
        assert seen == _values("k")
        c.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, N, metadata="ck-meta")],
                 asynchronous=False)
        committed = c.committed([tp], 10)[0]
        assert (committed.offset, committed.metadata) == (N, "ck-meta")
    finally:
        c.close()

    kc = kafka.KafkaConsumer(topic, bootstrap_servers=bs, group_id="g-kp",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        seen = []
        deadline = time.monotonic() + 20
        while len(seen) < N and time.monotonic() < deadline:
            for recs in kc.poll(500).values():
                seen.extend(r.value for r in recs)
        assert seen == _values("k")
        ktp = kafka.TopicPartition(topic, 0)
        kc.commit({ktp: kafka.OffsetAndMetadata(20, "kp-meta", -1)})
        assert kc.committed(ktp, metadata=True).metadata == "kp-meta"
    finally:
        kc.close()

    async def aio() -> list[bytes]:
        ac = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=bs, group_id="g-aio",
                                       auto_offset_reset="earliest", enable_auto_commit=False)
        await ac.start()
        try:
            out: list[bytes] = []
            deadline = time.monotonic() + 20
            while len(out) < N and time.monotonic() < deadline:
                for recs in (await ac.getmany(timeout_ms=500)).values():
                    out.extend(r.value for r in recs)
            await ac.commit({aiokafka.TopicPartition(topic, 0): (30, "aio-meta")})
            return out
        finally:
            await ac.stop()

    assert asyncio.run(aio()) == _values("k")
    # Kontrakt reads back what each peer committed, metadata included. confluent-kafka sends
    # its metadata with the C string's NUL terminator (and strips it when reading back); a
    # broker stores the bytes it was sent, so Kontrakt sees the NUL.
    for group, offset, meta in (("g-ck", N, "ck-meta\x00"), ("g-kp", 20, "kp-meta"),
                                ("g-aio", 30, "aio-meta")):
        with Consumer(bootstrap_servers=bs, group_id=group) as kcons:
            got = kcons.committed([TP(topic, 0)])[TP(topic, 0)]
            assert got is not None and (got.offset, got.metadata) == (offset, meta)


def test_mixed_group_of_four_clients_splits_partitions(cluster: Cluster, topic: str) -> None:
    """One group, four members from four clients, roundrobin (the protocol all four share):
    after the rebalances settle every partition has exactly one owner and every record was
    read."""
    cluster.create_topic(topic, partitions=8)
    bs = cluster.bootstrap_servers
    with Producer(bootstrap_servers=bs, linger_ms=20) as p:
        for i in range(80):
            p.send(topic, b"%d" % i, partition=i % 8)
        p.flush(10)
    group = "mixed"
    stop = threading.Event()
    seen: set[tuple[int, int]] = set()
    owned: dict[str, set[int]] = {}
    lock = threading.Lock()
    errors: list[BaseException] = []

    def record(name: str, parts: set[int], batch: list[tuple[int, int]]) -> None:
        with lock:
            owned[name] = parts
            seen.update(batch)

    def run_kontrakt() -> None:
        with Consumer(bootstrap_servers=bs, group_id=group, auto_offset_reset="earliest",
                      partition_assignment_strategy="roundrobin",
                      session_timeout_ms=6000, heartbeat_interval_ms=200) as c:
            c.subscribe([topic])
            while not stop.is_set():
                r = c.poll(0.1)
                record("kontrakt", {tp.partition for tp in c.assignment()},
                       [(r.partition, r.offset)] if r else [])

    def run_confluent() -> None:
        c = confluent_kafka.Consumer({
            "bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "roundrobin", "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 200, "log_level": 3})
        try:
            c.subscribe([topic])
            while not stop.is_set():
                m = c.poll(0.1)
                batch = [(m.partition(), m.offset())] if m is not None and not m.error() else []
                record("confluent", {tp.partition for tp in c.assignment()}, batch)
        finally:
            c.close()

    def run_kafka_python() -> None:
        c = kafka.KafkaConsumer(topic, bootstrap_servers=bs, group_id=group,
                                auto_offset_reset="earliest", session_timeout_ms=6000,
                                heartbeat_interval_ms=200,
                                partition_assignment_strategy=[RoundRobinPartitionAssignor])
        try:
            while not stop.is_set():
                got = c.poll(100)
                record("kafka-python", {tp.partition for tp in c.assignment()},
                       [(r.partition, r.offset) for recs in got.values() for r in recs])
        finally:
            c.close()

    def run_aiokafka() -> None:
        async def main() -> None:
            c = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=bs, group_id=group,
                                          auto_offset_reset="earliest",
                                          session_timeout_ms=6000, heartbeat_interval_ms=200)
            await c.start()
            try:
                while not stop.is_set():
                    got = await c.getmany(timeout_ms=100)
                    record("aiokafka", {tp.partition for tp in c.assignment()},
                           [(r.partition, r.offset) for recs in got.values() for r in recs])
            finally:
                await c.stop()

        asyncio.run(main())

    def guarded(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # reported by the test thread
                errors.append(exc)
        return run

    threads = [threading.Thread(target=guarded(f), daemon=True)
               for f in (run_kontrakt, run_confluent, run_kafka_python, run_aiokafka)]
    for t in threads:
        t.start()

    def settled() -> bool:
        with lock:
            parts = [owned.get(n, set()) for n in
                     ("kontrakt", "confluent", "kafka-python", "aiokafka")]
            flat = [p for s in parts for p in s]
            return (len(seen) == 80 and all(len(s) == 2 for s in parts)
                    and sorted(flat) == list(range(8)))

    deadline = time.monotonic() + 40
    try:
        while not settled() and not errors and time.monotonic() < deadline:
            time.sleep(0.05)
        ok = settled()
    finally:
        stop.set()
        for t in threads:
            t.join(20)
    assert not errors, errors
    assert ok, (owned, len(seen))
