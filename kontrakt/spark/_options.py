"""The data source's options, checked once on the driver before any work starts.

Names and meanings follow Spark's built-in Kafka source where it has one
(``kafka.bootstrap.servers``, ``subscribe`` / ``subscribePattern`` / ``assign``,
``startingOffsets``, ``endingOffsets``, the by-timestamp variants, ``minPartitions``,
``maxRecordsPerPartition``, ``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger``,
``maxTriggerDelay``, ``kafkaConsumer.pollTimeoutMs``, ``failOnDataLoss``,
``includeHeaders``, ``topic``) and Spark's decoders (``mode``,
``columnNameOfCorruptRecord``); the registry and format options are Kontrakt's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from kontrakt._config import Option, OptionTable, Style, options
from kontrakt._extras import import_extra
from kontrakt.errors import ConfigError
from kontrakt.spark._positions import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    TimestampSpec,
    parse_subscription,
    parse_timestamps,
)
from kontrakt.spark._positions import parse_offsets as parse_offsets

__all__ = [
    "AVRO_NAME", "DEFAULT_RECORD_NAME", "EARLIEST", "FORMATS", "LATEST", "MODES",
    "REGISTRY_FORMATS", "SPARK_TABLE", "OffsetSpec", "SchemaChoice", "SourceOptions",
    "TimestampSpec", "parse_options",
]

Format = Literal["avro", "json", "protobuf", "string", "binary"]
FORMATS: tuple[Format, ...] = ("avro", "json", "protobuf", "string", "binary")
REGISTRY_FORMATS: frozenset[str] = frozenset({"avro", "json", "protobuf"})
"""The formats encoded and decoded with a registry schema."""
_FORMAT_PACKAGES = {"avro": "fastavro", "protobuf": "google.protobuf"}
"""The codec package each format needs (its extra: ``avro``, ``protobuf``); json needs
``jsonschema`` only to validate, which says so when asked."""
Mode = Literal["FAILFAST", "PERMISSIVE", "DROPMALFORMED"]
MODES: tuple[Mode, ...] = ("FAILFAST", "PERMISSIVE", "DROPMALFORMED")

_DEFAULT_POLL_TIMEOUT_MS = 120_000
# Spark's own defaults for the record it derives (its Avro options recordName and
# recordNamespace), so that a schema registered here looks like one to_avro would write.
DEFAULT_RECORD_NAME = "topLevelRecord"

#: The data source's words (``option 'minpartitions' must be a positive integer; got '0'``).
SPARK_STYLE = Style(invalid="option {key!r} must be {expect}; got {shown}",
                    unknown="unknown option {key!r} for the kontrakt data source{hint}",
                    close_n=2, close_sep=" or ", close_repr=False, choices="one of {joined}")



def _positive(name: str, default: int | None = None, doc: str = "") -> Option:
    return Option(name, "int", default, minimum=1, expect="a positive integer", doc=doc)


#: The data source's own options (``kafka.*`` and ``schema.registry.*`` pass Kafka client
#: and registry client options through); names are matched case-insensitively, as Spark
#: hands them over.
SPARK_TABLE = OptionTable("spark", options(
    Option("subscribe", "text", doc="comma-separated topics to read"),
    Option("subscribePattern", "text", doc="read the topics whose whole name matches"),
    Option("assign", "text", doc='JSON {"topic": [0, 1]}: the only partitions read'),
    Option("topic", "text", doc="the topic a write goes to (else each row's topic column)"),
    Option("startingOffsets", "text", "earliest",
           doc='earliest, latest or JSON {"topic": {"0": 12}} (-2 earliest, -1 latest)'),
    Option("endingOffsets", "text", "latest", doc="batch reads: as startingOffsets"),
    Option("startingOffsetsByTimestamp", "text",
           doc='JSON {"topic": {"0": ms}}: start at the first record at or after'),
    Option("startingTimestamp", "text", doc="ms: start every partition there (wins)"),
    Option("endingOffsetsByTimestamp", "text", doc="batch reads: as the starting one"),
    Option("endingTimestamp", "text", doc="batch reads: as startingTimestamp"),
    Option("startingOffsetsByTimestampStrategy", "text", "error", choices=("error", "latest"),
           doc="no record at or after a starting timestamp: fail, or start at the end"),
    _positive("maxOffsetsPerTrigger", None,
           doc="streaming: at most this many offsets per micro-batch"),
    _positive("minOffsetsPerTrigger", None,
           doc="streaming: wait for this many new offsets (up to maxTriggerDelay)"),
    Option("maxTriggerDelay", "duration", 900.0,
           doc="streaming: longest wait for minOffsetsPerTrigger (default 15m)"),
    _positive("kafkaConsumer.pollTimeoutMs", _DEFAULT_POLL_TIMEOUT_MS,
           doc="a task fails when a partition yields nothing for this long"),
    _positive("minPartitions", None, doc="split offset ranges into tasks"),
    _positive("maxRecordsPerPartition", None,
           doc="split offset ranges into tasks of at most this many records"),
    Option("failOnDataLoss", "bool", True,
           doc="fail when offsets to read were deleted (false: skip them, warning)"),
    Option("includeHeaders", "bool", False, doc="add the headers column"),
    Option("mode", "text", "FAILFAST", choices=MODES,
           doc="what a record that cannot be decoded does"),
    Option("columnNameOfCorruptRecord", "text", "_corrupt_record",
           doc="PERMISSIVE's column of raw bytes and error"),
    Option("filterPushdown", "bool", False, doc="pushed filters narrow the offset ranges"),
    Option("exactlyOnce", "bool", False,
           doc="writes: each task writes in one Kafka transaction"),
    Option("transactionalIdPrefix", "text", "kontrakt-sink",
           doc="writes: start of the sink's transactional ids and marker groups"),
    Option("auto.register.schemas", "bool", True,
           doc="writes: register a schema derived from the column's type"),
    Option("use.latest.version", "text", doc="writes: passed to the registry serializers"),
    Option("normalize.schemas", "text", doc="writes: passed to the registry serializers"),
    *(opt for side in ("key", "value") for opt in (
        Option(f"{side}.format", "text", "binary", choices=FORMATS,
               doc=f"how {side}s are decoded / encoded"),
        Option(f"{side}.subject", "text", doc=f"registry subject (default <topic>-{side})"),
        Option(f"{side}.subjects", "text", doc='JSON {"topic": "subject"}'),
        Option(f"{side}.schema.version", "text",
               doc="the subject's version to read with (default latest)"),
        _positive(f"{side}.schema.id", None,
               doc="the schema (registry id) to read with"),
        Option(f"{side}.json.validate", "bool", False,
               doc="validate each JSON document against its writer schema"),
        Option(f"{side}.avro.recordName", "text", DEFAULT_RECORD_NAME,
               doc="writes: the derived schema's top record name"),
        Option(f"{side}.avro.namespace", "text", doc="writes: its namespace"),
    )),
    # Spark's own, handed to the source along with the user's options
    Option("path", "text", doc="(Spark's)"),
    Option("checkpointLocation", "text", doc="(Spark's)"),
), SPARK_STYLE, fold_case=True)
_KNOWN = {name.lower() for name in SPARK_TABLE.options}

# Set by the source itself (Spark's Kafka source refuses them too): a group would commit
# offsets the query does not own, and the decoding is the data source's job.
_FORBIDDEN_KAFKA = {
    "group.id", "auto.offset.reset", "enable.auto.commit", "key.deserializer",
    "value.deserializer", "key.serializer", "value.serializer",
}
AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""What the Avro specification allows as a record or field name (and a namespace part)."""


