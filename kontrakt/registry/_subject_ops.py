"""The registry client operations on subjects and their versions: list, read (latest, by
number, by metadata), find what references a version, and delete.

The sync mixin carries the documentation, the async one its coroutines (see
:mod:`kontrakt.registry._shell`).
"""

from __future__ import annotations

from collections.abc import Mapping

from kontrakt.registry._models import RegisteredSchema
from kontrakt.registry._shell import AsyncShell, SyncShell, share_docstrings

__all__ = ["AsyncSubjectOps", "SubjectOps"]


class SubjectOps(SyncShell):
    """Subject and version operations of :class:`~kontrakt.registry.SchemaRegistryClient`:
    listing, reading and deleting subjects and their versions."""

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


class AsyncSubjectOps(AsyncShell):
    """The coroutine forms of :class:`SubjectOps`: same names, arguments and docstrings."""

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


share_docstrings(AsyncSubjectOps, SubjectOps)
