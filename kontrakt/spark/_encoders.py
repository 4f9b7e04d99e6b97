"""How the sink turns a key or value column of an Arrow batch into record bytes: column-wise
(binary and string as they are; avro, json and protobuf through the compiled column
encoders of :mod:`~kontrakt.spark._avro_encode`, :mod:`~kontrakt.spark._json_encode` and
:mod:`~kontrakt.spark._proto_encode`) or row by row through the registry serializers (the
schemas without a column plan)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pyspark.sql import Row
from pyspark.sql.types import ArrayType, DataType, MapType, StructType

from kontrakt.errors import KeySerializationError, ValueSerializationError
from kontrakt.registry import SchemaRegistryClient
from kontrakt.serde import MessageField, SerializationContext
from kontrakt.spark._avro_encode import AvroColumnEncoder, avro_column_encoder
from kontrakt.spark._fieldplan import FieldPlan, named_types
from kontrakt.spark._json_encode import JsonColumnEncoder, json_column_encoder
from kontrakt.spark._proto_encode import ProtoColumnEncoder, proto_column_encoder
from kontrakt.spark._types import avro_writer

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger("kontrakt.spark")

__all__ = ["ColumnEncode", "Encode", "Headers", "column_encoder", "python_values",
           "raw_values", "row_encoder"]

Encode = Callable[[Any, SerializationContext], "bytes | None"]


def row_encoder(plan: FieldPlan, client: SchemaRegistryClient | None,
                conf: dict[str, bool], subject: str) -> Encode:
    """One value's encoder: ``encode(Spark row value, ctx) -> bytes`` (the registry
    serializer of ``subject``'s latest schema for avro, json and protobuf)."""
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


Headers = list[tuple[str, "bytes | None"]]
ColumnEncode = Callable[["pa.Array", "list[str] | None", "list[Headers] | None", int],
                        "list[bytes | None]"]


def raw_values(column: pa.Array) -> list[bytes | None]:
    """A binary or string column's values as bytes (strings as UTF-8), in one pass."""
    import pyarrow as pa

    kind = column.type
    if pa.types.is_string(kind):
        column = column.cast(pa.binary())  # the same buffers: UTF-8 is the encoding
    elif pa.types.is_large_string(kind):
        column = column.cast(pa.large_binary())
    values: list[bytes | None] = column.to_pylist()
    return values


def python_values(data_type: DataType) -> Callable[[Any], Any] | None:
    """The converter from an Arrow column's Python values (``to_pylist``: dicts for
    structs, (key, value) pairs for maps) to the values a Spark row holds (``Row``,
    dicts), which the registry formats' converters take; None where they are the same."""
    if isinstance(data_type, StructType):
        names = data_type.fieldNames()
        parts = [python_values(f.dataType) for f in data_type.fields]
        make_row = Row(*names)

        def struct(value: Any) -> Any:
            if value is None:
                return None
            return make_row(*[value[n] if p is None else p(value[n])
                              for n, p in zip(names, parts, strict=True)])
        return struct
    if isinstance(data_type, ArrayType):
        item = python_values(data_type.elementType)
        if item is None:
            return None
        return lambda value: None if value is None else [item(x) for x in value]
    if isinstance(data_type, MapType):
        inner = python_values(data_type.valueType)
        if inner is None:
            return lambda value: None if value is None else dict(value)
        return lambda value: None if value is None else {k: inner(v) for k, v in value}
    return None


def column_encoder(name: str, plan: FieldPlan, client: SchemaRegistryClient | None,
                   conf: dict[str, bool], subject: str, topic: str,
                   data_type: DataType) -> tuple[ColumnEncode, bool]:
    """The encoder of the ``key`` or ``value`` column of an Arrow batch, and whether it
    encodes row by row: binary and string columns are taken as they are (one pass over the
    buffers); avro, json and protobuf are encoded column-wise where the schema has a column
    plan, the rest row by row with the registry serializer. A batch the column path
    refuses is encoded again row by row, whose error names the row and topic.

    Args:
        name: ``key`` or ``value``.
        subject: the subject the records are written under.
        topic: the ``topic`` option's topic (rows without a topic column).
        data_type: the column's Spark type.

    Raises:
        SchemaRegistryError: the registry failed.
    """
    if plan.fmt in ("binary", "string"):
        return (lambda column, topics, headers, first: raw_values(column)), False
    encode = row_encoder(plan, client, conf, subject)
    field = MessageField.KEY if name == "key" else MessageField.VALUE
    to_row = python_values(data_type)

    def registry(column: pa.Array, topics: list[str] | None,
                 headers: list[Headers] | None, first: int) -> list[bytes | None]:
        out: list[bytes | None] = []
        for i, data in enumerate(column.to_pylist()):
            if data is None:
                out.append(None)
                continue
            out.append(_encode(encode, data if to_row is None else to_row(data),
                               topic if topics is None else topics[i], field,
                               [] if headers is None else headers[i], first + i))
        return out
    columns: AvroColumnEncoder | JsonColumnEncoder | ProtoColumnEncoder | None = None
    if plan.fmt == "avro" and client is not None:
        columns = avro_column_encoder(plan, client, subject, data_type, name)
    elif plan.fmt == "json" and client is not None:
        columns = json_column_encoder(plan, client, subject, name, conf.get("validate", True))
    elif plan.fmt == "protobuf" and client is not None:
        columns = proto_column_encoder(plan, client, subject, name)
    if columns is None:
        return registry, True

    def columnar(column: pa.Array, topics: list[str] | None,
                 headers: list[Headers] | None, first: int) -> list[bytes | None]:
        try:
            return columns.encode(column)
        except Exception as exc:
            # The row path names the row and topic (or writes what the column path
            # refused wrongly): the batch is encoded again row by row.
            log.debug("%s: column-wise %s encoding failed (%s); encoding row by row",
                      name, plan.fmt, exc)
            return registry(column, topics, headers, first)
    return columnar, False


def _encode(encode: Encode, data: Any, topic: str, field: MessageField,
            headers: Headers, row: int) -> bytes | None:
    try:
        return encode(data, SerializationContext(topic, field, headers))
    except Exception as exc:
        error = KeySerializationError if field is MessageField.KEY else ValueSerializationError
        raise error(f"row {row} of this task: the {field.value} could not be encoded for "
                    f"{topic}: {exc}") from exc
