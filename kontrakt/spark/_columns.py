"""Key and value columns: a batch of records' bytes decoded into one Arrow array.

A :class:`ColumnDecoder` turns the keys (or values) of a batch of records into one array of
the column's Arrow type, and says which records could not be decoded (their slot is null);
the reader decides what the ``mode`` option makes of those. ``binary`` and ``string`` are
vectorised; ``avro`` uses the columnar decoder compiled per writer schema
(:mod:`kontrakt.spark._avro_columns`) and falls back to the row path for a batch it cannot
take whole; json goes through Arrow's JSON reader (:mod:`kontrakt.spark._json_columns`)
and protobuf through column fillers compiled per writer message
(:mod:`kontrakt.spark._proto_columns`), each falling back to the row path (record by record
with Kontrakt's registry deserializers, the array built from the values) for a batch they
cannot take whole.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.types import DataType

from kontrakt.errors import SerializationError
from kontrakt.serde import MessageField, SerializationContext
from kontrakt.spark._arrow import Chunk, arrow_type

if TYPE_CHECKING:
    from kontrakt.registry import SchemaRegistryClient
    from kontrakt.spark._fieldplan import FieldPlan

__all__ = ["AvroColumnDecoder", "ColumnDecoder", "Decoded", "RowDecoder", "column_decoder"]

log = logging.getLogger("kontrakt.spark")

Decoded = tuple[pa.Array, dict[int, Exception]]
"""The column's array, and the records (by index in the batch) that could not be decoded."""
Decoder = Callable[[Any, SerializationContext], Any]


def _raw(chunk: Chunk, field: MessageField) -> Sequence[Any]:
    return chunk.keys if field is MessageField.KEY else chunk.values


def _raw_array(chunk: Chunk, field: MessageField) -> pa.Array:
    return chunk.key_array if field is MessageField.KEY else chunk.value_array


class ColumnDecoder:
    """Decodes the key or value column of a batch of records of one topic."""

    def decode(self, chunk: Chunk, field: MessageField) -> Decoded:
        """The column of the chunk's keys or values.

        Returns:
            The array (null where a record could not be decoded) and those records'
            errors by index.
        """
        raise NotImplementedError


class BinaryDecoder(ColumnDecoder):
    """``format=binary``: the bytes as they are."""

    def decode(self, chunk: Chunk, field: MessageField) -> Decoded:
        return _raw_array(chunk, field), {}


class RowDecoder(ColumnDecoder):
    """Decodes record by record with ``decode`` (bytes, context → the Spark value), then
    builds the array from the values.

    Args:
        decode: the record decoder.
        data_type: the column's Spark type.
        topic: the records' topic, for the deserializers' context.
    """

    def __init__(self, decode: Decoder, data_type: DataType, topic: str = "") -> None:
        self._decode = decode
        self._type = arrow_type(data_type)
        self.topic = topic

    def decode(self, chunk: Chunk, field: MessageField) -> Decoded:
        headers = chunk.headers if chunk.has_headers else None
        return self.decode_values(_raw(chunk, field), field, headers, chunk.offsets)

    def decode_values(self, payloads: Sequence[Any], field: MessageField,
                      headers: Sequence[Any] | None = None,
                      offsets: Sequence[int] | None = None) -> Decoded:
        """The array of ``payloads`` (with their records' headers and offsets, when known)
        and the errors of those that could not be decoded, or whose value does not fit the
        column (their slot is null)."""
        decode = self._decode
        topic = self.topic
        values: list[Any] = []
        errors: dict[int, Exception] = {}
        for i, data in enumerate(payloads):
            try:
                values.append(decode(data, SerializationContext(
                    topic, field, None if headers is None else headers[i], None,
                    None if offsets is None else offsets[i])))
            except Exception as exc:
                errors[i] = exc
                values.append(None)
        try:
            return pa.array(values, self._type), errors
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            pass
        # A value that does not fit its column (a number beyond the column's type, a
        # document's property of another type than the schema's): the record's error.
        for i, value in enumerate(values):
            try:
                pa.array([value], self._type)
            except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
                errors[i] = exc
                values[i] = None
        return pa.array(values, self._type), errors


