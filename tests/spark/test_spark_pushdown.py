"""Filter pushdown on batch reads (PySpark 4.1+): filters on topic, partition, offset and
timestamp narrow the planned offset ranges, and a query gives the same rows with and
without ``spark.sql.python.filterPushdown.enabled``.

The planner tests run the reader's ``pushFilters`` and ``partitions`` against the crafted
broker of ``test_spark_plan`` (crafted ListOffsets and Fetch answers: every partition holds
offsets 0..9, offset ``i`` with timestamp ``T0 + 10 * i`` ms), since neither test broker
answers timestamp lookups faithfully (Tansu answers 0, see TEST-BROKERS.md). The Spark test
runs against Tansu, where a timestamp bound narrows nothing but must not change the rows.
"""

# The crafted broker fixture comes from test_spark_plan, so its name is a parameter here.
# ruff: noqa: F811

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="needs the spark extra")

from pyspark.sql import datasource as ds
from pyspark.sql.types import BinaryType

from kontrakt.clients.producer import Producer
from kontrakt.spark._fieldplan import ColumnPlan
from kontrakt.spark._options import parse_options
from kontrakt.spark._source import KontraktPushdownReader
from kontrakt.testing import TansuBroker
from tests._crafted_broker import FakeBroker
from tests.spark.test_spark_plan import END, T0, TOPIC, broker  # noqa: F401 (fixture)

pytestmark = pytest.mark.timeout(300)  # the first Spark test also starts the session

UTC = dt.timezone.utc


def _at(ms: int, us: int = 0) -> dt.datetime:
    """The timestamp column's value of a record stamped ``ms`` (plus ``us`` µs)."""
    return dt.datetime.fromtimestamp(ms / 1000, UTC) + dt.timedelta(microseconds=us)


def _push(fake: FakeBroker, filters: list[Any], **options: str
          ) -> tuple[list[tuple[int, int, int]], list[Any]]:
    """The planned (partition, start, end) ranges after pushing ``filters``, and the
    filters handed back to Spark."""
    opts = parse_options({"kafka.bootstrap.servers": fake.bootstrap, "subscribe": TOPIC,
                          "filterPushdown": "true", **options})
    plan = ColumnPlan(BinaryType(), ())
    reader = KontraktPushdownReader(opts, plan, plan)
    remaining = list(reader.pushFilters(filters))
    ranges = [(p.value.partition, p.value.start, p.value.end) for p in reader.partitions()]
    return ranges, remaining


def test_partition_and_offset_filters_cut_ranges_exactly(broker: FakeBroker) -> None:
    on_value = ds.EqualTo(("value",), b"x")
    filters = [ds.EqualTo(("partition",), 1), ds.GreaterThan(("offset",), 2),
               ds.LessThanOrEqual(("offset",), 6), on_value]
    ranges, remaining = _push(broker, filters)
    assert ranges == [(1, 3, 7)]
    assert remaining == [on_value] and remaining[0] is on_value  # by identity, as Spark asks
    # IN narrows to its span but Spark must still drop the offsets between.
    offsets_in = ds.In(("offset",), (2, 5))
    assert _push(broker, [offsets_in]) == ([(0, 2, 6), (1, 2, 6)], [offsets_in])
    assert _push(broker, [ds.Not(ds.In(("partition",), (0,)))])[0] == [(1, 0, END)]
    assert _push(broker, [ds.EqualTo(("offset",), 50)])[0] == []  # past every end
    # Options are resolved first; the filters narrow what they give.
    assert _push(broker, [ds.LessThan(("offset",), 8)], startingOffsets="latest")[0] == []
    assert _push(broker, [ds.GreaterThanOrEqual(("offset",), 4)],
                 maxRecordsPerPartition="3")[0] == [
        (0, 4, 7), (0, 7, 10), (1, 4, 7), (1, 7, 10)]


def test_nothing_is_narrowed_without_the_option(broker: FakeBroker) -> None:
    filters = [ds.EqualTo(("partition",), 1), ds.GreaterThan(("offset",), 2)]
    ranges, remaining = _push(broker, filters, filterPushdown="false")
    assert ranges == [(0, 0, END), (1, 0, END)]
    assert len(remaining) == 2 and all(a is b for a, b in zip(remaining, filters, strict=True))


def test_topic_filters_decide_whole_partitions(broker: FakeBroker) -> None:
    assert _push(broker, [ds.In(("topic",), (TOPIC, "other"))]) == (
        [(0, 0, END), (1, 0, END)], [])
    assert _push(broker, [ds.StringStartsWith(("topic",), "clo")])[0] == [
        (0, 0, END), (1, 0, END)]
    assert _push(broker, [ds.Not(ds.EqualTo(("topic",), TOPIC))]) == ([], [])
    assert _push(broker, [ds.StringContains(("topic",), "x")])[0] == []


