"""``failOnDataLoss``: what the planner and the range reader do when the offsets to read were
deleted.

Tested without a broker: Tansu advertises DeleteRecords but drops the connection on it (see
TEST-BROKERS), so no real log start can be moved. The reader runs against a stand-in consumer
whose fetch raises ``OffsetOutOfRangeResetError`` as Kontrakt's consumer does with
``auto.offset.reset=none`` once the position is below the log start.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, cast

import pytest

pytest.importorskip("pyspark", reason="needs the spark extra")

from kontrakt._types import TopicPartition
from kontrakt.clients.consumer._decoding import RawBatch, iter_partition_batches
from kontrakt.errors import ConfigError, OffsetOutOfRangeResetError
from kontrakt.protocol.records import RecordBatchBuilder
from kontrakt.spark._fieldplan import OffsetRange
from kontrakt.spark._options import parse_options
from kontrakt.spark._plan import offset_for
from kontrakt.spark._task import _chunks

pytestmark = pytest.mark.timeout(30)

TP = TopicPartition("t", 0)


class DeletedLogConsumer:
    """A one-partition log holding offsets ``begin..end-1``; fetching below ``begin``
    raises until the consumer is sought again (as Kontrakt's fetcher does)."""

    def __init__(self, begin: int, end: int) -> None:
        self.begin, self.end = begin, end
        self.pos = 0
        self.seeks: list[int] = []

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.seeks.append(offset)
        self.pos = offset

    def position(self, tp: TopicPartition) -> int:
        return self.pos

    def beginning_offsets(self, tps: Iterable[TopicPartition],
                          timeout: float) -> dict[TopicPartition, int]:
        return {tp: self.begin for tp in tps}

    def getmany(self, timeout: float, max_records: int
                ) -> dict[TopicPartition, list[RawBatch]]:
        """The rest of the log as one batch, handed out undecoded as the reader's consumer
        (``_raw_batches=True``) hands batches out."""
        if self.pos < self.begin:
            raise OffsetOutOfRangeResetError(f"partition {TP} has no valid position")
        if self.pos >= self.end:
            return {}
        builder = RecordBatchBuilder(base_offset=self.pos)
        for o in range(self.pos, self.end):
            builder.append(1000 + o, None, str(o).encode())
        out = [raw for batches, *_ in iter_partition_batches(
            "t", 0, builder.build(), self.pos, read_committed=False, aborted=None,
            check_crcs=True) for raw in batches]
        self.pos = self.end
        return {TP: out}


def _offsets(consumer: DeletedLogConsumer, rng: OffsetRange, fail: bool) -> list[int]:
    chunks = _chunks(cast(Any, consumer), TP, rng, 5.0, fail_on_data_loss=fail)
    return [offset for chunk in chunks for offset in chunk.offsets]


def test_fail_on_data_loss_is_a_boolean_option_defaulting_to_true() -> None:
    base = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"}
    assert parse_options(base).fail_on_data_loss is True
    assert parse_options({**base, "failOnDataLoss": "False"}).fail_on_data_loss is False
    with pytest.raises(ConfigError, match="must be true or false"):
        parse_options({**base, "failOnDataLoss": "no"})


def test_deleted_offsets_fail_the_read_by_default() -> None:
    consumer = DeletedLogConsumer(begin=5, end=10)
    consumer.seek(TP, 2)
    with pytest.raises(OffsetOutOfRangeResetError, match=r"t/0: offset 2 .*failOnDataLoss"):
        _offsets(consumer, OffsetRange("t", 0, 2, 10), fail=True)


def test_deleted_offsets_are_skipped_with_a_warning_when_allowed(
        caplog: pytest.LogCaptureFixture) -> None:
    consumer = DeletedLogConsumer(begin=5, end=10)
    consumer.seek(TP, 2)
    with caplog.at_level(logging.WARNING, logger="kontrakt.spark"):
        assert _offsets(consumer, OffsetRange("t", 0, 2, 10), fail=False) == [5, 6, 7, 8, 9]
    assert consumer.seeks == [2, 5]
    assert "from offset 2 up to 5 were deleted" in caplog.text


def test_a_range_deleted_entirely_yields_nothing_when_allowed() -> None:
    consumer = DeletedLogConsumer(begin=8, end=10)
    consumer.seek(TP, 2)
    assert _offsets(consumer, OffsetRange("t", 0, 2, 6), fail=False) == []
    assert consumer.seeks == [2]  # nothing left to seek to inside the range


def test_a_starting_offset_below_the_log_start(caplog: pytest.LogCaptureFixture) -> None:
    spec = {"t": {0: 3}}
    with pytest.raises(ConfigError, match=r"outside the partition's offsets 5\.\.9"):
        offset_for(spec, TP, -2, 5, 9, "startingOffsets")
    with caplog.at_level(logging.WARNING, logger="kontrakt.spark"):
        assert offset_for(spec, TP, -2, 5, 9, "startingOffsets",
                          fail_on_data_loss=False) == 5
    assert "offset 3 for t/0 was deleted" in caplog.text
    # Beyond the end is not data loss: still refused.
    with pytest.raises(ConfigError, match="outside"):
        offset_for({"t": {0: 12}}, TP, -2, 5, 9, "startingOffsets", fail_on_data_loss=False)
