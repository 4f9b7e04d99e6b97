"""The sans-I/O core of the registry clients: request building, response parsing, caching
rules, retries and fail-over, written once for the sync and the async client.

Each public operation is a generator that yields :class:`Call` objects (one REST call each)
and receives the decoded JSON answer; :meth:`RegistryCore.exchange` turns one call into
:class:`HttpRequest` / :class:`Sleep` actions (retries, backoff, fail-over, OAuth token).
The shells (:class:`ClientShell` subclasses in :mod:`kontrakt.registry._client` and
:mod:`kontrakt.registry._async_client`) only perform those actions with httpx.
"""

from __future__ import annotations

import base64
import json
import random
import threading
import time
from collections.abc import Generator, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from cachetools import Cache, LRUCache, TTLCache

from kontrakt._oauth import TokenCache, client_credentials_request, parse_token_response
from kontrakt.errors import SchemaRegistryError
from kontrakt.registry._config import RegistryClientConfig, parse_config
from kontrakt.registry._errors import RegistryConnectionError, error_from_response
from kontrakt.registry._models import (
    CompatibilityLevel,
    CompatibilityTestResult,
    RegisteredSchema,
    Schema,
    SchemaVersion,
    ServerConfig,
)

__all__ = ["Call", "ClientShell", "HttpRequest", "RegistryCore", "Sleep", "http_timeout",
           "past_deadline"]

T = TypeVar("T")
ACCEPT = ("application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, "
          "application/json")
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
RETRIABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class Call:
    """One REST call of an operation.

    Attributes:
        method, path, params, body: what to send (``path`` is already percent-encoded).
        key: identity of an idempotent read: concurrent identical calls are coalesced into
            one HTTP request and a "not found" answer is cached briefly under it.
    """

    method: str
    path: str
    params: tuple[tuple[str, str], ...] = ()
    body: Any = None
    key: Hashable | None = None


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """One HTTP request for a shell to send; the shell answers ``(status, body bytes)`` or
    the transport exception it got.

    Attributes:
        timeout: seconds for each read and write of this attempt (None: the client's).
        connect_timeout: seconds to connect (None: the client's).
        deadline: ``time.monotonic()`` by which the whole answer must have arrived (None:
            no bound); a shell that passes it while reading raises ``httpx.ReadTimeout``.
    """

    method: str
    url: str
    params: tuple[tuple[str, str], ...]
    headers: Mapping[str, str]
    content: bytes | None = None
    timeout: float | None = None
    connect_timeout: float | None = None
    deadline: float | None = None


@dataclass(frozen=True, slots=True)
class Sleep:
    """Wait before the next attempt (a shell sleeps, the async one without blocking)."""

    seconds: float


Op = Generator[Call, Any, T]
Reply = "tuple[int, bytes] | BaseException | None"
Exchange = Generator["HttpRequest | Sleep", Any, Any]


def http_timeout(request: HttpRequest) -> Any:
    """The ``timeout=`` for httpx of one attempt (the client's own when the core set none)."""
    if request.timeout is None:
        return httpx.USE_CLIENT_DEFAULT
    return httpx.Timeout(request.timeout, connect=request.connect_timeout)


def past_deadline(request: HttpRequest) -> None:
    """Raise ``httpx.ReadTimeout`` if the attempt's answer is still arriving at its deadline.

    Raises:
        httpx.ReadTimeout: the deadline has passed.
    """
    if request.deadline is not None and time.monotonic() > request.deadline:
        raise httpx.ReadTimeout("the answer was still arriving at total.timeout.ms")


def _not_sent(exc: BaseException) -> bool:
    """Whether a failed attempt never reached a server (refused, DNS, connect timeout, no
    free pooled connection): retrying it cannot apply an operation twice."""
    return isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout))


