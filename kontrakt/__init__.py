"""Kontrakt: typed, schema-contracted Kafka for Python.

The names here are the ones most programs need; the rooms hold the rest:
:mod:`kontrakt.protocol` (wire protocol, no I/O), :mod:`kontrakt.clients` (asyncio core and
blocking forms), :mod:`kontrakt.registry` (Schema Registry client, server and compatibility
engine), :mod:`kontrakt.serde` (serializers) and :mod:`kontrakt.testing` (real test brokers).
"""

from __future__ import annotations

from kontrakt._types import (
    ConsumerRecord,
    OffsetAndMetadata,
    RecordMetadata,
    TimestampType,
    TopicPartition,
)
from kontrakt.clients import (
    AdminClient,
    AsyncAdminClient,
    AsyncConsumer,
    AsyncDeserializingConsumer,
    AsyncKafkaClient,
    AsyncProducer,
    AsyncSerializingProducer,
    Consumer,
    DeserializingConsumer,
    KafkaClient,
    Producer,
    SerializingProducer,
)
from kontrakt.errors import (
    ConfigError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    KontraktError,
    SchemaRegistryError,
    SerializationError,
)

__version__ = "0.1.0"

__all__ = [
    "AdminClient",
    "AsyncAdminClient",
    "AsyncConsumer",
    "AsyncDeserializingConsumer",
    "AsyncKafkaClient",
    "AsyncProducer",
    "AsyncSerializingProducer",
    "ConfigError",
    "Consumer",
    "ConsumerRecord",
    "DeserializingConsumer",
    "IllegalStateError",
    "KafkaClient",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "KontraktError",
    "OffsetAndMetadata",
    "Producer",
    "RecordMetadata",
    "SchemaRegistryError",
    "SerializationError",
    "SerializingProducer",
    "TimestampType",
    "TopicPartition",
    "__version__",
]
