"""abort_transaction against crafted WriteTxnMarkers answers.

Neither test broker answers WriteTxnMarkers (API 27) from a client: Tansu 0.6.0 does not
advertise it and librdkafka's mock cluster has no admin APIs. So the request the leader
receives, the routing to the partition's leader (two crafted peers, the leader being the
second), the retry after a leader change and the per-partition errors are checked against
crafted peers (``tests/_crafted_broker.py``); the codec is checked byte for byte against
kafka-python in tests/unit/test_messages_admin_ops.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kontrakt._types import TopicPartition as TP
from kontrakt.clients.admin import AbortTransactionSpec, AdminClient, AsyncAdminClient
from kontrakt.errors import InvalidArgumentError, ProtocolError
from kontrakt.protocol.errors import (
    ClusterAuthorizationFailedError,
    InvalidProducerEpochError,
    NotLeaderOrFollowerError,
    TransactionCoordinatorFencedError,
    UnknownTopicOrPartitionError,
)
from kontrakt.protocol.messages import MetadataResponse, WriteTxnMarkersResponse
from tests._crafted_broker import CraftedBroker
from tests.unit.admin.test_admin_crafted import FAST, run

WRITE_TXN_MARKERS, METADATA = 27, 3
NOT_LEADER_OR_FOLLOWER, INVALID_PRODUCER_EPOCH, COORDINATOR_FENCED = 6, 47, 52
CLUSTER_AUTHORIZATION_FAILED = 31
SPEC = AbortTransactionSpec(TP("t", 1), producer_id=4000, producer_epoch=5,
                            coordinator_epoch=12)
MR = WriteTxnMarkersResponse.WritableTxnMarkerResult


class Markers:
    """Answers WriteTxnMarkers echoing each marker's producer and partitions, with the error
    codes of ``errors`` in turn (the last one from then on)."""

    def __init__(self, *errors: int, producer_id: int | None = None) -> None:
        self.errors = list(errors) or [0]
        self.producer_id = producer_id
        self.asked: list[tuple[int, Any]] = []

    def __call__(self, ver: int, req: Any) -> Any:
        self.asked.append((ver, req))
        code = self.errors.pop(0) if len(self.errors) > 1 else self.errors[0]
        return WriteTxnMarkersResponse(markers=[MR(
            producer_id=m.producer_id if self.producer_id is None else self.producer_id,
            topics=[MR.WritableTxnMarkerTopicResult(name=t.name, partitions=[
                MR.WritableTxnMarkerTopicResult.WritableTxnMarkerPartitionResult(
                    partition_index=i, error_code=code) for i in t.partition_indexes])
                for t in m.topics]) for m in req.markers])


def _markers_sent(req: Any) -> list[tuple[int, int, bool, int, int, list[tuple[str, list[int]]]]]:
    return [(m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch,
             m.transaction_version, [(t.name, list(t.partition_indexes)) for t in m.topics])
            for m in req.markers]


def test_the_leader_gets_one_abort_marker_for_the_partition() -> None:
    markers = Markers()
    assert run(CraftedBroker({WRITE_TXN_MARKERS: markers}, topics={"t": 2}),
               lambda a: a.abort_transaction(SPEC)) is None
    [(version, req)] = markers.asked
    assert version == 2
    # transaction_result False is the abort; transaction version 0 is the classic marker
    assert _markers_sent(req) == [(4000, 5, False, 12, 0, [("t", [1])])]


def test_a_v1_leader_gets_the_same_marker() -> None:
    markers = Markers()
    run(CraftedBroker({WRITE_TXN_MARKERS: markers}, topics={"t": 2},
                      max_versions={WRITE_TXN_MARKERS: 1}),
        lambda a: a.abort_transaction(SPEC))
    [(version, req)] = markers.asked
    assert version == 1
    assert _markers_sent(req) == [(4000, 5, False, 12, 0, [("t", [1])])]


def test_the_marker_goes_to_the_partitions_leader_not_the_bootstrap_broker() -> None:
    # Two crafted peers; both report node 1 (first) and node 2 (second), node 2 leading
    # partition t-1. Only node 2 may be asked.
    on_first, on_second = Markers(), Markers()
    first = CraftedBroker({WRITE_TXN_MARKERS: on_first})
    second = CraftedBroker({WRITE_TXN_MARKERS: on_second})

    def metadata(ver: int, req: Any) -> Any:
        t_ = MetadataResponse.MetadataResponseTopic
        p_ = t_.MetadataResponsePartition
        return MetadataResponse(
            brokers=[MetadataResponse.MetadataResponseBroker(node_id=n, host="127.0.0.1",
                                                             port=b.port)
                     for n, b in ((1, first), (2, second))],
            cluster_id="crafted", controller_id=1, topics=[t_(name="t", partitions=[
                p_(partition_index=i, leader_id=1 + i, replica_nodes=[1, 2], isr_nodes=[1, 2])
                for i in (0, 1)])])

    first.handlers[METADATA] = second.handlers[METADATA] = metadata

    async def main() -> None:
        async with first, second, AsyncAdminClient(
                {"bootstrap.servers": first.bootstrap, **FAST}) as admin:
            await asyncio.wait_for(admin.abort_transaction(SPEC), 20)

    asyncio.run(main())
    assert on_first.asked == []
    assert [_markers_sent(r) for _v, r in on_second.asked] == [
        [(4000, 5, False, 12, 0, [("t", [1])])]]


def test_a_leader_change_is_retried_on_fresh_metadata() -> None:
    markers = Markers(NOT_LEADER_OR_FOLLOWER, 0)
    broker = CraftedBroker({WRITE_TXN_MARKERS: markers}, topics={"t": 2})
    run(broker, lambda a: a.abort_transaction(SPEC))
    assert len(markers.asked) == 2
    keys = [k for k, _v, _r in broker.requests]
    first, second = (i for i, k in enumerate(keys) if k == WRITE_TXN_MARKERS)
    assert METADATA in keys[first + 1:second]  # the leader was looked up again


def test_a_leader_change_that_lasts_ends_at_the_timeout_with_its_error() -> None:
    markers = Markers(NOT_LEADER_OR_FOLLOWER)
    with pytest.raises(NotLeaderOrFollowerError):
        run(CraftedBroker({WRITE_TXN_MARKERS: markers}, topics={"t": 2}),
            lambda a: a.abort_transaction(SPEC, timeout=0.5))
    assert len(markers.asked) >= 2


@pytest.mark.parametrize(("code", "error"), [
    (INVALID_PRODUCER_EPOCH, InvalidProducerEpochError),
    (COORDINATOR_FENCED, TransactionCoordinatorFencedError),
    (CLUSTER_AUTHORIZATION_FAILED, ClusterAuthorizationFailedError),
])
def test_a_refused_marker_raises_its_error_without_retrying(code: int,
                                                            error: type[Exception]) -> None:
    markers = Markers(code)
    with pytest.raises(error, match="producer 4000 on t-1"):
        run(CraftedBroker({WRITE_TXN_MARKERS: markers}, topics={"t": 2}),
            lambda a: a.abort_transaction(SPEC, timeout=10))
    assert len(markers.asked) == 1


def test_an_answer_about_another_producer_is_a_protocol_error() -> None:
    markers = Markers(producer_id=4001)
    with pytest.raises(ProtocolError, match="producer 4001 on t-1, not only producer 4000 on t-1"):
        run(CraftedBroker({WRITE_TXN_MARKERS: markers}, topics={"t": 2}),
            lambda a: a.abort_transaction(SPEC))


def test_a_partition_the_metadata_lacks_fails_without_a_marker() -> None:
    markers = Markers()
    with pytest.raises(UnknownTopicOrPartitionError):
        run(CraftedBroker({WRITE_TXN_MARKERS: markers}, topics={"t": 1}),
            lambda a: a.abort_transaction(SPEC, timeout=10))
    assert markers.asked == []


@pytest.mark.parametrize("spec", [
    AbortTransactionSpec(TP("t", -1), 1, 0, 0),
    AbortTransactionSpec(TP("", 0), 1, 0, 0),
    AbortTransactionSpec(TP("t", 0), -1, 0, 0),
    AbortTransactionSpec(TP("t", 0), 1, 32768, 0),
    AbortTransactionSpec(TP("t", 0), 1, 0, -2),
    AbortTransactionSpec(TP("t", 0), True, 0, 0),
    (TP("t", 0), 1, 0, 0),
])
def test_bad_specs_are_refused_before_anything_is_sent(spec: Any) -> None:
    markers = Markers()
    with pytest.raises(InvalidArgumentError):
        run(CraftedBroker({WRITE_TXN_MARKERS: markers}, topics={"t": 1}),
            lambda a: a.abort_transaction(spec))
    assert markers.asked == []


def test_the_blocking_client_aborts_too() -> None:
    markers = Markers()

    async def main() -> Any:
        async with CraftedBroker({WRITE_TXN_MARKERS: markers}, topics={"t": 2}) as broker:
            def blocking() -> Any:
                with AdminClient({"bootstrap.servers": broker.bootstrap, **FAST}) as admin:
                    return admin.abort_transaction(SPEC, timeout=10)
            return await asyncio.to_thread(blocking)

    assert asyncio.run(main()) is None
    assert [_markers_sent(r) for _v, r in markers.asked] == [
        [(4000, 5, False, 12, 0, [("t", [1])])]]