def _describe(exc: BaseException | None, request: HttpRequest | None) -> str:
    if isinstance(exc, httpx.ConnectTimeout) and request is not None:
        return f"no connection within {request.connect_timeout:.3g} s"
    if isinstance(exc, httpx.ReadTimeout) and request is not None:
        return f"no answer within {request.timeout:.3g} s"
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect ({exc})"
    return repr(exc)


class _Budget:
    """The time one REST call may still take (``total.timeout.ms``), and its attempts."""

    __slots__ = ("attempts", "cfg", "deadline", "start")

    def __init__(self, cfg: RegistryClientConfig) -> None:
        self.cfg = cfg
        self.start = time.monotonic()
        self.deadline = self.start + cfg.total_timeout
        self.attempts = 0

    def request(self, method: str, url: str, params: tuple[tuple[str, str], ...],
                headers: Mapping[str, str], content: bytes | None) -> HttpRequest | None:
        """The next attempt with its timeouts cut to the time left; None when none is left."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            return None
        self.attempts += 1
        return HttpRequest(method, url, params, headers, content,
                           timeout=min(self.cfg.timeout or left, left),
                           connect_timeout=min(self.cfg.connect_timeout, left),
                           deadline=self.deadline)

    def pause(self, seconds: float) -> Sleep | None:
        """A backoff sleep, or None when the call would have no time left after it."""
        if time.monotonic() + seconds >= self.deadline:
            return None
        return Sleep(seconds)

    def cut_short(self, request: HttpRequest) -> bool:
        """Whether ``request`` had less time than an attempt is given (the call's deadline
        was near)."""
        return not self.cfg.timeout or (request.timeout or 0.0) < self.cfg.timeout

    def spent(self) -> str:
        return (f"{self.attempts} attempt{'s' if self.attempts != 1 else ''} in "
                f"{time.monotonic() - self.start:.1f} s")


def _q(value: str) -> str:
    return quote(value, safe="")


def _b(flag: bool) -> str:
    return "true" if flag else "false"


def _ctx_of(subject: str | None) -> str:
    if subject and subject.startswith(":.") and ":" in subject[2:]:
        return subject[1:].partition(":")[0]
    return "."


def _shape(what: str, fn: Any, *args: Any) -> Any:
    """Parse a response, turning a surprising shape into a registry error."""
    try:
        return fn(*args)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SchemaRegistryError(200, -1, f"unexpected {what} response: {exc!r}") from None


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


def _naming_request(err: SchemaRegistryError, method: str, url: str) -> SchemaRegistryError:
    """``err`` with the request it answered added to its message; a 404 that is not one of
    the registry's own "not found" codes means no such endpoint: usually a ``url`` that is
    not the registry's base URL."""
    hint = ""
    if err.http_status_code == 404 and err.error_code in (404, SchemaRegistryError.UNKNOWN):
        hint = ": no such endpoint; is the client's url the registry's base URL?"
    return type(err)(err.http_status_code, err.error_code,
                     f"{err.error_message} ({method} {url}){hint}")


def copy_error(exc: SchemaRegistryError) -> SchemaRegistryError:
    """A fresh instance of the same error (so cached errors do not grow tracebacks)."""
    return type(exc)(exc.http_status_code, exc.error_code, exc.error_message)


