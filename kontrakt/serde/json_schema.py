"""JSON Schema serializer and deserializer with Confluent Schema Registry framing.

The payload is compact JSON (``separators=(",", ":")``, non-ASCII kept as UTF-8), byte for byte
what confluent-kafka-python writes. Validation uses a compiled validator for the common
keywords (:mod:`kontrakt.serde._jsonvalidate`) and falls back to ``jsonschema`` for schemas it
does not cover; ``$ref`` to schemas registered under other subjects resolves through the
registry's schema references.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kontrakt._types import DefaultTypeVar
from kontrakt.errors import ConfigError, SerializationError
from kontrakt.serde._base import (
    AsyncDeserializer,
    AsyncSerializer,
    DeserializerCore,
    FromDict,
    SyncDeserializer,
    SyncSerializer,
    TextSchemaDeserializerCore,
    TextSchemaHooks,
    TextSchemaSerializerCore,
    ToDict,
)
from kontrakt.serde._context import SerializationContext
from kontrakt.serde._framing import SchemaId
from kontrakt.serde._jsonvalidate import Check, compile_validator
from kontrakt.serde._registry_io import Steps
from kontrakt.serde.rules import RuleRegistry

if TYPE_CHECKING:
    from kontrakt.registry._models import Schema

__all__ = [
    "AsyncJSONDeserializer",
    "AsyncJSONSerializer",
    "JSONDeserializer",
    "JSONSerializer",
]

#: What the serializers accept: a dataclass given as schema_str, the first argument of
#: to_dict, or anything.
_In = DefaultTypeVar("_In", contravariant=True, default=Any)
#: What the deserializers return: a dataclass given as schema_str, what from_dict returns,
#: or (the common object schema) a dict; annotate e.g. ``JSONDeserializer[list[Any]]`` for a
#: schema whose top level is not an object.
_Out = DefaultTypeVar("_Out", covariant=True, default=dict[str, Any])
#: Converters, typed by the object they take or make.
_ToDictOf = Callable[[_In, SerializationContext | None], Any]
_FromDictOf = Callable[[Any, SerializationContext | None], _Out]


_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
#: how much of a validation message a deserialization error keeps: validators quote the
#: offending value, which an untrusted payload can make megabytes long
_MAX_DETAIL = 500


def _clip(detail: str) -> str:
    if len(detail) <= _MAX_DETAIL:
        return detail
    return f"{detail[:_MAX_DETAIL]}... ({len(detail) - _MAX_DETAIL} more characters)"


def _general_validator(doc: Any, documents: Mapping[str, Any]) -> Check:
    """jsonschema's validator, for schemas the compiled validator does not cover."""
    try:
        from jsonschema import exceptions
        from jsonschema.validators import validator_for
        from referencing import Registry, Resource
        from referencing.jsonschema import DRAFT7
    except ModuleNotFoundError as exc:
        from kontrakt._extras import raise_missing_extra

        raise_missing_extra(exc, "validating with this JSON Schema")

    registry: Any = Registry().with_resources(
        (name, Resource.from_contents(d, default_specification=DRAFT7))
        for name, d in documents.items())
    validator = validator_for(doc)(doc, registry=registry)

    def check(value: Any) -> str | None:
        error = exceptions.best_match(validator.iter_errors(value))
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path)
        return f"{where}: {error.message}" if where else str(error.message)
    return check


class _JsonFormat(TextSchemaHooks):
    """JSON Schema's hooks for the shared text-schema cores."""

    schema_type = "JSON"
    dataclass_format = "json"

    @staticmethod
    def build(schema_str: str, deps: list[tuple[str, str]]) -> Any:
        # Referenced schemas are documents that ``$ref`` names, keyed by reference name.
        documents = {name: json.loads(text) for name, text in deps}
        doc = json.loads(schema_str)
        return doc, compile_validator(doc, documents) or _general_validator(doc, documents)


def _title(schema: Any) -> str | None:
    """The schema's ``title``: the record name for the record subject strategies."""
    title = json.loads(schema.schema_str).get("title") if schema else None
    return title if isinstance(title, str) else None


class _JsonSerializerCore(_JsonFormat, TextSchemaSerializerCore):
    extra_defaults = {"validate": True}

    def __init__(self, schema_str: Any, to_dict: ToDict | None,
                 conf: Mapping[str, Any] | None, owner: str) -> None:
        TextSchemaSerializerCore.__init__(self, schema_str, to_dict, conf, owner)
        self.validate: bool = self.conf["validate"]
        self.record_name = _title(self.schema)

    def encode_value(self, value: Any, ctx: SerializationContext | None, parsed: Any) -> bytes:
        if self.validate:
            error = parsed[1](value)
            if error is not None:
                raise SerializationError(f"value does not match the JSON schema: {error}")
        return _dumps(value).encode()


