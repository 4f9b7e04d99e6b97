"""The sans-I/O cores shared by every registry-bound serializer, and their two thin shells.

A format (Avro, JSON Schema, Protobuf) subclasses :class:`SerializerCore` and
:class:`DeserializerCore` with its parsing and encoding; the shells :class:`SyncSerializer`,
:class:`AsyncSerializer`, :class:`SyncDeserializer` and :class:`AsyncDeserializer` only look up
the per-subject (or per-schema-id) cache and, on a miss, drive the core's registry steps with
:func:`~kontrakt.serde._registry_io.run_sync` or :func:`~kontrakt.serde._registry_io.run_async`.
So the sync and async forms are one implementation.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, NoReturn

from kontrakt._types import DefaultTypeVar
from kontrakt.errors import ConfigError, RuleError, SchemaRegistryError, SerializationError
from kontrakt.serde._conf import (
    DESERIALIZER_DEFAULTS,
    SERIALIZER_DEFAULTS,
    parse_conf,
)
from kontrakt.serde._context import (
    MessageField,
    SerializationContext,
    deserialization_error,
    serialization_error,
)
from kontrakt.serde._framing import (
    SchemaId,
    dual_schema_id_deserializer,
    has_schema_id_header,
    prefix_schema_id_serializer,
)
from kontrakt.serde._registry_io import (
    GetLatestVersion,
    GetLatestWithMetadata,
    GetSchema,
    GetSchemaByGuid,
    GetVersion,
    LookupSchema,
    RegisterSchema,
    Steps,
    run_async,
    run_sync,
)
from kontrakt.serde._ruled import RuledReading, other_schema
from kontrakt.serde._strategies import topic_subject_name_strategy
from kontrakt.serde.rules import (
    WRITE,
    RulePlan,
    RuleRegistry,
    configure_registry,
    plan_encoding,
    plan_rules,
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


#: ``(obj, ctx) -> dict``: application object to what the format's codec writes.
ToDict = Callable[[Any, SerializationContext | None], Any]
#: ``(decoded, ctx) -> obj``: what the format's codec read to an application object.
FromDict = Callable[[Any, SerializationContext | None], Any]

#: What a serializer shell accepts (``AvroSerializer[Order]``): anything, unless its schema
#: is a dataclass or its ``to_dict`` says.
ObjT = DefaultTypeVar("ObjT", contravariant=True, default=Any)
#: What a deserializer shell returns (``AvroDeserializer[Order]``); the format picks its
#: default.
OutT = DefaultTypeVar("OutT", covariant=True, default=Any)


def make_schema(schema_str: str, schema_type: str, references: Any = ()) -> Any:
    """Build the registry's ``Schema`` value (imported late: the registry is optional here)."""
    from kontrakt.registry import Schema

    return Schema(schema_str, schema_type, tuple(references or ()))


def make_reference(name: str, subject: str, version: int) -> Any:
    """Build the registry's ``SchemaReference`` value."""
    from kontrakt.registry import SchemaReference

    return SchemaReference(name, subject, version)


_VALUE = MessageField.VALUE
_KEY = MessageField.KEY


@dataclass(frozen=True, slots=True)
class Resolved:
    """What a serializer caches per subject: the id, its ready-made prefix, the parsed schema,
    and the plan of the schema's WRITE rules (None: no rule runs)."""

    schema_id: SchemaId
    prefix: bytes
    parsed: Any
    #: ``write(obj, ctx) -> framed bytes`` for the default prefix framing and no rules, else
    #: None.
    write: Any = None
    rules: RulePlan | None = None
    #: the schema's encoding rules (``ENCRYPT_PAYLOAD``), run on the encoded payload
    encoding: RulePlan | None = None


def _registered_id(answer: Any) -> tuple[int, uuid.UUID | None]:
    if isinstance(answer, int):
        return answer, None
    guid = getattr(answer, "guid", None)
    return int(answer.schema_id), (uuid.UUID(str(guid)) if guid else None)


