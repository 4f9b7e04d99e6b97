"""Transactions on the cluster: markers, the last stable offset, the aborted-transaction index
and fencing, run by Kontrakt and by every peer that has transactions, and read back by
read_committed consumers of all four clients. Neither Tansu (no aborted transactions in
Fetch) nor the mock cluster (read_committed filters nothing) can check this."""

from __future__ import annotations

import asyncio
import time
import warnings
from typing import Any

import pytest

from kontrakt import AsyncProducer, Consumer, Producer
from kontrakt._types import TopicPartition as TP
from kontrakt.errors import TransactionAbortableError, TransactionFatalError
from kontrakt.protocol import errors as E
from kontrakt.protocol.messages import (
    AddPartitionsToTxnRequest,
    ApiVersionsRequest,
    EndTxnRequest,
    FetchRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
)
from kontrakt.protocol.records import iter_batches
from kontrakt.testing import Cluster, send_request
from tests.cluster.conftest import batch, call

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka

import aiokafka
import confluent_kafka

pytestmark = pytest.mark.interop


def _read_kontrakt(bs: str, topic: str, isolation: str, expect: int) -> list[bytes]:
    out: list[bytes] = []
    with Consumer(bootstrap_servers=bs, isolation_level=isolation,
                  auto_offset_reset="earliest") as c:
        c.assign([TP(topic, 0)])
        end = c.end_offsets([TP(topic, 0)])[TP(topic, 0)]
        deadline = time.monotonic() + 10
        while c.position(TP(topic, 0)) < end and time.monotonic() < deadline:
            r = c.poll(0.2)
            if r is not None:
                out.append(r.value)
    assert len(out) == expect, out
    return out


def _read_confluent(bs: str, topic: str, expect: int) -> list[bytes]:
    c = confluent_kafka.Consumer({"bootstrap.servers": bs, "group.id": "rc-ck",
                                  "isolation.level": "read_committed",
                                  "auto.offset.reset": "earliest", "log_level": 3})
    out: list[bytes] = []
    try:
        c.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 10
        while len(out) < expect and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                out.append(m.value())
        # Nothing beyond the committed records arrives.
        extra = c.poll(0.5)
        assert extra is None or extra.error() is not None
    finally:
        c.close()
    return out


def _read_kafka_python(bs: str, topic: str, expect: int) -> list[bytes]:
    c = kafka.KafkaConsumer(bootstrap_servers=bs, isolation_level="read_committed",
                            auto_offset_reset="earliest", enable_auto_commit=False)
    out: list[bytes] = []
    try:
        c.assign([kafka.TopicPartition(topic, 0)])
        deadline = time.monotonic() + 10
        while len(out) < expect and time.monotonic() < deadline:
            for recs in c.poll(200).values():
                out.extend(r.value for r in recs)
        for recs in c.poll(500).values():
            out.extend(r.value for r in recs)
    finally:
        c.close()
    return out


def _read_aiokafka(bs: str, topic: str, expect: int) -> list[bytes]:
    async def main() -> list[bytes]:
        c = aiokafka.AIOKafkaConsumer(bootstrap_servers=bs, isolation_level="read_committed",
                                      auto_offset_reset="earliest", enable_auto_commit=False)
        await c.start()
        out: list[bytes] = []
        try:
            c.assign([aiokafka.TopicPartition(topic, 0)])
            deadline = time.monotonic() + 10
            while len(out) < expect and time.monotonic() < deadline:
                for recs in (await c.getmany(timeout_ms=200)).values():
                    out.extend(r.value for r in recs)
            for recs in (await c.getmany(timeout_ms=500)).values():
                out.extend(r.value for r in recs)
        finally:
            await c.stop()
        return out

    return asyncio.run(main())


