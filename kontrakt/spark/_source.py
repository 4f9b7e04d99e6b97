"""The ``kontrakt`` data source: Spark's entry point that hands out readers and writers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import StructType

from kontrakt.errors import ConfigError
from kontrakt.spark._fieldplan import (
    ColumnPlan,
    OffsetRange,
    check_schema,
    output_schema,
    registry_client,
    resolve_column,
)
from kontrakt.spark._options import SourceOptions, parse_options
from kontrakt.spark._plan import plan_ranges, with_topics
from kontrakt.spark._pushdown import RangeLimits, called_for_pushdown, push_filters
from kontrakt.spark._task import read_range

__all__ = [
    "KontraktBatchReader", "KontraktDataSource", "KontraktPushdownReader", "resolve_plans",
]


def resolve_plans(opts: SourceOptions) -> tuple[ColumnPlan, ColumnPlan]:
    """The key and value decoding plans of every subscribed topic (registry look-ups
    happen here, on the driver).

    Raises:
        ConfigError: a topic's subject is missing or of another type, or two topics'
            schemas map to different column types (see
            :func:`~kontrakt.spark._fieldplan.resolve_column`).
    """
    if not {opts.key_format, opts.value_format} & {"avro", "json", "protobuf"}:
        return resolve_column(opts, None, True), resolve_column(opts, None, False)
    with registry_client(opts) as client:
        return resolve_column(opts, client, True), resolve_column(opts, client, False)


class KontraktDataSource(DataSource):
    """Kafka topics with Schema Registry decoding, as a Spark data source named ``kontrakt``.

    Register it with :func:`kontrakt.spark.register`, then read with
    ``spark.read.format("kontrakt")`` (batch) or ``spark.readStream.format("kontrakt")``.

    Options (names as in Spark's Kafka source where it has one):
        kafka.bootstrap.servers: required. Any other ``kafka.<property>`` is passed to
            Kontrakt's consumer/producer (``kafka.isolation.level``, ``kafka.client.id``,
            SASL/TLS properties, ...); ``group.id``, ``auto.offset.reset``,
            ``enable.auto.commit`` and (de)serializers are refused.
            ``kafka.isolation.level``: ``read_uncommitted`` (default) returns every record;
            ``read_committed`` plans ranges up to the last stable offset (open transactions
            are not read yet) and leaves out aborted transactions' records and the
            transaction markers (their offsets are simply not rows).
        subscribe, subscribePattern, assign: exactly one: comma-separated topics; a
            regular expression whole topic names must match (topics created later are read
            by a stream from their earliest offset; their subjects must give the same
            column types); or JSON ``{"topic": [0, 1]}`` naming the partitions to read.
        startingOffsets: ``earliest`` (default), ``latest`` or JSON
            ``{"topic": {"0": 12, "1": -2}}`` (-2 earliest, -1 latest; partitions left out
            start at the earliest offset).
        endingOffsets: batch only: ``latest`` (default) or JSON as above (left out: latest).
            A partition's end is its high watermark (the last stable offset with
            read_committed) as a Fetch response gives it, not only ListOffsets' answer.
        startingTimestamp, startingOffsetsByTimestamp: the first offset whose record has
            a timestamp (ms) at or after the one given, for every partition or per
            partition (JSON ``{"topic": {"0": 1700000000000}}`` naming every partition
            read); they take precedence over startingOffsets (the single one first).
            Where no record is that late, ``startingOffsetsByTimestampStrategy``
            ``error`` (default) fails the query and ``latest`` starts at the end.
        endingTimestamp, endingOffsetsByTimestamp: batch only: the same for the end
            (exclusive); no record that late: the partition's end.
        maxRecordsPerPartition, minPartitions: split each partition's offsets into Spark
            tasks of at most that many offsets, then, while there are fewer tasks than
            minPartitions, large partitions into more (as Spark's Kafka source).
        key.format, value.format: ``avro``, ``json`` (JSON Schema), ``protobuf`` (the
            schema's first message), ``string`` or ``binary`` (default binary); the same
            for reads and writes.
        key.subject, value.subject: the registry subject of every subscribed topic;
            default each topic's own ``<topic>-key`` / ``<topic>-value``
            (TopicNameStrategy). Each topic's records are decoded with its subject's latest
            version (for avro, the reader schema that older versions resolve to). Those
            latest versions fix the column's type when the query is analysed, so they must
            all map to the same Spark type (nullability aside: a field is nullable if any
            of them has it nullable); if two differ, the query fails then with a ``ConfigError``
            naming both topics, subjects and types.
        key.subjects, value.subjects: reads: JSON ``{"topic": "subject"}``, the subject of
            each named topic (a topic not named: ``value.subject`` or its own).
        key.schema.version, value.schema.version: reads: read with that version of each
            topic's subject instead of the latest (avro: every writer version resolves to
            it; json, protobuf: fields are taken by name). ``latest`` is the default.
        key.schema.id, value.schema.id: reads: read with the schema of that registry id,
            for every topic (not with ``schema.version``).
        key.json.validate, value.json.validate: reads, json: ``true`` validates each
            document against the schema it was written with, as the registry
            deserializers do (record by record, about twice the cost). Default false: as
            Spark's ``from_json``, a document is checked against the column's type only
            (a value of another type is a malformed record, see ``mode``); the schema's
            other keywords (``required``, ``minimum``, ``pattern``, ...) are not checked.
        schema.registry.url: required for avro, json and protobuf;
            ``schema.registry.<property>`` is passed to the registry client
            (``schema.registry.basic.auth.user.info``, ...).
        kafkaConsumer.pollTimeoutMs: a task fails when its partition yields nothing for
            this long (default 120000); a write task's flush is bounded by it too.
        maxOffsetsPerTrigger: streaming only: at most this many offsets per micro-batch,
            shared among partitions by backlog.
        minOffsetsPerTrigger, maxTriggerDelay: streaming only: hold a micro-batch back
            until that many new offsets are there, but no longer than maxTriggerDelay
            (default ``15m``; ``ms``, ``s``, ``m``, ``h``, ``d``) after the last one.
        failOnDataLoss: ``true`` (default) or ``false``. With false, offsets whose records
            were deleted (retention, DeleteRecords) are skipped with a logged warning: a
            ``startingOffsets`` offset below the log start begins at the log start, and a
            task whose position was deleted meanwhile goes on from the earliest offset.
        includeHeaders: ``false`` (default, as Spark's Kafka source) or ``true`` (a
            ``headers`` column).
        mode: ``FAILFAST`` (default), ``PERMISSIVE`` or ``DROPMALFORMED`` (as Spark's
            ``from_avro``); see below.
        columnNameOfCorruptRecord: PERMISSIVE's extra column (default ``_corrupt_record``).
        topic: writes only: the topic to produce to; without it, each row's ``topic``
            column (see :meth:`writer`).
        auto.register.schemas: writes only: ``true`` (default) or ``false``. With true, an
            avro key or value written to a subject that has no schema yet registers one
            derived from the column's Spark type, once, on the driver, before any record is
            produced: Spark's ``to_avro`` mapping (string, binary, boolean, int, bigint,
            float, double, date as ``int``/``date``, timestamp as
            ``long``/``timestamp-micros``, timestamp_ntz as
            ``long``/``local-timestamp-micros``, decimal as ``bytes``/``decimal``, array,
            map with string keys, struct as record), nullable fields as ``["null", T]``
            with default null; other types (tinyint, smallint, intervals, maps with other
            keys) are refused with their path. A json key or value gets a draft-07 JSON
            Schema the same way, the inverse of the read mapping (string, bigint as
            ``integer``, double as ``number``, boolean, void as ``null``, array, map with
            string keys as an object with ``additionalProperties``, struct as an object
            with ``properties``, nullable parts as ``[T, "null"]``, non-nullable fields
            ``required``); types a read would give back as another type (int, float,
            decimal, date, timestamps, binary, ...) are refused with their path. A subject
            that exists is used as it is. With false, a missing subject is an error
            (protobuf subjects are never derived).
        key.avro.recordName, key.avro.namespace, value.avro.recordName,
            value.avro.namespace: writes only: the derived schema's top record (default
            ``topLevelRecord``, no namespace, as Spark's ``to_avro``); a nested struct is a
            record named after its field, in its parent record's full name as namespace.

    Filter pushdown (batch reads, PySpark 4.1+ with
    ``spark.sql.python.filterPushdown.enabled=true`` and the option ``filterPushdown=true``,
    default false: PySpark reuses the narrowed plan for later queries of the same DataFrame
    that push no filter, see :class:`KontraktPushdownReader`): a query's filters on
    ``topic`` and ``partition`` leave whole partitions out, comparisons of ``offset`` cut
    the planned ranges, and a lower bound on ``timestamp`` (``>=``, ``>``, ``=``) starts
    each range at the first offset whose record is that late (a ListOffsets lookup, as
    startingTimestamp); Spark still checks the timestamp filters and everything else.
    The options are resolved first; filters only narrow what they give.

    A record that cannot be decoded (``mode=FAILFAST``) fails its task with
    ``KeyDeserializationError`` / ``ValueDeserializationError`` naming the option and its
    topic, partition and offset; ``DROPMALFORMED`` leaves it out (logged per task);
    ``PERMISSIVE`` gives null for the key or value that failed and, in a last column
    ``struct<key:binary, value:binary, error:string>``, its raw bytes and the error (null for
    records decoded whole). Records deleted by
    retention while a task reads them fail it with ``OffsetOutOfRangeResetError`` (unless
    ``failOnDataLoss`` is false).
    Columns: ``key``, ``value`` (decoded; an Avro record is a struct), ``topic`` (string),
    ``partition`` (int), ``offset`` (long), ``timestamp`` (timestamp), ``timestampType``
    (int), ``headers`` (array<struct<key:string, value:binary>>, with includeHeaders=true),
    and with PERMISSIVE the corrupt-record column.

    Errors: bad options raise :class:`~kontrakt.errors.ConfigError` (a schema construct
    without a Spark type: :class:`~kontrakt.spark.UnsupportedSchemaError`) while the query is
    analysed, before any record is read; Spark reports them wrapped in its own exception,
    with the Kontrakt class name and message in the text.
    """

    @classmethod
    def name(cls) -> str:
        """The format name: ``kontrakt``."""
        return "kontrakt"

    def schema(self) -> StructType:
        """The columns, with the value's type derived from the registry's latest schema."""
        # Shared by batch and streaming reads: reader() and streamReader() refuse the
        # options of the other kind.
        opts = with_topics(parse_options(self.options, streaming=None))
        return output_schema(*resolve_plans(opts), opts)

    def reader(self, schema: StructType) -> DataSourceReader:
        """A batch reader over the offsets resolved now (startingOffsets..endingOffsets)."""
        opts = with_topics(parse_options(self.options))
        key, value = resolve_plans(opts)
        check_schema(schema, output_schema(key, value, opts))
        if called_for_pushdown():
            return KontraktPushdownReader(opts, key, value)
        return KontraktBatchReader(opts, key, value)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """A batch writer to the ``topic`` option's topic, or without it to each row's
        ``topic`` column's (append only). Columns: ``value``, and optionally ``key``,
        ``headers``, ``partition`` and ``topic`` (see
        :func:`~kontrakt.spark._writer.plan_write`).

        Options: ``kafka.bootstrap.servers``, ``topic``, ``key.format`` / ``value.format``
        (avro, json, protobuf, string, binary), ``schema.registry.url``, ``key.subject`` /
        ``value.subject``, ``auto.register.schemas`` (true: derive and register an avro
        or json subject's missing schema, see above), ``key.avro.recordName`` / ``namespace`` (and
        ``value.``), ``use.latest.version`` (true) and ``normalize.schemas`` for the
        registry serializers, and ``kafka.<property>`` for the producer;
        ``exactlyOnce`` (false) and ``transactionalIdPrefix`` (``kontrakt-sink``): each
        task writes in one transaction that :meth:`commit` commits (see
        :class:`~kontrakt.spark._writer.KontraktWriter`).
        A registry-format column must have the type a read of the subject's latest schema
        gives (nullability aside); records carry that schema's id.

        Raises:
            ConfigError: bad options, mode overwrite, columns that do not fit, or a schema
                that cannot be derived or that the registry refused (see
                :func:`~kontrakt.spark._writer.plan_write`).
            SchemaRegistryError: the registry failed otherwise.
        """
        from kontrakt.spark._writer import KontraktWriter, plan_write

        if overwrite:
            raise ConfigError("mode overwrite is not supported: a Kafka topic is append-only;"
                              " use mode append")
        opts = parse_options(self.options, write=True)
        key, value = plan_write(opts, schema)
        return KontraktWriter(opts, key, value, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """A streaming writer (``writeStream.format("kontrakt")``, output mode append); same
        options and columns as :meth:`writer`. At least once, or with ``exactlyOnce=true``
        exactly once for read_committed consumers, within the window
        :class:`~kontrakt.spark._writer.KontraktStreamWriter` describes.

        Raises:
            ConfigError: as :meth:`writer`.
        """
        from kontrakt.spark._writer import KontraktStreamWriter, plan_write

        if overwrite:
            raise ConfigError("output mode complete is not supported: a Kafka topic is "
                              "append-only; use output mode append")
        opts = parse_options(self.options, write=True)
        key, value = plan_write(opts, schema)
        return KontraktStreamWriter(opts, key, value, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """A micro-batch reader (PySpark 4.2+); offsets are checkpointed by Spark."""
        from kontrakt.spark._stream import KontraktStreamReader

        opts = with_topics(parse_options(self.options, streaming=True))
        key, value = resolve_plans(opts)
        check_schema(schema, output_schema(key, value, opts))
        return KontraktStreamReader(opts, key, value)


class KontraktBatchReader(DataSourceReader):
    """Reads each Kafka partition's offset range as one Spark task."""

    def __init__(self, opts: SourceOptions, key: ColumnPlan, value: ColumnPlan) -> None:
        self.opts = opts
        self.key = key
        self.value = value
        self.limits: RangeLimits | None = None

    def partitions(self) -> list[InputPartition]:
        """One Spark partition per Kafka partition with records in range, or more with
        ``maxRecordsPerPartition`` / ``minPartitions`` (offsets resolved now), narrowed by
        the filters pushed (see :class:`KontraktPushdownReader`)."""
        return [InputPartition(r) for r in plan_ranges(self.opts, self.limits)]

    def read(self, partition: InputPartition) -> Any:
        """The rows of one partition's range (runs on an executor)."""
        rng: OffsetRange | None = partition.value
        if rng is None:  # Spark reads one empty partition when partitions() returned none
            return iter(())
        return read_range(self.opts, self.key, self.value, rng)


