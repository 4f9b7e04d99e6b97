"""The registry's state and rules, independent of HTTP.

One :class:`RegistryState` holds contexts → subjects → versions → schema ids, the global and
per-subject config and mode (the model of :mod:`._store`), and appends every change to a
journal file when given one. Reads and the short commits of writes run under one lock
(:attr:`RegistryState.lock`); the slow parts of a registration (compiling a Protobuf schema
in a child process, checking compatibility) run outside it, writes to one subject being
serialized by that subject's own lock, so that readers never wait for protoc.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from kontrakt.registry._errors import (
    CompatibilityCheckUnavailableError,
    IncompatibleSchemaError,
    InvalidSchemaError,
    OperationNotPermittedError,
    ReferenceExistsError,
    SchemaNotFoundError,
    SchemaRegistryError,
    SubjectNotSoftDeletedError,
    SubjectSoftDeletedError,
    VersionNotFoundError,
    VersionNotSoftDeletedError,
    VersionSoftDeletedError,
)
from kontrakt.registry._models import Schema, SchemaReference
from kontrakt.registry.server._contracts import has_defaults_or_overrides, populate
from kontrakt.registry.server._settings import (
    SettingsMixin,
    qualify,
    split_subject,
    subject_not_found,
)
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
from kontrakt.registry.server._validate import (
    canonical_protobuf,
    identity_key,
    normalized_text,
    protobuf_text,
    resolved_avro,
    serialized_protobuf,
    validate_schema,
)

__all__ = [
    "CompatibilityChecker",
    "ReferenceResolver",
    "RegistryState",
    "VersionedSchema",
    "default_compatibility_checker",
]

#: Resolves a reference (``name``, ``subject``, ``version``) to the referenced schema.
ReferenceResolver = Callable[[Any], Schema]
#: ``checker(new_schema, previous_schemas, level, lookup) -> (is_compatible, messages)``;
#: previous schemas are oldest first and carry a ``version`` attribute.
CompatibilityChecker = Callable[[Schema, list[Any], str, ReferenceResolver],
                                "tuple[bool, list[str]]"]


@dataclass(frozen=True)
class VersionedSchema:
    """A previous schema handed to the checker, with the version messages should name."""

    schema_str: str
    schema_type: str
    references: tuple[SchemaReference, ...]
    version: int


@dataclass(frozen=True)
class _Input:
    """A schema request body checked and its references resolved (see _prepare_input)."""

    text: str
    schema_type: str
    refs: list[SchemaReference]
    resolved: list[tuple[str, str, str]]
    meta: dict[str, Any] | None
    rules: dict[str, Any] | None


@dataclass(frozen=True)
class _Parsed:
    """A validated schema: its model, stored text and identity key (see _complete_input)."""

    model: Schema
    refs_json: list[dict[str, Any]]
    stored: str
    key: str
    resolved: list[tuple[str, str, str]]
    #: the schema type and text the identity key is made of (see :meth:`with_contract`)
    ident: tuple[str, str]

    def with_contract(self, meta: dict[str, Any] | None, rules: dict[str, Any] | None
                      ) -> _Parsed:
        """The same schema with other metadata and rule set (and so another identity)."""
        model = Schema.from_dict({**self.model.to_dict(), "metadata": meta, "ruleSet": rules})
        key = identity_key(*self.ident, self.refs_json, {"m": meta, "r": rules})
        return _Parsed(model, self.refs_json, self.stored, key, self.resolved, self.ident)


def default_compatibility_checker(new: Schema, previous: list[Any], level: str,
                                  lookup: ReferenceResolver) -> tuple[bool, list[str]]:
    """Check with :mod:`kontrakt.registry.compatibility`; refuse if it cannot answer.

    Raises:
        InvalidSchemaError: the engine could not parse the new schema (42201).
        CompatibilityCheckUnavailableError: the engine is not installed, or it raised for any
            other reason (for example a construct it does not support). Never reports
            "compatible" then.
    """
    try:
        from kontrakt.registry.compatibility import (
            SchemaParseError,  # type: ignore[attr-defined,unused-ignore]
            check_compatibility,  # type: ignore[attr-defined,unused-ignore]
        )
    except ImportError as exc:
        raise CompatibilityCheckUnavailableError(
            422, 42290, f"Compatibility level {level} cannot be checked: the compatibility "
            f"engine is not available ({exc}); set the level to NONE to register anyway"
        ) from None
    try:
        result = check_compatibility(new, previous, level=level, lookup=lookup)
        return bool(result.is_compatible), [str(m) for m in result.messages]
    except SchemaParseError as exc:
        raise InvalidSchemaError(422, 42201, f"Invalid schema: {exc}") from None
    except Exception as exc:  # the engine's "unsupported construct" and any failure alike
        raise CompatibilityCheckUnavailableError(
            422, 42290, f"Compatibility level {level} cannot be checked for this schema: "
            f"{type(exc).__name__}: {exc}") from None


_SchemaRec = SchemaRec
_Version = VersionRec
_Subject = SubjectRec
_Context = ContextRec


_subject_not_found = subject_not_found


def _version_not_found(subject: str, version: object) -> VersionNotFoundError:
    return VersionNotFoundError(404, 40402, f"Version {version} not found.")


class RegistryState(SettingsMixin):
    """All registry data plus the rules that change it.

    Args:
        path: JSON file to load from and save to after every write; ``None`` keeps memory only.
        checker: compatibility checker; the default uses :mod:`kontrakt.registry.compatibility`.
        fsync: each write is made durable before it is answered (see :class:`Journal`).
    """

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
    def _ctx(self, subject: str, create: bool = False) -> tuple[_Context, str]:
        ctx_name, name = split_subject(subject)
        ctx = self.contexts.get(ctx_name)
        if ctx is None:
            ctx = _Context()
            if create:
                self.contexts[ctx_name] = ctx
        return ctx, name

    def _subject(self, subject: str, deleted: bool = False) -> tuple[_Context, _Subject]:
        ctx, name = self._ctx(subject)
        sub = ctx.subjects.get(name)
        if sub is None or not (sub.versions if deleted else sub.live()):
            raise _subject_not_found(subject)
        return ctx, sub

    @staticmethod
    def _find_version(sub: _Subject, subject: str, version: int | None, deleted: bool
                      ) -> _Version:
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

    def _schema_json(self, rec: _SchemaRec) -> dict[str, Any]:
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

    def _version_json(self, ctx: _Context, subject: str, v: _Version) -> dict[str, Any]:
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

    # ---------------------------------------------------------------- schema input
    def _prepare_input(self, subject: str, body: Any) -> _Input:
        """Check a request body holding a schema and resolve its references (cheap; under
        :attr:`lock`)."""
        if not isinstance(body, dict):
            raise SchemaRegistryError(422, 422, "Request body must be a JSON object")
        text = body.get("schema")
        if not isinstance(text, str) or not text.strip():
            raise InvalidSchemaError(422, 42201, "Empty schema")
        schema_type = body.get("schemaType") or "AVRO"
        if not isinstance(schema_type, str):
            raise SchemaRegistryError(422, 422, "schemaType must be a string")
        raw_refs = body.get("references") or []
        if not isinstance(raw_refs, list):
            raise SchemaRegistryError(422, 422, "references must be a list")
        refs: list[SchemaReference] = []
        for r in raw_refs:
            try:
                refs.append(SchemaReference.from_dict(r))
            except (KeyError, TypeError, ValueError):
                raise InvalidSchemaError(
                    422, 42201, f"Invalid reference {r!r}: needs name, subject and version"
                ) from None
        meta = body.get("metadata") if isinstance(body.get("metadata"), dict) else None
        rules = body.get("ruleSet") if isinstance(body.get("ruleSet"), dict) else None
        return _Input(text, schema_type.upper(), refs, self._resolve_refs(subject, refs, set()),
                      meta, rules)

    def _complete_input(self, subject: str, inp: _Input, normalize: bool) -> _Parsed:
        """Validate, compile and canonicalize a prepared schema. Slow (protoc runs in a child
        process), so called WITHOUT :attr:`lock`; reads of the state take it briefly."""
        text = inp.text
        if inp.schema_type == "PROTOBUF":
            # A serialized FileDescriptorProto (what Confluent's serializers send) is kept
            # as the .proto text it stands for, as Confluent's server does.
            text = protobuf_text(text)
        validate_schema(inp.schema_type, text, inp.resolved)
        stored = text
        if normalize:
            stored = self._normalize(subject, Schema(text, inp.schema_type, tuple(inp.refs)))
            text = stored  # the identity follows the canonical form, as in Confluent
        if inp.schema_type == "PROTOBUF":
            text = canonical_protobuf(text, inp.resolved)
        refs_json = [r.to_dict() for r in inp.refs]
        key = identity_key(inp.schema_type, text, refs_json, {"m": inp.meta, "r": inp.rules})
        model = Schema.from_dict({"schema": stored, "schemaType": inp.schema_type,
                                  "references": refs_json, "metadata": inp.meta,
                                  "ruleSet": inp.rules})
        return _Parsed(model, refs_json, stored, key, inp.resolved, (inp.schema_type, text))

    def _parse_input(self, subject: str, body: Any, normalize: bool) -> _Parsed:
        """:meth:`_prepare_input` under the lock, then :meth:`_complete_input` outside it."""
        with self.lock:
            inp = self._prepare_input(subject, body)
        return self._complete_input(subject, inp, normalize)

    def _normalize(self, subject: str, schema: Schema) -> str:
        """Canonical text for ``normalize=true``: the compatibility engine's form when it is
        available, else compact JSON with sorted keys (Avro/JSON) or trimmed text."""
        try:
            from kontrakt.registry.compatibility import (
                SchemaParseError,  # type: ignore[attr-defined,unused-ignore]
                normalize_schema,  # type: ignore[attr-defined,unused-ignore]
            )
        except ImportError:
            return normalized_text(schema.schema_type, schema.schema_str)
        try:
            return str(normalize_schema(schema, lookup=self._resolver(subject)))
        except SchemaParseError as exc:
            raise InvalidSchemaError(422, 42201, f"Invalid schema: {exc}") from None
        except Exception:  # unsupported construct: fall back to the plain canonical text
            return normalized_text(schema.schema_type, schema.schema_str)

    def _resolve_refs(self, subject: str, refs: list[SchemaReference], seen: set[str]
                      ) -> list[tuple[str, str, str]]:
        """Referenced schemas, dependencies first; a missing one makes the schema invalid."""
        out: list[tuple[str, str, str]] = []
        for ref in refs:
            # References without a context prefix resolve in the referrer's context.
            ref_subject = ref.subject
            ctx_name, _ = split_subject(subject)
            if not ref_subject.startswith(":.") and ctx_name != DEFAULT_CONTEXT:
                ref_subject = qualify(ctx_name, ref_subject)
            ctx, name = self._ctx(ref_subject)
            sub = ctx.subjects.get(name)
            rec = None
            if sub is not None:
                for v in sub.versions:
                    if v.version == ref.version or (ref.version == -1 and v is sub.versions[-1]):
                        rec = ctx.schemas[v.id]
            if rec is None:
                raise InvalidSchemaError(
                    422, 42201, f"Invalid schema: reference {ref.name!r} to subject "
                    f"{ref.subject!r} version {ref.version} not found")
            if rec.key in seen:
                continue
            seen.add(rec.key)
            sub_refs = [SchemaReference.from_dict(r) for r in rec.references]
            out.extend(self._resolve_refs(ref_subject, sub_refs, seen))
            out.append((ref.name, rec.schema_type, rec.schema))
        return out

    def _to_check(self, ctx: _Context, sub: _Subject, level: str) -> list[VersionedSchema]:
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

    def _versioned(self, ctx: _Context, versions: list[_Version]) -> list[VersionedSchema]:
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

    # ---------------------------------------------------------------- writes
    def register(self, subject: str, body: Any, normalize: bool) -> dict[str, Any]:
        """POST /subjects/{subject}/versions.

        Takes its own locks: the schema is compiled with no lock held, compatibility is
        checked holding only the subject's lock, and the new version is committed under
        :attr:`lock`.
        """
        with self.lock:
            self._check_writable(subject)
            inp = self._prepare_input(subject, body)
        parsed = self._complete_input(subject, inp, normalize)
        with self.subject_lock(subject):
            with self.lock:
                self._check_writable(subject)
                ctx, name = self._ctx(subject)
                sub = ctx.subjects.get(name) or _Subject()
                importing = self.mode_for(subject) == "IMPORT"
                want_id = body.get("id")
                want_version = body.get("version")
                if want_id is not None and not importing:
                    raise OperationNotPermittedError(
                        422, 42205, f"Subject {subject} is not in import mode; an id "
                        "cannot be given")
                if want_version is not None and not importing:
                    want_version = self._check_next_version(subject, sub, want_version)
                modified = False
                if not importing:
                    found, parsed, modified = self._apply_contract(
                        subject, sub, parsed, inp, want_version)
                    if found is not None:
                        return found
                key = parsed.key
                same = sub.by_key.get(key)
                if same is not None:
                    return self._registered(ctx, subject, same, modified)
                level = self.level_for(subject)
                previous = [] if importing else self._to_check(ctx, sub, level)
            # The subject lock keeps the subject's versions as they were read above.
            ok, messages = self._run_checker(subject, parsed.model, previous, level)
            if not ok:
                raise IncompatibleSchemaError(
                    409, 40901, f"Schema being registered is incompatible with an earlier "
                    f"schema for subject \"{subject}\", details: {messages}")
            with self.lock:
                done = self._commit_version(subject, parsed, want_id, want_version)
                if not modified:
                    return done
                ctx, name = self._ctx(subject)
                version = next(v for v in ctx.subjects[name].versions
                               if v.version == done["version"])
                return self._registered(ctx, subject, version, True)

    def _config_in_scope(self, subject: str) -> dict[str, Any]:
        """The subject's config if it has one, else the global one (as Confluent's
        ``getConfigInScope``: the first that exists, not a merge)."""
        ctx, name = self._ctx(subject)
        sub = ctx.subjects.get(name)
        if sub is not None and sub.config:
            return sub.config
        return self.global_config

    @staticmethod
    def _check_next_version(subject: str, sub: _Subject, want: Any) -> int:
        """A version named outside import mode must be the next one (optimistic writers
        pin ``confluent:version`` this way; Confluent answers the same)."""
        following = (sub.versions[-1].version if sub.versions else 0) + 1
        if not isinstance(want, int) or isinstance(want, bool) or want != following:
            raise InvalidSchemaError(
                422, 42201, f"Version {want!r} is not one more than the previous version of "
                f"subject {subject} (expected {following})")
        return want

    def _apply_contract(self, subject: str, sub: _Subject, parsed: _Parsed, inp: _Input,
                        want_version: int | None
                        ) -> tuple[dict[str, Any] | None, _Parsed, bool]:
        """Apply the config's metadata and rule-set defaults and overrides and the previous
        version's contract to a registration (under :attr:`lock` and the subject's lock).

        Returns:
            The answer when the subject already holds the schema (found as sent, or with
            the previous version's contract, as Confluent's lookup before registering
            does when the config has no defaults or overrides), else ``None``; the schema
            to register; whether its metadata or rule set differ from the request's.
        """
        config = self._config_in_scope(subject)
        latest = sub.latest_live()
        ctx, _ = self._ctx(subject)
        previous = None
        if latest is not None:
            rec = ctx.schemas[latest.id]
            previous = (rec.metadata, rec.rule_set)
        if not has_defaults_or_overrides(config) and want_version is None:
            same = sub.by_key.get(parsed.key)
            if same is None and previous is not None:
                meta, rules = populate(config, inp.meta, inp.rules, previous, None, False)
                same = sub.by_key.get(parsed.with_contract(meta, rules).key)
            if same is not None:
                return self._registered(ctx, subject, same, False), parsed, False
        new_version = max((v.version for v in sub.versions), default=0) + 1
        meta, rules = populate(config, inp.meta, inp.rules, previous, new_version,
                               want_version is not None)
        if (meta, rules) == (inp.meta, inp.rules):
            return None, parsed, False
        return None, parsed.with_contract(meta, rules), True

    def _registered(self, ctx: _Context, subject: str, v: _Version, full: bool
                    ) -> dict[str, Any]:
        """A registration's answer: id, version and guid, and the whole schema when the
        registry changed its metadata or rule set (Confluent's clients cache what it
        answers)."""
        if full:
            return self._version_json(ctx, subject, v)
        return {"id": v.id, "version": v.version, "guid": ctx.schemas[v.id].guid}

    def _commit_version(self, subject: str, parsed: _Parsed, want_id: Any, want_version: Any
                        ) -> dict[str, Any]:
        """Store a checked registration (under :attr:`lock` and the subject's lock)."""
        self._check_writable(subject)
        # References were resolved before the lock was let go; a reference deleted since
        # must not be stored as a dangling one.
        refs = [SchemaReference.from_dict(r) for r in parsed.refs_json]
        if self._resolve_refs(subject, refs, set()) != parsed.resolved:
            raise InvalidSchemaError(422, 42201, "Invalid schema: a reference changed while "
                                     "the schema was being registered; retry")
        ctx_name, name = split_subject(subject)
        ctx = self.contexts.get(ctx_name) or _Context()
        sub = ctx.subjects.get(name) or _Subject()
        key = parsed.key
        model = parsed.model
        sid = ctx.ids_by_key.get(key)
        if want_id is not None:
            if not isinstance(want_id, int) or want_id < 1:
                raise SchemaRegistryError(422, 422, "id must be a positive integer")
            other = ctx.schemas.get(want_id)
            if other is not None and other.key != key:
                raise OperationNotPermittedError(
                    422, 42205, f"Overwrite new schema with id {want_id} is not permitted.")
            sid = want_id
        if want_version is not None:
            if not isinstance(want_version, int) or want_version < 1:
                raise SchemaRegistryError(422, 42202, "version must be a positive integer")
            version = want_version
        else:
            version = (sub.versions[-1].version if sub.versions else 0) + 1
        ops: list[dict[str, Any]] = []
        guid = ctx.schemas[sid].guid if sid is not None and sid in ctx.schemas else None
        if guid is None:
            sid = sid if sid is not None else ctx.next_id
            guid = str(uuid.uuid4())
            rec = _SchemaRec(
                id=sid, schema_type=model.schema_type, schema=parsed.stored,
                references=parsed.refs_json,
                metadata=model.metadata.to_dict() if model.metadata else None,
                rule_set=model.rule_set.to_dict() if model.rule_set else None,
                guid=guid, key=key)
            ops.append({"op": "schema", "ctx": ctx_name, "rec": vars(rec)})
        assert sid is not None
        ops.append({"op": "version", "ctx": ctx_name, "subject": name, "version": version,
                    "id": sid, "deleted": False})
        self._commit(ops)
        return {"id": sid, "version": version, "guid": guid}

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

    def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        """DELETE /subjects/{subject}: soft first, then permanent."""
        with self.subject_lock(subject), self.lock:
            self._check_writable(subject)
            ctx_name, name = split_subject(subject)
            _, sub = self._subject(subject, deleted=True)
            if permanent:
                if sub.live():
                    raise SubjectNotSoftDeletedError(
                        404, 40405, f"Subject '{subject}' was not deleted first before being "
                        "permanently deleted")
                versions = [v.version for v in sub.versions]
                self._commit([{"op": "drop_subject", "ctx": ctx_name, "subject": name}])
                return versions
            if not sub.live():
                raise SubjectSoftDeletedError(
                    404, 40404, f"Subject '{subject}' was soft deleted. Set permanent=true "
                    "to delete permanently")
            for v in sub.live():
                if self._referrers(ctx_name, name, v.version):
                    raise ReferenceExistsError(
                        422, 42206, f"One or more references exist to the schema "
                        f"{{subject={subject},version={v.version}}}.")
            versions = [v.version for v in sub.live()]
            self._commit([{"op": "delete_versions", "ctx": ctx_name, "subject": name,
                           "versions": versions}])
            return versions

    def delete_version(self, subject: str, version: int | None, permanent: bool) -> int:
        """DELETE /subjects/{subject}/versions/{version}."""
        with self.subject_lock(subject), self.lock:
            self._check_writable(subject)
            ctx_name, name = split_subject(subject)
            _, sub = self._subject(subject, deleted=True)
            if permanent:
                v = self._find_version(sub, subject, version, deleted=True)
                if not v.deleted:
                    raise VersionNotSoftDeletedError(
                        404, 40407, f"Subject '{subject}' Version {v.version} was not deleted "
                        "first before being permanently deleted")
                if self._referrers(ctx_name, name, v.version):
                    raise ReferenceExistsError(
                        422, 42206, f"One or more references exist to the schema "
                        f"{{subject={subject},version={v.version}}}.")
                self._commit([{"op": "drop_version", "ctx": ctx_name, "subject": name,
                               "version": v.version}])
                return v.version
            if version is not None:
                gone = [x for x in sub.versions if x.version == version and x.deleted]
                if gone:
                    raise VersionSoftDeletedError(
                        404, 40406, f"Subject '{subject}' Version {version} was soft deleted. "
                        "Set permanent=true to delete permanently")
            if not sub.live():
                raise _subject_not_found(subject)
            v = self._find_version(sub, subject, version, deleted=False)
            if self._referrers(ctx_name, name, v.version):
                raise ReferenceExistsError(
                    422, 42206, f"One or more references exist to the schema "
                    f"{{subject={subject},version={v.version}}}.")
            self._commit([{"op": "delete_versions", "ctx": ctx_name, "subject": name,
                           "versions": [v.version]}])
            return v.version

    # ---------------------------------------------------------------- reads
    def lookup(self, subject: str, body: Any, normalize: bool, deleted: bool) -> dict[str, Any]:
        """POST /subjects/{subject}: is this schema registered under the subject?

        Takes :attr:`lock` itself, and not while the schema is compiled.
        """
        with self.lock:
            self._subject(subject, deleted=deleted)
            inp = self._prepare_input(subject, body)
        parsed = self._complete_input(subject, inp, normalize)
        with self.lock:
            ctx, sub = self._subject(subject, deleted=deleted)
            keys = [parsed.key]
            latest = sub.latest_live()
            if latest is not None:
                # As Confluent's lookup: a schema sent without the contract the subject
                # carries forward is found with it.
                rec = ctx.schemas[latest.id]
                keys.append(parsed.with_contract(*populate(
                    self._config_in_scope(subject), inp.meta, inp.rules,
                    (rec.metadata, rec.rule_set), None, False)).key)
            pool = sub.versions if deleted else sub.live()
            for key in keys:
                for v in sorted(pool, key=lambda x: x.version):
                    if ctx.schemas[v.id].key == key:
                        return self._version_json(ctx, subject, v)
        raise SchemaNotFoundError(404, 40403, "Schema not found")

    def get_version(self, subject: str, version: int | None, deleted: bool) -> dict[str, Any]:
        """GET /subjects/{subject}/versions/{version}."""
        ctx, sub = self._subject(subject, deleted=deleted)
        return self._version_json(ctx, subject,
                                  self._find_version(sub, subject, version, deleted))

    def versions(self, subject: str, deleted: bool, deleted_only: bool,
                 deleted_as_negative: bool = False) -> list[int]:
        """GET /subjects/{subject}/versions (``deletedAsNegative``: with ``deleted``,
        soft-deleted versions are given as negative numbers)."""
        _, sub = self._subject(subject, deleted=deleted or deleted_only)
        if deleted_only:
            return [v.version for v in sub.versions if v.deleted]
        if deleted:
            return [-v.version if v.deleted and deleted_as_negative else v.version
                    for v in sub.versions]
        return [v.version for v in sub.live()]

    def list_schemas(self, prefix: str, deleted: bool, latest_only: bool
                     ) -> list[dict[str, Any]]:
        """GET /schemas: every subject version under ``prefix``, by subject then version."""
        out = []
        for subject in self.subjects(prefix, deleted, False):
            ctx, sub = self._subject(subject, deleted=deleted)
            pool = sub.versions if deleted else sub.live()
            for v in pool[-1:] if latest_only else pool:
                out.append(self._version_json(ctx, subject, v))
        return out

    def max_id(self, subject: str | None) -> int:
        """The largest schema id held in ``subject``'s context (``fetchMaxId``)."""
        ctx, _ = self._ctx(subject or "")
        return max(ctx.schemas, default=0)

    def guid_ids(self, guid: str) -> list[dict[str, Any]]:
        """GET /schemas/guids/{guid}/ids: ``{"context", "id"}`` of the schema in each context."""
        out = [{"context": name, "id": rec.id}
               for name, ctx in sorted(self.contexts.items())
               for rec in ctx.schemas.values() if rec.guid == guid]
        if not out:
            raise SchemaNotFoundError(404, 40403, "Schema not found")
        return out

    def subjects(self, prefix: str, deleted: bool, deleted_only: bool) -> list[str]:
        """GET /subjects."""
        out = []
        for cname, ctx in self.contexts.items():
            for name, sub in ctx.subjects.items():
                q = qualify(cname, name)
                if not q.startswith(prefix):
                    continue
                live = bool(sub.live())
                has_deleted = any(v.deleted for v in sub.versions)
                if (deleted_only and has_deleted) or (not deleted_only and (
                        live or (deleted and sub.versions))):
                    out.append(q)
        return sorted(out)

    def referenced_by(self, subject: str, version: int | None) -> list[int]:
        """GET /subjects/{subject}/versions/{version}/referencedby."""
        ctx_name, name = split_subject(subject)
        _, sub = self._subject(subject)
        v = self._find_version(sub, subject, version, deleted=False)
        return self._referrers(ctx_name, name, v.version)

    def schema_by_id(self, sid: int, subject: str | None) -> dict[str, Any]:
        """GET /schemas/ids/{id}."""
        ctx, _ = self._ctx(subject or "")
        rec = ctx.schemas.get(sid)
        if rec is None:
            raise SchemaNotFoundError(404, 40403, "Schema not found")
        out = self._schema_json(rec)
        out["guid"] = rec.guid
        return out

    def formatted(self, out: dict[str, Any], subject: str | None, fmt: str | None
                  ) -> dict[str, Any]:
        """Apply a ``format`` query parameter to a schema answer.

        Protobuf's ``serialized`` gives the schema compiled to a base64
        ``FileDescriptorProto``; Avro's ``resolved`` gives the schema with the named types of
        its references written into it (see :func:`resolved_avro`). References resolve in
        ``subject``'s context. Like Confluent, other or unknown formats give the stored text.

        Raises:
            SchemaRegistryError: the form cannot be produced (see :func:`serialized_protobuf`
                and :func:`resolved_avro`).
        """
        kind = (fmt or "").strip().lower()
        stype = out.get("schemaType") or "AVRO"
        if (kind, stype) not in (("serialized", "PROTOBUF"), ("resolved", "AVRO")):
            return out
        refs = [SchemaReference.from_dict(r) for r in out.get("references") or []]
        with self.lock:
            resolved = self._resolve_refs(subject or "", refs, set())
        if stype == "AVRO":
            return {**out, "schema": resolved_avro(out["schema"], resolved)}
        return {**out, "schema": serialized_protobuf(out["schema"], resolved)}

    def schema_by_guid(self, guid: str) -> dict[str, Any]:
        """GET /schemas/guids/{guid}."""
        for ctx in self.contexts.values():
            for rec in ctx.schemas.values():
                if rec.guid == guid:
                    out = self._schema_json(rec)
                    out["id"] = rec.id
                    out["guid"] = rec.guid
                    return out
        raise SchemaNotFoundError(404, 40403, "Schema not found")

    def id_usages(self, sid: int, subject: str | None, deleted: bool
                  ) -> list[tuple[str, int]]:
        """(subject, version) pairs holding ``sid`` (GET /schemas/ids/{id}/subjects|versions)."""
        ctx_name = split_subject(subject)[0] if subject else DEFAULT_CONTEXT
        ctx = self.contexts.get(ctx_name) or _Context()
        if sid not in ctx.schemas:
            raise SchemaNotFoundError(404, 40403, "Schema not found")
        out = []
        for name, sub in ctx.subjects.items():
            for v in sub.versions:
                if v.id == sid and (deleted or not v.deleted):
                    out.append((qualify(ctx_name, name), v.version))
        if subject and split_subject(subject)[1]:
            out = [p for p in out if p[0] == subject]
        return sorted(out)

    def latest_with_metadata(self, subject: str, wanted: dict[str, str], deleted: bool
                             ) -> dict[str, Any]:
        """GET /subjects/{subject}/metadata: latest version whose metadata has all pairs."""
        ctx, sub = self._subject(subject, deleted=deleted)
        pool = sub.versions if deleted else sub.live()
        for v in sorted(pool, key=lambda x: -x.version):
            props = (ctx.schemas[v.id].metadata or {}).get("properties") or {}
            if all(props.get(k) == val for k, val in wanted.items()):
                return self._version_json(ctx, subject, v)
        raise SchemaNotFoundError(404, 40403, "Schema not found")

    def test_compatibility(self, subject: str, version: int | None, all_versions: bool,
                           body: Any, normalize: bool, verbose: bool) -> dict[str, Any]:
        """POST /compatibility/subjects/{subject}/versions[/{version}].

        Takes :attr:`lock` itself, and not while the schema is compiled or checked.
        """
        model = self._parse_input(subject, body, normalize).model
        with self.lock:
            ctx, name = self._ctx(subject)
            sub = ctx.subjects.get(name) or _Subject()
            level = self.level_for(subject)
            if all_versions:
                to_check = self._to_check(ctx, sub, level)
            else:
                latest = sub.latest_live()
                previous = [latest] if version is None and latest is not None else []
                if version is not None:
                    previous = [self._find_version(sub, subject, version, deleted=False)]
                # A named version is checked on its own, whatever the transitivity.
                to_check = [] if level == "NONE" else self._versioned(ctx, previous)
        ok, messages = self._run_checker(subject, model, to_check, level)
        out: dict[str, Any] = {"is_compatible": ok}
        if verbose:
            out["messages"] = messages
        return out
