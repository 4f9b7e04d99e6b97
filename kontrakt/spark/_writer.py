"""Batch and streaming writes: each Spark task produces its Arrow record batches with a sync
Kontrakt ``Producer``, encoding keys and values as avro, json (JSON Schema), protobuf,
string or binary; the registry formats are written with the subject's latest schema (for
avro and json, one derived from the column's type is registered first when the subject has
none).

By default delivery is at least once: a task flushes and checks every record before it
reports success, but records of a task that failed (or of a job Spark aborts, or of a
micro-batch replayed after a restart) may already be in the topic: Kafka has no way to take
them back outside a transaction.

``exactlyOnce=true`` writes each task's share of a batch or micro-batch in one Kafka
transaction that the driver-side commit ends (see :mod:`kontrakt.spark._sink_txn` and
:class:`KontraktStreamWriter` for what it guarantees and the window that remains).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
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
    IllegalStateError,
    SchemaRegistryError,
)
from kontrakt.registry import SchemaRegistryClient
from kontrakt.spark._avro_derive import derive_avro_schema
from kontrakt.spark._bulk import BulkBatches, bulk_partitioner
from kontrakt.spark._derive import register_derived
from kontrakt.spark._encoders import ColumnEncode, Headers, column_encoder
from kontrakt.spark._fieldplan import (
    FieldPlan,
    registry_client,
    resolve_field,
    type_shape,
)
from kontrakt.spark._json_derive import derive_json_schema
from kontrakt.spark._options import REGISTRY_FORMATS, SourceOptions
from kontrakt.spark._sink_txn import (
    TaskShare,
    TransactionHandle,
    committed_batch,
    end_transactions,
    marker_partition,
)

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger("kontrakt.spark")

__all__ = ["KontraktCommitMessage", "KontraktStreamWriter", "KontraktWriter", "plan_write"]

_COLUMNS = ("key", "value", "headers", "partition", "topic")
_FLUSH_EVERY = 10_000  # records in flight per task before the task waits for them


@dataclass
class KontraktCommitMessage(WriterCommitMessage):
    """What one task wrote: ``records`` produced and acknowledged; with exactlyOnce, the
    ``transaction`` the driver-side commit ends (None: the task's share was committed
    before, by an earlier run of the same batch, and it wrote nothing)."""

    records: int
    transaction: TransactionHandle | None = None


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


class _ProduceTask:
    """What batch and streaming writers share: one task producing its Arrow batches."""

    def __init__(self, opts: SourceOptions, key: FieldPlan, value: FieldPlan,
                 schema: StructType) -> None:
        self.opts = opts
        self.key = key
        self.value = value
        self.schema = schema
        self.columns = tuple(schema.fieldNames())
        #: whether a key or value is encoded row by row (its serializer may add headers)
        self._row_path = False

    def produce(self, batches: Iterator[pa.RecordBatch],
                share: TaskShare | None = None) -> KontraktCommitMessage:
        """Produce the rows, flush, and check every record's delivery (on an executor).

        Args:
            batches: the task's rows.
            share: with exactlyOnce, which batch and task slot this is: the rows go into
                one transaction of that slot's transactional id, left open for the
                driver-side commit, unless the slot's marker says the batch was committed
                before (then nothing is written).

        Raises:
            KeySerializationError, ValueSerializationError: a row could not be encoded.
            ConfigError: a row's topic is null and no ``topic`` option names one.
            KafkaError: a record was not acknowledged (after the producer's retries), or the
                flush took longer than ``kafkaConsumer.pollTimeoutMs``;
                ``TransactionFatalError`` when a newer attempt of the task fenced this one.
        """
        opts = self.opts
        topic = _first_topic(opts)
        timeout = opts.poll_timeout_s
        conf = {k: v.strip().lower() == "true" for k, v in opts.serializer.items()}
        client = (registry_client(opts)
                  if {self.key.fmt, self.value.fmt} & REGISTRY_FORMATS else None)
        kafka = dict(opts.kafka)
        txn_id = ""
        if share is not None:
            txn_id = share.transactional_id(opts.transactional_id_prefix)
            kafka["transactional.id"] = txn_id
        try:
            encode_key = (self._column_encoder("key", self.key, client, conf, topic)
                          if "key" in self.columns else None)
            encode_value = self._column_encoder("value", self.value, client, conf, topic)
            with Producer(kafka) as producer:
                if share is not None:
                    # InitProducerId: fences every earlier attempt of this task slot and
                    # aborts a transaction one left open (its records never show).
                    producer.init_transactions(timeout)
                    next_batch = committed_batch(opts.kafka, txn_id, topic, timeout)
                    if next_batch > share.batch_id:
                        log.info("batch %d, partition %d: committed by an earlier run "
                                 "(marker of %s at batch %d); nothing written",
                                 share.batch_id, share.partition_id, txn_id, next_batch)
                        for _ in batches:  # Spark's input, read to its end all the same
                            pass
                        return KontraktCommitMessage(0, None)
                    producer.begin_transaction()
                try:
                    count = self._send_all(producer, batches, encode_key, encode_value)
                    if share is None:
                        return KontraktCommitMessage(count)
                    producer.send_offsets_to_transaction(
                        {marker_partition(topic): share.batch_id + 1}, txn_id)
                    pid, epoch = producer.producer_id_and_epoch
                    return KontraktCommitMessage(count, TransactionHandle(txn_id, pid, epoch))
                except BaseException:
                    if share is not None and not producer.closed:
                        # Not left to the next attempt or the timeout: an open transaction
                        # holds back read_committed readers of its partitions.
                        try:
                            producer.abort_transaction(timeout)
                        except Exception as exc:  # the task's own error matters more
                            log.warning("aborting the transaction of %s failed: %s",
                                        txn_id, exc)
                    raise
        finally:
            if client is not None:
                client.close()

    def _column_encoder(self, name: str, plan: FieldPlan, client: SchemaRegistryClient | None,
                        conf: dict[str, bool], topic: str) -> ColumnEncode:
        """The encoder of the ``key`` or ``value`` column (see
        :func:`~kontrakt.spark._encoders.column_encoder`); notes whether a row path is used
        (its serializer may add headers)."""
        subject = self.opts.subject(name == "key", topic)
        encode, row_path = column_encoder(name, plan, client, conf, subject, topic,
                                          self.schema[name].dataType)
        self._row_path = self._row_path or row_path
        return encode

    def _send_all(self, producer: Producer, batches: Iterator[pa.RecordBatch],
                  encode_key: ColumnEncode | None, encode_value: ColumnEncode) -> int:
        """Encode and send each batch column by column; return the number of records."""
        opts = self.opts
        topic = _first_topic(opts)
        timeout = opts.poll_timeout_s
        send = producer.send
        pending: list[Any] = []
        count = 0
        # Records of the one topic, no per-row partition: filled into record batches here
        # (see kontrakt.spark._bulk), with the headers column's headers if there is one.
        bulk = (BulkBatches(producer, topic)
                if opts.topics and not self._row_path and "partition" not in self.columns
                and bulk_partitioner(opts.kafka) else None)
        for batch in batches:
            rows = batch.num_rows
            if rows == 0:
                continue
            topics: list[str] | None = None
            if not opts.topics:  # the option wins over the column, as in Spark's sink
                given: list[str | None] = batch.column("topic").to_pylist()
                if None in given:
                    raise ConfigError(f"row {count + given.index(None)} of this task has a "
                                      f"null topic, and no 'topic' option names one")
                topics = given  # type: ignore[assignment]  # no None left
            headers: list[Headers] | None = None
            if "headers" in self.columns:
                headers = [[] if hs is None else [(h["key"], h["value"]) for h in hs]
                           for hs in batch.column("headers").to_pylist()]
            elif self._row_path:
                # A serializer that frames schema ids in headers adds them here.
                headers = [[] for _ in range(rows)]
            values = encode_value(batch.column("value"), topics, headers, count)
            keys = (None if encode_key is None
                    else encode_key(batch.column("key"), topics, headers, count))
            partitions: list[int | None] | None = (
                batch.column("partition").to_pylist() if "partition" in self.columns
                else None)
            if bulk is not None and keys is None:
                bulk.add(values, headers)
            elif bulk is not None and keys is not None and None not in keys:
                bulk.add_keyed(cast("list[bytes]", keys), values, headers)
            else:
                if bulk is not None:
                    # Null keys take send(): the records filled so far go first, so that
                    # each partition keeps the task's order.
                    bulk.close()
                self._send_rows(send, pending, topic, values, keys, topics, partitions,
                                headers)
            count += rows
            if len(pending) >= _FLUSH_EVERY:
                _settle(producer, pending, timeout)
        if bulk is not None:
            bulk.close()
            pending.extend(bulk.pending)
        _settle(producer, pending, timeout)
        return count

    @staticmethod
    def _send_rows(send: Any, pending: list[Any], topic: str, values: list[bytes | None],
                   keys: list[bytes | None] | None, topics: list[str] | None,
                   partitions: list[int | None] | None, headers: list[Headers] | None) -> None:
        """Send a batch's records one by one (``Producer.send``)."""
        if topics is None and partitions is None and headers is None:
            # No per-row topic, partition or headers.
            if keys is None:
                pending.extend([send(topic, v) for v in values])
            else:
                pending.extend([send(topic, v, k) for k, v in zip(keys, values, strict=True)])
            return
        for i, value in enumerate(values):
            hs = None if headers is None else headers[i]
            pending.append(send(
                topic if topics is None else topics[i], value,
                None if keys is None else keys[i], headers=hs or None,
                partition=None if partitions is None else partitions[i]))


def _task_context() -> Any:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        raise IllegalStateError("exactlyOnce writes run inside Spark tasks only")
    return ctx


class KontraktWriter(_ProduceTask, DataSourceArrowWriter):
    """Produces each task's Arrow batches (batch queries).

    With exactlyOnce, each task's rows go into one transaction (transactional id from a
    job id made on the driver and the task's partition id: a retried task fences the
    attempt before it), and :meth:`commit` commits them all: a job that fails leaves no
    record visible to read_committed consumers, unless it fails in the middle of
    :meth:`commit` itself. A job that is run again is a new job and writes again.
    """

    def __init__(self, opts: SourceOptions, key: FieldPlan, value: FieldPlan,
                 schema: StructType) -> None:
        super().__init__(opts, key, value, schema)
        self.job_id = uuid.uuid4().hex

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KontraktCommitMessage:
        """See :meth:`_ProduceTask.produce`."""
        share = None
        if self.opts.exactly_once:
            share = TaskShare(self.job_id, 0, _task_context().partitionId())
        return self.produce(iterator, share)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """With exactlyOnce, commit every task's transaction (see
        :func:`~kontrakt.spark._sink_txn.end_transactions` for its errors); otherwise
        nothing to finish: each task's records were acknowledged before it reported."""
        _end(self.opts, messages, True)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """With exactlyOnce, abort the transactions of the tasks that finished (those of
        failed tasks end with the next attempt or ``transaction.timeout.ms``); otherwise
        nothing to undo: records already acknowledged stay in the topic (at least once)."""
        _end(self.opts, messages, False)


class KontraktStreamWriter(_ProduceTask, DataSourceStreamArrowWriter):
    """Produces each micro-batch's Arrow batches.

    At least once by default: a micro-batch that is retried after a failure (or replayed
    after a restart) produces its records again.

    ``exactlyOnce=true``: each task writes its share of micro-batch ``b`` in one
    transaction with the transactional id ``<transactionalIdPrefix>-<query id>-<partition
    id>`` (the query id is the checkpoint's, so it survives restarts), plus a marker
    ``b + 1`` committed in the same transaction as the offset of the consumer group of that
    name for partition 0 of the ``topic``; the transactions stay open until :meth:`commit`
    (on the driver side, after every task succeeded) commits them. A retried task fences
    the earlier attempt and aborts its transaction; a replayed micro-batch skips the tasks
    whose marker says it was committed. Read with ``isolation.level=read_committed``.

    The window that remains:

    * A replay must give each partition id the same rows as the first run (a deterministic
      source such as ``kontrakt`` or Spark's Kafka source, and no non-deterministic
      repartitioning in between): shares are skipped per partition id.
    * :meth:`commit` ends the tasks' transactions one after the other, so a crash in its
      middle leaves a micro-batch partly visible until the query is restarted and the
      replay writes the rest.
    * A task's transaction must be committed within ``kafka.transaction.timeout.ms``
      (default 60000) of its first record, or the coordinator aborts it and the commit
      fails the query (nothing is lost: the micro-batch is written again on restart).
    * The markers are group offsets: if a query stays stopped longer than the broker's
      ``offsets.retention.minutes`` (7 days by default) right after Spark ran
      :meth:`commit` but before it recorded the micro-batch as done, the replay finds no
      marker and writes the micro-batch again.
    * A new checkpoint is a new query id: nothing is deduplicated across checkpoints.
    * A second attempt that starts while the first is done but not yet committed (Spark's
      speculative execution, ``spark.speculation``, off by default) fences the first, whose
      commit message Spark may keep: the commit then fails and the micro-batch is written
      on restart.
    * While a task's transaction is open (until :meth:`commit`, :meth:`abort` or the next
      attempt), read_committed consumers of its partitions wait at its first record.
    """

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KontraktCommitMessage:
        """See :meth:`_ProduceTask.produce`; with exactlyOnce, the query id and batch id
        come from the task's local properties."""
        share = None
        if self.opts.exactly_once:
            ctx = _task_context()
            query = ctx.getLocalProperty("sql.streaming.queryId")
            batch = ctx.getLocalProperty("streaming.sql.batchId")
            if not query or batch is None:
                raise IllegalStateError("exactlyOnce: the task has no streaming query id "
                                        "or batch id")
            share = TaskShare(query, int(batch), ctx.partitionId())
        return self.produce(iterator, share)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """With exactlyOnce, commit every task's transaction of the micro-batch (see
        :func:`~kontrakt.spark._sink_txn.end_transactions` for its errors; a failure fails
        the query, and the micro-batch is replayed on restart); otherwise nothing to finish:
        each task's records were acknowledged before it reported."""
        _end(self.opts, messages, True)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """With exactlyOnce, abort the transactions of the tasks that finished; otherwise
        nothing to undo: acknowledged records stay in the topic."""
        _end(self.opts, messages, False)


def _end(opts: SourceOptions, messages: list[WriterCommitMessage | None],
         commit: bool) -> None:
    handles = [m.transaction for m in messages
               if isinstance(m, KontraktCommitMessage) and m.transaction is not None]
    if not handles:
        return
    try:
        end_transactions(opts.kafka, handles, commit, opts.poll_timeout_s)
    except Exception as exc:
        if commit:
            raise
        log.warning("aborting %d task transaction(s) failed: %s", len(handles), exc)


def _settle(producer: Producer, pending: list[Any], timeout: float) -> None:
    producer.flush(timeout)
    for future in pending:
        # exception(), not result(): building each record's metadata cost a sink task
        # ~14% of its time (cProfile, 600k records).
        error = future.exception(0)
        if error is not None:
            raise error
    pending.clear()
