"""Fault control with the mock cluster's method names: injected error codes (a queue per API,
cluster-wide or per broker), dropped connections, RTT, brokers down and up, leader moves;
Kontrakt's producer and consumer ride through them."""

from __future__ import annotations

import socket
import time

import pytest

from kontrakt import Consumer, Producer
from kontrakt._types import TopicPartition as TP
from kontrakt.errors import InvalidArgumentError, KafkaConnectionError
from kontrakt.protocol import errors as E
from kontrakt.protocol.messages import ApiVersionsRequest, MetadataRequest
from kontrakt.testing import Cluster, send_request
from tests.cluster.conftest import leader_address


def test_injected_errors_are_consumed_in_order_and_the_producer_retries(
        cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic)
    cluster.push_request_errors(0, [E.NotLeaderOrFollowerError.code,
                                    E.RequestTimedOutError.code])
    before = cluster.request_counts().get(0, 0)
    with Producer(bootstrap_servers=cluster.bootstrap_servers, retry_backoff_ms=10) as p:
        md = p.send_and_wait(topic, b"v", partition=0)
    assert md.offset == 0
    assert cluster.request_counts()[0] - before == 3  # two failed attempts, then success
    assert cluster.end_offsets(topic) == [1]  # the failed attempts appended nothing


def test_per_broker_errors_with_rtt_and_dropped_connections(cluster: Cluster,
                                                            topic: str) -> None:
    cluster.create_topic(topic)
    address = cluster.bootstrap_servers.split(",")[0]
    meta = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)])
    cluster.broker_push_request_error_rtts(1, 3, [(0, 300), (Cluster.DISCONNECT, 0)])
    start = time.monotonic()
    assert send_request(address, meta, 12).topics[0].error_code == 0
    assert time.monotonic() - start >= 0.29
    with pytest.raises(KafkaConnectionError):
        send_request(address, meta, 12)
    cluster.set_rtt(1, 200)
    start = time.monotonic()
    send_request(address, ApiVersionsRequest(), 3)
    assert time.monotonic() - start >= 0.19
    cluster.set_rtt(1, 0)
    cluster.push_request_errors(3, [E.UnknownTopicOrPartitionError.code])
    assert send_request(address, meta, 12).topics[0].error_code == \
        E.UnknownTopicOrPartitionError.code
    cluster.push_request_errors(3, [E.UnknownTopicOrPartitionError.code])
    cluster.clear_request_errors(3)
    assert send_request(address, meta, 12).topics[0].error_code == 0
    with pytest.raises(InvalidArgumentError):
        cluster.push_request_errors(999, [1])


def test_broker_down_refuses_connections_until_up(cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic, partitions=3)
    host, port = cluster.broker_address(2)
    address = f"{host}:{port}"
    assert send_request(address, ApiVersionsRequest(), 3).error_code == 0
    held = socket.create_connection((host, port), timeout=5)
    try:
        cluster.broker_down(2)
        try:
            assert held.recv(1) == b""  # the open connection was closed
        except ConnectionResetError:
            pass
    finally:
        held.close()
    with pytest.raises(KafkaConnectionError):
        send_request(address, ApiVersionsRequest(), 3)
    meta = send_request(cluster.bootstrap_servers.split(",")[0], MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=topic)]), 12)
    assert sorted(b.node_id for b in meta.brokers) == [1, 3]
    led_by_2 = [p for p in meta.topics[0].partitions if p.replica_nodes[0] == 2]
    assert led_by_2 and all(p.error_code == E.LeaderNotAvailableError.code for p in led_by_2)
    cluster.broker_up(2)
    assert send_request(address, ApiVersionsRequest(), 3).error_code == 0


def test_leader_moves_keep_producer_and_consumer_going(cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    bs = cluster.bootstrap_servers
    old = leader_address(cluster, topic, 0)
    with Producer(bootstrap_servers=bs, retry_backoff_ms=10) as p, \
            Consumer(bootstrap_servers=bs, auto_offset_reset="earliest",
                     retry_backoff_ms=10) as c:
        c.assign([TP(topic, 0)])
        p.send_and_wait(topic, b"before", partition=0)
        first = c.poll(10)
        assert first is not None and first.value == b"before"
        new_id = next(i for i in (1, 2, 3) if cluster.broker_address(i)[1] !=
                      int(old.rsplit(":", 1)[1]))
        cluster.set_partition_leader(topic, 0, new_id)
        assert leader_address(cluster, topic, 0) != old
        assert p.send_and_wait(topic, b"after", partition=0).offset == 1
        second = c.poll(10)
        assert second is not None and (second.value, second.offset) == (b"after", 1)
        assert second.leader_epoch == 1