@dataclass(frozen=True)
class SourceOptions:
    """Validated options (picklable: they travel to the executors).

    Attributes:
        kafka: Kafka client properties (``kafka.`` prefix removed), with ``bootstrap.servers``.
        registry: Schema Registry client properties (``schema.registry.`` prefix removed,
            so ``url`` and e.g. ``basic.auth.user.info``); empty without a registry.
        topics: topics to read (``subscribe``) or the topic to write (``topic``).
        starting, ending: the offset specs.
        key_format, value_format: how keys and values are decoded / encoded.
        key_subject, value_subject: registry subjects; default ``<topic>-key`` / ``-value``.
        poll_timeout_s: a task fails when a partition yields nothing for this long.
        max_offsets_per_trigger: streaming: at most this many offsets per micro-batch.
        serializer: options passed to the registry serializers when writing
            (``use.latest.version``, ``normalize.schemas``).
        auto_register: ``auto.register.schemas`` (default true): a write to an avro
            or json subject that has no schema registers one derived from the column's
            type.
        key_record, value_record: the (name, namespace) of a derived schema's top record:
            ``key.avro.recordName`` / ``key.avro.namespace`` (and ``value.``); default
            ``topLevelRecord`` and no namespace, as Spark's ``to_avro``.
        fail_on_data_loss: ``failOnDataLoss`` (default true): fail when offsets to read were
            deleted (retention, DeleteRecords); false skips them with a logged warning.
        pattern: ``subscribePattern``: topics are those whose whole name matches it
            (``topics`` is then filled in from the cluster, see ``_plan.with_topics``).
        assign: ``assign``: the only partitions read, per topic.
        starting_ts, ending_ts: ``startingTimestamp`` / ``startingOffsetsByTimestamp``
            (and ``ending``): they take precedence over ``startingOffsets`` /
            ``endingOffsets``.
        ts_strategy: ``startingOffsetsByTimestampStrategy``: ``error`` or ``latest``, when
            no record is at or after a starting timestamp.
        min_partitions, max_records_per_partition: split offset ranges into more tasks.
        min_offsets_per_trigger, max_trigger_delay_s: streaming: wait for this many new
            offsets, but no longer than this since the last micro-batch.
        include_headers: ``includeHeaders`` (default false, as Spark's): the ``headers`` column.
        mode: ``FAILFAST`` (default), ``PERMISSIVE`` or ``DROPMALFORMED``: what a record
            that cannot be decoded does.
        corrupt_column: ``columnNameOfCorruptRecord``: PERMISSIVE's column of raw bytes and
            error (default ``_corrupt_record``).
        exactly_once: ``exactlyOnce`` (writes, default false): each task writes in one
            Kafka transaction that the driver-side commit ends, with a per-task marker
            so that a replayed micro-batch is not written twice.
        transactional_id_prefix: ``transactionalIdPrefix``: the start of the sink's
            transactional ids and marker group ids (default ``kontrakt-sink``).
        filter_pushdown: ``filterPushdown`` (default false): pushed filters narrow the
            planned offset ranges (see ``_pushdown``).
    """

    kafka: dict[str, str]
    registry: dict[str, str]
    topics: tuple[str, ...]
    starting: OffsetSpec = "earliest"
    ending: OffsetSpec = "latest"
    key_format: Format = "binary"
    value_format: Format = "binary"
    key_subject: str | None = None
    value_subject: str | None = None
    poll_timeout_s: float = _DEFAULT_POLL_TIMEOUT_MS / 1000
    max_offsets_per_trigger: int | None = None
    serializer: dict[str, str] = field(default_factory=dict)
    fail_on_data_loss: bool = True
    auto_register: bool = True
    key_record: tuple[str, str] = (DEFAULT_RECORD_NAME, "")
    value_record: tuple[str, str] = (DEFAULT_RECORD_NAME, "")
    pattern: str | None = None
    assign: dict[str, tuple[int, ...]] | None = None
    starting_ts: TimestampSpec = None
    ending_ts: TimestampSpec = None
    ts_strategy: Literal["error", "latest"] = "error"
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_s: float = 900.0
    include_headers: bool = False
    mode: Mode = "FAILFAST"
    corrupt_column: str = "_corrupt_record"
    key_schema: SchemaChoice = field(default_factory=lambda: SchemaChoice())
    value_schema: SchemaChoice = field(default_factory=lambda: SchemaChoice())
    # The exactly-once sink (see kontrakt.spark._sink_txn).
    exactly_once: bool = False
    transactional_id_prefix: str = "kontrakt-sink"
    filter_pushdown: bool = False

    def subject(self, is_key: bool, topic: str) -> str:
        """The registry subject of a topic's keys or values: ``<key|value>.subjects``'
        entry for the topic, else ``<key|value>.subject``, else ``<topic>-key`` /
        ``<topic>-value`` (TopicNameStrategy)."""
        choice = self.key_schema if is_key else self.value_schema
        mapped = choice.subjects.get(topic)
        if mapped:
            return mapped
        given = self.key_subject if is_key else self.value_subject
        return given or f"{topic}-{'key' if is_key else 'value'}"

    def schema_choice(self, is_key: bool) -> SchemaChoice:
        """How the key's or value's reader schema is chosen."""
        return self.key_schema if is_key else self.value_schema

    def consumer_config(self) -> dict[str, str | bool]:
        """The Kafka consumer properties: no group, no auto commit, raw bytes."""
        return {**self.kafka, "enable.auto.commit": False}


