"""Reading offset ranges: the plan made on the driver and the task run on an executor.

The driver resolves the offset ranges (``_plan.plan_ranges``) and, for every
subscribed topic, the registry schema its keys and values are decoded with
(``resolve_column``); both are plain, picklable values. An executor task reads one
range with a sync :class:`~kontrakt.clients.consumer.Consumer` (manual assignment, no group,
no commits) and decodes each record with Kontrakt's registry deserializers (``read_range``).
"""

from __future__ import annotations

import datetime
import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kontrakt._types import ConsumerRecord, TopicPartition
from kontrakt.clients.consumer import Consumer
from kontrakt.errors import (
    ConfigError,
    KafkaTimeoutError,
    KeyDeserializationError,
    OffsetOutOfRangeResetError,
    SchemaRegistryError,
    ValueDeserializationError,
)
from kontrakt.registry import Schema, SchemaRegistryClient
from kontrakt.serde import MessageField, SerializationContext
from kontrakt.spark._options import Format, Mode, SourceOptions
from kontrakt.spark._types import AvroMapping, UnsupportedSchemaError, avro_mapping

__all__ = [
    "ColumnPlan",
    "FieldPlan",
    "OffsetRange",
    "named_types",
    "output_schema",
    "read_range",
    "registry_client",
    "resolve_column",
    "resolve_field",
    "type_shape",
]

log = logging.getLogger("kontrakt.spark")

_METADATA_TIMEOUT_S = 30.0
# The formats decoded with a registry schema, and the schema type their subject must hold.
_SCHEMA_TYPES = {"avro": "AVRO", "json": "JSON", "protobuf": "PROTOBUF"}
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_HEADERS = ArrayType(StructType([StructField("key", StringType(), True),
                                 StructField("value", BinaryType(), True)]), False)


@dataclass(frozen=True)
class OffsetRange:
    """The records ``start <= offset < end`` of one Kafka partition: one Spark task."""

    topic: str
    partition: int
    start: int
    end: int


@dataclass(frozen=True)
class FieldPlan:
    """How a key or value column is decoded (resolved on the driver, used on executors).

    Attributes:
        fmt: the format option.
        schema: for avro, the registered schema records are read as (the subject's latest
            version, so records written with older versions are resolved to it).
        deps: the schemas it references as (import name, text), dependencies first.
    """

    fmt: Format
    schema: Schema | None = None
    deps: tuple[tuple[str, str], ...] = ()

    def mapping(self, path: str = "value") -> AvroMapping:
        """The registry schema's Spark type and value converter (avro, json and protobuf).

        Args:
            path: the column, for error messages.

        Raises:
            UnsupportedSchemaError: a construct without a Spark type.
        """
        assert self.schema is not None
        if self.fmt == "json":
            from kontrakt.spark._json_types import json_mapping

            return json_mapping(self.schema.schema_str, path)
        if self.fmt == "protobuf":
            from kontrakt.spark._proto_types import proto_mapping

            return proto_mapping(self.message_descriptor(), path)
        return avro_mapping(self.schema.schema_str, named_types(self.deps), path)

    def message_descriptor(self) -> Any:
        """For protobuf, the descriptor of the schema's first message (in a fresh pool)."""
        from kontrakt.serde._proto_schema import message_by_indexes
        from kontrakt.serde.protobuf import _ProtobufDeserializerCore

        assert self.schema is not None
        # The file's first message, as Confluent's serializers register it.
        file = _ProtobufDeserializerCore.build(self.schema.schema_str, list(self.deps))
        return message_by_indexes(file, (0,))

    def spark_type(self) -> DataType:
        """The column's Spark type.

        Raises:
            UnsupportedSchemaError: a schema construct without a Spark type.
        """
        if self.fmt == "string":
            return StringType()
        if self.fmt == "binary":
            return BinaryType()
        return self.mapping().data_type


