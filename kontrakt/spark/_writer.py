"""Batch and streaming writes: each Spark task produces its rows with a sync Kontrakt
``Producer``, encoding keys and values as avro, json (JSON Schema), protobuf, string or
binary; the registry formats are written with the subject's latest schema (for avro and
json, one derived from the column's type is registered first when the subject has none).

Delivery is at least once: a task flushes and checks every record before it reports
success, but records of a task that failed (or of a job Spark aborts) may already be in the
topic — Kafka has no way to take them back outside a transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Row
from pyspark.sql.datasource import (
    DataSourceStreamWriter,
    DataSourceWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from kontrakt.clients.producer import Producer
from kontrakt.errors import (
    ConfigError,
    KeySerializationError,
    SchemaRegistryError,
    ValueSerializationError,
)
from kontrakt.registry import SchemaRegistryClient
from kontrakt.serde import MessageField, SerializationContext
from kontrakt.spark._avro_derive import derive_avro_schema
from kontrakt.spark._derive import register_derived
from kontrakt.spark._json_derive import derive_json_schema
from kontrakt.spark._options import REGISTRY_FORMATS, SourceOptions
from kontrakt.spark._reader import (
    FieldPlan,
    named_types,
    registry_client,
    resolve_field,
    type_shape,
)
from kontrakt.spark._types import avro_writer

__all__ = ["KontraktCommitMessage", "KontraktStreamWriter", "KontraktWriter", "plan_write"]

_COLUMNS = ("key", "value", "headers", "partition", "topic")
_FLUSH_EVERY = 10_000  # records in flight per task before the task waits for them


@dataclass
class KontraktCommitMessage(WriterCommitMessage):
    """What one task wrote: ``records`` produced and acknowledged."""

    records: int


def _check_column(schema: StructType, name: str, plan: FieldPlan) -> None:
    given = schema[name].dataType
    if plan.fmt in REGISTRY_FORMATS:
        wanted = plan.mapping(name).data_type
        ok = type_shape(given) == type_shape(wanted)
        hint = wanted.simpleString()
    elif plan.fmt == "string":
        ok, hint = isinstance(given, StringType), "string"
    else:
        ok, hint = isinstance(given, (BinaryType, StringType)), "binary or string"
    if not ok:
        raise ConfigError(f"column {name!r} is {given.simpleString()}, but {name}.format="
                          f"{plan.fmt} needs {hint} (cast or select it to that type)")


def plan_write(opts: SourceOptions, schema: StructType) -> tuple[FieldPlan, FieldPlan]:
    """Check the DataFrame against the options and the registry (on the driver).

    Columns: ``value`` (required), ``key``, ``headers``
    (``array<struct<key:string,value:binary>>``), ``partition`` (int) and ``topic``
    (string) are optional; any other column is refused. As in Spark's Kafka sink, the
    ``topic`` option wins over the column, and without the option each row goes to its
    ``topic`` column's topic; registry formats then need ``key.subject`` /
    ``value.subject`` (the subject cannot follow a topic not known on the driver).
    For avro, json and protobuf the column's type must be the
    Spark type a read derives from the subject's latest schema (nullability aside), so
    what a read gives can be written back as it is.

    With ``format=avro`` or ``format=json`` and a subject that has no schema, a schema
    derived from the column's type (:func:`~kontrakt.spark._avro_derive.derive_avro_schema`,
    :func:`~kontrakt.spark._json_derive.derive_json_schema`) is registered first, here on
    the driver, unless ``auto.register.schemas`` is false.

    Raises:
        ConfigError: a missing, unknown or mistyped column, a missing protobuf subject (or
            avro or json without auto-registration), a column type without an Avro or JSON
            Schema equivalent, or a derived schema the registry refused.
        SchemaRegistryError: the registry failed otherwise.
    """
    names = schema.fieldNames()
    extra = [n for n in names if n not in _COLUMNS]
    if extra:
        raise ConfigError(f"unexpected column(s) {', '.join(extra)}: the kontrakt sink "
                          f"writes key, value, headers, partition and topic")
    if "value" not in names:
        raise ConfigError("the DataFrame needs a 'value' column")
    if "headers" in names:
        headers = schema["headers"].dataType
        if not (isinstance(headers, ArrayType) and isinstance(headers.elementType, StructType)
                and headers.elementType.fieldNames() == ["key", "value"]):
            raise ConfigError("column 'headers' must be array<struct<key:string,"
                              "value:binary>>")
    if "partition" in names and not isinstance(schema["partition"].dataType, IntegerType):
        raise ConfigError("column 'partition' must be int")
    if "topic" in names and not isinstance(schema["topic"].dataType, StringType):
        raise ConfigError("column 'topic' must be string")
    if not opts.topics:
        if "topic" not in names:
            raise ConfigError("option 'topic' or a 'topic' column is required")
        for path, fmt, given in (("key", opts.key_format, opts.key_subject),
                                 ("value", opts.value_format, opts.value_subject)):
            if fmt in REGISTRY_FORMATS and not given and (path == "value" or "key" in names):
                raise ConfigError(
                    f"{path}.format={fmt} with each row's topic column (no 'topic' option) "
                    f"needs option {path}.subject: the subject is fixed before the rows "
                    f"are seen")
    client = (registry_client(opts)
              if {opts.key_format, opts.value_format} & REGISTRY_FORMATS else None)
    try:
        key = (_resolve(opts, client, True, schema["key"].dataType) if "key" in names
               else FieldPlan("binary"))
        value = _resolve(opts, client, False, schema["value"].dataType)
    finally:
        if client is not None:
            client.close()
    if "key" in names:
        _check_column(schema, "key", key)
    _check_column(schema, "value", value)
    return key, value


def _resolve(opts: SourceOptions, client: SchemaRegistryClient | None, is_key: bool,
             column: DataType) -> FieldPlan:
    """resolve_field, after registering a schema derived from the column when an avro or
    json subject has none."""
    fmt = opts.key_format if is_key else opts.value_format
    if fmt in ("avro", "json"):
        assert client is not None
        path = "key" if is_key else "value"
        subject = opts.subject(is_key, _first_topic(opts))
        try:
            # The client caches the answer, so resolve_field does not ask again.
            client.get_latest_version(subject)
        except SchemaRegistryError as exc:
            if exc.http_status_code != 404:
                raise
            if not opts.auto_register:
                raise ConfigError(
                    f"{path}.format={fmt} needs a schema under subject {subject!r}, and the "
                    f"registry has none; auto.register.schemas is false, so none is derived "
                    f"from the column: register one, set {path}.subject, or leave "
                    f"auto.register.schemas on") from exc
            normalize = (opts.serializer.get("normalize.schemas", "").strip().lower()
                         == "true")
            if fmt == "avro":
                name, namespace = opts.key_record if is_key else opts.value_record
                derived = derive_avro_schema(column, path, record_name=name,
                                             namespace=namespace)
            else:
                derived = derive_json_schema(column, path)
            register_derived(client, subject, derived, fmt.upper(), column, path,
                             normalize=normalize)
    # The column is then checked against what the registry holds now, as for any existing
    # subject (a concurrent writer may have registered a different schema first).
    return resolve_field(opts, client, is_key, _first_topic(opts))


def _first_topic(opts: SourceOptions) -> str:
    """The ``topic`` option's topic; without it (rows name theirs) a label for messages,
    as the subjects are then given explicitly."""
    return opts.topics[0] if opts.topics else "<topic column>"


Encode = Callable[[Any, SerializationContext], "bytes | None"]


def _encoder(plan: FieldPlan, client: SchemaRegistryClient | None,
             conf: dict[str, bool], subject: str) -> Encode:
    if plan.fmt in ("binary", "string"):
        def raw(value: Any, ctx: SerializationContext) -> bytes | None:
            if value is None:
                return None
            return value.encode() if isinstance(value, str) else bytes(value)
        return raw
    assert plan.schema is not None
    # The subject's latest schema by default: that is the one the column was checked
    # against on the driver, and its id is the one the records carry.
    def strategy(ctx: Any, record_name: Any) -> str:
        return subject  # key.subject / value.subject, or the topic's default

    settings: dict[str, Any] = {"auto.register.schemas": False, "use.latest.version": True,
                                "subject.name.strategy": strategy, **conf}
    serialize: Callable[[Any, SerializationContext], bytes | None]
    if plan.fmt == "json":
        from kontrakt.serde import JSONSerializer
        from kontrakt.spark._json_types import json_writer

        # The serializer validates each document against the latest schema.
        serialize = JSONSerializer(plan.schema, client, conf=settings)
        convert = json_writer(plan.schema.schema_str)
    elif plan.fmt == "protobuf":
        from google.protobuf.message_factory import GetMessageClass

        from kontrakt.serde import ProtobufSerializer
        from kontrakt.spark._proto_types import proto_writer

        descriptor = plan.message_descriptor()
        serialize = ProtobufSerializer(GetMessageClass(descriptor), client, conf=settings)
        convert = proto_writer(descriptor)
    else:
        from kontrakt.serde import AvroSerializer

        serialize = AvroSerializer(client, plan.schema, conf=settings)
        convert = avro_writer(plan.schema.schema_str, named_types(plan.deps))

    def encode(value: Any, ctx: SerializationContext) -> bytes | None:
        return None if value is None else serialize(convert(value), ctx)
    return encode


class _ProduceTask:
    """What batch and streaming writers share: one task producing its rows."""

    def __init__(self, opts: SourceOptions, key: FieldPlan, value: FieldPlan,
                 columns: tuple[str, ...]) -> None:
        self.opts = opts
        self.key = key
        self.value = value
        self.columns = columns

    def produce(self, iterator: Iterator[Row]) -> KontraktCommitMessage:
        """Produce the rows, flush, and check every record's delivery (on an executor).

        Raises:
            KeySerializationError, ValueSerializationError: a row could not be encoded.
            KafkaError: a record was not acknowledged (after the producer's retries), or the
                flush took longer than ``kafkaConsumer.pollTimeoutMs``.
        """
        opts = self.opts
        # The option wins over a topic column, as in Spark's Kafka sink.
        topic = _first_topic(opts)
        row_topic = not opts.topics
        conf = {k: v.strip().lower() == "true" for k, v in opts.serializer.items()}
        client = (registry_client(opts)
                  if {self.key.fmt, self.value.fmt} & REGISTRY_FORMATS else None)
        has_key = "key" in self.columns
        has_headers = "headers" in self.columns
        has_partition = "partition" in self.columns
        count = 0
        try:
            encode_key = _encoder(self.key, client, conf, opts.subject(True, topic))
            encode_value = _encoder(self.value, client, conf, opts.subject(False, topic))
            with Producer(dict(opts.kafka)) as producer:
                pending: list[Any] = []
                for row in iterator:
                    if row_topic:
                        topic = row["topic"]
                        if topic is None:
                            raise ConfigError(f"row {count} has a null topic, and no 'topic' "
                                              f"option names one")
                    headers = [(h["key"], None if h["value"] is None else bytes(h["value"]))
                               for h in (row["headers"] or ())] if has_headers else []
                    value = _encode(encode_value, row["value"], topic, MessageField.VALUE,
                                    headers, count)
                    key = (_encode(encode_key, row["key"], topic, MessageField.KEY, headers,
                                   count) if has_key else None)
                    pending.append(producer.send(
                        topic, value, key, headers=headers or None,
                        partition=row["partition"] if has_partition else None))
                    count += 1
                    if len(pending) >= _FLUSH_EVERY:
                        _settle(producer, pending, opts.poll_timeout_s)
                _settle(producer, pending, opts.poll_timeout_s)
        finally:
            if client is not None:
                client.close()
        return KontraktCommitMessage(count)


def _encode(encode: Encode, data: Any, topic: str, field: MessageField,
            headers: list[tuple[str, bytes | None]], row: int) -> bytes | None:
    try:
        return encode(data, SerializationContext(topic, field, headers))
    except Exception as exc:
        error = KeySerializationError if field is MessageField.KEY else ValueSerializationError
        raise error(f"row {row} of this task: the {field.value} could not be encoded for "
                    f"{topic}: {exc}") from exc


class KontraktWriter(_ProduceTask, DataSourceWriter):
    """Produces each task's rows to the ``topic`` option's topic (batch)."""

    def write(self, iterator: Iterator[Row]) -> KontraktCommitMessage:
        """See :meth:`_ProduceTask.produce`."""
        return self.produce(iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to finish: each task's records were acknowledged before it reported."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to undo: records already acknowledged stay in the topic (at least once)."""


class KontraktStreamWriter(_ProduceTask, DataSourceStreamWriter):
    """Produces each micro-batch's rows to the ``topic`` option's topic.

    At least once: a micro-batch that is retried after a failure (or replayed after a
    restart) produces its records again.
    """

    def write(self, iterator: Iterator[Row]) -> KontraktCommitMessage:
        """See :meth:`_ProduceTask.produce`."""
        return self.produce(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to finish: each task's records were acknowledged before it reported."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo: acknowledged records stay in the topic."""


def _settle(producer: Producer, pending: list[Any], timeout: float) -> None:
    producer.flush(timeout)
    for future in pending:
        future.result(0)  # raises the record's delivery error
    pending.clear()

