"""The integration tests' broker: Tansu, and for modules marked ``also_on_cluster`` Kontrakt's
in-process :class:`~kontrakt.testing.Cluster` as well.

A test in such a module that uses ``tansu_broker`` runs twice, ``[tansu]`` and ``[cluster]``:
the second gets the session's ``kafka_cluster`` (one broker) under the same fixture name, so
the tests and their assertions are unchanged. Both brokers take ``create_topic(name, n)`` and
give ``bootstrap_servers``. A test whose assertion holds only on Tansu (it checks one of Tansu's
documented deviations, see TEST-BROKERS.md) says so with ``@pytest.mark.tansu_only(reason)``:
its cluster case is skipped with that reason. After each cluster case, the cluster must not
have failed on any request itself (``Cluster.internal_errors``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kontrakt.testing import Cluster, TansuBroker

_ON_CLUSTER = "also_on_cluster"
_TANSU_ONLY = "tansu_only"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{_ON_CLUSTER}: the module's tansu_broker tests also run against the "
                   "in-process Cluster")
    config.addinivalue_line(
        "markers", f"{_TANSU_ONLY}(reason): the assertion checks Tansu's own behaviour; skip "
                   "the Cluster case with this reason")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "tansu_broker" not in metafunc.fixturenames \
            or metafunc.definition.get_closest_marker(_ON_CLUSTER) is None:
        return
    only = metafunc.definition.get_closest_marker(_TANSU_ONLY)
    cluster: Any = "cluster"
    if only is not None:
        reason = only.args[0] if only.args else only.kwargs.get("reason", "")
        assert reason, f"{metafunc.definition.nodeid}: tansu_only needs a reason"
        cluster = pytest.param("cluster", marks=pytest.mark.skip(reason=f"Tansu only: {reason}"))
    metafunc.parametrize("tansu_broker", ["tansu", cluster], indirect=True)


@pytest.fixture
def tansu_broker(request: pytest.FixtureRequest,
                 tansu_broker: TansuBroker) -> Iterator[TansuBroker | Cluster]:
    """The session's Tansu broker, or the session's Cluster for a ``[cluster]`` case."""
    if getattr(request, "param", "tansu") != "cluster":
        yield tansu_broker
        return
    cluster: Cluster = request.getfixturevalue("kafka_cluster")
    before = len(cluster.internal_errors())
    yield cluster
    failed = cluster.internal_errors()[before:]
    assert not failed, f"the cluster failed on requests itself: {failed}"
