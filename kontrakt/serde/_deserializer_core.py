"""The sans-I/O deserializer core, format-independent: locating the writer schema id in the
framing, loading (and caching) a reader per writer schema, and the warm per-record path.

A format subclasses :class:`DeserializerCore` and fills in the hooks at its bottom; the rule
and migration planning it mixes in lives in :mod:`kontrakt.serde._ruled`, and the shells in
:mod:`kontrakt.serde._shells` drive :meth:`DeserializerCore.load` on a cache miss.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from kontrakt.errors import RuleError, SchemaRegistryError, SerializationError
from kontrakt.serde._conf import DESERIALIZER_DEFAULTS
from kontrakt.serde._context import SerializationContext, deserialization_error
from kontrakt.serde._core_common import MISS, CoreConfig
from kontrakt.serde._framing import SchemaId, dual_schema_id_deserializer, has_schema_id_header
from kontrakt.serde._registry_io import (
    GetLatestVersion,
    GetLatestWithMetadata,
    GetSchema,
    GetSchemaByGuid,
    Steps,
)
from kontrakt.serde._ruled import RuledReading, other_schema

__all__ = ["DeserializerCore"]


class DeserializerCore(RuledReading, CoreConfig):
    """Format-independent deserializer logic; formats override the hooks at the bottom."""

    protobuf = False
    #: whether ``bare`` is ever filled (the clients skip looking in it otherwise)
    fills_bare = False
    #: whether migration rules can run on what the reader decodes (dicts: Avro, JSON)
    migrates = True

    def __init__(self, conf: Mapping[str, Any] | None, owner: str) -> None:
        CoreConfig.__init__(self, conf, DESERIALIZER_DEFAULTS, owner)
        self.per_subject = self.use_latest or self.latest_metadata is not None
        self.id_deserializer: Callable[..., tuple[SchemaId, int]] = (
            self.conf["schema.id.deserializer"])
        self.readers: dict[Any, Any] = {}
        #: the warm path without a context, for the clients (see bare_deserializer_core):
        #: framing head -> ``parse(payload)``, for the heads in ``readers`` whose reader needs
        #: neither the context nor more than the payload after the head (no rules, no
        #: ``from_dict``); a parse that fails is redone through ``readers`` for its error
        self.bare: dict[bytes, Callable[[bytes], Any]] = {}
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
        if self.stale_at is not None and self.is_stale():
            return MISS
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
            self.bare = {}
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
        except SchemaRegistryError:
            raise
        except Exception as e:
            self.raise_typed(e, data, ctx)
            raise deserialization_error(f"{self.owner}: cannot use the writer schema: {e}", ctx,
                                        data, e) from e
        self.readers[key] = reader
        if self.per_subject:
            # The reader schema is the subject's latest version: reused as long as the
            # registry client reuses it (cache.latest.ttl.sec).
            self.expire_latest()
        return reader

    def forget_latest(self) -> None:
        # New dicts rather than clear(): a thread reading the old ones sees them whole.
        self.readers = {}
        self.bare = {}

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
        self.raise_typed(e, data, ctx)
        raise deserialization_error(f"{self.owner}: cannot decode payload: {e!r}", ctx, data,
                                    e) from e

    def rule_error(self, e: RuleError, ctx: SerializationContext | None,
                   data: bytes) -> SerializationError:
        """The record's deserialization error for the rule failure ``e`` (``.rule`` names
        the rule)."""
        err = deserialization_error(f"{self.owner}: {e}", ctx, data, e)
        err.rule = e.rule
        return err

    def raise_typed(self, e: Exception, data: bytes, ctx: SerializationContext | None) -> None:
        """Raise for ``e`` (called in an ``except`` block) if it is a rule's or a serde's
        error: key/value errors pass through, a rule's failure and a bare
        ``SerializationError`` become the record's error; for anything else, return (the
        caller words it)."""
        if isinstance(e, RuleError):
            raise self.rule_error(e, ctx, data) from e
        if isinstance(e, SerializationError):
            if type(e) is not SerializationError:
                raise e
            raise deserialization_error(str(e), ctx, data, e) from e

    # -- format hooks ----------------------------------------------------------------------
    def parse(self, schema: Any, sid: SchemaId | None) -> Steps:
        """Parse a registry ``Schema`` (fetching its references)."""
        raise NotImplementedError
        yield  # pragma: no cover

    def make_reader(self, writer: Any, reader: Any, sid: SchemaId, convert: bool = True) -> Any:
        """Combine writer and reader schema into ``read(data, offset, ctx) -> value``;
        ``convert=False``: without ``from_dict`` (the rules run first)."""
        raise NotImplementedError
