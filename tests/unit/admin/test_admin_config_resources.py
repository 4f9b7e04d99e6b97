"""list_config_resources against a crafted broker.

Neither test broker answers ListConfigResources (API 74): Tansu 0.6.0 and librdkafka's
mock cluster do not advertise it. So the request per version (v1's type filter; v0, the
former ListClientMetricsResources, which cannot filter), the decoding and the errors are
checked against a crafted peer (``tests/_crafted_broker.py``); the codec is checked byte
for byte against kafka-python in tests/unit/test_messages_admin_ops.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kontrakt.clients.admin import AdminClient, ConfigResource, ConfigResourceType
from kontrakt.errors import InvalidArgumentError, UnsupportedVersionError
from kontrakt.protocol.errors import ClusterAuthorizationFailedError, CoordinatorLoadInProgressError
from kontrakt.protocol.messages import ListConfigResourcesResponse
from tests._crafted_broker import CraftedBroker
from tests.unit.admin.test_admin_crafted import FAST, run

LIST_CONFIG_RESOURCES = 74
CLUSTER_AUTHORIZATION_FAILED, COORDINATOR_LOAD_IN_PROGRESS = 31, 14
T = ConfigResourceType
#: what the crafted broker holds: (type code, name); 64 is a type this client does not know
HELD = [(T.GROUP, "g1"), (T.CLIENT_METRICS, "m1"), (T.TOPIC, "orders"), (64, "new"),
        (T.CLIENT_METRICS, "m0")]


class Lister:
    """Answers ListConfigResources from :data:`HELD`, filtered by the request's types (v1)
    or client metrics only (v0); with the error codes of ``errors`` first."""

    def __init__(self, *errors: int) -> None:
        self.errors = list(errors)
        self.asked: list[tuple[int, Any]] = []

    def __call__(self, ver: int, req: Any) -> Any:
        self.asked.append((ver, req))
        r = ListConfigResourcesResponse
        if self.errors:
            return r(error_code=self.errors.pop(0))
        wanted = set(req.resource_types) if ver >= 1 else {int(T.CLIENT_METRICS)}
        return r(config_resources=[
            r.ConfigResource(resource_name=name, **({"resource_type": int(code)} if ver else {}))
            for code, name in HELD if not wanted or int(code) in wanted])


def test_v1_sends_the_types_and_decodes_every_resource() -> None:
    lister = Lister()
    out = run(CraftedBroker({LIST_CONFIG_RESOURCES: lister}),
              lambda a: a.list_config_resources())
    assert out == [ConfigResource(T.UNKNOWN, "new"), ConfigResource(T.TOPIC, "orders"),
                   ConfigResource(T.CLIENT_METRICS, "m0"), ConfigResource(T.CLIENT_METRICS, "m1"),
                   ConfigResource(T.GROUP, "g1")]
    [(version, req)] = lister.asked
    assert (version, list(req.resource_types)) == (1, [])

    lister = Lister()
    out = run(CraftedBroker({LIST_CONFIG_RESOURCES: lister}),
              lambda a: a.list_config_resources(["group", T.TOPIC, 32]))
    assert out == [ConfigResource(T.TOPIC, "orders"), ConfigResource(T.GROUP, "g1")]
    assert [list(r.resource_types) for _v, r in lister.asked] == [[2, 32]]


def test_a_v0_broker_lists_client_metrics_resources() -> None:
    lister = Lister()
    out = run(CraftedBroker({LIST_CONFIG_RESOURCES: lister},
                            max_versions={LIST_CONFIG_RESOURCES: 0}),
              lambda a: a.list_config_resources([T.CLIENT_METRICS]))
    # v0 answers carry no type: each is a client-metrics resource
    assert out == [ConfigResource(T.CLIENT_METRICS, "m0"), ConfigResource(T.CLIENT_METRICS, "m1")]
    assert [v for v, _r in lister.asked] == [0]


def test_other_types_cannot_be_asked_of_a_v0_broker() -> None:
    lister = Lister()
    with pytest.raises(UnsupportedVersionError, match="client-metrics resources only"):
        run(CraftedBroker({LIST_CONFIG_RESOURCES: lister},
                          max_versions={LIST_CONFIG_RESOURCES: 0}),
            lambda a: a.list_config_resources([T.GROUP], timeout=10))
    assert lister.asked == []


def test_a_retriable_error_is_retried_and_a_final_one_raised() -> None:
    lister = Lister(COORDINATOR_LOAD_IN_PROGRESS)
    out = run(CraftedBroker({LIST_CONFIG_RESOURCES: lister}),
              lambda a: a.list_config_resources([T.TOPIC], timeout=10))
    assert out == [ConfigResource(T.TOPIC, "orders")]
    assert len(lister.asked) == 2

    lister = Lister(CLUSTER_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED)
    with pytest.raises(ClusterAuthorizationFailedError):
        run(CraftedBroker({LIST_CONFIG_RESOURCES: lister}),
            lambda a: a.list_config_resources(timeout=10))
    assert len(lister.asked) == 1
    assert CoordinatorLoadInProgressError.retriable  # the premise of the first half


@pytest.mark.parametrize("types", [["nope"], [3], [True], [None]])
def test_unknown_types_are_refused_before_anything_is_sent(types: list[Any]) -> None:
    lister = Lister()
    with pytest.raises(InvalidArgumentError):
        run(CraftedBroker({LIST_CONFIG_RESOURCES: lister}),
            lambda a: a.list_config_resources(types))
    assert lister.asked == []


def test_the_blocking_client_lists_too() -> None:
    lister = Lister()

    async def main() -> Any:
        async with CraftedBroker({LIST_CONFIG_RESOURCES: lister}) as broker:
            def blocking() -> Any:
                with AdminClient({"bootstrap.servers": broker.bootstrap, **FAST}) as admin:
                    return admin.list_config_resources(["topic"], timeout=10)
            return await asyncio.to_thread(blocking)

    assert asyncio.run(main()) == [ConfigResource(T.TOPIC, "orders")]
