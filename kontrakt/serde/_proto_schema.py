"""Protobuf schemas without generated code: descriptors built from what the registry returns.

The registry hands a Protobuf schema out either as ``.proto`` text or (``format=serialized``)
as a base64 ``FileDescriptorProto``. The base64 form is loaded directly; text is compiled at
run time with ``grpc_tools.protoc`` (the ``grpcio-tools`` package) into a descriptor set. The
resulting files go into a private ``DescriptorPool`` with the well-known types, and message
classes come from ``message_factory`` — so a consumer can decode any registered Protobuf
schema without the producer's generated modules.
"""

from __future__ import annotations

import base64
import binascii
import os
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

from kontrakt._extras import raise_missing_extra

try:
    from google.protobuf import descriptor_pb2, descriptor_pool
    from google.protobuf.message import DecodeError
except ModuleNotFoundError as exc:
    # Reached without kontrakt.serde.protobuf too: the CLI, the Spark source, dataclass models.
    raise_missing_extra(exc, "decoding Protobuf schemas (kontrakt.serde._proto_schema)")

from kontrakt.errors import SerializationError

__all__ = [
    "decode_serialized",
    "descriptor_to_text_b64",
    "is_builtin",
    "message_by_indexes",
    "message_indexes",
    "new_pool",
    "proto_text_to_files",
]


def is_builtin(name: str) -> bool:
    """Files every pool already knows (not registered as references with skip.known.types)."""
    return name.startswith(("google/protobuf/", "google/type/", "confluent/"))


def new_pool() -> Any:
    """A descriptor pool preloaded with the well-known types."""
    from google.protobuf import (
        any_pb2,
        api_pb2,
        duration_pb2,
        empty_pb2,
        field_mask_pb2,
        source_context_pb2,
        struct_pb2,
        timestamp_pb2,
        type_pb2,
        wrappers_pb2,
    )

    from kontrakt.serde.rules._proto_fields import meta_file

    pool = descriptor_pool.DescriptorPool()
    # Dependencies first: type.proto imports any and source_context; api imports type.
    for mod in (any_pb2, source_context_pb2, type_pb2, api_pb2, descriptor_pb2, duration_pb2,
                empty_pb2, field_mask_pb2, struct_pb2, timestamp_pb2, wrappers_pb2):
        pool.AddSerializedFile(mod.DESCRIPTOR.serialized_pb)
    # confluent/meta.proto (field tags for data-contract rules) is never registered as a
    # reference either: schemas import it as a known file.
    pool.Add(meta_file())
    return pool


def descriptor_to_text_b64(serialized_pb: bytes) -> str:
    """The registry's serialized form of a file: base64 of its ``FileDescriptorProto``."""
    return base64.standard_b64encode(serialized_pb).decode("ascii")


def decode_serialized(name: str, schema_str: str) -> Any | None:
    """Parse a base64 ``FileDescriptorProto``; ``None`` when ``schema_str`` is not one."""
    text = schema_str.strip()
    if not text or any(c.isspace() for c in text):
        return None
    try:
        raw = base64.b64decode(text, validate=True)
        fdp = descriptor_pb2.FileDescriptorProto.FromString(raw)
    except (binascii.Error, ValueError, DecodeError):
        return None
    fdp.name = name
    return fdp


def proto_text_to_files(name: str, sources: Mapping[str, str]) -> list[Any]:
    """Compile ``.proto`` text (and the texts it imports) into ``FileDescriptorProto`` s.

    Args:
        name: the file to compile.
        sources: every file's text by import path, ``name`` included.

    Returns:
        The files, dependencies first (well-known types excluded).

    Raises:
        SerializationError: grpcio-tools is missing or the text does not compile.
    """
    try:
        from grpc_tools import protoc
    except ImportError as e:
        raise SerializationError(
            "decoding a Protobuf schema given as .proto text needs grpcio-tools "
            "(pip install grpcio-tools), or a registry that serves format=serialized") from e
    import importlib.resources

    from kontrakt.serde.rules._proto_fields import META_PROTO

    include = str(importlib.resources.files("grpc_tools") / "_proto")
    sources = {"confluent/meta.proto": META_PROTO, **sources}
    with tempfile.TemporaryDirectory(prefix="kontrakt-proto-") as tmp:
        for path, text in sources.items():
            full = os.path.join(tmp, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w", encoding="utf-8") as f:
                f.write(text)
        out = os.path.join(tmp, "__out.pb")
        rc = protoc.main(["protoc", f"-I{tmp}", f"-I{include}", "--include_imports",
                          f"--descriptor_set_out={out}", name])
        if rc != 0 or not os.path.exists(out):
            raise SerializationError(f"protoc could not compile schema {name!r} (exit {rc})")
        with open(out, "rb") as f:
            fds = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    return [fd for fd in fds.file if not is_builtin(fd.name)]


def message_indexes(desc: Any) -> tuple[int, ...]:
    """The path of a message type in its file: top-level position, then nested positions."""
    path: list[int] = []
    current = desc
    while current.containing_type is not None:
        parent = current.containing_type
        path.append(list(parent.nested_types).index(current))
        current = parent
    top = list(current.file.message_types_by_name).index(current.name)
    path.append(top)
    return tuple(reversed(path))


def message_by_indexes(file_desc: Any, indexes: Sequence[int]) -> Any:
    """The message descriptor at ``indexes`` in ``file_desc``.

    Raises:
        SerializationError: the path does not exist in the file.
    """
    try:
        top = list(file_desc.message_types_by_name.values())
        desc = top[indexes[0]]
        for i in indexes[1:]:
            desc = desc.nested_types[i]
    except (IndexError, TypeError) as e:
        raise SerializationError(
            f"message indexes {list(indexes)} do not exist in {file_desc.name!r}") from e
    return desc
