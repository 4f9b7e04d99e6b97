"""Schema parsing at registration: Avro (fastavro), JSON Schema (meta-schema), Protobuf (protoc).

Every failure is an :class:`InvalidSchemaError` (HTTP 422, code 42201) like Confluent's server.
Protobuf schemas come as .proto text or, from Confluent's serializers, as a base64 serialized
``FileDescriptorProto``; the registry keeps text (:func:`protobuf_text`), compares it by its
compiled form (:func:`canonical_protobuf`) and compiles it back for ``format=serialized``
(:func:`serialized_protobuf`). Avro schemas with references are inlined for
``format=resolved`` (:func:`resolved_avro`).
"""

from __future__ import annotations

import base64
import functools
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from typing import Any

from kontrakt.registry._errors import InvalidSchemaError, SchemaRegistryError

__all__ = [
    "SCHEMA_TYPES",
    "canonical_protobuf",
    "identity_key",
    "protobuf_text",
    "resolved_avro",
    "serialized_protobuf",
    "validate_schema",
]

SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")


def _invalid(message: str) -> InvalidSchemaError:
    return InvalidSchemaError(422, 42201, message)


def identity_key(schema_type: str, schema: str, references: list[dict[str, Any]],
                 extras: Mapping[str, Any]) -> str:
    """Key under which two registrations are "the same schema" (and so share an id).

    Avro and JSON Schema texts are compared as JSON trees (key order and whitespace do not
    matter, as in Confluent, whose parsed forms ignore both); Protobuf text is compared as
    written, minus surrounding whitespace. In ``extras`` (metadata, rule set) an empty or
    null member is the same as a missing one, and ``sensitive`` is a set: Confluent's models
    read all three alike, and its clients send ``"sensitive": []`` and empty rule lists.
    """
    extras = {k: _without_empties(v) for k, v in extras.items()}
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
        _compile_protobuf_cached(schema, tuple(resolved_refs))


@functools.lru_cache(maxsize=512)
def _compile_protobuf_cached(schema: str, refs: tuple[tuple[str, str, str], ...]
                             ) -> bytes | None:
    # protoc runs in a child process (~0.2 s); lookups and re-registrations of the same text
    # are common, so successful checks are remembered (failures raise and are not cached).
    return _validate_protobuf(schema, list(refs))


def protobuf_text(schema: str) -> str:
    """The .proto text of a Protobuf schema given as text or as a serialized descriptor.

    Confluent's server parses the text and, when that fails, base64-decodes a
    ``FileDescriptorProto`` and converts it to text, which it then stores and serves.

    Args:
        schema: the ``schema`` string of the request.

    Returns:
        ``schema`` itself when it is .proto text, else the descriptor printed as text.

    Raises:
        InvalidSchemaError: (42201) base64 that is not a usable descriptor.
    """
    from kontrakt.registry._proto_text import decode_descriptor, descriptor_to_proto_text

    fdp = decode_descriptor(schema)
    return schema if fdp is None else descriptor_to_proto_text(fdp)


def _main_descriptor(schema: str, refs: list[tuple[str, str, str]]) -> Any | None:
    """The compiled ``FileDescriptorProto`` of ``schema``; None without grpcio-tools."""
    raw = _compile_protobuf_cached(schema, tuple(refs))
    if raw is None:
        return None
    from google.protobuf import descriptor_pb2

    fds = descriptor_pb2.FileDescriptorSet.FromString(raw)
    return fds.file[-1]


def canonical_protobuf(schema: str, refs: list[tuple[str, str, str]]) -> str:
    """The form two Protobuf registrations are compared by (and share an id when equal).

    Confluent compares the canonical string of the parsed file, so a descriptor and the
    .proto text it came from are the same schema. Here both are compiled by protoc and the
    descriptor is printed back (:mod:`kontrakt.registry._proto_text`): texts that compile
    to the same descriptor (formatting, comments, relative vs. qualified type names) get
    the same form. Without grpcio-tools, or for text protoc refuses, the trimmed text is used.

    Args:
        schema: validated .proto text.
        refs: ``(name, schema_type, text)`` of the referenced schemas, dependencies first.
    """
    from kontrakt.registry._proto_text import descriptor_to_proto_text

    try:
        fdp = _main_descriptor(schema, refs)
        if fdp is not None:
            return descriptor_to_proto_text(fdp) + _custom_options(fdp)
    except InvalidSchemaError:
        pass
    return schema.strip()


