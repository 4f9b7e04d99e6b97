"""Filter pushdown for batch reads (PySpark 4.1+): which of Spark's pushed filters on
``topic``, ``partition``, ``offset`` and ``timestamp`` narrow the planned offset ranges, and
which Spark must still evaluate.

Correctness first: a range is only ever narrowed where every record left out fails the
filter. ``topic`` and ``partition`` filters decide whole partitions and ``offset``
comparisons cut a range exactly, so Spark need not evaluate those again. A ``timestamp``
lower bound only moves a range's start to the first offset whose timestamp reaches it (a
ListOffsets lookup: every earlier record is older); records after it may still be older
(producers set CreateTime freely), so Spark evaluates timestamp filters itself, and upper
bounds on the timestamp narrow nothing for the same reason.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from kontrakt._types import TopicPartition

__all__ = ["RangeLimits", "called_for_pushdown", "push_filters"]

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_PUSHDOWN_WORKER = "pyspark.sql.worker.data_source_pushdown_filters"


@dataclass(frozen=True)
class RangeLimits:
    """What the pushed filters leave of a batch read (plain data: readers are pickled).

    Attributes:
        partition_filters: filters on ``topic`` or ``partition`` (Spark's ``Filter``
            objects) that a partition must pass to be read at all.
        offset_from: the smallest offset any row may have.
        offset_until: the offset no row reaches (exclusive); None: unbounded.
        timestamp_from_ms: the earliest record timestamp (ms) any row may have; None:
            unbounded.
    """

    partition_filters: tuple[Any, ...] = ()
    offset_from: int | None = None
    offset_until: int | None = None
    timestamp_from_ms: int | None = None

    def admits(self, tp: TopicPartition) -> bool:
        """Whether ``tp``'s records can pass the topic and partition filters."""
        return all(_holds(f, tp.topic if f_column(getattr(f, "child", f)) == "topic"
                          else tp.partition) for f in self.partition_filters)

    def clamp(self, start: int, end: int) -> tuple[int, int]:
        """``start..end`` cut to the offset bounds (an empty range comes back with
        ``start >= end``)."""
        if self.offset_from is not None:
            start = max(start, self.offset_from)
        if self.offset_until is not None:
            end = min(end, self.offset_until)
        return start, end


def called_for_pushdown(depth: int = 6) -> bool:
    """Whether the current call comes from PySpark's filter-pushdown planner.

    PySpark refuses a reader that overrides ``pushFilters`` when
    ``spark.sql.python.filterPushdown.enabled`` is off (DATA_SOURCE_PUSHDOWN_DISABLED),
    which would break every read that did not set it; only the pushdown planner worker
    ever calls ``pushFilters``, so the data source hands a pushdown-capable reader to that
    worker alone. The worker calls ``DataSource.reader()`` directly, a frame or two up.
    """
    frame = sys._getframe(1)
    for _ in range(depth):
        if frame is None:
            return False
        if frame.f_globals.get("__name__") == _PUSHDOWN_WORKER:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def f_column(f: Any) -> str | None:
    """The top-level column a filter is on, or None (nested fields, Not, ...)."""
    attribute = getattr(f, "attribute", None)
    if isinstance(attribute, tuple) and len(attribute) == 1 and isinstance(attribute[0], str):
        return attribute[0]
    return None


def _is_int(v: object) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def _fits(column: str, value: object) -> bool:
    """Whether a literal has the Python type the column's values have."""
    if column == "topic":
        return isinstance(value, str)
    return _is_int(value)


def _holds(f: Any, value: object) -> bool:
    """``f`` evaluated on a non-null column value (only for filters :func:`_exact`
    accepted)."""
    from pyspark.sql import datasource as ds

    if isinstance(f, ds.Not):
        return not _holds(f.child, value)
    if isinstance(f, (ds.EqualTo, ds.EqualNullSafe)):
        return bool(value == f.value)
    if isinstance(f, ds.In):
        return value in f.value
    if isinstance(f, ds.GreaterThan):
        return bool(value > f.value)
    if isinstance(f, ds.GreaterThanOrEqual):
        return bool(value >= f.value)
    if isinstance(f, ds.LessThan):
        return bool(value < f.value)
    if isinstance(f, ds.LessThanOrEqual):
        return bool(value <= f.value)
    if isinstance(f, ds.StringStartsWith):
        return isinstance(value, str) and value.startswith(f.value)
    if isinstance(f, ds.StringEndsWith):
        return isinstance(value, str) and value.endswith(f.value)
    assert isinstance(f, ds.StringContains), f
    return isinstance(value, str) and f.value in value


