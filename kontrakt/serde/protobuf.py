"""Protobuf serializer and deserializer with Confluent Schema Registry framing.

Framing: magic byte, 4-byte schema id, the message-index path of the written type (zig-zag
varints, ``[0]`` as one zero byte), then the message. The schema is registered the way
confluent-kafka-python registers it — the file's serialized descriptor, with each import
registered first under ``reference.subject.name.strategy`` — so both clients get the same ids
and write the same bytes.

The deserializer decodes into a generated class when given one, and otherwise builds the
message type from the registry's schema (see :mod:`kontrakt.serde._proto_schema`), which
confluent-kafka-python cannot do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kontrakt._extras import raise_missing_extra
from kontrakt._types import DefaultTypeVar

try:
    from google.protobuf.message import Message
except ModuleNotFoundError as exc:
    raise_missing_extra(exc, "the Protobuf serde (kontrakt.serde.protobuf)")

from kontrakt.errors import ConfigError, RuleError, SerializationError
from kontrakt.serde._base import (
    AsyncDeserializer,
    AsyncSerializer,
    DeserializerCore,
    ReferenceParsing,
    SerializerCore,
    SyncDeserializer,
    SyncSerializer,
    make_reference,
    make_schema,
)
from kontrakt.serde._context import SerializationContext
from kontrakt.serde._framing import SchemaId
from kontrakt.serde._proto_schema import (
    decode_serialized,
    descriptor_to_text_b64,
    is_builtin,
    message_by_indexes,
    message_indexes,
    new_pool,
    proto_text_to_files,
)
from kontrakt.serde._registry_io import LookupSchema, RegisterSchema, Steps
from kontrakt.serde._strategies import reference_subject_name_strategy
from kontrakt.serde.rules import FieldRuleExecutor, RuleRegistry

__all__ = [
    "AsyncProtobufDeserializer",
    "AsyncProtobufSerializer",
    "ProtobufDeserializer",
    "ProtobufSerializer",
]

#: The message class (generated, or a dataclass model) a serializer takes.
_In = DefaultTypeVar("_In", contravariant=True, default=Any)
#: The message class a deserializer returns; with no message_type, dynamic messages (Any).
_Out = DefaultTypeVar("_Out", covariant=True, default=Any)

_ROOT_NAME = "default"


def _reader_for(cls: Any) -> Any:
    from_string = cls.FromString

    def read(data: bytes, offset: int, ctx: SerializationContext | None) -> Any:
        return from_string(data[offset:])
    return read


def _is_dataclass_type(cls: Any) -> bool:
    import dataclasses

    return isinstance(cls, type) and dataclasses.is_dataclass(cls)


def _is_message_class(cls: Any) -> bool:
    return isinstance(cls, type) and issubclass(cls, Message)


def _by_import_name(ref: Any) -> Any:
    # One file per import name: the descriptor pool rejects a second file of that name.
    return ref.name


def _build(root_text: str, deps: list[tuple[str, str]]) -> Any:
    """Load the root file and its imports (dependencies first) into a fresh pool."""
    pool = new_pool()
    decoded = [(name, decode_serialized(name, text)) for name, text in deps]
    root = decode_serialized(_ROOT_NAME, root_text)
    if root is not None and all(fdp is not None for _, fdp in decoded):
        for _, fdp in decoded:
            pool.Add(fdp)
        pool.Add(root)
        return pool.FindFileByName(_ROOT_NAME)
    if root is not None or any(fdp is not None for _, fdp in decoded):
        raise SerializationError("cannot mix .proto text and serialized descriptors in one "
                                 "schema and its references")
    # .proto text throughout: compile the import graph at once.
    sources = dict(deps)
    sources[_ROOT_NAME + ".proto"] = root_text
    for fdp in proto_text_to_files(_ROOT_NAME + ".proto", sources):
        pool.Add(fdp)
    return pool.FindFileByName(_ROOT_NAME + ".proto")


def _schema_message(file_desc: Any, full_name: str | None, indexes: Any) -> Any:
    """The message of a parsed schema file that a rule walks with: the one named
    ``full_name`` (the message being written), else the one at ``indexes``."""
    if full_name is not None:
        for desc in _messages(file_desc.message_types_by_name.values()):
            if desc.full_name == full_name:
                return desc
    return message_by_indexes(file_desc, indexes or (0,))


def _messages(descs: Any) -> Any:
    for desc in descs:
        yield desc
        yield from _messages(desc.nested_types)


def _walks_fields(schema: Any, registry: RuleRegistry) -> bool:
    """Whether a domain rule of registry ``schema`` runs on fields (needs the parsed schema
    to name and tag them)."""
    rule_set = getattr(schema, "rule_set", None)
    for raw in getattr(rule_set, "domain_rules", None) or ():
        kind = raw.get("type") if isinstance(raw, Mapping) else None
        if kind and isinstance(registry.get_executor(str(kind)), FieldRuleExecutor):
            return True
    return False


class _ProtobufSerializerCore(SerializerCore, ReferenceParsing):
    schema_type = "PROTOBUF"
    fetch_format = "serialized"
    extra_defaults = {
        "skip.known.types": True,
        "reference.subject.name.strategy": reference_subject_name_strategy,
        "use.deprecated.format": False,
    }

    def __init__(self, msg_type: Any, conf: Mapping[str, Any] | None, owner: str) -> None:
        SerializerCore.__init__(self, conf, owner)
        ReferenceParsing.__init__(self)
        self.model: Any = None
        if _is_dataclass_type(msg_type):
            from kontrakt.serde._dataclass_proto import proto_model

            self.model = proto_model(msg_type)
        elif not _is_message_class(msg_type):
            raise ConfigError(f"{owner}: msg_type must be a generated Protobuf message class "
                              "or a dataclass")
        self.msg_type: Any = msg_type
        self.skip_known: bool = self.conf["skip.known.types"]
        self.ref_strategy = self.conf["reference.subject.name.strategy"]
        self.zigzag = not self.conf["use.deprecated.format"]
        # make_writer's writers (and the model's, through encode) never look at the context.
        self.bare_writes = True
        self.file: Any = None
        self.indexes: tuple[int, ...]
        if self.model is not None:
            self.record_name = self.model.full_name
            self.indexes = tuple(self.model.indexes)
        else:
            desc = self.msg_type.DESCRIPTOR
            self.record_name = desc.full_name
            self.indexes = message_indexes(desc)
            self.file = desc.file

    def message_indexes(self) -> tuple[int, ...] | None:
        return self.indexes

    def _references(self, ctx: SerializationContext | None, file_desc: Any) -> Steps:
        refs = []
        for dep in file_desc.dependencies:
            if self.skip_known and is_builtin(dep.name):
                continue
            dep_refs = yield from self._references(ctx, dep)
            subject = self.ref_strategy(ctx, dep)
            if subject is None:
                raise SerializationError(f"no subject for the import {dep.name!r}")
            schema = make_schema(descriptor_to_text_b64(dep.serialized_pb), "PROTOBUF", dep_refs)
            if self.auto_register:
                yield RegisterSchema(subject, schema, self.normalize)
            registered = yield LookupSchema(subject, schema, self.normalize)
            refs.append(make_reference(dep.name, subject, registered.version))
        return refs

    def local_schema(self, ctx: SerializationContext | None) -> Steps:
        if self.model is not None:
            # A dataclass model is registered as .proto text; it imports well-known types only.
            return make_schema(self.model.proto_text, "PROTOBUF", ())
        refs = yield from self._references(ctx, self.file)
        return make_schema(descriptor_to_text_b64(self.file.serialized_pb), "PROTOBUF", refs)

    def local_parsed(self) -> Any:
        # What field rules walk with when the local schema is the one written: the class's.
        if self.model is not None:
            return self.model.message_class.DESCRIPTOR
        return self.msg_type.DESCRIPTOR

    def parse(self, schema: Any) -> Steps:
        # With use.latest.version the message is still written by its own class; the
        # registered schema supplies the id and, for field rules only, the descriptor that
        # names and tags the fields (parsed once per schema, as Confluent's serializer does).
        if not _walks_fields(schema, self.rule_registry):
            return None
        file_desc = yield from self.parse_schema(schema)
        return _schema_message(file_desc, self.record_name, self.indexes)

    reference_key = staticmethod(_by_import_name)

    @staticmethod
    def build(root_text: str, deps: list[tuple[str, str]]) -> Any:
        """Load the root file and its imports (dependencies first) into a fresh pool."""
        return _build(root_text, deps)

    def resolve(self, subject: str, ctx: SerializationContext | None) -> Steps:
        resolved = yield from SerializerCore.resolve(self, subject, ctx)
        if resolved.rules is not None:
            # Set right after the plan is cached; a record another thread serializes in
            # between walks with its own class's descriptor, the same one as here unless
            # the latest schema renamed or retagged fields.
            resolved.rules.schema_view = resolved.parsed
        return resolved

    def convert(self, obj: Any, ctx: SerializationContext | None) -> Any:
        # The rules see the message that is written: a dataclass model's message.
        if self.model is not None and isinstance(obj, self.msg_type):
            return self.model.to_message(obj)
        return obj

    def encode_value(self, value: Any, ctx: SerializationContext | None, parsed: Any) -> bytes:
        if self.model is not None:
            if not isinstance(value, self.model.message_class):
                raise SerializationError(f"{self.owner} writes {self.msg_type.__name__} "
                                         f"instances, got {type(value).__name__}")
            data: bytes = value.SerializeToString()
            return data
        return self.encode(value, ctx, parsed)

    def encode(self, obj: Any, ctx: SerializationContext | None, parsed: Any) -> bytes:
        if self.model is not None:
            if not isinstance(obj, self.msg_type):
                raise SerializationError(f"{self.owner} writes {self.msg_type.__name__} "
                                         f"instances, got {type(obj).__name__}")
            model_data: bytes = self.model.to_message(obj).SerializeToString()
            return model_data
        if type(obj) is not self.msg_type and not isinstance(obj, self.msg_type):
            raise SerializationError(f"{self.owner} writes {self.msg_type.__name__} messages, "
                                     f"got {type(obj).__name__}")
        data: bytes = obj.SerializeToString()
        return data

    def make_writer(self, parsed: Any, prefix: bytes) -> Any:
        if self.model is not None:
            return SerializerCore.make_writer(self, parsed, prefix)
        cls = self.msg_type
        owner = self.owner
        # Through the class, not the instance: a generated message's attribute lookup checks
        # its fields first, and obj.SerializeToString costs ~90 ns more than the encode here.
        serialize = cls.SerializeToString

        def write(obj: Any, ctx: SerializationContext | None) -> bytes:
            if type(obj) is not cls and not isinstance(obj, cls):
                raise SerializationError(f"{owner} writes {cls.__name__} messages, got "
                                         f"{type(obj).__name__}")
            return prefix + serialize(obj)  # type: ignore[no-any-return]
        return write


class _ProtobufDeserializerCore(DeserializerCore, ReferenceParsing):
    protobuf = True
    fills_bare = True
    fetch_format = "serialized"
    extra_defaults = {"use.deprecated.format": False}

    def __init__(self, message_type: Any, registry: Any, conf: Mapping[str, Any] | None,
                 owner: str) -> None:
        DeserializerCore.__init__(self, conf, owner)
        ReferenceParsing.__init__(self)
        self.model: Any = None
        if _is_dataclass_type(message_type):
            from kontrakt.serde._dataclass_proto import proto_model

            self.model = proto_model(message_type)
        elif message_type is not None and not _is_message_class(message_type):
            raise ConfigError(f"{owner}: message_type must be a generated Protobuf message "
                              "class, a dataclass, or None")
        if message_type is None and registry is None:
            raise ConfigError(f"{owner}: without message_type, a schema_registry_client is "
                              "needed to build message types from the registry")
        self.message_type: Any = message_type
        self.zigzag = not self.conf["use.deprecated.format"]
        self.has_registry = registry is not None
        if self.model is not None:
            self.record_name = self.model.full_name
        else:
            self.record_name = (self.message_type.DESCRIPTOR.full_name if message_type
                                else None)

    def load(self, key: Any, sid: SchemaId, ctx: SerializationContext | None,
             data: bytes) -> Steps:
        if self.message_type is not None and not self.per_subject:
            # A generated class needs no schema to decode; with a registry, the writer schema
            # is still fetched (once per id) for the rules it may carry, so that a contract
            # is never skipped. Without one, the bytes are all there is.
            read = plain = self._typed_reader()
            if self.has_registry:
                writer = yield from self.fetch_writer(sid, ctx, data)
                plan = yield from self._typed_read_plan(writer, sid, ctx, data)
                if plan is not None:
                    read = self.with_rules(read, plan)
                try:
                    read = self.with_encoding(read, writer, self._rule_subject(ctx, data))
                except RuleError as e:
                    raise self.rule_error(e, ctx, data) from e
            self.readers[key] = read
            if read is plain and isinstance(key, bytes):
                # No rules: the clients may parse the payload after the head themselves.
                self.bare[key] = self._typed_parse()
            return read
        return (yield from DeserializerCore.load(self, key, sid, ctx, data))

    def parse(self, schema: Any, sid: SchemaId | None) -> Steps:
        return (yield from self.parse_schema(schema))

    def _typed_read_plan(self, writer: Any, sid: SchemaId, ctx: SerializationContext | None,
                         data: bytes) -> Steps:
        try:
            plan = self.read_plan(writer, None, sid, ctx, data)
            if plan is not None and plan.walks_fields():
                parsed = yield from self.parse(writer, sid)
                plan.schema_view = self.rule_view(parsed, sid)
            return plan
        except (RuleError, SerializationError) as e:
            self.raise_typed(e, data, ctx)
            raise  # pragma: no cover (raise_typed raises for both)

    def rule_view(self, parsed: Any, sid: SchemaId) -> Any:
        # The schema-side descriptor of the message read: the one the writer's indexes
        # name, found by its name in the schema read with.
        if parsed is None:
            return None
        name = self.record_name
        if name is None:
            return message_by_indexes(parsed, sid.message_indexes or (0,))
        return _schema_message(parsed, name, sid.message_indexes)

    def migration_reader(self, writer: Any, sid: SchemaId) -> Any:
        # Migration rules see dicts, as Confluent's: decoded with the writer's own message
        # type, then json_format with the .proto field names.
        from google.protobuf.message_factory import GetMessageClass

        from kontrakt.serde.rules._proto_fields import to_plain

        from_string = GetMessageClass(message_by_indexes(writer, sid.message_indexes or (0,)))
        parse = from_string.FromString

        def read(data: bytes, offset: int, ctx: SerializationContext | None) -> Any:
            return to_plain(parse(data[offset:]))
        return read

    def migration_result(self, writer: Any, reader: Any, sid: SchemaId) -> Any:
        from kontrakt.serde.rules._proto_fields import from_plain

        if self.model is not None:
            cls = self.model.message_class
            from_message = self.model.from_message
            return lambda value: from_message(from_plain(cls, value))
        if self.message_type is not None:
            cls = self.message_type
        else:
            from google.protobuf.message_factory import GetMessageClass

            writer_desc = message_by_indexes(writer, sid.message_indexes or (0,))
            desc = reader.message_types_by_name.get(writer_desc.name, writer_desc)
            cls = GetMessageClass(desc)
        return lambda value: from_plain(cls, value)

    def _typed_parse(self) -> Callable[[bytes], Any]:
        """``parse(payload) -> message`` of the class decoded into (upb's own function for a
        generated class: no Python frame a record)."""
        if self.model is None:
            return self.message_type.FromString  # type: ignore[no-any-return]
        from_string = self.model.message_class.FromString
        from_message = self.model.from_message
        return lambda payload: from_message(from_string(payload))

    def _typed_reader(self) -> Any:
        if self.model is None:
            return _reader_for(self.message_type)
        from_string = self.model.message_class.FromString
        from_message = self.model.from_message

        def read(data: bytes, offset: int, ctx: SerializationContext | None) -> Any:
            return from_message(from_string(data[offset:]))
        return read

    reference_key = staticmethod(_by_import_name)

    @staticmethod
    def build(root_text: str, deps: list[tuple[str, str]]) -> Any:
        """Load the root file and its imports (dependencies first) into a fresh pool."""
        return _build(root_text, deps)

    def make_reader(self, writer: Any, reader: Any, sid: SchemaId, convert: bool = True) -> Any:
        # Protobuf readers have no from_dict step: ``convert`` changes nothing.
        indexes = sid.message_indexes or (0,)
        writer_desc = message_by_indexes(writer, indexes)
        if self.message_type is not None:
            return self._typed_reader()
        desc = writer_desc
        if reader is not None:
            # The reader is the subject's latest schema: the same message name there.
            desc = reader.message_types_by_name.get(writer_desc.name, writer_desc)
        from google.protobuf.message_factory import GetMessageClass

        return _reader_for(GetMessageClass(desc))


class ProtobufSerializer(SyncSerializer[_In]):
    """Serializes generated Protobuf messages with the Confluent framing (sync registry client).

    Args:
        msg_type: the generated message class, or a dataclass (its ``.proto`` is generated
            and registered as text; instances of the dataclass are the values).
        schema_registry_client: a ``SchemaRegistryClient`` (or the mock).
        conf: ``auto.register.schemas`` (True), ``normalize.schemas``, ``use.latest.version``,
            ``use.latest.with.metadata``, ``subject.name.strategy`` (topic),
            ``reference.subject.name.strategy`` (import path), ``skip.known.types`` (True:
            well-known imports are not registered), ``use.deprecated.format`` (False; True
            writes message indexes as unsigned varints, as pre-1.8 confluent-kafka did),
            ``schema.id.serializer``.
        rule_conf: config handed to the rule executors and actions (``configure``), e.g.
            ``dlq.topic`` for the DLQ action.
        rule_registry: the ``kontrakt.serde.rules.RuleRegistry`` whose executors run the
            schema's data-contract rules (default: the process-wide one). A rule with no
            executor refuses the record (``.rule`` on the error names it).

    Raises:
        ConfigError: unknown config key, wrong type, or not a message class.
    """

    def __init__(self, msg_type: type[_In], schema_registry_client: Any,
                 conf: Mapping[str, Any] | None = None,
                 rule_conf: Mapping[str, Any] | None = None,
                 rule_registry: RuleRegistry | None = None) -> None:
        self._registry = schema_registry_client
        self._core = _ProtobufSerializerCore(msg_type, conf, type(self).__name__)
        self._core.use_rules(rule_registry, rule_conf, schema_registry_client)


class AsyncProtobufSerializer(AsyncSerializer[_In]):
    """:class:`ProtobufSerializer` for an ``AsyncSchemaRegistryClient``; use with ``await``."""

    def __init__(self, msg_type: type[_In], schema_registry_client: Any,
                 conf: Mapping[str, Any] | None = None,
                 rule_conf: Mapping[str, Any] | None = None,
                 rule_registry: RuleRegistry | None = None) -> None:
        self._registry = schema_registry_client
        self._core = _ProtobufSerializerCore(msg_type, conf, type(self).__name__)
        self._core.use_rules(rule_registry, rule_conf, schema_registry_client)


class ProtobufDeserializer(SyncDeserializer[_Out]):
    """Deserializes Confluent-framed Protobuf (sync registry client).

    Args:
        message_type: the generated class (or dataclass model) to decode into; ``None``
            builds the message type from the registry's schema (needs
            ``schema_registry_client``) and returns dynamic message instances.
        conf: ``use.deprecated.format``, ``use.latest.version``, ``use.latest.with.metadata``,
            ``subject.name.strategy``, ``schema.id.deserializer`` (dual).
        schema_registry_client: a ``SchemaRegistryClient``; optional with ``message_type``.
        rule_conf: config handed to the rule executors and actions (``configure``), e.g.
            ``dlq.topic`` for the DLQ action.
        rule_registry: the ``kontrakt.serde.rules.RuleRegistry`` whose executors run the
            schema's data-contract rules (default: the process-wide one). A rule with no
            executor refuses the record (``.rule`` on the error names it).

    Raises:
        ConfigError: unknown config key, wrong type, or neither class nor registry.
    """

    def __init__(self, message_type: type[_Out] | None = None,
                 conf: Mapping[str, Any] | None = None,
                 schema_registry_client: Any = None,
                 rule_conf: Mapping[str, Any] | None = None,
                 rule_registry: RuleRegistry | None = None) -> None:
        self._registry = schema_registry_client
        self._core = _ProtobufDeserializerCore(message_type, schema_registry_client, conf,
                                               type(self).__name__)
        self._core.use_rules(rule_registry, rule_conf, schema_registry_client)


class AsyncProtobufDeserializer(AsyncDeserializer[_Out]):
    """:class:`ProtobufDeserializer` for an ``AsyncSchemaRegistryClient``; use with ``await``."""

    def __init__(self, message_type: type[_Out] | None = None,
                 conf: Mapping[str, Any] | None = None,
                 schema_registry_client: Any = None,
                 rule_conf: Mapping[str, Any] | None = None,
                 rule_registry: RuleRegistry | None = None) -> None:
        self._registry = schema_registry_client
        self._core = _ProtobufDeserializerCore(message_type, schema_registry_client, conf,
                                               type(self).__name__)
        self._core.use_rules(rule_registry, rule_conf, schema_registry_client)
