"""Arrow-first reads: a task yields ``pyarrow.RecordBatch``es built to the DataFrame's exact
Arrow schema (SPARK-NOTES, sharp edge 6), with the Kafka metadata columns built from the
records (Tansu; the task is run directly, without Spark)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pyspark", reason="needs the spark extra")

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DateType,
    DayTimeIntervalType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from kontrakt.clients.producer import Producer
from kontrakt.spark._arrow import arrow_schema, arrow_type
from kontrakt.spark._fieldplan import output_schema, resolve_column
from kontrakt.spark._options import parse_options
from kontrakt.spark._plan import plan_ranges
from kontrakt.spark._task import CHUNK_RECORDS, read_range
from kontrakt.testing import TansuBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_arrow_types_are_pysparks_for_every_type_the_source_produces() -> None:
    inner = StructType([StructField("a", IntegerType(), False),
                        StructField("b", StringType(), True)])
    types = [BooleanType(), IntegerType(), LongType(), FloatType(), DoubleType(),
             StringType(), BinaryType(), DateType(), TimestampType(), TimestampNTZType(),
             DecimalType(38, 9), NullType(),
             DayTimeIntervalType(DayTimeIntervalType.DAY, DayTimeIntervalType.SECOND),
             ArrayType(inner, False), ArrayType(LongType(), True),
             MapType(StringType(), inner, True), MapType(StringType(), DoubleType(), False),
             StructType([StructField("s", inner, True),
                         StructField("l", ArrayType(inner, True), False)])]
    for t in types:
        assert arrow_type(t) == to_arrow_type(t, timezone="UTC"), t.simpleString()
        # nested nullability is part of the type PySpark compares
        assert str(arrow_type(t)) == str(to_arrow_type(t, timezone="UTC"))


def _batches(broker: TansuBroker, topic: str, **options: str) -> tuple[list[Any], pa.Schema]:
    opts = parse_options({"kafka.bootstrap.servers": broker.bootstrap_servers,
                          "subscribe": topic, **options})
    key, value = resolve_column(opts, None, True), resolve_column(opts, None, False)
    out: list[Any] = []
    for rng in plan_ranges(opts):
        out.extend(read_range(opts, key, value, rng))
    return out, arrow_schema(output_schema(key, value, opts))


def test_a_task_yields_record_batches_of_the_dataframes_arrow_schema(
        tansu_broker: TansuBroker, topic_name: str) -> None:
    n = CHUNK_RECORDS + 100  # more than one batch
    tansu_broker.create_topic(topic_name, 1)
    with Producer({"bootstrap.servers": tansu_broker.bootstrap_servers,
                   "linger.ms": 20}) as p:
        for i in range(n):
            p.send(topic_name, b"v%d" % i, key=None if i % 3 else b"k%d" % i,
                   timestamp_ms=1_700_000_000_000 + i,
                   headers=[("h", b"%d" % i), ("empty", None)] if i == 5 else None)
        p.flush(10)

    batches, schema = _batches(tansu_broker, topic_name,
                               **{"key.format": "string", "includeHeaders": "true"})
    assert len(batches) == 2
    for batch in batches:
        assert isinstance(batch, pa.RecordBatch)
        assert batch.schema == schema
        assert str(batch.schema) == str(schema)  # field nullability included
    table = pa.Table.from_batches(batches)
    assert table.column("offset").to_pylist() == list(range(n))
    assert table.column("value").to_pylist() == [b"v%d" % i for i in range(n)]
    assert table.column("key").to_pylist() == [None if i % 3 else f"k{i}" for i in range(n)]
    assert set(table.column("topic").to_pylist()) == {topic_name}
    assert set(table.column("partition").to_pylist()) == {0}
    assert set(table.column("timestampType").to_pylist()) == {0}
    stamps = table.column("timestamp").cast(pa.int64()).to_pylist()
    assert stamps == [(1_700_000_000_000 + i) * 1000 for i in range(n)]
    headers = table.column("headers").to_pylist()
    assert headers[5] == [{"key": "h", "value": b"5"}, {"key": "empty", "value": None}]
    assert all(h == [] for i, h in enumerate(headers) if i != 5)

    without, schema = _batches(tansu_broker, topic_name)  # off by default, as in Spark
    assert "headers" not in schema.names
    assert all(b.schema == schema for b in without)
    assert sum(b.num_rows for b in without) == n


def test_metadata_columns_of_mixed_timestamp_types_and_missing_timestamps() -> None:
    from kontrakt._types import ConsumerRecord
    from kontrakt._types import TimestampType as Kind
    from kontrakt.spark._arrow import Chunk, header_array, metadata_arrays

    records = [ConsumerRecord("t", 3, 10, 1_000, Kind.CREATE_TIME, None, b"a"),
               ConsumerRecord("t", 3, 12, -1, Kind.NO_TIMESTAMP, None, b"b",
                              [("h", None)]),
               ConsumerRecord("t", 3, 13, 2_000, Kind.LOG_APPEND_TIME, None, b"c")]
    chunk = Chunk(records)
    topic, partition, offset, stamp, kind = metadata_arrays(chunk, "t", 3)
    assert topic.type == pa.string() and topic.to_pylist() == ["t"] * 3
    assert partition.type == pa.int32() and partition.to_pylist() == [3] * 3
    assert offset.type == pa.int64() and offset.to_pylist() == [10, 12, 13]
    assert stamp.type == pa.timestamp("us", tz="UTC")
    assert stamp.cast(pa.int64()).to_pylist() == [1_000_000, None, 2_000_000]
    assert kind.type == pa.int32() and kind.to_pylist() == [0, -1, 1]
    assert header_array(chunk).to_pylist() == [[], [{"key": "h", "value": None}], []]
    assert [len(a) for a in metadata_arrays(Chunk([]), "t", 3)] == [0] * 5
