"""The ``JSONATA`` rule executor: migration rules (``UPGRADE`` / ``DOWNGRADE``) as JSONata.

Uses jsonata-python (the ``rules`` extra: ``pip install 'kontrakt[rules]'``), the JSONata
library confluent-kafka's own executor uses. The rule's ``expr`` is evaluated with the
message (an Avro record or JSON document as a dict) as its input, and its result is the
migrated message, e.g. ``$merge([$sift($, function($v, $k) {$k != 'size'}),
{'height': $.size}])`` to rename a field on upgrade.

Register it once per process with :meth:`JsonataExecutor.register` (or into a serde's own
``RuleRegistry`` with ``registry.register_executor(JsonataExecutor())``).
"""

from __future__ import annotations

import threading
from typing import Any

from kontrakt._extras import raise_missing_extra

try:
    import jsonata
except ModuleNotFoundError as exc:
    raise_missing_extra(exc, "the JSONata rule executor (kontrakt.serde.rules.jsonata)")

from kontrakt.errors import RuleError
from kontrakt.serde.rules import RuleContext, RuleExecutor, RuleRegistry

__all__ = ["JsonataExecutor"]


class JsonataExecutor(RuleExecutor):
    """Runs ``JSONATA`` rules: a ``TRANSFORM``'s result is the new message, a
    ``CONDITION``'s must be truthy. Compiled expressions are cached per expression."""

    def __init__(self) -> None:
        self._compiled: dict[str, Any] = {}
        self._lock = threading.Lock()

    def type(self) -> str:
        return "JSONATA"

    @classmethod
    def register(cls) -> None:
        """Register a ``JsonataExecutor`` in the process-wide :class:`RuleRegistry`."""
        RuleRegistry.register_rule_executor(cls())

    def transform(self, ctx: RuleContext, message: Any) -> Any:
        """Evaluate ``ctx.rule.expr`` on ``message``.

        Raises:
            RuleError: no ``expr``, or one that does not compile (the evaluation's own errors
                fail the rule too; its ``onFailure`` decides).
        """
        expr = ctx.rule.expr
        if not expr:
            raise RuleError(f"{ctx.rule.describe()} has no expr")
        compiled = self._compiled.get(expr)
        if compiled is None:
            try:
                compiled = jsonata.Jsonata(expr)
            except Exception as e:  # jsonata's JException
                raise RuleError(f"{ctx.rule.describe()}: cannot compile {expr!r}: {e}") from e
            with self._lock:
                self._compiled[expr] = compiled
        return compiled.evaluate(message)