def _exact(f: Any) -> bool:
    """Whether ``f`` is a topic or partition filter :func:`_holds` decides exactly.

    Literals must have the column's type and no null: ``partition NOT IN (1, NULL)`` is
    null, so false, for every row, which a Python ``not in`` would not say.
    """
    from pyspark.sql import datasource as ds

    inner: Any = f.child if isinstance(f, ds.Not) else f
    column = f_column(inner)
    if column not in ("topic", "partition"):
        return False
    if isinstance(inner, ds.In):
        return bool(inner.value) and all(_fits(column, v) for v in inner.value)
    if isinstance(inner, (ds.EqualTo, ds.EqualNullSafe, ds.GreaterThan,
                          ds.GreaterThanOrEqual, ds.LessThan, ds.LessThanOrEqual)):
        return _fits(column, inner.value)
    strings = (ds.StringStartsWith, ds.StringEndsWith, ds.StringContains)
    return column == "topic" and isinstance(inner, strings) and isinstance(inner.value, str)


def _offset_bounds(f: Any) -> tuple[int | None, int | None, bool] | None:
    """(from, until, exact) of an ``offset`` filter, or None if it bounds nothing."""
    from pyspark.sql import datasource as ds

    if f_column(f) != "offset":
        return None
    if isinstance(f, ds.In):
        values = f.value
        if not values or not all(_is_int(v) for v in values):
            return None
        return min(values), max(values) + 1, False
    v = getattr(f, "value", None)
    if not _is_int(v):
        return None
    if isinstance(f, (ds.EqualTo, ds.EqualNullSafe)):
        return v, v + 1, True
    if isinstance(f, ds.GreaterThan):
        return v + 1, None, True
    if isinstance(f, ds.GreaterThanOrEqual):
        return v, None, True
    if isinstance(f, ds.LessThan):
        return None, v, True
    if isinstance(f, ds.LessThanOrEqual):
        return None, v + 1, True
    return None


def _micros(t: dt.datetime) -> int:
    return (t - _EPOCH) // dt.timedelta(microseconds=1)


def _timestamp_from_ms(f: Any) -> int | None:
    """The earliest record timestamp (ms) a ``timestamp`` filter lets through, or None.

    A record's timestamp column is its ms timestamp * 1000 µs, so ``>= t`` needs ms at
    least ceil(t / 1000 µs) and ``> t`` more than floor(t / 1000 µs).
    """
    from pyspark.sql import datasource as ds

    if f_column(f) != "timestamp":
        return None
    v = getattr(f, "value", None)
    if isinstance(f, ds.In):
        if not f.value or not all(isinstance(x, dt.datetime) and x.tzinfo for x in f.value):
            return None
        v = min(f.value)
    elif not isinstance(f, (ds.EqualTo, ds.EqualNullSafe, ds.GreaterThan,
                            ds.GreaterThanOrEqual)):
        return None
    if not isinstance(v, dt.datetime) or v.tzinfo is None:
        return None  # a naive value would be in some local zone: not ours to guess
    us = _micros(v)
    ms = us // 1000 + 1 if isinstance(f, ds.GreaterThan) else -(-us // 1000)
    # ListOffsets reads negative timestamps as EARLIEST / LATEST: no bound then.
    return ms if ms > 0 else None


def push_filters(filters: Sequence[Any]) -> tuple[RangeLimits, list[Any]]:
    """Translate Spark's pushed filters (an AND of them) into :class:`RangeLimits`.

    Returns:
        The limits, and the filters Spark must still evaluate after the scan (each one of
        ``filters``, by identity, as PySpark requires): everything but exact topic,
        partition and offset comparisons.
    """
    partition_filters: list[Any] = []
    remaining: list[Any] = []
    offset_from: int | None = None
    offset_until: int | None = None
    ts_from: int | None = None
    for f in filters:
        if _exact(f):
            partition_filters.append(f)
            continue
        bounds = _offset_bounds(f)
        if bounds is not None:
            lo, hi, exact = bounds
            if lo is not None:
                offset_from = lo if offset_from is None else max(offset_from, lo)
            if hi is not None:
                offset_until = hi if offset_until is None else min(offset_until, hi)
            if exact:
                continue
        ms = _timestamp_from_ms(f)
        if ms is not None:
            ts_from = ms if ts_from is None else max(ts_from, ms)
        remaining.append(f)
    return RangeLimits(tuple(partition_filters), offset_from, offset_until, ts_from), remaining