class StringDecoder(ColumnDecoder):
    """``format=string``: UTF-8 checked by Arrow for the whole batch; a batch with invalid
    text is decoded record by record to find the records."""

    def __init__(self) -> None:
        from kontrakt.serde import StringDeserializer

        self._rows = RowDecoder(StringDeserializer(), _string_type())

    def decode(self, chunk: Chunk, field: MessageField) -> Decoded:
        raw = _raw_array(chunk, field)
        try:
            return raw.cast(pa.string()), {}
        except pa.ArrowInvalid:
            return self._rows.decode(chunk, field)


def _string_type() -> DataType:
    from pyspark.sql.types import StringType

    return StringType()


def row_decoder(plan: FieldPlan, client: SchemaRegistryClient | None) -> Decoder:
    """The record-at-a-time decoder of a registry format: the registry deserializer, then
    the mapping's converter to Spark values."""
    assert plan.schema is not None
    deserialize: Callable[[Any, SerializationContext], Any]
    if plan.fmt == "json":
        from kontrakt.serde import JSONDeserializer

        # Documents are validated against the schema they were written with only when the
        # option asks for it (see kontrakt.spark._json_columns).
        deserialize = JSONDeserializer(None, schema_registry_client=client,
                                       conf={"validate": plan.validate})
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


def column_decoder(plan: FieldPlan, client: SchemaRegistryClient | None,
                   data_type: DataType, topic: str = "") -> ColumnDecoder:
    """The decoder of one topic's key or value column.

    Args:
        plan: the topic's plan for the column.
        client: the registry client (registry formats).
        data_type: the column's Spark type (of every topic's schema: nullability may be
            wider than this topic's own).
        topic: the topic, for the deserializers' context in the row path.
    """
    if plan.fmt == "binary":
        return BinaryDecoder()
    if plan.fmt == "string":
        return StringDecoder()
    rows = RowDecoder(row_decoder(plan, client), data_type, topic)
    if plan.fmt == "avro" and client is not None:
        return AvroColumnDecoder(plan, client, data_type, rows)
    if plan.fmt == "json":
        from kontrakt.spark._json_columns import JsonColumnDecoder

        return JsonColumnDecoder(client, data_type, rows, plan.validate)
    if plan.fmt == "protobuf" and client is not None:
        from kontrakt.spark._proto_columns import ProtoColumnDecoder

        return ProtoColumnDecoder(plan, client, data_type, rows)
    return rows