def _check_everyone_hides_aborted(bs: str, topic: str, committed: list[bytes],
                                  total: int) -> None:
    assert _read_kontrakt(bs, topic, "read_committed", len(committed)) == committed
    assert len(_read_kontrakt(bs, topic, "read_uncommitted", total)) == total
    assert _read_confluent(bs, topic, len(committed)) == committed
    assert _read_kafka_python(bs, topic, len(committed)) == committed
    assert _read_aiokafka(bs, topic, len(committed)) == committed


def test_kontrakt_transactions_commit_and_abort(cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic)
    bs = cluster.bootstrap_servers
    with Producer(bootstrap_servers=bs, transactional_id="tx-k") as p:
        p.init_transactions()
        for tag, commit in (("a", True), ("b", False), ("c", True)):
            p.begin_transaction()
            for i in range(3):
                p.send(topic, f"{tag}{i}".encode(), partition=0)
            p.flush(10)  # written before the abort, so read_committed has to hide them
            if commit:
                p.commit_transaction()
            else:
                p.abort_transaction()
    # 9 records and 3 markers.
    assert cluster.end_offsets(topic) == [12]
    committed = [f"{t}{i}".encode() for t in "ac" for i in range(3)]
    _check_everyone_hides_aborted(bs, topic, committed, 9)


def test_confluent_transaction_with_offsets_commits_them_only_on_commit(
        cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic)
    cluster.create_topic(topic + "-in")
    bs = cluster.bootstrap_servers
    p = confluent_kafka.Producer({"bootstrap.servers": bs, "transactional.id": "tx-ck",
                                  "log_level": 0})
    p.init_transactions(10)
    meta_consumer = confluent_kafka.Consumer({"bootstrap.servers": bs, "group.id": "tx-group",
                                              "log_level": 0})
    group = meta_consumer.consumer_group_metadata()
    meta_consumer.close()
    for tag, offset, commit in (("x", 5, False), ("y", 7, True), ("z", 9, False)):
        p.begin_transaction()
        for i in range(4):
            p.produce(topic, f"{tag}{i}".encode(), partition=0)
        assert p.flush(10) == 0  # written before an abort, so read_committed must hide them
        p.send_offsets_to_transaction(
            [confluent_kafka.TopicPartition(topic + "-in", 0, offset)], group, 10)
        if commit:
            p.commit_transaction(10)
        else:
            p.abort_transaction(10)
    with Consumer(bootstrap_servers=bs, group_id="tx-group") as c:
        got = c.committed([TP(topic + "-in", 0)])[TP(topic + "-in", 0)]
        assert got is not None and got.offset == 7
    _check_everyone_hides_aborted(bs, topic, [f"y{i}".encode() for i in range(4)], 12)


def test_peer_transactions_of_kafka_python_and_aiokafka(cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic)
    bs = cluster.bootstrap_servers
    kp = kafka.KafkaProducer(bootstrap_servers=bs, transactional_id="tx-kp")
    try:
        kp.init_transactions()
        kp.begin_transaction()
        kp.send(topic, b"kp-commit", partition=0)
        kp.commit_transaction()
        kp.begin_transaction()
        kp.send(topic, b"kp-abort", partition=0)
        kp.flush(10)
        kp.abort_transaction()
    finally:
        kp.close(5)

    async def aio() -> None:
        ap = aiokafka.AIOKafkaProducer(bootstrap_servers=bs, transactional_id="tx-aio")
        await ap.start()
        try:
            async with ap.transaction():
                await ap.send_and_wait(topic, b"aio-commit", partition=0)
            await ap.begin_transaction()
            await ap.send_and_wait(topic, b"aio-abort", partition=0)
            await ap.abort_transaction()
        finally:
            await ap.stop()

    asyncio.run(aio())
    _check_everyone_hides_aborted(bs, topic, [b"kp-commit", b"aio-commit"], 4)


def _raw(cluster: Cluster, tid: str, msg: Any, version: int) -> Any:
    found = send_request(cluster.bootstrap_servers.split(",")[0],
                         FindCoordinatorRequest(key=tid, key_type=1), 3)
    return send_request(f"{found.host}:{found.port}", msg, version)


