"""The registry's reads: schemas by subject, version, id and guid, and compatibility tests.

:class:`SchemaReads` (a room of :class:`~kontrakt.registry.server.RegistryState`) answers
the GET endpoints and the two POSTs that change nothing (lookup of a schema under a
subject, and a compatibility test); the last two compile the schema outside the state's
lock like a registration does.
"""

from __future__ import annotations

from typing import Any

from kontrakt.registry._errors import SchemaNotFoundError
from kontrakt.registry._models import SchemaReference
from kontrakt.registry.server._contracts import populate
from kontrakt.registry.server._input import SchemaInput
from kontrakt.registry.server._settings import qualify, split_subject
from kontrakt.registry.server._store import DEFAULT_CONTEXT, ContextRec, SubjectRec
from kontrakt.registry.server._validate import resolved_avro, serialized_protobuf

__all__ = ["SchemaReads"]


class SchemaReads(SchemaInput):
    """GET /subjects..., /schemas..., POST /subjects/{subject} and /compatibility."""

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
        ctx = self.contexts.get(ctx_name) or ContextRec()
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
            sub = ctx.subjects.get(name) or SubjectRec()
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
