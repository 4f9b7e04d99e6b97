"""Synchronous Schema Registry client: a thin shell over :mod:`kontrakt.registry._core`."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from types import TracebackType
from typing import Any, TypeVar

import httpx

from kontrakt.errors import SchemaRegistryError
from kontrakt.registry._errors import RegistryConnectionError
from kontrakt.registry._exchange import Call, HttpRequest, Op, Sleep, copy_error
from kontrakt.registry._models import (
    CompatibilityTestResult,
    RegisteredSchema,
    Schema,
    SchemaVersion,
    ServerConfig,
)
from kontrakt.registry._shell import ClientShell, http_timeout, past_deadline

__all__ = ["SchemaRegistryClient"]

T = TypeVar("T")


class _Flight:
    """One in-flight request that identical concurrent callers wait on."""

    __slots__ = ("done", "error", "result")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None


class SchemaRegistryClient(ClientShell):
    """A Confluent Schema Registry client (thread-safe), with confluent-kafka-python's names.

    Configuration (confluent-kafka-python's property names; snake_case keywords also work):
    ``url`` (one or several comma-separated, tried in turn), ``basic.auth.user.info``,
    ``basic.auth.credentials.source`` (URL / USER_INFO / SASL_INHERIT; credentials in the URL
    are used by default), ``bearer.auth.credentials.source`` (STATIC_TOKEN with
    ``bearer.auth.token``, or OAUTHBEARER client credentials with ``bearer.auth.client.id``,
    ``bearer.auth.client.secret``, ``bearer.auth.scope``, ``bearer.auth.issuer.endpoint.url``),
    ``bearer.auth.logical.cluster``, ``bearer.auth.identity.pool.id``, ``ssl.ca.location``,
    ``ssl.certificate.location``, ``ssl.key.location``, ``ssl.key.password``, ``proxy``,
    ``timeout`` (seconds per read or write, default 30), ``connect.timeout.ms`` (10000),
    ``total.timeout.ms`` (30000), ``max.retries`` (3),
    ``retries.wait.ms`` (1000), ``retries.max.wait.ms`` (20000), ``cache.capacity`` (1000),
    ``cache.latest.ttl.sec`` (unset: latest versions cached until cleared) and Kontrakt's
    ``cache.negative.ttl.sec`` (1: how long "not found" answers are remembered).

    Every operation below behaves the same way on the wire:

    * **Retries and fail-over**: an attempt that never reached a server (connection refused,
      DNS, connect timeout) is retried for every call; one that may have reached it (no
      answer in time, a dropped connection, HTTP 408, 429, 5xx) for every call but DELETEs,
      whose repeat could hide an applied first try (registering is retried, as
      confluent-kafka does: the registry answers a repeated registration with the same id).
      Each URL gets ``max.retries`` retries with jittered exponential backoff (from
      ``retries.wait.ms``, doubling up to ``retries.max.wait.ms``), then the next ``url``
      is tried. Other error answers are raised at once.
    * **Timeouts**: ``connect.timeout.ms`` (10000) bounds opening each connection,
      ``timeout`` (seconds, 30) each read and write of an attempt, and ``total.timeout.ms``
      (30000) one REST call in all: attempts, backoff sleeps and fail-over stop when it is
      spent. So one slow answer gets its 30 s, while a URL that never answers (a wrong port
      on a silent listener) fails after 30 s instead of 4 x 30 s. An operation that needs
      several calls (a schema with references) makes them one after the other.
    * **Errors**: every operation raises :class:`~kontrakt.errors.SchemaRegistryError` (with
      ``http_status_code``, ``error_code`` and ``error_message``), as the most specific
      subclass for the registry's error code; the ``Raises`` section of each operation lists
      the ones it is expected to meet. :class:`RegistryConnectionError` (a subclass) means
      no URL answered.
    * **Coalescing**: identical reads and lookups in flight at the same time share one HTTP
      request (and its answer or error).

    Args:
        config: the properties above.
        **options: the same properties as snake_case keywords (``basic_auth_user_info=``).

    Raises:
        ConfigError: unknown or invalid property.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **options: Any) -> None:
        super().__init__(config, options)
        self._http = httpx.Client(**self._http_options())
        self._flights: dict[Any, _Flight] = {}
        self._flights_lock = threading.Lock()

    # ------------------------------------------------------------------ shell
    def _send_http(self, request: HttpRequest) -> tuple[int, bytes]:
        """Send one request (the mock client overrides this to skip HTTP).

        Raises:
            httpx.TransportError: no answer; ``httpx.ReadTimeout`` also when the body is still
                arriving at the call's deadline (a trickling server cannot stretch a call).
        """
        with self._http.stream(
            request.method,
            request.url,
            params=request.params,
            headers=dict(request.headers),
            content=request.content,
            timeout=http_timeout(request),
        ) as response:
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                past_deadline(request)
            return response.status_code, bytes(body)

    def _execute(self, call: Call) -> Any:
        exchange = self._core.exchange(call)
        reply: Any = None
        try:
            while True:
                action = exchange.send(reply)
                if isinstance(action, Sleep):
                    time.sleep(action.seconds)
                    reply = None
                else:
                    try:
                        reply = self._send_http(action)
                    except httpx.TransportError as exc:
                        reply = exc
        except StopIteration as stop:
            return stop.value

    def _perform(self, call: Call) -> Any:
        if call.key is None:
            return self._execute(call)
        # Coalescing: the first caller for a key does the request; identical callers that
        # arrive while it is in flight wait on its Event and share its answer.
        with self._flights_lock:
            flight = self._flights.get(call.key)
            leader = flight is None
            if flight is None:
                flight = self._flights[call.key] = _Flight()
        if not leader:
            # The leader's call ends within total.timeout.ms (plus an OAuth token fetch).
            bound = 2 * self._core.config.total_timeout
            if not flight.done.wait(bound + 5.0):
                raise RegistryConnectionError(-1, -1, "timed out waiting for a shared request")
            if isinstance(flight.error, SchemaRegistryError):
                raise copy_error(flight.error)
            if flight.error is not None:
                raise flight.error
            return flight.result
        try:
            flight.result = self._execute(call)
            return flight.result
        except BaseException as exc:
            flight.error = exc
            raise
        finally:
            with self._flights_lock:
                self._flights.pop(call.key, None)
            flight.done.set()

    def _run(self, op: Op[T]) -> T:
        try:
            call = next(op)
            while True:
                call = op.send(self._perform(call))
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Close the HTTP connections (idempotent)."""
        self._http.close()

    def __enter__(self) -> SchemaRegistryClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ------------------------------------------------------------------ API
    def register_schema(
        self, subject_name: str, schema: Schema, normalize_schemas: bool = False
    ) -> int:
        """Register ``schema`` under ``subject_name`` (returns the existing id if already there).

        Args:
            subject_name: subject to register under.
            schema: the schema.
            normalize_schemas: ask the registry to normalize the schema first.

        Returns:
            The schema id.

        Raises:
            IncompatibleSchemaError: the subject's compatibility level refuses it (409).
            InvalidSchemaError: the registry cannot parse it (42201).
            OperationNotPermittedError: the subject or registry is read-only (42205).
        """
        return self._run(self._core.register_schema(subject_name, schema, normalize_schemas))

    def register_schema_full_response(
        self, subject_name: str, schema: Schema, normalize_schemas: bool = False
    ) -> RegisteredSchema:
        """Like :meth:`register_schema` but return id, version and guid.

        Args:
            subject_name: subject to register under.
            schema: the schema.
            normalize_schemas: ask the registry to normalize the schema first.

        Returns:
            The registration (``version`` may be None when answered from cache).

        Raises:
            Same as :meth:`register_schema`.
        """
        return self._run(
            self._core.register_schema_full_response(subject_name, schema, normalize_schemas)
        )

    def get_schema(
        self, schema_id: int, subject_name: str | None = None, fmt: str | None = None
    ) -> Schema:
        """Fetch a schema by id; cached forever (ids are immutable), concurrent calls share one
            request.

        Args:
            schema_id: the id.
            subject_name: selects the context of a qualified subject.
            fmt: output format, by schema type: ``"serialized"`` (Protobuf as a base64
                ``FileDescriptorProto``), ``"resolved"`` (Avro with the named types of its
                references written in); None for the stored text.

        Returns:
            The schema.

        Raises:
            SchemaNotFoundError: no schema has this id (40403).
        """
        return self._run(self._core.get_schema(schema_id, subject_name, fmt))

    def get_schema_by_guid(self, guid: str, fmt: str | None = None) -> Schema:
        """Fetch a schema by its guid.

        Args:
            guid: the guid.
            fmt: output format.

        Returns:
            The schema.

        Raises:
            SchemaNotFoundError: no schema has this guid (40403).
        """
        return self._run(self._core.get_schema_by_guid(guid, fmt))

    def get_schema_types(self) -> list[str]:
        """List the schema types the registry supports.

        Returns:
            E.g. ``['JSON', 'PROTOBUF', 'AVRO']``.
        """
        return self._run(self._core.get_schema_types())

    def get_subjects_by_schema_id(
        self,
        schema_id: int,
        subject_name: str | None = None,
        deleted: bool = False,
        offset: int = 0,
        limit: int = -1,
    ) -> list[str]:
        """List subjects that hold a schema id.

        Args:
            schema_id: the id.
            subject_name: filter (and context).
            deleted: include soft-deleted versions.
            offset, limit: paging (limit < 0: all).

        Returns:
            Subject names.

        Raises:
            SchemaNotFoundError: no schema has this id (40403).
        """
        return self._run(
            self._core.get_subjects_by_schema_id(schema_id, subject_name, deleted, offset, limit)
        )

    def get_schema_versions(
        self,
        schema_id: int,
        subject_name: str | None = None,
        deleted: bool = False,
        offset: int = 0,
        limit: int = -1,
    ) -> list[SchemaVersion]:
        """List ``(subject, version)`` pairs that hold a schema id.

        Args:
            schema_id: the id.
            subject_name: filter (and context).
            deleted: include soft-deleted versions.
            offset, limit: paging.

        Returns:
            The pairs.

        Raises:
            SchemaNotFoundError: no schema has this id (40403).
        """
        return self._run(
            self._core.get_schema_versions(schema_id, subject_name, deleted, offset, limit)
        )

    def lookup_schema(
        self,
        subject_name: str,
        schema: Schema,
        normalize_schemas: bool = False,
        fmt: str | None = None,
        deleted: bool = False,
    ) -> RegisteredSchema:
        """Find the registration of ``schema`` under ``subject_name`` (cached).

        Args:
            subject_name: the subject.
            schema: the schema to find.
            normalize_schemas: normalize before comparing.
            fmt: output format.
            deleted: also search soft-deleted versions.

        Returns:
            The registration, carrying the given ``schema``.

        Raises:
            SubjectNotFoundError: no such subject (40401).
            SchemaNotFoundError: the subject does not hold this schema (40403).
        """
        return self._run(
            self._core.lookup_schema(subject_name, schema, normalize_schemas, fmt, deleted)
        )

    def get_subjects(
        self,
        subject_prefix: str | None = None,
        deleted: bool = False,
        deleted_only: bool = False,
        offset: int = 0,
        limit: int = -1,
    ) -> list[str]:
        """List subjects.

        Args:
            subject_prefix: only names starting with it.
            deleted: include soft-deleted subjects.
            deleted_only: only soft-deleted subjects.
            offset, limit: paging.

        Returns:
            Subject names.
        """
        return self._run(
            self._core.get_subjects(subject_prefix, deleted, deleted_only, offset, limit)
        )

    def delete_subject(self, subject_name: str, permanent: bool = False) -> list[int]:
        """Soft-delete a subject, or permanently delete an already soft-deleted one.

        Args:
            subject_name: the subject.
            permanent: hard delete (needs a soft delete first).

        Returns:
            The versions deleted.

        Raises:
            SubjectNotFoundError: no such subject (40401).
            SubjectSoftDeletedError: already soft-deleted (40404).
            SubjectNotSoftDeletedError: ``permanent`` without a soft delete first (40405).
            ReferenceExistsError: another schema references it (42206).
        """
        return self._run(self._core.delete_subject(subject_name, permanent))

    def get_latest_version(self, subject_name: str, fmt: str | None = None) -> RegisteredSchema:
        """Latest version of a subject; cached for ``cache.latest.ttl.sec`` (forever if unset).

        Args:
            subject_name: the subject.
            fmt: output format.

        Returns:
            The registration.

        Raises:
            SubjectNotFoundError: no such subject (40401).
        """
        return self._run(self._core.get_latest_version(subject_name, fmt))

    def get_latest_with_metadata(
        self,
        subject_name: str,
        metadata: Mapping[str, str],
        deleted: bool = False,
        fmt: str | None = None,
    ) -> RegisteredSchema:
        """Latest version whose metadata properties contain all of ``metadata`` (cached like
            latest).

        Args:
            subject_name: the subject.
            metadata: required property values.
            deleted: include soft-deleted versions.
            fmt: output format.

        Returns:
            The registration.

        Raises:
            SubjectNotFoundError: no such subject (40401).
            SchemaNotFoundError: no version carries that metadata (40403).
        """
        return self._run(self._core.get_latest_with_metadata(subject_name, metadata, deleted, fmt))

    def get_version(
        self,
        subject_name: str,
        version: int | str = "latest",
        deleted: bool = False,
        fmt: str | None = None,
    ) -> RegisteredSchema:
        """One version of a subject (numbered versions are cached).

        Args:
            subject_name: the subject.
            version: a number, ``"latest"`` or -1.
            deleted: include soft-deleted versions.
            fmt: output format.

        Returns:
            The registration.

        Raises:
            SubjectNotFoundError: no such subject (40401).
            VersionNotFoundError: no such version (40402).
            InvalidVersionError: ``version`` is not a version (42202).
        """
        return self._run(self._core.get_version(subject_name, version, deleted, fmt))

    def get_referenced_by(
        self, subject_name: str, version: int | str = "latest", offset: int = 0, limit: int = -1
    ) -> list[int]:
        """Ids of schemas that reference a subject version.

        Args:
            subject_name: the subject.
            version: the version.
            offset, limit: paging.

        Returns:
            Schema ids.

        Raises:
            SubjectNotFoundError: no such subject (40401).
            VersionNotFoundError: no such version (40402).
        """
        return self._run(self._core.get_referenced_by(subject_name, version, offset, limit))

    def get_versions(
        self,
        subject_name: str,
        deleted: bool = False,
        deleted_only: bool = False,
        offset: int = 0,
        limit: int = -1,
    ) -> list[int]:
        """Versions of a subject.

        Args:
            subject_name: the subject.
            deleted: include soft-deleted versions.
            deleted_only: only soft-deleted versions.
            offset, limit: paging.

        Returns:
            Version numbers.

        Raises:
            SubjectNotFoundError: no such subject (40401).
        """
        return self._run(
            self._core.get_versions(subject_name, deleted, deleted_only, offset, limit)
        )

    def delete_version(self, subject_name: str, version: int | str, permanent: bool = False) -> int:
        """Soft-delete a version, or permanently delete an already soft-deleted one.

        Args:
            subject_name: the subject.
            version: the version (or ``"latest"``).
            permanent: hard delete.

        Returns:
            The version deleted.

        Raises:
            VersionNotFoundError: no such version (40402).
            VersionSoftDeletedError: already soft-deleted (40406).
            VersionNotSoftDeletedError: ``permanent`` without a soft delete first (40407).
            ReferenceExistsError: another schema references it (42206).
        """
        return self._run(self._core.delete_version(subject_name, version, permanent))

    def set_compatibility(self, subject_name: str | None = None, level: str | None = None) -> str:
        """Set the global (no subject) or a subject's compatibility level.

        Args:
            subject_name: the subject, or None for global.
            level: e.g. ``"BACKWARD"``.

        Returns:
            The level now set.

        Raises:
            ValueError: ``level`` missing.
            InvalidCompatibilityLevelError: unknown level (42203).
        """
        return self._run(self._core.set_compatibility(subject_name, level))

    def get_compatibility(self, subject_name: str | None = None) -> str:
        """The subject's level, falling back to the global one (or the global level).

        Args:
            subject_name: the subject, or None.

        Returns:
            The level.
        """
        return self._run(self._core.get_compatibility(subject_name))

    def test_compatibility(
        self,
        subject_name: str,
        schema: Schema,
        version: int | str = "latest",
        normalize: bool = False,
        verbose: bool = False,
    ) -> bool:
        """Is ``schema`` compatible with one version of the subject under its level?

        Args:
            subject_name: the subject.
            schema: the candidate.
            version: the version to test against.
            normalize: normalize first.
            verbose: ask for messages (see :meth:`test_compatibility_verbose`).

        Returns:
            The verdict.

        Raises:
            VersionNotFoundError: no such version (40402).
            InvalidSchemaError: the registry cannot parse ``schema`` (42201).
            CompatibilityCheckUnavailableError: the registry cannot check this level.
        """
        return self._run(
            self._core.test_compatibility(subject_name, schema, version, normalize, verbose)
        )

    def test_compatibility_all_versions(
        self, subject_name: str, schema: Schema, normalize: bool = False, verbose: bool = False
    ) -> bool:
        """Is ``schema`` compatible with the versions its level covers (all, for transitive levels)?

        Args:
            subject_name: the subject.
            schema: the candidate.
            normalize: normalize first.
            verbose: ask for messages.

        Returns:
            The verdict.

        Raises:
            InvalidSchemaError: the registry cannot parse ``schema`` (42201).
            CompatibilityCheckUnavailableError: the registry cannot check this level.
        """
        return self._run(
            self._core.test_compatibility_all_versions(subject_name, schema, normalize, verbose)
        )

    def test_compatibility_verbose(
        self,
        subject_name: str,
        schema: Schema,
        version: int | str | None = "latest",
        normalize: bool = False,
    ) -> CompatibilityTestResult:
        """Compatibility test with the registry's explanations (``version=None``: all versions).

        Args:
            subject_name: the subject.
            schema: the candidate.
            version: version to test against, or None.
            normalize: normalize first.

        Returns:
            Verdict and messages.

        Raises:
            Same as :meth:`test_compatibility`.
        """
        return self._run(
            self._core.test_compatibility_verbose(subject_name, schema, version, normalize)
        )

    def set_config(
        self, subject_name: str | None = None, config: ServerConfig | None = None
    ) -> ServerConfig:
        """Update the global or a subject's configuration.

        Args:
            subject_name: the subject, or None.
            config: the settings (``compatibility``, metadata, rule sets).

        Returns:
            The settings stored.

        Raises:
            ValueError: ``config`` missing.
            InvalidCompatibilityLevelError: unknown level (42203).
        """
        return self._run(self._core.set_config(subject_name, config))

    def get_config(self, subject_name: str | None = None) -> ServerConfig:
        """The subject's configuration (falling back to global), or the global one.

        Args:
            subject_name: the subject, or None.

        Returns:
            The configuration.
        """
        return self._run(self._core.get_config(subject_name))

    def delete_config(self, subject_name: str | None = None) -> ServerConfig:
        """Remove a subject's configuration (or reset the global one).

        Args:
            subject_name: the subject, or None.

        Returns:
            The configuration removed.

        Raises:
            SubjectNotFoundError: no such subject (40401).
        """
        return self._run(self._core.delete_config(subject_name))

    def get_mode(self, subject_name: str) -> str:
        """A subject's mode (falling back to the global one).

        Args:
            subject_name: the subject.

        Returns:
            READWRITE, READONLY, READONLY_OVERRIDE or IMPORT.
        """
        return self._run(self._core.get_mode(subject_name))

    def update_mode(self, subject_name: str, mode: str, force: bool = False) -> str:
        """Set a subject's mode.

        Args:
            subject_name: the subject.
            mode: the mode.
            force: allow IMPORT on a non-empty subject.

        Returns:
            The mode set.

        Raises:
            InvalidModeError: unknown mode (42204).
            OperationNotPermittedError: IMPORT on a non-empty subject without ``force`` (42205).
        """
        return self._run(self._core.update_mode(subject_name, mode, force))

    def delete_mode(self, subject_name: str) -> str:
        """Remove a subject's mode.

        Args:
            subject_name: the subject.

        Returns:
            The mode removed.

        Raises:
            SubjectNotFoundError: no such subject, or it has no mode of its own (40401).
        """
        return self._run(self._core.delete_mode(subject_name))

    def get_global_mode(self) -> str:
        """The registry's global mode.

        Returns:
            The mode.
        """
        return self._run(self._core.get_global_mode())

    def update_global_mode(self, mode: str, force: bool = False) -> str:
        """Set the global mode.

        Args:
            mode: the mode.
            force: allow IMPORT on a non-empty registry.

        Returns:
            The mode set.

        Raises:
            Same as :meth:`update_mode`.
        """
        return self._run(self._core.update_global_mode(mode, force))

    def get_contexts(self, offset: int = 0, limit: int = -1,
                     context_prefix: str | None = None) -> list[str]:
        """List schema contexts.

        Args:
            offset, limit: paging.
            context_prefix: only contexts whose names start with it (``contextPrefix``).

        Returns:
            Context names (``.`` is the default).
        """
        return self._run(self._core.get_contexts(offset, limit, context_prefix))

    def modify_schema_tags(
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
        """Add or remove inline tags of a version's fields and records, registering the
        result as a new version (``POST /subjects/{subject}/versions/{version}/tags``).

        Args:
            subject_name: the subject.
            version: the version to start from (or ``"latest"``).
            tags_to_add, tags_to_remove: ``{field path: [tags]}`` (Avro
                ``Record.full.name.field``, JSON Schema ``object.address.object.street``,
                Protobuf ``Message.Nested.field`` without the package) or the registry's
                ``[{"entity": {"entityPath", "entityType"}, "tags"}]`` (``entityType``
                ``SR_FIELD`` or ``SR_RECORD``).
            new_version: the version the result must get (the subject's next one).
            metadata: the new version's metadata (default: the version's).
            rule_set: the new version's rule set.
            rules_to_merge, rules_to_remove: merge rules into, or remove rules by name from,
                the previous version's rule set instead.

        Returns:
            The new version (or the existing one when nothing changed).

        Raises:
            SubjectNotFoundError / VersionNotFoundError: 40401 / 40402.
            InvalidSchemaError: an entity the schema lacks, a schema type whose tags the
                registry does not rewrite, or a ``new_version`` that is not next (42201).
            IncompatibleSchemaError: the result is incompatible (40901).
        """
        return self._run(self._core.modify_schema_tags(
            subject_name, version, tags_to_add, tags_to_remove, new_version, metadata,
            rule_set, rules_to_merge, rules_to_remove))