class KontraktPushdownReader(KontraktBatchReader):
    """The batch reader PySpark's filter-pushdown planner gets (PySpark 4.1+ with
    ``spark.sql.python.filterPushdown.enabled=true``): filters on ``topic``,
    ``partition``, ``offset`` and ``timestamp`` narrow the planned offset ranges.

    A separate class because PySpark refuses a reader that overrides ``pushFilters`` while
    the setting is off; :meth:`KontraktDataSource.reader` hands this one to the pushdown
    planner only (see :func:`~kontrakt.spark._pushdown.called_for_pushdown`).

    Narrowing needs the ``filterPushdown`` option too, because PySpark (4.1 to 4.3 at
    least) keeps the partitions planned with pushed filters on the DataFrame's source and
    plans a later query of the same DataFrame that pushes no filter (``df.count()`` after
    ``df.where("partition = 0").show()``) with them: it would silently miss rows. With the
    option, use such a DataFrame for filtered queries only.
    """

    def pushFilters(self, filters: list[Any]) -> Iterable[Any]:
        """With the ``filterPushdown`` option, keep what narrows the ranges (see
        :func:`~kontrakt.spark._pushdown.push_filters`) and return the filters Spark must
        still evaluate: all but exact ``topic``, ``partition`` and ``offset`` comparisons
        (``timestamp`` ones only move a range's start, so Spark checks them again).
        Without it, return them all and narrow nothing (see the class docstring)."""
        if not self.opts.filter_pushdown:
            return filters
        self.limits, remaining = push_filters(filters)
        return remaining
