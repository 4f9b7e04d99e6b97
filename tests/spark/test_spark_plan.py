"""The read planner without Spark: by-timestamp bounds, split ranges, option checks and the
``minOffsetsPerTrigger`` hold-back.

Timestamp lookups run against :class:`FakeBroker` (crafted ListOffsets and Fetch answers):
neither test broker answers them faithfully (Tansu answers 0, the librdkafka mock -1; see
TEST-BROKERS.md). The crafted log: every partition holds offsets 0..9, offset ``i`` with
timestamp ``T0 + 10 * i``; a Fetch answers high watermark 10.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="needs the spark extra")

from pyspark.sql.streaming.datasource import ReadAllAvailable
from pyspark.sql.types import BinaryType

from kontrakt._types import TopicPartition
from kontrakt.errors import ConfigError
from kontrakt.protocol.messages import FetchResponse, ListOffsetsResponse
from kontrakt.spark._fieldplan import ColumnPlan, OffsetRange
from kontrakt.spark._options import parse_options
from kontrakt.spark._plan import matching_topics, plan_ranges, split_ranges
from kontrakt.spark._stream import KontraktStreamReader
from tests._crafted_broker import FakeBroker

pytestmark = pytest.mark.timeout(60)

TOPIC = "clock"
T0 = 1_700_000_000_000
END = 10


def _list_offsets(version: int, req: Any) -> Any:
    T = ListOffsetsResponse.ListOffsetsTopicResponse
    P = T.ListOffsetsPartitionResponse

    def answer(ts: int) -> tuple[int, int]:
        if ts == -2:
            return 0, -1
        if ts == -1:
            return END, -1
        hits = [i for i in range(END) if T0 + 10 * i >= ts]
        return (hits[0], T0 + 10 * hits[0]) if hits else (-1, -1)

    return ListOffsetsResponse(topics=[T(name=t.name, partitions=[
        P(partition_index=p.partition_index, error_code=0, offset=answer(p.timestamp)[0],
          timestamp=answer(p.timestamp)[1], leader_epoch=0)
        for p in t.partitions]) for t in req.topics])


def _fetch(version: int, req: Any) -> Any:
    R = FetchResponse.FetchableTopicResponse
    return FetchResponse(responses=[R(topic=t.topic, partitions=[R.PartitionData(
        partition_index=p.partition, error_code=0, high_watermark=END, log_start_offset=0,
        last_stable_offset=END, records=b"") for p in t.partitions]) for t in req.topics])


@pytest.fixture(scope="module")
def broker() -> Iterator[FakeBroker]:
    """The crafted broker, served by an event loop in a thread (the planner is sync)."""
    loop = asyncio.new_event_loop()
    fake = FakeBroker({TOPIC: 2}, {2: _list_offsets, 1: _fetch})
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(fake.__aenter__(), loop).result(10)
    try:
        yield fake
    finally:
        asyncio.run_coroutine_threadsafe(fake.__aexit__(None, None, None), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def _plan(broker: FakeBroker, **options: str) -> list[tuple[int, int, int]]:
    subscription = {} if "assign" in options else {"subscribe": TOPIC}
    opts = parse_options({"kafka.bootstrap.servers": broker.bootstrap, **subscription,
                          **options})
    return [(r.partition, r.start, r.end) for r in plan_ranges(opts)]


def test_starting_and_ending_timestamps_bound_every_partition(broker: FakeBroker) -> None:
    assert _plan(broker, startingTimestamp=str(T0 + 25), endingTimestamp=str(T0 + 70)) == [
        (0, 3, 7), (1, 3, 7)]
    # The single timestamp wins over the per-partition one and over startingOffsets.
    assert _plan(broker, startingTimestamp=str(T0 + 50), startingOffsets="latest",
                 startingOffsetsByTimestamp=f'{{"{TOPIC}": {{"0": 0, "1": 0}}}}') == [
        (0, 5, END), (1, 5, END)]


def test_per_partition_timestamps(broker: FakeBroker) -> None:
    assert _plan(broker,
                 startingOffsetsByTimestamp=f'{{"{TOPIC}": {{"0": {T0}, "1": {T0 + 81}}}}}',
                 endingOffsetsByTimestamp=f'{{"{TOPIC}": {{"0": {T0 + 20}, "1": {T0 + 999}}}}}',
                 ) == [(0, 0, 2), (1, 9, END)]  # no record at T0+999: the end
    with pytest.raises(ConfigError, match=r"every|exactly the partitions.*missing: clock/1"):
        _plan(broker, startingOffsetsByTimestamp=f'{{"{TOPIC}": {{"0": {T0}}}}}')


def test_a_starting_timestamp_past_every_record(broker: FakeBroker) -> None:
    late = str(T0 + 10_000)
    with pytest.raises(ConfigError, match=r"startingTimestamp: no record of clock/0 .*"
                                          r"startingOffsetsByTimestampStrategy=latest"):
        _plan(broker, startingTimestamp=late)
    assert _plan(broker, startingTimestamp=late,
                 startingOffsetsByTimestampStrategy="latest") == []  # starts at the end


def test_assign_and_split_ranges(broker: FakeBroker) -> None:
    assert _plan(broker, assign=f'{{"{TOPIC}": [1]}}') == [(1, 0, END)]
    assert _plan(broker, maxRecordsPerPartition="4") == [
        (0, 0, 3), (0, 3, 6), (0, 6, 10), (1, 0, 3), (1, 3, 6), (1, 6, 10)]
    assert len(_plan(broker, minPartitions="5")) == 6  # round(10/20 * 5) = 3 per partition
    with pytest.raises(ConfigError, match=r"assign.*do not exist: clock/7"):
        _plan(broker, assign=f'{{"{TOPIC}": [7]}}')


def test_split_ranges_as_spark_does() -> None:
    big, small = OffsetRange("a", 0, 0, 90), OffsetRange("a", 1, 100, 110)
    # maxRecordsPerPartition first, then minPartitions in proportion to each piece's size
    assert [(r.start, r.end) for r in split_ranges([big, small], None, 45)] == [
        (0, 45), (45, 90), (100, 110)]
    pieces = split_ranges([big, small], 10, None)
    assert [(r.partition, r.end - r.start) for r in pieces] == [(0, 10)] * 9 + [(1, 10)]
    assert split_ranges([OffsetRange("a", 0, 5, 5)], 3, 1) == []
    assert split_ranges([small], 2, None) == [OffsetRange("a", 1, 100, 105),
                                              OffsetRange("a", 1, 105, 110)]


def test_pattern_matches_whole_names_and_skips_internal_topics() -> None:
    names = ["orders-eu", "orders-us", "xorders-eu", "__consumer_offsets", "orders"]
    assert matching_topics(names, "orders-.*") == ("orders-eu", "orders-us")
    assert matching_topics(names, ".*") == ("orders", "orders-eu", "orders-us", "xorders-eu")


@pytest.mark.parametrize(("options", "message"), [
    ({"subscribe": "a", "assign": '{"a": [0]}'}, "exactly one of the options assign"),
    ({}, "exactly one of the options assign.*got none"),
    ({"assign": '{"a": 0}'}, "'assign' must be JSON"),
    ({"subscribePattern": "("}, "not a regular expression"),
    ({"subscribe": "a", "startingTimestamp": "-5"}, "startingTimestamp' must be"),
    ({"subscribe": "a", "startingOffsetsByTimestampStrategy": "earliest"}, "error or latest"),
    ({"subscribe": "a", "minPartitions": "0"}, "'minpartitions' must be a positive"),
    ({"subscribe": "a", "minOffsetsPerTrigger": "5"}, "for streaming queries only"),
    ({"subscribe": "a", "mode": "lenient"}, "'mode' must be one of FAILFAST"),
    ({"subscribe": "a", "columnNameOfCorruptRecord": "value"}, "must be a new column"),
])
def test_bad_options(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_options({"kafka.bootstrap.servers": "127.0.0.1:1", **options})


def test_streaming_options() -> None:
    base = {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "a"}
    opts = parse_options({**base, "minOffsetsPerTrigger": "7", "maxTriggerDelay": "2s"},
                         streaming=True)
    assert (opts.min_offsets_per_trigger, opts.max_trigger_delay_s) == (7, 2.0)
    assert parse_options(base, streaming=True).max_trigger_delay_s == 900.0  # Spark's 15m
    with pytest.raises(ConfigError, match="endingTimestamp' is for batch queries only"):
        parse_options({**base, "endingTimestamp": "5"}, streaming=True)
    assert parse_options({**base, "includeHeaders": "false"}).include_headers is False
    # Spark's Kafka source has no headers column unless asked: a query moved over from
    # format("kafka") keeps its columns.
    assert parse_options(base).include_headers is False
    assert parse_options(base, streaming=True).include_headers is False
    assert parse_options({**base, "includeHeaders": "true"}).include_headers is True


class _ClockedReader(KontraktStreamReader):
    """The stream reader with its broker look-ups replaced by a fixed, settable end."""

    end = 0

    def _edges(self) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        tp = TopicPartition("a", 0)
        return {tp: 0}, {tp: self.end}


def test_min_offsets_per_trigger_holds_a_batch_back_until_the_delay(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import kontrakt.spark._stream as stream

    now = [100.0]
    monkeypatch.setattr(stream.time, "monotonic", lambda: now[0])
    opts = parse_options({"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "a",
                          "minOffsetsPerTrigger": "10", "maxTriggerDelay": "5s"},
                         streaming=True)
    plan = ColumnPlan(BinaryType(), ())
    reader = _ClockedReader(opts, plan, plan)
    start = {"a": {"0": 0}}
    reader.end = 3
    assert reader.latestOffset(start, ReadAllAvailable()) == {"a": {"0": 3}}  # first: runs
    at = {"a": {"0": 3}}
    reader.end = 8
    now[0] += 1
    assert reader.latestOffset(at, ReadAllAvailable()) is at  # 5 new < 10: held back
    reader.end = 13
    assert reader.latestOffset(at, ReadAllAvailable()) == {"a": {"0": 13}}  # 10 new
    now[0] += 6
    reader.end = 14
    assert reader.latestOffset({"a": {"0": 13}}, ReadAllAvailable()) == {"a": {"0": 14}}