def parse_options(options: Mapping[str, str], *, write: bool = False,
                  streaming: bool | None = False) -> SourceOptions:
    """Check and parse the options given to ``spark.read`` / ``readStream`` / ``write``.

    Args:
        options: the case-insensitive options Spark hands the data source.
        write: parse the options of a write (``topic`` instead of ``subscribe``).
        streaming: a streaming read (the ``ending*`` options are not allowed there, and
            ``minOffsetsPerTrigger`` / ``maxTriggerDelay`` only there); None when not known
            yet (``DataSource.schema``, shared by both).

    Raises:
        ConfigError: a missing or unknown option, or a bad value.
    """
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    kafka: dict[str, str] = {}
    registry: dict[str, str] = {}
    serializer: dict[str, str] = {}
    for key, value in opts.items():
        if key.startswith("kafka."):
            name = key[len("kafka."):]
            if name in _FORBIDDEN_KAFKA:
                raise ConfigError(f"option {key!r} is not supported: the kontrakt source "
                                  f"manages {name} itself")
            kafka[name] = value
        elif key.startswith("schema.registry."):
            registry[key[len("schema.registry."):]] = value
        elif key in ("use.latest.version", "normalize.schemas"):
            serializer[key] = value
        elif key not in SPARK_TABLE:
            raise SPARK_TABLE.unknown(key)
    isolation = kafka.get("isolation.level")
    if isolation is not None:
        # Checked here so the error comes while the query is analysed, in Spark's words.
        kafka["isolation.level"] = isolation.strip().lower()
        if kafka["isolation.level"] not in ("read_committed", "read_uncommitted"):
            raise ConfigError(f"option 'kafka.isolation.level' must be read_committed or "
                              f"read_uncommitted; got {isolation!r}")
    if not kafka.get("bootstrap.servers", "").strip():
        raise ConfigError("option 'kafka.bootstrap.servers' is required "
                          "(host:port[,host:port...])")
    pattern: str | None = None
    assign: dict[str, tuple[int, ...]] | None = None
    if write:
        # Without the option, each row's 'topic' column names its topic (see plan_write).
        topics = tuple(t.strip() for t in opts.get("topic", "").split(",") if t.strip())
        if len(topics) > 1:
            raise ConfigError("option 'topic' names one topic for a write")
    else:
        topics, pattern, assign = parse_subscription(opts)
    key_format = _format(opts, "key.format")
    value_format = _format(opts, "value.format")
    formats = {key_format, value_format}
    if formats & REGISTRY_FORMATS and not registry.get("url"):
        raise ConfigError("option 'schema.registry.url' is required for the avro, json "
                          "and protobuf formats")
    for fmt in sorted(formats & _FORMAT_PACKAGES.keys()):
        # Here, while the query is analysed, rather than in a task half-way through a read.
        import_extra(_FORMAT_PACKAGES[fmt], f"the kontrakt Spark source's {fmt} format")
    for batch_only in ("endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp"):
        if streaming is True and batch_only.lower() in opts:
            raise ConfigError(f"option {batch_only!r} is for batch queries only")
    for stream_only in ("minOffsetsPerTrigger", "maxTriggerDelay"):
        if streaming is False and not write and stream_only.lower() in opts:
            raise ConfigError(f"option {stream_only!r} is for streaming queries only")
    known = None if pattern is not None else topics
    starting = parse_offsets(opts.get("startingoffsets", "earliest"), "startingOffsets",
                             known)
    ending = parse_offsets(opts.get("endingoffsets", "latest"), "endingOffsets", known)
    starting_ts = parse_timestamps(opts, "starting", known)
    ending_ts = parse_timestamps(opts, "ending", known)
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise ConfigError(f"option 'startingOffsetsByTimestampStrategy' must be error or "
                          f"latest; got {strategy!r}")
    mode = _value(opts, "mode", "FAILFAST")
    corrupt = opts.get("columnnameofcorruptrecord", "_corrupt_record").strip()
    if not corrupt or corrupt in _COLUMN_NAMES:
        raise ConfigError(f"option 'columnNameOfCorruptRecord' must be a new column name; "
                          f"got {corrupt!r}")
    if ending == "earliest" or (isinstance(ending, dict) and any(
            o == EARLIEST for parts in ending.values() for o in parts.values())):
        raise ConfigError("endingOffsets cannot be earliest (-2)")
    exactly_once, txn_prefix = _sink_options(opts, kafka, topics, write)
    return SourceOptions(
        kafka=kafka, registry=registry, topics=topics, starting=starting, ending=ending,
        key_format=key_format, value_format=value_format,
        key_subject=opts.get("key.subject"), value_subject=opts.get("value.subject"),
        poll_timeout_s=_positive_int(opts, "kafkaconsumer.polltimeoutms",
                                     _DEFAULT_POLL_TIMEOUT_MS) / 1000,
        max_offsets_per_trigger=(_positive_int(opts, "maxoffsetspertrigger", 0)
                                 if "maxoffsetspertrigger" in opts else None),
        serializer=serializer,
        fail_on_data_loss=_bool(opts, "failondataloss", True),
        auto_register=_bool(opts, "auto.register.schemas", True),
        key_record=_record_names(opts, "key", key_format),
        value_record=_record_names(opts, "value", value_format),
        pattern=pattern, assign=assign, starting_ts=starting_ts, ending_ts=ending_ts,
        ts_strategy="latest" if strategy == "latest" else "error",
        min_partitions=_optional_int(opts, "minpartitions"),
        max_records_per_partition=_optional_int(opts, "maxrecordsperpartition"),
        min_offsets_per_trigger=_optional_int(opts, "minoffsetspertrigger"),
        max_trigger_delay_s=_duration_s(opts, "maxtriggerdelay", 900.0),
        include_headers=_bool(opts, "includeheaders", False),
        mode=mode, corrupt_column=corrupt,
        key_schema=_schema_choice(opts, "key", key_format, known, write),
        value_schema=_schema_choice(opts, "value", value_format, known, write),
        exactly_once=exactly_once, transactional_id_prefix=txn_prefix,
        filter_pushdown=_bool(opts, "filterpushdown", False),
    )