class _CoreConfig:
    """What both cores read from their configuration: the latest-version options and the
    subject name strategy."""

    extra_defaults: Mapping[str, Any] = {}
    #: the registry ``format`` to ask for when fetching schemas (Protobuf: ``"serialized"``).
    fetch_format: str | None = None

    def __init__(self, conf: Mapping[str, Any] | None, defaults: Mapping[str, Any],
                 owner: str) -> None:
        c = parse_conf(conf, {**defaults, **self.extra_defaults}, owner)
        self.conf = c
        self.owner = owner
        self.use_latest: bool = c["use.latest.version"]
        self.latest_metadata: Mapping[str, str] | None = c["use.latest.with.metadata"]
        self.strategy: Callable[..., str | None] = c["subject.name.strategy"]
        self.record_name: str | None = None
        self.zigzag = True
        self.rule_registry = RuleRegistry.get_global_instance()

    def use_rules(self, registry: RuleRegistry | None, rule_conf: Mapping[str, Any] | None,
                  client: Any) -> None:
        """Run data-contract rules with ``registry`` (default: the process-wide one), handing
        its executors and actions the client's config and ``rule_conf``."""
        if registry is not None and not isinstance(registry, RuleRegistry):
            raise ConfigError(f"{self.owner}: rule_registry must be a RuleRegistry, got "
                              f"{type(registry).__name__}")
        if rule_conf is not None and not isinstance(rule_conf, Mapping):
            raise ConfigError(f"{self.owner}: rule_conf must be a dict, got {rule_conf!r}")
        if registry is not None:
            self.rule_registry = registry
        configure_registry(self.rule_registry, client, rule_conf)


