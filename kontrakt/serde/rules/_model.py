"""The rule engine's vocabulary: the modes, a rule as the registry declares it, what an
executor or action is told (:class:`RuleContext`), and the executor and action base classes with
the two built-in actions. Exported from :mod:`kontrakt.serde.rules`."""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kontrakt.errors import RuleError

WRITE = "WRITE"
READ = "READ"
WRITEREAD = "WRITEREAD"
UPGRADE = "UPGRADE"
DOWNGRADE = "DOWNGRADE"
UPDOWN = "UPDOWN"
_MODES = frozenset((WRITE, READ, WRITEREAD, UPGRADE, DOWNGRADE, UPDOWN))


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule of a ``ruleSet``, read from the registry's JSON rule object.

    Attributes:
        name, doc, kind (``CONDITION`` / ``TRANSFORM``), mode (``WRITE``, ``READ``,
        ``WRITEREAD``, ``UPGRADE``, ``DOWNGRADE``, ``UPDOWN``), type (the executor's name,
        ``CEL``), tags, params, expr, on_success, on_failure, disabled: as the registry's
        ``name``, ``doc``, ``kind``, ``mode``, ``type``, ``tags``, ``params``, ``expr``,
        ``onSuccess``, ``onFailure``, ``disabled``.
    """

    name: str
    kind: str = "CONDITION"
    mode: str = WRITE
    type: str | None = None
    doc: str | None = None
    tags: tuple[str, ...] = ()
    params: Mapping[str, str] = field(default_factory=dict)
    expr: str | None = None
    on_success: str | None = None
    on_failure: str | None = None
    disabled: bool = False

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Rule:
        """Read a registry rule object (``{"name": ..., "kind": ..., ...}``)."""
        return cls(
            name=str(data.get("name") or ""),
            kind=str(data.get("kind") or "CONDITION").upper(),
            mode=str(data.get("mode") or WRITE).upper(),
            type=str(data["type"]) if data.get("type") else None,
            doc=data.get("doc"),
            tags=tuple(data.get("tags") or ()),
            params={str(k): str(v) for k, v in (data.get("params") or {}).items()},
            expr=data.get("expr"),
            on_success=data.get("onSuccess"),
            on_failure=data.get("onFailure"),
            disabled=bool(data.get("disabled", False)),
        )

    def describe(self) -> str:
        """``rule 'name' (kind CONDITION, type CEL, mode WRITE)`` for error messages."""
        return (f"rule {self.name!r} (kind {self.kind}, type {self.type}, mode {self.mode})")


class RuleContext:
    """What an executor or action is told about the rule it runs and the record.

    Attributes:
        ser_ctx: the record's ``SerializationContext`` (or None).
        source: the schema migrated from (migrations only), else None.
        target: the registry ``Schema`` whose rules run.
        subject: the subject, when known.
        rule_mode: the mode being run: ``WRITE``, ``READ``, ``UPGRADE`` or ``DOWNGRADE``.
        rule: the :class:`Rule`.
        index: its position in ``rules``.
        rules: the rules being run, in run order.
        original: the record's bytes when reading, else None.
        schema_view: the format's parsed form of ``target`` that field rules walk with
            (Protobuf: the message ``Descriptor``), or None.
    """

    __slots__ = ("index", "original", "rule", "rule_mode", "rules", "schema_view", "ser_ctx",
                 "source", "subject", "target")

    def __init__(self, ser_ctx: Any, source: Any, target: Any, subject: str | None,
                 rule_mode: str, rule: Rule, index: int, rules: Sequence[Rule],
                 original: bytes | None = None, schema_view: Any = None) -> None:
        self.original = original
        self.schema_view = schema_view
        self.ser_ctx = ser_ctx
        self.source = source
        self.target = target
        self.subject = subject
        self.rule_mode = rule_mode
        self.rule = rule
        self.index = index
        self.rules = rules

    def get_parameter(self, name: str) -> str | None:
        """A rule parameter: the rule's ``params`` first, then the target schema's metadata
        ``properties`` (as Confluent's serdes look them up)."""
        value = self.rule.params.get(name)
        if value is not None:
            return value
        meta = getattr(self.target, "metadata", None)
        props = getattr(meta, "properties", None) or {}
        found = props.get(name)
        return None if found is None else str(found)


class RuleBase(abc.ABC):
    """What executors and actions share: a ``type`` name, ``configure`` and ``close``."""

    def configure(self, client_conf: Mapping[str, Any], rule_conf: Mapping[str, Any]) -> None:
        """Called by each serde built with this registry: the registry client's config and
        the serde's ``rule_conf``. The default does nothing."""
        return None

    @abc.abstractmethod
    def type(self) -> str:
        """The name rules refer to this by (``rule.type`` / ``onFailure``)."""

    def use_client(self, client: Any) -> None:
        """Called by each serde built with this registry with its registry client (an
        executor that talks to the registry, such as ``ENCRYPT``'s, keeps it). The default
        does nothing."""
        return None

    def close(self) -> None:
        """Release resources; the default does nothing."""
        return None


class RuleExecutor(RuleBase):
    """Runs rules of one ``type`` (e.g. ``CEL``)."""

    @abc.abstractmethod
    def transform(self, ctx: RuleContext, message: Any) -> Any:
        """Run ``ctx.rule`` on ``message``: a ``CONDITION`` returns a truth value, a
        ``TRANSFORM`` the new message. Raising fails the rule (its ``onFailure`` runs)."""


class FieldRuleExecutor(RuleExecutor):
    """Runs a rule on each field of a message (Avro, JSON Schema, Protobuf), the fields
    chosen by tags.

    A subclass gives :meth:`new_transform`; a rule with ``tags`` sees only the fields that
    carry one of them (inline ``confluent:tags`` or ``(confluent.field_meta).tags``, or the
    schema metadata's ``tags`` by path),
    a rule without sees every field. Of two ``TRANSFORM`` rules alike in kind, mode, type and
    tags, only the first to write (the last to read) runs, so a pair such as
    encrypt/decrypt applies once, as Confluent's field executors do.
    """

    @abc.abstractmethod
    def new_transform(self, ctx: RuleContext) -> Any:
        """``(ctx, field, value) -> new value`` (a truth value for a ``CONDITION``)."""

    def transform(self, ctx: RuleContext, message: Any) -> Any:
        from kontrakt.serde.rules._fields import walk_fields

        rule = ctx.rule
        if ctx.rule_mode in (WRITE, UPGRADE):
            others = ctx.rules[:ctx.index]
        else:
            others = ctx.rules[ctx.index + 1:]
        if any(_same_tagged_transform(rule, other) for other in others):
            return message if rule.kind == "TRANSFORM" else True
        field_transform = self.new_transform(ctx)
        wanted = frozenset(rule.tags)

        def visit(field: Any, value: Any) -> Any:
            if wanted and wanted.isdisjoint(field.tags):
                return value
            return field_transform(ctx, field, value)
        result = walk_fields(ctx.target, message, visit, rule.kind == "CONDITION",
                             rule.describe(), ctx.schema_view)
        return True if rule.kind == "CONDITION" else result


def _same_tagged_transform(a: Rule, b: Rule) -> bool:
    return (bool(a.tags) and a.kind == "TRANSFORM" and b.kind == a.kind and a.mode == b.mode
            and a.type == b.type and a.tags == b.tags)


class RuleAction(RuleBase):
    """What happens after a rule: ``onSuccess`` / ``onFailure`` name an action by ``type``."""

    @abc.abstractmethod
    def run(self, ctx: RuleContext, message: Any, ex: BaseException | None) -> None:
        """Act on the outcome; ``ex`` is the failure, None on success. Raising a
        :class:`~kontrakt.errors.RuleError` refuses the record."""


class ErrorAction(RuleAction):
    """``ERROR``: refuse the record (the default ``onFailure``)."""

    def type(self) -> str:
        return "ERROR"

    def run(self, ctx: RuleContext, message: Any, ex: BaseException | None) -> None:
        if isinstance(ex, RuleError):
            raise ex
        what = f"{ctx.rule.describe()} failed"
        raise RuleError(f"{what}: {ex!r}" if ex is not None else what) from ex


class NoneAction(RuleAction):
    """``NONE``: carry on (the default ``onSuccess``)."""

    def type(self) -> str:
        return "NONE"

    def run(self, ctx: RuleContext, message: Any, ex: BaseException | None) -> None:
        return None