# -- which schema decodes a column ----------------------------------------------------------
@dataclass(frozen=True)
class SchemaChoice:
    """How a key or value column's reader schema is chosen (``<key|value>.`` options).

    Attributes:
        subjects: ``<key|value>.subjects``: JSON ``{"topic": "subject"}``: the subject of
            each named topic (others: ``<key|value>.subject`` or ``<topic>-key|value``).
        version: ``<key|value>.schema.version``: the version of each topic's subject to read
            with (default the latest).
        schema_id: ``<key|value>.schema.id``: the schema (by registry id) to read with, for
            every topic.
        json_validate: ``<key|value>.json.validate`` (default false): validate each JSON
            document against the schema it was written with, as the registry deserializers
            do; without it a document is only checked against the column's Spark type, as
            Spark's ``from_json`` checks.
    """

    subjects: dict[str, str] = field(default_factory=dict)
    version: int | None = None
    schema_id: int | None = None
    json_validate: bool = False


def _schema_choice(opts: Mapping[str, str], side: str, fmt: Format,
                   topics: tuple[str, ...] | None, write: bool) -> SchemaChoice:
    names = {f"{side}.subjects": "subjects", f"{side}.schema.version": "version",
             f"{side}.schema.id": "id", f"{side}.json.validate": "validate"}
    given = [name for name in names if name in opts]
    if not given:
        return SchemaChoice()
    if write:
        raise ConfigError(f"option {given[0]!r} is for reads; a write takes {side}.subject")
    if fmt not in REGISTRY_FORMATS:
        raise ConfigError(f"option {given[0]!r} needs {side}.format avro, json or protobuf; "
                          f"got {fmt}")
    if f"{side}.json.validate" in opts and fmt != "json":
        raise ConfigError(f"option '{side}.json.validate' is for {side}.format=json, not {fmt}")
    if f"{side}.schema.version" in opts and f"{side}.schema.id" in opts:
        raise ConfigError(f"options '{side}.schema.version' and '{side}.schema.id' both pin "
                          f"the {side} schema; give one")
    subjects: dict[str, str] = {}
    raw = opts.get(f"{side}.subjects")
    if raw is not None:
        try:
            doc = json.loads(raw)
        except ValueError:
            doc = None
        if not isinstance(doc, dict) or not all(
                isinstance(v, str) and v.strip() for v in doc.values()):
            raise ConfigError(f"option '{side}.subjects' must be JSON such as "
                              f"{{\"topic\": \"subject\"}}; got {raw!r}")
        for topic in doc:
            if topics is not None and topic not in topics:
                raise ConfigError(f"option '{side}.subjects' names topic {topic!r}, which is "
                                  f"not subscribed to")
        subjects = {str(t): v.strip() for t, v in doc.items()}
    version = opts.get(f"{side}.schema.version")
    schema_id = opts.get(f"{side}.schema.id")
    return SchemaChoice(
        subjects=subjects,
        version=(None if version is None or version.strip().lower() == "latest"
                 else _positive_int(opts, f"{side}.schema.version", 0)),
        schema_id=None if schema_id is None else _positive_int(opts, f"{side}.schema.id", 0),
        json_validate=_bool(opts, f"{side}.json.validate", False))


