"""The cluster's data path, checked request by request against Kafka's documented semantics
(where Tansu is known to deviate, the test says so): offsets after multi-record batches,
timestamp lookups, idempotent sequence checks, long polling, max bytes, DeleteRecords,
acks=0, auto-creation and the spread of leaders."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pytest

from kontrakt.protocol import errors as E
from kontrakt.protocol.headers import encode_request
from kontrakt.protocol.messages import (
    DeleteRecordsRequest,
    FetchRequest,
    ListOffsetsRequest,
    MetadataRequest,
    ProduceRequest,
)
from kontrakt.protocol.records import iter_batches
from kontrakt.testing import Cluster, send_request
from tests.cluster.conftest import batch, call, leader_address

PR = ProduceRequest
FR = FetchRequest
LR = ListOffsetsRequest


def produce(cluster: Cluster, topic: str, records: bytes, *, partition: int = 0,
            acks: int = -1, version: int = 9) -> object:
    resp = call(cluster, topic, partition, PR(acks=acks, timeout_ms=5000, topic_data=[
        PR.TopicProduceData(name=topic, partition_data=[
            PR.TopicProduceData.PartitionProduceData(index=partition, records=records)])]),
        version)
    return resp.responses[0].partition_responses[0]


def list_offset(cluster: Cluster, topic: str, timestamp: int, *, isolation: int = 0,
                partition: int = 0) -> tuple[int, int, int]:
    resp = call(cluster, topic, partition, LR(replica_id=-1, isolation_level=isolation, topics=[
        LR.ListOffsetsTopic(name=topic, partitions=[LR.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=partition, timestamp=timestamp)])]), 7)
    p = resp.topics[0].partitions[0]
    return p.error_code, p.offset, p.timestamp


def fetch(cluster: Cluster, topic: str, offset: int, *, max_wait_ms: int = 0,
          partition_max_bytes: int = 1 << 20, isolation: int = 0,
          partition: int = 0) -> object:
    resp = call(cluster, topic, partition, FR(
        max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, isolation_level=isolation,
        topics=[FR.FetchTopic(topic=topic, partitions=[FR.FetchTopic.FetchPartition(
            partition=partition, fetch_offset=offset,
            partition_max_bytes=partition_max_bytes)])]), 11)
    return resp.responses[0].partitions[0]


def test_end_offsets_count_every_record_of_multi_record_batches(cluster: Cluster,
                                                                topic: str) -> None:
    """Tansu answers LATEST with the last batch's first offset + 1; Kafka with the log end."""
    cluster.create_topic(topic)
    first = produce(cluster, topic, batch([b"a", b"b", b"c"]))
    second = produce(cluster, topic, batch([b"d", b"e"]))
    assert (first.error_code, first.base_offset) == (0, 0)
    assert (second.error_code, second.base_offset) == (0, 3)
    assert list_offset(cluster, topic, -1) == (0, 5, -1)
    assert list_offset(cluster, topic, -2) == (0, 0, -1)
    part = fetch(cluster, topic, 0)
    assert part.high_watermark == 5 and part.log_start_offset == 0
    offsets = [r.offset for b in iter_batches(part.records) for r in b.records()]
    assert offsets == [0, 1, 2, 3, 4]
    assert cluster.end_offsets(topic) == [5]


def test_timestamp_lookups_find_records_inside_batches(cluster: Cluster, topic: str) -> None:
    """Tansu answers every by-timestamp lookup with 0; Kafka returns the first offset whose
    record timestamp is >= the target, and MAX_TIMESTAMP the record holding the largest."""
    cluster.create_topic(topic)
    produce(cluster, topic, batch([b"a", b"b", b"c"], timestamps=[100, 300, 200]))
    produce(cluster, topic, batch([b"d", b"e"], timestamps=[250, 400]))
    assert list_offset(cluster, topic, 150) == (0, 1, 300)
    assert list_offset(cluster, topic, 300) == (0, 1, 300)
    assert list_offset(cluster, topic, 301) == (0, 4, 400)
    assert list_offset(cluster, topic, 401) == (0, -1, -1)
    assert list_offset(cluster, topic, -3) == (0, 4, 400)