def _add_partition_0(cluster: Cluster, tid: str, pid: int, epoch: int, topic: str) -> None:
    """AddPartitionsToTxn (v3) of ``topic``'s partition 0, which must succeed."""
    apt = AddPartitionsToTxnRequest
    added = _raw(cluster, tid, apt(v3_and_below_transactional_id=tid,
                                   v3_and_below_producer_id=pid,
                                   v3_and_below_producer_epoch=epoch,
                                   v3_and_below_topics=[apt.AddPartitionsToTxnTopic(
                                       name=topic, partitions=[0])]), 3)
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0] \
        .partition_error_code == 0


def test_open_transaction_holds_the_lso_and_a_new_producer_fences_the_old(
        cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic)
    tid = "tx-raw"
    init = _raw(cluster, tid, InitProducerIdRequest(transactional_id=tid,
                                                    transaction_timeout_ms=60000), 4)
    pid, epoch = init.producer_id, init.producer_epoch
    call(cluster, topic, 0, _produce_req(topic, batch([b"plain"])), 9)
    denied = call(cluster, topic, 0, _produce_req(topic, batch(
        [b"t0"], producer_id=pid, producer_epoch=epoch, base_sequence=0,
        transactional=True)), 9)
    assert denied.responses[0].partition_responses[0].error_code == \
        E.InvalidTxnStateError.code  # the partition was not added to the transaction
    _add_partition_0(cluster, tid, pid, epoch, topic)
    ok = call(cluster, topic, 0, _produce_req(topic, batch(
        [b"t0", b"t1"], producer_id=pid, producer_epoch=epoch, base_sequence=0,
        transactional=True)), 9)
    assert ok.responses[0].partition_responses[0].base_offset == 1
    call(cluster, topic, 0, _produce_req(topic, batch([b"after"])), 9)

    def latest(isolation: int) -> int:
        LR = ListOffsetsRequest
        resp = call(cluster, topic, 0, LR(replica_id=-1, isolation_level=isolation, topics=[
            LR.ListOffsetsTopic(name=topic, partitions=[
                LR.ListOffsetsTopic.ListOffsetsPartition(partition_index=0,
                                                         timestamp=-1)])]), 5)
        return int(resp.topics[0].partitions[0].offset)

    assert (latest(0), latest(1)) == (4, 1)  # the LSO stops at the open transaction
    # A second InitProducerId for the same id aborts the open transaction and fences.
    again = _raw(cluster, tid, InitProducerIdRequest(transactional_id=tid,
                                                     transaction_timeout_ms=60000), 4)
    # As Kafka: the abort fences with epoch + 1, the new producer then gets epoch + 2.
    assert (again.producer_id, again.producer_epoch) == (pid, epoch + 2)
    assert latest(1) == 5  # the abort marker ended it
    late = _raw(cluster, tid, EndTxnRequest(transactional_id=tid, producer_id=pid,
                                            producer_epoch=epoch, committed=True), 3)
    assert late.error_code == E.ProducerFencedError.code
    stale = call(cluster, topic, 0, _produce_req(topic, batch(
        [b"t2"], producer_id=pid, producer_epoch=epoch, base_sequence=2,
        transactional=True)), 9)
    # The fenced epoch is named as such (the client then knows it was fenced), not as a
    # partition missing from the transaction.
    assert stale.responses[0].partition_responses[0].error_code == \
        E.InvalidProducerEpochError.code
    FR = FetchRequest
    part = call(cluster, topic, 0, FR(max_wait_ms=0, min_bytes=1, isolation_level=1, topics=[
        FR.FetchTopic(topic=topic, partitions=[FR.FetchTopic.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])]), 11) \
        .responses[0].partitions[0]
    assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [(pid, 1)]
    assert (part.high_watermark, part.last_stable_offset) == (5, 5)
    assert [b.is_control for b in iter_batches(part.records)] == [False, False, False, True]


