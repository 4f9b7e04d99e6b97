"""Cluster metadata: brokers, topics, partitions, leaders — a sans-I/O cache.

:class:`ClusterMetadata` is updated from Metadata responses by the client's metadata loop
and read by everything that routes requests (producer senders, fetchers, admin).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kontrakt.protocol.errors import for_code

__all__ = [
    "BrokerInfo",
    "ClusterMetadata",
    "PartitionInfo",
    "TopicInfo",
    "parse_bootstrap",
]


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A broker as the cluster advertises it."""

    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """One partition's leadership and replicas.

    Attributes:
        leader: node id of the leader, -1 when there is none.
        error_code: the partition-level error the broker reported (0 for none).
    """

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """A topic and its partitions, keyed by partition index."""

    name: str
    topic_id: uuid.UUID
    is_internal: bool
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)
    error_code: int = 0


def parse_bootstrap(servers: Iterable[str]) -> list[tuple[str, int]]:
    """Split ``host:port`` entries (IPv6 hosts may be bracketed)."""
    out = []
    for item in servers:
        host, _, port = item.rpartition(":")
        out.append((host.strip("[]"), int(port)))
    return out


class ClusterMetadata:
    """The latest view of the cluster.

    Not thread-safe: owned by the client's event loop.
    """

    def __init__(self) -> None:
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.topic_errors: dict[str, int] = {}
        self.cluster_id: str | None = None
        self.controller_id: int = -1
        self.updated_at: float = 0.0
        self.version = 0
        #: called (without arguments) after each update, once ``version`` moved on
        self.on_update: list[Callable[[], None]] = []

    def update(self, response: Any, *, all_topics: bool) -> None:
        """Apply a MetadataResponse.

        Args:
            all_topics: the request asked for every topic, so topics missing from the
                response were deleted; otherwise only the listed topics are replaced.
        """
        self.brokers = {
            b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in response.brokers
        }
        self.cluster_id = response.cluster_id
        self.controller_id = response.controller_id
        topics = {} if all_topics else dict(self.topics)
        errors: dict[str, int] = {}
        for t in response.topics:
            if t.name is None:
                continue
            if t.error_code != 0 and not t.partitions:
                errors[t.name] = t.error_code
                topics.pop(t.name, None)
                continue
            parts = {
                p.partition_index: PartitionInfo(
                    t.name, p.partition_index, p.leader_id, p.leader_epoch,
                    tuple(p.replica_nodes), tuple(p.isr_nodes), tuple(p.offline_replicas),
                    p.error_code,
                )
                for p in t.partitions
            }
            topics[t.name] = TopicInfo(t.name, t.topic_id, t.is_internal, parts, t.error_code)
        self.topics = topics
        self.topic_errors = errors
        self.updated_at = time.monotonic()
        self.version += 1
        for listener in self.on_update:
            listener()

    def leader_for(self, topic: str, partition: int) -> int:
        """The leader's node id, or -1 when unknown or leaderless."""
        t = self.topics.get(topic)
        if t is None:
            return -1
        p = t.partitions.get(partition)
        return -1 if p is None else p.leader

    def partitions_for(self, topic: str) -> list[int] | None:
        """Sorted partition indexes of ``topic``, or None when the topic is unknown."""
        t = self.topics.get(topic)
        return None if t is None else sorted(t.partitions)

    def available_partitions_for(self, topic: str) -> list[int]:
        """Partitions of ``topic`` that currently have a leader."""
        t = self.topics.get(topic)
        if t is None:
            return []
        return sorted(p.partition for p in t.partitions.values() if p.leader >= 0)

    def topic_error(self, topic: str) -> BaseException | None:
        """The error the last refresh reported for ``topic`` as an exception, if any."""
        code = self.topic_errors.get(topic, 0)
        return for_code(code)(f"topic {topic!r}") if code else None