def test_filters_that_cannot_be_decided_exactly_go_back_to_spark(broker: FakeBroker) -> None:
    """Nothing is narrowed on a guess: NOT IN with a null is false for every row (Python's
    ``not in`` says otherwise), literals of another type, nested fields, null tests."""
    whole = [(0, 0, END), (1, 0, END)]
    kept = [ds.Not(ds.In(("partition",), (1, None))), ds.EqualTo(("partition",), "1"),
            ds.EqualTo(("offset",), 2.0), ds.EqualTo(("value", "offset"), 2),
            ds.IsNotNull(("offset",)), ds.Not(ds.EqualTo(("offset",), 3)),
            ds.LessThan(("timestamp",), _at(T0 + 20))]
    ranges, remaining = _push(broker, kept)
    assert ranges == whole
    assert len(remaining) == len(kept) and all(a is b for a, b in zip(remaining, kept, strict=True))


def test_a_timestamp_lower_bound_starts_at_the_first_record_that_late(
        broker: FakeBroker) -> None:
    """Offset i is stamped T0 + 10 i ms. The filter stays with Spark (later records may be
    older, CreateTime is the producer's); only the start moves."""
    at_least = ds.GreaterThanOrEqual(("timestamp",), _at(T0 + 30))
    assert _push(broker, [at_least]) == ([(0, 3, END), (1, 3, END)], [at_least])
    # > T0+30ms exactly: the record at T0+30 fails, so from T0+31 ms on: offset 4.
    assert _push(broker, [ds.GreaterThan(("timestamp",), _at(T0 + 30))])[0][0] == (0, 4, END)
    # One µs past T0+20 ms: a record needs T0+21 ms or later.
    assert _push(broker, [ds.GreaterThanOrEqual(("timestamp",), _at(T0 + 20, 1))]
                 )[0][0] == (0, 3, END)
    assert _push(broker, [ds.EqualTo(("timestamp",), _at(T0 + 50)),
                          ds.EqualTo(("partition",), 0)])[0] == [(0, 5, END)]
    # No record that late in the range: nothing to read.
    assert _push(broker, [ds.GreaterThan(("timestamp",), _at(T0 + 90))])[0] == []
    # An upper bound narrows nothing.
    assert _push(broker, [ds.LessThan(("timestamp",), _at(T0 + 20))])[0] == [
        (0, 0, END), (1, 0, END)]


PUSHDOWN = "spark.sql.python.filterPushdown.enabled"


@pytest.fixture
def eight_records(spark: Any, tansu_broker: TansuBroker, topic_name: str) -> Iterator[Any]:
    """8 records in 2 partitions (value ``v<i>`` in partition i % 2), and a function giving
    a fresh DataFrame over them; filter pushdown is on meanwhile."""
    tansu_broker.create_topic(topic_name, 2)
    with Producer({"bootstrap.servers": tansu_broker.bootstrap_servers}) as p:
        for i in range(8):
            p.send(topic_name, b"v%d" % i, partition=i % 2)
        p.flush(10)

    def load(**options: str) -> Any:
        reader = (spark.read.format("kontrakt")
                  .option("kafka.bootstrap.servers", tansu_broker.bootstrap_servers)
                  .option("subscribe", topic_name))
        for k, v in options.items():
            reader = reader.option(k, v)
        return reader.load()

    before = spark.conf.get(PUSHDOWN)
    spark.conf.set(PUSHDOWN, "true")
    try:
        yield load
    finally:
        spark.conf.set(PUSHDOWN, before)


def test_pushdown_gives_the_same_rows_and_plans_fewer_offsets(
        spark: Any, eight_records: Any, topic_name: str) -> None:
    """With ``maxRecordsPerPartition=2`` the scan's partition count shows the offsets
    planned: 4 pieces of 2 for the whole topic, 1 for the two offsets the filter keeps."""
    early = dt.datetime(2001, 1, 1, tzinfo=UTC)

    def run(pushdown: str) -> tuple[list[tuple[int, int, bytes]], int]:
        # A new DataFrame each time: PySpark keeps a DataFrame's planned scan (see below).
        query = eight_records(maxRecordsPerPartition="2", filterPushdown=pushdown).where(
            f"partition = 1 AND offset BETWEEN 1 AND 2 AND value != X'7631'"
            f" AND topic = '{topic_name}' AND timestamp >= '{early.isoformat()}'")
        rows = query.select("partition", "offset", "value").collect()
        return (sorted((r.partition, r.offset, bytes(r.value)) for r in rows),
                query.rdd.getNumPartitions())

    pushed, planned = run("true")
    plain, unpushed = run("false")
    assert pushed == plain == [(1, 1, b"v3"), (1, 2, b"v5")]
    assert (planned, unpushed) == (1, 4)


def test_a_reused_dataframe_reads_everything_by_default(eight_records: Any) -> None:
    """PySpark (4.1 to 4.3) plans a query that pushes no filter with the partitions the
    DataFrame's last pushdown planned: with ``filterPushdown=true`` the count after a
    filtered query misses the rows the filter left out, which is why the option is off
    by default. If the second assertion fails, PySpark stopped reusing them: the default
    can turn on."""
    df = eight_records()
    assert df.where("partition = 1").count() == 4
    assert df.count() == 8
    narrowed = eight_records(filterPushdown="true")
    assert narrowed.where("partition = 1").count() == 4
    assert narrowed.count() == 4, "PySpark no longer reuses a pushed scan's partitions"
