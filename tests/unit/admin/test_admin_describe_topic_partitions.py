"""describe_topic_partitions (DescribeTopicPartitions, API 75, KIP-966) against a crafted
broker.

Tansu 0.6.0 answers v0 but ignores response_partition_limit (every partition on one page,
no cursor) and reports no topic for an empty list, and librdkafka's mock cluster does not
offer the API (both measured); tests/integration/test_admin_describe_topic_partitions.py
checks Tansu's real answer. Paging, the request fields, ELR fields, errors and retries are
checked here against a crafted peer (``tests/_crafted_broker.py``) that pages like Kafka's
DescribeTopicPartitionsRequestHandler: topics in name order, a page cut after ``limit``
partitions, the cursor naming the first partition left.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kontrakt._types import TopicPartition as TP
from kontrakt.clients.admin import AdminClient, PartitionDescription
from kontrakt.errors import (
    InvalidArgumentError,
    PartialFailureError,
    ProtocolError,
    UnsupportedVersionError,
)
from kontrakt.protocol.errors import UnknownTopicOrPartitionError
from kontrakt.protocol.messages import DescribeTopicPartitionsResponse
from tests._crafted_broker import CraftedBroker
from tests.unit.admin.test_admin_crafted import FAST, run

DTP = 75
R = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
P = R.DescribeTopicPartitionsResponsePartition
IDS = {"a": uuid.UUID(int=1), "b": uuid.UUID(int=2), "c": uuid.UUID(int=3)}


class Paging:
    """Topics a (3 partitions), b (2), c (1); partition p of each: leader p+1, replicas
    [p+1, 9], ISR [p+1], ELR [9], last known ELR [8], offline [7]. ``errors`` maps a topic
    to codes answered in turn; ``drop`` requests are left unanswered first."""

    def __init__(self, errors: dict[str, list[int]] | None = None, drop: int = 0,
                 stuck: bool = False, empty_cut_topic: bool = False) -> None:
        self.sizes = {"a": 3, "b": 2, "c": 1}
        self.errors = errors or {}
        self.drop = drop
        self.stuck = stuck
        # Kafka leaves out a topic the page ended before; True names it with no partitions.
        self.empty_cut_topic = empty_cut_topic
        self.asked: list[Any] = []

    def __call__(self, _v: int, req: Any) -> Any:
        self.asked.append(req)
        if self.drop:
            self.drop -= 1
            return None
        names = sorted({t.name for t in req.topics} if req.topics else self.sizes)
        cur = req.cursor
        if cur is not None:
            names = [n for n in names if n >= cur.topic_name]
        left = req.response_partition_limit
        topics, nxt = [], None
        for name in names:
            codes = self.errors.get(name, [])
            code = codes.pop(0) if codes else 0
            if name not in self.sizes or code:
                topics.append(R(error_code=code or 3, name=name))
                continue
            first = cur.partition_index if cur is not None and name == cur.topic_name else 0
            parts = []
            for p in range(first, self.sizes[name]):
                if left == 0:
                    nxt = DescribeTopicPartitionsResponse.Cursor(topic_name=name,
                                                                 partition_index=p)
                    break
                left -= 1
                parts.append(P(error_code=0, partition_index=p, leader_id=p + 1,
                               leader_epoch=4, replica_nodes=[p + 1, 9], isr_nodes=[p + 1],
                               eligible_leader_replicas=[9], last_known_elr=[8],
                               offline_replicas=[7]))
            if parts or self.empty_cut_topic:
                topics.append(R(error_code=0, name=name, topic_id=IDS[name],
                                partitions=parts))
            if nxt is not None:
                break
        if self.stuck and cur is not None:
            nxt = cur
        return DescribeTopicPartitionsResponse(topics=topics, next_cursor=nxt)


def _parts(desc: Any) -> list[int]:
    return [p.partition for p in desc.partitions]


def test_pages_follow_the_cursor_the_caller_passes_back() -> None:
    # Broken variant tried: sending cursor=None on every page (the cursor dropped) gives
    # the first page again.
    pg = Paging()

    async def body(a: Any) -> Any:
        pages = [await a.describe_topic_partitions(["b", "a"], response_partition_limit=2)]
        while pages[-1].next_cursor is not None:
            pages.append(await a.describe_topic_partitions(
                ["b", "a"], response_partition_limit=2, cursor=pages[-1].next_cursor))
        return pages

    p1, p2, p3 = run(CraftedBroker({DTP: pg}), body)
    assert ({n: _parts(d) for n, d in p1.topics.items()}, p1.next_cursor) == (
        {"a": [0, 1]}, TP("a", 2))
    assert ({n: _parts(d) for n, d in p2.topics.items()}, p2.next_cursor) == (
        {"a": [2], "b": [0]}, TP("b", 1))
    assert ({n: _parts(d) for n, d in p3.topics.items()}, p3.next_cursor) == (
        {"b": [1]}, None)
    assert [(sorted(t.name for t in r.topics), r.response_partition_limit,
             r.cursor and (r.cursor.topic_name, r.cursor.partition_index))
            for r in pg.asked] == [(["a", "b"], 2, None), (["a", "b"], 2, ("a", 2)),
                                   (["a", "b"], 2, ("b", 1))]
    assert p1.topics["a"].topic_id == IDS["a"]
    assert p1.topics["a"].partitions[1] == PartitionDescription(
        1, 2, 4, (2, 9), (2,), (7,), (9,), (8,))


@pytest.mark.parametrize("empty_cut_topic", [False, True])
def test_a_page_ending_before_a_topics_partitions_leaves_it_for_the_next(
        empty_cut_topic: bool) -> None:
    # Broken variant tried: without skipping the topic the cursor names, a peer that lists
    # it with no partitions makes it LEADER_NOT_AVAILABLE ("no partitions yet").
    pg = Paging(empty_cut_topic=empty_cut_topic)
    page = run(CraftedBroker({DTP: pg}), lambda a: a.describe_topic_partitions(
        ["a", "b"], response_partition_limit=2, cursor=TP("a", 1)))
    assert ({n: _parts(d) for n, d in page.topics.items()}, page.next_cursor) == (
        {"a": [1, 2]}, TP("b", 0))


def test_all_pages_merges_every_page_and_none_lists_every_topic() -> None:
    # Broken variant tried: all_pages stopping after the first page leaves "a" with
    # partitions [0] only.
    pg = Paging()
    out = run(CraftedBroker({DTP: pg}), lambda a: a.describe_topic_partitions(
        None, response_partition_limit=1, all_pages=True))
    assert out.next_cursor is None
    assert {n: _parts(d) for n, d in out.topics.items()} == {"a": [0, 1, 2], "b": [0, 1],
                                                             "c": [0]}
    assert len(pg.asked) == 6
    assert all(r.topics == [] for r in pg.asked)


def test_an_unknown_topic_fails_alone_a_dropped_request_is_sent_again() -> None:
    # Broken variant tried: the page without Router.call raises the dropped connection's
    # KafkaConnectionError.
    pg = Paging(drop=1)
    out = run(CraftedBroker({DTP: pg}), lambda a: a.describe_topic_partitions(
        ["c", "zz"], return_exceptions=True))
    assert _parts(out.topics["c"]) == [0]
    assert isinstance(out.topics["zz"], UnknownTopicOrPartitionError)
    assert len(pg.asked) == 2
    with pytest.raises(PartialFailureError) as info:
        run(CraftedBroker({DTP: Paging()}), lambda a: a.describe_topic_partitions(["c", "zz"]))
    assert set(info.value.results) == {"c", "zz"}
    with pytest.raises(UnknownTopicOrPartitionError):
        run(CraftedBroker({DTP: Paging()}), lambda a: a.describe_topic_partitions(["zz"]))


def test_all_pages_asks_again_for_a_topic_still_being_created() -> None:
    # Broken variant tried: all_pages over Router.call (no per-topic retry) ends with b's
    # LEADER_NOT_AVAILABLE (5).
    pg = Paging(errors={"b": [5]})
    out = run(CraftedBroker({DTP: pg}), lambda a: a.describe_topic_partitions(
        ["a", "b"], all_pages=True))
    assert {n: _parts(d) for n, d in out.topics.items()} == {"a": [0, 1, 2], "b": [0, 1]}
    assert [sorted(t.name for t in r.topics) for r in pg.asked] == [["a", "b"], ["b"]]


def test_a_cursor_that_does_not_advance_is_a_protocol_error() -> None:
    # Broken variant tried: without the check, all_pages asks the same page until the
    # timeout.
    with pytest.raises(ProtocolError, match="did not advance"):
        run(CraftedBroker({DTP: Paging(stuck=True)}), lambda a: a.describe_topic_partitions(
            ["a"], response_partition_limit=1, all_pages=True, timeout=5))


def test_a_broker_without_the_api_raises_unsupported_version() -> None:
    broker = CraftedBroker({})
    with pytest.raises(UnsupportedVersionError):
        run(broker, lambda a: a.describe_topic_partitions(["a"], timeout=2))
    assert not [k for k, _v, _m in broker.requests if k == DTP]


@pytest.mark.parametrize("kwargs", [
    {"response_partition_limit": 0}, {"response_partition_limit": True},
    {"cursor": TP("b", 0)}, {"cursor": TP("a", -1)}, {"cursor": ("a", 0)},
    {"topics": ["bad name"]}])
def test_bad_input_is_refused_before_sending(kwargs: dict[str, Any]) -> None:
    # Broken variant tried: no check on the cursor's topic sends cursor ("b", 0) for ["a"]
    # (Kafka: INVALID_REQUEST).
    pg = Paging()
    args: dict[str, Any] = {"topics": ["a"], **kwargs}
    with pytest.raises(InvalidArgumentError):
        run(CraftedBroker({DTP: pg}), lambda a: a.describe_topic_partitions(
            args.pop("topics"), **args))
    assert pg.asked == []


def test_the_blocking_client_pages_the_same() -> None:
    async def body(a: Any) -> Any:
        import asyncio

        def blocking() -> Any:
            with AdminClient({"bootstrap.servers": a.client.config["bootstrap.servers"],
                              **FAST}) as admin:
                return admin.describe_topic_partitions(["a"], response_partition_limit=2,
                                                       cursor=TP("a", 1), timeout=5)
        return await asyncio.to_thread(blocking)

    page = run(CraftedBroker({DTP: Paging()}), body)
    assert ({n: _parts(d) for n, d in page.topics.items()}, page.next_cursor) == (
        {"a": [1, 2]}, None)
