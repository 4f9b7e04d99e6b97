"""KIP-714 client telemetry on the in-process cluster, answered as a Kafka broker with no
metrics subscription: librdkafka (>= 2.5, ``enable.metrics.push`` on by default) asks for
its subscription when the API is advertised and then works as usual; PushTelemetry is checked
and accepted. Neither test broker serves these APIs (Tansu does not advertise them, the mock
cluster's answers are its own), so the expected results are Kafka's (KIP-714,
ClientMetricsManager)."""

from __future__ import annotations

import uuid

import confluent_kafka

from kontrakt.protocol import errors as E
from kontrakt.protocol.messages import (
    ApiVersionsRequest,
    GetTelemetrySubscriptionsRequest,
    PushTelemetryRequest,
)
from kontrakt.testing import Cluster, send_request

ZERO = uuid.UUID(int=0)


def test_confluent_kafka_asks_for_telemetry_and_works(cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic, partitions=1)
    address = cluster.bootstrap_servers.split(",")[0]
    offered = {a.api_key for a in send_request(address, ApiVersionsRequest(), 3).api_keys}
    assert {71, 72} <= offered
    p = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers})
    p.produce(topic, b"v", partition=0)
    assert p.flush(10) == 0
    c = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                                  "group.id": "g", "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])
        msg = None
        for _ in range(20):
            msg = c.poll(0.5)
            if msg is not None:
                break
        assert msg is not None and msg.error() is None and msg.value() == b"v"
    finally:
        c.close()
    assert cluster.request_counts().get(71, 0) >= 1  # librdkafka asked
    assert cluster.request_counts().get(72, 0) == 0  # and, with no metrics wanted, pushed none
    assert cluster.internal_errors() == []


def test_subscription_is_none_and_pushes_are_checked(cluster: Cluster) -> None:
    address = cluster.bootstrap_servers.split(",")[0]
    sub = send_request(address, GetTelemetrySubscriptionsRequest(client_instance_id=ZERO), 0)
    assert sub.error_code == 0 and sub.client_instance_id != ZERO
    assert sub.requested_metrics == [] and sub.push_interval_ms == 300_000
    assert sub.accepted_compression_types == [4, 3, 1, 2] and sub.delta_temporality
    again = send_request(address, GetTelemetrySubscriptionsRequest(
        client_instance_id=sub.client_instance_id), 0)
    assert (again.client_instance_id, again.subscription_id) == (
        sub.client_instance_id, sub.subscription_id)

    def push(**kw: object) -> int:
        fields: dict[str, object] = dict(client_instance_id=sub.client_instance_id,
                                         subscription_id=sub.subscription_id,
                                         compression_type=0, metrics=b"")
        fields.update(kw)
        return int(send_request(address, PushTelemetryRequest(**fields), 0).error_code)

    assert push() == 0
    assert push(terminating=True) == 0
    assert push(subscription_id=sub.subscription_id ^ 1) == E.UnknownSubscriptionIdError.code
    assert push(client_instance_id=ZERO) == E.InvalidRequestError.code
    assert push(compression_type=9) == E.UnsupportedCompressionTypeError.code
    assert push(metrics=bytes(1_048_577)) == E.TelemetryTooLargeError.code
