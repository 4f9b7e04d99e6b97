"""The sans-I/O serializer core, format-independent: naming the subject, resolving (and
registering) the schema id once per subject, and the warm per-record path.

A format subclasses :class:`SerializerCore` and fills in the hooks at its bottom; the shells
in :mod:`kontrakt.serde._shells` drive :meth:`SerializerCore.resolve` on a cache miss.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from kontrakt.errors import ConfigError, RuleError, SerializationError
from kontrakt.serde._conf import SERIALIZER_DEFAULTS
from kontrakt.serde._context import MessageField, SerializationContext, serialization_error
from kontrakt.serde._core_common import MISS, CoreConfig
from kontrakt.serde._framing import SchemaId, prefix_schema_id_serializer
from kontrakt.serde._registry_io import (
    GetLatestVersion,
    GetLatestWithMetadata,
    LookupSchema,
    RegisterSchema,
    Steps,
)
from kontrakt.serde._strategies import topic_subject_name_strategy
from kontrakt.serde.rules import WRITE, RulePlan, plan_encoding, plan_rules

__all__ = ["Resolved", "SerializerCore"]

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


class SerializerCore(CoreConfig):
    """Format-independent serializer logic; formats override the hooks at the bottom."""

    schema_type = "AVRO"

    def __init__(self, conf: Mapping[str, Any] | None, owner: str) -> None:
        CoreConfig.__init__(self, conf, SERIALIZER_DEFAULTS, owner)
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
        #: ``write`` of its value (key) subject, for the default strategy and framing
        self.value_writes: dict[str, Callable[[Any, Any], bytes]] = {}
        self.key_writes: dict[str, Callable[[Any, Any], bytes]] = {}
        #: whether the writes above read nothing of their context: the serializing clients
        #: then call them with None and build no context a record (see
        #: bare_serializer_core); a format whose writers never look at it sets this
        self.bare_writes = False
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
        from_latest = self.latest_metadata is not None or self.use_latest
        if from_latest:
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
        # A latest version is reused as long as the registry client reuses it
        # (cache.latest.ttl.sec): serialize_cached checks the deadline, the shell's
        # value_writes / key_writes path does not, so such writers stay out of it.
        expires = from_latest and self.latest_ttl is not None
        self.resolved[subject] = resolved
        if self.topic_strategy and ctx is not None and ctx.field is not MessageField.NONE:
            value = ctx.field is _VALUE
            by_topic = self.by_value_topic if value else self.by_key_topic
            by_topic[ctx.topic] = resolved  # the same subject, keyed for the warm path
            if write is not None and not expires:
                writes = self.value_writes if value else self.key_writes
                writes[ctx.topic] = write
        if expires:
            self.expire_latest()
        return resolved

    def forget_latest(self) -> None:
        # New dicts rather than clear(): a thread reading the old ones sees them whole.
        self.resolved = {}
        self.by_value_topic = {}
        self.by_key_topic = {}
        self.value_writes = {}
        self.key_writes = {}

    def serialize_cached(self, obj: Any, ctx: SerializationContext | None) -> Any:
        """Serialize ``obj`` if its subject is resolved already, else return :data:`MISS`.

        This is the whole per-record path once a serializer is warm: one strategy call, one
        dict lookup, the encoder, and the ready-made prefix.
        """
        if self.stale_at is not None and self.is_stale():
            return MISS
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
        return self.serialize_with(r, obj, ctx)

    def serialize_with(self, r: Resolved, obj: Any, ctx: SerializationContext | None) -> bytes:
        """Serialize ``obj`` with the resolution ``r`` (what :meth:`resolve` returned).

        The shells write the record that missed with the resolution they just made, not
        through the cache again: a latest version's may have expired already.
        """
        try:
            if r.write is not None:
                written: bytes = r.write(obj, ctx)
                return written
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
