"""Data-contract rules: executors and actions registered like confluent-kafka's, and the engine
the registry-bound serdes run them with.

A registered schema may carry a ``ruleSet`` (``domainRules``, ``migrationRules``). A serde
plans the rules of the schema it writes or reads with once per schema (:func:`plan_rules`),
and runs the plan on every record of it. A schema without applicable rules gets no plan, so
its records pay nothing. Executors are looked up by the rule's ``type`` (``CEL``,
``CEL_FIELD``, ...) in a :class:`RuleRegistry` (the process-wide one unless a serde is given
its own); a rule whose type has no executor fails the record (fail closed), as does a
``CONDITION`` that is false, unless the rule's ``onFailure`` says ``NONE``.

A ``ruleSet``'s ``encodingRules`` (:func:`plan_encoding`) run on the encoded payload instead:
after the format's encoder when writing, before its decoder when reading.

Register the CEL executor with ``kontrakt.serde.rules.cel.CelExecutor.register()``, field-level
encryption with ``kontrakt.serde.rules.encryption.FieldEncryptionExecutor.register()``,
whole-payload encryption with ``...encryption.PayloadEncryptionExecutor.register()``.
"""

from __future__ import annotations

import abc
import inspect
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kontrakt.errors import RuleConditionError, RuleError, SerializationError

__all__ = [
    "DOWNGRADE",
    "READ",
    "UPDOWN",
    "UPGRADE",
    "WRITE",
    "WRITEREAD",
    "ErrorAction",
    "FieldRuleExecutor",
    "Migration",
    "NoneAction",
    "Rule",
    "RuleAction",
    "RuleBase",
    "RuleConditionError",
    "RuleContext",
    "RuleError",
    "RuleExecutor",
    "RulePlan",
    "RuleRegistry",
    "plan_encoding",
    "plan_migrations",
    "plan_rules",
]

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


class RuleRegistry:
    """Executors and actions by type name, shared by the serdes built with it (thread-safe).

    ``RuleRegistry.get_global_instance()`` is the process-wide registry serdes use unless
    given their own (``rule_registry=``); ``register_rule_executor`` /
    ``register_rule_action`` add to it.
    """

    def __init__(self) -> None:
        self._executors: dict[str, RuleExecutor] = {}
        self._actions: dict[str, RuleAction] = {}
        self._lock = threading.Lock()

    def register_executor(self, executor: RuleExecutor) -> None:
        """Add (or replace) the executor for ``executor.type()``."""
        with self._lock:
            self._executors[executor.type().upper()] = executor

    def get_executor(self, name: str) -> RuleExecutor | None:
        """The executor for a rule type, or None."""
        return self._executors.get(name.upper())  # one dict read: atomic, no lock needed

    def get_executors(self) -> list[RuleExecutor]:
        """All executors."""
        with self._lock:
            return list(self._executors.values())

    def register_action(self, action: RuleAction) -> None:
        """Add (or replace) the action for ``action.type()``."""
        with self._lock:
            self._actions[action.type().upper()] = action

    def get_action(self, name: str) -> RuleAction | None:
        """The action named ``name``: ``ERROR`` and ``NONE`` are built in."""
        name = name.upper()
        if name == "ERROR":
            return _ERROR
        if name == "NONE":
            return _NONE
        return self._actions.get(name)

    def get_actions(self) -> list[RuleAction]:
        """All registered actions (the built-in ``ERROR`` and ``NONE`` aside)."""
        with self._lock:
            return list(self._actions.values())

    def clear(self) -> None:
        """Forget every executor and action."""
        with self._lock:
            self._executors.clear()
            self._actions.clear()

    @staticmethod
    def get_global_instance() -> RuleRegistry:
        """The process-wide registry."""
        return _GLOBAL

    @staticmethod
    def register_rule_executor(executor: RuleExecutor) -> None:
        """Register ``executor`` in the process-wide registry."""
        _GLOBAL.register_executor(executor)

    @staticmethod
    def register_rule_action(action: RuleAction) -> None:
        """Register ``action`` in the process-wide registry."""
        _GLOBAL.register_action(action)


_ERROR = ErrorAction()
_NONE = NoneAction()
_GLOBAL = RuleRegistry()


def _applies(rule: Rule, mode: str) -> bool:
    if rule.mode == WRITEREAD:
        return mode in (WRITE, READ)
    if rule.mode == UPDOWN:
        return mode in (UPGRADE, DOWNGRADE)
    return rule.mode == mode