def named_types(deps: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    """The named Avro types that referenced schemas (``deps``, dependencies first) define."""
    from fastavro import parse_schema

    named: dict[str, Any] = {}
    for _, text in deps:
        parse_schema(json.loads(text), named_schemas=named)
    return named


def registry_client(opts: SourceOptions) -> SchemaRegistryClient:
    """A registry client from the ``schema.registry.*`` options."""
    return SchemaRegistryClient(dict(opts.registry))


def resolve_field(opts: SourceOptions, client: SchemaRegistryClient | None,
                  is_key: bool, topic: str | None = None) -> FieldPlan:
    """Look up the schema one topic's keys or values are decoded with.

    For avro, json and protobuf that is the latest version of ``<topic>-key`` /
    ``-value`` (or the ``key.subject`` / ``value.subject`` option).

    Args:
        topic: the topic; default the first of ``opts.topics``.

    Raises:
        ConfigError: the subject does not exist or holds a schema of another type (the
            message names the topic and the subject).
        SchemaRegistryError: the registry failed otherwise.
    """
    fmt = opts.key_format if is_key else opts.value_format
    path = "key" if is_key else "value"
    if fmt in ("string", "binary"):
        return FieldPlan(fmt)
    if fmt not in _SCHEMA_TYPES:
        raise ConfigError(f"{path}.format={fmt} is not supported for reading; use avro, "
                          f"json, protobuf, string or binary")
    assert client is not None
    topic = opts.topics[0] if topic is None else topic
    subject = opts.subject(is_key, topic)
    try:
        latest = client.get_latest_version(subject)
    except SchemaRegistryError as exc:
        if exc.http_status_code != 404:
            raise
        raise ConfigError(
            f"{path}.format={fmt} needs a schema under subject {subject!r} (topic "
            f"{topic!r}), and the registry has none ({exc}); register one or set "
            f"{path}.subject") from exc
    if latest.schema.schema_type != _SCHEMA_TYPES[fmt]:
        raise ConfigError(f"subject {subject!r} holds a {latest.schema.schema_type} schema, "
                          f"not {_SCHEMA_TYPES[fmt]} (topic {topic!r}); set the matching "
                          f"{path}.format")
    deps: list[tuple[str, str]] = []
    if fmt != "json":
        _collect_deps(client, latest.schema, deps, set())
    elif latest.schema.references:
        raise UnsupportedSchemaError(f"subject {subject!r}: JSON Schemas with references "
                                     f"are not supported by the Spark source")
    return FieldPlan(fmt, latest.schema, tuple(deps))


@dataclass(frozen=True)
class ColumnPlan:
    """How a key or value column is decoded, topic by topic (resolved on the driver).

    Attributes:
        data_type: the column's Spark type: every topic's schema maps to it (a field is
            nullable when any topic's schema has it nullable).
        by_topic: (topic, plan) for every subscribed topic, in subscription order. Topics
            with the same subject share one plan object, which pickle sends once.
    """

    data_type: DataType
    by_topic: tuple[tuple[str, FieldPlan], ...]

    def plan(self, topic: str) -> FieldPlan:
        """The plan ``topic``'s records are decoded with.

        Raises:
            KeyError: a topic the plan was not resolved for.
        """
        for name, plan in self.by_topic:
            if name == topic:
                return plan
        raise KeyError(topic)


def resolve_column(opts: SourceOptions, client: SchemaRegistryClient | None,
                   is_key: bool) -> ColumnPlan:
    """Resolve every subscribed topic's schema for the key or value column
    (:func:`resolve_field`), each subject once, and check that they agree on the column's
    type.

    Raises:
        ConfigError: as :func:`resolve_field`, or two topics' schemas map to different
            Spark types (nullability aside); the message names both topics, their subjects
            and types.
        UnsupportedSchemaError: a schema construct without a Spark type.
        SchemaRegistryError: the registry failed otherwise.
    """
    path = "key" if is_key else "value"
    by_subject: dict[str, FieldPlan] = {}
    by_topic: list[tuple[str, FieldPlan]] = []
    if not opts.topics:
        # subscribePattern matched no topic (yet): only a fixed subject gives a type.
        fmt = opts.key_format if is_key else opts.value_format
        if fmt in _SCHEMA_TYPES and not (opts.key_subject if is_key else opts.value_subject):
            raise ConfigError(f"subscribePattern {opts.pattern!r} matches no topic, so "
                              f"{path}.format={fmt} has no subject to take the {path} "
                              f"column's type from; create a topic or set {path}.subject")
        return ColumnPlan(resolve_field(opts, client, is_key, str(opts.pattern)).spark_type(),
                          ())
    for topic in opts.topics:
        subject = opts.subject(is_key, topic)
        if subject not in by_subject:
            by_subject[subject] = resolve_field(opts, client, is_key, topic)
        by_topic.append((topic, by_subject[subject]))
    first_topic, first_plan = by_topic[0]
    if first_plan.fmt not in _SCHEMA_TYPES:
        return ColumnPlan(first_plan.spark_type(), tuple(by_topic))
    data_type = first_plan.mapping(path).data_type
    typed = {id(first_plan): data_type}
    for topic, plan in by_topic[1:]:
        if id(plan) in typed:
            continue
        typed[id(plan)] = other = plan.mapping(path).data_type
        if type_shape(other) != type_shape(data_type):
            raise ConfigError(
                f"{path}.format={plan.fmt}: topics {first_topic!r} and {topic!r} cannot share "
                f"the {path} column: subject {opts.subject(is_key, first_topic)!r} maps to "
                f"{data_type.simpleString()}, subject {opts.subject(is_key, topic)!r} to "
                f"{other.simpleString()}; read them separately or set {path}.subject")
        data_type = _either_nullable(data_type, other)
    return ColumnPlan(data_type, tuple(by_topic))


def type_shape(data_type: DataType) -> Any:
    """The type as JSON without nullability and metadata: equal for two types that hold
    the same values apart from nulls."""
    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items()
                    if k not in ("nullable", "containsNull", "valueContainsNull", "metadata")}
        if isinstance(node, list):
            return [strip(x) for x in node]
        return node
    return strip(data_type.jsonValue())


