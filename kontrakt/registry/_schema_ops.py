"""The registry client operations on schemas: register, look up, and fetch by id or GUID
(with where an id is used).

The sync mixin carries the documentation, the async one its coroutines (see
:mod:`kontrakt.registry._shell`).
"""

from __future__ import annotations

from kontrakt.registry._models import RegisteredSchema, Schema, SchemaVersion
from kontrakt.registry._shell import AsyncShell, SyncShell, share_docstrings

__all__ = ["AsyncSchemaOps", "SchemaOps"]


class SchemaOps(SyncShell):
    """Schema operations of :class:`~kontrakt.registry.SchemaRegistryClient`: registering,
    looking up, and fetching schemas by id or GUID."""

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


class AsyncSchemaOps(AsyncShell):
    """The coroutine forms of :class:`SchemaOps`: same names, arguments and docstrings."""

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


share_docstrings(AsyncSchemaOps, SchemaOps)