def test_idempotent_retries_are_deduplicated_and_gaps_refused(cluster: Cluster,
                                                               topic: str) -> None:
    cluster.create_topic(topic)
    pid = 4242
    ok = produce(cluster, topic, batch([b"a", b"b"], producer_id=pid, producer_epoch=0,
                                       base_sequence=0))
    retry = produce(cluster, topic, batch([b"a", b"b"], producer_id=pid, producer_epoch=0,
                                          base_sequence=0))
    # Kafka answers a retried batch with the original offset and no error.
    assert (ok.error_code, ok.base_offset) == (0, 0)
    assert (retry.error_code, retry.base_offset) == (0, 0)
    gap = produce(cluster, topic, batch([b"c"], producer_id=pid, producer_epoch=0,
                                        base_sequence=5))
    assert gap.error_code == E.OutOfOrderSequenceNumberError.code
    nxt = produce(cluster, topic, batch([b"c"], producer_id=pid, producer_epoch=0,
                                        base_sequence=2))
    assert (nxt.error_code, nxt.base_offset) == (0, 2)
    bumped = produce(cluster, topic, batch([b"d"], producer_id=pid, producer_epoch=1,
                                           base_sequence=0))
    assert bumped.error_code == 0
    stale = produce(cluster, topic, batch([b"e"], producer_id=pid, producer_epoch=0,
                                          base_sequence=3))
    assert stale.error_code == E.InvalidProducerEpochError.code
    assert cluster.end_offsets(topic) == [4]


def test_fetch_long_poll_wakes_on_produce(cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic)
    timer = threading.Timer(0.2, lambda: produce(cluster, topic, batch([b"late"])))
    timer.start()
    try:
        start = time.monotonic()
        part = fetch(cluster, topic, 0, max_wait_ms=5000)
        took = time.monotonic() - start
    finally:
        timer.join(5)
    assert [r.value for b in iter_batches(part.records) for r in b.records()] == [b"late"]
    assert 0.15 < took < 2.0


def test_fetch_honours_partition_max_bytes_but_returns_one_batch(cluster: Cluster,
                                                                 topic: str) -> None:
    cluster.create_topic(topic)
    for i in range(3):
        produce(cluster, topic, batch([bytes([i]) * 200]))
    part = fetch(cluster, topic, 0, partition_max_bytes=10)
    batches = list(iter_batches(part.records))
    assert [b.base_offset for b in batches] == [0]  # larger than the limit, still returned
    part = fetch(cluster, topic, 1, partition_max_bytes=700)
    assert [b.base_offset for b in iter_batches(part.records)] == [1, 2]
    out_of_range = fetch(cluster, topic, 4)
    assert out_of_range.error_code == E.OffsetOutOfRangeError.code


def test_fetch_cuts_the_batch_after_whole_ones_short_as_kafka(cluster: Cluster,
                                                              topic: str) -> None:
    # Kafka answers a slice of the log of at most the partition's max bytes (after a first
    # batch returned whole, KIP-74), so a fetch may end inside a batch; clients drop that
    # tail. A first batch that does not fit where one is not owed is not cut: nothing comes.
    cluster.create_topic(topic)
    for i in range(3):
        produce(cluster, topic, batch([bytes([i]) * 200]))

    def records(offset: int, limit: int = 1 << 20) -> bytes:
        part: Any = fetch(cluster, topic, offset, partition_max_bytes=limit)
        return bytes(part.records)

    log = records(0)
    size = len(log) // 3
    assert records(0, size + 50) == log[:size + 50]
    assert [b.base_offset for b in iter_batches(records(0, size + 50))] == [0]
    assert records(1, 2 * size + 1) == log[size:]  # the log ends before the limit
    assert records(0, size) == log[:size]
    resp = call(cluster, topic, 0, FR(max_wait_ms=0, min_bytes=1, max_bytes=size + 10,
                                      isolation_level=0, topics=[FR.FetchTopic(
                                          topic=topic, partitions=[
                                              FR.FetchTopic.FetchPartition(
                                                  partition=0, fetch_offset=0,
                                                  partition_max_bytes=1 << 20)])]), 11)
    assert resp.responses[0].partitions[0].records == log[:size + 10]


def test_delete_records_moves_the_log_start(cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic)
    produce(cluster, topic, batch([b"a", b"b", b"c"]))
    produce(cluster, topic, batch([b"d"]))
    DR = DeleteRecordsRequest
    resp = call(cluster, topic, 0, DR(timeout_ms=5000, topics=[DR.DeleteRecordsTopic(
        name=topic, partitions=[DR.DeleteRecordsTopic.DeleteRecordsPartition(
            partition_index=0, offset=2)])]), 2)
    assert resp.topics[0].partitions[0].low_watermark == 2
    assert list_offset(cluster, topic, -2) == (0, 2, -1)
    assert fetch(cluster, topic, 1).error_code == E.OffsetOutOfRangeError.code
    part = fetch(cluster, topic, 2)
    assert part.log_start_offset == 2
    # The batch holding offset 2 is served whole; the consumer skips offsets below 2.
    assert [r.offset for b in iter_batches(part.records) for r in b.records()] == [0, 1, 2, 3]