class SerializerCore(_CoreConfig):
    """Format-independent serializer logic; formats override the hooks at the bottom."""

    schema_type = "AVRO"

    def __init__(self, conf: Mapping[str, Any] | None, owner: str) -> None:
        _CoreConfig.__init__(self, conf, SERIALIZER_DEFAULTS, owner)
        c = self.conf
        self.auto_register: bool = c["auto.register.schemas"]
        self.normalize: bool = c["normalize.schemas"]
        if self.use_latest and self.auto_register:
            raise ConfigError(f"{owner}: cannot enable both use.latest.version and "
                              "auto.register.schemas")
        self.topic_strategy = self.strategy is topic_subject_name_strategy
        self.by_value_topic: dict[str, Resolved] = {}
        self.by_key_topic: dict[str, Resolved] = {}
        #: the warmest path, read by the sync shell before anything else: topic -> the
        #: ``write`` of its value subject, for the default strategy and framing
        self.value_writes: dict[str, Callable[[Any, Any], bytes]] = {}
        self.id_serializer: Callable[..., bytes] = c["schema.id.serializer"]
        self.fast_prefix = self.id_serializer is prefix_schema_id_serializer
        self.resolved: dict[str | None, Resolved] = {}

    def subject(self, ctx: SerializationContext | None) -> str:
        """The subject for this record, from the configured strategy.

        Raises:
            SerializationError: the strategy failed or gave no subject.
        """
        try:
            subject = self.strategy(ctx, self.record_name)
        except SerializationError:
            raise
        except Exception as e:
            raise serialization_error(f"subject name strategy failed: {e}", ctx, e) from e
        if subject is None:
            raise serialization_error("the subject name strategy gave no subject (a record "
                                      "strategy needs a named schema)", ctx)
        return subject

    def resolve(self, subject: str, ctx: SerializationContext | None) -> Steps:
        """Find (registering if configured) the schema id to write under ``subject``."""
        if self.latest_metadata is not None or self.use_latest:
            if self.latest_metadata is not None:
                answer = yield GetLatestWithMetadata(subject, self.latest_metadata,
                                                     self.fetch_format)
            else:
                answer = yield GetLatestVersion(subject, self.fetch_format)
            parsed = yield from self.parse(answer.schema)
            registered = answer.schema
        else:
            schema = yield from self.local_schema(ctx)
            if self.auto_register:
                answer = yield RegisterSchema(subject, schema, self.normalize)
            else:
                answer = yield LookupSchema(subject, schema, self.normalize)
            parsed = self.local_parsed()
            registered = getattr(answer, "schema", None) or schema
        sid_num, guid = _registered_id(answer)
        sid = SchemaId(sid_num, guid, self.message_indexes(), self.zigzag)
        prefix = sid.id_to_bytes()
        # The rules are planned once per subject; a schema with none keeps the plain writer.
        try:
            rules = plan_rules(registered, WRITE, subject, self.rule_registry)
            encoding = plan_encoding(registered, WRITE, subject, self.rule_registry)
        except RuleError as e:
            raise self._rule_error(e, ctx) from e
        write = (self.make_writer(parsed, prefix)
                 if self.fast_prefix and rules is None and encoding is None else None)
        resolved = Resolved(sid, prefix, parsed, write, rules, encoding)
        self.resolved[subject] = resolved
        if self.topic_strategy and ctx is not None and ctx.field is not MessageField.NONE:
            value = ctx.field is _VALUE
            by_topic = self.by_value_topic if value else self.by_key_topic
            by_topic[ctx.topic] = resolved  # the same subject, keyed for the warm path
            if write is not None and value:
                self.value_writes[ctx.topic] = write
        return resolved

    def serialize_cached(self, obj: Any, ctx: SerializationContext | None) -> Any:
        """Serialize ``obj`` if its subject is resolved already, else return :data:`MISS`.

        This is the whole per-record path once a serializer is warm: one strategy call, one
        dict lookup, the encoder, and the ready-made prefix.
        """
        if self.topic_strategy and ctx is not None:
            # The default strategy, inlined: the subject is fixed by (field, topic), so look
            # the topic up directly instead of building and hashing "{topic}-{field}".
            field = ctx.field
            if field is _VALUE:
                r = self.by_value_topic.get(ctx.topic)
            elif field is _KEY:
                r = self.by_key_topic.get(ctx.topic)
            else:
                r = self.resolved.get(ctx.topic + "-" + field)
        else:
            r = self.resolved.get(self.subject(ctx))
        if r is None:
            return MISS
        try:
            if r.write is not None:
                return r.write(obj, ctx)
            if r.rules is not None:
                # The rules see what the codec writes: the value after to_dict.
                value = r.rules.apply(self.convert(obj, ctx), ctx)
                payload = self.encode_value(value, ctx, r.parsed)
            else:
                payload = self.encode(obj, ctx, r.parsed)
            if r.encoding is not None:
                payload = r.encoding.apply(payload, ctx)
        except Exception as e:
            self.encode_failed(e, obj, ctx)
        return self.id_serializer(payload, ctx, r.schema_id)

    def _rule_error(self, e: RuleError, ctx: SerializationContext | None) -> SerializationError:
        err = serialization_error(f"{self.owner}: {e}", ctx, e)
        err.rule = e.rule
        return err

    def encode_failed(self, e: Exception, obj: Any, ctx: SerializationContext | None) -> NoReturn:
        """Raise for an encoder's failure ``e`` (called in its ``except`` block): key/value
        serialization errors pass through; a rule's refusal becomes one carrying ``.rule``;
        anything else is wrapped into one naming the record."""
        if isinstance(e, RuleError):
            raise self._rule_error(e, ctx) from e
        if isinstance(e, SerializationError):
            if type(e) is not SerializationError:
                raise e
            raise serialization_error(str(e), ctx, e) from e
        raise serialization_error(f"{self.owner}: cannot encode {type(obj).__name__}: {e}",
                                  ctx, e) from e

    # -- format hooks ----------------------------------------------------------------------
    def local_schema(self, ctx: SerializationContext | None) -> Steps:
        """The registry ``Schema`` to register or look up (may register references first)."""
        raise NotImplementedError
        yield  # pragma: no cover

    def local_parsed(self) -> Any:
        """The parsed form of the local schema."""
        raise NotImplementedError

    def parse(self, schema: Any) -> Steps:
        """Parse a registry ``Schema`` (fetching its references) into the encoder's form."""
        raise NotImplementedError
        yield  # pragma: no cover

    def message_indexes(self) -> tuple[int, ...] | None:
        """Protobuf message indexes of the written type; ``None`` for other formats."""
        return None

    def encode(self, obj: Any, ctx: SerializationContext | None, parsed: Any) -> bytes:
        """Encode ``obj`` (applying ``to_dict``) with the parsed schema, without framing."""
        raise NotImplementedError

    def convert(self, obj: Any, ctx: SerializationContext | None) -> Any:
        """``obj`` as the codec writes it (``to_dict`` applied); the default keeps it."""
        return obj

    def encode_value(self, value: Any, ctx: SerializationContext | None, parsed: Any) -> bytes:
        """Encode an already converted value (see :meth:`convert`); the default is
        :meth:`encode`, for formats without a conversion step."""
        return self.encode(value, ctx, parsed)

    def make_writer(self, parsed: Any, prefix: bytes) -> Any:
        """``write(obj, ctx) -> prefix + encoding``; formats may fuse the two steps."""
        encode = self.encode

        def write(obj: Any, ctx: SerializationContext | None) -> bytes:
            return prefix + encode(obj, ctx, parsed)
        return write