def _either_nullable(a: DataType, b: DataType) -> DataType:
    """``a`` (same shape as ``b``) with null allowed wherever either allows it: rows of
    every topic must fit the one column type."""
    if isinstance(a, StructType) and isinstance(b, StructType):
        return StructType([
            StructField(fa.name, _either_nullable(fa.dataType, fb.dataType),
                        fa.nullable or fb.nullable, fa.metadata)
            for fa, fb in zip(a.fields, b.fields, strict=True)])
    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        return ArrayType(_either_nullable(a.elementType, b.elementType),
                         a.containsNull or b.containsNull)
    if isinstance(a, MapType) and isinstance(b, MapType):
        return MapType(_either_nullable(a.keyType, b.keyType),
                       _either_nullable(a.valueType, b.valueType),
                       a.valueContainsNull or b.valueContainsNull)
    return a


def _collect_deps(client: SchemaRegistryClient, schema: Schema, out: list[tuple[str, str]],
                  seen: set[tuple[str, int]]) -> None:
    for ref in schema.references:
        key = (ref.subject, ref.version)
        if key in seen:
            continue
        seen.add(key)
        dep = client.get_version(ref.subject, ref.version).schema
        _collect_deps(client, dep, out, seen)
        out.append((ref.name, dep.schema_str))


_CORRUPT = StructType([StructField("key", BinaryType(), True),
                       StructField("value", BinaryType(), True),
                       StructField("error", StringType(), True)])


