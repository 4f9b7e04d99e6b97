"""Producers and consumers that (de)serialize keys and values: confluent-kafka's
``SerializingProducer`` / ``DeserializingConsumer`` shape over Kontrakt's clients.

Serializers are called as ``serializer(obj, ctx) -> bytes | None`` and deserializers as
``deserializer(data, ctx) -> obj`` (see :mod:`kontrakt.serde`); in the ``Async`` classes they
may also return awaitables (``AsyncAvroSerializer`` and friends). Give them in the config as
``"key.serializer"`` / ``"value.serializer"`` (``"key.deserializer"`` / ``"value.deserializer"``)
or as keywords; without one, keys or values must already be bytes.

Failures are typed and lose nothing:

- a key or value that cannot be serialized raises :class:`~kontrakt.errors.KeySerializationError`
  / :class:`~kontrakt.errors.ValueSerializationError` before anything is queued;
- a record that cannot be deserialized raises :class:`~kontrakt.errors.KeyDeserializationError`
  / :class:`~kontrakt.errors.ValueDeserializationError` whose ``.record`` is the raw
  :class:`~kontrakt.ConsumerRecord`. The consumer's position is then just past that record
  (as with confluent-kafka), so the caller can dead-letter it and carry on; no other record
  is skipped. Batch reads (``consume`` / ``getmany``) return the records before a bad one and
  rewind to it, so the bad record's error comes at the next call with everything after it
  still to be read.

The share consumers' forms (:class:`DeserializingShareConsumer`,
:class:`AsyncDeserializingShareConsumer`) follow the same rule for their ``poll()`` lists; see
:mod:`._share` for what becomes of the bad record's acknowledgement.

The producers live in :mod:`._producers`, the consumers in :mod:`._consumers` and
:mod:`._share`, and what they
share (type variables, the (de)serializer types, taking them out of the config) in
:mod:`._common`.
"""

from __future__ import annotations

from kontrakt.clients.serializing._consumers import (
    AsyncDeserializingConsumer,
    DeserializingConsumer,
)
from kontrakt.clients.serializing._producers import AsyncSerializingProducer, SerializingProducer
from kontrakt.clients.serializing._share import (
    AsyncDeserializingShareConsumer,
    DeserializingShareConsumer,
)

__all__ = [
    "AsyncDeserializingConsumer",
    "AsyncDeserializingShareConsumer",
    "AsyncSerializingProducer",
    "DeserializingConsumer",
    "DeserializingShareConsumer",
    "SerializingProducer",
]