class DeserializerCore(RuledReading, _CoreConfig):
    """Format-independent deserializer logic; formats override the hooks at the bottom."""

    protobuf = False
    #: whether migration rules can run on what the reader decodes (dicts: Avro, JSON)
    migrates = True

    def __init__(self, conf: Mapping[str, Any] | None, owner: str) -> None:
        _CoreConfig.__init__(self, conf, DESERIALIZER_DEFAULTS, owner)
        self.per_subject = self.use_latest or self.latest_metadata is not None
        self.id_deserializer: Callable[..., tuple[SchemaId, int]] = (
            self.conf["schema.id.deserializer"])
        self.readers: dict[Any, Any] = {}
        #: whether the strategy has named a subject in a schema context (see context_subject)
        self.contexts = False
        self.fast = (self.id_deserializer is dual_schema_id_deserializer
                     and not self.per_subject)
        #: bytes of the framing head on the warm path (magic byte, id, Protobuf's [0] index)
        self.head_size = 6 if self.protobuf else 5

    def _fast_key(self, data: bytes, ctx: SerializationContext | None) -> tuple[Any, int] | None:
        # The common case, decided from bytes alone: prefix framing, no schema-id header,
        # and (Protobuf) the one-byte [0] index path. The whole head (magic byte, id and,
        # for Protobuf, the index byte) is the cache key, so that decode_cached finds a
        # reader with one slice and one lookup: only heads that passed these checks are
        # ever stored, and no other key is bytes.
        if self.fast and data[:1] == b"\x00" and (
                ctx is None or not ctx.headers or not has_schema_id_header(ctx)):
            if not self.protobuf:
                return data[:5], 5
            if data[5:6] == b"\x00":
                return data[:6], 6
        return None

    def decode_cached(self, data: bytes, ctx: SerializationContext | None) -> Any:
        """Decode ``data`` if its writer schema is loaded already, else return :data:`MISS`.

        The warm path: one lookup of the framing head, the format's reader.
        """
        if self.fast and (ctx is None or not ctx.headers or not has_schema_id_header(ctx)):
            offset = self.head_size
            read = self.readers.get(data[:offset])
        else:
            read = None
        if read is None:
            # Other framings, message indexes other than [0], and bytes the warm path does not
            # know yet (including malformed ones, which locate() reports).
            key, _, offset = self.locate(data, ctx)
            read = self.readers.get(key)
            if read is None:
                return MISS
        try:  # deserialize(), inlined: this runs once per record
            return read(data, offset, ctx)
        except Exception as e:
            self.decode_failed(e, data, ctx)

    def locate(self, data: bytes, ctx: SerializationContext | None) -> tuple[Any, SchemaId, int]:
        """Read the schema id: returns the cache key, the id and where the payload starts.

        Raises:
            KeyDeserializationError / ValueDeserializationError: bad magic byte or truncated.
        """
        try:
            sid, offset = self.id_deserializer(data, ctx, self.protobuf, self.zigzag)
        except SerializationError as e:
            raise deserialization_error(str(e), ctx, data, e) from e
        fast = self._fast_key(data, ctx)
        if fast is not None:
            return fast[0], sid, offset
        key: Any = sid.id if sid.id is not None else sid.guid
        if self.protobuf:
            key = (key, sid.message_indexes)
        if self.per_subject:
            key = (key, self.subject(ctx, data))
        elif self.contexts:
            key = (key, self.context_subject(ctx))
        return key, sid, offset

    def context_subject(self, ctx: SerializationContext | None) -> str | None:
        """The subject named by the strategy when it is in a schema context (``:.ctx:s``).

        Ids are numbered per context, so the writer id of such a record is looked up with
        the subject, as Confluent's deserializers do; in the default context the subject is
        left out (the id alone names the schema, and a strategy that needs the record's
        name cannot answer before the schema is known).
        """
        try:
            subject = self.strategy(ctx, self.record_name)
        except Exception:
            return None
        if not (isinstance(subject, str) and subject.startswith(":.")):
            return None
        if not self.contexts:
            # From now on the cache keys name the context, and the warm path's bytes-only
            # keys (the framing head) are off: one id can name two schemas.
            self.contexts = True
            self.fast = False
            self.readers = {k: v for k, v in self.readers.items() if not isinstance(k, bytes)}
        return subject

    def subject(self, ctx: SerializationContext | None, data: bytes | None) -> str | None:
        """The subject whose latest version is the reader schema."""
        try:
            return self.strategy(ctx, self.record_name)
        except Exception as e:
            raise deserialization_error(f"subject name strategy failed: {e}", ctx, data,
                                        e) from e

    def load(self, key: Any, sid: SchemaId, ctx: SerializationContext | None,
             data: bytes) -> Steps:
        """Fetch and parse the writer (and reader) schema for ``sid``; cache under ``key``."""
        writer = yield from self.fetch_writer(sid, ctx, data)
        latest: Any = None
        try:
            writer_parsed = yield from self.parse(writer, sid)
            reader_parsed = None
            if self.per_subject:
                subject = self.subject(ctx, data)
                if subject is not None:
                    if self.latest_metadata is not None:
                        latest = yield GetLatestWithMetadata(subject, self.latest_metadata,
                                                             self.fetch_format)
                    else:
                        latest = yield GetLatestVersion(subject, self.fetch_format)
                    reader_parsed = yield from self.parse(latest.schema, None)
            steps = None
            if latest is not None and self.migrates and other_schema(latest, sid):
                steps = yield from self.find_migrations(str(subject), writer, latest)
            reader = self.ruled_reader(writer, latest, writer_parsed, reader_parsed, sid, ctx,
                                       data, steps)
        except RuleError as e:
            err = deserialization_error(f"{self.owner}: {e}", ctx, data, e)
            err.rule = e.rule
            raise err from e
        except SerializationError as e:
            if type(e) is SerializationError:
                raise deserialization_error(str(e), ctx, data, e) from e
            raise
        except SchemaRegistryError:
            raise
        except Exception as e:
            raise deserialization_error(f"{self.owner}: cannot use the writer schema: {e}", ctx,
                                        data, e) from e
        self.readers[key] = reader
        return reader

    def fetch_writer(self, sid: SchemaId, ctx: SerializationContext | None,
                     data: bytes) -> Steps:
        """The registry ``Schema`` of ``sid``; an unknown id is a deserialization error."""
        try:
            if sid.id is not None:
                return (yield GetSchema(sid.id, self.context_subject(ctx), self.fetch_format))
            return (yield GetSchemaByGuid(str(sid.guid), self.fetch_format))
        except SchemaRegistryError as e:
            what = f"schema id {sid.id}" if sid.id is not None else f"schema GUID {sid.guid}"
            if e.http_status_code == 404:
                raise deserialization_error(f"unknown {what}", ctx, data, e) from e
            raise

    def deserialize(self, data: bytes, offset: int, reader: Any,
                    ctx: SerializationContext | None) -> Any:
        """Decode the payload; any failure becomes a key/value deserialization error."""
        try:
            return reader(data, offset, ctx)
        except Exception as e:
            self.decode_failed(e, data, ctx)

    def decode_failed(self, e: Exception, data: bytes,
                      ctx: SerializationContext | None) -> NoReturn:
        """Raise for a reader's failure ``e`` (called in its ``except`` block): key/value
        deserialization errors pass through; anything else is wrapped into one naming the
        record."""
        if isinstance(e, RuleError):
            err = deserialization_error(f"{self.owner}: {e}", ctx, data, e)
            err.rule = e.rule
            raise err from e
        if isinstance(e, SerializationError):
            if type(e) is not SerializationError:
                raise e
            raise deserialization_error(str(e), ctx, data, e) from e
        raise deserialization_error(f"{self.owner}: cannot decode payload: {e!r}", ctx, data,
                                    e) from e

    # -- format hooks ----------------------------------------------------------------------
    def parse(self, schema: Any, sid: SchemaId | None) -> Steps:
        """Parse a registry ``Schema`` (fetching its references)."""
        raise NotImplementedError
        yield  # pragma: no cover

    def make_reader(self, writer: Any, reader: Any, sid: SchemaId, convert: bool = True) -> Any:
        """Combine writer and reader schema into ``read(data, offset, ctx) -> value``;
        ``convert=False``: without ``from_dict`` (the rules run first)."""
        raise NotImplementedError


