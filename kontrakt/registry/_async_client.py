"""Asynchronous Schema Registry client: a thin shell over :mod:`kontrakt.registry._core`."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from types import TracebackType
from typing import Any, TypeVar

import httpx

from kontrakt.errors import SchemaRegistryError
from kontrakt.registry._exchange import Call, HttpRequest, Op, Sleep, copy_error
from kontrakt.registry._models import (
    CompatibilityTestResult,
    RegisteredSchema,
    Schema,
    SchemaVersion,
    ServerConfig,
)
from kontrakt.registry._shell import ClientShell, http_timeout, past_deadline

__all__ = ["AsyncSchemaRegistryClient"]

T = TypeVar("T")


class AsyncSchemaRegistryClient(ClientShell):
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
        self._http = httpx.AsyncClient(**self._http_options())
        self._flights: dict[Any, asyncio.Task[Any]] = {}

    # ------------------------------------------------------------------ shell
    async def _send_http(self, request: HttpRequest) -> tuple[int, bytes]:
        """Send one request (the mock client overrides this to skip HTTP); see
        :meth:`SchemaRegistryClient._send_http`."""
        async with self._http.stream(
            request.method,
            request.url,
            params=request.params,
            headers=dict(request.headers),
            content=request.content,
            timeout=http_timeout(request),
        ) as response:
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                past_deadline(request)
            return response.status_code, bytes(body)

    async def _execute(self, call: Call) -> Any:
        exchange = self._core.exchange(call)
        reply: Any = None
        try:
            while True:
                action = exchange.send(reply)
                if isinstance(action, Sleep):
                    await asyncio.sleep(action.seconds)
                    reply = None
                else:
                    try:
                        reply = await self._send_http(action)
                    except httpx.TransportError as exc:
                        reply = exc
        except StopIteration as stop:
            return stop.value

    async def _perform(self, call: Call) -> Any:
        if call.key is None:
            return await self._execute(call)
        # Coalescing: one task per key does the request; every identical caller awaits it
        # through shield(), so a cancelled caller does not cancel the others' request.
        task = self._flights.get(call.key)
        if task is None:
            task = asyncio.ensure_future(self._execute(call))
            self._flights[call.key] = task
            key = call.key

            def _done(t: asyncio.Task[Any]) -> None:
                if self._flights.get(key) is t:
                    del self._flights[key]
                if not t.cancelled():
                    t.exception()  # retrieved here so an unawaited failure is not logged

            task.add_done_callback(_done)
        try:
            return await asyncio.shield(task)
        except SchemaRegistryError as exc:
            # Each waiter gets its own exception object (shared ones would pile up tracebacks).
            raise copy_error(exc) from None

    async def _run(self, op: Op[T]) -> T:
        try:
            call = next(op)
            while True:
                call = op.send(await self._perform(call))
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

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

    # ------------------------------------------------------------------ API
    # Docstrings are copied from SchemaRegistryClient at the end of this module: one text
    # per operation, and a test checks both classes expose the same signatures.

    async def register_schema(
        self, subject_name: str, schema: Schema, normalize_schemas: bool = False
    ) -> int:
        return await self._run(self._core.register_schema(subject_name, schema, normalize_schemas))

    async def register_schema_full_response(
        self, subject_name: str, schema: Schema, normalize_schemas: bool = False
    ) -> RegisteredSchema:
        return await self._run(
            self._core.register_schema_full_response(subject_name, schema, normalize_schemas)
        )

    async def get_schema(
        self, schema_id: int, subject_name: str | None = None, fmt: str | None = None
    ) -> Schema:
        return await self._run(self._core.get_schema(schema_id, subject_name, fmt))

    async def get_schema_by_guid(self, guid: str, fmt: str | None = None) -> Schema:
        return await self._run(self._core.get_schema_by_guid(guid, fmt))

    async def get_schema_types(self) -> list[str]:
        return await self._run(self._core.get_schema_types())

    async def get_subjects_by_schema_id(
        self,
        schema_id: int,
        subject_name: str | None = None,
        deleted: bool = False,
        offset: int = 0,
        limit: int = -1,
    ) -> list[str]:
        return await self._run(
            self._core.get_subjects_by_schema_id(schema_id, subject_name, deleted, offset, limit)
        )

    async def get_schema_versions(
        self,
        schema_id: int,
        subject_name: str | None = None,
        deleted: bool = False,
        offset: int = 0,
        limit: int = -1,
    ) -> list[SchemaVersion]:
        return await self._run(
            self._core.get_schema_versions(schema_id, subject_name, deleted, offset, limit)
        )

    async def lookup_schema(
        self,
        subject_name: str,
        schema: Schema,
        normalize_schemas: bool = False,
        fmt: str | None = None,
        deleted: bool = False,
    ) -> RegisteredSchema:
        return await self._run(
            self._core.lookup_schema(subject_name, schema, normalize_schemas, fmt, deleted)
        )

    async def get_subjects(
        self,
        subject_prefix: str | None = None,
        deleted: bool = False,
        deleted_only: bool = False,
        offset: int = 0,
        limit: int = -1,
    ) -> list[str]:
        return await self._run(
            self._core.get_subjects(subject_prefix, deleted, deleted_only, offset, limit)
        )

    async def delete_subject(self, subject_name: str, permanent: bool = False) -> list[int]:
        return await self._run(self._core.delete_subject(subject_name, permanent))

    async def get_latest_version(
        self, subject_name: str, fmt: str | None = None
    ) -> RegisteredSchema:
        return await self._run(self._core.get_latest_version(subject_name, fmt))

    async def get_latest_with_metadata(
        self,
        subject_name: str,
        metadata: Mapping[str, str],
        deleted: bool = False,
        fmt: str | None = None,
    ) -> RegisteredSchema:
        return await self._run(
            self._core.get_latest_with_metadata(subject_name, metadata, deleted, fmt)
        )

    async def get_version(
        self,
        subject_name: str,
        version: int | str = "latest",
        deleted: bool = False,
        fmt: str | None = None,
    ) -> RegisteredSchema:
        return await self._run(self._core.get_version(subject_name, version, deleted, fmt))

    async def get_referenced_by(
        self, subject_name: str, version: int | str = "latest", offset: int = 0, limit: int = -1
    ) -> list[int]:
        return await self._run(self._core.get_referenced_by(subject_name, version, offset, limit))

    async def get_versions(
        self,
        subject_name: str,
        deleted: bool = False,
        deleted_only: bool = False,
        offset: int = 0,
        limit: int = -1,
    ) -> list[int]:
        return await self._run(
            self._core.get_versions(subject_name, deleted, deleted_only, offset, limit)
        )

    async def delete_version(
        self, subject_name: str, version: int | str, permanent: bool = False
    ) -> int:
        return await self._run(self._core.delete_version(subject_name, version, permanent))

    async def set_compatibility(
        self, subject_name: str | None = None, level: str | None = None
    ) -> str:
        return await self._run(self._core.set_compatibility(subject_name, level))

    async def get_compatibility(self, subject_name: str | None = None) -> str:
        return await self._run(self._core.get_compatibility(subject_name))

    async def test_compatibility(
        self,
        subject_name: str,
        schema: Schema,
        version: int | str = "latest",
        normalize: bool = False,
        verbose: bool = False,
    ) -> bool:
        return await self._run(
            self._core.test_compatibility(subject_name, schema, version, normalize, verbose)
        )

    async def test_compatibility_all_versions(
        self, subject_name: str, schema: Schema, normalize: bool = False, verbose: bool = False
    ) -> bool:
        return await self._run(
            self._core.test_compatibility_all_versions(subject_name, schema, normalize, verbose)
        )

    async def test_compatibility_verbose(
        self,
        subject_name: str,
        schema: Schema,
        version: int | str | None = "latest",
        normalize: bool = False,
    ) -> CompatibilityTestResult:
        return await self._run(
            self._core.test_compatibility_verbose(subject_name, schema, version, normalize)
        )

    async def set_config(
        self, subject_name: str | None = None, config: ServerConfig | None = None
    ) -> ServerConfig:
        return await self._run(self._core.set_config(subject_name, config))

    async def get_config(self, subject_name: str | None = None) -> ServerConfig:
        return await self._run(self._core.get_config(subject_name))

    async def delete_config(self, subject_name: str | None = None) -> ServerConfig:
        return await self._run(self._core.delete_config(subject_name))

    async def get_mode(self, subject_name: str) -> str:
        return await self._run(self._core.get_mode(subject_name))

    async def update_mode(self, subject_name: str, mode: str, force: bool = False) -> str:
        return await self._run(self._core.update_mode(subject_name, mode, force))

    async def delete_mode(self, subject_name: str) -> str:
        return await self._run(self._core.delete_mode(subject_name))

    async def get_global_mode(self) -> str:
        return await self._run(self._core.get_global_mode())

    async def update_global_mode(self, mode: str, force: bool = False) -> str:
        return await self._run(self._core.update_global_mode(mode, force))

    async def get_contexts(self, offset: int = 0, limit: int = -1,
                           context_prefix: str | None = None) -> list[str]:
        return await self._run(self._core.get_contexts(offset, limit, context_prefix))

    async def modify_schema_tags(
        self,
        subject_name: str,
        version: int | str,
        tags_to_add: Any = None,
        tags_to_remove: Any = None,
        new_version: int | None = None,
        metadata: Any = None,
        rule_set: Any = None,
        rules_to_merge: Any = None,
        rules_to_remove: Any = None,
    ) -> RegisteredSchema:
        return await self._run(self._core.modify_schema_tags(
            subject_name, version, tags_to_add, tags_to_remove, new_version, metadata,
            rule_set, rules_to_merge, rules_to_remove))


def _share_docstrings() -> None:
    from kontrakt.registry._client import SchemaRegistryClient

    for name, member in vars(AsyncSchemaRegistryClient).items():
        if name.startswith("_") or not callable(member) or member.__doc__:
            continue
        member.__doc__ = getattr(SchemaRegistryClient, name).__doc__


_share_docstrings()
