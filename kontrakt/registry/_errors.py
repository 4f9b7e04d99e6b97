"""Schema Registry error classes, one per well-known Confluent error code.

:func:`error_from_response` turns an HTTP status and body into the most specific class, so
callers can ``except SubjectNotFoundError`` instead of comparing codes.
"""

from __future__ import annotations

from typing import Any

from kontrakt.errors import SchemaRegistryError

__all__ = [
    "CompatibilityCheckUnavailableError",
    "DekGenerationError",
    "IncompatibleSchemaError",
    "InvalidCompatibilityLevelError",
    "InvalidKeyError",
    "InvalidModeError",
    "InvalidSchemaError",
    "InvalidVersionError",
    "KeyExistsError",
    "KeyNotFoundError",
    "KeyNotSoftDeletedError",
    "KeyReferenceExistsError",
    "KeySoftDeletedError",
    "OperationNotPermittedError",
    "ReferenceExistsError",
    "RegistryConnectionError",
    "SchemaNotFoundError",
    "SchemaRegistryError",
    "SubjectNotFoundError",
    "SubjectNotSoftDeletedError",
    "SubjectSoftDeletedError",
    "VersionNotFoundError",
    "VersionNotSoftDeletedError",
    "VersionSoftDeletedError",
    "error_from_response",
]


class SubjectNotFoundError(SchemaRegistryError):
    """The subject does not exist (or has only soft-deleted versions): code 40401."""

    def __init__(self, http_status_code: int, error_code: int, error_message: str) -> None:
        super().__init__(http_status_code, error_code, error_message)


class VersionNotFoundError(SchemaRegistryError):
    """The subject has no such version: code 40402."""

    def __init__(self, http_status_code: int, error_code: int, error_message: str) -> None:
        super().__init__(http_status_code, error_code, error_message)


class SchemaNotFoundError(SchemaRegistryError):
    """No schema with that id, or the schema is not registered under the subject: 40403."""

    def __init__(self, http_status_code: int, error_code: int, error_message: str) -> None:
        super().__init__(http_status_code, error_code, error_message)


class SubjectSoftDeletedError(SchemaRegistryError):
    """The subject was already soft-deleted (use ``permanent=True``): code 40404."""

    def __init__(self, http_status_code: int, error_code: int, error_message: str) -> None:
        super().__init__(http_status_code, error_code, error_message)


class SubjectNotSoftDeletedError(SchemaRegistryError):
    """A permanent delete of a subject that was not soft-deleted first: code 40405."""

    def __init__(self, http_status_code: int, error_code: int, error_message: str) -> None:
        super().__init__(http_status_code, error_code, error_message)


class VersionSoftDeletedError(SchemaRegistryError):
    """The version was already soft-deleted (use ``permanent=True``): code 40406."""

    def __init__(self, http_status_code: int, error_code: int, error_message: str) -> None:
        super().__init__(http_status_code, error_code, error_message)


class VersionNotSoftDeletedError(SchemaRegistryError):
    """A permanent delete of a version that was not soft-deleted first: code 40407."""

    def __init__(self, http_status_code: int, error_code: int, error_message: str) -> None:
        super().__init__(http_status_code, error_code, error_message)


class IncompatibleSchemaError(SchemaRegistryError):
    """The schema breaks the subject's compatibility level: HTTP 409 (code 409 or 40901)."""

    def __init__(self, http_status_code: int, error_code: int, error_message: str) -> None:
        super().__init__(http_status_code, error_code, error_message)


class InvalidSchemaError(SchemaRegistryError):
    """The schema text does not parse, its type is unknown or a reference is missing: 42201."""

    def __init__(self, http_status_code: int, error_code: int, error_message: str) -> None:
        super().__init__(http_status_code, error_code, error_message)


class InvalidVersionError(SchemaRegistryError):
    """A version is not a positive integer, ``latest`` or -1: code 42202."""

    def __init__(self, http_status_code: int, error_code: int, error_message: str) -> None:
        super().__init__(http_status_code, error_code, error_message)


class InvalidCompatibilityLevelError(SchemaRegistryError):
    """The compatibility level is not one the registry knows: code 42203."""

    def __init__(self, http_status_code: int, error_code: int, error_message: str) -> None:
        super().__init__(http_status_code, error_code, error_message)


class InvalidModeError(SchemaRegistryError):
    """The mode is not one the registry knows: code 42204."""

    def __init__(self, http_status_code: int, error_code: int, error_message: str) -> None:
        super().__init__(http_status_code, error_code, error_message)


class OperationNotPermittedError(SchemaRegistryError):
    """The registry's mode forbids the operation (e.g. a write in READONLY): code 42205."""

    def __init__(self, http_status_code: int, error_code: int, error_message: str) -> None:
        super().__init__(http_status_code, error_code, error_message)


class ReferenceExistsError(SchemaRegistryError):
    """The schema is referenced by another schema and cannot be deleted: code 42206."""

    def __init__(self, http_status_code: int, error_code: int, error_message: str) -> None:
        super().__init__(http_status_code, error_code, error_message)