class _JsonDeserializerCore(_JsonFormat, TextSchemaDeserializerCore):
    extra_defaults = {"validate": True}

    def __init__(self, schema_str: Any, from_dict: FromDict | None, registry: Any,
                 conf: Mapping[str, Any] | None, owner: str) -> None:
        TextSchemaDeserializerCore.__init__(self, schema_str, from_dict, conf, owner)
        if self.schema is None and registry is None:
            raise ConfigError(f"{owner}: needs schema_str or a schema_registry_client")
        self.validate: bool = self.conf["validate"]
        self.has_registry = registry is not None
        self.record_name = _title(self.schema)

    def load(self, key: Any, sid: SchemaId, ctx: SerializationContext | None,
             data: bytes) -> Steps:
        local = None
        if self.schema is not None:
            local = yield from self.parse_schema(self.schema)
        if not self.has_registry:
            # JSON is self-describing: without a registry, read with the local schema.
            read = self._reader_for(local)
            self.readers[key] = read
            return read
        self._local_reader = local
        return (yield from DeserializerCore.load(self, key, sid, ctx, data))

    _local_reader: Any = None

    def make_reader(self, writer: Any, reader: Any, sid: SchemaId, convert: bool = True) -> Any:
        if reader is None:
            reader = self._local_reader if self._local_reader is not None else writer
        return self._reader_for(reader, convert)

    def _reader_for(self, parsed: Any, convert: bool = True) -> Any:
        check = parsed[1] if (self.validate and parsed is not None) else None
        from_dict = self.from_dict if convert else None
        loads = json.loads

        def read(data: bytes, offset: int, ctx: SerializationContext | None) -> Any:
            value = loads(data[offset:] if offset else data)
            if check is not None:
                error = check(value)
                if error is not None:
                    raise SerializationError(
                        f"value does not match the JSON schema: {_clip(error)}")
            return value if from_dict is None else from_dict(value, ctx)
        return read


class JSONSerializer(SyncSerializer[_In]):
    """Serializes values to JSON with the Confluent framing (sync registry client).

    Args:
        schema_str: the JSON Schema as text, a registry ``Schema`` (for references) or a
            dataclass (schema generated, instances accepted as values).
        schema_registry_client: a ``SchemaRegistryClient`` (or the mock).
        to_dict: ``(obj, ctx) -> dict`` converting application objects first.
        conf: ``auto.register.schemas``, ``normalize.schemas``, ``use.latest.version``,
            ``use.latest.with.metadata``, ``subject.name.strategy``, ``schema.id.serializer``,
            ``validate`` (True).
        rule_conf: config handed to the rule executors and actions (``configure``), e.g.
            ``dlq.topic`` for the DLQ action.
        rule_registry: the ``kontrakt.serde.rules.RuleRegistry`` whose executors run the
            schema's data-contract rules (default: the process-wide one). A rule with no
            executor refuses the record (``.rule`` on the error names it).

    Raises:
        ConfigError: unknown config key, wrong type, or conflicting options.
    """

    def __init__(self, schema_str: str | Schema | type[_In] | None,
                 schema_registry_client: Any,
                 to_dict: _ToDictOf[_In] | None = None, conf: Mapping[str, Any] | None = None,
                 rule_conf: Mapping[str, Any] | None = None,
                 rule_registry: RuleRegistry | None = None) -> None:
        self._registry = schema_registry_client
        self._core = _JsonSerializerCore(schema_str, to_dict, conf, type(self).__name__)
        self._core.use_rules(rule_registry, rule_conf, schema_registry_client)


class AsyncJSONSerializer(AsyncSerializer[_In]):
    """:class:`JSONSerializer` for an ``AsyncSchemaRegistryClient``; call it with ``await``."""

    def __init__(self, schema_str: str | Schema | type[_In] | None,
                 schema_registry_client: Any,
                 to_dict: _ToDictOf[_In] | None = None, conf: Mapping[str, Any] | None = None,
                 rule_conf: Mapping[str, Any] | None = None,
                 rule_registry: RuleRegistry | None = None) -> None:
        self._registry = schema_registry_client
        self._core = _JsonSerializerCore(schema_str, to_dict, conf, type(self).__name__)
        self._core.use_rules(rule_registry, rule_conf, schema_registry_client)


class JSONDeserializer(SyncDeserializer[_Out]):
    """Deserializes Confluent-framed JSON, validating it (sync registry client).

    Args:
        schema_str: the reader schema (text, ``Schema`` or dataclass); may be ``None`` when a
            registry client is given (the writer schema is then used).
        from_dict: ``(dict, ctx) -> obj`` converting the decoded value.
        schema_registry_client: optional; needed for the writer schema, references and
            ``use.latest.version``.
        conf: ``use.latest.version``, ``use.latest.with.metadata``, ``subject.name.strategy``,
            ``schema.id.deserializer`` (dual), ``validate`` (True).
        rule_conf: config handed to the rule executors and actions (``configure``), e.g.
            ``dlq.topic`` for the DLQ action.
        rule_registry: the ``kontrakt.serde.rules.RuleRegistry`` whose executors run the
            schema's data-contract rules (default: the process-wide one). A rule with no
            executor refuses the record (``.rule`` on the error names it).

    Raises:
        ConfigError: unknown config key, wrong type, or neither schema nor registry.
    """

    def __init__(self, schema_str: str | Schema | type[_Out] | None = None,
                 from_dict: _FromDictOf[_Out] | None = None,
                 schema_registry_client: Any = None,
                 conf: Mapping[str, Any] | None = None,
                 rule_conf: Mapping[str, Any] | None = None,
                 rule_registry: RuleRegistry | None = None) -> None:
        self._registry = schema_registry_client
        self._core = _JsonDeserializerCore(schema_str, from_dict, schema_registry_client, conf,
                                           type(self).__name__)
        self._core.use_rules(rule_registry, rule_conf, schema_registry_client)


class AsyncJSONDeserializer(AsyncDeserializer[_Out]):
    """:class:`JSONDeserializer` for an ``AsyncSchemaRegistryClient``; call it with ``await``."""

    def __init__(self, schema_str: str | Schema | type[_Out] | None = None,
                 from_dict: _FromDictOf[_Out] | None = None,
                 schema_registry_client: Any = None,
                 conf: Mapping[str, Any] | None = None,
                 rule_conf: Mapping[str, Any] | None = None,
                 rule_registry: RuleRegistry | None = None) -> None:
        self._registry = schema_registry_client
        self._core = _JsonDeserializerCore(schema_str, from_dict, schema_registry_client, conf,
                                           type(self).__name__)
        self._core.use_rules(rule_registry, rule_conf, schema_registry_client)
