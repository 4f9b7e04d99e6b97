"""Planning and running rules: which rules of a schema run in a mode (:func:`plan_rules`,
:func:`plan_encoding`, :func:`plan_migrations`), and the :class:`RulePlan` that runs them on
each record with their ``onSuccess`` / ``onFailure`` actions. Exported from
:mod:`kontrakt.serde.rules`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kontrakt.errors import RuleConditionError, RuleError, SerializationError
from kontrakt.serde.rules._model import (
    _MODES,
    DOWNGRADE,
    READ,
    UPDOWN,
    UPGRADE,
    WRITE,
    WRITEREAD,
    FieldRuleExecutor,
    Rule,
    RuleContext,
)
from kontrakt.serde.rules._registry import RuleRegistry


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
    return _phase_plan(schema, "domain_rules", mode, subject, registry)


def plan_encoding(schema: Any, mode: str, subject: str | None,
                  registry: RuleRegistry) -> RulePlan | None:
    """The encoding rules (``encodingRules``, e.g. ``ENCRYPT_PAYLOAD``) of registry
    ``schema`` to run in ``mode`` on the encoded payload: after the format's encoder when
    writing (``WRITE``), before its decoder when reading (``READ``, in reverse order), as
    Confluent's serdes run them. None when none applies (see :func:`plan_rules`).

    Raises:
        RuleError: a rule of the set has a mode that is not one of the six.
    """
    return _phase_plan(schema, "encoding_rules", mode, subject, registry)


def _runs_in_clients(rule_set: Any) -> bool:
    # A ruleSet enabled elsewhere (enableAt other than ALL / CLIENT) is not the serdes' to run.
    return rule_set is not None and rule_set.enable_at in (None, "ALL", "CLIENT")


def _select(raw_rules: Sequence[Mapping[str, Any]], mode: str, last_first: bool) -> list[Rule]:
    """The enabled rules of ``raw_rules`` that apply in ``mode``, reversed when
    ``last_first`` (reading, downgrading); refuses a rule of an unknown mode."""
    rules = []
    for raw in raw_rules:
        rule = Rule.from_dict(raw)
        if rule.mode not in _MODES:
            raise RuleError(f"{rule.describe()}: unknown mode {rule.mode!r}")
        if not rule.disabled and _applies(rule, mode):
            rules.append(rule)
    if last_first:
        rules.reverse()
    return rules


def _phase_plan(schema: Any, phase: str, mode: str, subject: str | None,
                registry: RuleRegistry) -> RulePlan | None:
    # phase: the ruleSet attribute holding the rules (domain_rules, encoding_rules)
    rule_set: Any = getattr(schema, "rule_set", None)
    raw_rules = getattr(rule_set, phase) if rule_set is not None else None
    if not raw_rules or not _runs_in_clients(rule_set):
        return None
    rules = _select(raw_rules, mode, mode == READ)
    return RulePlan(rules, mode, schema, None, subject, registry) if rules else None


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
    rule_set: Any = getattr(owner, "rule_set", None)
    if not _runs_in_clients(rule_set):
        return None
    rules = _select(rule_set.migration_rules, step.mode, step.mode == DOWNGRADE)
    if not rules:
        return None
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
    rule_set: Any = getattr(schema, "rule_set", None)
    if not _runs_in_clients(rule_set):
        return []
    rules = [Rule.from_dict(r) for r in rule_set.migration_rules]
    return [r for r in rules if not r.disabled and r.mode in (UPGRADE, DOWNGRADE, UPDOWN)]
