"""Offset lookups by time or position: ListOffsets routed to each partition's leader."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kontrakt._types import ConsumerRecord, OffsetAndMetadata, TopicPartition
from kontrakt.clients.client import AsyncKafkaClient, Backoff
from kontrakt.errors import InvalidArgumentError, KafkaConnectionError, KafkaTimeoutError
from kontrakt.protocol.errors import for_code
from kontrakt.protocol.messages import ListOffsetsRequest

__all__ = ["EARLIEST", "LATEST", "OffsetAndTimestamp", "given_offsets", "list_offsets",
           "offsets_after"]

LATEST = -1
EARLIEST = -2


@dataclass(frozen=True, slots=True)
class OffsetAndTimestamp:
    """The answer of a by-timestamp lookup: the earliest offset whose record's timestamp is
    at or after the time asked for, that record's timestamp, and its leader epoch."""

    offset: int
    timestamp: int
    leader_epoch: int = -1


#: Offsets an application gives: partition -> offset (or OffsetAndMetadata), or
#: confluent-kafka's list of ``TopicPartition(topic, partition, offset)``.
OffsetsLike = Mapping[TopicPartition, OffsetAndMetadata | int] | Iterable[TopicPartition]


def given_offsets(offsets: OffsetsLike) -> dict[TopicPartition, OffsetAndMetadata]:
    """Offsets an application gives to commit or store, as :class:`OffsetAndMetadata`:
    a mapping, or (confluent-kafka's form) partitions carrying their ``offset``.

    Raises:
        TypeError: an offset is neither an int nor an OffsetAndMetadata, or an item of a
            list is not a TopicPartition.
        InvalidArgumentError: a negative offset (a partition without one included).
    """
    if not isinstance(offsets, Mapping):
        pairs: dict[TopicPartition, OffsetAndMetadata | int] = {}
        for tp in offsets:
            if not isinstance(tp, TopicPartition):
                raise TypeError(f"offsets: expected TopicPartition(topic, partition, offset) "
                                f"items or a mapping, got {type(tp).__name__}")
            pairs[TopicPartition(tp.topic, tp.partition)] = tp.offset
        offsets = pairs
    out: dict[TopicPartition, OffsetAndMetadata] = {}
    for tp, o in offsets.items():
        if isinstance(o, OffsetAndMetadata):
            out[tp] = o
        elif isinstance(o, int) and not isinstance(o, bool):
            out[tp] = OffsetAndMetadata(o)
        else:
            raise TypeError(f"offset for {tp} must be an int or OffsetAndMetadata")
        if out[tp].offset < 0:
            raise InvalidArgumentError(f"offset for {tp} must be >= 0, got {out[tp].offset}")
    return out


def offsets_after(records: ConsumerRecord[Any, Any] | Iterable[ConsumerRecord[Any, Any]]
                  ) -> dict[TopicPartition, OffsetAndMetadata]:
    """For each partition, the offset after the highest of ``records`` (the next to read),
    with that record's leader epoch.

    Raises:
        TypeError: something other than consumer records.
    """
    if isinstance(records, ConsumerRecord):
        records = (records,)
    best: dict[tuple[str, int], ConsumerRecord[Any, Any]] = {}
    for r in records:
        if not isinstance(r, ConsumerRecord):
            raise TypeError(f"expected ConsumerRecord, got {type(r).__name__}")
        key = (r.topic, r.partition)
        known = best.get(key)
        if known is None or r.offset >= known.offset:
            best[key] = r
    return {TopicPartition(t, p): OffsetAndMetadata(r.offset + 1, "", r.leader_epoch)
            for (t, p), r in best.items()}


