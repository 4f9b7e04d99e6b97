"""The :class:`RuleRegistry`: executors and actions by type name, the process-wide one, and
how a serde hands them its registry client. Exported from :mod:`kontrakt.serde.rules`."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Mapping
from typing import Any

from kontrakt.serde.rules._model import ErrorAction, NoneAction, RuleAction, RuleExecutor


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
