"""The sink's bulk append (``kontrakt.spark._bulk``): a task's keyless values go into record
batches it fills itself and hands over with ``send_batch``, one future a batch, and
arrive whole, in order per partition, spread over the topic's partitions. In process
against Tansu, no JVM."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pyspark", reason="needs the spark extra")

import pyarrow as pa
from pyspark.sql.types import ArrayType, BinaryType, StringType, StructField, StructType

from kontrakt import TopicPartition
from kontrakt.clients.consumer import Consumer
from kontrakt.errors import RecordTooLargeError
from kontrakt.spark import _bulk
from kontrakt.spark._options import parse_options
from kontrakt.spark._writer import _ProduceTask, plan_write
from kontrakt.testing import TansuBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
SCHEMA = StructType([StructField("value", BinaryType())])


def _task(broker: TansuBroker, topic: str, **kafka: str) -> _ProduceTask:
    opts = parse_options({"kafka.bootstrap.servers": broker.bootstrap_servers, "topic": topic,
                          **{f"kafka.{k}": v for k, v in kafka.items()}}, write=True)
    key, value = plan_write(opts, SCHEMA)
    return _ProduceTask(opts, key, value, SCHEMA)


def _batches(n: int, step: int) -> list[pa.RecordBatch]:
    values = [None if i % 97 == 5 else b"v%06d" % i for i in range(n)]
    return [pa.RecordBatch.from_arrays([pa.array(values[i:i + step], pa.binary())],
                                       names=["value"]) for i in range(0, n, step)]


def _read(broker: TansuBroker, topic: str, partitions: int, n: int) -> dict[int, list[Any]]:
    out: dict[int, list[Any]] = {p: [] for p in range(partitions)}
    got = 0
    with Consumer({"bootstrap.servers": broker.bootstrap_servers,
                   "enable.auto.commit": False}) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        for p in range(partitions):
            consumer.seek(TopicPartition(topic, p), 0)
        for _ in range(100):
            for record in consumer.consume(n - got, 0.5):
                out[record.partition].append((record.key, record.value))
                got += 1
            if got >= n:
                break
    assert got == n
    return out


def test_keyless_values_are_sent_in_filled_batches(tansu_broker: TansuBroker,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    topic = "spark-bulk-keyless"
    tansu_broker.create_topic(topic, 3)
    made: list[_bulk.BulkBatches] = []

    class Watched(_bulk.BulkBatches):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            made.append(self)
    monkeypatch.setattr("kontrakt.spark._writer.BulkBatches", Watched)
    n = 6_000
    # batch.size small enough that the task fills several batches a partition
    written = _task(tansu_broker, topic, **{"batch.size": "16384"}).produce(
        iter(_batches(n, 1_000))).records
    assert written == n
    assert len(made) == 1 and 3 <= len(made[0].pending) < n // 50
    by_partition = _read(tansu_broker, topic, 3, n)
    assert all(by_partition[p] for p in range(3))  # spread over every partition
    seen = []
    for records in by_partition.values():
        assert all(key is None for key, _ in records)
        values = [v for _, v in records]
        order = [int(v[1:]) for v in values if v is not None]
        assert order == sorted(order)  # each partition keeps the task's order
        seen.extend(values)
    assert sorted(v for v in seen if v is not None) == sorted(
        b"v%06d" % i for i in range(n) if i % 97 != 5)
    assert seen.count(None) == len([i for i in range(n) if i % 97 == 5])


def test_round_robin_partitioner_keeps_send(tansu_broker: TansuBroker) -> None:
    """A partitioner that places keyless records one by one keeps the send path."""
    assert not _bulk.bulk_partitioner({"partitioner": "round_robin"})
    assert _bulk.bulk_partitioner({})
    topic = "spark-bulk-round-robin"
    tansu_broker.create_topic(topic, 2)
    task = _task(tansu_broker, topic, partitioner="round_robin")
    assert task.produce(iter(_batches(10, 10))).records == 10
    by_partition = _read(tansu_broker, topic, 2, 10)
    assert [len(by_partition[p]) for p in range(2)] == [5, 5]


def test_a_value_beyond_message_max_bytes_fails_the_task(tansu_broker: TansuBroker) -> None:
    topic = "spark-bulk-too-large"
    tansu_broker.create_topic(topic, 1)
    big = pa.RecordBatch.from_arrays([pa.array([b"x" * 5_000], pa.binary())], names=["value"])
    with pytest.raises(RecordTooLargeError):
        _task(tansu_broker, topic, **{"message.max.bytes": "2000"}).produce(iter([big]))


KEYED = StructType([StructField("key", BinaryType()), StructField("value", BinaryType())])


def _keyed_task(broker: TansuBroker, topic: str) -> _ProduceTask:
    opts = parse_options({"kafka.bootstrap.servers": broker.bootstrap_servers, "topic": topic},
                         write=True)
    key, value = plan_write(opts, KEYED)
    return _ProduceTask(opts, key, value, KEYED)


def _keyed_batch(keys: list[bytes | None], values: list[bytes | None]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array(keys, pa.binary()),
                                       pa.array(values, pa.binary())], names=["key", "value"])


@pytest.mark.parametrize("partitions", [3, 12])
def test_keyed_records_go_to_their_keys_partitions_in_batches(
        tansu_broker: TansuBroker, monkeypatch: pytest.MonkeyPatch, partitions: int) -> None:
    """Each key's partition is the producer's (murmur2), each partition keeps the task's
    order, and a batch with a null key (sent record by record) follows the records
    filled before it; records are grouped by a pass a partition (3) or a sort (12)."""
    from kontrakt.clients.producer import murmur2_partition

    topic = f"spark-bulk-keyed-{partitions}"
    tansu_broker.create_topic(topic, partitions)
    made: list[_bulk.BulkBatches] = []

    class Watched(_bulk.BulkBatches):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            made.append(self)
    monkeypatch.setattr("kontrakt.spark._writer.BulkBatches", Watched)
    first = _keyed_batch([b"user-%d" % (i % 50) for i in range(3_000)],
                         [b"a%05d" % i for i in range(3_000)])
    mixed = _keyed_batch([None if i % 10 == 0 else b"user-%d" % (i % 50) for i in range(100)],
                         [b"b%05d" % i for i in range(100)])
    last = _keyed_batch([b"user-%d" % (i % 50) for i in range(1_000)],
                        [b"c%05d" % i for i in range(1_000)])
    n = 4_100
    assert _keyed_task(tansu_broker, topic).produce(iter([first, mixed, last])).records == n
    assert len(made) == 1 and len(made[0].pending) < 60
    by_partition = _read(tansu_broker, topic, partitions, n)
    for partition, records in by_partition.items():
        for key, _value in records:
            if key is not None:
                assert murmur2_partition(key, partitions) == partition
        values = [v for _, v in records]
        assert values == sorted(values)  # a... then b... then c..., each in order
    assert sum(len(r) for r in by_partition.values()) == n


def test_a_task_without_rows_asks_for_no_metadata(tansu_broker: TansuBroker,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The partitions are asked at the first record (an empty task of a topic that does
    not exist yet must not wait for its metadata)."""
    from kontrakt.clients.producer import Producer

    asked: list[str] = []
    original = Producer.partitions_for

    def spy(self: Producer, topic: str) -> list[int]:
        asked.append(topic)
        return original(self, topic)
    monkeypatch.setattr(Producer, "partitions_for", spy)
    topic = "spark-bulk-empty"
    empty = pa.RecordBatch.from_arrays([pa.array([], pa.binary())], names=["value"])
    assert _task(tansu_broker, topic).produce(iter([empty])).records == 0
    assert asked == []


