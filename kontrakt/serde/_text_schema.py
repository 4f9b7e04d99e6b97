"""The cores of the formats whose schema is text (Avro, JSON Schema): a schema given as text,
a registry ``Schema`` or a dataclass, and an optional ``to_dict`` / ``from_dict``.

:class:`TextSchemaHooks` turns a constructor's ``schema_str`` into a registry ``Schema``
(and a dataclass's converter); :class:`TextSchemaSerializerCore` and
:class:`TextSchemaDeserializerCore` join it with the format-independent cores and
:class:`~kontrakt.serde._references.ReferenceParsing`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from kontrakt.errors import ConfigError
from kontrakt.serde._context import SerializationContext
from kontrakt.serde._core_common import FromDict, ToDict
from kontrakt.serde._deserializer_core import DeserializerCore
from kontrakt.serde._framing import SchemaId
from kontrakt.serde._references import ReferenceParsing, make_schema
from kontrakt.serde._registry_io import Steps
from kontrakt.serde._serializer_core import SerializerCore

__all__ = ["TextSchemaDeserializerCore", "TextSchemaHooks", "TextSchemaSerializerCore"]


class TextSchemaHooks:
    """The format hooks of the text-schema cores (Avro, JSON Schema)."""

    #: the registry's schema type (``"AVRO"``, ``"JSON"``).
    schema_type = ""
    #: how a dataclass given as ``schema_str`` maps to a schema and dicts (``"avro"``,
    #: ``"json"``).
    dataclass_format = ""

    @staticmethod
    def schema_text(text: str) -> str:
        """Check (and normalize) schema text given to a constructor.

        Raises:
            ConfigError: the text is not a schema of this format.
        """
        return text

    def prepare(self, schema_str: Any) -> Any:
        """The registry ``Schema`` for a constructor's ``schema_str``: text, a ``Schema`` (kept
        as is, for references), a dataclass (its generated schema), or None.

        Raises:
            ConfigError: anything else, or text :meth:`schema_text` refuses.
        """
        if schema_str is None:
            return None
        if isinstance(schema_str, str):
            return make_schema(self.schema_text(schema_str), self.schema_type)
        if isinstance(schema_str, type):
            from kontrakt.serde._dataclasses import schema_of

            return make_schema(json.dumps(schema_of(schema_str, self.dataclass_format)),
                               self.schema_type)
        if hasattr(schema_str, "schema_str"):
            return schema_str
        raise ConfigError(f"schema_str must be a str, a Schema or a dataclass, not "
                          f"{type(schema_str).__name__}")

    def schema_and_converter(self, schema_str: Any, converter: Any, name: str,
                             converter_for: Callable[[type, str], Any],
                             owner: str) -> tuple[Any, Any]:
        """The prepared schema, and ``converter`` (``to_dict`` / ``from_dict``) or, for a
        dataclass ``schema_str`` without one, the dataclass's own (``converter_for``).

        Raises:
            ConfigError: ``converter`` is not callable, or :meth:`prepare` refuses.
        """
        if converter is not None and not callable(converter):
            raise ConfigError(f"{owner}: {name} must be callable")
        schema = self.prepare(schema_str)
        if converter is None and isinstance(schema_str, type):
            converter = converter_for(schema_str, self.dataclass_format)
        return schema, converter


class TextSchemaSerializerCore(SerializerCore, ReferenceParsing, TextSchemaHooks):
    """A serializer core whose schema is given as text, a ``Schema`` or a dataclass (Avro,
    JSON Schema), converted by an optional ``to_dict``.

    Raises:
        ConfigError: ``to_dict`` not callable, or no schema without ``use.latest.version`` /
            ``use.latest.with.metadata``.
    """

    def __init__(self, schema_str: Any, to_dict: ToDict | None,
                 conf: Mapping[str, Any] | None, owner: str) -> None:
        SerializerCore.__init__(self, conf, owner)
        ReferenceParsing.__init__(self)
        from kontrakt.serde._dataclasses import to_dict_for

        self.schema, self.to_dict = self.schema_and_converter(
            schema_str, to_dict, "to_dict", to_dict_for, owner)
        if self.schema is None and not (self.use_latest or self.latest_metadata is not None):
            raise ConfigError(f"{owner}: schema_str is required unless use.latest.version "
                              "or use.latest.with.metadata is set")
        self._local: Any = None

    def local_schema(self, ctx: SerializationContext | None) -> Steps:
        self._local = yield from self.parse_schema(self.schema)
        return self.schema

    def local_parsed(self) -> Any:
        return self._local

    def parse(self, schema: Any) -> Steps:
        return (yield from self.parse_schema(schema))

    def convert(self, obj: Any, ctx: SerializationContext | None) -> Any:
        return obj if self.to_dict is None else self.to_dict(obj, ctx)

    def encode(self, obj: Any, ctx: SerializationContext | None, parsed: Any) -> bytes:
        return self.encode_value(self.convert(obj, ctx), ctx, parsed)


class TextSchemaDeserializerCore(DeserializerCore, ReferenceParsing, TextSchemaHooks):
    """The deserializer side of :class:`TextSchemaSerializerCore`: an optional reader schema
    and ``from_dict``.

    Raises:
        ConfigError: ``from_dict`` not callable.
    """

    def __init__(self, schema_str: Any, from_dict: FromDict | None,
                 conf: Mapping[str, Any] | None, owner: str) -> None:
        DeserializerCore.__init__(self, conf, owner)
        ReferenceParsing.__init__(self)
        from kontrakt.serde._dataclasses import from_dict_for

        self.schema, self.from_dict = self.schema_and_converter(
            schema_str, from_dict, "from_dict", from_dict_for, owner)

    def parse(self, schema: Any, sid: SchemaId | None) -> Steps:
        return (yield from self.parse_schema(schema))
