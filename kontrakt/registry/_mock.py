"""In-process registry clients for users' unit tests: no HTTP, same interface and answers.

They run the embedded server's request handler directly (``RegistryApp.handle``), so their
error codes and rules are exactly the server's, and the caching layer is the real clients'.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit

from kontrakt.registry._async_client import AsyncSchemaRegistryClient
from kontrakt.registry._client import SchemaRegistryClient
from kontrakt.registry._core import HttpRequest
from kontrakt.registry.server._app import RegistryApp
from kontrakt.registry.server._state import CompatibilityChecker, RegistryState

__all__ = ["AsyncMockSchemaRegistryClient", "MockSchemaRegistryClient"]

_MOCK_URL = "http://mock-registry.invalid"


def _mock_config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    conf = dict(config or {})
    url = str(conf.get("url") or "")
    # confluent-kafka's mock accepts "mock://..." urls; any url is fine here, nothing is sent.
    if not url.startswith(("http://", "https://")):
        conf["url"] = _MOCK_URL
    conf.setdefault("max.retries", 0)
    return conf


def _answer(app: RegistryApp, request: HttpRequest) -> tuple[int, bytes]:
    import json

    url = urlsplit(request.url)
    query = urlencode(list(request.params))
    status, payload = app.handle(request.method, url.path, query, request.content)
    return status, json.dumps(payload).encode()


class MockSchemaRegistryClient(SchemaRegistryClient):
    """A :class:`SchemaRegistryClient` backed by an in-memory registry in the same process.

    Args:
        config: client properties (``url`` is optional and ignored).
        state: share one registry between several mock clients; a new one by default.
        compatibility_checker: override compatibility checking (default: the compatibility
            engine; levels it cannot check are refused, never assumed compatible).
        **options: snake_case client properties.

    Raises:
        ConfigError: invalid property.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, *,
                 state: RegistryState | None = None,
                 compatibility_checker: CompatibilityChecker | None = None,
                 **options: Any) -> None:
        super().__init__(_mock_config(config), **options)
        self.app = RegistryApp(state or RegistryState(checker=compatibility_checker))

    def _send_http(self, request: HttpRequest) -> tuple[int, bytes]:
        return _answer(self.app, request)


class AsyncMockSchemaRegistryClient(AsyncSchemaRegistryClient):
    """The asyncio form of :class:`MockSchemaRegistryClient` (same arguments)."""

    def __init__(self, config: Mapping[str, Any] | None = None, *,
                 state: RegistryState | None = None,
                 compatibility_checker: CompatibilityChecker | None = None,
                 **options: Any) -> None:
        super().__init__(_mock_config(config), **options)
        self.app = RegistryApp(state or RegistryState(checker=compatibility_checker))

    async def _send_http(self, request: HttpRequest) -> tuple[int, bytes]:
        return _answer(self.app, request)
