"""Fixtures for the in-process cluster's tests: a running 3-broker :class:`Cluster` and raw
protocol helpers that talk to the right broker."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kontrakt.protocol.messages import MetadataRequest
from kontrakt.protocol.records import RecordBatchBuilder
from kontrakt.protocol.spec import Request
from kontrakt.testing import Cluster, send_request


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with Cluster(num_brokers=3) as c:
        yield c
        assert c.internal_errors() == []


@pytest.fixture
def topic() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def leader_address(cluster: Cluster, topic: str, partition: int) -> str:
    """``host:port`` of the partition's leader, from Metadata."""
    any_broker = cluster.bootstrap_servers.split(",")[0]
    meta = send_request(any_broker, MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=topic)]), 12)
    part = meta.topics[0].partitions[partition]
    broker = next(b for b in meta.brokers if b.node_id == part.leader_id)
    return f"{broker.host}:{broker.port}"


def call(cluster: Cluster, topic: str, partition: int, message: Request, version: int) -> Any:
    """Send one request to the partition's leader."""
    return send_request(leader_address(cluster, topic, partition), message, version)


def batch(values: list[bytes], *, timestamps: list[int] | None = None, producer_id: int = -1,
          producer_epoch: int = -1, base_sequence: int = -1,
          transactional: bool = False) -> bytes:
    """A v2 batch holding ``values`` (one batch, several records)."""
    b = RecordBatchBuilder(producer_id=producer_id, producer_epoch=producer_epoch,
                           base_sequence=base_sequence, is_transactional=transactional)
    for i, v in enumerate(values):
        b.append(timestamps[i] if timestamps else 1_000 + i, None, v)
    return b.build()
