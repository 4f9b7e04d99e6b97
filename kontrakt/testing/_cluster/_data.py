"""The data path (Fetch aside, in :mod:`._fetch`): Metadata, Produce, ListOffsets,
DeleteRecords, OffsetForLeaderEpoch, DescribeCluster, DescribeProducers, DescribeLogDirs."""

from __future__ import annotations

import functools
import uuid
from typing import Any

from kontrakt.protocol import errors as E
from kontrakt.protocol.messages import (
    DeleteRecordsResponse,
    DescribeClusterResponse,
    DescribeLogDirsResponse,
    DescribeProducersResponse,
    ListOffsetsResponse,
    MetadataResponse,
    OffsetForLeaderEpochResponse,
    ProduceResponse,
)
from kontrakt.protocol.spec import Response
from kontrakt.testing._cluster._log import PartitionLog
from kontrakt.testing._cluster._state import ClusterState, RequestContext, Topic

__all__ = ["DataHandlers", "epoch_error"]

_LATEST, _EARLIEST, _MAX_TIMESTAMP, _EARLIEST_LOCAL = -1, -2, -3, -4
_READ_COMMITTED = 1
_ZERO_UUID = uuid.UUID(int=0)


class DataHandlers:
    """Request handlers of the data path, over one :class:`ClusterState`."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state

    # --- metadata ---------------------------------------------------------------------------
    def metadata(self, ctx: RequestContext, version: int, req: Any) -> Response:
        st = self.state
        mr = MetadataResponse
        wanted: list[tuple[str | None, uuid.UUID]]
        if req.topics is None or (version == 0 and not req.topics):
            wanted = [(name, t.topic_id) for name, t in sorted(st.topics.items())]
        else:
            wanted = [(t.name, t.topic_id) for t in req.topics]
        topics = []
        for name, topic_id in wanted:
            topic = st.topics.get(name) if name else st.topics_by_id.get(topic_id)
            if topic is None and name and st.settings.auto_create_topics_enable \
                    and req.allow_auto_topic_creation and st.check_topic_name(name) is None:
                rf = min(st.settings.default_replication_factor, len(st.brokers))
                topic = st.create_topic(name, st.settings.num_partitions, rf)
            if topic is None:
                code = (E.UnknownTopicOrPartitionError.code if name
                        else E.UnknownTopicIdError.code)
                topics.append(mr.MetadataResponseTopic(error_code=code, name=name,
                                                       topic_id=topic_id))
                continue
            topics.append(mr.MetadataResponseTopic(
                name=topic.name, topic_id=topic.topic_id if version >= 10 else _ZERO_UUID,
                partitions=[self._partition_metadata(topic, i, version)
                            for i in range(len(topic.partitions))]))
        return mr(brokers=[mr.MetadataResponseBroker(node_id=b.node_id, host="127.0.0.1",
                                                     port=b.port, rack=b.rack)
                           for b in st.live_brokers()],
                  cluster_id=st.cluster_id, controller_id=st.controller_id(), topics=topics)

    def _partition_metadata(self, topic: Topic, index: int, version: int) -> Any:
        st = self.state
        replicas = topic.replicas[index]
        leader = topic.leaders[index]
        isr = [r for r in replicas if st.brokers[r].up]
        offline = [r for r in replicas if not st.brokers[r].up]
        error = 0 if st.brokers[leader].up else E.LeaderNotAvailableError.code
        return MetadataResponse.MetadataResponseTopic.MetadataResponsePartition(
            error_code=error, partition_index=index, leader_id=leader if not error else -1,
            leader_epoch=topic.partitions[index].leader_epoch if version >= 7 else -1,
            replica_nodes=list(replicas), isr_nodes=isr,
            offline_replicas=offline if version >= 5 else [])

    def describe_cluster(self, ctx: RequestContext, version: int, req: Any) -> Response:
        st = self.state
        dr = DescribeClusterResponse
        return dr(cluster_id=st.cluster_id, controller_id=st.controller_id(), brokers=[
            dr.DescribeClusterBroker(broker_id=b.node_id, host="127.0.0.1", port=b.port,
                                     rack=b.rack) for b in st.live_brokers()])

    # --- produce ----------------------------------------------------------------------------
    def _resolve(self, name: str, topic_id: uuid.UUID, by_id: bool) -> Topic | None:
        if by_id:
            return self.state.topics_by_id.get(topic_id)
        return self.state.topics.get(name)

    def produce(self, ctx: RequestContext, version: int, req: Any) -> Response | None:
        st = self.state
        pr = ProduceResponse
        by_id = version >= 13
        now = st.now_ms()
        acks_ok = req.acks in (0, 1, -1)
        topics_out = []
        appended = False
        for td in req.topic_data:
            topic = self._resolve(td.name, td.topic_id, by_id)
            parts = []
            for pd in td.partition_data:
                log = None
                if not acks_ok:
                    error = E.InvalidRequiredAcksError.code
                elif topic is None or not 0 <= pd.index < len(topic.partitions):
                    error = (E.UnknownTopicIdError.code if by_id
                             else E.UnknownTopicOrPartitionError.code)
                else:
                    error = st.leader_error(topic, pd.index, ctx.node_id)
                    log = topic.partitions[pd.index]
                if not error and topic is not None and log is not None and req.acks == -1 \
                        and _live_replicas(st, topic, pd.index) < int(
                            topic.config("min.insync.replicas")):
                    error = E.NotEnoughReplicasError.code
                if error or log is None or topic is None:
                    parts.append(pr.TopicProduceResponse.PartitionProduceResponse(
                        index=pd.index, error_code=error, base_offset=-1))
                    continue
                result = log.append(
                    bytes(pd.records or b""), now_ms=now,
                    log_append_time=topic.config("message.timestamp.type") == "LogAppendTime",
                    max_message_bytes=int(topic.config("max.message.bytes")),
                    verify_txn=functools.partial(st.txns.verify, topic.name, pd.index))
                appended = appended or not result.error
                parts.append(pr.TopicProduceResponse.PartitionProduceResponse(
                    index=pd.index, error_code=result.error, base_offset=result.base_offset,
                    log_append_time_ms=result.log_append_time,
                    log_start_offset=log.log_start_offset))
            topics_out.append(pr.TopicProduceResponse(name=td.name, topic_id=td.topic_id,
                                                      partition_responses=parts))
        if appended:
            st.notify()
        if req.acks == 0:
            return None
        return pr(responses=topics_out)

    # --- offsets ----------------------------------------------------------------------------
    def list_offsets(self, ctx: RequestContext, version: int, req: Any) -> Response:
        st = self.state
        lr = ListOffsetsResponse
        pcls = lr.ListOffsetsTopicResponse.ListOffsetsPartitionResponse
        committed = version >= 2 and req.isolation_level == _READ_COMMITTED
        topics_out = []
        for lt in req.topics:
            topic = st.topics.get(lt.name)
            parts = []
            for lp in lt.partitions:
                found = st.partition(lt.name, lp.partition_index)
                if topic is None or found is None:
                    parts.append(pcls(partition_index=lp.partition_index,
                                      error_code=E.UnknownTopicOrPartitionError.code))
                    continue
                log = found[1]
                error = st.leader_error(topic, lp.partition_index, ctx.node_id) \
                    or epoch_error(log, lp.current_leader_epoch)
                if error:
                    parts.append(pcls(partition_index=lp.partition_index, error_code=error))
                    continue
                offset, ts = _lookup(log, lp.timestamp, committed)
                parts.append(pcls(partition_index=lp.partition_index, error_code=0,
                                  timestamp=ts, offset=offset,
                                  leader_epoch=log.leader_epoch if version >= 4 else -1))
            topics_out.append(lr.ListOffsetsTopicResponse(name=lt.name, partitions=parts))
        return lr(topics=topics_out)

    def delete_records(self, ctx: RequestContext, version: int, req: Any) -> Response:
        st = self.state
        dr = DeleteRecordsResponse
        pcls = dr.DeleteRecordsTopicResult.DeleteRecordsPartitionResult
        topics_out = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                found = st.partition(t.name, p.partition_index)
                if found is None:
                    parts.append(pcls(partition_index=p.partition_index, low_watermark=-1,
                                      error_code=E.UnknownTopicOrPartitionError.code))
                    continue
                topic, log = found
                error = st.leader_error(topic, p.partition_index, ctx.node_id) \
                    or log.delete_records(p.offset)
                parts.append(pcls(partition_index=p.partition_index, error_code=error,
                                  low_watermark=-1 if error else log.log_start_offset))
            topics_out.append(dr.DeleteRecordsTopicResult(name=t.name, partitions=parts))
        st.notify()
        return dr(topics=topics_out)

    def offset_for_leader_epoch(self, ctx: RequestContext, version: int, req: Any) -> Response:
        st = self.state
        orr = OffsetForLeaderEpochResponse
        pcls = orr.OffsetForLeaderTopicResult.EpochEndOffset
        topics_out = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                found = st.partition(t.topic, p.partition)
                if found is None:
                    parts.append(pcls(partition=p.partition,
                                      error_code=E.UnknownTopicOrPartitionError.code))
                    continue
                topic, log = found
                error = st.leader_error(topic, p.partition, ctx.node_id) \
                    or epoch_error(log, p.current_leader_epoch)
                if error:
                    parts.append(pcls(partition=p.partition, error_code=error))
                    continue
                epoch, end = log.end_offset_for_epoch(p.leader_epoch)
                parts.append(pcls(partition=p.partition, error_code=0, leader_epoch=epoch,
                                  end_offset=end))
            topics_out.append(orr.OffsetForLeaderTopicResult(topic=t.topic, partitions=parts))
        return orr(topics=topics_out)


    def describe_producers(self, ctx: RequestContext, version: int, req: Any) -> Response:
        st = self.state
        dr = DescribeProducersResponse
        pcls = dr.TopicResponse.PartitionResponse
        topics = []
        for t in req.topics:
            parts = []
            for index in t.partition_indexes:
                found = st.partition(t.name, index)
                error = E.UnknownTopicOrPartitionError.code if found is None else \
                    st.leader_error(found[0], index, ctx.node_id)
                if error or found is None:
                    parts.append(pcls(partition_index=index, error_code=error))
                    continue
                parts.append(pcls(partition_index=index, error_code=0, active_producers=[
                    pcls.ProducerState(producer_id=pid, producer_epoch=epoch,
                                       last_sequence=seq, last_timestamp=ts,
                                       coordinator_epoch=0, current_txn_start_offset=start)
                    for pid, epoch, seq, ts, start in found[1].active_producers()]))
            topics.append(dr.TopicResponse(name=t.name, partitions=parts))
        return dr(topics=topics)

    def describe_log_dirs(self, ctx: RequestContext, version: int, req: Any) -> Response:
        """One log dir per broker holding every replica placed on it (all in sync)."""
        st = self.state
        dr = DescribeLogDirsResponse
        tcls = dr.DescribeLogDirsResult.DescribeLogDirsTopic
        wanted = None if req.topics is None else {(t.topic, p) for t in req.topics
                                                  for p in t.partitions}
        topics = []
        for name, topic in sorted(st.topics.items()):
            parts = [tcls.DescribeLogDirsPartition(
                partition_index=i, partition_size=log.size_in_bytes(), offset_lag=0,
                is_future_key=False)
                for i, log in enumerate(topic.partitions)
                if ctx.node_id in topic.replicas[i]
                and (wanted is None or (name, i) in wanted)]
            if parts:
                topics.append(tcls(name=name, partitions=parts))
        return dr(error_code=0, results=[dr.DescribeLogDirsResult(
            error_code=0, log_dir=f"/kontrakt-cluster/broker-{ctx.node_id}", topics=topics)])


def _lookup(log: PartitionLog, timestamp: int, committed: bool) -> tuple[int, int]:
    """ListOffsets for one partition: (offset, timestamp)."""
    limit = log.last_stable_offset if committed else log.high_watermark
    if timestamp == _LATEST:
        return limit, -1
    if timestamp in (_EARLIEST, _EARLIEST_LOCAL):
        return log.log_start_offset, -1
    if timestamp == _MAX_TIMESTAMP:
        offset, ts = log.max_timestamp_offset(limit)
        return offset, ts
    if timestamp < 0:
        return -1, -1
    return log.offset_for_timestamp(timestamp, limit)


def epoch_error(log: PartitionLog, current_leader_epoch: int) -> int:
    """FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for a client's leader epoch, else 0."""
    if current_leader_epoch < 0 or current_leader_epoch == log.leader_epoch:
        return 0
    if current_leader_epoch < log.leader_epoch:
        return E.FencedLeaderEpochError.code
    return E.UnknownLeaderEpochError.code


def _live_replicas(st: ClusterState, topic: Topic, index: int) -> int:
    return sum(1 for r in topic.replicas[index] if st.brokers[r].up)
