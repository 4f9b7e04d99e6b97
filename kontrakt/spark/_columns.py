"""Key and value columns: a batch of records' bytes decoded into one Arrow array.

A :class:`ColumnDecoder` turns the keys (or values) of a batch of records into one array of
the column's Arrow type, and says which records could not be decoded (their slot is null);
the reader decides what the ``mode`` option makes of those. ``binary`` and ``string`` are
vectorised; ``avro`` uses the columnar decoder compiled per writer schema
(:mod:`kontrakt.spark._avro_columns`) and falls back to the row path for a batch it cannot
take whole; json and protobuf decode record by record with Kontrakt's registry
deserializers and build the array from the values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.types import DataType

from kontrakt._types import ConsumerRecord
from kontrakt.serde import MessageField, SerializationContext
from kontrakt.spark._arrow import arrow_type

if TYPE_CHECKING:
    from kontrakt.registry import SchemaRegistryClient
    from kontrakt.spark._reader import FieldPlan

__all__ = ["ColumnDecoder", "Decoded", "RowDecoder", "column_decoder"]

Records = Sequence[ConsumerRecord[Any, Any]]
Decoded = tuple[pa.Array, dict[int, Exception]]
"""The column's array, and the records (by index in the batch) that could not be decoded."""
Decoder = Callable[[Any, SerializationContext], Any]


def _raw(records: Records, field: MessageField) -> list[Any]:
    if field is MessageField.KEY:
        return [r.key for r in records]
    return [r.value for r in records]


class ColumnDecoder:
    """Decodes the key or value column of a batch of records of one topic."""

    def decode(self, records: Records, field: MessageField) -> Decoded:
        """The column of ``records``' keys or values.

        Returns:
            The array (null where a record could not be decoded) and those records'
            errors by index.
        """
        raise NotImplementedError


class BinaryDecoder(ColumnDecoder):
    """``format=binary``: the bytes as they are."""

    def decode(self, records: Records, field: MessageField) -> Decoded:
        return pa.array(_raw(records, field), pa.binary()), {}


class RowDecoder(ColumnDecoder):
    """Decodes record by record with ``decode`` (bytes, context → the Spark value), then
    builds the array from the values."""

    def __init__(self, decode: Decoder, data_type: DataType) -> None:
        self._decode = decode
        self._type = arrow_type(data_type)

    def decode(self, records: Records, field: MessageField) -> Decoded:
        decode = self._decode
        values: list[Any] = []
        errors: dict[int, Exception] = {}
        for i, record in enumerate(records):
            data = record.key if field is MessageField.KEY else record.value
            try:
                values.append(decode(data, SerializationContext(
                    record.topic, field, record.headers, record.partition, record.offset)))
            except Exception as exc:
                errors[i] = exc
                values.append(None)
        return pa.array(values, self._type), errors


class StringDecoder(ColumnDecoder):
    """``format=string``: UTF-8 checked by Arrow for the whole batch; a batch with invalid
    text is decoded record by record to find the records."""

    def __init__(self) -> None:
        from kontrakt.serde import StringDeserializer

        self._rows = RowDecoder(StringDeserializer(), _string_type())

    def decode(self, records: Records, field: MessageField) -> Decoded:
        raw = pa.array(_raw(records, field), pa.binary())
        try:
            return raw.cast(pa.string()), {}
        except pa.ArrowInvalid:
            return self._rows.decode(records, field)


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


def column_decoder(plan: FieldPlan, client: SchemaRegistryClient | None,
                   data_type: DataType) -> ColumnDecoder:
    """The decoder of one topic's key or value column.

    Args:
        plan: the topic's plan for the column.
        client: the registry client (registry formats).
        data_type: the column's Spark type (of every topic's schema: nullability may be
            wider than this topic's own).
    """
    if plan.fmt == "binary":
        return BinaryDecoder()
    if plan.fmt == "string":
        return StringDecoder()
    return RowDecoder(row_decoder(plan, client), data_type)