def test_a_new_kontrakt_producer_fences_the_old_one(cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic)
    bs = cluster.bootstrap_servers

    async def main() -> None:
        old = AsyncProducer(bootstrap_servers=bs, transactional_id="tx-zombie")
        await old.start()
        try:
            old.begin_transaction()
            await old.send_and_wait(topic, b"old", partition=0)
            async with AsyncProducer(bootstrap_servers=bs, transactional_id="tx-zombie") as new:
                new.begin_transaction()
                await new.send_and_wait(topic, b"new", partition=0)
                await new.commit_transaction()
            with pytest.raises((TransactionFatalError, TransactionAbortableError)):
                await old.send_and_wait(topic, b"zombie", partition=0)
                await old.commit_transaction()
        finally:
            await old.close()

    asyncio.run(main())
    assert _read_kontrakt(bs, topic, "read_committed", 1) == [b"new"]


def test_transactions_time_out_and_are_aborted(topic: str) -> None:
    with Cluster(1, transaction_max_timeout_ms=60000) as cluster:
        cluster.create_topic(topic)
        bs = cluster.bootstrap_servers
        p = confluent_kafka.Producer({"bootstrap.servers": bs, "transactional.id": "tx-slow",
                                      "transaction.timeout.ms": 1000, "log_level": 0})
        p.init_transactions(10)
        p.begin_transaction()
        p.produce(topic, b"never", partition=0)
        p.flush(10)
        deadline = time.monotonic() + 10
        while cluster.end_offsets(topic) != [2] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert cluster.end_offsets(topic) == [2]  # the record and the abort marker
        with pytest.raises(confluent_kafka.KafkaException):
            p.commit_transaction(10)
        assert _read_kontrakt(bs, topic, "read_committed", 0) == []


def test_a_transaction_timed_out_by_the_coordinator_is_abortable_then_fenced(
        cluster: Cluster, topic: str) -> None:
    """KIP-588 end to end, by the rules of Kafka's coordinator (transaction version 1),
    which the cluster follows: the coordinator aborts a transaction open longer than
    transaction.timeout.ms and bumps the epoch. A record sent after that is refused with
    INVALID_PRODUCER_EPOCH, which the Java client (InvalidProducerEpochException) and
    Kontrakt report as abortable; the commit is refused as abortable too. The abort's
    EndTxn carries the old epoch, which Kafka answers PRODUCER_FENCED (its timeout fence
    clears the previous epoch, so InitProducerId with it would be fenced as well): the
    producer is fatal then, as the Java client's abortTransaction() raises
    ProducerFencedException."""
    cluster.create_topic(topic)
    bs = cluster.bootstrap_servers

    async def main() -> None:
        async with AsyncProducer(bootstrap_servers=bs, transactional_id="tx-timed-out",
                                 transaction_timeout_ms=300) as p:
            p.begin_transaction()
            await p.send_and_wait(topic, b"first", partition=0)
            deadline = time.monotonic() + 10
            # the record, then the ABORT marker of the coordinator's timeout
            while await asyncio.to_thread(cluster.end_offsets, topic) != [2]:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.02)
            late = await p.send(topic, b"late", partition=0)
            with pytest.raises(TransactionAbortableError) as caught:
                await late
            assert isinstance(caught.value.__cause__, E.InvalidProducerEpochError)
            with pytest.raises(TransactionAbortableError):
                await p.commit_transaction(5)
            with pytest.raises(TransactionFatalError, match="PRODUCER_FENCED"):
                await p.abort_transaction(5)
            with pytest.raises(TransactionFatalError):
                p.begin_transaction()

    asyncio.run(main())
    assert _read_kontrakt(bs, topic, "read_committed", 0) == []


