"""wait_for_topics against a crafted broker whose Metadata answers change over time.

Tansu makes a topic usable as soon as CreateTopics answers and the mock cluster has no
CreateTopics, so the waiting itself (a topic unknown at first, partitions without a
leader, a final error, the timeout's message) is checked against a crafted peer
(``tests/_crafted_broker.py``); tests/integration/test_admin_wait_for_topics.py checks
Tansu's created and missing topics.
"""

from __future__ import annotations

from typing import Any

import pytest

from kontrakt.errors import InvalidArgumentError, KafkaTimeoutError, PartialFailureError
from kontrakt.protocol.errors import TopicAuthorizationFailedError
from kontrakt.protocol.messages import MetadataResponse
from tests._crafted_broker import NODE_ID, CraftedBroker
from tests.unit.admin.test_admin_crafted import run

METADATA = 3
MR = MetadataResponse
T_ = MR.MetadataResponseTopic


class Appearing:
    """Metadata where topic ``name`` goes through ``states`` (one per request naming it,
    the last from then on): an error code, or a list of leaders (one per partition)."""

    def __init__(self, **states: list[int | list[int]]) -> None:
        self.states = states
        self.asked: list[Any] = []
        self.broker = CraftedBroker({METADATA: self})

    def __call__(self, _v: int, req: Any) -> Any:
        self.asked.append(req)
        topics = []
        for t in req.topics or []:
            todo = self.states.get(t.name, [3])
            state = todo.pop(0) if len(todo) > 1 else todo[0]
            if isinstance(state, int):
                topics.append(T_(error_code=state, name=t.name))
                continue
            topics.append(T_(error_code=0, name=t.name, partitions=[
                T_.MetadataResponsePartition(
                    error_code=0 if leader >= 0 else 5, partition_index=i, leader_id=leader,
                    replica_nodes=[NODE_ID], isr_nodes=[NODE_ID])
                for i, leader in enumerate(state)]))
        return MR(brokers=[MR.MetadataResponseBroker(node_id=NODE_ID, host="127.0.0.1",
                                                     port=self.broker.port)],
                  cluster_id="crafted", controller_id=NODE_ID, topics=topics)


def _asked_for(m: Appearing) -> list[list[str]]:
    return [sorted(t.name for t in r.topics) for r in m.asked if r.topics]


def test_it_returns_once_every_topic_is_known_with_a_leader_per_partition() -> None:
    # Broken variant tried: checking only the topic's error code (not the leaders)
    # returns while b's partition 1 has no leader: one request fewer.
    m = Appearing(a=[3, [1, 1]], b=[[1, -1], [1, -1], [1, 1]])
    assert run(m.broker, lambda adm: adm.wait_for_topics(["a", "b"], timeout=10)) is None
    # a: unknown, then usable; b: leaderless twice, then usable. Only pending topics
    # are asked for again.
    assert _asked_for(m) == [["a", "b"], ["a", "b"], ["b"]]
    assert all(not r.allow_auto_topic_creation for r in m.asked)


def test_the_timeout_names_each_topic_not_usable_and_why() -> None:
    # Broken variant tried: a bare KafkaTimeoutError from the last Metadata exchange
    # names no topic.
    m = Appearing(a=[3], b=[[1, -1, -1]], c=[[]])
    with pytest.raises(KafkaTimeoutError) as info:
        run(m.broker, lambda adm: adm.wait_for_topics(["a", "b", "c"], timeout=0.5))
    text = str(info.value)
    assert "'a': UNKNOWN_TOPIC_OR_PARTITION" in text
    assert "'b': partitions [1, 2] have no leader" in text
    assert "'c': no partitions yet" in text


def test_a_final_topic_error_is_raised_at_once() -> None:
    # Broken variant tried: treating every error as "not yet" waits for the timeout and
    # raises KafkaTimeoutError.
    m = Appearing(a=[29])  # TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(TopicAuthorizationFailedError):
        run(m.broker, lambda adm: adm.wait_for_topics(["a"], timeout=10))
    assert len(_asked_for(m)) == 1
    m = Appearing(a=[29], b=[29], c=[[1]])
    with pytest.raises(PartialFailureError) as info:
        run(m.broker, lambda adm: adm.wait_for_topics(["a", "b", "c"], timeout=10))
    assert set(info.value.results) >= {"a", "b"}


@pytest.mark.parametrize("topics", [["bad name"], [""], ["a", "a"]])
def test_bad_names_are_refused_before_sending(topics: list[str]) -> None:
    m = Appearing(a=[[1]])
    with pytest.raises(InvalidArgumentError):
        run(m.broker, lambda adm: adm.wait_for_topics(topics))
    assert _asked_for(m) == []
