"""find_hanging_transactions against a crafted broker: which open transactions it reports
(KIP-664's rule, as ``kafka-transactions.sh find-hanging``) and what it asks.

Neither test broker can show a hanging transaction: Tansu 0.6.0 offers no
DescribeProducers, and librdkafka's mock cluster no admin APIs. So the crafted peer
(``tests/_crafted_broker.py``) plays leader and coordinator with producer states chosen to
cover each case: an old open transaction whose producer no coordinator lists, one whose
coordinator lists the partition (not hanging), one whose coordinator's transaction lacks
the partition, one whose transactional id is not found, a recent one and a closed one.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from kontrakt._types import TopicPartition as TP
from kontrakt.clients.admin import AbortTransactionSpec, HangingTransaction
from kontrakt.errors import InvalidArgumentError
from kontrakt.protocol.errors import TransactionalIdAuthorizationFailedError
from kontrakt.protocol.messages import (
    DescribeProducersResponse,
    DescribeTransactionsResponse,
    ListTransactionsResponse,
    WriteTxnMarkersResponse,
)
from tests._crafted_broker import CraftedBroker
from tests.unit.admin.test_admin_crafted import run

DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 61, 65, 66
WRITE_TXN_MARKERS = 27
TRANSACTIONAL_ID_NOT_FOUND, TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 105, 53
MINUTE = 60_000
OLD = 20 * MINUTE  # older than the default 15-minute transaction.max.timeout.ms
TOPICS = {"t": 3, "u": 1}


class Cluster:
    """Leader and coordinator of the scenario in the module doc. ``now`` is fixed when
    made; producer timestamps are relative to it."""

    def __init__(self, describe_error: int = TRANSACTIONAL_ID_NOT_FOUND) -> None:
        now = int(time.time() * 1000)
        # partition -> [(producer id, epoch, coordinator epoch, txn start offset, age ms)]
        self.producers: dict[TP, list[tuple[int, int, int, int, int]]] = {
            TP("t", 0): [(1, 3, 7, 40, OLD)],          # no coordinator lists producer 1
            TP("t", 1): [(2, 0, 7, 10, OLD)],          # tx2 includes t-1: not hanging
            TP("t", 2): [(3, 1, 7, 12, OLD)],          # tx3 does not include t-2
            TP("u", 0): [(4, 0, 7, 5, MINUTE),         # recent
                         (5, 0, 7, -1, OLD),           # no open transaction
                         (6, 2, 9, 8, OLD)],           # tx6 not found
        }
        self.now = now
        self.describe_error = describe_error
        self.asked: dict[int, list[Any]] = {}

    def handlers(self) -> dict[int, Any]:
        return {DESCRIBE_PRODUCERS: self.describe_producers,
                LIST_TRANSACTIONS: self.list_transactions,
                DESCRIBE_TRANSACTIONS: self.describe_transactions}

    def describe_producers(self, ver: int, req: Any) -> Any:
        self.asked.setdefault(DESCRIBE_PRODUCERS, []).append(req)
        tr = DescribeProducersResponse.TopicResponse
        pr = tr.PartitionResponse
        return DescribeProducersResponse(topics=[tr(name=t.name, partitions=[pr(
            partition_index=i, active_producers=[pr.ProducerState(
                producer_id=pid, producer_epoch=epoch, coordinator_epoch=cepoch,
                current_txn_start_offset=start, last_timestamp=self.now - age,
                last_sequence=0)
                for pid, epoch, cepoch, start, age in self.producers.get(TP(t.name, i), [])])
            for i in t.partition_indexes]) for t in req.topics])

    def list_transactions(self, ver: int, req: Any) -> Any:
        self.asked.setdefault(LIST_TRANSACTIONS, []).append(req)
        ts = ListTransactionsResponse.TransactionState
        known = {2: "tx2", 3: "tx3", 6: "tx6", 99: "tx99"}  # 99: an id nobody asked about
        return ListTransactionsResponse(transaction_states=[
            ts(transactional_id=tid, producer_id=pid, transaction_state="Ongoing")
            for pid, tid in known.items()])

    def describe_transactions(self, ver: int, req: Any) -> Any:
        self.asked.setdefault(DESCRIBE_TRANSACTIONS, []).append(req)
        ts = DescribeTransactionsResponse.TransactionState
        parts = {"tx2": [("t", [1])], "tx3": [("t", [1])]}
        return DescribeTransactionsResponse(transaction_states=[
            ts(transactional_id=tid, error_code=self.describe_error) if tid not in parts else
            ts(transactional_id=tid, transaction_state="Ongoing", transaction_timeout_ms=60000,
               transaction_start_time_ms=self.now - OLD, producer_id=int(tid[2:]),
               producer_epoch=0, topics=[ts.TopicData(topic=t, partitions=ps)
                                         for t, ps in parts[tid]])
            for tid in req.transactional_ids])


def _hanging(c: Cluster, tp: TP, pid: int, epoch: int, cepoch: int, start: int) -> Any:
    return HangingTransaction(tp, pid, epoch, cepoch, start, c.now - OLD)


def test_reports_open_transactions_their_coordinators_do_not_know() -> None:
    c = Cluster()
    out = run(CraftedBroker(c.handlers(), topics=TOPICS),
              lambda a: a.find_hanging_transactions())
    assert out == [_hanging(c, TP("t", 0), 1, 3, 7, 40), _hanging(c, TP("t", 2), 3, 1, 7, 12),
                   _hanging(c, TP("u", 0), 6, 2, 9, 8)]
    # every partition of every topic was asked about, at its leader, in one request
    [producers] = c.asked[DESCRIBE_PRODUCERS]
    assert sorted((t.name, p) for t in producers.topics for p in t.partition_indexes) == [
        ("t", 0), ("t", 1), ("t", 2), ("u", 0)]
    # only the old open transactions' producers are looked up, then their ids described
    [listing] = c.asked[LIST_TRANSACTIONS]
    assert sorted(listing.producer_id_filters) == [1, 2, 3, 6]
    [described] = c.asked[DESCRIBE_TRANSACTIONS]
    assert sorted(described.transactional_ids) == ["tx2", "tx3", "tx6"]


def test_the_timeout_decides_what_is_old_enough() -> None:
    c = Cluster()
    out = run(CraftedBroker(c.handlers(), topics=TOPICS),
              lambda a: a.find_hanging_transactions(max_transaction_timeout_ms=30 * MINUTE))
    assert out == []
    assert LIST_TRANSACTIONS not in c.asked  # no candidates: no coordinator is asked
    out = run(CraftedBroker(c.handlers(), topics=TOPICS),
              lambda a: a.find_hanging_transactions(max_transaction_timeout_ms=MINUTE // 2))
    assert TP("u", 0) in {h.topic_partition for h in out if h.producer_id == 4}


def test_given_partitions_only_those_are_asked_about() -> None:
    c = Cluster()
    out = run(CraftedBroker(c.handlers(), topics=TOPICS),
              lambda a: a.find_hanging_transactions([TP("t", 2)]))
    assert out == [_hanging(c, TP("t", 2), 3, 1, 7, 12)]
    assert [(t.name, list(t.partition_indexes))
            for r in c.asked[DESCRIBE_PRODUCERS] for t in r.topics] == [("t", [2])]


def test_broker_ids_keep_the_partitions_with_a_replica_there() -> None:
    c = Cluster()
    out = run(CraftedBroker(c.handlers(), topics=TOPICS),
              lambda a: a.find_hanging_transactions(broker_ids=[2]))
    assert out == [] and DESCRIBE_PRODUCERS not in c.asked  # node 1 holds every replica
    out = run(CraftedBroker(c.handlers(), topics=TOPICS),
              lambda a: a.find_hanging_transactions(broker_ids=[1]))
    assert len(out) == 3


def test_a_coordinator_error_other_than_not_found_fails_the_call() -> None:
    c = Cluster(describe_error=TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    with pytest.raises(TransactionalIdAuthorizationFailedError):
        run(CraftedBroker(c.handlers(), topics=TOPICS),
            lambda a: a.find_hanging_transactions(timeout=10))


def test_bad_arguments_are_refused() -> None:
    for kwargs in ({"partitions": [TP("t", 0)], "broker_ids": [1]},
                   {"max_transaction_timeout_ms": -1}, {"partitions": [("t", 0)]}):
        c = Cluster()
        with pytest.raises(InvalidArgumentError):
            run(CraftedBroker(c.handlers(), topics=TOPICS),
                lambda a, kw=kwargs: a.find_hanging_transactions(**kw))
        assert c.asked == {}


def test_what_it_finds_can_be_aborted() -> None:
    c = Cluster()
    markers: list[Any] = []

    def write(ver: int, req: Any) -> Any:
        markers.append(req)
        mr = WriteTxnMarkersResponse.WritableTxnMarkerResult
        return WriteTxnMarkersResponse(markers=[mr(producer_id=m.producer_id, topics=[
            mr.WritableTxnMarkerTopicResult(name=t.name, partitions=[
                mr.WritableTxnMarkerTopicResult.WritableTxnMarkerPartitionResult(
                    partition_index=i) for i in t.partition_indexes]) for t in m.topics])
            for m in req.markers])

    async def body(a: Any) -> list[AbortTransactionSpec]:
        found = await a.find_hanging_transactions()
        for h in found:
            await a.abort_transaction(h.abort_spec())
        return [h.abort_spec() for h in found]

    specs = run(CraftedBroker({**c.handlers(), WRITE_TXN_MARKERS: write}, topics=TOPICS), body)
    assert specs[0] == AbortTransactionSpec(TP("t", 0), 1, 3, 7)
    assert [(m.producer_id, m.producer_epoch, m.coordinator_epoch, m.transaction_result)
            for r in markers for m in r.markers] == [(1, 3, 7, False), (3, 1, 7, False),
                                                     (6, 2, 9, False)]