def _produce_req(topic: str, records: bytes) -> Any:
    from kontrakt.protocol.messages import ProduceRequest as PR

    return PR(acks=-1, timeout_ms=5000, topic_data=[PR.TopicProduceData(
        name=topic, partition_data=[PR.TopicProduceData.PartitionProduceData(
            index=0, records=records)])])


def test_a_retried_end_txn_of_a_completed_transaction_succeeds(cluster: Cluster,
                                                                topic: str) -> None:
    """As Kafka's TransactionCoordinator: EndTxn asking for the outcome the transaction
    already completed with (a retry whose first answer was lost) is answered NONE; the
    other outcome, or EndTxn with no transaction ever ended, is INVALID_TXN_STATE."""
    cluster.create_topic(topic)
    tid = "tx-retried-end"
    init = _raw(cluster, tid, InitProducerIdRequest(transactional_id=tid,
                                                    transaction_timeout_ms=60000), 4)
    pid, epoch = init.producer_id, init.producer_epoch

    def end(committed: bool) -> int:
        return int(_raw(cluster, tid, EndTxnRequest(
            transactional_id=tid, producer_id=pid, producer_epoch=epoch,
            committed=committed), 3).error_code)

    assert end(True) == E.InvalidTxnStateError.code  # nothing ended yet (Empty)
    for committed in (True, False):
        _add_partition_0(cluster, tid, pid, epoch, topic)
        assert end(committed) == 0
        assert end(committed) == 0  # the retry
        assert end(not committed) == E.InvalidTxnStateError.code
    assert cluster.end_offsets(topic) == [2]  # one marker each, none for the retries


def test_end_txn_v5_bumps_the_epoch_as_transaction_version_2(cluster: Cluster,
                                                             topic: str) -> None:
    """As Kafka (TransactionVersion.transactionVersionForEndTxn): an EndTxn v5 is a client of
    transaction version 2, whose every commit or abort bumps the epoch and answers the new
    one; the old epoch is then fenced, and only the lost-answer retry may still carry it.
    EndTxn v4 on the same cluster (which finalizes transaction.version 2) bumps nothing."""
    cluster.create_topic(topic)
    tid = "tx-tv2"
    init = _raw(cluster, tid, InitProducerIdRequest(transactional_id=tid,
                                                    transaction_timeout_ms=60000), 4)
    pid, epoch = init.producer_id, init.producer_epoch

    def end(committed: bool, at: int, version: int) -> Any:
        return _raw(cluster, tid, EndTxnRequest(transactional_id=tid, producer_id=pid,
                                                producer_epoch=at, committed=committed),
                    version)

    _add_partition_0(cluster, tid, pid, epoch, topic)
    ended = end(True, epoch, 5)
    assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (0, pid, epoch + 1)
    retried = end(True, epoch, 5)  # its answer lost: the retry is told the same
    assert (retried.error_code, retried.producer_epoch) == (0, epoch + 1)
    assert end(False, epoch, 5).error_code == E.ProducerFencedError.code
    apt = AddPartitionsToTxnRequest
    stale = _raw(cluster, tid, apt(v3_and_below_transactional_id=tid,
                                   v3_and_below_producer_id=pid,
                                   v3_and_below_producer_epoch=epoch,
                                   v3_and_below_topics=[apt.AddPartitionsToTxnTopic(
                                       name=topic, partitions=[0])]), 3)
    assert stale.results_by_topic_v3_and_below[0].results_by_partition[0] \
        .partition_error_code == E.ProducerFencedError.code
    # Transaction version 1 at the new epoch: no bump, so the epoch stays usable.
    _add_partition_0(cluster, tid, pid, epoch + 1, topic)
    assert end(True, epoch + 1, 4).error_code == 0
    _add_partition_0(cluster, tid, pid, epoch + 1, topic)
    # Aborting at v5 bumps too, and so does aborting nothing (allowed at version 2).
    assert end(False, epoch + 1, 5).producer_epoch == epoch + 2
    assert end(False, epoch + 2, 5).producer_epoch == epoch + 3
    assert end(True, epoch + 3, 5).error_code == E.InvalidTxnStateError.code
    assert cluster.end_offsets(topic) == [3]  # a marker for each of the three that held it


