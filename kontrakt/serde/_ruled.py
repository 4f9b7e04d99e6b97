"""Reading under a rule set: the READ domain rules and the migrations between versions.

A mixin of the deserializer core (:mod:`kontrakt.serde._deserializer_core`): everything here
runs once per writer schema id (and subject), when the reader is built, inside the sans-I/O
core, so the sync and async shells share it; the readers it returns run the planned rules per
record.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from kontrakt.errors import RuleError, SchemaRegistryError, SerializationError
from kontrakt.serde._context import SerializationContext
from kontrakt.serde._framing import SchemaId
from kontrakt.serde._registry_io import GetVersion, LookupSchema, Steps
from kontrakt.serde.rules import (
    DOWNGRADE,
    READ,
    UPGRADE,
    Migration,
    RulePlan,
    RuleRegistry,
    migration_rules,
    plan_encoding,
    plan_migrations,
    plan_rules,
)

__all__ = ["RuledReading", "other_schema"]


def other_schema(latest: Any, sid: SchemaId) -> bool:
    """Whether the subject's latest version is another schema than the writer's."""
    if sid.id is not None:
        return getattr(latest, "schema_id", sid.id) != sid.id
    return str(getattr(latest, "guid", sid.guid)) != str(sid.guid)



class _Read:
    """A reader that can be told the record's original bytes apart from the bytes it decodes:
    after the encoding rules (``ENCRYPT_PAYLOAD``) the two differ, and the rules run after
    must see the record as it arrived (a DLQ gets those bytes, as from Confluent's
    deserializers)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[bytes, int, SerializationContext | None, bytes], Any]
                 ) -> None:
        self.fn = fn

    def __call__(self, data: bytes, offset: int, ctx: SerializationContext | None,
                 original: bytes | None = None) -> Any:
        return self.fn(data, offset, ctx, data if original is None else original)


def _told_original(reader: Any) -> Callable[[bytes, int, SerializationContext | None, bytes],
                                             Any]:
    """``reader`` as a function of ``(data, offset, ctx, original)``."""
    if isinstance(reader, _Read):
        return reader.fn
    return lambda data, offset, ctx, original: reader(data, offset, ctx)


