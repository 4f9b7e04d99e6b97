"""The registry client operations on the rules a subject lives by: compatibility levels and
tests, configuration, modes, contexts, and the inline tags of a version.

The sync mixin carries the documentation, the async one its coroutines (see
:mod:`kontrakt.registry._shell`).
"""

from __future__ import annotations

from typing import Any

from kontrakt.registry._models import (
    CompatibilityTestResult,
    RegisteredSchema,
    Schema,
    ServerConfig,
)
from kontrakt.registry._shell import AsyncShell, SyncShell, share_docstrings

__all__ = ["AsyncConfigOps", "ConfigOps"]


class ConfigOps(SyncShell):
    """Compatibility, configuration, mode, context and tag operations of
    :class:`~kontrakt.registry.SchemaRegistryClient`."""

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


class AsyncConfigOps(AsyncShell):
    """The coroutine forms of :class:`ConfigOps`: same names, arguments and docstrings."""

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


share_docstrings(AsyncConfigOps, ConfigOps)
