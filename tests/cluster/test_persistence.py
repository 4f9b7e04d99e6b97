"""``Cluster(storage=DIR)``: the cluster's state outlives a close, and a new cluster on the
same folder carries on from it (records, offsets, end offsets, last stable offset, aborted
transactions, idempotent producer state, producer ids, configs, the cluster id); a torn tail
left by a crash is dropped; a folder serves one running cluster at a time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kontrakt import Producer
from kontrakt._types import TopicPartition as TP
from kontrakt.clients.admin import AdminClient, NewPartitions
from kontrakt.errors import InvalidArgumentError
from kontrakt.protocol import errors as E
from kontrakt.protocol.messages import (
    AddPartitionsToTxnRequest,
    DeleteRecordsRequest,
    DescribeConfigsRequest,
    InitProducerIdRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)
from kontrakt.protocol.records import iter_batches
from kontrakt.testing import Cluster, StorageLockedError, send_request
from tests.cluster.conftest import batch, call
from tests.cluster.test_data_path import fetch, list_offset, produce
from tests.cluster.test_transactions import _read_kontrakt

OC = OffsetCommitRequest
OF = OffsetFetchRequest
DR = DeleteRecordsRequest
DC = DescribeConfigsRequest
AP = AddPartitionsToTxnRequest


def _bs(cluster: Cluster) -> str:
    return cluster.bootstrap_servers.split(",")[0]


def _init_pid(cluster: Cluster, tid: str | None = None) -> tuple[int, int]:
    resp = send_request(_bs(cluster), InitProducerIdRequest(
        transactional_id=tid, transaction_timeout_ms=60_000, producer_id=-1,
        producer_epoch=-1), 4)
    assert resp.error_code == 0
    return int(resp.producer_id), int(resp.producer_epoch)


def _commit(cluster: Cluster, topic: str, partition: int, offset: int, meta: str) -> None:
    resp = send_request(_bs(cluster), OC(
        group_id="g", generation_id_or_member_epoch=-1, member_id="",
        topics=[OC.OffsetCommitRequestTopic(name=topic, partitions=[
            OC.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset,
                committed_metadata=meta)])]), 8)
    assert resp.topics[0].partitions[0].error_code == 0


def _committed(cluster: Cluster, topic: str, group: str = "g") -> list[tuple[int, int, str]]:
    resp = send_request(_bs(cluster), OF(group_id=group, topics=[OF.OffsetFetchRequestTopic(
        name=topic, partition_indexes=[0, 1])]), 7)
    return [(p.partition_index, p.committed_offset, p.metadata)
            for p in resp.topics[0].partitions]


def _snapshot(cluster: Cluster, topic: str) -> dict[str, Any]:
    """Everything a client can observe of the persisted state."""
    meta = send_request(_bs(cluster), MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=topic)]), 12)
    log_start = [list_offset(cluster, topic, -2, partition=p) for p in (0, 1)]
    records = []
    for p in (0, 1):
        part: Any = fetch(cluster, topic, log_start[p][1], partition=p)
        records.append([(r.offset, r.value) for b in iter_batches(part.records or b"")
                        for r in b.records()])
    return {
        "cluster_id": meta.cluster_id,
        "topic_id": meta.topics[0].topic_id,
        "end_offsets": cluster.end_offsets(topic),
        "lso": [list_offset(cluster, topic, -1, isolation=1, partition=p) for p in (0, 1)],
        "log_start": log_start,
        "records": records,
        "aborted": [[(a.producer_id, a.first_offset) for a in (
            fetch(cluster, topic, log_start[p][1], isolation=1, partition=p)
            .aborted_transactions or [])] for p in (0, 1)],
        "committed": _committed(cluster, topic),
        "txn_committed": _committed(cluster, topic, "txg"),
    }


def test_records_offsets_and_transactions_survive_a_restart(tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    topic = "orders"
    with Cluster(storage=folder) as c:
        c.create_topic(topic, partitions=2, config={"retention.ms": "1000"})
        bs = c.bootstrap_servers
        with Producer(bootstrap_servers=bs) as p:
            for i in range(3):
                p.send_and_wait(topic, f"plain{i}".encode(), partition=0)
        pid, _ = _init_pid(c)
        idem = batch([b"i0", b"i1"], producer_id=pid, producer_epoch=0, base_sequence=0)
        first = produce(c, topic, idem)
        assert first.error_code == 0  # type: ignore[attr-defined]
        with Producer(bootstrap_servers=bs, transactional_id="tx") as p:
            p.init_transactions()
            for tag, commit in (("c", True), ("a", False)):
                p.begin_transaction()
                for i in range(2):
                    p.send(topic, f"{tag}{i}".encode(), partition=0)
                p.flush(10)
                p.send_offsets_to_transaction({TP(topic, 1): 9 if commit else 99}, "txg")
                if commit:
                    p.commit_transaction()
                else:
                    p.abort_transaction()
        tx_pid, tx_epoch = _init_pid(c, "tx")  # fences the producer above: epoch goes up
        for i in range(4):
            produce(c, topic, batch([f"p1-{i}".encode()]), partition=1)
        resp = call(c, topic, 1, DR(timeout_ms=5000, topics=[DR.DeleteRecordsTopic(
            name=topic, partitions=[DR.DeleteRecordsTopic.DeleteRecordsPartition(
                partition_index=1, offset=2)])]), 2)
        assert resp.topics[0].partitions[0].error_code == 0
        _commit(c, topic, 0, 5, "where I was")
        _commit(c, topic, 1, 3, "")
        before = _snapshot(c, topic)
        assert c.internal_errors() == []
    # 3 plain + 2 idempotent + 2 committed + marker + 2 aborted + marker
    assert before["end_offsets"] == [11, 4]
    assert before["aborted"][0] == [(tx_pid, 8)]
    assert before["txn_committed"] == [(0, -1, ""), (1, 9, "")]

    with Cluster(storage=folder) as c:
        assert _snapshot(c, topic) == before
        committed = [b"plain0", b"plain1", b"plain2", b"i0", b"i1", b"c0", b"c1"]
        assert _read_kontrakt(c.bootstrap_servers, topic, "read_committed",
                              len(committed)) == committed
        # The idempotent producer's retry after the restart is recognised as a duplicate.
        retry: Any = produce(c, topic, idem)
        assert (retry.error_code, retry.base_offset) == (0, first.base_offset)  # type: ignore[attr-defined]
        gap: Any = produce(c, topic, batch([b"x"], producer_id=pid, producer_epoch=0,
                                            base_sequence=7))
        assert gap.error_code == E.OutOfOrderSequenceNumberError.code
        assert c.end_offsets(topic) == [11, 4]
        # Producer ids are never handed out twice; the transactional id keeps its id and
        # moves on from its stored epoch.
        assert _init_pid(c)[0] > max(pid, tx_pid)
        assert _init_pid(c, "tx") == (tx_pid, tx_epoch + 1)
        # Configs too.
        dc = send_request(_bs(c), DC(resources=[DC.DescribeConfigsResource(
            resource_type=2, resource_name=topic, configuration_keys=["retention.ms"])]), 4)
        assert [(x.name, x.value) for x in dc.results[0].configs] == [("retention.ms", "1000")]
        assert c.internal_errors() == []


def test_open_transaction_is_aborted_and_its_producer_fenced_on_restart(
        tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    topic = "t"
    with Cluster(storage=folder) as c:
        c.create_topic(topic)
        produce(c, topic, batch([b"before"]))
        pid, epoch = _init_pid(c, "open-tx")
        resp = send_request(_bs(c), AP(
            v3_and_below_transactional_id="open-tx", v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
                AP.AddPartitionsToTxnTopic(name=topic, partitions=[0])]), 3)
        assert resp.results_by_topic_v3_and_below[0].results_by_partition[0] \
            .partition_error_code == 0
        r: Any = produce(c, topic, batch([b"in-doubt"], producer_id=pid, producer_epoch=epoch,
                                         base_sequence=0, transactional=True))
        assert r.error_code == 0
        assert list_offset(c, topic, -1, isolation=1)[1] == 1  # the LSO stops at the txn
    with Cluster(storage=folder) as c:
        # Aborted on recovery: a marker at 2, the LSO moves past it, nothing is exposed.
        assert c.end_offsets(topic) == [3]
        assert list_offset(c, topic, -1, isolation=1)[1] == 3
        part: Any = fetch(c, topic, 0, isolation=1)
        assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [(pid, 1)]
        assert _read_kontrakt(c.bootstrap_servers, topic, "read_committed", 1) == [b"before"]
        late: Any = produce(c, topic, batch([b"late"], producer_id=pid, producer_epoch=epoch,
                                            base_sequence=1, transactional=True))
        assert late.error_code == E.InvalidProducerEpochError.code
        assert c.end_offsets(topic) == [3]


def test_a_torn_tail_is_dropped_and_the_log_carries_on(tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    with Cluster(storage=folder) as c:
        c.create_topic("t")
        for i in range(3):
            produce(c, "t", batch([f"v{i}".encode()] * 2))
        assert c.end_offsets("t") == [6]
    (segment,) = (folder / "logs").glob("*-0/*.log")
    assert segment.name == "00000000000000000000.log"
    size = segment.stat().st_size
    with open(segment, "r+b") as f:  # a crash in the middle of writing the last batch
        f.truncate(size - 7)
    with open(folder / "journal.jsonl", "ab") as f:  # and of a journal line
        f.write(b'{"t":"offset","g":"g","top')
    with Cluster(storage=folder) as c:
        assert c.end_offsets("t") == [4]
        r: Any = produce(c, "t", batch([b"after"]))
        assert (r.error_code, r.base_offset) == (0, 4)
        part: Any = fetch(c, "t", 0)
        assert [r.value for b in iter_batches(part.records) for r in b.records()] == [
            b"v0", b"v0", b"v1", b"v1", b"after"]
    with Cluster(storage=folder) as c:  # the truncated file took the new batch cleanly
        assert c.end_offsets("t") == [5]


def test_a_folder_serves_one_running_cluster(tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    with Cluster(storage=folder) as c:
        c.create_topic("t")
        second = Cluster(storage=folder)
        with pytest.raises(StorageLockedError, match="in use by another running Cluster") \
                as info:
            second.start()
        assert info.value.path == str(folder)
        assert second.closed
        assert c.end_offsets("t") == [0]  # the running cluster is untouched
    with Cluster(storage=folder) as c:  # released on close
        assert c.end_offsets("t") == [0]


def test_a_stored_cluster_id_wins_and_a_different_explicit_one_is_refused(
        tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    with Cluster(storage=folder, cluster_id="first-id"):
        pass
    with Cluster(storage=folder) as c:
        meta = send_request(_bs(c), MetadataRequest(topics=[]), 12)
        assert meta.cluster_id == "first-id"
    with pytest.raises(InvalidArgumentError, match="differs"):
        Cluster(storage=folder, cluster_id="other-id").start()
    with Cluster(storage=folder, cluster_id="first-id"):
        pass


def test_deletions_leader_moves_and_partitions_added_are_kept(tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    with Cluster(num_brokers=2, storage=folder) as c:
        c.create_topic("gone")
        c.create_topic("kept")
        produce(c, "gone", batch([b"x"]))
        _commit(c, "gone", 0, 1, "")
        _commit(c, "kept", 0, 0, "m")
        c.set_partition_leader("kept", 0, 2)
        with AdminClient(bootstrap_servers=c.bootstrap_servers,
                         default_api_timeout_ms=10000) as admin:
            admin.delete_topics(["gone"])
            admin.create_partitions([NewPartitions("kept", 3)])
        assert not list((folder / "logs").glob("*"))  # gone's files are removed
        produce(c, "kept", batch([b"y"]), partition=2)
    with Cluster(num_brokers=2, storage=folder) as c:
        meta = send_request(_bs(c), MetadataRequest(topics=None), 12)
        assert [t.name for t in meta.topics] == ["kept"]
        leaders = {p.partition_index: p.leader_id for p in meta.topics[0].partitions}
        assert leaders[0] == 2
        assert c.end_offsets("kept") == [0, 0, 1]
        assert _committed(c, "gone") == [(0, -1, ""), (1, -1, "")]
        assert _committed(c, "kept")[0] == (0, 0, "m")
        with AdminClient(bootstrap_servers=c.bootstrap_servers,
                         default_api_timeout_ms=10000) as admin:
            admin.delete_consumer_groups(["g"])
    with Cluster(num_brokers=2, storage=folder) as c:
        assert _committed(c, "kept")[0] == (0, -1, "")
    with pytest.raises(InvalidArgumentError, match="num_brokers=2 or more"):
        Cluster(num_brokers=1, storage=folder).start()
    with Cluster(num_brokers=2, storage=folder) as c:  # the refusal changed nothing
        assert c.end_offsets("kept") == [0, 0, 1]


def test_segments_roll_at_segment_bytes_and_go_below_the_log_start(tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    with Cluster(storage=folder) as c:
        c.create_topic("t", config={"segment.bytes": "300"})
        for i in range(6):  # batches of ~170 bytes: one per segment
            produce(c, "t", batch([bytes([i]) * 100]))
        names = sorted(p.name for p in (folder / "logs").glob("*-0/*.log"))
        assert names == [f"{i:020d}.log" for i in range(6)]
        resp = call(c, "t", 0, DR(timeout_ms=5000, topics=[DR.DeleteRecordsTopic(
            name="t", partitions=[DR.DeleteRecordsTopic.DeleteRecordsPartition(
                partition_index=0, offset=3)])]), 2)
        assert resp.topics[0].partitions[0].error_code == 0
        names = sorted(p.name for p in (folder / "logs").glob("*-0/*.log"))
        assert names == [f"{i:020d}.log" for i in range(3, 6)]
    with Cluster(storage=folder) as c:
        assert list_offset(c, "t", -2) == (0, 3, -1)
        assert c.end_offsets("t") == [6]
        part: Any = fetch(c, "t", 3)
        assert [r.value for b in iter_batches(part.records) for r in b.records()] == [
            bytes([i]) * 100 for i in range(3, 6)]
        produce(c, "t", batch([b"z" * 100]))  # appends to a new segment after the last one
    with Cluster(storage=folder) as c:
        assert c.end_offsets("t") == [7]
        assert len(list((folder / "logs").glob("*-0/*.log"))) == 4
