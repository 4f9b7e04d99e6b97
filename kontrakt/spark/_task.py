"""One Spark task: an offset range read with a consumer and yielded as Arrow record batches.

An executor task reads one range with a sync :class:`~kontrakt.clients.consumer.Consumer`
(manual assignment, no group, no commits) that hands over the fetched batches undecoded
(``_raw_batches``: checked, decompressed and filtered for ``read_committed`` as records
are). The task gathers batches until they hold :data:`CHUNK_RECORDS` records, reads them
into Arrow columns in one vectorised pass (:mod:`kontrakt.spark._batches`: no Python object
per record), decodes the keys and values column-wise (:mod:`kontrakt.spark._columns`) and
yields ``pyarrow.RecordBatch``es built to the DataFrame's exact Arrow schema.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any, cast

import pyarrow as pa

from kontrakt._types import ConsumerRecord, TopicPartition
from kontrakt.clients.consumer import Consumer
from kontrakt.clients.consumer._decoding import RawBatch
from kontrakt.errors import (
    ConfigError,
    KafkaTimeoutError,
    KeyDeserializationError,
    OffsetOutOfRangeResetError,
    ValueDeserializationError,
)
from kontrakt.registry import SchemaRegistryClient
from kontrakt.serde import MessageField
from kontrakt.spark._arrow import Chunk, arrow_schema, header_array, metadata_arrays
from kontrakt.spark._batches import RecordColumns, decode_batches
from kontrakt.spark._columns import ColumnDecoder, column_decoder
from kontrakt.spark._fieldplan import (
    _SCHEMA_TYPES,
    ColumnPlan,
    FieldPlan,
    OffsetRange,
    output_schema,
    registry_client,
    resolve_field,
    type_shape,
)
from kontrakt.spark._options import Mode, SourceOptions

__all__ = ["CHUNK_RECORDS", "BatchBuilder", "read_range"]

log = logging.getLogger("kontrakt.spark")

_METADATA_TIMEOUT_S = 30.0
#: Records per yielded batch (all but a range's last hold exactly this many); fetched
#: batches are read into columns once they hold at least as many: large enough that the
#: per-chunk cost of the ~100 Arrow kernel calls that read and decode the columns (~2-4 ms
#: on the project machine) is lost in the rows, small enough to keep a task's memory low.
CHUNK_RECORDS = 16_384


def read_range(opts: SourceOptions, key: ColumnPlan, value: ColumnPlan,
               rng: OffsetRange) -> Iterator[pa.RecordBatch]:
    """Yield the rows of one offset range (runs in an executor's Python worker) as Arrow
    record batches, decoded with the plans of the range's topic.

    Raises:
        KeyDeserializationError, ValueDeserializationError: a record could not be decoded
            (``mode=FAILFAST``, the default); the message names the option, the record's
            topic, partition and offset. ``PERMISSIVE`` yields it with a null key or value
            and its bytes and error in the corrupt-record column; ``DROPMALFORMED`` leaves
            it out (the task logs how many it left out).
        ConfigError: the range's topic was matched by subscribePattern after the query
            was analysed, and its subject maps to another type than the column's.
        KafkaTimeoutError: nothing arrived for ``kafkaConsumer.pollTimeoutMs``.
        OffsetOutOfRangeResetError: the range's records were deleted (retention,
            DeleteRecords) meanwhile and ``failOnDataLoss`` is true; when false, the deleted
            offsets are skipped with a logged warning.
    """
    if rng.start >= rng.end:
        return
    # A range is one partition, so one topic: its records are all decoded with that
    # topic's plans (for avro its subject's latest schema as the reader schema).
    needs_registry = bool({opts.key_format, opts.value_format} & set(_SCHEMA_TYPES))
    client = registry_client(opts) if needs_registry else None
    try:
        key_plan, value_plan = _topic_plans(opts, client, key, value, rng.topic)
        builder = BatchBuilder(
            output_schema(key, value, opts), rng,
            column_decoder(key_plan, client, key.data_type, rng.topic),
            column_decoder(value_plan, client, value.data_type, rng.topic), opts.mode)
        config = {**opts.consumer_config(), "auto.offset.reset": "none"}
        tp = TopicPartition(rng.topic, rng.partition)
        with Consumer(config, _raw_batches=True) as consumer:
            consumer.assign([tp])
            consumer.seek(tp, rng.start)
            try:
                for chunk in _chunks(consumer, tp, rng, opts.poll_timeout_s,
                                     opts.fail_on_data_loss):
                    batch = builder.build(chunk)
                    if batch.num_rows:
                        yield batch
            finally:
                builder.log_dropped()
    finally:
        if client is not None:
            client.close()


def _topic_plans(opts: SourceOptions, client: SchemaRegistryClient | None, key: ColumnPlan,
                 value: ColumnPlan, topic: str) -> tuple[FieldPlan, FieldPlan]:
    """The key and value plans of ``topic``: those resolved on the driver, or for a topic
    subscribePattern matched since, its subjects' latest schemas, which must give the
    columns' types."""
    try:
        return key.plan(topic), value.plan(topic)
    except KeyError:
        pass
    plans = []
    for is_key, column in ((True, key), (False, value)):
        plan = resolve_field(opts, client, is_key, topic)
        path = "key" if is_key else "value"
        if (plan.fmt in _SCHEMA_TYPES
                and type_shape(plan.mapping(path).data_type) != type_shape(column.data_type)):
            raise ConfigError(
                f"topic {topic!r} (matched by subscribePattern after the query started): "
                f"subject {opts.subject(is_key, topic)!r} maps to "
                f"{plan.mapping(path).data_type.simpleString()}, but the {path} column is "
                f"{column.data_type.simpleString()}; restart the query or set {path}.subject")
        plans.append(plan)
    return plans[0], plans[1]


