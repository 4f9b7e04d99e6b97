"""The sans-I/O core of the registry clients: each registry operation once, for the sync,
async and mock clients, with its caching rules.

Each public operation of :class:`RegistryCore` is a generator that yields
:class:`~kontrakt.registry._exchange.Call` objects (one REST call each, built here) and
receives the decoded JSON answer, which it parses into the models and caches. Performing a
call (attempts, backoff, fail-over, OAuth token) is
:class:`~kontrakt.registry._exchange.RegistryExchange`'s, which :class:`RegistryCore`
extends; the shells (:mod:`kontrakt.registry._shell`) only perform the resulting actions
with httpx. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any
from urllib.parse import quote

from cachetools import Cache, LRUCache, TTLCache

from kontrakt.registry._config import RegistryClientConfig
from kontrakt.registry._exchange import (
    Call,
    HttpRequest,
    Op,
    RegistryExchange,
    Sleep,
    _shape,
    copy_error,
)
from kontrakt.registry._models import (
    CompatibilityLevel,
    CompatibilityTestResult,
    RegisteredSchema,
    Schema,
    SchemaVersion,
    ServerConfig,
)

# Call, HttpRequest, Op, Sleep and copy_error are re-exported: they were first defined here.
__all__ = ["LEVELS", "Call", "HttpRequest", "Op", "RegistryCore", "Sleep", "copy_error"]


def _q(value: str) -> str:
    return quote(value, safe="")


def _b(flag: bool) -> str:
    return "true" if flag else "false"


def _ctx_of(subject: str | None) -> str:
    if subject and subject.startswith(":.") and ":" in subject[2:]:
        return subject[1:].partition(":")[0]
    return "."


def _schema_tags(tags: Any) -> list[dict[str, Any]]:
    """Tags for the tags endpoint: ``{field path: [tags]}`` (``SR_FIELD`` entities), or the
    registry's own ``[{"entity": {"entityPath", "entityType"}, "tags": [...]}]``."""
    if isinstance(tags, Mapping):
        return [{"entity": {"entityPath": str(path), "entityType": "SR_FIELD"},
                 "tags": [str(t) for t in names]} for path, names in tags.items()]
    return [dict(item) for item in tags]


def _plain(value: Any) -> Any:
    """A ``Metadata`` / ``RuleSet`` (or a plain mapping) as the registry's JSON."""
    to_dict = getattr(value, "to_dict", None)
    return to_dict() if callable(to_dict) else (dict(value) if value is not None else None)


def _read(path: str, params: Iterable[tuple[str, str]] = ()) -> Call:
    """A GET: identical reads in flight share one request, and "not found" is remembered."""
    query = tuple(params)
    return Call("GET", path, query, key=("GET", path, query))


def _version_arg(version: int | str) -> str:
    if isinstance(version, bool) or not isinstance(version, (int, str)):
        raise TypeError(f"version must be an int or 'latest', not {type(version).__name__}")
    return str(version)