class ReferenceParsing:
    """Parses registry schemas together with the schemas they reference, once per schema.

    A format mixes it into its cores and supplies :meth:`build`; the references are fetched
    from the registry (``GetVersion`` in the core's ``fetch_format``), depth first, so
    :meth:`build` receives them dependencies first.
    """

    fetch_format: str | None = None

    def __init__(self) -> None:
        self._parsed: dict[Any, Any] = {}

    def parse_schema(self, schema: Any) -> Steps:
        """The parsed form of ``schema`` (a registry ``Schema``), cached by text + references."""
        refs = tuple(getattr(schema, "references", ()) or ())
        key = (schema.schema_str, tuple((r.name, r.subject, r.version) for r in refs))
        parsed = self._parsed.get(key)
        if parsed is None:
            deps: list[tuple[str, str]] = []
            yield from self._load_refs(refs, set(), deps)
            parsed = self._parsed[key] = self.build(schema.schema_str, deps)
        return parsed

    def _load_refs(self, refs: Any, seen: set[Any], deps: list[tuple[str, str]]) -> Steps:
        for ref in refs:
            once = self.reference_key(ref)
            if once in seen:
                continue
            seen.add(once)
            registered = yield GetVersion(ref.subject, ref.version, self.fetch_format)
            yield from self._load_refs(registered.schema.references or (), seen, deps)
            deps.append((ref.name, registered.schema.schema_str))

    @staticmethod
    def reference_key(ref: Any) -> Any:
        """What makes two references the same fetch (default: subject and version)."""
        return ref.subject, ref.version

    def build(self, schema_str: str, deps: list[tuple[str, str]]) -> Any:
        """Parse ``schema_str`` given its references' ``(name, schema_str)``, dependencies
        first."""
        raise NotImplementedError


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


