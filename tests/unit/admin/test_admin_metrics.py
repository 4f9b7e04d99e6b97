"""AsyncAdminClient.metrics() counts every request, the ones that got no answer, and the
error codes in answers (retried ones included), against the crafted peer of ``_crafted.py``
(neither test broker can drop one request's connection or refuse it as NOT_CONTROLLER on
cue)."""

from __future__ import annotations

from typing import Any

from kontrakt.clients.admin import NewTopic
from kontrakt.clients.admin._metrics import error_codes
from kontrakt.protocol.messages import CreateTopicsResponse, DescribeGroupsResponse
from tests._crafted_broker import CraftedBroker
from tests.unit.admin.test_admin_crafted import run


def test_dropped_requests_and_retried_errors_are_counted() -> None:
    calls = {"n": 0}

    def create(ver: int, req: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            return None  # the connection drops: a request without a response
        r = CreateTopicsResponse.CreatableTopicResult
        return CreateTopicsResponse(topics=[r(
            name=t.name, num_partitions=t.num_partitions, replication_factor=1,
            error_code=41 if calls["n"] == 2 and t.name == "a" else 0) for t in req.topics])

    async def body(a: Any) -> dict[str, Any]:
        before = a.metrics()
        assert before["request-total"] == 0 and before["request-latency-avg"] == 0.0
        await a.create_topics([NewTopic("a", 1), NewTopic("b", 1)])
        return a.metrics()  # type: ignore[no-any-return]

    m = run(CraftedBroker({19: create}), body)
    assert m["requests-by-api"] == {"CreateTopics": 3}
    assert m["request-total"] == 3
    assert m["request-error-total"] == 1
    assert m["response-total"] == 2
    assert m["errors-by-name"] == {"NOT_CONTROLLER": 1}
    assert m["error-total"] == 1
    assert 0 < m["request-latency-avg"] <= m["request-latency-max"]


def test_error_codes_are_found_at_every_level_of_a_response() -> None:
    g = DescribeGroupsResponse.DescribedGroup
    resp = DescribeGroupsResponse(groups=[
        g(error_code=0, group_id="ok", group_state="Stable", protocol_type="consumer",
          protocol_data="range", members=[]),
        g(error_code=16, group_id="moved", group_state="", protocol_type="",
          protocol_data="", members=[]),
        g(error_code=69, group_id="gone", group_state="Dead", protocol_type="",
          protocol_data="", members=[]),
    ])
    assert sorted(error_codes(resp)) == [16, 69]
    assert error_codes(CreateTopicsResponse(topics=[])) == []