class RulePlan:
    """The rules of one schema that run in one mode, in run order; built once per schema by
    :func:`plan_rules` and run on every record with :meth:`apply`.

    ``schema_view`` is set by a serde whose field rules need the parsed target schema
    (Protobuf: the message ``Descriptor`` naming and tagging the fields); None otherwise.
    """

    __slots__ = ("mode", "registry", "rules", "schema_view", "source", "subject", "target")

    def __init__(self, rules: Sequence[Rule], mode: str, target: Any, source: Any,
                 subject: str | None, registry: RuleRegistry) -> None:
        self.schema_view: Any = None
        self.rules = tuple(rules)
        self.mode = mode
        self.target = target
        self.source = source
        self.subject = subject
        self.registry = registry

    def walks_fields(self) -> bool:
        """Whether a rule of the plan runs on fields (its executor is a
        :class:`FieldRuleExecutor`), so that the serde must supply ``schema_view``."""
        return any(isinstance(self.registry.get_executor(r.type), FieldRuleExecutor)
                   for r in self.rules if r.type)

    def apply(self, message: Any, ser_ctx: Any, original: bytes | None = None) -> Any:
        """Run every rule on ``message``; returns the (transformed) message. ``original``:
        the record's bytes, when reading (for actions such as ``DLQ``).

        A record carrying a ``__rule.name`` header (one replayed from a dead letter queue)
        skips the rule of that name, so that it does not fail again.

        Raises:
            RuleError: a rule refused the message or could not run, and its ``onFailure``
                action refused it (the default, ``ERROR``); its ``.rule`` is the
                :class:`Rule`.
        """
        if message is None:
            return message
        replayed = _replayed_rule(ser_ctx)
        for index, rule in enumerate(self.rules):
            if replayed is not None and rule.name == replayed:
                continue
            ctx = RuleContext(ser_ctx, self.source, self.target, self.subject, self.mode, rule,
                              index, self.rules, original, self.schema_view)
            try:
                message = self._run(ctx, rule, message)
            except RuleError as e:
                if e.rule is None:
                    e.rule = rule
                raise
        return message

    def _run(self, ctx: RuleContext, rule: Rule, message: Any) -> Any:
        executor = self.registry.get_executor(rule.type) if rule.type else None
        if executor is None:
            why = (f"no rule executor is registered for type {rule.type!r}" if rule.type
                   else "the rule has no type")
            self._act(ctx, rule.on_failure, "ERROR", message,
                      RuleError(f"{rule.describe()}: {why}"))
            return message
        try:
            result = executor.transform(ctx, message)
            if rule.kind == "CONDITION":
                if not result:
                    raise RuleConditionError(_condition_message(rule))
            elif rule.kind == "TRANSFORM":
                message = result
        except SerializationError:
            raise  # an executor's own typed error passes as it is
        except Exception as e:
            self._act(ctx, rule.on_failure, "ERROR", message, e)
            return message
        if message is None:  # a transform that dropped the message fails
            self._act(ctx, rule.on_failure, "ERROR", message,
                      RuleError(f"{rule.describe()}: the transform gave no message"))
        else:
            self._act(ctx, rule.on_success, "NONE", message, None)
        return message

    def _act(self, ctx: RuleContext, name: str | None, default: str, message: Any,
             ex: BaseException | None) -> None:
        name = _action_name(ctx.rule, self.mode, name) or default
        action = self.registry.get_action(name)
        if action is None:
            raise RuleError(f"{ctx.rule.describe()}: no rule action is registered for "
                            f"{name!r}") from ex
        action.run(ctx, message, ex)


#: the header naming the rule that sent a record to a dead letter queue (Confluent's name)
DLQ_RULE_NAME_HEADER = "__rule.name"


def _replayed_rule(ser_ctx: Any) -> str | None:
    headers = getattr(ser_ctx, "headers", None)
    if not headers:
        return None
    items = headers.items() if isinstance(headers, Mapping) else headers
    found = None
    for key, value in items:  # the last occurrence wins, as Confluent's serdes read it
        if key == DLQ_RULE_NAME_HEADER:
            found = value
    if isinstance(found, (bytes, bytearray)):
        try:
            return bytes(found).decode()
        except UnicodeDecodeError:
            return None
    return found if isinstance(found, str) else None


def _condition_message(rule: Rule) -> str:
    if rule.doc:
        return f"{rule.describe()} refused the message: {rule.doc}"
    if rule.expr:
        return f"{rule.describe()} refused the message: {rule.expr} is false"
    return f"{rule.describe()} refused the message"


def _action_name(rule: Rule, mode: str, name: str | None) -> str | None:
    # A WRITEREAD / UPDOWN rule may name two actions, "write_or_upgrade,read_or_downgrade".
    if not name:
        return None
    if rule.mode in (WRITEREAD, UPDOWN) and "," in name:
        first, _, second = name.partition(",")
        return (first if mode in (WRITE, UPGRADE) else second).strip() or None
    return name.strip()


def plan_rules(schema: Any, mode: str, subject: str | None,
               registry: RuleRegistry) -> RulePlan | None:
    """The domain rules of registry ``schema`` to run in ``mode`` (``WRITE`` or ``READ``),
    or None when none applies: no ``ruleSet``, all disabled, none for this mode, or a
    ``ruleSet`` enabled elsewhere than in clients (``enableAt`` other than ``ALL`` /
    ``CLIENT``). ``READ`` runs the rules in reverse order, as Confluent's serdes do.

    Raises:
        RuleError: a rule of the set has a mode that is not one of the six.
    """
    rule_set = getattr(schema, "rule_set", None)
    if rule_set is None or not rule_set.domain_rules:
        return None
    return _phase_plan(schema, rule_set.domain_rules, mode, subject, registry)


