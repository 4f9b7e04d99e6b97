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

from kontrakt.errors import RuleConditionError, RuleError

# The engine lives in private rooms: _model (modes, Rule, the executor and action bases),
# _registry (RuleRegistry), _engine (plans). The names below without a place in __all__ are
# for kontrakt's own serdes and rule modules.
from kontrakt.serde.rules._engine import (
    DLQ_RULE_NAME_HEADER as DLQ_RULE_NAME_HEADER,
)
from kontrakt.serde.rules._engine import (
    Migration,
    RulePlan,
    plan_encoding,
    plan_migrations,
    plan_rules,
)
from kontrakt.serde.rules._engine import migration_rules as migration_rules
from kontrakt.serde.rules._model import (
    DOWNGRADE,
    READ,
    UPDOWN,
    UPGRADE,
    WRITE,
    WRITEREAD,
    ErrorAction,
    FieldRuleExecutor,
    NoneAction,
    Rule,
    RuleAction,
    RuleBase,
    RuleContext,
    RuleExecutor,
)
from kontrakt.serde.rules._registry import RuleRegistry
from kontrakt.serde.rules._registry import configure_registry as configure_registry

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
