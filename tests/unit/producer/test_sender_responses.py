"""How the sender matches a Produce response's answers to its batches, on crafted responses.

Produce v13 (KIP-516) names topics by id only. Neither test broker answers v13 (Tansu and
librdkafka's mock cluster stop below it), so the matching is shown here on responses made
with the protocol classes and sent through the v13 codec.
"""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

from kontrakt.clients.producer._sender import Sender
from kontrakt.protocol.codec import decode_struct, encode_struct
from kontrakt.protocol.headers import encode_response
from kontrakt.protocol.messages import ProduceResponse
from kontrakt.protocol.produce import ProduceWire, answers_of

_Topic = ProduceResponse.TopicProduceResponse
_Partition = _Topic.PartitionProduceResponse


class _Recorder:
    """The parts of a Sender that _handle reports to, recording what it is told."""

    def __init__(self, topics: dict[str, Any]) -> None:
        self.client = SimpleNamespace(cluster=SimpleNamespace(topics=topics))
        self.outcome: dict[tuple[str, int], Any] = {}

    def _succeed(self, b: Any, base_offset: int, log_append_time: int) -> None:
        self.outcome[(b.topic, b.partition)] = ("ok", base_offset)

    def _retry(self, b: Any, cause: BaseException) -> None:
        self.outcome[(b.topic, b.partition)] = ("retry", str(cause))

    def _on_error(self, b: Any, code: int, detail: str | None) -> None:
        self.outcome[(b.topic, b.partition)] = ("error", code)


def _batch(topic: str, partition: int) -> Any:
    return SimpleNamespace(topic=topic, partition=partition)


def _wire(resp: Any, version: int) -> Any:
    return decode_struct(ProduceResponse, version, encode_struct(resp, version))


def _answers(resp: Any, version: int) -> Any:
    """The answers the sender gets for ``resp`` as a broker writes it: read by the
    producer's reader, and the same as the declared codec's."""
    frame = encode_response(resp, version, 7)[4:]
    answers = ProduceWire(version, "cid", None, -1, 1000).answers(frame)
    assert answers == answers_of(_wire(resp, version))
    return answers


def test_answers_by_topic_id_reach_their_batches() -> None:
    ids = {"orders": uuid.uuid4(), "payments": uuid.uuid4(), "other": uuid.uuid4()}
    sender = _Recorder({n: SimpleNamespace(topic_id=i) for n, i in ids.items()})
    resp = _wire(ProduceResponse(responses=[
        _Topic(topic_id=ids["payments"], partition_responses=[
            _Partition(index=1, error_code=0, base_offset=40)]),
        _Topic(topic_id=ids["orders"], partition_responses=[
            _Partition(index=0, error_code=0, base_offset=7),
            _Partition(index=2, error_code=6, base_offset=-1)]),
    ]), 13)
    assert all(t.name == "" for t in resp.responses)  # v13 carries no names
    batches = [_batch("orders", 0), _batch("orders", 2), _batch("payments", 1),
               _batch("orders", 1)]
    Sender._handle(sender, _answers(resp, 13), batches)  # type: ignore[arg-type]
    assert sender.outcome[("orders", 0)] == ("ok", 7)
    assert sender.outcome[("payments", 1)] == ("ok", 40)
    assert sender.outcome[("orders", 2)] == ("error", 6)
    # A batch the response does not answer is retried, never taken as sent.
    assert sender.outcome[("orders", 1)][0] == "retry"
    assert "no answer for orders-1" in sender.outcome[("orders", 1)][1]


def test_answers_by_name_do_not_need_topic_ids() -> None:
    # Below v13 the names match; the cluster's topic ids are not looked at (an empty
    # metadata map here would give no name for an id).
    sender = _Recorder({})
    resp = _wire(ProduceResponse(responses=[
        _Topic(name="orders", partition_responses=[
            _Partition(index=0, error_code=0, base_offset=3)]),
    ]), 12)
    Sender._handle(sender, _answers(resp, 12), [_batch("orders", 0)])  # type: ignore[arg-type]
    assert sender.outcome == {("orders", 0): ("ok", 3)}


def test_an_unknown_topic_id_answers_no_batch() -> None:
    sender = _Recorder({"orders": SimpleNamespace(topic_id=uuid.uuid4())})
    resp = _wire(ProduceResponse(responses=[
        _Topic(topic_id=uuid.uuid4(), partition_responses=[
            _Partition(index=0, error_code=0, base_offset=3)]),
    ]), 13)
    Sender._handle(sender, _answers(resp, 13), [_batch("orders", 0)])  # type: ignore[arg-type]
    assert sender.outcome[("orders", 0)][0] == "retry"
