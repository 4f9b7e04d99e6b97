"""Avro serializer and deserializer with Confluent Schema Registry framing.

Bytes are identical to confluent-kafka-python's ``AvroSerializer``: magic byte, 4-byte schema
id, then the schemaless Avro encoding (a top-level ``bytes`` schema writes the bytes as they
are, as Confluent's serializers do). Schemas are parsed (by fastavro) once and cached per
subject / schema id, and compiled into a writer (:mod:`kontrakt.serde._avro_write`) and a
reader per writer / reader pair (:mod:`kontrakt.serde._avro_read`); fastavro encodes and
decodes whatever these leave to it, so bytes, values and errors stay fastavro's.
"""

from __future__ import annotations

import io
import json
import math
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kontrakt._extras import raise_missing_extra
from kontrakt._types import DefaultTypeVar

try:
    from fastavro import parse_schema, schemaless_reader, schemaless_writer
except ModuleNotFoundError as exc:
    raise_missing_extra(exc, "the Avro serde (kontrakt.serde.avro)")

from kontrakt.errors import ConfigError, SerializationError
from kontrakt.serde._avro_bounds import LIMIT_DEFAULTS, AvroBounds, check_limits
from kontrakt.serde._avro_codegen import NotCompiled
from kontrakt.serde._avro_read import compile_reader
from kontrakt.serde._avro_write import SlowPath, compile_writer
from kontrakt.serde._base import (
    AsyncDeserializer,
    AsyncSerializer,
    DeserializerCore,
    FromDict,
    SerializerCore,
    SyncDeserializer,
    SyncSerializer,
    TextSchemaDeserializerCore,
    TextSchemaHooks,
    TextSchemaSerializerCore,
    ToDict,
)
from kontrakt.serde._context import SerializationContext
from kontrakt.serde._framing import SchemaId
from kontrakt.serde._registry_io import Steps
from kontrakt.serde.rules import RuleRegistry

if TYPE_CHECKING:
    from kontrakt.registry._models import Schema

__all__ = [
    "AsyncAvroDeserializer",
    "AsyncAvroSerializer",
    "AvroDeserializer",
    "AvroSerializer",
]

#: What the serializers accept: a dataclass given as schema_str, the first argument of
#: to_dict, or anything.
_In = DefaultTypeVar("_In", contravariant=True, default=Any)
#: What the deserializers return: a dataclass given as schema_str, what from_dict returns,
#: or (the common record schema) a dict; annotate e.g. ``AvroDeserializer[str]`` for a
#: schema whose top level is not a record.
_Out = DefaultTypeVar("_Out", covariant=True, default=dict[str, Any])
#: Converters, typed by the object they take or make.
_ToDictOf = Callable[[_In, SerializationContext | None], Any]
_FromDictOf = Callable[[Any, SerializationContext | None], _Out]


def _schema_text(text: str) -> str:
    """Avro schema text as registered; a bare primitive name gets Confluent's wrapping."""
    text = text.strip()
    # A bare primitive name ("string") is wrapped the way Confluent's client does, so both
    # register the same text and get the same id.
    if not text.startswith(("{", "[")):
        if not text.startswith('"'):
            text = json.dumps(text)  # a bare name such as string
        text = '{"type":' + text + "}"
    try:
        json.loads(text)
    except ValueError as e:
        raise ConfigError(f"the Avro schema is not valid JSON: {e}") from e
    return text


def _full_name(schema_text: str) -> str | None:
    doc = json.loads(schema_text)
    if isinstance(doc, dict):
        name = doc.get("name")
        if isinstance(name, str):
            ns = doc.get("namespace")
            return f"{ns}.{name}" if ns and "." not in name else name
        kind = doc.get("type")
        return kind if isinstance(kind, str) else None
    return None


def _is_bytes(parsed: Any) -> bool:
    return parsed == "bytes" or (isinstance(parsed, dict) and parsed.get("type") == "bytes"
                                 and "logicalType" not in parsed)


class _AvroFormat(TextSchemaHooks):
    """Avro's hooks for the shared text-schema cores."""

    schema_type = "AVRO"
    dataclass_format = "avro"
    schema_text = staticmethod(_schema_text)

    @staticmethod
    def build(schema_str: str, deps: list[tuple[str, str]]) -> Any:
        # Referenced schemas only contribute their named types.
        named: dict[str, Any] = {}
        for _, text in deps:
            parse_schema(json.loads(text), named_schemas=named)
        return parse_schema(json.loads(schema_str), named_schemas=named)


