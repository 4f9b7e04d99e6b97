"""Streaming reads: micro-batches over offset ranges, with offsets kept by Spark.

A stream offset is JSON of the form ``{"topic": {"partition": offset}}`` (partition ids are
strings, as JSON requires) — the next offset to read in every partition. Spark checkpoints
it; the source keeps no state and commits nothing to Kafka. Needs PySpark 4.2 or later (read
limits and ``Trigger.AvailableNow``).
"""

from __future__ import annotations

import time
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from kontrakt._types import TopicPartition
from kontrakt.clients.consumer import Consumer
from kontrakt.spark._fieldplan import ColumnPlan, OffsetRange
from kontrakt.spark._options import SourceOptions
from kontrakt.spark._plan import (
    edge_offsets,
    planner_config,
    select_partitions,
    split_ranges,
    start_offsets,
)
from kontrakt.spark._task import read_range

__all__ = ["KontraktStreamReader", "cap_offsets"]

Offsets = dict[TopicPartition, int]


def _to_json(offsets: Offsets) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for tp, offset in sorted(offsets.items()):
        out.setdefault(tp.topic, {})[str(tp.partition)] = offset
    return out


def _from_json(doc: dict[str, Any]) -> Offsets:
    return {TopicPartition(topic, int(p)): int(o)
            for topic, parts in doc.items() for p, o in parts.items()}


def cap_offsets(start: Offsets, end: Offsets, max_rows: int) -> Offsets:
    """Move each partition from ``start`` toward ``end`` by at most ``max_rows`` offsets in
    total, shared in proportion to each partition's backlog (remainders go one by one to
    the partitions in order, so every call makes progress while there is a backlog)."""
    lag = {tp: max(0, e - start.get(tp, e)) for tp, e in end.items()}
    total = sum(lag.values())
    if total <= max_rows:
        return dict(end)
    take = {tp: lag[tp] * max_rows // total for tp in lag}
    left = max_rows - sum(take.values())
    for tp in sorted(lag):
        if left <= 0:
            break
        if take[tp] < lag[tp]:
            take[tp] += 1
            left -= 1
    return {tp: start.get(tp, end[tp]) + take[tp] for tp in end}


class KontraktStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Reads new records of the subscribed topics in micro-batches.

    ``startingOffsets`` (or ``startingTimestamp`` / ``startingOffsetsByTimestamp``)
    applies to a new query only (a restarted one resumes from its checkpoint); partitions
    that appear later (new partitions, topics subscribePattern matches) are read from their
    earliest offset. ``maxOffsetsPerTrigger`` bounds each micro-batch (also under
    ``availableNow``, which reads up to the end offsets seen when the query started).
    ``minOffsetsPerTrigger`` holds a micro-batch back until that many new offsets are
    there or ``maxTriggerDelay`` (default 15m) has passed since the last one (the first
    micro-batch of a run and ``availableNow`` queries are never held back).
    """

    def __init__(self, opts: SourceOptions, key: ColumnPlan, value: ColumnPlan) -> None:
        self.opts = opts
        self.key = key
        self.value = value
        self._available_now: Offsets | None = None
        # When the last micro-batch was planned (None: none yet in this run).
        self._last_trigger: float | None = None

    def _edges(self) -> tuple[Offsets, Offsets]:
        with Consumer(planner_config(self.opts)) as consumer:
            return edge_offsets(consumer, select_partitions(consumer, self.opts))

    def initialOffset(self) -> dict[str, Any]:
        """Where a new query starts: the starting options resolved now."""
        with Consumer(planner_config(self.opts)) as consumer:
            tps = select_partitions(consumer, self.opts)
            begin, end = edge_offsets(consumer, tps)
            return _to_json(start_offsets(consumer, self.opts, tps, begin, end))

    def getDefaultReadLimit(self) -> ReadLimit:
        """``maxOffsetsPerTrigger`` as a row limit (none: read all available)."""
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Fix the end offsets now: an ``availableNow`` query stops there."""
        self._available_now = self._edges()[1]

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """The end of the next micro-batch: the partitions' end offsets, capped by the
        read limit and (``availableNow``) by the end offsets when the query started; or
        ``start`` itself (no micro-batch) while ``minOffsetsPerTrigger`` holds it back."""
        begin, end = self._edges()
        if self._available_now is not None:
            end = {tp: min(o, self._available_now[tp])
                   for tp, o in end.items() if tp in self._available_now}
        current = _from_json(start)
        # A partition the start does not know yet (new) is read from its earliest offset.
        current = {tp: current.get(tp, begin.get(tp, 0)) for tp in end}
        end = {tp: max(o, current[tp]) for tp, o in end.items()}
        if self._held_back(current, end):
            return start
        if isinstance(limit, ReadMaxRows):
            end = cap_offsets(current, end, limit.max_rows)
        return _to_json(end)

    def _held_back(self, current: Offsets, end: Offsets) -> bool:
        """``minOffsetsPerTrigger``: fewer new offsets than that, and ``maxTriggerDelay``
        has not passed since the last micro-batch."""
        now = time.monotonic()
        minimum = self.opts.min_offsets_per_trigger
        if (minimum is not None and self._available_now is None
                and self._last_trigger is not None
                and now - self._last_trigger < self.opts.max_trigger_delay_s
                and sum(o - current[tp] for tp, o in end.items()) < minimum):
            return True
        self._last_trigger = now
        return False

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        """One task per partition with offsets between ``start`` and ``end`` (more with
        ``maxRecordsPerPartition`` / ``minPartitions``)."""
        first = _from_json(start)
        last = _from_json(end)
        missing = [tp for tp in last if tp not in first]
        if missing:
            with Consumer(self.opts.consumer_config()) as consumer:
                first.update(consumer.beginning_offsets(missing, 30.0))
        ranges = [OffsetRange(tp.topic, tp.partition, first[tp], stop)
                  for tp, stop in sorted(last.items())]
        return [InputPartition(r) for r in split_ranges(
            ranges, self.opts.min_partitions, self.opts.max_records_per_partition)]

    def read(self, partition: InputPartition) -> Any:
        """The rows of one partition's range (runs on an executor)."""
        rng: OffsetRange = partition.value
        return read_range(self.opts, self.key, self.value, rng)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: Spark's checkpoint holds the offsets; no group commits to Kafka."""
