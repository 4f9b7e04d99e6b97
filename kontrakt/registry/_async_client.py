"""Asynchronous Schema Registry client: a thin shell over :mod:`kontrakt.registry._core`.

:class:`AsyncSchemaRegistryClient` is the coroutine forms of the operations
(:mod:`kontrakt.registry._schema_ops`, :mod:`kontrakt.registry._subject_ops`,
:mod:`kontrakt.registry._config_ops`) on the async transport
(:class:`~kontrakt.registry._shell.AsyncShell`), and its lifecycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Any

from kontrakt.registry._config_ops import AsyncConfigOps
from kontrakt.registry._schema_ops import AsyncSchemaOps
from kontrakt.registry._subject_ops import AsyncSubjectOps

__all__ = ["AsyncSchemaRegistryClient"]


class AsyncSchemaRegistryClient(AsyncSchemaOps, AsyncSubjectOps, AsyncConfigOps):
    """The asyncio form of :class:`~kontrakt.registry.SchemaRegistryClient`: same names and
    arguments, as coroutines. Use it from one event loop.

    It takes the same configuration properties and behaves the same way on the wire
    (retries, fail-over, ``timeout``, ``connect.timeout.ms`` and ``total.timeout.ms``,
    error classes, coalescing of identical
    reads); :class:`~kontrakt.registry.SchemaRegistryClient` documents them, and each
    coroutine carries the docstring of its synchronous twin. A coalesced request is not
    cancelled when one of the callers waiting on it is.

    Args:
        config: the client properties (``url``, ``basic.auth.user.info``, ``timeout``, ...).
        **options: the same properties as snake_case keywords (``basic_auth_user_info=``).

    Raises:
        ConfigError: unknown or invalid property.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **options: Any) -> None:
        super().__init__(config, options)

    # ------------------------------------------------------------------ lifecycle
    async def close(self) -> None:
        """Close the HTTP connections (idempotent)."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncSchemaRegistryClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
