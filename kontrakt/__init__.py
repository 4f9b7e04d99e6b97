"""Kontrakt: typed, schema-contracted Kafka for Python.

The names here are the ones most programs need; the rooms hold the rest:
:mod:`kontrakt.protocol` (wire protocol, no I/O), :mod:`kontrakt.clients` (asyncio core and
blocking forms), :mod:`kontrakt.registry` (Schema Registry client, server and compatibility
engine), :mod:`kontrakt.serde` (serializers) and :mod:`kontrakt.testing` (real test brokers).
"""

from __future__ import annotations

import typing as _typing

from kontrakt._types import (
    ConsumerRecord,
    OffsetAndMetadata,
    RecordMetadata,
    TimestampType,
    TopicPartition,
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

# The clients are imported on first use (``kontrakt.Producer``): ``import kontrakt`` stays
# cheap for what needs only the types, errors or a room (the CLI, the registry server,
# serdes alone). Type checkers see them as plain imports.
_CLIENTS = frozenset({
    "AdminClient", "AsyncAdminClient", "AsyncConsumer", "AsyncDeserializingConsumer",
    "AsyncKafkaClient", "AsyncProducer", "AsyncSerializingProducer", "Consumer",
    "DeserializingConsumer", "KafkaClient", "Producer", "SerializingProducer",
    "AcknowledgeType", "AsyncShareConsumer", "ShareConsumer",
    "AsyncDeserializingShareConsumer", "DeserializingShareConsumer",
})

if _typing.TYPE_CHECKING:
    from kontrakt.clients import (
        AcknowledgeType,
        AdminClient,
        AsyncAdminClient,
        AsyncConsumer,
        AsyncDeserializingConsumer,
        AsyncDeserializingShareConsumer,
        AsyncKafkaClient,
        AsyncProducer,
        AsyncSerializingProducer,
        AsyncShareConsumer,
        Consumer,
        DeserializingConsumer,
        DeserializingShareConsumer,
        KafkaClient,
        Producer,
        SerializingProducer,
        ShareConsumer,
    )


if not _typing.TYPE_CHECKING:  # hidden from type checkers: a misspelled name stays an error
    def __getattr__(name: str) -> _typing.Any:
        if name in _CLIENTS:
            from kontrakt import clients

            value = getattr(clients, name)
            globals()[name] = value
            return value
        raise AttributeError(f"module 'kontrakt' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _CLIENTS)

__all__ = [
    "AcknowledgeType",
    "AdminClient",
    "AsyncAdminClient",
    "AsyncConsumer",
    "AsyncDeserializingConsumer",
    "AsyncDeserializingShareConsumer",
    "AsyncKafkaClient",
    "AsyncProducer",
    "AsyncSerializingProducer",
    "AsyncShareConsumer",
    "ConfigError",
    "Consumer",
    "ConsumerRecord",
    "DeserializingConsumer",
    "DeserializingShareConsumer",
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
    "ShareConsumer",
    "TimestampType",
    "TopicPartition",
    "__version__",
]