def test_kontrakt_transactional_producer_speaks_transaction_version_1(
        cluster: Cluster, topic: str) -> None:
    """The cluster advertises EndTxn and TxnOffsetCommit up to v5 and Produce up to v13 and
    finalizes transaction.version 2. Kontrakt's transactional producer, which runs
    transaction version 1 (AddPartitionsToTxn, AddOffsetsToTxn, an epoch that only
    InitProducerId changes), must stay below the versions that mean version 2, as the Java
    client does without it: EndTxn v4, TxnOffsetCommit v4, Produce v11. With EndTxn v5 the
    coordinator bumps the epoch at the first commit and fences the second transaction. An
    idempotent producer keeps Produce v13."""
    cluster.create_topic(topic)
    cluster.create_topic(topic + "-in")
    bs = cluster.bootstrap_servers
    offered = send_request(bs.split(",")[0], ApiVersionsRequest(), 3)
    advertised = {k.api_key: k.max_version for k in offered.api_keys}
    assert (advertised[0], advertised[26], advertised[28]) == (13, 5, 5)
    assert {f.name: f.max_version_level for f in offered.finalized_features} \
        .get("transaction.version") == 2
    with Producer(bootstrap_servers=bs, transactional_id="tx-tv1") as p:
        p.init_transactions()
        for tag, offset in (("a", 3), ("b", 5)):
            p.begin_transaction()
            p.send(topic, tag.encode(), partition=0)
            p.send_offsets_to_transaction({TP(topic + "-in", 0): offset}, "tx-tv1-group")
            p.commit_transaction()
    txn_versions = cluster.request_versions()
    with Producer(bootstrap_servers=bs, enable_idempotence=True) as p:
        p.send_and_wait(topic, b"idempotent", partition=0)
    idempotent = {v for (k, v), n in cluster.request_versions().items()
                  if k == 0 and n > txn_versions.get((k, v), 0)}

    def sent(api_key: int) -> set[int]:
        return {v for k, v in txn_versions if k == api_key}

    assert (sent(0), sent(26), sent(28)) == ({11}, {4}, {4})
    assert idempotent == {13}
    assert _read_kontrakt(bs, topic, "read_committed", 3) == [b"a", b"b", b"idempotent"]
    with Consumer(bootstrap_servers=bs, group_id="tx-tv1-group") as c:
        got = c.committed([TP(topic + "-in", 0)])[TP(topic + "-in", 0)]
        assert got is not None and got.offset == 5


def test_spark_sinks_driver_side_end_txn_stays_at_transaction_version_1(
        cluster: Cluster, topic: str) -> None:
    """The exactly-once Spark sink's driver ends the transactions its tasks' producers (of
    transaction version 1) opened: with EndTxn v4, not the v5 of version 2 the cluster
    advertises, which would bump the epoch under a protocol the transaction did not run."""
    from kontrakt.spark._sink_txn import TransactionHandle, end_transactions

    cluster.create_topic(topic)
    tid = "tx-spark-driver"
    init = _raw(cluster, tid, InitProducerIdRequest(transactional_id=tid,
                                                    transaction_timeout_ms=60000), 4)
    pid, epoch = init.producer_id, init.producer_epoch
    _add_partition_0(cluster, tid, pid, epoch, topic)
    end_transactions({"bootstrap.servers": cluster.bootstrap_servers},
                     [TransactionHandle(tid, pid, epoch)], commit=True, timeout=10)
    assert {v for k, v in cluster.request_versions() if k == 26} == {4}
    assert cluster.end_offsets(topic) == [1]  # the commit marker