def output_schema(key: ColumnPlan, value: ColumnPlan,
                  opts: SourceOptions | None = None) -> StructType:
    """The DataFrame schema: Spark's Kafka source columns with decoded key and value;
    ``headers`` unless ``includeHeaders`` is false, and with ``mode=PERMISSIVE`` a last
    column (``columnNameOfCorruptRecord``) of ``struct<key:binary, value:binary,
    error:string>``: a record's raw key and value bytes and the error, null for a record
    decoded whole."""
    columns = [
        StructField("key", key.data_type, True),
        StructField("value", value.data_type, True),
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        StructField("offset", LongType(), False),
        StructField("timestamp", TimestampType(), True),
        StructField("timestampType", IntegerType(), False),
    ]
    if opts is None or opts.include_headers:
        columns.append(StructField("headers", _HEADERS, False))
    if opts is not None and opts.mode == "PERMISSIVE":
        columns.append(StructField(opts.corrupt_column, _CORRUPT, True))
    return StructType(columns)


Decoder = Callable[[Any, SerializationContext], Any]


def _decoder(plan: FieldPlan, client: SchemaRegistryClient | None) -> Decoder:
    if plan.fmt == "binary":
        return lambda data, ctx: data
    if plan.fmt == "string":
        from kontrakt.serde import StringDeserializer

        return StringDeserializer()
    assert plan.schema is not None
    deserialize: Callable[[Any, SerializationContext], Any]
    if plan.fmt == "json":
        from kontrakt.serde import JSONDeserializer

        # Documents are validated against the schema they were written with.
        deserialize = JSONDeserializer(None, schema_registry_client=client)
    elif plan.fmt == "protobuf":
        from kontrakt.serde import ProtobufDeserializer

        # Dynamic messages from the writer's schema; fields are matched by name.
        deserialize = ProtobufDeserializer(None, schema_registry_client=client)
    else:
        from kontrakt.serde import AvroDeserializer

        # The latest schema is the reader schema: records written with older versions come
        # out in the shape of the DataFrame's columns (Avro schema resolution).
        deserialize = AvroDeserializer(client, plan.schema, return_record_name=True)
    # Built from this topic's latest schema even where the writer's schema decodes the
    # record (json, protobuf): it picks the fields by that schema's names and, for
    # protobuf, names enum numbers with that schema's enum values.
    convert = plan.mapping().convert

    def decode(data: Any, ctx: SerializationContext) -> Any:
        value = deserialize(data, ctx)
        return value if value is None or convert is None else convert(value)
    return decode