class BatchBuilder:
    """Builds the record batches of one range: decoded key and value columns, the metadata
    columns, and what ``mode`` makes of records that could not be decoded.

    Args:
        schema: the DataFrame schema (:func:`~kontrakt.spark._fieldplan.output_schema`).
        rng: the range (its topic and partition fill the metadata columns).
        keys, values: the key and value column decoders.
        mode: FAILFAST, PERMISSIVE or DROPMALFORMED.
    """

    def __init__(self, schema: Any, rng: OffsetRange, keys: ColumnDecoder,
                 values: ColumnDecoder, mode: Mode) -> None:
        self.schema = arrow_schema(schema)
        self.rng = rng
        self.keys = keys
        self.values = values
        self.mode = mode
        self.headers = "headers" in self.schema.names
        self.dropped = 0
        if mode == "PERMISSIVE":
            self._corrupt_type = self.schema.field(len(self.schema) - 1).type

    def build(self, chunk: Chunk | Sequence[ConsumerRecord[Any, Any]]) -> pa.RecordBatch:
        """The batch of ``chunk``'s records (records of the range, in offset order; a
        sequence of records is made a :class:`Chunk`).

        Raises:
            KeyDeserializationError, ValueDeserializationError: under FAILFAST, for the
                first record (by offset) that could not be decoded.
        """
        if not isinstance(chunk, Chunk):
            chunk = Chunk(chunk)
        keys, key_errors = self.keys.decode(chunk, MessageField.KEY)
        values, value_errors = self.values.decode(chunk, MessageField.VALUE)
        n = len(chunk)
        if (key_errors or value_errors) and self.mode == "FAILFAST":
            _fail(chunk, key_errors, value_errors)
        columns = [keys, values, *metadata_arrays(chunk, self.rng.topic, self.rng.partition)]
        if self.headers:
            columns.append(header_array(chunk))
        bad = sorted(set(key_errors) | set(value_errors))
        if self.mode == "PERMISSIVE":
            if bad:
                corrupt: list[Any] = [None] * n
                for i in bad:
                    errors = [f"{field}: {type(exc).__name__}: {exc}"
                              for field, exc in (("key", key_errors.get(i)),
                                                 ("value", value_errors.get(i)))
                              if exc is not None]
                    corrupt[i] = (chunk.keys[i], chunk.values[i], "; ".join(errors))
                columns.append(pa.array(corrupt, self._corrupt_type))
            else:
                columns.append(pa.nulls(n, self._corrupt_type))
        batch = pa.RecordBatch.from_arrays(columns, schema=self.schema)
        if bad and self.mode == "DROPMALFORMED":
            keep = [True] * n
            for i in bad:
                keep[i] = False
            self.dropped += len(bad)
            batch = batch.filter(pa.array(keep, pa.bool_()))
        return batch

    def log_dropped(self) -> None:
        """Log how many records DROPMALFORMED left out, if any."""
        if self.dropped:
            log.warning("%s/%d: left out %d record(s) that could not be decoded in offsets "
                        "%d..%d (mode=DROPMALFORMED)", self.rng.topic, self.rng.partition,
                        self.dropped, self.rng.start, self.rng.end)


