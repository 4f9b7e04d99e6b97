"""The registry's config, mode and context endpoints, as a mixin of :class:`RegistryState`.

Kept apart from the schema logic (:mod:`._reads`, :mod:`._writes`); every change goes
through the state's journal (``_commit``) like any other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kontrakt.registry._errors import (
    InvalidCompatibilityLevelError,
    InvalidModeError,
    OperationNotPermittedError,
    SchemaRegistryError,
    SubjectNotFoundError,
)
from kontrakt.registry._models import CompatibilityLevel, Mode
from kontrakt.registry.server._store import DEFAULT_CONTEXT, ContextRec

__all__ = ["SettingsMixin", "qualify", "split_subject", "subject_not_found"]


def split_subject(qualified: str) -> tuple[str, str]:
    """``":.ctx:name"`` → ``(".ctx", "name")``; unqualified names are in the default context."""
    if qualified.startswith(":.") and ":" in qualified[2:]:
        ctx, _, name = qualified[1:].partition(":")
        return ctx, name
    return DEFAULT_CONTEXT, qualified


def qualify(ctx: str, name: str) -> str:
    """Inverse of :func:`split_subject`."""
    return name if ctx == DEFAULT_CONTEXT else f":{ctx}:{name}"


def subject_not_found(subject: str) -> SubjectNotFoundError:
    return SubjectNotFoundError(404, 40401, f"Subject '{subject}' not found.")


class SettingsMixin:
    """GET/PUT/DELETE /config and /mode, DELETE /contexts: called under the state's lock."""

    if TYPE_CHECKING:  # provided by RegistryState
        @property
        def contexts(self) -> dict[str, ContextRec]: ...

        @property
        def global_config(self) -> dict[str, Any]: ...

        @property
        def global_mode(self) -> str: ...

        def _ctx(self, subject: str, create: bool = False) -> tuple[ContextRec, str]: ...

        def _commit(self, ops: list[dict[str, Any]]) -> None: ...

        def subjects(self, prefix: str, deleted: bool, deleted_only: bool) -> list[str]: ...

    def get_config(self, subject: str | None, default_to_global: bool) -> dict[str, Any]:
        """GET /config[/subject]."""
        if subject is None:
            return dict(self.global_config)
        ctx, name = self._ctx(subject)
        sub = ctx.subjects.get(name)
        if sub is not None and sub.config:
            return dict(sub.config)
        if default_to_global:
            return dict(self.global_config)
        raise SchemaRegistryError(
            404, 40408, f"Subject '{subject}' does not have subject-level compatibility "
            "configured")

    def set_config(self, subject: str | None, body: Any) -> dict[str, Any]:
        """PUT /config[/subject]."""
        if not isinstance(body, dict):
            raise SchemaRegistryError(422, 422, "Request body must be a JSON object")
        raw = body.get("compatibility", body.get("compatibilityLevel"))
        stored: dict[str, Any] = {}
        if raw is not None:
            try:
                level = CompatibilityLevel(str(raw).upper()).value
            except ValueError:
                raise InvalidCompatibilityLevelError(
                    422, 42203, "Invalid compatibility level. Valid values are none, backward, "
                    "forward, full, backward_transitive, forward_transitive, and "
                    "full_transitive") from None
            stored["compatibilityLevel"] = level
        for key in ("compatibilityGroup", "normalize", "defaultMetadata", "overrideMetadata",
                    "defaultRuleSet", "overrideRuleSet"):
            if key in body:
                stored[key] = body[key]
        if subject is None:
            self._commit([{"op": "global_config", "config": {**self.global_config, **stored}}])
        else:
            ctx_name, name = split_subject(subject)
            sub = self._ctx(subject)[0].subjects.get(name)
            self._commit([{"op": "subject_config", "ctx": ctx_name, "subject": name,
                           "config": {**((sub.config if sub else None) or {}), **stored}}])
        answer = {k: v for k, v in stored.items() if k != "compatibilityLevel"}
        if "compatibilityLevel" in stored:
            answer["compatibility"] = stored["compatibilityLevel"]
        return answer

    def delete_config(self, subject: str | None) -> dict[str, Any]:
        """DELETE /config[/subject]: returns the config that was removed."""
        if subject is None:
            old = self.global_config
            self._commit([{"op": "global_config", "config": {"compatibilityLevel": "BACKWARD"}}])
            return old
        ctx, name = self._ctx(subject)
        sub = ctx.subjects.get(name)
        if sub is None:
            raise subject_not_found(subject)
        old = sub.config or {}
        self._commit([{"op": "subject_config", "ctx": split_subject(subject)[0],
                       "subject": name, "config": None}])
        return old

    def get_mode(self, subject: str | None, default_to_global: bool) -> dict[str, Any]:
        """GET /mode[/subject]."""
        if subject is None:
            return {"mode": self.global_mode}
        ctx, name = self._ctx(subject)
        sub = ctx.subjects.get(name)
        if sub is not None and sub.mode:
            return {"mode": sub.mode}
        if default_to_global:
            return {"mode": self.global_mode}
        raise SchemaRegistryError(
            404, 40409, f"Subject '{subject}' does not have subject-level mode configured")

    def set_mode(self, subject: str | None, body: Any, force: bool) -> dict[str, Any]:
        """PUT /mode[/subject]."""
        if not isinstance(body, dict):
            raise SchemaRegistryError(422, 422, "Request body must be a JSON object")
        try:
            mode = Mode(str(body.get("mode", "")).upper()).value
        except ValueError:
            raise InvalidModeError(
                422, 42204, "Invalid mode. Valid values are READWRITE, READONLY, "
                "READONLY_OVERRIDE and IMPORT.") from None
        if mode == "IMPORT" and not force:
            has = self.subjects("", False, False)
            if subject is not None:
                has = [s for s in has if s == subject]
            if has:
                raise OperationNotPermittedError(
                    422, 42205, "Cannot import since found existing subjects")
        if subject is None:
            self._commit([{"op": "global_mode", "mode": mode}])
        else:
            ctx_name, name = split_subject(subject)
            self._commit([{"op": "subject_mode", "ctx": ctx_name, "subject": name,
                           "mode": mode}])
        return {"mode": mode}

    def delete_mode(self, subject: str | None) -> dict[str, Any]:
        """DELETE /mode[/{subject}]: returns the mode that was removed (the global mode
        goes back to READWRITE)."""
        if subject is None:
            old_global = self.global_mode
            self._commit([{"op": "global_mode", "mode": "READWRITE"}])
            return {"mode": old_global}
        ctx, name = self._ctx(subject)
        sub = ctx.subjects.get(name)
        if sub is None or sub.mode is None:
            raise subject_not_found(subject)
        old = sub.mode
        self._commit([{"op": "subject_mode", "ctx": split_subject(subject)[0],
                       "subject": name, "mode": None}])
        return {"mode": old}

    def delete_context(self, name: str) -> None:
        """DELETE /contexts/{context}: forget an empty context (its id sequence too).

        Raises:
            SchemaRegistryError: (404) no such context; (422, 42205) the default context,
                or one still holding subjects (soft-deleted ones included: delete them
                permanently first).
        """
        name = name if name.startswith(".") else f".{name}"
        ctx = self.contexts.get(name)
        if ctx is None:
            raise SchemaRegistryError(404, 404, f"Context '{name}' not found")
        if name == DEFAULT_CONTEXT:
            raise OperationNotPermittedError(422, 42205, "The default context cannot be "
                                             "deleted")
        if ctx.subjects:
            raise OperationNotPermittedError(
                422, 42205, f"Context '{name}' is not empty: permanently delete its "
                f"subjects first ({', '.join(sorted(ctx.subjects)[:5])})")
        self._commit([{"op": "drop_context", "ctx": name}])

    def context_names(self) -> list[str]:
        """GET /contexts."""
        names = [c for c, ctx in self.contexts.items() if c == DEFAULT_CONTEXT or ctx.subjects]
        return sorted(names)
