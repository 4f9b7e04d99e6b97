"""Responses carrying an injected error code, shaped after the request they answer.

An injected error replaces the request's processing entirely (nothing is appended,
committed or joined), as in librdkafka's mock cluster: APIs with per-partition or
per-resource results get the code on every entry of the request, the others in their
top-level ``error_code``.
"""

from __future__ import annotations

from typing import Any

from kontrakt.protocol import messages as M
from kontrakt.protocol.spec import Response, registry

__all__ = ["error_response"]


def _partitioned(topics: Any, topic_cls: Any, part_cls: Any, topic_kw: dict[str, Any],
                 part_field: str, index_field: str, name: str = "name",
                 parts_attr: str = "partitions", index_attr: str = "partition_index",
                 **extra: Any) -> list[Any]:
    out = []
    for t in topics:
        parts = [part_cls(**{index_field: getattr(p, index_attr) if not isinstance(p, int)
                             else p}, **extra) for p in getattr(t, parts_attr)]
        out.append(topic_cls(**{name: getattr(t, name)}, **topic_kw, **{part_field: parts}))
    return out


def error_response(api_key: int, version: int, req: Any, code: int) -> Response:
    """A response to ``req`` that fails with ``code`` everywhere it can carry an error."""
    if api_key == 0:
        pr = M.ProduceResponse
        tp = pr.TopicProduceResponse
        return pr(responses=[tp(name=t.name, topic_id=t.topic_id, partition_responses=[
            tp.PartitionProduceResponse(index=p.index, error_code=code, base_offset=-1)
            for p in t.partition_data]) for t in req.topic_data])
    if api_key == 1:
        fr = M.FetchResponse
        ft = fr.FetchableTopicResponse
        return fr(session_id=0, responses=[ft(topic=t.topic, topic_id=t.topic_id, partitions=[
            ft.PartitionData(partition_index=p.partition, error_code=code, high_watermark=-1,
                             records=None) for p in t.partitions]) for t in req.topics])
    if api_key == 2:
        lr = M.ListOffsetsResponse
        lt = lr.ListOffsetsTopicResponse
        return lr(topics=_partitioned(req.topics, lt, lt.ListOffsetsPartitionResponse, {},
                                      "partitions", "partition_index", error_code=code))
    if api_key == 3:
        mr = M.MetadataResponse
        topics = [mr.MetadataResponseTopic(error_code=code, name=t.name, topic_id=t.topic_id)
                  for t in req.topics or []]
        return mr(topics=topics)
    if api_key == 8:
        cr = M.OffsetCommitResponse
        ct = cr.OffsetCommitResponseTopic
        return cr(topics=_partitioned(req.topics, ct, ct.OffsetCommitResponsePartition, {},
                                      "partitions", "partition_index", error_code=code))
    if api_key == 28:
        tr = M.TxnOffsetCommitResponse
        tt = tr.TxnOffsetCommitResponseTopic
        return tr(topics=_partitioned(req.topics, tt, tt.TxnOffsetCommitResponsePartition, {},
                                      "partitions", "partition_index", error_code=code))
    if api_key == 9:
        fr9 = M.OffsetFetchResponse
        if version >= 8:
            return fr9(groups=[fr9.OffsetFetchResponseGroup(group_id=g.group_id, error_code=code)
                               for g in req.groups])
        return fr9(error_code=code) if version >= 2 else fr9()
    if api_key == 10 and version >= 4:
        fc = M.FindCoordinatorResponse
        return fc(coordinators=[fc.Coordinator(key=k, node_id=-1, host="", port=-1,
                                               error_code=code)
                                for k in req.coordinator_keys])
    if api_key == 24 and version < 4:
        ar = M.AddPartitionsToTxnResponse
        at = ar.AddPartitionsToTxnTopicResult
        return ar(results_by_topic_v3_and_below=[at(name=t.name, results_by_partition=[
            at.AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=code)
            for p in t.partitions]) for t in req.v3_and_below_topics])
    if api_key == 15:
        dg = M.DescribeGroupsResponse
        return dg(groups=[dg.DescribedGroup(error_code=code, group_id=g, group_state="",
                                            protocol_type="", protocol_data="")
                          for g in req.groups])
    if api_key == 42:
        dr = M.DeleteGroupsResponse
        return dr(results=[dr.DeletableGroupResult(group_id=g, error_code=code)
                           for g in req.groups_names])
    if api_key == 19:
        ct19 = M.CreateTopicsResponse
        return ct19(topics=[ct19.CreatableTopicResult(name=t.name, error_code=code)
                            for t in req.topics])
    if api_key == 20:
        dt = M.DeleteTopicsResponse
        names = [t.name for t in req.topics] if version >= 6 else req.topic_names
        return dt(responses=[dt.DeletableTopicResult(name=n, error_code=code) for n in names])
    if api_key == 75:
        dtp = M.DescribeTopicPartitionsResponse
        return dtp(topics=[dtp.DescribeTopicPartitionsResponseTopic(name=t.name, error_code=code)
                           for t in req.topics])
    cls = registry()[api_key].response_class
    return cls(error_code=code)
