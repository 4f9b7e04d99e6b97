"""Registry calls as data, so the serializer cores stay free of I/O.

A core that needs the registry is a generator: it yields a request (one of the classes below)
and is sent back the answer, or has the client's exception thrown into it. :func:`run_sync`
drives it with a :class:`~kontrakt.registry.SchemaRegistryClient`, :func:`run_async` with an
:class:`~kontrakt.registry.AsyncSchemaRegistryClient` — the same core serves both shells.
Only cache misses reach this path; a warmed serializer never builds a generator.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "GetLatestVersion",
    "GetLatestWithMetadata",
    "GetSchema",
    "GetSchemaByGuid",
    "GetVersion",
    "LookupSchema",
    "RegisterSchema",
    "RegistryCall",
    "run_async",
    "run_sync",
]


def _fmt(fmt: str | None) -> dict[str, Any]:
    # Only pass ``fmt`` when asked: not every client (or mock) takes it.
    return {} if fmt is None else {"fmt": fmt}


class RegistryCall:
    """One registry request; ``call``/``acall`` perform it on a sync/async client.

    Subclasses only say which client method to call with which arguments (:meth:`invoke`);
    the sync and async clients share their method names and signatures.
    """

    __slots__ = ()

    def invoke(self, client: Any) -> Any:
        """Call the client's method: the answer (sync client) or an awaitable (async client)."""
        raise NotImplementedError

    def call(self, client: Any) -> Any:
        """Perform the request with a sync client and return its answer."""
        return self.invoke(client)

    async def acall(self, client: Any) -> Any:
        """Perform the request with an async client and return its answer."""
        return await self.invoke(client)


@dataclass(frozen=True, slots=True)
class RegisterSchema(RegistryCall):
    """Register ``schema`` under ``subject``; answers a ``RegisteredSchema``-like object
    (``schema_id`` and, when the client gives it, ``guid``) or an int id."""

    subject: str
    schema: Any
    normalize: bool

    def invoke(self, client: Any) -> Any:
        full = getattr(client, "register_schema_full_response", None)
        if full is not None:
            return full(self.subject, self.schema, normalize_schemas=self.normalize)
        return client.register_schema(self.subject, self.schema, normalize_schemas=self.normalize)


@dataclass(frozen=True, slots=True)
class LookupSchema(RegistryCall):
    """Find ``schema`` under ``subject`` (``deleted``: soft-deleted versions too); answers a
    ``RegisteredSchema``."""

    subject: str
    schema: Any
    normalize: bool
    deleted: bool = False

    def invoke(self, client: Any) -> Any:
        if self.deleted:
            return client.lookup_schema(self.subject, self.schema,
                                        normalize_schemas=self.normalize, deleted=True)
        return client.lookup_schema(self.subject, self.schema, normalize_schemas=self.normalize)


@dataclass(frozen=True, slots=True)
class GetSchema(RegistryCall):
    """Fetch the schema with a numeric id; answers a ``Schema``."""

    schema_id: int
    subject: str | None = None
    fmt: str | None = None

    def invoke(self, client: Any) -> Any:
        return client.get_schema(self.schema_id, self.subject, **_fmt(self.fmt))


@dataclass(frozen=True, slots=True)
class GetSchemaByGuid(RegistryCall):
    """Fetch the schema with a GUID; answers a ``Schema``."""

    guid: str
    fmt: str | None = None

    def invoke(self, client: Any) -> Any:
        return client.get_schema_by_guid(self.guid, **_fmt(self.fmt))


@dataclass(frozen=True, slots=True)
class GetLatestVersion(RegistryCall):
    """Fetch the latest version of a subject; answers a ``RegisteredSchema``."""

    subject: str
    fmt: str | None = None

    def invoke(self, client: Any) -> Any:
        return client.get_latest_version(self.subject, **_fmt(self.fmt))


@dataclass(frozen=True, slots=True)
class GetLatestWithMetadata(RegistryCall):
    """Fetch the latest version whose metadata matches; answers a ``RegisteredSchema``."""

    subject: str
    metadata: Mapping[str, str]
    fmt: str | None = None

    def invoke(self, client: Any) -> Any:
        return client.get_latest_with_metadata(self.subject, dict(self.metadata),
                                               **_fmt(self.fmt))


@dataclass(frozen=True, slots=True)
class GetVersion(RegistryCall):
    """Fetch one version of a subject (for references); answers a ``RegisteredSchema``."""

    subject: str
    version: int
    fmt: str | None = None

    def invoke(self, client: Any) -> Any:
        return client.get_version(self.subject, self.version, **_fmt(self.fmt))


#: A sans-I/O core step: yields registry calls, is sent their answers, returns ``T``.
Steps = Generator[RegistryCall, Any, Any]


def _no_client(call: RegistryCall) -> Exception:
    from kontrakt.errors import SerializationError

    return SerializationError(f"{type(call).__name__} needs a schema registry client, and none "
                              "was given")


def run_sync(steps: Steps, client: Any) -> Any:
    """Drive ``steps`` to completion with a sync registry client.

    Returns:
        The generator's return value.

    Raises:
        Whatever the core raises; client errors are thrown into the core first so it can
        translate them (e.g. an unknown schema id into a deserialization error).
    """
    answer: Any = None
    error: BaseException | None = None
    while True:
        try:
            call = steps.throw(error) if error is not None else steps.send(answer)
        except StopIteration as done:
            return done.value
        if client is None:
            steps.close()
            raise _no_client(call)
        try:
            answer, error = call.call(client), None
        except Exception as e:  # handed to the core, which decides
            answer, error = None, e


async def run_async(steps: Steps, client: Any) -> Any:
    """Drive ``steps`` to completion with an async registry client (see :func:`run_sync`)."""
    answer: Any = None
    error: BaseException | None = None
    while True:
        try:
            call = steps.throw(error) if error is not None else steps.send(answer)
        except StopIteration as done:
            return done.value
        if client is None:
            steps.close()
            raise _no_client(call)
        try:
            answer, error = await call.acall(client), None
        except Exception as e:  # handed to the core, which decides
            answer, error = None, e