def read_range(opts: SourceOptions, key: ColumnPlan, value: ColumnPlan,
               rng: OffsetRange) -> Iterator[tuple[Any, ...]]:
    """Yield the rows of one offset range (runs in an executor's Python worker), decoded
    with the plans of the range's topic.

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
        decode_key = _decoder(key_plan, client)
        decode_value = _decoder(value_plan, client)
        config = {**opts.consumer_config(), "auto.offset.reset": "none"}
        tp = TopicPartition(rng.topic, rng.partition)
        with Consumer(config) as consumer:
            consumer.assign([tp])
            consumer.seek(tp, rng.start)
            yield from _read(consumer, tp, rng, opts.poll_timeout_s, decode_key, decode_value,
                             fail_on_data_loss=opts.fail_on_data_loss,
                             headers=opts.include_headers, mode=opts.mode)
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


def _read(consumer: Consumer, tp: TopicPartition, rng: OffsetRange, timeout: float,
          decode_key: Decoder, decode_value: Decoder, *,
          fail_on_data_loss: bool = True, headers: bool = True,
          mode: Mode = "FAILFAST") -> Iterator[tuple[Any, ...]]:
    dropped = [0]
    try:
        yield from _rows(consumer, tp, rng, timeout, decode_key, decode_value,
                         fail_on_data_loss, headers, mode, dropped)
    finally:
        if dropped[0]:
            log.warning("%s/%d: left out %d record(s) that could not be decoded in offsets "
                        "%d..%d (mode=DROPMALFORMED)", tp.topic, tp.partition, dropped[0],
                        rng.start, rng.end)


def _rows(consumer: Consumer, tp: TopicPartition, rng: OffsetRange, timeout: float,
          decode_key: Decoder, decode_value: Decoder, fail_on_data_loss: bool,
          headers: bool, mode: Mode, dropped: list[int]) -> Iterator[tuple[Any, ...]]:
    next_offset = rng.start
    deadline = time.monotonic() + timeout
    while next_offset < rng.end:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise KafkaTimeoutError(
                f"{tp.topic}/{tp.partition}: no record after offset {next_offset} within "
                f"{timeout:g}s (reading offsets {rng.start}..{rng.end}); raise "
                f"kafkaConsumer.pollTimeoutMs if the cluster is slow")
        try:
            batch = consumer.getmany(min(1.0, remaining), rng.end - next_offset).get(tp, [])
        except OffsetOutOfRangeResetError as exc:
            next_offset = _skip_lost(consumer, tp, rng, next_offset, exc, fail_on_data_loss)
            if next_offset >= rng.end:
                return
            continue
        for record in batch:
            if record.offset >= rng.end:
                return
            row = _row(record, decode_key, decode_value, headers, mode)
            next_offset = record.offset + 1
            if row is None:
                dropped[0] += 1
            else:
                yield row
        if batch:
            deadline = time.monotonic() + timeout
        elif consumer.position(tp) >= rng.end:
            # The range ends in offsets that hold no records (transaction markers,
            # compacted-away records): the position has moved past them.
            return


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


def _row(record: ConsumerRecord[Any, Any], decode_key: Decoder, decode_value: Decoder,
         headers: bool = True, mode: Mode = "FAILFAST") -> tuple[Any, ...] | None:
    """A record's row, or None when DROPMALFORMED leaves it out."""
    corrupt: tuple[Any, ...] = ()
    if mode == "FAILFAST":
        key = _decode(decode_key, record.key, record, MessageField.KEY)
        value = _decode(decode_value, record.value, record, MessageField.VALUE)
    else:
        errors: list[str] = []
        key = _tolerant(decode_key, record.key, record, MessageField.KEY, errors)
        value = _tolerant(decode_value, record.value, record, MessageField.VALUE, errors)
        if mode == "DROPMALFORMED":
            if errors:
                return None
        else:
            corrupt = ((record.key, record.value, "; ".join(errors)) if errors else None,)
    ts = record.timestamp
    at = None if ts < 0 else _EPOCH + datetime.timedelta(milliseconds=ts)
    row: tuple[Any, ...] = (key, value, record.topic, record.partition, record.offset, at,
                            int(record.timestamp_type))
    if headers:
        row += ([(k, v) for k, v in record.headers],)
    return row + corrupt


def _decode(decode: Decoder, data: Any, record: ConsumerRecord[Any, Any],
            field: MessageField) -> Any:
    try:
        return decode(data, SerializationContext(
            record.topic, field, record.headers, record.partition, record.offset))
    except Exception as exc:
        error = KeyDeserializationError if field is MessageField.KEY else ValueDeserializationError
        raise error(
            f"{record.topic}/{record.partition} offset {record.offset}: the {field.value} could "
            f"not be decoded (option mode=FAILFAST; PERMISSIVE or DROPMALFORMED read on): "
            f"{exc}", record=record) from exc


def _tolerant(decode: Decoder, data: Any, record: ConsumerRecord[Any, Any],
              field: MessageField, errors: list[str]) -> Any:
    """The decoded key or value, or None with the error appended to ``errors``."""
    try:
        return decode(data, SerializationContext(
            record.topic, field, record.headers, record.partition, record.offset))
    except Exception as exc:
        errors.append(f"{field.value}: {type(exc).__name__}: {exc}")
        return None


def check_schema(given: StructType, expected: StructType) -> None:
    """Refuse a schema that is not the one the options and registry give (a user-specified
    schema, or a subject that changed since the query was analysed).

    Raises:
        ConfigError: the schemas differ.
    """
    if given.jsonValue() != expected.jsonValue():
        raise ConfigError(
            "the DataFrame schema does not match the registry's latest schema (a new "
            "version was registered since the query was analysed, or .schema() was given): "
            f"expected {expected.simpleString()}, got {given.simpleString()}")