class CompatibilityCheckUnavailableError(SchemaRegistryError):
    """Kontrakt's embedded registry cannot check the subject's compatibility level for this
    schema (engine missing or construct unsupported), so it refuses instead of pretending:
    HTTP 422, Kontrakt-specific code 42290."""

    def __init__(self, http_status_code: int, error_code: int, error_message: str) -> None:
        super().__init__(http_status_code, error_code, error_message)


class KeyNotFoundError(SchemaRegistryError):
    """The DEK registry has no such KEK or DEK (or only a soft-deleted one): code 40470."""

    def __init__(self, http_status_code: int, error_code: int, error_message: str) -> None:
        super().__init__(http_status_code, error_code, error_message)


class KeyNotSoftDeletedError(SchemaRegistryError):
    """A permanent delete of a KEK or DEK that was not soft-deleted first: code 40471."""

    def __init__(self, http_status_code: int, error_code: int, error_message: str) -> None:
        super().__init__(http_status_code, error_code, error_message)


class KeySoftDeletedError(SchemaRegistryError):
    """The KEK is soft-deleted and must be undeleted first: code 40472."""

    def __init__(self, http_status_code: int, error_code: int, error_message: str) -> None:
        super().__init__(http_status_code, error_code, error_message)


class KeyExistsError(SchemaRegistryError):
    """The KEK or DEK already exists (HTTP 409, code 40971); with equal settings the
    stored key can be read instead."""

    def __init__(self, http_status_code: int, error_code: int, error_message: str) -> None:
        super().__init__(http_status_code, error_code, error_message)


class InvalidKeyError(SchemaRegistryError):
    """Invalid or missing KEK / DEK info (a name, a KMS key id, key material): code 42271."""

    def __init__(self, http_status_code: int, error_code: int, error_message: str) -> None:
        super().__init__(http_status_code, error_code, error_message)


class KeyReferenceExistsError(SchemaRegistryError):
    """A KEK still has DEKs and cannot be deleted: code 42272."""

    def __init__(self, http_status_code: int, error_code: int, error_message: str) -> None:
        super().__init__(http_status_code, error_code, error_message)


class DekGenerationError(SchemaRegistryError):
    """The DEK registry could not generate or unwrap a shared KEK's DEK (its KMS is out
    of reach): HTTP 500, code 50070."""

    def __init__(self, http_status_code: int, error_code: int, error_message: str) -> None:
        super().__init__(http_status_code, error_code, error_message)


class RegistryConnectionError(SchemaRegistryError):
    """No registry URL answered (connection refused, reset, DNS, timeout) after all retries and
    fail-overs; ``http_status_code`` and ``error_code`` are -1."""

    def __init__(self, http_status_code: int, error_code: int, error_message: str) -> None:
        super().__init__(http_status_code, error_code, error_message)


_BY_CODE: dict[int, type[SchemaRegistryError]] = {
    40401: SubjectNotFoundError,
    40402: VersionNotFoundError,
    40403: SchemaNotFoundError,
    40404: SubjectSoftDeletedError,
    40405: SubjectNotSoftDeletedError,
    40406: VersionSoftDeletedError,
    40407: VersionNotSoftDeletedError,
    409: IncompatibleSchemaError,
    40901: IncompatibleSchemaError,
    42201: InvalidSchemaError,
    42202: InvalidVersionError,
    42203: InvalidCompatibilityLevelError,
    42204: InvalidModeError,
    42205: OperationNotPermittedError,
    42206: ReferenceExistsError,
    42290: CompatibilityCheckUnavailableError,
    40470: KeyNotFoundError,
    40471: KeyNotSoftDeletedError,
    40472: KeySoftDeletedError,
    40971: KeyExistsError,
    42271: InvalidKeyError,
    42272: KeyReferenceExistsError,
    50070: DekGenerationError,
}


def error_class_for(error_code: int, http_status_code: int) -> type[SchemaRegistryError]:
    """Return the most specific error class for a code (falling back on the HTTP status)."""
    cls = _BY_CODE.get(error_code)
    if cls is None and http_status_code == 409:
        cls = IncompatibleSchemaError
    return cls or SchemaRegistryError


def error_from_response(http_status_code: int, body: Any) -> SchemaRegistryError:
    """Build the error for a failed registry response.

    Args:
        http_status_code: the response status.
        body: the decoded JSON body (``{"error_code": ..., "message": ...}``), or raw text /
            ``None`` when the body was not JSON.

    Returns:
        An instance of the most specific :class:`SchemaRegistryError` subclass.
    """
    if isinstance(body, dict) and "error_code" in body:
        try:
            code = int(body["error_code"])
        except (TypeError, ValueError):
            code = SchemaRegistryError.UNKNOWN
        message = str(body.get("message", ""))
    else:
        code = SchemaRegistryError.UNKNOWN
        text = "" if body is None else str(body)
        message = f"Unknown Schema Registry error: {text[:500]}"
    return error_class_for(code, http_status_code)(http_status_code, code, message)
