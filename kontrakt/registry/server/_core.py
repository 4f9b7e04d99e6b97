"""The core every room of :class:`~kontrakt.registry.server.RegistryState` builds on.

:class:`StateCore` holds the data (the model of :mod:`._store`), the journal every change
goes through (:meth:`StateCore._commit`), the locks (:attr:`StateCore.lock` for reads and
the short commits of writes; one lock per subject to serialize its writes), and the lookups
the reads and writes share: subjects and versions by name, their JSON answers, the config
and mode in force, the referrers of a version, and what a compatibility check compares.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kontrakt.registry._errors import (
    OperationNotPermittedError,
    VersionNotFoundError,
)
from kontrakt.registry._models import Schema, SchemaReference
from kontrakt.registry.server._checking import (
    CompatibilityChecker,
    ReferenceResolver,
    VersionedSchema,
    default_compatibility_checker,
)
from kontrakt.registry.server._settings import qualify, split_subject, subject_not_found
from kontrakt.registry.server._store import (
    DEFAULT_CONTEXT,
    ContextRec,
    Journal,
    SchemaRec,
    Store,
    SubjectRec,
    VersionRec,
    apply_op,
    snapshot_ops,
)

__all__ = ["StateCore"]


def _version_not_found(subject: str, version: object) -> VersionNotFoundError:
    return VersionNotFoundError(404, 40402, f"Version {version} not found.")


class StateCore:
    """The data, journal, locks and shared lookups (arguments: see
    :class:`~kontrakt.registry.server.RegistryState`)."""

    def __init__(self, path: str | None = None,
                 checker: CompatibilityChecker | None = None, fsync: bool = True) -> None:
        self.lock = threading.RLock()
        self.path = path
        self.checker: CompatibilityChecker = checker or default_compatibility_checker
        self.store = Store()
        self._subject_locks: dict[str, threading.Lock] = {}
        self._journal: Journal | None = None
        if path:
            journal = Journal(path, fsync)
            for op in journal.load():
                apply_op(self.store, op)
            journal.rewrite(snapshot_ops(self.store))
            self._journal = journal

    @property
    def contexts(self) -> dict[str, ContextRec]:
        return self.store.contexts

    @property
    def global_config(self) -> dict[str, Any]:
        return self.store.global_config

    @property
    def global_mode(self) -> str:
        return self.store.global_mode

    # ---------------------------------------------------------------- persistence
    def _commit(self, ops: list[dict[str, Any]]) -> None:
        """Record ``ops`` in the journal, then apply them (caller holds :attr:`lock`)."""
        if self._journal is not None:
            self._journal.append(ops)
        for op in ops:
            apply_op(self.store, op)

    def close(self) -> None:
        """Close the journal file (the state stays usable; a later write reopens it)."""
        if self._journal is not None:
            self._journal.close()

    @contextmanager
    def subject_lock(self, subject: str) -> Iterator[None]:
        """Serialize the writes to one subject.

        Registration checks compatibility (slow for Protobuf) holding only this lock, so
        reads and writes to other subjects go on meanwhile. Order: this lock, then
        :attr:`lock`, never the reverse.
        """
        with self.lock:
            lock = self._subject_locks.setdefault(subject, threading.Lock())
        with lock:
            yield

    # ---------------------------------------------------------------- lookups
    def _ctx(self, subject: str, create: bool = False) -> tuple[ContextRec, str]:
        ctx_name, name = split_subject(subject)
        ctx = self.contexts.get(ctx_name)
        if ctx is None:
            ctx = ContextRec()
            if create:
                self.contexts[ctx_name] = ctx
        return ctx, name

    def _subject(self, subject: str, deleted: bool = False) -> tuple[ContextRec, SubjectRec]:
        ctx, name = self._ctx(subject)
        sub = ctx.subjects.get(name)
        if sub is None or not (sub.versions if deleted else sub.live()):
            raise subject_not_found(subject)
        return ctx, sub

    @staticmethod
    def _find_version(sub: SubjectRec, subject: str, version: int | None, deleted: bool
                      ) -> VersionRec:
        """``version`` None means latest."""
        pool = sub.versions if deleted else sub.live()
        if version is None:
            if not pool:
                raise _version_not_found(subject, "latest")
            return max(pool, key=lambda v: v.version)
        for v in pool:
            if v.version == version:
                return v
        raise _version_not_found(subject, version)

    def _schema_json(self, rec: SchemaRec) -> dict[str, Any]:
        out: dict[str, Any] = {"schema": rec.schema}
        if rec.schema_type != "AVRO":
            out["schemaType"] = rec.schema_type
        if rec.references:
            out["references"] = rec.references
        if rec.metadata is not None:
            out["metadata"] = rec.metadata
        if rec.rule_set is not None:
            out["ruleSet"] = rec.rule_set
        return out

    def _version_json(self, ctx: ContextRec, subject: str, v: VersionRec) -> dict[str, Any]:
        rec = ctx.schemas[v.id]
        out = {"subject": subject, "version": v.version, "id": v.id, "guid": rec.guid}
        out.update(self._schema_json(rec))
        return out

    def level_for(self, subject: str) -> str:
        ctx, name = self._ctx(subject)
        sub = ctx.subjects.get(name)
        if sub is not None and sub.config and "compatibilityLevel" in sub.config:
            return str(sub.config["compatibilityLevel"])
        return str(self.global_config.get("compatibilityLevel", "BACKWARD"))

    def mode_for(self, subject: str | None) -> str:
        if subject is not None:
            ctx, name = self._ctx(subject)
            sub = ctx.subjects.get(name)
            if sub is not None and sub.mode:
                return sub.mode
        return self.global_mode

    def _check_writable(self, subject: str | None) -> None:
        mode = self.mode_for(subject)
        if mode in ("READONLY", "READONLY_OVERRIDE"):
            what = f"Subject {subject}" if subject is not None else "The registry"
            raise OperationNotPermittedError(422, 42205, f"{what} is in read-only mode")

    def _config_in_scope(self, subject: str) -> dict[str, Any]:
        """The subject's config if it has one, else the global one (as Confluent's
        ``getConfigInScope``: the first that exists, not a merge)."""
        ctx, name = self._ctx(subject)
        sub = ctx.subjects.get(name)
        if sub is not None and sub.config:
            return sub.config
        return self.global_config

    def _referrers(self, ctx_name: str, name: str, version: int) -> list[int]:
        """Ids of live schema versions anywhere that reference ``name``/``version``."""
        found: set[int] = set()
        for cname, ctx in self.contexts.items():
            for sub in ctx.subjects.values():
                for v in sub.live():
                    for r in ctx.schemas[v.id].references:
                        rctx, rname = split_subject(r["subject"])
                        if rctx == DEFAULT_CONTEXT and not r["subject"].startswith(":."):
                            rctx = cname
                        if rctx == ctx_name and rname == name and r["version"] == version:
                            found.add(v.id)
        return sorted(found)

    # ---------------------------------------------------------------- compatibility inputs
    def _to_check(self, ctx: ContextRec, sub: SubjectRec, level: str) -> list[VersionedSchema]:
        """The live versions ``level`` compares a new schema with (under :attr:`lock`)."""
        if level == "NONE":
            return []
        if level.endswith("_TRANSITIVE"):
            return self._versioned(ctx, sub.live())
        latest = sub.latest_live()
        return self._versioned(ctx, [latest] if latest is not None else [])

    def _run_checker(self, subject: str, new: Schema, previous: list[VersionedSchema],
                     level: str) -> tuple[bool, list[str]]:
        """Run the compatibility checker, WITHOUT :attr:`lock` (it may compile schemas)."""
        if not previous:
            return True, []
        return self.checker(new, previous, level, self._resolver(subject))

    def _versioned(self, ctx: ContextRec, versions: list[VersionRec]) -> list[VersionedSchema]:
        out = []
        for v in versions:
            rec = ctx.schemas[v.id]
            refs = tuple(SchemaReference.from_dict(r) for r in rec.references)
            out.append(VersionedSchema(rec.schema, rec.schema_type, refs, v.version))
        return out

    def _resolver(self, subject: str) -> ReferenceResolver:
        """Reference lookup for the engine, in the referring subject's context."""

        def lookup(ref: Any) -> Schema:
            ref_subject = str(ref.subject)
            ctx_name, _ = split_subject(subject)
            if not ref_subject.startswith(":.") and ctx_name != DEFAULT_CONTEXT:
                ref_subject = qualify(ctx_name, ref_subject)
            version = int(ref.version)
            with self.lock:  # the engine calls this without the lock
                ctx, name = self._ctx(ref_subject)
                sub = ctx.subjects.get(name)
                for v in (sub.versions if sub else []):
                    if v.version == version or (version == -1 and v is sub.versions[-1]):  # type: ignore[union-attr]
                        return Schema.from_dict(self._schema_json(ctx.schemas[v.id]))
            raise KeyError(f"reference {ref.name!r} -> {ref.subject!r} v{ref.version} not found")

        return lookup