def _custom_options(fdp: Any) -> str:
    """The custom options (extensions, unknown to the pool here) of a file's elements, which
    the printed text drops: two schemas differing only in them, e.g. in the tags of
    ``(confluent.field_meta)``, are different schemas, as in Confluent's canonical string."""
    out: list[str] = []

    def add(name: str, owner: Any) -> None:
        if not owner.HasField("options"):
            return
        # Custom options are unknown fields here, or extensions when a module that declares
        # them (e.g. confluent-kafka's meta_pb2) has been imported into the default pool:
        # both are cleared from the copy, so either way they count.
        plain = type(owner.options)()
        plain.CopyFrom(owner.options)
        plain.DiscardUnknownFields()
        for field, _value in plain.ListFields():
            if field.is_extension:
                plain.ClearExtension(field)
        raw = owner.options.SerializeToString(deterministic=True)
        if raw != plain.SerializeToString(deterministic=True):
            out.append(f"// {name} {raw.hex()}")

    def visit(prefix: str, message: Any) -> None:
        name = f"{prefix}.{message.name}"
        add(name, message)
        for f in message.field:
            add(f"{name}.{f.name}", f)
        for o in message.oneof_decl:
            add(f"{name}.{o.name}", o)
        for e in message.enum_type:
            add(f"{name}.{e.name}", e)
            for v in e.value:
                add(f"{name}.{e.name}.{v.name}", v)
        for nested in message.nested_type:
            visit(name, nested)

    add("", fdp)
    for message in fdp.message_type:
        visit("", message)
    for e in fdp.enum_type:
        add(f".{e.name}", e)
        for v in e.value:
            add(f".{e.name}.{v.name}", v)
    return "".join(f"{line}\n" for line in out)


#: Name given to the file in ``format=serialized`` answers; clients rename it (Confluent's
#: Python client uses the reference name, or "default" for the schema itself).
SERIALIZED_FILE_NAME = "default"


def serialized_protobuf(schema: str, refs: list[tuple[str, str, str]]) -> str:
    """``format=serialized``: the schema compiled to a base64 ``FileDescriptorProto``.

    Args:
        schema: stored .proto text.
        refs: ``(name, schema_type, text)`` of the referenced schemas, dependencies first.

    Returns:
        Base64 (standard alphabet) of the serialized descriptor, imports named as the
        references name them.

    Raises:
        SchemaRegistryError: (501) grpcio-tools is not installed; (500, 50001) the stored
            text no longer compiles.
    """
    try:
        fdp = _main_descriptor(schema, refs)
    except InvalidSchemaError as exc:
        raise SchemaRegistryError(
            500, 50001, f"Stored Protobuf schema does not compile: {exc.error_message}"
        ) from None
    if fdp is None:
        raise SchemaRegistryError(
            501, 501, "The serialized format needs grpcio-tools on the registry server "
            "(pip install grpcio-tools); ask without format=serialized for the .proto text")
    fdp.name = SERIALIZED_FILE_NAME
    return base64.standard_b64encode(fdp.SerializeToString()).decode("ascii")


def resolved_avro(schema: str, refs: list[tuple[str, str, str]]) -> str:
    """``format=resolved``: the Avro schema standing alone, as Confluent's server gives it.

    Named types that the schema takes from its references are written out where they are
    first used (and by full name after that), so that any Avro library can parse the result
    without the references. The text is Kontrakt's canonical Avro form: full names, no
    whitespace.

    Args:
        schema: stored Avro text.
        refs: ``(name, schema_type, text)`` of the referenced schemas, dependencies first.

    Raises:
        SchemaRegistryError: (500, 50001) the stored schema or a reference no longer parses.
    """
    from kontrakt.registry.compatibility._avro_model import parse_avro_json
    from kontrakt.registry.compatibility._normalize import canonical_avro
    from kontrakt.registry.compatibility._result import SchemaParseError

    try:
        referenced = [json.loads(text) for _name, ref_type, text in refs if ref_type == "AVRO"]
        root = parse_avro_json(_avro_json(schema), referenced)
    except (ValueError, SchemaParseError) as exc:
        raise SchemaRegistryError(
            500, 50001, f"Stored Avro schema does not parse: {exc}") from None
    return canonical_avro(root)


def _avro_json(schema: str) -> Any:
    # A primitive may be stored bare (``string``) as well as quoted (``"string"``).
    try:
        return json.loads(schema)
    except ValueError:
        return schema.strip()


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


def _validate_protobuf(schema: str, refs: list[tuple[str, str, str]]) -> bytes | None:
    """Compile with protoc; returns the ``FileDescriptorSet`` bytes (None without protoc)."""
    try:
        import grpc_tools
    except ImportError:
        # Without protoc only a weak check is possible; say what we could not do.
        if "message" not in schema and "enum" not in schema and "syntax" not in schema:
            raise _invalid("Invalid Protobuf schema: no syntax, message or enum") from None
        return None
    from kontrakt.serde.rules._proto_fields import META_PROTO

    wkt = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    # confluent/meta.proto (field tags, rule options) is known to every Confluent registry
    # without a reference, as the well-known types are; a reference of that name wins.
    known = [("confluent/meta.proto", "", META_PROTO)]
    with tempfile.TemporaryDirectory(prefix="kontrakt-proto-") as tmp:
        for name, _ref_type, text in [*known, *refs]:
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
        with open(os.path.join(tmp, "out.pb"), "rb") as fh:
            return fh.read()


def _without_empties(value: Any) -> Any:
    """``value`` with empty or null members of objects dropped (recursively), ``sensitive``
    lists sorted, and None for what is left empty."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            v = _without_empties(v)
            if k == "sensitive" and isinstance(v, list) and all(isinstance(x, str) for x in v):
                v = sorted(set(v)) or None
            if v is not None:
                out[k] = v
        return out or None
    if isinstance(value, list):
        return [_without_empties(v) for v in value] or None
    return value
