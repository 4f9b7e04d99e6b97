"""Schema parsing at registration: Avro (fastavro), JSON Schema (meta-schema), Protobuf (protoc).

Every failure is an :class:`InvalidSchemaError` (HTTP 422, code 42201) like Confluent's server.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from typing import Any

from kontrakt.registry._errors import InvalidSchemaError

__all__ = ["SCHEMA_TYPES", "identity_key", "validate_schema"]

SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")


def _invalid(message: str) -> InvalidSchemaError:
    return InvalidSchemaError(422, 42201, message)


def identity_key(schema_type: str, schema: str, references: list[dict[str, Any]],
                 extras: Mapping[str, Any]) -> str:
    """Key under which two registrations are "the same schema" (and so share an id).

    Avro and JSON Schema texts are compared as JSON trees (key order and whitespace do not
    matter, as in Confluent, whose parsed forms ignore both); Protobuf text is compared as
    written, minus surrounding whitespace.
    """
    if schema_type in ("AVRO", "JSON"):
        try:
            text = json.dumps(json.loads(schema), sort_keys=True, separators=(",", ":"))
        except ValueError:
            text = schema.strip()
    else:
        text = schema.strip()
    return json.dumps([schema_type, text, references, extras], sort_keys=True)


def normalized_text(schema_type: str, schema: str) -> str:
    """The text stored for ``normalize=true``: compact JSON with sorted keys for Avro/JSON."""
    if schema_type in ("AVRO", "JSON"):
        return json.dumps(json.loads(schema), sort_keys=True, separators=(",", ":"))
    return schema.strip()


def validate_schema(schema_type: str, schema: str, resolved_refs: list[tuple[str, str, str]]
                    ) -> None:
    """Parse ``schema`` the way the registry must before accepting it.

    Args:
        schema_type: ``AVRO``, ``JSON`` or ``PROTOBUF``.
        schema: the schema text.
        resolved_refs: ``(name, schema_type, schema_text)`` of every referenced schema,
            dependencies first (transitive references included).

    Raises:
        InvalidSchemaError: the type is unknown or the text does not parse.
    """
    if schema_type not in SCHEMA_TYPES:
        raise _invalid(f"Invalid schema type {schema_type}")
    if not schema.strip():
        raise _invalid("Empty schema")
    if schema_type == "AVRO":
        _validate_avro(schema, resolved_refs)
    elif schema_type == "JSON":
        _validate_json(schema)
    else:
        _validate_protobuf_cached(schema, tuple(resolved_refs))


@functools.lru_cache(maxsize=512)
def _validate_protobuf_cached(schema: str, refs: tuple[tuple[str, str, str], ...]) -> None:
    # protoc runs in a child process (~0.2 s); lookups and re-registrations of the same text
    # are common, so successful checks are remembered (failures raise and are not cached).
    _validate_protobuf(schema, list(refs))


def _validate_avro(schema: str, refs: list[tuple[str, str, str]]) -> None:
    try:
        parsed = json.loads(schema)
    except ValueError as exc:
        raise _invalid(f"Invalid schema: not JSON: {exc}") from None
    try:
        import fastavro
    except ImportError:  # pragma: no cover - fastavro is in the avro extra
        return
    named: dict[str, Any] = {}
    try:
        for _name, ref_type, text in refs:
            if ref_type == "AVRO":
                fastavro.parse_schema(json.loads(text), named_schemas=named)
        fastavro.parse_schema(parsed, named_schemas=named)
    except Exception as exc:  # fastavro raises several unrelated types for bad schemas
        raise _invalid(f"Invalid Avro schema: {exc}") from None


def _validate_json(schema: str) -> None:
    try:
        parsed = json.loads(schema)
    except ValueError as exc:
        raise _invalid(f"Invalid JSON schema: not JSON: {exc}") from None
    if not isinstance(parsed, (dict, bool)):
        raise _invalid("Invalid JSON schema: a schema must be an object or a boolean")
    try:
        import jsonschema.validators
    except ImportError:  # pragma: no cover - jsonschema is in the json extra
        return
    try:
        cls = jsonschema.validators.validator_for(parsed, default=jsonschema.Draft7Validator)
        cls.check_schema(parsed)
    except jsonschema.SchemaError as exc:
        raise _invalid(f"Invalid JSON schema: {exc.message}") from None


def _validate_protobuf(schema: str, refs: list[tuple[str, str, str]]) -> None:
    try:
        import grpc_tools
    except ImportError:
        # Without protoc only a weak check is possible; say what we could not do.
        if "message" not in schema and "enum" not in schema and "syntax" not in schema:
            raise _invalid("Invalid Protobuf schema: no syntax, message or enum") from None
        return
    wkt = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    with tempfile.TemporaryDirectory(prefix="kontrakt-proto-") as tmp:
        for name, _ref_type, text in refs:
            path = os.path.join(tmp, name)
            if not os.path.abspath(path).startswith(tmp + os.sep):
                raise _invalid(f"Invalid Protobuf reference name {name!r}")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
        main = os.path.join(tmp, "__kontrakt_schema__.proto")
        with open(main, "w", encoding="utf-8") as fh:
            fh.write(schema)
        # protoc runs in a child process: its diagnostics go to a pipe we can report, and a
        # crash in the C++ parser cannot take the registry down.
        proc = subprocess.run(
            [sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp}", f"-I{wkt}",
             f"--descriptor_set_out={os.path.join(tmp, 'out.pb')}", main],
            capture_output=True, text=True, timeout=60, check=False,
        )
        if proc.returncode != 0:
            detail = (proc.stderr or proc.stdout).replace(tmp + os.sep, "").strip()
            raise _invalid(f"Invalid Protobuf schema: {detail}")