def plan_encoding(schema: Any, mode: str, subject: str | None,
                  registry: RuleRegistry) -> RulePlan | None:
    """The encoding rules (``encodingRules``, e.g. ``ENCRYPT_PAYLOAD``) of registry
    ``schema`` to run in ``mode`` on the encoded payload: after the format's encoder when
    writing (``WRITE``), before its decoder when reading (``READ``, in reverse order), as
    Confluent's serdes run them. None when none applies (see :func:`plan_rules`).

    Raises:
        RuleError: a rule of the set has a mode that is not one of the six.
    """
    rule_set = getattr(schema, "rule_set", None)
    if rule_set is None or not rule_set.encoding_rules:
        return None
    return _phase_plan(schema, rule_set.encoding_rules, mode, subject, registry)


def _phase_plan(schema: Any, raw_rules: Sequence[Mapping[str, Any]], mode: str,
                subject: str | None, registry: RuleRegistry) -> RulePlan | None:
    if schema.rule_set.enable_at not in (None, "ALL", "CLIENT"):
        return None
    rules = []
    for raw in raw_rules:
        rule = Rule.from_dict(raw)
        if rule.mode not in _MODES:
            raise RuleError(f"{rule.describe()}: unknown mode {rule.mode!r}")
        if not rule.disabled and _applies(rule, mode):
            rules.append(rule)
    if not rules:
        return None
    if mode == READ:
        rules.reverse()
    return RulePlan(rules, mode, schema, None, subject, registry)


@dataclass(frozen=True, slots=True)
class Migration:
    """One step between adjacent versions of a subject, run in ``mode`` (``UPGRADE`` from
    ``source`` to a newer ``target``, ``DOWNGRADE`` to an older one); both are registry
    ``Schema`` values."""

    mode: str
    source: Any
    target: Any


def _migration_plan(step: Migration, subject: str | None,
                    registry: RuleRegistry) -> RulePlan | None:
    # UPGRADE runs the newer (target) schema's rules; DOWNGRADE the newer (source) schema's,
    # in reverse order, as Confluent's serdes do.
    owner = step.target if step.mode == UPGRADE else step.source
    rule_set = getattr(owner, "rule_set", None)
    if rule_set is None or rule_set.enable_at not in (None, "ALL", "CLIENT"):
        return None
    rules = []
    for raw in rule_set.migration_rules:
        rule = Rule.from_dict(raw)
        if rule.mode not in _MODES:
            raise RuleError(f"{rule.describe()}: unknown mode {rule.mode!r}")
        if not rule.disabled and _applies(rule, step.mode):
            rules.append(rule)
    if not rules:
        return None
    if step.mode == DOWNGRADE:
        rules.reverse()
    return RulePlan(rules, step.mode, step.target, step.source, subject, registry)


def plan_migrations(steps: Sequence[Migration], subject: str | None,
                    registry: RuleRegistry) -> RulePlan | None:
    """The migration rules of ``steps``, in order, as one plan; None when no step has any.

    Raises:
        RuleError: a rule of a set has a mode that is not one of the six.
    """
    plans = [p for p in (_migration_plan(s, subject, registry) for s in steps) if p is not None]
    if not plans:
        return None
    if len(plans) == 1:
        return plans[0]
    return _Chain(plans)


class _Chain(RulePlan):
    """Several migration steps run one after the other."""

    __slots__ = ("plans",)

    def __init__(self, plans: list[RulePlan]) -> None:
        first = plans[0]
        RulePlan.__init__(self, [r for p in plans for r in p.rules], first.mode, first.target,
                          first.source, first.subject, first.registry)
        self.plans = plans

    def apply(self, message: Any, ser_ctx: Any, original: bytes | None = None) -> Any:
        for plan in self.plans:
            message = plan.apply(message, ser_ctx, original)
        return message


def migration_rules(schema: Any) -> list[Rule]:
    """The enabled ``UPGRADE`` / ``DOWNGRADE`` / ``UPDOWN`` rules of ``schema``."""
    rule_set = getattr(schema, "rule_set", None)
    if rule_set is None or rule_set.enable_at not in (None, "ALL", "CLIENT"):
        return []
    rules = [Rule.from_dict(r) for r in rule_set.migration_rules]
    return [r for r in rules if not r.disabled and r.mode in (UPGRADE, DOWNGRADE, UPDOWN)]


def configure_registry(registry: RuleRegistry, client: Any,
                       rule_conf: Mapping[str, Any] | None) -> None:
    """Hand every executor and action of ``registry`` the registry client's config and the
    serde's ``rule_conf`` (as Confluent's serdes do when built)."""
    config = getattr(client, "config", None)
    client_conf: Mapping[str, Any] = {}
    if callable(config) and not inspect.iscoroutinefunction(config):
        try:
            got = config()
            client_conf = got if isinstance(got, Mapping) else {}
        except Exception:  # a client without a readable config still gets the rule_conf
            client_conf = {}
    for member in [*registry.get_executors(), *registry.get_actions()]:
        member.configure(client_conf, dict(rule_conf or {}))
        use_client = getattr(member, "use_client", None)  # absent on duck-typed executors
        if use_client is not None:
            use_client(client)