class _AvroSerializerCore(_AvroFormat, TextSchemaSerializerCore):
    def __init__(self, schema_str: Any, to_dict: ToDict | None,
                 conf: Mapping[str, Any] | None, owner: str) -> None:
        TextSchemaSerializerCore.__init__(self, schema_str, to_dict, conf, owner)
        self.record_name = _full_name(self.schema.schema_str) if self.schema else None

    def encode_value(self, value: Any, ctx: SerializationContext | None, parsed: Any) -> bytes:
        if _is_bytes(parsed):
            if isinstance(value, str):
                return value.encode()
            if not isinstance(value, (bytes, bytearray, memoryview)):
                raise SerializationError(f"the schema is bytes but got {type(value).__name__}")
            return bytes(value)
        return self._encoder(parsed)(b"", value)

    _encoders: dict[int, Any] | None = None

    def _encoder(self, parsed: Any) -> _Encoder:
        """The compiled writer and fastavro's path for ``parsed``, made once."""
        if self._encoders is None:
            self._encoders = {}
        found = self._encoders.get(id(parsed))
        if found is not None and found[0] is parsed:
            return found[1]  # type: ignore[no-any-return]
        encoder = _Encoder(parsed, self.owner)
        self._encoders[id(parsed)] = (parsed, encoder)
        return encoder

    def make_writer(self, parsed: Any, prefix: bytes) -> Any:
        if _is_bytes(parsed):
            return SerializerCore.make_writer(self, parsed, prefix)
        return self._encoder(parsed).writer(prefix, self.to_dict)


class _Encoder:
    """The compiled writer of :mod:`kontrakt.serde._avro_write` for one parsed schema, with
    fastavro for the values (or the schema) it leaves.

    The bytes are fastavro's in every case: a value the compiled writer cannot prove it
    encodes identically is encoded again by fastavro, whose error a bad value gets (worded
    with the field the compiled writer stopped at).
    """

    def __init__(self, parsed: Any, owner: str) -> None:
        self.parsed = parsed
        self.owner = owner
        try:
            self.fast: Callable[[bytearray, Any], None] | None = compile_writer(parsed)
        except NotCompiled:
            self.fast = None
        self._plain = self.writer(b"", None)

    def slow(self, prefix: bytes, value: Any, where: str | None) -> bytes:
        """``prefix`` + fastavro's encoding of ``value``."""
        # The prefix goes into the same buffer: no second copy of the payload.
        out = io.BytesIO(prefix)
        out.seek(len(prefix))
        try:
            schemaless_writer(out, self.parsed, value)
        except Exception as e:
            if where is None:
                raise
            raise SerializationError(f"{self.owner}: cannot encode {type(value).__name__}: "
                                     f"the Avro field {where}: {e}") from e
        return out.getvalue()

    def __call__(self, prefix: bytes, value: Any) -> bytes:
        """``prefix`` + the encoding of ``value`` (off the per-record path)."""
        return prefix + self._plain(value, None)

    def writer(self, prefix: bytes, to_dict: ToDict | None
               ) -> Callable[[Any, SerializationContext | None], bytes]:
        """``write(obj, ctx) -> prefix + encoding`` (of ``to_dict(obj, ctx)`` if given): one
        frame a record, the compiled writer called from it directly."""
        fast, slow = self.fast, self.slow
        if fast is None:
            if to_dict is None:
                return lambda obj, ctx: slow(prefix, obj, None)
            return lambda obj, ctx: slow(prefix, to_dict(obj, ctx), None)
        def write(obj: Any, ctx: SerializationContext | None) -> bytes:
            value = obj if to_dict is None else to_dict(obj, ctx)
            out = bytearray(prefix)
            try:
                fast(out, value)
            except SlowPath as e:
                return slow(prefix, value, e.path)
            except Exception:
                return slow(prefix, value, None)
            return bytes(out)
        return write


def _avro_encoder(parsed: Any, owner: str) -> Callable[[bytes, Any], bytes]:
    """``encode(prefix, value) -> prefix + payload`` for ``parsed`` (see :class:`_Encoder`)."""
    return _Encoder(parsed, owner)


