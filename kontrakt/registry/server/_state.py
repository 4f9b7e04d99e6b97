"""The registry's state and rules, independent of HTTP.

One :class:`RegistryState` holds contexts → subjects → versions → schema ids, the global and
per-subject config and mode, and persists itself to a JSON file after every write when given
one. Every method is called under one lock: the registry is small and correctness of the id
and version sequences matters more than parallel writes.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kontrakt.registry._errors import (
    CompatibilityCheckUnavailableError,
    IncompatibleSchemaError,
    InvalidCompatibilityLevelError,
    InvalidModeError,
    InvalidSchemaError,
    OperationNotPermittedError,
    ReferenceExistsError,
    SchemaNotFoundError,
    SchemaRegistryError,
    SubjectNotFoundError,
    SubjectNotSoftDeletedError,
    SubjectSoftDeletedError,
    VersionNotFoundError,
    VersionNotSoftDeletedError,
    VersionSoftDeletedError,
)
from kontrakt.registry._models import CompatibilityLevel, Mode, Schema, SchemaReference
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

DEFAULT_CONTEXT = "."
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


@dataclass
class _SchemaRec:
    id: int
    schema_type: str
    schema: str
    references: list[dict[str, Any]]
    metadata: dict[str, Any] | None
    rule_set: dict[str, Any] | None
    guid: str
    key: str


@dataclass
class _Version:
    version: int
    id: int
    deleted: bool = False


@dataclass
class _Subject:
    versions: list[_Version] = field(default_factory=list)
    config: dict[str, Any] | None = None
    mode: str | None = None

    def live(self) -> list[_Version]:
        return [v for v in self.versions if not v.deleted]


@dataclass
class _Context:
    schemas: dict[int, _SchemaRec] = field(default_factory=dict)
    ids_by_key: dict[str, int] = field(default_factory=dict)
    subjects: dict[str, _Subject] = field(default_factory=dict)
    next_id: int = 1


def split_subject(qualified: str) -> tuple[str, str]:
    """``":.ctx:name"`` → ``(".ctx", "name")``; unqualified names are in the default context."""
    if qualified.startswith(":.") and ":" in qualified[2:]:
        ctx, _, name = qualified[1:].partition(":")
        return ctx, name
    return DEFAULT_CONTEXT, qualified


def qualify(ctx: str, name: str) -> str:
    """Inverse of :func:`split_subject`."""
    return name if ctx == DEFAULT_CONTEXT else f":{ctx}:{name}"


def _subject_not_found(subject: str) -> SubjectNotFoundError:
    return SubjectNotFoundError(404, 40401, f"Subject '{subject}' not found.")


def _version_not_found(subject: str, version: object) -> VersionNotFoundError:
    return VersionNotFoundError(404, 40402, f"Version {version} not found.")


class RegistryState:
    """All registry data plus the rules that change it.

    Args:
        path: JSON file to load from and save to after every write; ``None`` keeps memory only.
        checker: compatibility checker; the default uses :mod:`kontrakt.registry.compatibility`.
    """

    def __init__(self, path: str | None = None,
                 checker: CompatibilityChecker | None = None) -> None:
        self.lock = threading.RLock()
        self.path = path
        self.checker: CompatibilityChecker = checker or default_compatibility_checker
        self.contexts: dict[str, _Context] = {DEFAULT_CONTEXT: _Context()}
        self.global_config: dict[str, Any] = {"compatibilityLevel": "BACKWARD"}
        self.global_mode = "READWRITE"
        if path and os.path.exists(path):
            self._load(path)

    # ---------------------------------------------------------------- persistence
    def _load(self, path: str) -> None:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        self.global_config = data["config"]
        self.global_mode = data["mode"]
        self.contexts = {}
        for name, raw in data["contexts"].items():
            ctx = _Context(next_id=raw["next_id"])
            for rec in raw["schemas"]:
                sr = _SchemaRec(**rec)
                ctx.schemas[sr.id] = sr
                ctx.ids_by_key[sr.key] = sr.id
            for sname, sraw in raw["subjects"].items():
                ctx.subjects[sname] = _Subject(
                    versions=[_Version(**v) for v in sraw["versions"]],
                    config=sraw["config"], mode=sraw["mode"])
            self.contexts[name] = ctx
        self.contexts.setdefault(DEFAULT_CONTEXT, _Context())

    def save(self) -> None:
        """Write the state to ``path`` atomically (no-op for memory storage)."""
        if not self.path:
            return
        data = {
            "config": self.global_config,
            "mode": self.global_mode,
            "contexts": {
                name: {
                    "next_id": ctx.next_id,
                    "schemas": [vars(r) for r in ctx.schemas.values()],
                    "subjects": {
                        s: {"versions": [vars(v) for v in sub.versions], "config": sub.config,
                            "mode": sub.mode}
                        for s, sub in ctx.subjects.items()
                    },
                }
                for name, ctx in self.contexts.items()
            },
        }
        tmp = f"{self.path}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        # os.replace is atomic: a crash leaves either the old or the new file, never half.
        os.replace(tmp, self.path)

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
    def _parse_input(self, subject: str, body: Any, normalize: bool
                     ) -> tuple[Schema, list[dict[str, Any]], str, str]:
        """Validate a request body holding a schema.

        Returns: (schema model, references JSON, stored text, identity key).
        """
        if not isinstance(body, dict):
            raise SchemaRegistryError(422, 422, "Request body must be a JSON object")
        text = body.get("schema")
        if not isinstance(text, str) or not text.strip():
            raise InvalidSchemaError(422, 42201, "Empty schema")
        schema_type = body.get("schemaType") or "AVRO"
        if not isinstance(schema_type, str):
            raise SchemaRegistryError(422, 422, "schemaType must be a string")
        schema_type = schema_type.upper()
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
        resolved = self._resolve_refs(subject, refs, set())
        if schema_type == "PROTOBUF":
            # A serialized FileDescriptorProto (what Confluent's serializers send) is kept
            # as the .proto text it stands for, as Confluent's server does.
            text = protobuf_text(text)
        validate_schema(schema_type, text, resolved)
        stored = text
        if normalize:
            stored = self._normalize(subject, Schema(text, schema_type, tuple(refs)))
            text = stored  # the identity follows the canonical form, as in Confluent
        if schema_type == "PROTOBUF":
            text = canonical_protobuf(text, resolved)
        meta = body.get("metadata") if isinstance(body.get("metadata"), dict) else None
        rules = body.get("ruleSet") if isinstance(body.get("ruleSet"), dict) else None
        refs_json = [r.to_dict() for r in refs]
        key = identity_key(schema_type, text, refs_json, {"m": meta, "r": rules})
        model = Schema.from_dict({"schema": stored, "schemaType": schema_type,
                                  "references": refs_json, "metadata": meta, "ruleSet": rules})
        return model, refs_json, stored, key

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

    def _check(self, subject: str, new: Schema, previous: list[_Version], ctx: _Context,
               level: str) -> tuple[bool, list[str]]:
        if level == "NONE" or not previous:
            return True, []
        ordered = sorted(previous, key=lambda v: v.version)
        if not level.endswith("_TRANSITIVE"):
            ordered = ordered[-1:]
        return self.checker(new, self._versioned(ctx, ordered), level,
                            self._resolver(subject))

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
            ctx, name = self._ctx(ref_subject)
            sub = ctx.subjects.get(name)
            version = int(ref.version)
            for v in (sub.versions if sub else []):
                if v.version == version or (version == -1 and v is sub.versions[-1]):  # type: ignore[union-attr]
                    return Schema.from_dict(self._schema_json(ctx.schemas[v.id]))
            raise KeyError(f"reference {ref.name!r} -> {ref.subject!r} v{ref.version} not found")

        return lookup

    # ---------------------------------------------------------------- writes
    def register(self, subject: str, body: Any, normalize: bool) -> dict[str, Any]:
        """POST /subjects/{subject}/versions."""
        self._check_writable(subject)
        model, refs_json, stored, key = self._parse_input(subject, body, normalize)
        ctx, name = self._ctx(subject, create=True)
        sub = ctx.subjects.setdefault(name, _Subject())
        importing = self.mode_for(subject) == "IMPORT"
        want_id = body.get("id") if isinstance(body, dict) else None
        want_version = body.get("version") if isinstance(body, dict) else None
        if (want_id is not None or want_version is not None) and not importing:
            raise OperationNotPermittedError(
                422, 42205, f"Subject {subject} is not in import mode; id and version "
                "cannot be given")
        for v in sub.live():
            if ctx.schemas[v.id].key == key:
                return {"id": v.id, "version": v.version, "guid": ctx.schemas[v.id].guid}
        if not importing:
            level = self.level_for(subject)
            ok, messages = self._check(subject, model, sub.live(), ctx, level)
            if not ok:
                raise IncompatibleSchemaError(
                    409, 409, f"Schema being registered is incompatible with an earlier "
                    f"schema for subject \"{subject}\", details: {messages}")
        sid = ctx.ids_by_key.get(key)
        if want_id is not None:
            if not isinstance(want_id, int) or want_id < 1:
                raise SchemaRegistryError(422, 422, "id must be a positive integer")
            other = ctx.schemas.get(want_id)
            if other is not None and other.key != key:
                raise OperationNotPermittedError(
                    422, 42205, f"Overwrite new schema with id {want_id} is not permitted.")
            sid = want_id
        if sid is None or sid not in ctx.schemas:
            if sid is None:
                sid = ctx.next_id
            ctx.schemas[sid] = _SchemaRec(
                id=sid, schema_type=model.schema_type, schema=stored, references=refs_json,
                metadata=model.metadata.to_dict() if model.metadata else None,
                rule_set=model.rule_set.to_dict() if model.rule_set else None,
                guid=str(uuid.uuid4()), key=key)
            ctx.ids_by_key[key] = sid
        ctx.next_id = max(ctx.next_id, sid + 1)
        if want_version is not None:
            if not isinstance(want_version, int) or want_version < 1:
                raise SchemaRegistryError(422, 42202, "version must be a positive integer")
            version = want_version
            sub.versions = [v for v in sub.versions if v.version != version]
        else:
            version = max((v.version for v in sub.versions), default=0) + 1
        sub.versions.append(_Version(version, sid))
        sub.versions.sort(key=lambda v: v.version)
        self.save()
        return {"id": sid, "version": version, "guid": ctx.schemas[sid].guid}

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

    def _gc(self, ctx: _Context) -> None:
        """Forget schemas no version holds any more (permanent deletes)."""
        held = {v.id for sub in ctx.subjects.values() for v in sub.versions}
        for sid in [s for s in ctx.schemas if s not in held]:
            rec = ctx.schemas.pop(sid)
            ctx.ids_by_key.pop(rec.key, None)

    def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        """DELETE /subjects/{subject}: soft first, then permanent."""
        self._check_writable(subject)
        ctx_name, name = split_subject(subject)
        ctx, sub = self._subject(subject, deleted=True)
        if permanent:
            if sub.live():
                raise SubjectNotSoftDeletedError(
                    404, 40405, f"Subject '{subject}' was not deleted first before being "
                    "permanently deleted")
            versions = [v.version for v in sub.versions]
            del ctx.subjects[name]
            self._gc(ctx)
        else:
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
            for v in sub.live():
                v.deleted = True
        self.save()
        return versions

    def delete_version(self, subject: str, version: int | None, permanent: bool) -> int:
        """DELETE /subjects/{subject}/versions/{version}."""
        self._check_writable(subject)
        ctx_name, name = split_subject(subject)
        ctx, sub = self._subject(subject, deleted=True)
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
            sub.versions.remove(v)
            if not sub.versions and sub.config is None and sub.mode is None:
                del ctx.subjects[name]
            self._gc(ctx)
        else:
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
            v.deleted = True
        self.save()
        return v.version

    # ---------------------------------------------------------------- reads
    def lookup(self, subject: str, body: Any, normalize: bool, deleted: bool) -> dict[str, Any]:
        """POST /subjects/{subject}: is this schema registered under the subject?"""
        ctx, sub = self._subject(subject, deleted=deleted)
        _, _, _, key = self._parse_input(subject, body, normalize)
        pool = sub.versions if deleted else sub.live()
        for v in sorted(pool, key=lambda x: x.version):
            if ctx.schemas[v.id].key == key:
                return self._version_json(ctx, subject, v)
        raise SchemaNotFoundError(404, 40403, "Schema not found")

    def get_version(self, subject: str, version: int | None, deleted: bool) -> dict[str, Any]:
        """GET /subjects/{subject}/versions/{version}."""
        ctx, sub = self._subject(subject, deleted=deleted)
        return self._version_json(ctx, subject,
                                  self._find_version(sub, subject, version, deleted))

    def versions(self, subject: str, deleted: bool, deleted_only: bool) -> list[int]:
        """GET /subjects/{subject}/versions."""
        _, sub = self._subject(subject, deleted=deleted or deleted_only)
        if deleted_only:
            return [v.version for v in sub.versions if v.deleted]
        return [v.version for v in (sub.versions if deleted else sub.live())]

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
        """POST /compatibility/subjects/{subject}/versions[/{version}]."""
        model, _, _, _ = self._parse_input(subject, body, normalize)
        ctx, name = self._ctx(subject)
        sub = ctx.subjects.get(name) or _Subject()
        level = self.level_for(subject)
        if all_versions:
            previous = sub.live()
        elif version is None:
            previous = sorted(sub.live(), key=lambda v: v.version)[-1:]
        else:
            previous = [self._find_version(sub, subject, version, deleted=False)]
        if level != "NONE" and previous and not all_versions:
            # A named version is checked on its own, whatever the transitivity.
            ok, messages = self.checker(model, self._versioned(ctx, previous), level,
                                        self._resolver(subject))
        else:
            ok, messages = self._check(subject, model, previous, ctx, level)
        out: dict[str, Any] = {"is_compatible": ok}
        if verbose:
            out["messages"] = messages
        return out

    # ---------------------------------------------------------------- config and mode
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
            self.global_config.update(stored)
        else:
            ctx, name = self._ctx(subject, create=True)
            sub = ctx.subjects.setdefault(name, _Subject())
            sub.config = {**(sub.config or {}), **stored}
        self.save()
        answer = {k: v for k, v in stored.items() if k != "compatibilityLevel"}
        if "compatibilityLevel" in stored:
            answer["compatibility"] = stored["compatibilityLevel"]
        return answer

    def delete_config(self, subject: str | None) -> dict[str, Any]:
        """DELETE /config[/subject]: returns the config that was removed."""
        if subject is None:
            old = self.global_config
            self.global_config = {"compatibilityLevel": "BACKWARD"}
            self.save()
            return old
        ctx, name = self._ctx(subject)
        sub = ctx.subjects.get(name)
        if sub is None:
            raise _subject_not_found(subject)
        old = sub.config or {}
        sub.config = None
        self.save()
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
            self.global_mode = mode
        else:
            ctx, name = self._ctx(subject, create=True)
            ctx.subjects.setdefault(name, _Subject()).mode = mode
        self.save()
        return {"mode": mode}

    def delete_mode(self, subject: str) -> dict[str, Any]:
        """DELETE /mode/{subject}: returns the mode that was removed."""
        ctx, name = self._ctx(subject)
        sub = ctx.subjects.get(name)
        if sub is None or sub.mode is None:
            raise _subject_not_found(subject)
        old = sub.mode
        sub.mode = None
        self.save()
        return {"mode": old}

    def context_names(self) -> list[str]:
        """GET /contexts."""
        names = [c for c, ctx in self.contexts.items() if c == DEFAULT_CONTEXT or ctx.subjects]
        return sorted(names)