class _Miss:
    """Returned by the cached paths when the registry must be consulted first."""

    __slots__ = ()


MISS: Any = _Miss()


class SyncSerializer(Generic[ObjT]):
    """Shell: runs a :class:`SerializerCore` with a sync registry client; generic in the
    type of object it serializes."""

    _core: SerializerCore
    _registry: Any

    def __call__(self, obj: ObjT | None, ctx: SerializationContext | None = None) -> bytes | None:
        """Serialize ``obj`` with the Confluent framing; ``None`` stays ``None``.

        Args:
            obj: the value (or the object ``to_dict`` converts).
            ctx: topic, field and headers of the record.

        Returns:
            The framed bytes.

        Raises:
            KeySerializationError / ValueSerializationError: the value does not match the
                schema, no subject can be named, or a data-contract rule of the schema refused
                it or has no executor (``.rule`` names the rule; nothing is written).
            SchemaRegistryError: the registry refused or could not be reached (the client's
                own timeouts and retries apply; only the first record of a subject calls it).
        """
        if obj is None:
            return None
        core = self._core
        if ctx is not None and ctx.field is _VALUE:  # values first: the most common call
            write = core.value_writes.get(ctx.topic)
            if write is not None:
                try:
                    return write(obj, ctx)
                except Exception as e:
                    core.encode_failed(e, obj, ctx)
        out = core.serialize_cached(obj, ctx)
        if out is MISS:
            run_sync(core.resolve(core.subject(ctx), ctx), self._registry)
            out = core.serialize_cached(obj, ctx)
        return out  # type: ignore[no-any-return]