class RegistryCore:
    """Caches and protocol logic shared by the sync, async and mock clients.

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
        self.config = config
        cap = config.cache_capacity
        self._lock = threading.Lock()
        self._by_id: dict[tuple[str, int, str | None], tuple[Schema, str | None]] = {}
        self._registered: LRUCache[Hashable, RegisteredSchema] = LRUCache(cap)
        self._lookups: LRUCache[Hashable, RegisteredSchema] = LRUCache(cap)
        self._versions: LRUCache[Hashable, RegisteredSchema] = LRUCache(cap)
        self._latest: Cache[Hashable, RegisteredSchema] = (
            TTLCache(cap, config.cache_latest_ttl_sec) if config.cache_latest_ttl_sec
            else LRUCache(cap))
        self._negative: TTLCache[Hashable, SchemaRegistryError] = TTLCache(
            cap, max(config.cache_negative_ttl_sec, 1e-6))
        self._good_url = 0
        self._token = TokenCache()
        self.requests_sent = 0

    # ------------------------------------------------------------------ caches
    def _get(self, cache: Mapping[Any, T], key: Hashable) -> T | None:
        with self._lock:
            return cache.get(key)

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

    # ------------------------------------------------------------------ transport
    def backoff(self, attempt: int) -> float:
        """Full-jitter exponential backoff in seconds before retry ``attempt`` (0-based)."""
        cap = min(self.config.retries_wait_ms * (2.0 ** attempt), self.config.retries_max_wait_ms)
        return random.random() * cap / 1000.0

    def _token_exchange(self, budget: _Budget) -> Exchange:
        """Fetch an OAuth client-credentials token when the cached one is due to expire
        (request and answer as for Kafka's SASL/OAUTHBEARER: :mod:`kontrakt._oauth`)."""
        cfg = self.config
        assert cfg.oauth_endpoint and cfg.oauth_client_id and cfg.oauth_client_secret
        headers, content = client_credentials_request(
            cfg.oauth_client_id, cfg.oauth_client_secret, cfg.oauth_scope)
        last: BaseException | None = None
        for attempt in range(cfg.max_retries + 1):
            request = budget.request("POST", cfg.oauth_endpoint, (), headers, content)
            if request is None:
                break
            reply = yield request
            if isinstance(reply, tuple) and 200 <= reply[0] < 300:
                token = _shape("token", parse_token_response, reply[1])
                self._token.store(token)
                return str(token.value)
            if isinstance(reply, tuple) and reply[0] not in RETRIABLE_STATUS:
                raise SchemaRegistryError(reply[0], -1, "OAuth token request refused: "
                                          f"{reply[1][:300]!r}")
            last = reply if isinstance(reply, BaseException) else None
            if attempt < cfg.max_retries:
                pause = budget.pause(self.backoff(attempt))
                if pause is None:
                    break
                yield pause
        raise RegistryConnectionError(
            -1, -1, f"OAuth token endpoint {cfg.oauth_endpoint} unreachable: {last!r} "
            f"({budget.spent()})")

    def _headers(self, with_body: bool, budget: _Budget) -> Exchange:
        cfg = self.config
        headers = {"Accept": ACCEPT}
        if with_body:
            headers["Content-Type"] = CONTENT_TYPE
        if cfg.basic_auth is not None:
            raw = f"{cfg.basic_auth[0]}:{cfg.basic_auth[1]}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(raw).decode()
        elif cfg.bearer_source is not None:
            if cfg.bearer_source == "STATIC_TOKEN":
                token = cfg.bearer_token or ""
            else:
                fresh = self._token.fresh()
                token = fresh.value if fresh is not None else (
                    yield from self._token_exchange(budget))
            headers["Authorization"] = f"Bearer {token}"
            if cfg.logical_cluster:
                headers["target-sr-cluster"] = cfg.logical_cluster
            if cfg.identity_pool:
                headers["Confluent-Identity-Pool-Id"] = cfg.identity_pool
        return headers

    def exchange(self, call: Call) -> Exchange:
        """Perform one call: attempts, backoff and fail-over, all within ``total.timeout.ms``.

        An attempt that never reached a server (refused, DNS, connect timeout) is retried for
        every call. One that may have reached it (no answer within ``timeout``, a dropped
        connection, HTTP 408/429/5xx) is retried unless the call is a DELETE: a repeated
        delete whose first try was applied would answer "not found" and hide it. Each URL
        gets ``max.retries`` retries with jittered exponential backoff, then the next URL is
        tried; no attempt or sleep goes past the call's total timeout.

        Returns (as the generator's value): the decoded JSON body, or None for an empty one.

        Raises:
            SchemaRegistryError: the registry's error (most specific subclass), or
                :class:`RegistryConnectionError` when no URL answered in time (naming the
                URLs, the last failure, the attempts made and the time spent).
        """
        if call.key is not None:
            cached = self._get(self._negative, call.key)
            if cached is not None:
                raise copy_error(cached)
        budget = _Budget(self.config)
        headers = yield from self._headers(call.body is not None, budget)
        content = json.dumps(call.body).encode() if call.body is not None else None
        urls = self.config.urls
        repeatable = call.method != "DELETE"
        last: BaseException | None = None
        last_request: HttpRequest | None = None
        start = self._good_url
        out_of_time = False
        for i in range(len(urls)):
            index = (start + i) % len(urls)
            for attempt in range(self.config.max_retries + 1):
                request = budget.request(call.method, urls[index] + call.path, call.params,
                                         headers, content)
                if request is None:
                    out_of_time = True
                    break
                self.requests_sent += 1
                last_request = request
                reply = yield request
                if isinstance(reply, BaseException):
                    if (isinstance(last, SchemaRegistryError) and budget.cut_short(request)
                            and isinstance(reply, httpx.TimeoutException)):
                        # The call's own deadline ended this attempt: the registry's last
                        # answer (a 5xx) says more than "no answer in a millisecond".
                        out_of_time = True
                        break
                    last = reply
                    if not repeatable and not _not_sent(reply):
                        raise RegistryConnectionError(
                            -1, -1, f"no answer from the Schema Registry at {urls[index]} to "
                            f"{call.method} {call.path}: {_describe(reply, request)}; not "
                            "retried, as the registry may have applied it") from reply
                else:
                    status, data = reply
                    if 200 <= status < 300:
                        self._good_url = index
                        if not data:
                            return None
                        return _shape("registry", json.loads, data)
                    try:
                        body: Any = json.loads(data)
                    except ValueError:
                        body = data.decode("utf-8", "replace")
                    err = _naming_request(error_from_response(status, body), call.method,
                                          urls[index] + call.path)
                    if status not in RETRIABLE_STATUS or not repeatable:
                        if status == 404 and call.key is not None:
                            with self._lock:
                                self._negative[call.key] = err
                        raise err
                    last = err
                if attempt < self.config.max_retries:
                    pause = budget.pause(self.backoff(attempt))
                    if pause is None:
                        out_of_time = True
                        break
                    yield pause
            if out_of_time:
                break
        if isinstance(last, SchemaRegistryError):
            raise last
        bound = (f"; total.timeout.ms ({self.config.total_timeout * 1000:.0f}) reached"
                 if out_of_time else "")
        raise RegistryConnectionError(
            -1, -1, f"Schema Registry unreachable at {', '.join(urls)}: "
            f"{_describe(last, last_request)} ({budget.spent()}{bound})") from last

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


class ClientShell:
    """What the sync and async clients share besides the core: config validation, caches.

    Subclasses add the httpx client (built from :meth:`_http_options`) and the loop that
    performs the core's actions.

    Args:
        config: confluent-style properties.
        options: the same as snake_case keywords.

    Raises:
        ConfigError: unknown or invalid property.
    """

    def __init__(self, config: Mapping[str, Any] | None, options: Mapping[str, Any]) -> None:
        self._core = RegistryCore(parse_config(config, options))

    def _http_options(self) -> dict[str, Any]:
        """Keyword arguments for ``httpx.Client`` / ``httpx.AsyncClient``."""
        cfg = self._core.config
        timeout = httpx.Timeout(cfg.timeout or None, connect=cfg.connect_timeout)
        return {"verify": cfg.verify, "proxy": cfg.proxy, "timeout": timeout}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(urls={list(self._core.config.urls)!r})"

    def clear_latest_caches(self) -> None:
        """Forget cached latest versions (plain and with metadata)."""
        self._core.clear_latest_caches()

    def clear_caches(self) -> None:
        """Forget every cached answer, schemas by id included."""
        self._core.clear_caches()

    @property
    def requests_sent(self) -> int:
        """HTTP attempts made so far (retries included); handy to verify caching."""
        return self._core.requests_sent
