"""The registry's state and rules, independent of HTTP.

One :class:`RegistryState` holds contexts → subjects → versions → schema ids, the global and
per-subject config and mode (the model of :mod:`._store`), and appends every change to a
journal file when given one. Reads and the short commits of writes run under one lock
(:attr:`RegistryState.lock`); the slow parts of a registration (compiling a Protobuf schema
in a child process, checking compatibility) run outside it, writes to one subject being
serialized by that subject's own lock, so that readers never wait for protoc.

The class is put together from rooms, each a module of its own:

- :mod:`._core`: the data, the journal, the locks and the lookups the others share;
- :mod:`._input`: a request's schema checked, its references resolved, compiled and keyed;
- :mod:`._writes`: registration and deletes; :mod:`._reads`: the reads and the lookups
  and compatibility tests that change nothing;
- :mod:`._settings`: config, mode and contexts; :mod:`._checking`: the compatibility
  checker's signature and default engine (re-exported here).
"""

from __future__ import annotations

from kontrakt.registry.server._checking import (
    CompatibilityChecker,
    ReferenceResolver,
    VersionedSchema,
    default_compatibility_checker,
)
from kontrakt.registry.server._reads import SchemaReads
from kontrakt.registry.server._settings import SettingsMixin
from kontrakt.registry.server._writes import SchemaWrites

__all__ = [
    "CompatibilityChecker",
    "ReferenceResolver",
    "RegistryState",
    "VersionedSchema",
    "default_compatibility_checker",
]


class RegistryState(SettingsMixin, SchemaReads, SchemaWrites):
    """All registry data plus the rules that change it.

    Args:
        path: JSON file to load from and save to after every write; ``None`` keeps memory only.
        checker: compatibility checker; the default uses :mod:`kontrakt.registry.compatibility`.
        fsync: each write is made durable before it is answered (see :class:`Journal`).
    """