class RuledReading:
    """The rule-running half of a deserializer core; the core supplies ``make_reader``,
    ``subject``, ``fetch_format`` and ``rule_registry``."""

    fetch_format: str | None = None
    rule_registry: RuleRegistry

    def make_reader(self, writer: Any, reader: Any, sid: SchemaId, convert: bool = True) -> Any:
        raise NotImplementedError

    def subject(self, ctx: SerializationContext | None, data: bytes | None) -> str | None:
        raise NotImplementedError

    def find_migrations(self, subject: str, writer: Any, latest: Any) -> Steps:
        """The steps from the writer's version of ``subject`` to ``latest`` (each adjacent
        pair of versions, as Confluent's deserializers walk them), or None when the writer's
        version cannot be found under the subject."""
        try:
            source = yield LookupSchema(subject, writer, False, True)
        except SchemaRegistryError as e:
            if e.http_status_code == 404:
                return None
            raise
        if source.version is None or latest.version is None:
            return None
        if source.version == latest.version:
            return []
        mode = UPGRADE if source.version < latest.version else DOWNGRADE
        first, last = (source, latest) if mode == UPGRADE else (latest, source)
        chain = [first]
        for version in range(first.version + 1, last.version):
            chain.append((yield GetVersion(subject, version, self.fetch_format)))
        chain.append(last)
        steps = [Migration(mode, older.schema, newer.schema) if mode == UPGRADE
                 else Migration(mode, newer.schema, older.schema)
                 for older, newer in itertools.pairwise(chain)]
        if mode == DOWNGRADE:
            steps.reverse()
        return steps

    def ruled_reader(self, writer: Any, latest: Any, writer_parsed: Any, reader_parsed: Any,
                     sid: SchemaId, ctx: SerializationContext | None, data: bytes,
                     steps: list[Migration] | None = None) -> Any:
        """The reader for ``sid``, running the writer schema's encoding rules (see
        :meth:`with_encoding`), the migrations of ``steps`` (see :meth:`find_migrations`)
        and the READ rules :meth:`read_plan` finds.

        With migrations, the payload is decoded with the writer's schema alone and the
        migration rules turn it into the latest schema's shape (as Confluent's deserializers
        do); without, the format resolves writer to reader schema itself.

        Raises:
            RuleError: a rule set that cannot be run (an unknown mode), or migration rules
                on the way that could not be walked (the writer's schema is not a version of
                the subject; a Protobuf deserializer): refused rather than skipped.
        """
        subject = self._rule_subject(ctx, data)
        reader = self._ruled(writer, latest, writer_parsed, reader_parsed, sid, ctx, data, steps,
                             subject)
        return self.with_encoding(reader, writer, subject)

    def with_encoding(self, reader: Any, writer: Any, subject: str | None) -> Any:
        """``reader`` preceded by the writer schema's encoding rules (``ENCRYPT_PAYLOAD``),
        run on the payload before it is decoded, as Confluent's deserializers do; ``reader``
        itself when there are none.

        Raises:
            RuleError: a rule set that cannot be run (an unknown mode).
        """
        plan = plan_encoding(writer, READ, subject, self.rule_registry)
        if plan is None:
            return reader
        apply = plan.apply
        inner = _told_original(reader)

        def decoded(data: bytes, offset: int, ctx: SerializationContext | None,
                    original: bytes) -> Any:
            payload = apply(data[offset:], ctx, original)
            if not isinstance(payload, (bytes, bytearray)):
                raise RuleError(f"the encoding rules of the writer's schema gave "
                                f"{type(payload).__name__}, not bytes")
            # The framing head stays, so that the rules after see a whole record; they are
            # told the record as it arrived.
            return inner(data[:offset] + payload, offset, ctx, original)
        return _Read(decoded)

    def _ruled(self, writer: Any, latest: Any, writer_parsed: Any, reader_parsed: Any,
               sid: SchemaId, ctx: SerializationContext | None, data: bytes,
               steps: list[Migration] | None, subject: str | None) -> Any:
        migrate = None
        if latest is not None and other_schema(latest, sid):
            if steps is None:
                pending = migration_rules(writer) + migration_rules(latest.schema)
                if pending:
                    err = RuleError(f"{pending[0].describe()}: cannot walk the versions from "
                                    "the writer's schema to the latest one; refusing to read "
                                    "without its migration rules")
                    err.rule = pending[0]
                    raise err
            else:
                migrate = plan_migrations(steps, subject, self.rule_registry)
        plan = self.read_plan(writer, latest, sid, ctx, data)
        if plan is not None and plan.walks_fields():
            plan.schema_view = self.rule_view(
                reader_parsed if latest is not None else writer_parsed, sid)
        if plan is None and migrate is None:
            return self.make_reader(writer_parsed, reader_parsed, sid)
        if migrate is None:
            return self.with_rules(self.make_reader(writer_parsed, reader_parsed, sid,
                                                    convert=False), plan)
        raw = self.migration_reader(writer_parsed, sid)
        finish = self.migration_result(writer_parsed, reader_parsed, sid)
        run = migrate.apply

        def migrated(data: bytes, offset: int, ctx: SerializationContext | None,
                     original: bytes) -> Any:
            value = run(raw(data, offset, ctx), ctx, original)
            return value if finish is None else finish(value)
        return self.with_rules(_Read(migrated), plan)

    # -- format hooks (the defaults suit formats that decode to dicts) ---------------------
    def rule_view(self, parsed: Any, sid: SchemaId) -> Any:
        """What field rules walk with, from the parsed schema read with (see
        ``RulePlan.schema_view``); None by default (the walk reads the registry schema)."""
        return None

    def migration_reader(self, writer: Any, sid: SchemaId) -> Any:
        """``read(data, offset, ctx)`` giving what migration rules take (a dict), decoded
        with the parsed writer schema alone."""
        return self.make_reader(writer, writer, sid, convert=False)

    def migration_result(self, writer: Any, reader: Any, sid: SchemaId) -> Any:
        """``finish(value)`` turning what the migration rules give into the reader's value,
        or None to keep it as it is."""
        return None

    def _rule_subject(self, ctx: SerializationContext | None, data: bytes) -> str | None:
        try:
            return self.subject(ctx, data)
        except SerializationError:
            return None  # record strategies without a record name: the rules still run

    def read_plan(self, writer: Any, latest: Any, sid: SchemaId,
                  ctx: SerializationContext | None, data: bytes) -> RulePlan | None:
        """The READ rules of the schema read with: the subject's latest (``use.latest.*``),
        else a reader schema given to the constructor, else the writer's (as Confluent's
        deserializers choose); None when none applies. Planned once per schema id.

        Raises:
            RuleError: a rule set that cannot be run (an unknown mode).
        """
        local = getattr(self, "schema", None)
        target = latest.schema if latest is not None else (
            local if getattr(local, "schema_str", None) else writer)
        return plan_rules(target, READ, self._rule_subject(ctx, data), self.rule_registry)

    def with_rules(self, raw: Any, plan: RulePlan | None) -> Any:
        """``raw`` (a reader without ``from_dict``) followed by ``plan`` (if any), then
        ``from_dict``."""
        from_dict = getattr(self, "from_dict", None)
        apply = plan.apply if plan is not None else None
        inner = _told_original(raw)

        def read(data: bytes, offset: int, ctx: SerializationContext | None,
                 original: bytes) -> Any:
            value = inner(data, offset, ctx, original)
            if apply is not None:
                value = apply(value, ctx, original)
            return value if from_dict is None else from_dict(value, ctx)
        return _Read(read)