class _AvroDeserializerCore(_AvroFormat, TextSchemaDeserializerCore):
    extra_defaults = LIMIT_DEFAULTS

    def __init__(self, schema_str: Any, from_dict: FromDict | None, return_record_name: bool,
                 conf: Mapping[str, Any] | None, owner: str) -> None:
        TextSchemaDeserializerCore.__init__(self, schema_str, from_dict, conf, owner)
        self.limits = check_limits(self.conf, owner)
        self.return_record_name = bool(return_record_name)
        self.record_name = _full_name(self.schema.schema_str) if self.schema else None

    def load(self, key: Any, sid: SchemaId, ctx: SerializationContext | None,
             data: bytes) -> Steps:
        if self.schema is not None and not self.per_subject:
            # The reader schema given to the constructor is parsed (with its references) once.
            self._local_reader = yield from self.parse_schema(self.schema)
        return (yield from DeserializerCore.load(self, key, sid, ctx, data))

    _local_reader: Any = None

    def make_reader(self, writer: Any, reader: Any, sid: SchemaId, convert: bool = True) -> Any:
        if reader is None:
            reader = self._local_reader
        if reader is not None and reader == writer:
            reader = None  # same schema: skip fastavro's resolution pass
        from_dict = self.from_dict if convert else None
        if _is_bytes(writer):
            def read_bytes(data: bytes, offset: int, ctx: SerializationContext | None) -> Any:
                value = bytes(data[offset:])
                return value if from_dict is None else from_dict(value, ctx)
            return read_bytes
        record_name = self.return_record_name
        BytesIO = io.BytesIO  # a local alias on the per-record path
        # Untrusted bytes: longer payloads than the writer schema's safe length are walked
        # for the limits first (see _avro_bounds); the rest cost one comparison.
        bounds = AvroBounds(writer, *self.limits)
        # An int bound: comparing the length with a float costs ~4x an int comparison.
        safe = bounds.safe_len
        safe_len = sys.maxsize if safe is None or safe >= sys.maxsize else math.floor(safe)
        check = bounds.check

        def slow(data: bytes, offset: int) -> tuple[Any, int]:
            buf = BytesIO(data)
            buf.seek(offset)
            value = schemaless_reader(buf, writer, reader, record_name)
            return value, buf.tell()

        fast: Callable[[bytes, int], tuple[Any, int]] = slow
        try:
            fast = compile_reader(writer, record_name, reader)
        except NotCompiled:
            pass  # a shape (or a schema resolution) left to fastavro

        def left_over(data: bytes, end: int) -> SerializationError:
            return SerializationError(f"{len(data) - end} bytes left over after the Avro record")

        # Two forms, so that the one without from_dict has no test of it a record.
        if from_dict is None:
            def read(data: bytes, offset: int, ctx: SerializationContext | None) -> Any:
                if len(data) - offset > safe_len:
                    check(data, offset)
                if type(data) is not bytes:
                    data = bytes(data)
                try:
                    value, end = fast(data, offset)
                except Exception:
                    # Whatever the compiled reader cannot decode, fastavro decodes or refuses
                    # (with the error it always gave).
                    value, end = slow(data, offset)
                if end != len(data):
                    raise left_over(data, end)
                return value
            return read

        def read_dict(data: bytes, offset: int, ctx: SerializationContext | None) -> Any:
            if len(data) - offset > safe_len:
                check(data, offset)
            if type(data) is not bytes:
                data = bytes(data)
            try:
                value, end = fast(data, offset)
            except Exception:
                value, end = slow(data, offset)  # as in read() above
            if end != len(data):
                raise left_over(data, end)
            return from_dict(value, ctx)
        return read_dict


class AvroSerializer(SyncSerializer[_In]):
    """Serializes values to Avro with the Confluent framing (sync registry client).

    Args:
        schema_registry_client: a ``SchemaRegistryClient`` (or the mock).
        schema_str: the Avro schema as text, a registry ``Schema`` (for references), or a
            dataclass whose generated schema is used (values may then be instances of it).
            May be ``None`` with ``use.latest.version``.
        to_dict: ``(obj, ctx) -> dict`` converting application objects first.
        conf: ``auto.register.schemas`` (True), ``normalize.schemas`` (False),
            ``use.latest.version`` (False), ``use.latest.with.metadata`` (None),
            ``subject.name.strategy`` (topic), ``schema.id.serializer`` (prefix; or
            ``header_schema_id_serializer``).
        rule_conf: config handed to the rule executors and actions (``configure``), e.g.
            ``dlq.topic`` for the DLQ action.
        rule_registry: the ``kontrakt.serde.rules.RuleRegistry`` whose executors run the
            schema's data-contract rules (default: the process-wide one). A rule with no
            executor refuses the record (``.rule`` on the error names it).

    Raises:
        ConfigError: unknown config key, wrong type, or conflicting options.
    """

    def __init__(self, schema_registry_client: Any,
                 schema_str: str | Schema | type[_In] | None = None,
                 to_dict: _ToDictOf[_In] | None = None, conf: Mapping[str, Any] | None = None,
                 rule_conf: Mapping[str, Any] | None = None,
                 rule_registry: RuleRegistry | None = None) -> None:
        self._registry = schema_registry_client
        self._core = _AvroSerializerCore(schema_str, to_dict, conf, type(self).__name__)
        self._core.use_rules(rule_registry, rule_conf, schema_registry_client)


