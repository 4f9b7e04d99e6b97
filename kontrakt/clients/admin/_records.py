"""Admin operations on partitions at their leaders — a base class of
:class:`~kontrakt.clients.admin.AsyncAdminClient`: look up offsets (ListOffsets), delete
records (DeleteRecords) and describe active producers (DescribeProducers).

Routing: each request is split per partition leader; a partition without a usable leader is
retried on fresh metadata (see :meth:`Router.per_leader`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kontrakt._types import TopicPartition
from kontrakt.clients.admin import _validate as v
from kontrakt.clients.admin._routing import Router, error_for, finish
from kontrakt.clients.admin._types import (
    DeletedRecords,
    IsolationLevel,
    ListOffsetsResultInfo,
    OffsetSpec,
    ProducerState,
)
from kontrakt.clients.client import AsyncKafkaClient
from kontrakt.clients.group._protocol import group_by_topic
from kontrakt.errors import InvalidArgumentError, UnsupportedVersionError
from kontrakt.protocol.messages import (
    DeleteRecordsRequest,
    DescribeProducersRequest,
    ListOffsetsRequest,
)
from kontrakt.protocol.spec import Request

__all__ = ["RecordOperations"]

TP = TopicPartition


class RecordOperations:
    """Operations at partition leaders (see the module doc)."""

    _client: AsyncKafkaClient
    _router: Router

    async def list_offsets(self, specs: Mapping[TopicPartition, OffsetSpec], *,
                           isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
                           timeout: float | None = None, return_exceptions: bool = False
                           ) -> dict[TopicPartition, ListOffsetsResultInfo]:
        """Look up offsets (earliest, latest, max timestamp, or by timestamp), asking each
        partition's leader.

        Returns:
            partition -> :class:`ListOffsetsResultInfo` (offset -1 when no record matches
            a timestamp).

        Raises:
            InvalidArgumentError: bad partition or spec.
            PartialFailureError: some partitions failed (``UnknownTopicOrPartitionError``
                for partitions that do not exist).
        """
        tps = v.check_partitions(specs, "specs")
        for tp in tps:
            if not isinstance(specs[tp], OffsetSpec):
                raise InvalidArgumentError(f"spec for {tp} must be an OffsetSpec")
        deadline = self._router.deadline(timeout)
        await self._client.start()
        req = ListOffsetsRequest
        rt = req.ListOffsetsTopic

        def build(version: int, batch: list[TopicPartition]) -> Request:
            if version < 7 and any(specs[tp].timestamp == OffsetSpec.MAX_TIMESTAMP
                                   for tp in batch):
                # Before v7 a broker takes -3 for a time and answers the first offset
                # (as the Java admin, the lookup needs v7).
                raise UnsupportedVersionError(
                    f"ListOffsets v{version} cannot look up the max timestamp (KIP-734 "
                    f"needs v7)")
            return req(
                replica_id=-1, isolation_level=int(isolation_level),
                timeout_ms=int(self._router.remaining(deadline) * 1000),
                topics=[rt(name=t, partitions=[rt.ListOffsetsPartition(
                    partition_index=p, timestamp=specs[TP(t, p)].timestamp) for p in ps])
                    for t, ps in group_by_topic(batch).items()])

        async def send(node: int, batch: list[TopicPartition]) -> dict[TopicPartition, Any]:
            resp = await self._router.exchange(node, req, lambda ver: build(ver, batch),
                                               deadline)
            return {TP(t.name, p.partition_index): error_for(
                p.error_code, None, f"{t.name}-{p.partition_index}") if p.error_code
                else ListOffsetsResultInfo(p.offset, p.timestamp, p.leader_epoch)
                for t in resp.topics for p in t.partitions}

        results = await self._router.per_leader(tps, deadline, send)
        return finish(results, "list_offsets", return_exceptions)

    async def delete_records(self, before_offsets: Mapping[TopicPartition, int], *,
                             operation_timeout: float | None = None,
                             timeout: float | None = None, return_exceptions: bool = False
                             ) -> dict[TopicPartition, DeletedRecords]:
        """Delete records before the given offsets (-1: up to the high watermark), asking
        each partition's leader.

        Returns:
            partition -> :class:`DeletedRecords` (the new low watermark).

        Raises:
            InvalidArgumentError: bad partition, or an offset < -1.
            PartialFailureError: some partitions failed (e.g. ``OffsetOutOfRangeError``).
        """
        tps = v.check_partitions(before_offsets, "before_offsets")
        for tp in tps:
            off = before_offsets[tp]
            if isinstance(off, bool) or not isinstance(off, int) or off < -1:
                raise InvalidArgumentError(f"offset for {tp} must be >= -1, got {off!r}")
        deadline = self._router.deadline(timeout)
        await self._client.start()
        req = DeleteRecordsRequest
        rt = req.DeleteRecordsTopic

        async def send(node: int, batch: list[TopicPartition]) -> dict[TopicPartition, Any]:
            resp = await self._router.exchange(node, req, lambda ver: req(
                timeout_ms=int((operation_timeout or self._router.remaining(deadline)) * 1000),
                topics=[rt(name=t, partitions=[rt.DeleteRecordsPartition(
                    partition_index=p, offset=before_offsets[TP(t, p)]) for p in ps])
                    for t, ps in group_by_topic(batch).items()]), deadline)
            return {TP(t.name, p.partition_index): error_for(
                p.error_code, None, f"{t.name}-{p.partition_index}") if p.error_code
                else DeletedRecords(p.low_watermark)
                for t in resp.topics for p in t.partitions}

        results = await self._router.per_leader(tps, deadline, send)
        return finish(results, "delete_records", return_exceptions)

    async def describe_producers(self, partitions: Iterable[TopicPartition], *,
                                 timeout: float | None = None, return_exceptions: bool = False
                                 ) -> dict[TopicPartition, list[ProducerState]]:
        """The active (idempotent or transactional) producers of partitions, asking each
        partition's leader.

        Raises:
            InvalidArgumentError: a bad partition.
            PartialFailureError: some partitions failed.
        """
        tps = v.check_partitions(partitions, "partitions")
        deadline = self._router.deadline(timeout)
        await self._client.start()
        req = DescribeProducersRequest

        async def send(node: int, batch: list[TopicPartition]) -> dict[TopicPartition, Any]:
            resp = await self._router.exchange(node, req, lambda ver: req(topics=[
                req.TopicRequest(name=t, partition_indexes=ps)
                for t, ps in group_by_topic(batch).items()]), deadline)
            return {TP(t.name, p.partition_index): error_for(
                p.error_code, p.error_message, f"{t.name}-{p.partition_index}")
                if p.error_code else [ProducerState(
                    s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp,
                    s.coordinator_epoch, s.current_txn_start_offset)
                    for s in p.active_producers]
                for t in resp.topics for p in t.partitions}

        results = await self._router.per_leader(tps, deadline, send)
        return finish(results, "describe_producers", return_exceptions)
