"""list_groups (Java's Admin.listGroups, KIP-1043) against crafted brokers.

Tansu answers ListGroups v5 (tests/integration/test_admin_tansu.py lists a real group), but
it is one broker, and librdkafka's mock cluster has several but no ListGroups. So asking
every broker and merging, a broker's error kept apart or retried, and the filters an older
broker cannot apply are checked against two crafted peers (``tests/_crafted_broker.py``)
that report each other in Metadata.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kontrakt.clients.admin import (
    AdminClient,
    AsyncAdminClient,
    ConsumerGroupState,
    ConsumerGroupType,
    GroupListing,
)
from kontrakt.errors import InvalidArgumentError, PartialFailureError, UnsupportedVersionError
from kontrakt.protocol.errors import ClusterAuthorizationFailedError
from kontrakt.protocol.messages import ListGroupsResponse, MetadataResponse
from tests._crafted_broker import CraftedBroker
from tests.unit.admin.test_admin_crafted import FAST

LIST_GROUPS, METADATA = 16, 3
G = ListGroupsResponse.ListedGroup


class Brokers:
    """Crafted brokers 1..n, each reporting all of them in Metadata; broker i answers
    ListGroups with ``answers[i]`` in turn (the last from then on): a list of groups or
    an error code."""

    def __init__(self, answers: dict[int, list[list[Any] | int]],
                 max_versions: dict[int, int] | None = None) -> None:
        self.answers = answers
        self.asked: dict[int, list[tuple[int, Any]]] = {n: [] for n in answers}
        self.peers = {n: CraftedBroker({LIST_GROUPS: self._handler(n), METADATA: self._meta},
                                       max_versions=max_versions) for n in answers}

    def _meta(self, _v: int, _req: Any) -> Any:
        mr = MetadataResponse
        return mr(brokers=[mr.MetadataResponseBroker(node_id=n, host="127.0.0.1", port=p.port)
                           for n, p in self.peers.items()],
                  cluster_id="crafted", controller_id=1, topics=[])

    def _handler(self, node: int) -> Callable[[int, Any], Any]:
        def answer(version: int, req: Any) -> Any:
            self.asked[node].append((version, req))
            todo = self.answers[node]
            given = todo.pop(0) if len(todo) > 1 else todo[0]
            if isinstance(given, int):
                return ListGroupsResponse(error_code=given)
            return ListGroupsResponse(groups=given)
        return answer

    def run(self, body: Callable[[AsyncAdminClient], Awaitable[Any]]) -> Any:
        async def main() -> Any:
            for p in self.peers.values():
                await p.__aenter__()
            try:
                async with AsyncAdminClient(
                        {"bootstrap.servers": self.peers[1].bootstrap, **FAST}) as a:
                    return await asyncio.wait_for(body(a), 20)
            finally:
                for p in self.peers.values():
                    await p.__aexit__(None, None, None)
        return asyncio.run(main())


def _g(gid: str, gtype: str = "classic", proto: str = "consumer", state: str = "Stable") -> Any:
    return G(group_id=gid, protocol_type=proto, group_state=state, group_type=gtype)


def test_every_broker_is_asked_and_the_listings_merged_by_id() -> None:
    # Broken variant tried: asking only the least loaded broker (brokers[:1]) loses "a-share".
    b = Brokers({1: [[_g("z-classic", state="Empty", proto=""), _g("m-consumer", "consumer")]],
                 2: [[_g("a-share", "share", "share"), _g("m-consumer", "consumer")]]})
    out = b.run(lambda a: a.list_groups(states=["stable", ConsumerGroupState.EMPTY],
                                        types=[ConsumerGroupType.SHARE, "Classic", "consumer"]))
    assert out == [
        GroupListing("a-share", ConsumerGroupType.SHARE, "share", ConsumerGroupState.STABLE),
        GroupListing("m-consumer", ConsumerGroupType.CONSUMER, "consumer",
                     ConsumerGroupState.STABLE),
        GroupListing("z-classic", ConsumerGroupType.CLASSIC, "", ConsumerGroupState.EMPTY)]
    assert [g.is_simple_consumer_group for g in out] == [False, False, True]
    for node in (1, 2):
        [(version, req)] = b.asked[node]
        assert version == 5
        # Broken variant tried: the types' enum values as given ("Share") fail this.
        assert req.types_filter == ["share", "classic", "consumer"]
        assert req.states_filter == ["Stable", "Empty"]


def test_a_retriable_broker_error_is_asked_again_a_final_one_kept_apart() -> None:
    # Broken variant tried: a fan-out without per_entity (no retry) leaves broker 2's
    # COORDINATOR_LOAD_IN_PROGRESS (14) as the outcome.
    b = Brokers({1: [[_g("one")]], 2: [14, [_g("two")]]})
    out = b.run(lambda a: a.list_groups())
    assert [g.group_id for g in out] == ["one", "two"]
    assert (len(b.asked[1]), len(b.asked[2])) == (1, 2)

    b = Brokers({1: [[_g("one")]], 2: [31]})  # CLUSTER_AUTHORIZATION_FAILED: final
    with pytest.raises(PartialFailureError) as info:
        b.run(lambda a: a.list_groups())
    results = info.value.results
    assert results[1] == [GroupListing("one", ConsumerGroupType.CLASSIC, "consumer",
                                       ConsumerGroupState.STABLE)]
    assert isinstance(results[2], ClusterAuthorizationFailedError)
    assert len(b.asked[2]) == 1


def test_a_filter_an_older_broker_cannot_carry_is_refused_before_sending() -> None:
    # Broken variant tried: dropping the types filter on v4 sends the request and lists
    # groups the caller excluded.
    b = Brokers({1: [[_g("old", gtype="", state="Stable")]]}, max_versions={LIST_GROUPS: 4})
    with pytest.raises(UnsupportedVersionError, match="v4"):
        b.run(lambda a: a.list_groups(types=["share"]))
    assert b.asked[1] == []
    out = b.run(lambda a: a.list_groups(states=["Stable"]))
    assert out == [GroupListing("old", ConsumerGroupType.UNKNOWN, "consumer",
                                ConsumerGroupState.STABLE)]
    assert not out[0].is_simple_consumer_group
    [(version, req)] = b.asked[1]
    assert (version, req.states_filter, req.types_filter) == (4, ["Stable"], [])


@pytest.mark.parametrize("kwargs", [{"types": ["bogus"]}, {"types": [ConsumerGroupType.UNKNOWN]},
                                    {"states": ["Unknown"]}, {"states": [3]}])
def test_an_unknown_state_or_type_is_refused_before_sending(kwargs: dict[str, Any]) -> None:
    # Broken variant tried: ConsumerGroupType.parse without the UNKNOWN check sends
    # types_filter ["unknown"].
    b = Brokers({1: [[_g("x")]]})
    with pytest.raises(InvalidArgumentError, match="unknown group"):
        b.run(lambda a: a.list_groups(**kwargs))
    assert b.asked[1] == []
    assert all(k != LIST_GROUPS for k, _v, _m in b.peers[1].requests)


def test_the_blocking_client_lists_the_same() -> None:
    b = Brokers({1: [[_g("x", "streams", "streams", "NotReady")]]})

    async def body(a: AsyncAdminClient) -> Any:
        def blocking() -> Any:
            with AdminClient({"bootstrap.servers": b.peers[1].bootstrap, **FAST}) as admin:
                return admin.list_groups(types=["streams"], timeout=5)
        return await asyncio.to_thread(blocking)

    assert b.run(body) == [GroupListing("x", ConsumerGroupType.STREAMS, "streams",
                                        ConsumerGroupState.NOT_READY)]
