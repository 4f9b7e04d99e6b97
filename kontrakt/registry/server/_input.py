"""A schema as a request sends it, made ready to look up, check and store.

:class:`SchemaInput` (a room of :class:`~kontrakt.registry.server.RegistryState`) checks a
request body and resolves its references under the state's lock (:class:`Prepared`), then
validates, compiles and canonicalizes the schema outside it (:class:`Parsed`, with the
identity key it is stored and found by), so that readers never wait for protoc.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kontrakt.registry._errors import InvalidSchemaError, SchemaRegistryError
from kontrakt.registry._models import Schema, SchemaReference
from kontrakt.registry.server._core import StateCore
from kontrakt.registry.server._settings import qualify, split_subject
from kontrakt.registry.server._store import DEFAULT_CONTEXT
from kontrakt.registry.server._validate import (
    canonical_protobuf,
    identity_key,
    normalized_text,
    protobuf_text,
    validate_schema,
)

__all__ = ["Parsed", "Prepared", "SchemaInput"]


@dataclass(frozen=True)
class Prepared:
    """A schema request body checked and its references resolved (see ``_prepare_input``)."""

    text: str
    schema_type: str
    refs: list[SchemaReference]
    resolved: list[tuple[str, str, str]]
    meta: dict[str, Any] | None
    rules: dict[str, Any] | None


@dataclass(frozen=True)
class Parsed:
    """A validated schema: its model, stored text and identity key (``_complete_input``)."""

    model: Schema
    refs_json: list[dict[str, Any]]
    stored: str
    key: str
    resolved: list[tuple[str, str, str]]
    #: the schema type and text the identity key is made of (see :meth:`with_contract`)
    ident: tuple[str, str]

    def with_contract(self, meta: dict[str, Any] | None, rules: dict[str, Any] | None
                      ) -> Parsed:
        """The same schema with other metadata and rule set (and so another identity)."""
        model = Schema.from_dict({**self.model.to_dict(), "metadata": meta, "ruleSet": rules})
        key = identity_key(*self.ident, self.refs_json, {"m": meta, "r": rules})
        return Parsed(model, self.refs_json, self.stored, key, self.resolved, self.ident)


class SchemaInput(StateCore):
    """Turns request bodies into :class:`Parsed` schemas (see the module doc)."""

    def _prepare_input(self, subject: str, body: Any) -> Prepared:
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
        return Prepared(text, schema_type.upper(), refs, self._resolve_refs(subject, refs, set()),
                      meta, rules)

    def _complete_input(self, subject: str, inp: Prepared, normalize: bool) -> Parsed:
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
        return Parsed(model, refs_json, stored, key, inp.resolved, (inp.schema_type, text))

    def _parse_input(self, subject: str, body: Any, normalize: bool) -> Parsed:
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
