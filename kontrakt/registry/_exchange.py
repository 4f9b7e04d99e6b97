"""One REST call of the registry clients, sans I/O: the actions a shell performs, and the
attempts, backoff, fail-over and OAuth token behind each call.

An operation of :class:`~kontrakt.registry._core.RegistryCore` yields :class:`Call` objects;
:meth:`RegistryExchange.exchange` turns one call into :class:`HttpRequest` / :class:`Sleep`
actions within the call's ``total.timeout.ms`` (:class:`_Budget`), and remembers "not found"
answers of reads briefly. The shells (:mod:`kontrakt.registry._shell`) perform the actions
with httpx and send back what they got; httpx is imported here only to classify the
transport exceptions they send back.
"""

from __future__ import annotations

import base64
import json
import random
import threading
import time
from collections.abc import Generator, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
from cachetools import TTLCache

from kontrakt._oauth import TokenCache, client_credentials_request, parse_token_response
from kontrakt.errors import SchemaRegistryError
from kontrakt.registry._config import RegistryClientConfig
from kontrakt.registry._errors import RegistryConnectionError, error_from_response

__all__ = ["Call", "Exchange", "HttpRequest", "Op", "RegistryExchange", "Sleep", "copy_error"]

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


def _shape(what: str, fn: Any, *args: Any) -> Any:
    """Parse a response, turning a surprising shape into a registry error."""
    try:
        return fn(*args)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SchemaRegistryError(200, -1, f"unexpected {what} response: {exc!r}") from None


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


class RegistryExchange:
    """Performs one :class:`Call` at a time, as actions for a shell (see :meth:`exchange`).

    It keeps what every call shares: the settings, the URL that answered last (tried first
    next time), the OAuth token, the "not found" answers of reads (for
    ``cache.negative.ttl.sec``; :class:`~kontrakt.registry._core.RegistryCore` drops them
    on any write) and the count of attempts made.

    Args:
        config: validated settings.
    """

    def __init__(self, config: RegistryClientConfig) -> None:
        self.config = config
        # One lock for every cache of the core (cachetools caches are not thread-safe).
        self._lock = threading.Lock()
        self._negative: TTLCache[Hashable, SchemaRegistryError] = TTLCache(
            config.cache_capacity, max(config.cache_negative_ttl_sec, 1e-6))
        self._good_url = 0
        self._token = TokenCache()
        self.requests_sent = 0

    def _get(self, cache: Mapping[Any, T], key: Hashable) -> T | None:
        with self._lock:
            return cache.get(key)

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
