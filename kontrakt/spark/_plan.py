"""Planning reads, on the driver: which partitions, from which offset to which, in how many
Spark tasks (batch reads and each micro-batch).

Partitions come from ``subscribe``, ``subscribePattern`` or ``assign``; each one's bounds
from ``startingOffsets`` / ``endingOffsets`` or their by-timestamp variants, checked
against the partition's earliest offset and its end (the high watermark a Fetch response
confirms, see :func:`edge_offsets`); ``maxRecordsPerPartition`` and ``minPartitions`` then
split the ranges into more tasks, as Spark's Kafka source does.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
import re
import time
from collections.abc import Iterable

from kontrakt._types import TopicPartition
from kontrakt.clients.consumer import Consumer
from kontrakt.errors import ConfigError, KafkaTimeoutError
from kontrakt.spark._fieldplan import OffsetRange
from kontrakt.spark._options import EARLIEST, LATEST, OffsetSpec, SourceOptions, TimestampSpec
from kontrakt.spark._pushdown import RangeLimits

__all__ = [
    "edge_offsets", "end_offsets", "matching_topics", "narrow", "offset_for", "plan_ranges",
    "planner_config", "select_partitions", "split_ranges", "start_offsets", "with_topics",
]

log = logging.getLogger("kontrakt.spark")

_METADATA_TIMEOUT_S = 30.0
# A pattern subscription leaves Kafka's internal topics out, as the Java consumer does.
_INTERNAL = frozenset({"__consumer_offsets", "__transaction_state"})


def matching_topics(known: Iterable[str], pattern: str) -> tuple[str, ...]:
    """The topics whose whole name matches ``subscribePattern`` (sorted; internal topics
    left out)."""
    rx = re.compile(pattern)
    return tuple(sorted(t for t in known if t not in _INTERNAL and rx.fullmatch(t)))


def with_topics(opts: SourceOptions) -> SourceOptions:
    """``opts`` with ``topics`` filled in from the cluster for ``subscribePattern`` (the
    topics whose schemas fix the columns); other options are returned as they are.

    Raises:
        KafkaError: the cluster could not be asked.
    """
    if opts.pattern is None:
        return opts
    with Consumer(opts.consumer_config()) as consumer:
        return dataclasses.replace(opts, topics=matching_topics(consumer.list_topics(),
                                                                opts.pattern))


def select_partitions(consumer: Consumer, opts: SourceOptions) -> list[TopicPartition]:
    """The partitions to read: every partition of the subscribed topics, of the topics
    matching ``subscribePattern`` now, or those ``assign`` names.

    Raises:
        ConfigError: a subscribed or assigned topic, or an assigned partition, does not
            exist.
    """
    known = consumer.list_topics()
    if opts.pattern is not None:
        return [TopicPartition(t, p) for t in matching_topics(known, opts.pattern)
                for p in known[t]]
    missing = [t for t in opts.topics if t not in known]
    if missing:
        raise ConfigError(f"topic(s) {', '.join(missing)} do not exist")
    if opts.assign is None:
        return [TopicPartition(t, p) for t in opts.topics for p in known[t]]
    absent = [f"{t}/{p}" for t, ps in opts.assign.items() for p in ps if p not in known[t]]
    if absent:
        raise ConfigError(f"option 'assign' names partitions that do not exist: "
                          f"{', '.join(absent)}")
    return [TopicPartition(t, p) for t, ps in opts.assign.items() for p in ps]


def planner_config(opts: SourceOptions) -> dict[str, str | bool]:
    """The consumer properties of the driver's offset lookups: a fetch at the end of a
    partition comes back at once (10 ms, not ``fetch.max.wait.ms``' 500) with at most one
    record batch, as only its high watermark is wanted (see :func:`edge_offsets`)."""
    # 0 would be the obvious wait, but Tansu never answers such a fetch with a watermark.
    return {**opts.consumer_config(), "fetch.max.wait.ms": "10",
            "max.partition.fetch.bytes": "1"}


def edge_offsets(consumer: Consumer, tps: list[TopicPartition]
                 ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """The earliest and the end offset of each partition.

    The end is ListOffsets(LATEST) confirmed by a Fetch from there: a Fetch response's high
    watermark (the last stable offset with read_committed) is the broker's own word on
    where the log ends, whereas some brokers' ListOffsets is not (Tansu answers the last
    batch's first offset + 1, short of the end when that batch holds several records, so
    planning from it alone silently drops records). The larger of the two is taken; on
    Kafka both agree unless records arrived in between. ``consumer`` is left assigned to
    ``tps`` (make it with :func:`planner_config`).

    Raises:
        KafkaTimeoutError: the offsets or a watermark did not come within 30 s.
    """
    if not tps:
        return {}, {}
    begin = consumer.beginning_offsets(tps, _METADATA_TIMEOUT_S)
    listed = consumer.end_offsets(tps, _METADATA_TIMEOUT_S)
    consumer.assign(tps)
    for tp in tps:
        consumer.seek(tp, max(listed[tp], 0))
    deadline = time.monotonic() + _METADATA_TIMEOUT_S
    end: dict[TopicPartition, int] = {}
    while True:
        for tp in tps:
            # lag is (watermark - position), known once a fetch response came back; the
            # position moves only in getmany, so the two are read consistently here.
            lag = None if tp in end else consumer.lag(tp)
            if lag is not None:
                end[tp] = max(listed[tp], consumer.position(tp) + lag)
        if len(end) == len(tps):
            return begin, end
        if time.monotonic() >= deadline:
            missing = sorted(f"{tp.topic}/{tp.partition}" for tp in tps if tp not in end)
            raise KafkaTimeoutError(f"no fetch response with a high watermark for "
                                    f"{', '.join(missing)} within {_METADATA_TIMEOUT_S:g}s")
        # The records are not wanted (at most one batch per partition): only the watermark.
        consumer.getmany(0.05)


def offset_for(spec: OffsetSpec, tp: TopicPartition, default: int, begin: int, end: int,
               name: str, *, fail_on_data_loss: bool = True) -> int:
    """Resolve ``spec`` for one partition to an offset within ``[begin, end]``.

    Args:
        fail_on_data_loss: false turns an explicit offset below ``begin`` (its records were
            deleted) into ``begin``, with a logged warning.

    Raises:
        ConfigError: an explicit offset outside what the partition holds.
    """
    if spec == "earliest":
        wanted = EARLIEST
    elif spec == "latest":
        wanted = LATEST
    else:
        assert isinstance(spec, dict)
        wanted = spec.get(tp.topic, {}).get(tp.partition, default)
    if wanted == EARLIEST:
        return begin
    if wanted == LATEST:
        return end
    if wanted < begin and not fail_on_data_loss:
        log.warning("%s: offset %d for %s/%d was deleted (the partition starts at %d); "
                    "starting there instead (failOnDataLoss=false)", name, wanted, tp.topic,
                    tp.partition, begin)
        return begin
    if not begin <= wanted <= end:
        raise ConfigError(f"{name}: offset {wanted} for {tp.topic}/{tp.partition} is outside "
                          f"the partition's offsets {begin}..{end}")
    return wanted


def _by_timestamp(consumer: Consumer, spec: TimestampSpec, tps: list[TopicPartition],
                  side: str) -> dict[TopicPartition, int | None] | None:
    """Each partition's first offset whose record has a timestamp at or after the one the
    option gives (None: no such record); None without a timestamp option."""
    if spec is None:
        return None
    if isinstance(spec, int):
        query = {tp: spec for tp in tps}
    else:
        name = f"{side}OffsetsByTimestamp"
        query = {tp: spec[tp.topic][tp.partition] for tp in tps
                 if tp.partition in spec.get(tp.topic, {})}
        named = {TopicPartition(t, p) for t, ps in spec.items() for p in ps}
        if named != set(query) or len(query) != len(tps):
            # As Spark's Kafka source: a partition without a timestamp would have no bound.
            left = sorted(f"{tp.topic}/{tp.partition}" for tp in set(tps) - named)
            extra = sorted(f"{tp.topic}/{tp.partition}" for tp in named - set(tps))
            raise ConfigError(f"{name} must give a timestamp for exactly the partitions "
                              f"read; missing: {', '.join(left) or 'none'}; not read: "
                              f"{', '.join(extra) or 'none'}")
    found = consumer.offsets_for_times(query, _METADATA_TIMEOUT_S) if query else {}
    return {tp: (None if (r := found.get(tp)) is None else r.offset) for tp in tps}


def _timestamp_name(spec: TimestampSpec, side: str) -> str:
    return f"{side}Timestamp" if isinstance(spec, int) else f"{side}OffsetsByTimestamp"


def start_offsets(consumer: Consumer, opts: SourceOptions, tps: list[TopicPartition],
                  begin: dict[TopicPartition, int], end: dict[TopicPartition, int]
                  ) -> dict[TopicPartition, int]:
    """Where each partition's read starts: ``startingTimestamp``, else
    ``startingOffsetsByTimestamp``, else ``startingOffsets`` (Spark's precedence).

    A timestamp no record reaches fails (``startingOffsetsByTimestampStrategy=error``,
    the default) or starts at the end (``latest``).

    Raises:
        ConfigError: as above, or an offset outside the partition (see :func:`offset_for`).
        KafkaTimeoutError: a timestamp lookup took longer than 30 s.
    """
    found = _by_timestamp(consumer, opts.starting_ts, tps, "starting")
    out: dict[TopicPartition, int] = {}
    for tp in tps:
        if found is None:
            out[tp] = offset_for(opts.starting, tp, EARLIEST, begin[tp], end[tp],
                                 "startingOffsets", fail_on_data_loss=opts.fail_on_data_loss)
            continue
        offset = found[tp]
        if offset is None:
            if opts.ts_strategy == "error":
                raise ConfigError(
                    f"{_timestamp_name(opts.starting_ts, 'starting')}: no record of "
                    f"{tp.topic}/{tp.partition} has a timestamp at or after the one given; "
                    f"set startingOffsetsByTimestampStrategy=latest to start at its end")
            offset = end[tp]
        out[tp] = min(max(offset, begin[tp]), end[tp])
    return out


def end_offsets(consumer: Consumer, opts: SourceOptions, tps: list[TopicPartition],
                begin: dict[TopicPartition, int], end: dict[TopicPartition, int]
                ) -> dict[TopicPartition, int]:
    """Where each partition's batch read ends (exclusive): ``endingTimestamp``, else
    ``endingOffsetsByTimestamp`` (no record at or after it: the end, as Spark), else
    ``endingOffsets``.

    Raises:
        ConfigError: an offset outside the partition (see :func:`offset_for`).
        KafkaTimeoutError: a timestamp lookup took longer than 30 s.
    """
    found = _by_timestamp(consumer, opts.ending_ts, tps, "ending")
    out: dict[TopicPartition, int] = {}
    for tp in tps:
        if found is None:
            out[tp] = offset_for(opts.ending, tp, LATEST, begin[tp], end[tp],
                                 "endingOffsets", fail_on_data_loss=opts.fail_on_data_loss)
        else:
            offset = found[tp]
            out[tp] = end[tp] if offset is None else min(max(offset, begin[tp]), end[tp])
    return out


def plan_ranges(opts: SourceOptions, limits: RangeLimits | None = None) -> list[OffsetRange]:
    """The offset ranges of a batch read, one per Spark task (resolved now, on the driver):
    each partition from its start to its end (see :func:`start_offsets`,
    :func:`end_offsets`), narrowed by pushed filters' ``limits`` (see :func:`narrow`),
    split by :func:`split_ranges`; empty ranges are left out.

    Raises:
        ConfigError: a missing topic or partition, offsets outside a partition, or a start
            after its end.
        KafkaError: the cluster could not be asked (timeout 30 s per request).
    """
    with Consumer(planner_config(opts)) as consumer:
        tps = select_partitions(consumer, opts)
        begin, end = edge_offsets(consumer, tps)
        starts = start_offsets(consumer, opts, tps, begin, end)
        stops = end_offsets(consumer, opts, tps, begin, end)
        ranges = []
        for tp in tps:
            if starts[tp] > stops[tp]:
                raise ConfigError(f"{tp.topic}/{tp.partition}: the start {starts[tp]} is "
                                  f"after the end {stops[tp]} (startingOffsets / "
                                  f"endingOffsets or their by-timestamp variants)")
            ranges.append(OffsetRange(tp.topic, tp.partition, starts[tp], stops[tp]))
        if limits is not None:
            ranges = narrow(consumer, ranges, limits)
    return split_ranges(ranges, opts.min_partitions, opts.max_records_per_partition)


def narrow(consumer: Consumer, ranges: list[OffsetRange], limits: RangeLimits
           ) -> list[OffsetRange]:
    """``ranges`` cut to what pushed filters can let through: partitions the topic and
    partition filters reject are left out, offsets are cut to the offset bounds, and with a
    timestamp lower bound a range starts at the first offset whose record is that late
    (every earlier record is older, so fails the filter; no record that late: nothing of
    the range can pass). Ranges that become empty are left out.

    The options were resolved first, on every partition, so a pushed filter never changes
    what they mean or which of them fail.

    Raises:
        KafkaTimeoutError: a timestamp lookup took longer than 30 s.
    """
    cut = []
    for r in ranges:
        start, end = limits.clamp(r.start, r.end)
        if limits.admits(TopicPartition(r.topic, r.partition)) and start < end:
            cut.append(OffsetRange(r.topic, r.partition, start, end))
    if limits.timestamp_from_ms is None or not cut:
        return cut
    # The lookup comes after the ends were fixed: every record below an end was there
    # when it was asked, so "none that late" holds for the whole range.
    found = consumer.offsets_for_times(
        {TopicPartition(r.topic, r.partition): limits.timestamp_from_ms for r in cut},
        _METADATA_TIMEOUT_S)
    out = []
    for r in cut:
        hit = found.get(TopicPartition(r.topic, r.partition))
        start = r.end if hit is None else max(r.start, hit.offset)
        if start < r.end:
            out.append(OffsetRange(r.topic, r.partition, start, r.end))
    return out


def split_ranges(ranges: Iterable[OffsetRange], min_partitions: int | None,
                 max_records: int | None) -> list[OffsetRange]:
    """Split offset ranges into more Spark tasks, as Spark's Kafka source does.

    ``maxRecordsPerPartition`` first cuts every range into pieces of at most that many
    offsets; then, when fewer than ``minPartitions`` pieces remain, each piece is cut
    again into ``round(size / total * minPartitions)`` (at least 1) equal parts, so large
    partitions get more tasks. Empty ranges are dropped; the pieces tile each range.
    """
    pieces = [r for r in ranges if r.end > r.start]
    if max_records is not None:
        pieces = [p for r in pieces for p in _divide(r, -(-(r.end - r.start) // max_records))]
    if min_partitions is not None and len(pieces) < min_partitions:
        total = sum(r.end - r.start for r in pieces)
        pieces = [p for r in pieces for p in _divide(
            r, max(1, math.floor((r.end - r.start) * min_partitions / total + 0.5)))]
    return pieces


def _divide(rng: OffsetRange, parts: int) -> list[OffsetRange]:
    size = rng.end - rng.start
    cuts = [rng.start + size * i // parts for i in range(parts + 1)]
    return [OffsetRange(rng.topic, rng.partition, a, b)
            for a, b in itertools.pairwise(cuts) if b > a]