class RegistryCore(RegistryExchange):
    """The registry operations and their caches, shared by the sync, async and mock clients.

    Caches (all guarded by one lock; cachetools caches are not thread-safe):

    * schemas by ``(context, id, format)``: forever, ids are immutable;
    * registrations, lookups and ``(subject, version)`` reads: LRU of ``cache.capacity``;
    * latest versions: TTL of ``cache.latest.ttl.sec`` (LRU, no expiry, when unset, as in
      confluent-kafka);
    * "not found" answers of reads: ``cache.negative.ttl.sec`` (default 1 s), dropped on any
      write through this client.

    Args:
        config: validated settings.
    """

    def __init__(self, config: RegistryClientConfig) -> None:
        super().__init__(config)
        cap = config.cache_capacity
        self._by_id: dict[tuple[str, int, str | None], tuple[Schema, str | None]] = {}
        self._registered: LRUCache[Hashable, RegisteredSchema] = LRUCache(cap)
        self._lookups: LRUCache[Hashable, RegisteredSchema] = LRUCache(cap)
        self._versions: LRUCache[Hashable, RegisteredSchema] = LRUCache(cap)
        self._latest: Cache[Hashable, RegisteredSchema] = (
            TTLCache(cap, config.cache_latest_ttl_sec) if config.cache_latest_ttl_sec
            else LRUCache(cap))

    # ------------------------------------------------------------------ caches
    def _forget_subject(self, subject: str) -> None:
        with self._lock:
            for cache in (self._registered, self._lookups, self._versions, self._latest):
                for k in [k for k in cache if isinstance(k, tuple) and k[0] == subject]:
                    cache.pop(k, None)
            self._negative.clear()

    def clear_latest_caches(self) -> None:
        """Drop cached latest versions (plain and with metadata)."""
        with self._lock:
            self._latest.clear()

    def clear_caches(self) -> None:
        """Drop every cache, including schemas by id."""
        with self._lock:
            for cache in (self._registered, self._lookups, self._versions, self._latest,
                          self._negative):
                cache.clear()
            self._by_id.clear()

    # ------------------------------------------------------------------ schemas
    def register_schema_full_response(self, subject_name: str, schema: Schema,
                                      normalize_schemas: bool = False) -> Op[RegisteredSchema]:
        key = (subject_name, schema, normalize_schemas)
        hit = self._get(self._registered, key)
        if hit is not None:
            return hit
        body = yield Call("POST", f"/subjects/{_q(subject_name)}/versions",
                          (("normalize", _b(normalize_schemas)),), schema.to_dict())
        data = dict(body) if isinstance(body, dict) else {}
        data.setdefault("subject", subject_name)
        reg: RegisteredSchema = _shape("register", RegisteredSchema.from_dict, data, schema)
        self._forget_subject(subject_name)
        with self._lock:
            self._registered[key] = reg
            self._by_id.setdefault((_ctx_of(subject_name), reg.schema_id, None),
                                   (reg.schema, reg.guid))
        return reg

    def register_schema(self, subject_name: str, schema: Schema,
                        normalize_schemas: bool = False) -> Op[int]:
        reg = yield from self.register_schema_full_response(subject_name, schema,
                                                            normalize_schemas)
        return reg.schema_id

    def get_schema(self, schema_id: int, subject_name: str | None = None,
                   fmt: str | None = None) -> Op[Schema]:
        key = (_ctx_of(subject_name), int(schema_id), fmt)
        hit = self._get(self._by_id, key)
        if hit is not None:
            return hit[0]
        params: list[tuple[str, str]] = []
        if subject_name is not None:
            params.append(("subject", subject_name))
        if fmt is not None:
            params.append(("format", fmt))
        path = f"/schemas/ids/{int(schema_id)}"
        body = yield _read(path, params)
        schema: Schema = _shape("schema", Schema.from_dict, body)
        with self._lock:
            self._by_id[key] = (schema, body.get("guid"))
        return schema

    def get_schema_by_guid(self, guid: str, fmt: str | None = None) -> Op[Schema]:
        params = (("format", fmt),) if fmt else ()
        path = f"/schemas/guids/{_q(guid)}"
        body = yield _read(path, params)
        return _shape("schema", Schema.from_dict, body)  # type: ignore[no-any-return]

    def get_schema_types(self) -> Op[list[str]]:
        body = yield _read("/schemas/types")
        return [str(t) for t in body]

    def _paged(self, path: str, offset: int, limit: int, **flags: Any) -> Call:
        params = [(k, _b(v) if isinstance(v, bool) else str(v))
                  for k, v in flags.items() if v is not None]
        params += [("offset", str(offset)), ("limit", str(limit))]
        return _read(path, params)

    def get_subjects_by_schema_id(self, schema_id: int, subject_name: str | None = None,
                                  deleted: bool = False, offset: int = 0, limit: int = -1
                                  ) -> Op[list[str]]:
        body = yield self._paged(f"/schemas/ids/{int(schema_id)}/subjects", offset, limit,
                                 subject=subject_name, deleted=deleted)
        return [str(s) for s in body]

    def get_schema_versions(self, schema_id: int, subject_name: str | None = None,
                            deleted: bool = False, offset: int = 0, limit: int = -1
                            ) -> Op[list[SchemaVersion]]:
        body = yield self._paged(f"/schemas/ids/{int(schema_id)}/versions", offset, limit,
                                 subject=subject_name, deleted=deleted)
        return [_shape("versions", SchemaVersion.from_dict, x) for x in body]

    def lookup_schema(self, subject_name: str, schema: Schema, normalize_schemas: bool = False,
                      fmt: str | None = None, deleted: bool = False) -> Op[RegisteredSchema]:
        key = (subject_name, schema, normalize_schemas, fmt, deleted)
        hit = self._get(self._lookups, key)
        if hit is not None:
            return hit
        params = [("normalize", _b(normalize_schemas)), ("deleted", _b(deleted))]
        if fmt is not None:
            params.append(("format", fmt))
        body = yield Call("POST", f"/subjects/{_q(subject_name)}", tuple(params),
                          schema.to_dict(), key=("LOOKUP", *key))
        found = _shape("lookup", RegisteredSchema.from_dict, body)
        # Confluent's client hands back the caller's schema object, keep that behaviour.
        reg = RegisteredSchema(found.schema_id, schema, found.subject or subject_name,
                               found.version, found.guid)
        with self._lock:
            self._lookups[key] = reg
        return reg

    # ------------------------------------------------------------------ subjects
    def get_subjects(self, subject_prefix: str | None = None, deleted: bool = False,
                     deleted_only: bool = False, offset: int = 0, limit: int = -1
                     ) -> Op[list[str]]:
        body = yield self._paged("/subjects", offset, limit, subjectPrefix=subject_prefix,
                                 deleted=deleted, deleted_only=deleted_only)
        return [str(s) for s in body]

    def delete_subject(self, subject_name: str, permanent: bool = False) -> Op[list[int]]:
        params = (("permanent", "true"),) if permanent else ()
        body = yield Call("DELETE", f"/subjects/{_q(subject_name)}", params)
        self._forget_subject(subject_name)
        return [int(v) for v in body]

    def get_latest_version(self, subject_name: str, fmt: str | None = None
                           ) -> Op[RegisteredSchema]:
        key = (subject_name, "latest", fmt)
        hit = self._get(self._latest, key)
        if hit is not None:
            return hit
        params = (("format", fmt),) if fmt else ()
        path = f"/subjects/{_q(subject_name)}/versions/latest"
        body = yield _read(path, params)
        reg = _shape("version", RegisteredSchema.from_dict, body)
        with self._lock:
            self._latest[key] = reg
        return reg  # type: ignore[no-any-return]

    def get_latest_with_metadata(self, subject_name: str, metadata: Mapping[str, str],
                                 deleted: bool = False, fmt: str | None = None
                                 ) -> Op[RegisteredSchema]:
        key = (subject_name, "metadata", frozenset(metadata.items()), deleted, fmt)
        hit = self._get(self._latest, key)
        if hit is not None:
            return hit
        params: list[tuple[str, str]] = [("deleted", _b(deleted))]
        if fmt is not None:
            params.append(("format", fmt))
        for k, v in metadata.items():
            params += [("key", k), ("value", v)]
        path = f"/subjects/{_q(subject_name)}/metadata"
        body = yield _read(path, params)
        reg = _shape("version", RegisteredSchema.from_dict, body)
        with self._lock:
            self._latest[key] = reg
        return reg  # type: ignore[no-any-return]

    def get_version(self, subject_name: str, version: int | str = "latest",
                    deleted: bool = False, fmt: str | None = None) -> Op[RegisteredSchema]:
        v = _version_arg(version)
        key = (subject_name, v, deleted, fmt)
        cacheable = v not in ("latest", "-1")
        if cacheable:
            hit = self._get(self._versions, key)
            if hit is not None:
                return hit
        params: list[tuple[str, str]] = [("deleted", _b(deleted))]
        if fmt is not None:
            params.append(("format", fmt))
        path = f"/subjects/{_q(subject_name)}/versions/{_q(v)}"
        body = yield _read(path, params)
        reg = _shape("version", RegisteredSchema.from_dict, body)
        if cacheable:
            with self._lock:
                self._versions[key] = reg
        return reg  # type: ignore[no-any-return]

    def get_referenced_by(self, subject_name: str, version: int | str = "latest",
                          offset: int = 0, limit: int = -1) -> Op[list[int]]:
        path = f"/subjects/{_q(subject_name)}/versions/{_q(_version_arg(version))}/referencedby"
        body = yield self._paged(path, offset, limit)
        return [int(i) for i in body]

    def get_versions(self, subject_name: str, deleted: bool = False,
                     deleted_only: bool = False, offset: int = 0, limit: int = -1
                     ) -> Op[list[int]]:
        body = yield self._paged(f"/subjects/{_q(subject_name)}/versions", offset, limit,
                                 deleted=deleted, deleted_only=deleted_only)
        return [int(v) for v in body]

    def delete_version(self, subject_name: str, version: int | str,
                       permanent: bool = False) -> Op[int]:
        params = (("permanent", "true"),) if permanent else ()
        path = f"/subjects/{_q(subject_name)}/versions/{_q(_version_arg(version))}"
        body = yield Call("DELETE", path, params)
        self._forget_subject(subject_name)
        return int(body)

    # ------------------------------------------------------------------ compatibility
    def _compat(self, subject_name: str, schema: Schema, version: int | str | None,
                normalize: bool, verbose: bool) -> Op[CompatibilityTestResult]:
        path = f"/compatibility/subjects/{_q(subject_name)}/versions"
        if version is not None:
            path += f"/{_q(_version_arg(version))}"
        params = (("normalize", _b(normalize)), ("verbose", _b(verbose)))
        body = yield Call("POST", path, params, schema.to_dict())
        return _shape("compatibility", lambda b: CompatibilityTestResult(  # type: ignore[no-any-return]
            bool(b["is_compatible"]), tuple(str(m) for m in b.get("messages") or ())), body)

    def test_compatibility(self, subject_name: str, schema: Schema,
                           version: int | str = "latest", normalize: bool = False,
                           verbose: bool = False) -> Op[bool]:
        res = yield from self._compat(subject_name, schema, version, normalize, verbose)
        return res.is_compatible

    def test_compatibility_all_versions(self, subject_name: str, schema: Schema,
                                        normalize: bool = False, verbose: bool = False
                                        ) -> Op[bool]:
        res = yield from self._compat(subject_name, schema, None, normalize, verbose)
        return res.is_compatible

    def test_compatibility_verbose(self, subject_name: str, schema: Schema,
                                   version: int | str | None = "latest",
                                   normalize: bool = False) -> Op[CompatibilityTestResult]:
        return (yield from self._compat(subject_name, schema, version, normalize, True))

    # ------------------------------------------------------------------ config and mode
    @staticmethod
    def _config_path(root: str, subject_name: str | None) -> str:
        return f"/{root}" if subject_name is None else f"/{root}/{_q(subject_name)}"

    def set_compatibility(self, subject_name: str | None = None, level: str | None = None
                          ) -> Op[str]:
        if level is None:
            raise ValueError("level must be set")
        body = yield Call("PUT", self._config_path("config", subject_name), (),
                          {"compatibility": str(level).upper()})
        return str(body["compatibility"])

    def get_compatibility(self, subject_name: str | None = None) -> Op[str]:
        params = (("defaultToGlobal", "true"),) if subject_name is not None else ()
        body = yield Call("GET", self._config_path("config", subject_name), params)
        return str(body["compatibilityLevel"])

    def set_config(self, subject_name: str | None = None, config: ServerConfig | None = None
                   ) -> Op[ServerConfig]:
        if config is None:
            raise ValueError("config must be set")
        body = yield Call("PUT", self._config_path("config", subject_name), (),
                          config.to_dict())
        return _shape("config", ServerConfig.from_dict, body)  # type: ignore[no-any-return]

    def get_config(self, subject_name: str | None = None) -> Op[ServerConfig]:
        params = (("defaultToGlobal", "true"),) if subject_name is not None else ()
        body = yield Call("GET", self._config_path("config", subject_name), params)
        return _shape("config", ServerConfig.from_dict, body)  # type: ignore[no-any-return]

    def delete_config(self, subject_name: str | None = None) -> Op[ServerConfig]:
        body = yield Call("DELETE", self._config_path("config", subject_name))
        return _shape("config", ServerConfig.from_dict, body or {})  # type: ignore[no-any-return]

    def get_mode(self, subject_name: str) -> Op[str]:
        body = yield Call("GET", self._config_path("mode", subject_name),
                          (("defaultToGlobal", "true"),))
        return str(body["mode"])

    def update_mode(self, subject_name: str, mode: str, force: bool = False) -> Op[str]:
        body = yield Call("PUT", self._config_path("mode", subject_name),
                          (("force", _b(force)),), {"mode": str(mode).upper()})
        return str(body["mode"])

    def delete_mode(self, subject_name: str) -> Op[str]:
        body = yield Call("DELETE", self._config_path("mode", subject_name))
        return str(body["mode"])

    def get_global_mode(self) -> Op[str]:
        body = yield Call("GET", "/mode")
        return str(body["mode"])

    def update_global_mode(self, mode: str, force: bool = False) -> Op[str]:
        body = yield Call("PUT", "/mode", (("force", _b(force)),), {"mode": str(mode).upper()})
        return str(body["mode"])

    def get_contexts(self, offset: int = 0, limit: int = -1,
                     context_prefix: str | None = None) -> Op[list[str]]:
        body = yield self._paged("/contexts", offset, limit, contextPrefix=context_prefix)
        return [str(c) for c in body]

    def modify_schema_tags(self, subject_name: str, version: int | str,
                           tags_to_add: Any = None, tags_to_remove: Any = None,
                           new_version: int | None = None,
                           metadata: Mapping[str, Any] | None = None,
                           rule_set: Mapping[str, Any] | None = None,
                           rules_to_merge: Mapping[str, Any] | None = None,
                           rules_to_remove: Iterable[str] | None = None
                           ) -> Op[RegisteredSchema]:
        request: dict[str, Any] = {}
        for member, tags in (("tagsToAdd", tags_to_add), ("tagsToRemove", tags_to_remove)):
            if tags is not None:
                request[member] = _schema_tags(tags)
        for member, value in (("newVersion", new_version), ("metadata", _plain(metadata)),
                              ("ruleSet", _plain(rule_set)),
                              ("rulesToMerge", _plain(rules_to_merge))):
            if value is not None:
                request[member] = value
        if rules_to_remove is not None:
            request["rulesToRemove"] = list(rules_to_remove)
        body = yield Call("POST", f"/subjects/{_q(subject_name)}/versions/{_q(str(version))}"
                          "/tags", (), request)
        self._forget_subject(subject_name)
        return _shape("tags", RegisteredSchema.from_dict,  # type: ignore[no-any-return]
                      {"subject": subject_name, **body})


# Re-exported for callers that validate a level before sending it.
LEVELS = tuple(level.value for level in CompatibilityLevel)