def _sink_options(opts: Mapping[str, str], kafka: Mapping[str, str], topics: tuple[str, ...],
                  write: bool) -> tuple[bool, str]:
    """``exactlyOnce`` and ``transactionalIdPrefix`` (writes only)."""
    given = [name for name in ("exactlyOnce", "transactionalIdPrefix") if name.lower() in opts]
    if given and not write:
        raise ConfigError(f"option {given[0]!r} is for writes only")
    if write and "transactional.id" in kafka:
        raise ConfigError("option 'kafka.transactional.id' is not supported: with "
                          "exactlyOnce=true the sink derives one per task from "
                          "transactionalIdPrefix, the query id and the partition id")
    exactly_once = _bool(opts, "exactlyonce", False)
    prefix = opts.get("transactionalidprefix", "kontrakt-sink").strip()
    if not prefix:
        raise ConfigError("option 'transactionalIdPrefix' must not be empty")
    if exactly_once and not topics:
        raise ConfigError("exactlyOnce=true needs the 'topic' option: each task's marker "
                          "(the batch it committed last) is kept as a group offset of that "
                          "topic's partition 0")
    return exactly_once, prefix


_COLUMN_NAMES = ("key", "value", "topic", "partition", "offset", "timestamp",
                 "timestampType", "headers")