async def list_offsets(client: AsyncKafkaClient, query: Mapping[TopicPartition, int], *,
                       isolation_level: int = 0, timeout: float | None = None
                       ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
    """Look offsets up by timestamp (or ``EARLIEST`` / ``LATEST``).

    Args:
        client: a started client.
        query: partition -> timestamp in ms, or -2 (earliest) / -1 (latest).
        isolation_level: 1 makes LATEST the last stable offset (read_committed).
        timeout: seconds for the whole lookup (default ``request.timeout.ms``); retriable
            errors (leader moves, connection failures) are retried until then.

    Returns:
        Partition -> offset, timestamp and leader epoch; None when no record has a timestamp
        at or after the one asked for.

    Raises:
        KafkaTimeoutError: not every partition answered within the timeout.
        BrokerResponseError: a non-retriable error (e.g. TOPIC_AUTHORIZATION_FAILED).
    """
    cfg = client.config
    deadline = time.monotonic() + (timeout if timeout is not None
                                   else cfg["request.timeout.ms"] / 1000)
    backoff = Backoff(cfg["retry.backoff.ms"] / 1000, cfg["retry.backoff.max.ms"] / 1000)
    remaining = dict(query)
    out: dict[TopicPartition, OffsetAndTimestamp | None] = {}
    unknown = {tp.topic for tp in remaining if tp.topic not in client.cluster.topics}
    if unknown:
        await client.refresh_metadata(unknown)
    last_error: BaseException | None = None
    while remaining:
        if time.monotonic() >= deadline:
            raise KafkaTimeoutError(
                f"ListOffsets for {sorted(map(str, remaining))} did not finish in time"
                + (f": {last_error}" if last_error else ""))
        by_node: dict[int, list[TopicPartition]] = {}
        retry = False
        for tp in remaining:
            node = client.cluster.leader_for(tp.topic, tp.partition)
            if node < 0:
                err = client.cluster.topic_error(tp.topic)
                if err is not None and not getattr(err, "retriable", False):
                    raise err
                retry = True
                continue
            by_node.setdefault(node, []).append(tp)
        results = await asyncio.gather(*(
            _ask(client, node, tps, remaining, isolation_level, deadline)
            for node, tps in by_node.items()), return_exceptions=True)
        for res in results:
            if isinstance(res, (KafkaConnectionError, KafkaTimeoutError)):
                last_error = res
                retry = True
            elif isinstance(res, BaseException):
                raise res
            else:
                done, again = res
                out.update(done)
                for tp in done:
                    remaining.pop(tp, None)
                retry = retry or again
        if remaining and retry:
            client.request_metadata_refresh()
            delay = backoff.next()
            await asyncio.sleep(max(0.0, min(delay, deadline - time.monotonic())))
            await client.refresh_metadata({tp.topic for tp in remaining})
    return out


async def _ask(client: AsyncKafkaClient, node: int, tps: list[TopicPartition],
               query: Mapping[TopicPartition, int], isolation_level: int, deadline: float
               ) -> tuple[dict[TopicPartition, OffsetAndTimestamp | None], bool]:
    by_topic: dict[str, list[TopicPartition]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp)
    P = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition
    topics = []
    for topic, parts in by_topic.items():
        info = client.cluster.topics.get(topic)
        topics.append(ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            P(partition_index=tp.partition, timestamp=query[tp],
              current_leader_epoch=(info.partitions[tp.partition].leader_epoch
                                    if info and tp.partition in info.partitions else -1))
            for tp in parts]))
    remaining = max(0.001, deadline - time.monotonic())
    # v10+ (KIP-1075): how long the leader may wait for a lookup in remote (tiered) storage;
    # 0 would time every such lookup out at once. The Java consumer sends its request timeout.
    req = ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, topics=topics,
                             timeout_ms=max(1, int(remaining * 1000)))
    resp = await client.request(req, node=node, timeout=remaining)
    done: dict[TopicPartition, OffsetAndTimestamp | None] = {}
    again = False
    for t in resp.topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            if tp not in query:
                continue
            if p.error_code:
                err = for_code(p.error_code)
                if err.retriable or err.invalid_metadata:
                    again = True
                    continue
                raise err(f"ListOffsets {tp}")
            if p.offset < 0:
                done[tp] = None
            else:
                done[tp] = OffsetAndTimestamp(p.offset, p.timestamp, p.leader_epoch)
    return done, again or len(done) < len(tps)
