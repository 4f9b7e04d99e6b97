"""Serializers: Confluent-compatible framing, subject strategies, primitives, Avro, JSON Schema
and Protobuf (each in a sync and an ``Async`` form), and dataclasses as typed models.

The format modules import their codec lazily, so ``kontrakt.serde`` works without fastavro,
jsonschema or protobuf installed; ``from kontrakt.serde import AvroSerializer`` needs the
``avro`` extra, and so on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kontrakt.serde._context import (
    Deserializer,
    MessageField,
    SerializationContext,
    Serializer,
)
from kontrakt.serde._framing import (
    KEY_SCHEMA_ID_HEADER,
    VALUE_SCHEMA_ID_HEADER,
    SchemaId,
    decode_message_indexes,
    dual_schema_id_deserializer,
    encode_message_indexes,
    header_schema_id_serializer,
    prefix_schema_id_deserializer,
    prefix_schema_id_serializer,
)
from kontrakt.serde._primitives import (
    BytesDeserializer,
    BytesSerializer,
    DoubleDeserializer,
    DoubleSerializer,
    FloatDeserializer,
    FloatSerializer,
    IntegerDeserializer,
    IntegerSerializer,
    LongDeserializer,
    LongSerializer,
    ShortDeserializer,
    ShortSerializer,
    StringDeserializer,
    StringSerializer,
    UUIDDeserializer,
    UUIDSerializer,
)
from kontrakt.serde._strategies import (
    ReferenceSubjectNameStrategy,
    SubjectNameStrategy,
    record_subject_name_strategy,
    reference_subject_name_strategy,
    topic_record_subject_name_strategy,
    topic_subject_name_strategy,
)

if TYPE_CHECKING:
    # The lazily loaded names (see __getattr__), for type checkers only: importing them here
    # at run time would load fastavro, protobuf and jsonschema with kontrakt.serde.
    # tests/typing/test_lazy_exports.py keeps this list and _LAZY the same.
    from kontrakt.serde._dataclasses import avro_schema_of, json_schema_of
    from kontrakt.serde.avro import (
        AsyncAvroDeserializer,
        AsyncAvroSerializer,
        AvroDeserializer,
        AvroSerializer,
    )
    from kontrakt.serde.json_schema import (
        AsyncJSONDeserializer,
        AsyncJSONSerializer,
        JSONDeserializer,
        JSONSerializer,
    )
    from kontrakt.serde.protobuf import (
        AsyncProtobufDeserializer,
        AsyncProtobufSerializer,
        ProtobufDeserializer,
        ProtobufSerializer,
    )

_LAZY = {
    "AvroSerializer": "avro", "AvroDeserializer": "avro",
    "AsyncAvroSerializer": "avro", "AsyncAvroDeserializer": "avro",
    "JSONSerializer": "json_schema", "JSONDeserializer": "json_schema",
    "AsyncJSONSerializer": "json_schema", "AsyncJSONDeserializer": "json_schema",
    "ProtobufSerializer": "protobuf", "ProtobufDeserializer": "protobuf",
    "AsyncProtobufSerializer": "protobuf", "AsyncProtobufDeserializer": "protobuf",
    "avro_schema_of": "_dataclasses", "json_schema_of": "_dataclasses",
}

__all__ = [
    "KEY_SCHEMA_ID_HEADER",
    "VALUE_SCHEMA_ID_HEADER",
    "AsyncAvroDeserializer",
    "AsyncAvroSerializer",
    "AsyncJSONDeserializer",
    "AsyncJSONSerializer",
    "AsyncProtobufDeserializer",
    "AsyncProtobufSerializer",
    "AvroDeserializer",
    "AvroSerializer",
    "BytesDeserializer",
    "BytesSerializer",
    "Deserializer",
    "DoubleDeserializer",
    "DoubleSerializer",
    "FloatDeserializer",
    "FloatSerializer",
    "IntegerDeserializer",
    "IntegerSerializer",
    "JSONDeserializer",
    "JSONSerializer",
    "LongDeserializer",
    "LongSerializer",
    "MessageField",
    "ProtobufDeserializer",
    "ProtobufSerializer",
    "ReferenceSubjectNameStrategy",
    "SchemaId",
    "SerializationContext",
    "Serializer",
    "ShortDeserializer",
    "ShortSerializer",
    "StringDeserializer",
    "StringSerializer",
    "SubjectNameStrategy",
    "UUIDDeserializer",
    "UUIDSerializer",
    "avro_schema_of",
    "decode_message_indexes",
    "dual_schema_id_deserializer",
    "encode_message_indexes",
    "header_schema_id_serializer",
    "json_schema_of",
    "prefix_schema_id_deserializer",
    "prefix_schema_id_serializer",
    "record_subject_name_strategy",
    "reference_subject_name_strategy",
    "topic_record_subject_name_strategy",
    "topic_subject_name_strategy",
]


if not TYPE_CHECKING:
    # Hidden from type checkers, which see the names imported above instead: a module
    # __getattr__ would make every misspelled import from kontrakt.serde type-check as Any.
    def __getattr__(name: str) -> Any:
        # Format classes load their codec (fastavro, protobuf, jsonschema) on first use only.
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module 'kontrakt.serde' has no attribute {name!r}")
        import importlib

        try:
            loaded = importlib.import_module(f"kontrakt.serde.{module}")
        except ModuleNotFoundError as exc:
            from kontrakt._extras import raise_missing_extra

            raise_missing_extra(exc, f"kontrakt.serde.{name}")
        value = getattr(loaded, name)
        globals()[name] = value
        return value