class AvroColumnDecoder(ColumnDecoder):
    """``format=avro``: the columnar decoder of :mod:`kontrakt.spark._avro_columns`,
    compiled once per writer schema id met in the task.

    A batch it cannot take whole (a record that is not prefix-framed or not a value of its
    writer schema, a schema id in a header, a schema pair without a columnar plan, a value
    Arrow refuses) is decoded again by the row path, which gives every record its own
    result or error: errors keep the messages and the per-record outcome they always had.
    """

    def __init__(self, plan: FieldPlan, client: SchemaRegistryClient, data_type: DataType,
                 rows: RowDecoder) -> None:
        from fastavro import parse_schema

        from kontrakt.spark._avro_columns import AvroColumns, NoColumnarPlan, parse_text
        from kontrakt.spark._fieldplan import named_types

        assert plan.schema is not None
        self._client = client
        self._rows = rows
        reader = parse_schema(parse_text(plan.schema.schema_str),
                              named_schemas=named_types(plan.deps), expand=True)
        self._columns: AvroColumns | None
        try:
            self._columns = AvroColumns(reader, data_type)
        except NoColumnarPlan:
            self._columns = None
        self._writers: dict[int, Any] = {}
        #: batches decoded record by record (the columnar decoder could not take them)
        self.fallbacks = 0
        from kontrakt.spark._avro_vector import AvroVector, writer_schema

        self._vector = AvroVector(lambda i: writer_schema(client, i), reader, data_type)

    def decode(self, chunk: Chunk, field: MessageField) -> Decoded:
        if self._columns is None or _id_in_headers(chunk, field):
            self.fallbacks += 1
            return self._rows.decode(chunk, field)
        try:
            # Column-wise when the batch is a case it takes, else payload by payload.
            got = self._vector.decode(_raw_array(chunk, field))
            if got is not None:
                return got, {}
            return self.decode_payloads(_raw(chunk, field)), {}
        except Exception as exc:
            # Decoded again record by record: each record gets its own value or error.
            self.fallbacks += 1
            log.debug("a batch of %d records is decoded record by record: %s: %s",
                      len(chunk), type(exc).__name__, exc)
            return self._rows.decode(chunk, field)

    def decode_payloads(self, payloads: Sequence[Any]) -> pa.Array:
        """Registry-framed Avro payloads (None: a null) as one array of the column's type:
        the plain bytes-column → Arrow-array function (an ``arrow_udf`` over a column of
        framed bytes can call it), without the row path's fallback.

        Raises:
            SerializationError: a payload that is not prefix-framed, or not a value of its
                writer schema, or breaks the bounds.
            NoColumnarPlan: a writer schema the reader schema cannot resolve.
            SchemaRegistryError: a writer schema could not be fetched.
            pyarrow.ArrowInvalid: a value that does not fit its column.
        """
        from kontrakt.spark._avro_columns import null_appender

        columns = self._columns
        assert columns is not None
        L = columns.new_columns()
        null = null_appender(columns, L)
        bound: dict[bytes, Any] = {}
        # No payload the columns take starts with magic byte 1: the first one is looked up.
        prefix = b"\x01 none"
        one: Any = None
        safe: float = 0
        bounds: Any = None
        for data in payloads:
            if data is None:
                null()
                continue
            if not data.startswith(prefix):
                prefix = bytes(data[:5])
                if prefix not in bound:
                    if len(prefix) < 5 or prefix[0] != 0:
                        raise SerializationError("not a registry-framed Avro payload")
                    make, bounds, safe = self._writer(int.from_bytes(prefix[1:], "big"))
                    bound[prefix] = (make(L)[0], bounds, safe)
                one, bounds, safe = bound[prefix]
            if len(data) > safe:
                bounds.check(data, 5)
            if one(data, 5) != len(data):
                raise SerializationError("bytes left after the Avro value")
        return columns.build(L, len(payloads))

    def _writer(self, schema_id: int) -> Any:
        """The compiled decoder of a writer schema id, its bounds and the payload length up
        to which no bounds scan is needed (cached for the task)."""
        if schema_id not in self._writers:
            from fastavro import parse_schema

            from kontrakt.serde._avro_bounds import LIMIT_DEFAULTS, AvroBounds
            from kontrakt.spark._avro_columns import parse_text
            from kontrakt.spark._fieldplan import _collect_deps, named_types

            assert self._columns is not None
            schema = self._client.get_schema(schema_id)
            if schema.schema_type != "AVRO":
                raise SerializationError(f"schema {schema_id} is not an Avro schema")
            deps: list[tuple[str, str]] = []
            _collect_deps(self._client, schema, deps, set())
            text = parse_text(schema.schema_str)
            writer = parse_schema(text, named_schemas=named_types(tuple(deps)), expand=True)
            make = self._columns.compile(writer)
            bounds = AvroBounds(parse_schema(text, named_schemas=named_types(tuple(deps))),
                                *LIMIT_DEFAULTS.values())
            safe = float("inf") if bounds.safe_len is None else bounds.safe_len
            self._writers[schema_id] = (make, bounds, safe)
        return self._writers[schema_id]


def _id_in_headers(chunk: Chunk, field: MessageField) -> bool:
    """Whether a record carries its schema id in a header (not the payload's prefix)."""
    from kontrakt.serde._framing import KEY_SCHEMA_ID_HEADER, VALUE_SCHEMA_ID_HEADER

    if not chunk.has_headers:
        return False
    name = KEY_SCHEMA_ID_HEADER if field is MessageField.KEY else VALUE_SCHEMA_ID_HEADER
    return any(h and any(k == name for k, _ in h) for h in chunk.headers)