def _optional_int(opts: Mapping[str, str], key: str) -> int | None:
    return _positive_int(opts, key, 0) if key in opts else None


def _duration_s(opts: Mapping[str, str], key: str, default: float) -> float:
    """A duration such as ``15m``, ``30s`` or ``500ms`` (a bare number is milliseconds, as
    Spark reads ``maxTriggerDelay``)."""
    value: float = _value(opts, key, default)
    return value


def _record_names(opts: Mapping[str, str], field: str, fmt: Format) -> tuple[str, str]:
    name = opts.get(f"{field}.avro.recordname")
    namespace = opts.get(f"{field}.avro.namespace")
    if (name is not None or namespace is not None) and fmt != "avro":
        raise ConfigError(f"options {field}.avro.recordName / {field}.avro.namespace are for "
                          f"{field}.format=avro, not {fmt}")
    name = DEFAULT_RECORD_NAME if name is None else name.strip()
    namespace = "" if namespace is None else namespace.strip()
    if not AVRO_NAME.fullmatch(name):
        raise ConfigError(f"option {field}.avro.recordName must be an Avro name "
                          f"([A-Za-z_][A-Za-z0-9_]*); got {name!r}")
    if namespace and not all(AVRO_NAME.fullmatch(p) for p in namespace.split(".")):
        raise ConfigError(f"option {field}.avro.namespace must be Avro names joined by "
                          f"dots; got {namespace!r}")
    return name, namespace


def _value(opts: Mapping[str, str], key: str, default: Any, how: Option | None = None
           ) -> Any:
    """Option ``key`` of ``opts`` converted by its declaration in :data:`SPARK_TABLE` (or
    by ``how``); ``default`` when it is not given. Choices are compared stripped."""
    raw = opts.get(key)
    if raw is None:
        return default
    declared = SPARK_TABLE.find(key)
    opt = declared if how is None else replace(
        how, name=key if declared is None else declared.name)
    assert opt is not None, key
    if opt.choices is not None:
        raw = raw.strip()
    return opt.convert(raw, SPARK_STYLE, key=key)


_BOOL = Option("", "bool")
_POSITIVE_INT = _positive("")


def _bool(opts: Mapping[str, str], key: str, default: bool) -> bool:
    value: bool = _value(opts, key, default, _BOOL)
    return value


def _format(opts: Mapping[str, str], key: str) -> Format:
    value: Format = _value(opts, key, "binary")
    return value


def _positive_int(opts: Mapping[str, str], key: str, default: int) -> int:
    value: int = _value(opts, key, default, _POSITIVE_INT)
    return value
