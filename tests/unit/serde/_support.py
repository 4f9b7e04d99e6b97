"""Shared helpers for the serde tests: test .proto files compiled to Python at test time."""

from __future__ import annotations

import importlib
import os
import sys
import tempfile
from types import ModuleType

PROTO_DIR = os.path.join(os.path.dirname(__file__), "protos")
_modules: dict[str, ModuleType] = {}


def proto_modules() -> dict[str, ModuleType]:
    """Compile the test protos with grpc_tools.protoc once per process and import them.

    Generated code is never committed: it goes to a temporary directory put on ``sys.path``.
    The default descriptor pool is process-wide, so the modules are built only once.
    """
    if _modules:
        return _modules
    from grpc_tools import protoc

    out = tempfile.mkdtemp(prefix="kontrakt-test-protos-")
    files = ["kontrakt_test/common.proto", "kontrakt_test/order.proto"]
    include = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    rc = protoc.main(["protoc", f"-I{PROTO_DIR}", f"-I{include}", f"--python_out={out}", *files])
    assert rc == 0, "protoc failed on the test protos"
    sys.path.insert(0, out)
    for name in ("common", "order"):
        _modules[name] = importlib.import_module(f"kontrakt_test.{name}_pb2")
    return _modules


def proto_source(name: str) -> str:
    """The text of a test .proto file (``kontrakt_test/order.proto``)."""
    with open(os.path.join(PROTO_DIR, name), encoding="utf-8") as f:
        return f.read()


class FakeRegistry:
    """A dict-backed registry client for Protobuf tests.

    A duck-typed client the unit-level Protobuf tests share between kontrakt's and
    confluent-kafka's serializers, without HTTP. It assigns ids by content exactly like a
    registry (same schema text, type and references → same id). The embedded server is
    exercised with both serializers in tests/interop/test_serde_confluent.py.
    """

    def __init__(self) -> None:
        self.ids: dict[tuple, int] = {}
        self.by_id: dict[int, object] = {}
        self.subjects: dict[str, list[int]] = {}
        self.calls = 0

    @staticmethod
    def _key(schema) -> tuple:
        refs = tuple((r.name, r.subject, r.version) for r in (schema.references or ()))
        return (schema.schema_str, schema.schema_type, refs)

    def _registered(self, subject: str, sid: int):
        from types import SimpleNamespace
        version = self.subjects[subject].index(sid) + 1
        return SimpleNamespace(schema_id=sid, guid=None, version=version,
                               schema=self.by_id[sid], subject=subject)

    def register_schema_full_response(self, subject, schema, normalize_schemas=False):
        self.calls += 1
        sid = self.ids.setdefault(self._key(schema), len(self.ids) + 1)
        self.by_id[sid] = schema
        versions = self.subjects.setdefault(subject, [])
        if sid not in versions:
            versions.append(sid)
        return self._registered(subject, sid)

    def register_schema(self, subject, schema, normalize_schemas=False):
        return self.register_schema_full_response(subject, schema).schema_id

    def lookup_schema(self, subject, schema, normalize_schemas=False, deleted=False):
        from kontrakt.errors import SchemaRegistryError
        self.calls += 1
        sid = self.ids.get(self._key(schema))
        if sid is None or sid not in self.subjects.get(subject, []):
            raise SchemaRegistryError(404, 40403, "Schema not found")
        return self._registered(subject, sid)

    def get_schema(self, schema_id, subject_name=None, fmt=None):
        from kontrakt.errors import SchemaRegistryError
        self.calls += 1
        if schema_id not in self.by_id:
            raise SchemaRegistryError(404, 40403, "Schema not found")
        return self.by_id[schema_id]

    def get_version(self, subject_name, version, deleted=False, fmt=None):
        self.calls += 1
        return self._registered(subject_name, self.subjects[subject_name][version - 1])

    def get_latest_version(self, subject_name, fmt=None):
        self.calls += 1
        return self._registered(subject_name, self.subjects[subject_name][-1])
