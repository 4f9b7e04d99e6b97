"""Where a batch read ends and a stream's micro-batch stops: at each partition's true end.

Against Tansu, whose ListOffsets(LATEST) answers the last batch's first offset + 1 (see
TEST-BROKERS): records produced with ``linger.ms`` go out in multi-record batches, so the
listed end falls short of the high watermark a Fetch response carries.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pyspark", reason="needs the spark extra")

from kontrakt import TopicPartition
from kontrakt.clients.consumer import Consumer
from kontrakt.clients.producer import Producer
from kontrakt.spark._options import parse_options
from kontrakt.spark._plan import plan_ranges
from kontrakt.testing import MockCluster, TansuBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

PARTITIONS = 3


def produce_batched(broker: TansuBroker | MockCluster, topic: str, n: int,
                    partitions: int = PARTITIONS) -> None:
    """``n`` records spread over the partitions, lingering so that batches hold many."""
    broker.create_topic(topic, partitions)
    with Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 50}) as p:
        for i in range(n):
            p.send(topic, b"v%d" % i, key=b"k%d" % i, partition=i % partitions)
        p.flush(10)


def test_tansu_lists_a_short_end_for_multi_record_batches(tansu_broker: TansuBroker,
                                                          topic_name: str) -> None:
    """The broker fault the planner works around is really there (else the test below
    proves nothing)."""
    produce_batched(tansu_broker, topic_name, 300)
    tps = [TopicPartition(topic_name, p) for p in range(PARTITIONS)]
    with Consumer(bootstrap_servers=tansu_broker.bootstrap_servers) as consumer:
        assert all(o < 100 for o in consumer.end_offsets(tps, 10).values())


@pytest.mark.parametrize("kind", ["tansu", "mock"])
def test_plans_end_at_the_true_end_on_every_test_broker(
        kind: str, tansu_broker: TansuBroker, mock_cluster: MockCluster,
        topic_name: str) -> None:
    """On the librdkafka mock cluster ListOffsets is right; the Fetch confirmation must
    agree with it there (and not wait out fetch.max.wait.ms)."""
    broker = tansu_broker if kind == "tansu" else mock_cluster
    produce_batched(broker, topic_name, 600)
    opts = parse_options({"kafka.bootstrap.servers": broker.bootstrap_servers,
                          "subscribe": topic_name})
    assert [(r.partition, r.start, r.end) for r in plan_ranges(opts)] == [
        (p, 0, 200) for p in range(PARTITIONS)]


def test_batch_read_ends_at_the_high_watermark(spark: Any, tansu_broker: TansuBroker,
                                               topic_name: str) -> None:
    produce_batched(tansu_broker, topic_name, 3000)
    df = (spark.read.format("kontrakt")
          .option("kafka.bootstrap.servers", tansu_broker.bootstrap_servers)
          .option("subscribe", topic_name).load())
    rows = df.select("partition", "offset").collect()
    assert sorted((r.partition, r.offset) for r in rows) == [
        (p, o) for p in range(PARTITIONS) for o in range(1000)]


def test_stream_reads_to_the_high_watermark(spark: Any, tansu_broker: TansuBroker,
                                            topic_name: str, tmp_path: Any) -> None:
    produce_batched(tansu_broker, topic_name, 900)
    df = (spark.readStream.format("kontrakt")
          .option("kafka.bootstrap.servers", tansu_broker.bootstrap_servers)
          .option("subscribe", topic_name).load())
    got: list[int] = []
    query = (df.writeStream.foreachBatch(lambda b, _: got.append(b.count()))
             .option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(60), "the availableNow query did not finish in 60 s"
    finally:
        query.stop()
    assert query.exception() is None
    assert sum(got) == 900
