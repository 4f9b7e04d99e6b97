"""The registry's writes: registering a schema version and deleting subjects and versions.

:class:`SchemaWrites` (a room of :class:`~kontrakt.registry.server.RegistryState`) applies
the config's and the previous version's contract (metadata and rule set) to a registration,
checks compatibility holding only the subject's lock, and commits the new version, or a
soft or permanent delete, through the journal under the state's lock.
"""

from __future__ import annotations

import uuid
from typing import Any

from kontrakt.registry._errors import (
    IncompatibleSchemaError,
    InvalidSchemaError,
    OperationNotPermittedError,
    ReferenceExistsError,
    SchemaRegistryError,
    SubjectNotSoftDeletedError,
    SubjectSoftDeletedError,
    VersionNotSoftDeletedError,
    VersionSoftDeletedError,
)
from kontrakt.registry._models import SchemaReference
from kontrakt.registry.server._contracts import has_defaults_or_overrides, populate
from kontrakt.registry.server._input import Parsed, Prepared, SchemaInput
from kontrakt.registry.server._settings import split_subject, subject_not_found
from kontrakt.registry.server._store import ContextRec, SchemaRec, SubjectRec, VersionRec

__all__ = ["SchemaWrites"]


class SchemaWrites(SchemaInput):
    """POST /subjects/{subject}/versions and the DELETEs of subjects and versions."""

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
                sub = ctx.subjects.get(name) or SubjectRec()
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

    @staticmethod
    def _check_next_version(subject: str, sub: SubjectRec, want: Any) -> int:
        """A version named outside import mode must be the next one (optimistic writers
        pin ``confluent:version`` this way; Confluent answers the same)."""
        following = (sub.versions[-1].version if sub.versions else 0) + 1
        if not isinstance(want, int) or isinstance(want, bool) or want != following:
            raise InvalidSchemaError(
                422, 42201, f"Version {want!r} is not one more than the previous version of "
                f"subject {subject} (expected {following})")
        return want

    def _apply_contract(self, subject: str, sub: SubjectRec, parsed: Parsed, inp: Prepared,
                        want_version: int | None
                        ) -> tuple[dict[str, Any] | None, Parsed, bool]:
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

    def _registered(self, ctx: ContextRec, subject: str, v: VersionRec, full: bool
                    ) -> dict[str, Any]:
        """A registration's answer: id, version and guid, and the whole schema when the
        registry changed its metadata or rule set (Confluent's clients cache what it
        answers)."""
        if full:
            return self._version_json(ctx, subject, v)
        return {"id": v.id, "version": v.version, "guid": ctx.schemas[v.id].guid}

    def _commit_version(self, subject: str, parsed: Parsed, want_id: Any, want_version: Any
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
        ctx = self.contexts.get(ctx_name) or ContextRec()
        sub = ctx.subjects.get(name) or SubjectRec()
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
            rec = SchemaRec(
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
                raise subject_not_found(subject)
            v = self._find_version(sub, subject, version, deleted=False)
            if self._referrers(ctx_name, name, v.version):
                raise ReferenceExistsError(
                    422, 42206, f"One or more references exist to the schema "
                    f"{{subject={subject},version={v.version}}}.")
            self._commit([{"op": "delete_versions", "ctx": ctx_name, "subject": name,
                           "versions": [v.version]}])
            return v.version
