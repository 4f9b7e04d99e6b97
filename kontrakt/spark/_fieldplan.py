"""The key and value plans that reads and writes share, made on the driver.

The driver resolves the offset ranges (``_plan.plan_ranges``) and, for every
subscribed topic, the registry schema its keys and values are decoded with
(``resolve_column``); both are plain, picklable values. An executor task reads one range
(:func:`kontrakt.spark._task.read_range`). The sink resolves its key and value plans with
the same :func:`resolve_field` (:func:`kontrakt.spark._writer.plan_write`).
"""

from __future__ import annotations

import datetime
import functools
import json
import logging
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

from kontrakt.errors import (
    ConfigError,
    SchemaRegistryError,
)
from kontrakt.registry import RegisteredSchema, Schema, SchemaRegistryClient
from kontrakt.spark._mapping import ColumnMapping
from kontrakt.spark._options import Format, SourceOptions
from kontrakt.spark._types import avro_mapping

__all__ = [
    "ColumnPlan",
    "FieldPlan",
    "OffsetRange",
    "named_types",
    "output_schema",
    "proto_file",
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
        validate: for json, whether each document is validated against its writer schema
            (``<key|value>.json.validate``).
    """

    fmt: Format
    schema: Schema | None = None
    deps: tuple[tuple[str, str], ...] = ()
    validate: bool = False

    def mapping(self, path: str = "value") -> ColumnMapping:
        """The registry schema's Spark type and value converter (avro, json and protobuf).

        Args:
            path: the column, for error messages.

        Raises:
            UnsupportedSchemaError: a construct without a Spark type.
        """
        assert self.schema is not None
        if self.fmt == "json":
            from kontrakt.spark._json_types import json_mapping

            return json_mapping(self.schema.schema_str, path, dict(self.deps))
        if self.fmt == "protobuf":
            from kontrakt.spark._proto_types import proto_mapping

            return proto_mapping(self.message_descriptor(), path)
        return avro_mapping(self.schema.schema_str, named_types(self.deps), path)

    def message_descriptor(self) -> Any:
        """For protobuf, the descriptor of the schema's first message."""
        from kontrakt.serde._proto_schema import message_by_indexes

        assert self.schema is not None
        # The file's first message, as Confluent's serializers register it.
        return message_by_indexes(proto_file(self.schema.schema_str, self.deps), (0,))

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


@functools.lru_cache(maxsize=64)
def proto_file(text: str, deps: tuple[tuple[str, str], ...]) -> Any:
    """The file descriptor of a Protobuf schema and its references (dependencies first), in
    a pool of its own; cached for the process, as a Python worker runs many tasks of the
    same schemas (measured: 6 ms a build of a one-message file once protoc's output is
    cached by the serde, 85 ms the first time)."""
    from kontrakt.serde.protobuf import _ProtobufDeserializerCore

    return _ProtobufDeserializerCore.build(text, list(deps))


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

    For avro, json and protobuf that is the schema with id ``<key|value>.schema.id``, or
    version ``<key|value>.schema.version`` (default the latest) of the topic's subject
    (``SourceOptions.subject``: ``<key|value>.subjects``' entry, ``<key|value>.subject``,
    or ``<topic>-key`` / ``-value``), with the schemas it references.

    Args:
        topic: the topic; default the first of ``opts.topics``.

    Raises:
        ConfigError: the subject, version or id does not exist or holds a schema of another
            type (the message names the option, the topic and the subject).
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
    choice = opts.schema_choice(is_key)
    subject = opts.subject(is_key, topic)
    try:
        if choice.schema_id is not None:
            where = f"schema id {choice.schema_id} ({path}.schema.id)"
            schema = client.get_schema(choice.schema_id)
        elif choice.version is not None:
            where = f"version {choice.version} of subject {subject!r} ({path}.schema.version)"
            schema = client.get_version(subject, choice.version).schema
        else:
            where = f"subject {subject!r}"
            schema = client.get_latest_version(subject).schema
    except SchemaRegistryError as exc:
        if exc.http_status_code != 404:
            raise
        if choice.schema_id is None and choice.version is None:
            raise ConfigError(
                f"{path}.format={fmt} needs a schema under subject {subject!r} (topic "
                f"{topic!r}), and the registry has none ({exc}); register one or set "
                f"{path}.subject or {path}.subjects") from exc
        raise ConfigError(f"{path}.format={fmt}: the registry has no {where} (topic "
                          f"{topic!r}): {exc}") from exc
    if schema.schema_type != _SCHEMA_TYPES[fmt]:
        raise ConfigError(f"{where} holds a {schema.schema_type} schema, not "
                          f"{_SCHEMA_TYPES[fmt]} (topic {topic!r}); set the matching "
                          f"{path}.format")
    deps: list[tuple[str, str]] = []
    _collect_deps(client, schema, deps, set())
    return FieldPlan(fmt, schema, tuple(deps), choice.json_validate)


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
        if fmt in _SCHEMA_TYPES and not (opts.key_subject if is_key else opts.value_subject) \
                and opts.schema_choice(is_key).schema_id is None:
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


def column_path_schema(plan: FieldPlan, client: SchemaRegistryClient, subject: str,
                       path: str) -> RegisteredSchema | None:
    """The subject's latest version if a sink's column encoder may write it, else None (the
    row path writes): the registry serializer writes with the latest schema, so it must
    still be the one the column was checked against on the driver, and it must have no
    WRITE rules (data contracts transform or refuse values row by row).

    Raises:
        SchemaRegistryError: the registry failed (the row path would fail the same way).
    """
    from kontrakt.serde.rules import WRITE, RuleRegistry, plan_rules

    assert plan.schema is not None
    latest = client.get_latest_version(subject)
    if latest.schema.schema_str != plan.schema.schema_str:
        log.info("%s: subject %s has a newer schema than planned; encoding row by row",
                 path, subject)
        return None
    if plan_rules(latest.schema, WRITE, subject, RuleRegistry.get_global_instance()) is not None:
        return None
    return latest
