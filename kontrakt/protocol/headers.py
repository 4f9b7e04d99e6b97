"""Request and response headers, their version rules, and whole-frame encoding.

Request header v1 is ``api_key, api_version, correlation_id, client_id``; v2 adds a tagged
field section and is used by flexible request versions. ``client_id`` is always a legacy
(int16 length) nullable string, even in v2. Response header v0 is ``correlation_id``; v1 adds
tagged fields and is used by flexible response versions, except ApiVersions, whose responses
always use v0 so that a client can read the error of a version the broker does not know.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kontrakt.errors import CorruptMessageError, UnsupportedVersionError
from kontrakt.protocol import primitives as P
from kontrakt.protocol.codec import codec_for
from kontrakt.protocol.spec import Request, Response, registry

__all__ = [
    "API_VERSIONS_KEY",
    "RequestHeader",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "read_response_correlation_id",
    "request_header_version",
    "response_header_version",
]

API_VERSIONS_KEY = 18
_HDR = struct.Struct(">hhi")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """A decoded request header."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    unknown_tags: dict[int, bytes] | None = None


def request_header_version(request_type: type[Request], version: int) -> int:
    """1 for non-flexible request versions, 2 for flexible ones."""
    return 2 if version in request_type.FLEXIBLE_VERSIONS else 1


def response_header_version(response_type: type[Response], version: int) -> int:
    """0 for non-flexible response versions and for ApiVersions, 1 otherwise."""
    if response_type.API_KEY == API_VERSIONS_KEY:
        return 0
    return 1 if version in response_type.FLEXIBLE_VERSIONS else 0


def encode_request(msg: Request, version: int, correlation_id: int,
                   client_id: str | None = "kontrakt", *, size_prefix: bool = True) -> bytes:
    """Encode a whole request frame: [int32 size] header body.

    Raises:
        UnsupportedVersionError: ``version`` is not valid for the message, or a field set on
            the message cannot be carried by it.
    """
    cls = type(msg)
    if version not in cls.VALID_VERSIONS:
        raise UnsupportedVersionError(
            f"{cls.__name__} has no version {version} (valid: {cls.VALID_VERSIONS})"
        )
    codec = codec_for(cls, version)
    buf = P.Frame(b"\0\0\0\0" if size_prefix else b"")
    buf += _HDR.pack(cls.API_KEY, version, correlation_id)
    P.write_nullable_string(buf, client_id)
    if codec.flexible:
        buf.append(0)
    codec.encode(buf, msg)
    if size_prefix:
        P.INT32.pack_into(buf, 0, buf.size() - 4)
    return buf.joined()


def decode_request(data: bytes | bytearray | memoryview) -> tuple[RequestHeader, Request]:
    """Decode a request frame without its size prefix (used by test brokers and tools).

    Raises:
        CorruptMessageError: truncated or invalid bytes, or an unknown API key.
    """
    try:
        api_key, version, corr = _HDR.unpack_from(data, 0)
    except struct.error:
        raise CorruptMessageError("truncated request header") from None
    spec = registry().get(api_key)
    if spec is None:
        raise CorruptMessageError(f"unknown API key {api_key}")
    client_id, pos = P.read_nullable_string(data, 6 + 2)
    cls = spec.request_class
    codec = codec_for(cls, version)
    tags = None
    if codec.flexible:
        tags, pos = P.read_tagged_fields(data, pos)
    try:
        msg, end = codec.decode(data, pos)
    except (struct.error, IndexError) as exc:
        raise CorruptMessageError(f"truncated {cls.__name__} v{version}: {exc}") from None
    if end != len(data):
        raise CorruptMessageError(f"{cls.__name__} v{version}: trailing bytes")
    return RequestHeader(api_key, version, corr, client_id, tags or None), msg


def encode_response(msg: Response, version: int, correlation_id: int,
                    *, size_prefix: bool = True) -> bytes:
    """Encode a whole response frame (used by test brokers and crafted-response tests)."""
    cls = type(msg)
    codec = codec_for(cls, version)
    buf = P.Frame(b"\0\0\0\0" if size_prefix else b"")
    buf += P.INT32.pack(correlation_id)
    if response_header_version(cls, version) == 1:
        buf.append(0)
    codec.encode(buf, msg)
    if size_prefix:
        P.INT32.pack_into(buf, 0, buf.size() - 4)
    return buf.joined()


def read_response_correlation_id(frame: bytes | bytearray | memoryview) -> int:
    """The correlation id at the start of a response frame (without size prefix)."""
    if len(frame) < 4:
        raise CorruptMessageError(f"response frame of {len(frame)} bytes has no header")
    return int(P.INT32.unpack_from(frame, 0)[0])


def decode_response(response_type: type[Response], version: int,
                    frame: bytes | bytearray | memoryview, *,
                    exact: bool = False) -> tuple[int, Response]:
    """Decode a response frame without size prefix into (correlation id, message).

    Args:
        exact: reject bytes after the message. Off by default, as in the Java client:
            some brokers (librdkafka's mock cluster, for Metadata) append a stray byte, and
            the fields before it are complete.

    Raises:
        CorruptMessageError: truncated or invalid bytes.
    """
    corr = read_response_correlation_id(frame)
    pos = 4
    if response_header_version(response_type, version) == 1:
        _tags, pos = P.read_tagged_fields(frame, pos)
    codec = codec_for(response_type, version)
    try:
        msg, end = codec.decode(frame, pos)
    except (struct.error, IndexError) as exc:
        raise CorruptMessageError(
            f"truncated or invalid {response_type.__name__} v{version}: {exc}"
        ) from None
    if exact and end != len(frame):
        raise CorruptMessageError(
            f"{response_type.__name__} v{version}: {len(frame) - end} trailing bytes"
        )
    return corr, msg