def _fail(chunk: Chunk, key_errors: dict[int, Exception],
          value_errors: dict[int, Exception]) -> None:
    first_key = min(key_errors, default=len(chunk))
    first_value = min(value_errors, default=len(chunk))
    # A record's key is decoded before its value.
    if first_key <= first_value:
        field, index, exc = MessageField.KEY, first_key, key_errors[first_key]
    else:
        field, index, exc = MessageField.VALUE, first_value, value_errors[first_value]
    record = chunk.records[index]
    error = KeyDeserializationError if field is MessageField.KEY else ValueDeserializationError
    raise error(
        f"{record.topic}/{record.partition} offset {record.offset}: the {field.value} could "
        f"not be decoded (option mode=FAILFAST; PERMISSIVE or DROPMALFORMED read on): "
        f"{exc}", record=record) from exc


def _chunks(consumer: Consumer, tp: TopicPartition, rng: OffsetRange, timeout: float,
            fail_on_data_loss: bool = True) -> Iterator[Chunk]:
    """The range's records in offset order, in chunks of :data:`CHUNK_RECORDS` (the last
    one fewer), read into columns a group of fetched batches at a time."""
    next_offset = rng.start
    deadline = time.monotonic() + timeout
    pending: list[RawBatch] = []
    held = 0
    # Records read but not yet yielded: the tail of a group, yielded with the next group's.
    rest: list[RecordColumns] = []
    while next_offset < rng.end:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise KafkaTimeoutError(
                f"{tp.topic}/{tp.partition}: no record after offset {next_offset} within "
                f"{timeout:g}s (reading offsets {rng.start}..{rng.end}); raise "
                f"kafkaConsumer.pollTimeoutMs if the cluster is slow")
        try:
            # The consumer hands out batches: max_records counts them.
            batches = cast("list[RawBatch]",
                           consumer.getmany(min(1.0, remaining), 1 << 20).get(tp, []))
        except OffsetOutOfRangeResetError as exc:
            next_offset = _skip_lost(consumer, tp, rng, next_offset, exc, fail_on_data_loss)
            continue
        for raw in batches:
            if raw.offset >= next_offset:
                pending.append(raw)
                held += raw.count
                next_offset = raw.offset + 1
            if held >= CHUNK_RECORDS:
                rest.append(decode_batches(pending).between(rng.start, rng.end))
                pending = []
                held = 0
                yield from _full_chunks(rest, tp)
        if batches:
            deadline = time.monotonic() + timeout
        elif consumer.position(tp) >= rng.end:
            # The range ends in offsets that hold no records (transaction markers,
            # compacted-away records): the position has moved past them.
            break
    if pending:
        rest.append(decode_batches(pending).between(rng.start, rng.end))
    yield from _full_chunks(rest, tp)
    if rest and len(rest[0]):
        yield Chunk.of_columns(rest[0], tp.topic, tp.partition)


def _full_chunks(rest: list[RecordColumns], tp: TopicPartition) -> Iterator[Chunk]:
    """Chunks of :data:`CHUNK_RECORDS` records taken from ``rest``, which keeps the
    remainder (as its one element)."""
    columns = RecordColumns.concat(rest) if len(rest) > 1 else rest[0] if rest else None
    rest.clear()
    if columns is None:
        return
    n = len(columns)
    done = 0
    while n - done >= CHUNK_RECORDS:
        yield Chunk.of_columns(columns.slice(done, CHUNK_RECORDS), tp.topic, tp.partition)
        done += CHUNK_RECORDS
    if done < n:
        rest.append(columns.slice(done, n - done) if done else columns)


def _skip_lost(consumer: Consumer, tp: TopicPartition, rng: OffsetRange, next_offset: int,
               exc: OffsetOutOfRangeResetError, fail_on_data_loss: bool) -> int:
    """Where to go on after ``next_offset`` turned out to be deleted: the partition's
    earliest offset (the consumer is sought there), or the error when that is not allowed."""
    if fail_on_data_loss:
        raise OffsetOutOfRangeResetError(
            f"{tp.topic}/{tp.partition}: offset {next_offset} is no longer in the log "
            f"(reading offsets {rng.start}..{rng.end}; records were deleted by retention or "
            f"DeleteRecords); set failOnDataLoss=false to skip lost records") from exc
    begin = consumer.beginning_offsets([tp], _METADATA_TIMEOUT_S)[tp]
    if begin <= next_offset:
        # The log still starts at or before the position: not deleted records but
        # something else (a truncated log end); skipping cannot help.
        raise exc
    log.warning("%s/%d: the records from offset %d up to %d were deleted before they were "
                "read; skipping them (failOnDataLoss=false)", tp.topic, tp.partition,
                next_offset, min(begin, rng.end))
    if begin < rng.end:
        consumer.seek(tp, begin)
    return begin