class AsyncSerializer(Generic[ObjT]):
    """Shell: runs a :class:`SerializerCore` with an async registry client; generic in the
    type of object it serializes."""

    _core: SerializerCore
    _registry: Any

    async def __call__(self, obj: ObjT | None,
                       ctx: SerializationContext | None = None) -> bytes | None:
        """Serialize ``obj`` (see :meth:`SyncSerializer.__call__`); awaits registry calls."""
        if obj is None:
            return None
        core = self._core
        out = core.serialize_cached(obj, ctx)
        if out is MISS:
            await run_async(core.resolve(core.subject(ctx), ctx), self._registry)
            out = core.serialize_cached(obj, ctx)
        return out  # type: ignore[no-any-return]


class SyncDeserializer(Generic[OutT]):
    """Shell: runs a :class:`DeserializerCore` with a sync registry client; generic in the
    type of object it returns."""

    _core: DeserializerCore
    _registry: Any

    def __call__(self, data: bytes | None,
                 ctx: SerializationContext | None = None) -> OutT | None:
        """Deserialize Confluent-framed ``data``; ``None`` stays ``None``.

        Args:
            data: the record's key or value bytes.
            ctx: topic, field, headers and (when known) partition and offset of the record.

        Returns:
            The decoded value (or what ``from_dict`` makes of it).

        Raises:
            KeyDeserializationError / ValueDeserializationError: wrong magic byte, truncated
                payload, unknown schema id, bytes that do not match the writer schema, or a
                data-contract rule that refused the value or cannot run (``.rule``); the
                error names topic, partition and offset and carries the bytes as ``.record``.
            SchemaRegistryError: the registry could not be reached.
        """
        if data is None:
            return None
        core = self._core
        out = core.decode_cached(data, ctx)
        if out is MISS:
            key, sid, offset = core.locate(data, ctx)
            reader = run_sync(core.load(key, sid, ctx, data), self._registry)
            out = core.deserialize(data, offset, reader, ctx)
        return out  # type: ignore[no-any-return]


class AsyncDeserializer(Generic[OutT]):
    """Shell: runs a :class:`DeserializerCore` with an async registry client; generic in the
    type of object it returns."""

    _core: DeserializerCore
    _registry: Any

    async def __call__(self, data: bytes | None,
                       ctx: SerializationContext | None = None) -> OutT | None:
        """Deserialize ``data`` (see :meth:`SyncDeserializer.__call__`); awaits registry calls."""
        if data is None:
            return None
        core = self._core
        out = core.decode_cached(data, ctx)
        if out is MISS:
            key, sid, offset = core.locate(data, ctx)
            reader = await run_async(core.load(key, sid, ctx, data), self._registry)
            out = core.deserialize(data, offset, reader, ctx)
        return out  # type: ignore[no-any-return]
