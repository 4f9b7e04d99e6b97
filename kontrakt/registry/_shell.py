"""What the sync and async registry clients are built on besides the core: settings and
caches (:class:`ClientShell`), and the httpx timeouts of one attempt."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import httpx

from kontrakt.registry._config import parse_config
from kontrakt.registry._core import RegistryCore
from kontrakt.registry._exchange import HttpRequest

__all__ = ["ClientShell", "http_timeout", "past_deadline"]


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