class AsyncAvroSerializer(AsyncSerializer[_In]):
    """:class:`AvroSerializer` for an ``AsyncSchemaRegistryClient``; call it with ``await``."""

    def __init__(self, schema_registry_client: Any,
                 schema_str: str | Schema | type[_In] | None = None,
                 to_dict: _ToDictOf[_In] | None = None, conf: Mapping[str, Any] | None = None,
                 rule_conf: Mapping[str, Any] | None = None,
                 rule_registry: RuleRegistry | None = None) -> None:
        self._registry = schema_registry_client
        self._core = _AvroSerializerCore(schema_str, to_dict, conf, type(self).__name__)
        self._core.use_rules(rule_registry, rule_conf, schema_registry_client)


class AvroDeserializer(SyncDeserializer[_Out]):
    """Deserializes Confluent-framed Avro (sync registry client).

    Args:
        schema_registry_client: a ``SchemaRegistryClient`` (or the mock).
        schema_str: optional reader schema (text, ``Schema`` or dataclass); the writer's
            data is resolved to it (schema evolution). ``None``: read with the writer schema.
        from_dict: ``(dict, ctx) -> obj`` converting the decoded value.
        return_record_name: return union records as ``(name, value)`` tuples.
        conf: ``use.latest.version``, ``use.latest.with.metadata`` (read with the subject's
            latest schema), ``subject.name.strategy``, ``schema.id.deserializer`` (dual), and
            the bounds on untrusted payloads: ``max.collection.items`` (10,000,000 items in
            one array or map), ``max.decoded.values`` (10,000,000 values built from one
            record: each record, array, map, map key and primitive counts one) and
            ``max.nesting.depth`` (256 records, arrays and maps nested in one another).
            A payload beyond them raises before fastavro builds it.
        rule_conf: config handed to the rule executors and actions (``configure``), e.g.
            ``dlq.topic`` for the DLQ action.
        rule_registry: the ``kontrakt.serde.rules.RuleRegistry`` whose executors run the
            schema's data-contract rules (default: the process-wide one). A rule with no
            executor refuses the record (``.rule`` on the error names it).

    Raises:
        ConfigError: unknown config key, wrong type, or a limit that is not a positive int.

    A payload that breaks a bound raises ``KeyDeserializationError`` /
    ``ValueDeserializationError`` (with the bytes as ``.record``), as any undecodable payload
    does.
    """

    def __init__(self, schema_registry_client: Any,
                 schema_str: str | Schema | type[_Out] | None = None,
                 from_dict: _FromDictOf[_Out] | None = None, return_record_name: bool = False,
                 conf: Mapping[str, Any] | None = None,
                 rule_conf: Mapping[str, Any] | None = None,
                 rule_registry: RuleRegistry | None = None) -> None:
        self._registry = schema_registry_client
        self._core = _AvroDeserializerCore(schema_str, from_dict, return_record_name, conf,
                                           type(self).__name__)
        self._core.use_rules(rule_registry, rule_conf, schema_registry_client)


class AsyncAvroDeserializer(AsyncDeserializer[_Out]):
    """:class:`AvroDeserializer` for an ``AsyncSchemaRegistryClient``; call it with ``await``."""

    def __init__(self, schema_registry_client: Any,
                 schema_str: str | Schema | type[_Out] | None = None,
                 from_dict: _FromDictOf[_Out] | None = None, return_record_name: bool = False,
                 conf: Mapping[str, Any] | None = None,
                 rule_conf: Mapping[str, Any] | None = None,
                 rule_registry: RuleRegistry | None = None) -> None:
        self._registry = schema_registry_client
        self._core = _AvroDeserializerCore(schema_str, from_dict, return_record_name, conf,
                                           type(self).__name__)
        self._core.use_rules(rule_registry, rule_conf, schema_registry_client)
