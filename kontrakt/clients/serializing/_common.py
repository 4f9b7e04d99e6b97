"""What the serializing producers and the deserializing consumers share: their key and
value type variables, the (de)serializer callable types, taking the (de)serializers out of
a client's config.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kontrakt._types import DefaultTypeVar
from kontrakt.errors import ConfigError
from kontrakt.serde._context import SerializationContext

__all__ = [
    "CONSUMER_KEYS",
    "PRODUCER_KEYS",
    "AsyncDeserializerFn",
    "AsyncSerializerFn",
    "DeserializerFn",
    "K",
    "SerializerFn",
    "V",
    "split_serdes",
]

#: The key and value types of a client, solved from its (de)serializers; Any when they come
#: in the config mapping.
K = DefaultTypeVar("K", default=Any)
V = DefaultTypeVar("V", default=Any)

#: ``(obj, ctx) -> bytes | None``: what the producers call (AvroSerializer[T], ...).
SerializerFn = Callable[[K, SerializationContext], "bytes | None"]
#: The same, or returning an awaitable of it (AsyncAvroSerializer[T], ...).
AsyncSerializerFn = Callable[[K, SerializationContext], "bytes | Awaitable[bytes | None] | None"]
#: ``(data, ctx) -> obj``: what the consumers call (AvroDeserializer[T], ...).
DeserializerFn = Callable[["bytes | None", SerializationContext], V]
#: The same returning an awaitable (AsyncAvroDeserializer[T], ...).
AsyncDeserializerFn = Callable[["bytes | None", SerializationContext], Awaitable[V]]

PRODUCER_KEYS = ("key.serializer", "value.serializer")
CONSUMER_KEYS = ("key.deserializer", "value.deserializer")


def split_serdes(config: Mapping[str, Any] | None, kwargs: dict[str, Any],
           names: tuple[str, str]) -> tuple[dict[str, Any], Any, Any]:
    """Take the (de)serializers out of the config; the rest goes to the client."""
    rest = dict(config or {})
    found: list[Any] = []
    for name in names:
        attr = name.replace(".", "_")
        a, b = rest.pop(name, None), kwargs.pop(attr, None)
        if a is not None and b is not None and a is not b:
            raise ConfigError(f"{name} given twice")
        value = a if a is not None else b
        if value is not None and not callable(value):
            raise ConfigError(f"{name} must be callable as (obj, ctx), got {value!r}")
        found.append(value)
    return rest, found[0], found[1]

