"""The sans-I/O cores shared by every registry-bound serializer, and their two thin shells.

A format (Avro, JSON Schema, Protobuf) subclasses :class:`SerializerCore` and
:class:`DeserializerCore` with its parsing and encoding; the shells :class:`SyncSerializer`,
:class:`AsyncSerializer`, :class:`SyncDeserializer` and :class:`AsyncDeserializer` only look up
the per-subject (or per-schema-id) cache and, on a miss, drive the core's registry steps with
:func:`~kontrakt.serde._registry_io.run_sync` or :func:`~kontrakt.serde._registry_io.run_async`.
So the sync and async forms are one implementation.

This module is the one place the formats import these pieces from; they live in rooms of
their own:

- :mod:`kontrakt.serde._core_common`: what both cores share (their configuration, the
  :data:`MISS` marker, the ``to_dict`` / ``from_dict`` types);
- :mod:`kontrakt.serde._serializer_core`: :class:`SerializerCore` and its per-subject
  :class:`Resolved`;
- :mod:`kontrakt.serde._deserializer_core`: :class:`DeserializerCore`;
- :mod:`kontrakt.serde._references`: the registry's schema values and
  :class:`ReferenceParsing`;
- :mod:`kontrakt.serde._text_schema`: the cores of the text-schema formats (Avro, JSON);
- :mod:`kontrakt.serde._shells`: the sync and async shells.
"""

from __future__ import annotations

from kontrakt.serde._conf import parse_conf
from kontrakt.serde._core_common import MISS, FromDict, ToDict
from kontrakt.serde._deserializer_core import DeserializerCore
from kontrakt.serde._references import ReferenceParsing, make_reference, make_schema
from kontrakt.serde._serializer_core import Resolved, SerializerCore
from kontrakt.serde._shells import (
    AsyncDeserializer,
    AsyncSerializer,
    SyncDeserializer,
    SyncSerializer,
)
from kontrakt.serde._text_schema import (
    TextSchemaDeserializerCore,
    TextSchemaHooks,
    TextSchemaSerializerCore,
)

__all__ = [
    "MISS",
    "AsyncDeserializer",
    "AsyncSerializer",
    "DeserializerCore",
    "FromDict",
    "ReferenceParsing",
    "Resolved",
    "SerializerCore",
    "SyncDeserializer",
    "SyncSerializer",
    "TextSchemaDeserializerCore",
    "TextSchemaHooks",
    "TextSchemaSerializerCore",
    "ToDict",
    "make_reference",
    "make_schema",
    "parse_conf",
]