HEADERED = StructType([StructField("key", BinaryType()), StructField("value", BinaryType()),
                       StructField("headers", ArrayType(StructType([
                           StructField("key", StringType()),
                           StructField("value", BinaryType())])))])


def test_records_with_a_headers_column_are_filled_into_batches_too(
        tansu_broker: TansuBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    """A headers column keeps the bulk append (keyless and keyed): each record arrives with
    its headers (none, several, a null header value), in the task's order per partition."""
    topic = "spark-bulk-headers"
    tansu_broker.create_topic(topic, 2)
    made: list[_bulk.BulkBatches] = []

    class Watched(_bulk.BulkBatches):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            made.append(self)
    monkeypatch.setattr("kontrakt.spark._writer.BulkBatches", Watched)
    opts = parse_options({"kafka.bootstrap.servers": tansu_broker.bootstrap_servers,
                          "topic": topic}, write=True)

    def headers(i: int) -> list[dict[str, Any]] | None:
        if i % 4 == 0:
            return None if i % 8 else []
        return [{"key": f"h{j}-é", "value": None if j == 1 else b"%d" % i} for j in range(i % 3)]

    n = 2_000
    kind = pa.struct([("key", pa.string()), ("value", pa.binary())])

    def batch(keyed: bool, lo: int, hi: int) -> pa.RecordBatch:
        columns = [pa.array([b"v%05d" % i for i in range(lo, hi)], pa.binary()),
                   pa.array([headers(i) for i in range(lo, hi)], pa.list_(kind))]
        if not keyed:
            return pa.RecordBatch.from_arrays(columns, names=["value", "headers"])
        keys = pa.array([b"k%d" % (i % 7) for i in range(lo, hi)], pa.binary())
        return pa.RecordBatch.from_arrays([keys, *columns], names=["key", "value", "headers"])
    # keyless records first, then keyed ones, by two tasks
    for keyed, schema in ((False, StructType(HEADERED.fields[1:])), (True, HEADERED)):
        key, value = plan_write(opts, schema)
        first = n // 2 if keyed else 0
        batches = [batch(keyed, i, i + 500) for i in range(first, first + n // 2, 500)]
        assert _ProduceTask(opts, key, value, schema).produce(iter(batches)).records == n // 2
    assert len(made) == 2 and all(0 < len(m.pending) < 20 for m in made)
    got: dict[int, list[Any]] = {}
    with Consumer({"bootstrap.servers": tansu_broker.bootstrap_servers,
                   "enable.auto.commit": False}) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(2)])
        for p in range(2):
            consumer.seek(TopicPartition(topic, p), 0)
        for _ in range(100):
            for record in consumer.consume(n, 0.5):
                got.setdefault(record.partition, []).append(record)
            if sum(map(len, got.values())) >= n:
                break
    records = [r for rs in got.values() for r in rs]
    assert len(records) == n
    for rs in got.values():
        order = [int(r.value[1:]) for r in rs]
        assert [i for i in order if i < n // 2] == sorted(i for i in order if i < n // 2)
        assert [i for i in order if i >= n // 2] == sorted(i for i in order if i >= n // 2)
    for r in records:
        i = int(r.value[1:])
        assert list(r.headers or []) == [(h["key"], h["value"]) for h in headers(i) or []], i