def test_acks_zero_gets_no_response_but_is_appended(cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic)
    address = leader_address(cluster, topic, 0)
    frame = encode_request(PR(acks=0, timeout_ms=5000, topic_data=[PR.TopicProduceData(
        name=topic, partition_data=[PR.TopicProduceData.PartitionProduceData(
            index=0, records=batch([b"x", b"y"]))])]), 9, 7)
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(frame)
        deadline = time.monotonic() + 5
        while cluster.end_offsets(topic) != [2] and time.monotonic() < deadline:
            time.sleep(0.01)
    assert cluster.end_offsets(topic) == [2]
    bad = produce(cluster, topic, batch([b"z"]), acks=2)
    assert bad.error_code == E.InvalidRequiredAcksError.code


def test_metadata_spreads_leaders_and_auto_creates_only_when_enabled(cluster: Cluster,
                                                                      topic: str) -> None:
    cluster.create_topic(topic, partitions=6, replication_factor=2)
    bs = cluster.bootstrap_servers.split(",")[0]
    meta = send_request(bs, MetadataRequest(topics=[
        MetadataRequest.MetadataRequestTopic(name=topic),
        MetadataRequest.MetadataRequestTopic(name=topic + "-missing")]), 12)
    assert sorted(b.node_id for b in meta.brokers) == [1, 2, 3]
    parts = meta.topics[0].partitions
    assert {p.leader_id for p in parts} == {1, 2, 3}
    assert all(len(p.replica_nodes) == 2 and p.leader_id == p.replica_nodes[0] for p in parts)
    assert meta.topics[1].error_code == E.UnknownTopicOrPartitionError.code
    with Cluster(1, auto_create_topics=True, num_partitions=4) as auto:
        meta = send_request(auto.bootstrap_servers, MetadataRequest(topics=[
            MetadataRequest.MetadataRequestTopic(name="fresh")]), 12)
        assert meta.topics[0].error_code == 0 and len(meta.topics[0].partitions) == 4


@pytest.mark.parametrize("version", [3, 7, 9, 13])
def test_produce_versions_old_and_new(cluster: Cluster, topic: str, version: int) -> None:
    """Produce v13 names topics by id; older versions by name."""
    cluster.create_topic(topic)
    if version >= 13:
        meta = send_request(cluster.bootstrap_servers.split(",")[0], MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=topic)]), 12)
        td = PR.TopicProduceData(topic_id=meta.topics[0].topic_id, partition_data=[
            PR.TopicProduceData.PartitionProduceData(index=0, records=batch([b"v"]))])
        resp = call(cluster, topic, 0, PR(acks=1, timeout_ms=5000, topic_data=[td]), version)
        assert resp.responses[0].partition_responses[0].error_code == 0
    else:
        assert produce(cluster, topic, batch([b"v"]), version=version).error_code == 0
    assert cluster.end_offsets(topic) == [1]


def test_log_append_time_topics_restamp_batches(cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic, config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    resp = produce(cluster, topic, batch([b"a", b"b"], timestamps=[5, 6]))
    after = int(time.time() * 1000)
    assert resp.error_code == 0 and before <= resp.log_append_time_ms <= after
    (stored,) = list(iter_batches(fetch(cluster, topic, 0).records))  # CRC checked
    assert stored.timestamp_type == 1 and stored.max_timestamp == resp.log_append_time_ms
    assert [r.timestamp for r in stored.records()] == [resp.log_append_time_ms] * 2


def test_oversized_and_corrupt_batches_are_refused(cluster: Cluster, topic: str) -> None:
    """Tansu ignores max.message.bytes (see tests/integration/test_producer_split.py)."""
    cluster.create_topic(topic, config={"max.message.bytes": "300"})
    assert produce(cluster, topic, batch([b"x" * 500])).error_code == \
        E.MessageTooLargeError.code
    good = bytearray(batch([b"ok"]))
    good[-1] ^= 0xFF  # flip a payload byte: the CRC no longer matches
    assert produce(cluster, topic, bytes(good)).error_code == E.CorruptMessageError.code
    assert cluster.end_offsets(topic) == [0]
